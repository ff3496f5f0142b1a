//! The bodies of the fuzz targets under `fuzz/` (`cargo fuzz run <name>`), as plain functions
//! so that the committed corpora are also replayed by `cargo test` on a stable toolchain
//! (`conformance/tests/fuzz_corpora.rs`).
//!
//! Every target takes arbitrary bytes and must not panic: bad input is a typed error of the
//! owning crate. Where it is cheap, a target also checks an invariant on success (a round trip
//! that must reproduce its input, two decoding paths that must agree) and panics with a
//! message naming the violated invariant when it does not hold; a panic is what the fuzzer
//! reports as a finding.
//!
//! ```
//! use conformance::fuzz_targets::{self, TARGETS};
//!
//! fuzz_targets::jsonl_line(br#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#);
//! assert_eq!(TARGETS.len(), 8);
//! ```

mod import;

pub use import::{import_claude_code, import_codex};

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use session_core::chunk_rows::{
    self, Decoded, LineRecord, PackedRow, StorageDecoder, StorageRecord,
};
use session_core::json::{self, Value};
use session_core::{Event, FixedClock, SessionHeader, SharedClock};
use session_persist::jsonl::layout::log_path;
use session_persist::jsonl::{FrameScan, scan_zstd_frames, to_header_line};
use session_persist::{Backend, Compression, JsonlBackend, JsonlConfig, StoredPrefix, TornMarker};
use session_surface::{Draft, Session, fold_events};

use crate::crash_model::CrashStorage;

/// A fuzz target: consumes one input, panics only on a finding.
pub type Target = fn(&[u8]);

/// Every target, by the name of its `fuzz/fuzz_targets/<name>.rs` binary and corpus directory
/// `fuzz/corpus/<name>/`.
pub const TARGETS: [(&str, Target); 8] = [
    ("jsonl_line", jsonl_line),
    ("zstd_frames", zstd_frames),
    ("packed_rows", packed_rows),
    ("header", header),
    ("seed", seed),
    ("replace", replace),
    ("import_codex", import_codex),
    ("import_claude_code", import_claude_code),
];

/// The root of the in-memory backend the storage targets read through.
const ROOT: &str = "/fuzz-root";

/// The session id of the logs the storage targets build.
const SESSION_ID: &str = "fz";

/// The header line of the plain logs [`jsonl_line`] builds.
const HEADER_LINE: &str =
    r#"{"type":"session","version":0,"id":"fz","createdAt":1,"delegationDepth":0}"#;

/// The JSONL line scanner: `data` is split at `\n` and every line is decoded by one
/// [`StorageDecoder`] (fast paths included), which must agree, line by line and event by
/// event, with the general path (`JSON.parse`, then [`PackedRow::from_value`], then
/// [`Event::from_value`]). Then `data` is the body of a plain log (after a valid header) read
/// by the JSONL backend, whose prefix must be contiguous from seq 0.
pub fn jsonl_line(data: &[u8]) {
    let mut decoder = StorageDecoder::new();
    for (n, line) in data.split(|&b| b == b'\n').enumerate() {
        let got = decoder.decode_line(line);
        let want = general_decode(line);
        let got_events = decoder.take_events();
        match (&got, &want) {
            (LineRecord::NotJson(a), General::NotJson(b)) => {
                assert_eq!(a, b, "line {n}: the parse errors differ");
            }
            (LineRecord::MalformedRow(a), General::MalformedRow(b)) => {
                assert_eq!(a.to_string(), *b, "line {n}: the row errors differ");
            }
            (LineRecord::Invalid(a), General::Invalid(b)) => {
                assert_eq!(
                    a.to_json(),
                    b.to_json(),
                    "line {n}: the invalid records differ"
                );
            }
            (LineRecord::Event | LineRecord::Chunks { .. }, General::Events(events)) => {
                if let LineRecord::Chunks { seq0, count } = got {
                    assert_eq!(count, events.len(), "line {n}: member count");
                    if let Some(first) = events.first() {
                        assert_eq!(seq0, first.seq(), "line {n}: seq0");
                    }
                } else {
                    assert_eq!(events.len(), 1, "line {n}: one event");
                }
                assert_same_events(&got_events, events, n);
                continue;
            }
            _ => panic!("line {n}: the decoder says {got:?}, the general path {want:?}"),
        }
        assert!(
            got_events.is_empty(),
            "line {n}: a refused line pushed events"
        );
    }

    let mut log = Vec::with_capacity(HEADER_LINE.len() + 1 + data.len());
    log.extend_from_slice(HEADER_LINE.as_bytes());
    log.push(b'\n');
    log.extend_from_slice(data);
    let _ = read_log(&log, Compression::None);
}

/// What the general decoding path makes of one line.
#[derive(Debug)]
enum General {
    NotJson(json::ParseError),
    MalformedRow(String),
    Invalid(Value),
    Events(Vec<Event>),
}

/// `JSON.parse` (invalid UTF-8 replaced), then `decodeStorageRecord`, then the envelope.
fn general_decode(line: &[u8]) -> General {
    let text = String::from_utf8_lossy(line);
    let value = match json::parse(&text) {
        Ok(v) => v,
        Err(e) => return General::NotJson(e),
    };
    match chunk_rows::decode_storage_record(value) {
        Err(e) => General::MalformedRow(e.to_string()),
        Ok(Decoded::Expanded(events)) => General::Events(events),
        Ok(Decoded::Passthrough(value)) => match Event::from_value(&value) {
            Ok(event) => General::Events(vec![event]),
            Err(_) => General::Invalid(value),
        },
    }
}

fn assert_same_events(got: &[Event], want: &[Event], line: usize) {
    assert_eq!(got.len(), want.len(), "line {line}: event count");
    for (a, b) in got.iter().zip(want) {
        assert_eq!(a.to_json(), b.to_json(), "line {line}: the events differ");
        assert!(a == b, "line {line}: the events are not equal");
    }
}

/// The zstd frame scanner: [`scan_zstd_frames`] must describe contiguous frames inside the
/// buffer (and a frame limit must give a prefix of the full scan); then `data` is read as a
/// `session.jsonl.zstd` by the JSONL backend (frame scan, decompression, checksums, the line
/// scanner), once at the path its own header names (when it names one) and once at a fixed
/// path, and as a raw artifact.
pub fn zstd_frames(data: &[u8]) {
    if let Ok(scan) = scan_zstd_frames(data, None) {
        check_frame_scan(&scan, data.len());
        if scan.frames.len() > 1 {
            let limited = scan_zstd_frames(data, Some(1));
            if let Ok(limited) = limited {
                assert!(limited.frames.len() <= 1, "the frame limit was ignored");
                assert_eq!(
                    limited.frames.first(),
                    scan.frames.first(),
                    "a limited scan is not a prefix of the full scan"
                );
            }
        }
    }
    let _ = read_log(data, Compression::Zstd);
}

fn check_frame_scan(scan: &FrameScan, len: usize) {
    let mut at = 0;
    for frame in &scan.frames {
        assert_eq!(frame.start, at, "frames are not contiguous");
        assert!(frame.start < frame.end, "an empty frame");
        assert!(frame.end <= len, "a frame ends past the buffer");
        at = frame.end;
    }
    if let Some(torn) = scan.torn_start {
        assert_eq!(
            torn, at,
            "the torn region does not start after the last frame"
        );
        assert!(torn < len, "an empty torn region");
    } else {
        assert_eq!(
            at, len,
            "bytes after the last frame are neither a frame nor torn"
        );
    }
}

/// Reads `data` as a log of `compression` through the backend: first at a fixed path (the whole
/// log is read, then the identity check refuses a foreign header), then, when listing names the
/// path its header belongs at, from there. Returns the prefix read at the header's own path.
fn read_log(data: &[u8], compression: Compression) -> Option<StoredPrefix> {
    let fixed = log_path(Path::new(ROOT), None, SESSION_ID, compression).ok()?;
    let (loaded, listed) = read_at(data, &fixed, compression, SESSION_ID);
    let loaded = settle(loaded, data.len());
    if loaded.is_some() {
        return loaded;
    }
    let Err(session_persist::Error::IdentityPath {
        header_id,
        expected,
        ..
    }) = listed
    else {
        return None;
    };
    let (loaded, _) = read_at(data, &expected, compression, &header_id);
    settle(loaded, data.len())
}

/// A load's prefix, checked; errors are formatted (they must format) and dropped.
fn settle(
    loaded: session_persist::Result<Option<StoredPrefix>>,
    file_len: usize,
) -> Option<StoredPrefix> {
    match loaded {
        Ok(prefix) => {
            if let Some(prefix) = &prefix {
                check_prefix(prefix, file_len);
            }
            prefix
        }
        Err(e) => {
            let _ = e.to_string();
            None
        }
    }
}

/// The packed-row decoder: `data` is parsed as JSON and decoded with
/// [`PackedRow::from_value`]. A decoded row must expand to `member_count` contiguous
/// `assistant/chunk` events; its value must decode to an equal row; re-packing its events must
/// expand to the same events, and when they form one packable run, must give back the row
/// the row itself (equal `data`, when the input's `data` keys are in the writer's order).
pub fn packed_rows(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let Ok(value) = json::parse(&text) else {
        return;
    };
    let Ok(Some(row)) = PackedRow::from_value(&value) else {
        let direct = chunk_rows::decode_storage_record(value);
        assert!(
            !matches!(direct, Ok(Decoded::Expanded(_))),
            "decode_storage_record expanded what from_value refused"
        );
        return;
    };
    let events = row.expand();
    assert_eq!(events.len(), row.member_count(), "member count");
    for (k, event) in events.iter().enumerate() {
        assert_eq!(event.seq(), row.seq0() + k as u64, "member seqs");
        assert_eq!(
            event.event_type(),
            chunk_rows::CHUNK_EVENT_TYPE,
            "member type"
        );
    }
    assert_eq!(
        row.last_seq(),
        row.seq0() + events.len().saturating_sub(1) as u64
    );
    // The row's own value and JSON decode to an equal row.
    let again = PackedRow::from_value(&row.to_value());
    assert!(
        matches!(&again, Ok(Some(r)) if *r == row),
        "to_value does not decode to the same row: {again:?}"
    );
    let from_json = json::parse(&row.to_json()).map(|v| PackedRow::from_value(&v));
    assert!(
        matches!(&from_json, Ok(Ok(Some(r))) if *r == row),
        "to_json does not decode to the same row"
    );
    // Re-packing.
    let repacked = chunk_rows::pack_chunk_runs(&events);
    let mut expanded = Vec::with_capacity(events.len());
    for record in &repacked {
        match record {
            StorageRecord::Event(event) => expanded.push(event.clone()),
            StorageRecord::Row(r) => expanded.extend(r.expand()),
        }
    }
    assert_same_events(&expanded, &events, 0);
    // One run re-packs into one row: the same row, unless the input's `data` keys were in
    // another order than the writer's.
    if let [StorageRecord::Row(single)] = repacked.as_slice()
        && keys(single.data()) == keys(row.data())
    {
        assert_eq!(*single, row, "re-packing changed the row");
    }
}

fn keys(v: &Value) -> Vec<&str> {
    v.as_object()
        .map(|o| o.entries().iter().map(|(k, _)| &**k).collect())
        .unwrap_or_default()
}

/// Header parsing: `data` is parsed as a header record by [`SessionHeader::from_value`] (a
/// valid header must survive `to_value`), and as the first line of a plain log read by the JSONL
/// backend (load, list and raw read); a header the backend accepts must be written back by
/// [`to_header_line`] as a line the backend reads to the same header.
pub fn header(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Ok(value) = json::parse(&text)
        && let Some(id) = value.get("id").and_then(Value::as_str)
        && let Ok(parsed) = SessionHeader::from_value(&value, id)
    {
        let again = SessionHeader::from_value(&parsed.to_value(), id);
        assert_eq!(again.as_ref().ok(), Some(&parsed), "to_value round trip");
    }
    let mut log = data.to_vec();
    log.push(b'\n');
    let Some(prefix) = read_log(&log, Compression::None) else {
        return;
    };
    let meta = prefix.meta;
    let line = to_header_line(&meta);
    let mut rewritten = line.clone().into_bytes();
    rewritten.push(b'\n');
    let Some(back) = read_log(&rewritten, Compression::None) else {
        panic!("the written header line {line} does not load");
    };
    let mut expected = meta.clone();
    expected.extra.clear();
    // Stored fields the typed header cannot express are not written back.
    expected.stored = None;
    expected.delegation_depth = Some(meta.delegation_depth.unwrap_or(0));
    assert_eq!(back.meta, expected, "to_header_line round trip of {line}");
}

/// Seed validation: `data` is parsed as JSON (an array is the seed, anything else a one-entry
/// seed) and seeds a session in snapshot mode ([`Session::create`]) and in restore mode
/// ([`Session::from_restore`]). When every entry is an event, the event-based constructors
/// ([`Session::create_from_events`], [`Session::from_restore_events`]) must agree with the
/// value-based ones: the same events, or the same error (compared only when every entry reads
/// as an event that serializes back to the entry's exact JSON, and, for snapshot mode, only when
/// every entry is appendable: a seed of events is stored data, exempt from the append JSON
/// rules). A seeded session's events must
/// re-seed to themselves.
pub fn seed(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let Ok(value) = json::parse(&text) else {
        return;
    };
    let values: Vec<Value> = match value.as_array() {
        Some(items) => items.iter().cloned().collect(),
        None => vec![value],
    };
    // Only entries that read losslessly as events: an envelope number such as `"time":-0`
    // reads as the event time 0, which the value path refuses as not losslessly serializable.
    let events: Option<Vec<Event>> = values
        .iter()
        .map(|v| {
            Event::from_value(v)
                .ok()
                .filter(|e| e.to_json() == v.to_json())
        })
        .collect();
    let header = Value::object([
        ("version", Value::from(0u8)),
        ("id", Value::from(SESSION_ID)),
        ("createdAt", Value::from(1u8)),
    ]);

    let appendable = values.iter().all(json::is_appendable);
    let snapshot = Session::create(SESSION_ID, Some(values.clone()), None, clock());
    let restored = Session::from_restore(SESSION_ID, values, &header, clock());
    if let Some(events) = events {
        // A seed of values is new data and follows the append JSON rules; a seed of events is
        // stored data and does not (`-0`, non-finite numbers and unsafe integers are kept), so
        // the two agree only on values that a live append accepts.
        if appendable {
            let by_events =
                Session::create_from_events(SESSION_ID, Some(events.clone().into()), None, clock());
            assert_same_outcome(&snapshot, &by_events, "create / create_from_events");
        }
        let by_events = Session::from_restore_events(SESSION_ID, events, &header, clock());
        assert_same_outcome(&restored, &by_events, "from_restore / from_restore_events");
    }
    for session in [snapshot, restored].into_iter().flatten() {
        check_session(&session);
        let values: Vec<Value> = session.events().iter().map(Event::to_value).collect();
        let again = Session::from_restore(SESSION_ID, values, &header, clock());
        match again {
            Ok(again) => assert_eq!(
                event_lines(&again),
                event_lines(&session),
                "a seeded session does not re-seed to itself"
            ),
            Err(e) => panic!("a seeded session's events are refused as a seed: {e}"),
        }
    }
}

fn assert_same_outcome(
    a: &session_surface::Result<Session>,
    b: &session_surface::Result<Session>,
    what: &str,
) {
    match (a, b) {
        (Ok(a), Ok(b)) => assert_eq!(event_lines(a), event_lines(b), "{what}: events"),
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{what}: errors"),
        (Ok(_), Err(e)) => panic!("{what}: only the second refuses: {e}"),
        (Err(e), Ok(_)) => panic!("{what}: only the first refuses: {e}"),
    }
}

fn event_lines(session: &Session) -> Vec<String> {
    session.events().iter().map(Event::to_json).collect()
}

/// The surface of a session agrees with a fold of its log, and seqs are indexes.
fn check_session(session: &Session) {
    let events = session.events();
    for (i, event) in events.iter().enumerate() {
        assert_eq!(event.seq(), i as u64, "seq is not the index");
    }
    assert_eq!(session.seq(), events.len() as u64, "next seq");
    match fold_events(&events) {
        Ok(fold) => assert_eq!(
            fold.nodes,
            session.surface_nodes().to_vec(),
            "the live surface differs from a fold of the log"
        ),
        Err(e) => panic!("the log of a valid session does not fold: {e}"),
    }
}

/// Replace validation: one append with an arbitrary `surfaceOp` on a small fixed session.
/// `data` is JSON: an object with a `surfaceOp` key gives the draft's `type` (default
/// `user/message`), `data` (default a user message) and `sourceEventSeqs` (absent by default);
/// any other value is the `surfaceOp` itself. A refused append must change nothing; an accepted
/// one must leave a surface that a fold of the log reproduces, and a log that restores.
pub fn replace(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let Ok(value) = json::parse(&text) else {
        return;
    };
    let mut session = match fixed_session() {
        Ok(session) => session,
        Err(e) => panic!("the fixed session does not build: {e}"),
    };
    let draft = match value.get("surfaceOp") {
        Some(op) if value.as_object().is_some() => {
            let ty = value
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or("user/message");
            let data = value.get("data").cloned().unwrap_or_else(|| user("r"));
            let mut draft = Draft::new(ty, data).surface_op_value(op.clone());
            if let Some(sources) = value.get("sourceEventSeqs") {
                draft = draft.sources_value(sources.clone());
            }
            draft
        }
        _ => Draft::new("user/message", user("r")).surface_op_value(value),
    };
    let before = session.clone();
    match session.append(draft) {
        Err(_) => {
            assert_eq!(
                event_lines(&session),
                event_lines(&before),
                "a refused append changed the log"
            );
            assert_eq!(
                session.surface_nodes().to_vec(),
                before.surface_nodes().to_vec(),
                "a refused append changed the surface"
            );
            assert_eq!(session.replace_generation(), before.replace_generation());
        }
        Ok(event) => {
            assert_eq!(event.seq(), before.seq(), "the new event's seq");
            check_session(&session);
            let header = session.header().to_value();
            let restored =
                Session::from_restore_events(SESSION_ID, session.events(), &header, clock());
            match restored {
                Ok(restored) => assert_eq!(
                    restored.surface_nodes().to_vec(),
                    session.surface_nodes().to_vec(),
                    "a restore of the log has another surface"
                ),
                Err(e) => panic!("the log after an accepted replace does not restore: {e}"),
            }
        }
    }
}

fn user(id: &str) -> Value {
    Value::object([
        ("id", Value::from(id)),
        ("role", Value::from("user")),
        (
            "content",
            Value::array([Value::object([
                ("type", Value::from("text")),
                ("text", Value::from("x")),
            ])]),
        ),
        ("source", Value::object([("kind", Value::from("user"))])),
    ])
}

/// Seqs 0–4 on the surface (user, assistant, user, assistant, user), 5 a log-only event, 6 a
/// replace of 1..=2.
fn fixed_session() -> session_surface::Result<Session> {
    let mut s = Session::create(SESSION_ID, None, None, clock())?;
    let assistant = |id: &str| {
        json::parse(&format!(
            r#"{{"turn":1,"step":1,"message":{{"id":"{id}","role":"assistant","content":[{{"type":"text","text":"y"}}],"source":{{"kind":"model","provider":"p","model":"m"}}}}}}"#
        ))
        .unwrap_or_else(|e| panic!("the assistant message: {e}"))
    };
    s.append(Draft::new("user/message", user("u0")).append_op())?;
    s.append(Draft::new("assistant/message", assistant("a1")).append_op())?;
    s.append(Draft::new("user/message", user("u2")).append_op())?;
    s.append(Draft::new("assistant/message", assistant("a3")).append_op())?;
    s.append(Draft::new("user/message", user("u4")).append_op())?;
    s.append(Draft::new(
        "turn/start",
        Value::object([("turn", Value::from(1u8))]),
    ))?;
    s.append(
        Draft::new("user/message", user("c6"))
            .replace_op(1, 2)
            .sources(&[1, 2]),
    )?;
    Ok(s)
}

fn clock() -> SharedClock {
    Arc::new(FixedClock::new(1_000))
}

// ---- reading through the JSONL backend ----

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap_or_else(|e| panic!("a tokio runtime: {e}"))
    })
}

/// Stores `bytes` at `path` in a fresh in-memory root, then loads session `id` and lists the
/// root (the raw read must not panic either).
fn read_at(
    bytes: &[u8],
    path: &Path,
    compression: Compression,
    id: &str,
) -> (
    session_persist::Result<Option<StoredPrefix>>,
    session_persist::Result<Vec<SessionHeader>>,
) {
    let storage = CrashStorage::new();
    if let Err(e) = store(&storage, path, bytes) {
        panic!("storing {} in memory: {e}", path.display());
    }
    let backend = match JsonlBackend::open_with_fs(
        JsonlConfig::new(ROOT).compression(compression),
        storage.fs(),
    ) {
        Ok(backend) => backend,
        Err(e) => panic!("opening the in-memory root: {e}"),
    };
    runtime().block_on(async {
        let loaded = backend.load_stored(id).await;
        if let Err(e) = backend.read_raw(id).await {
            let _ = e.to_string();
        }
        let listed = backend.list().await;
        (loaded, listed)
    })
}

/// Writes `bytes` as a new file at `path`, creating its directories.
fn store(storage: &CrashStorage, path: &Path, bytes: &[u8]) -> io::Result<()> {
    let fs = storage.fs();
    let mut dirs: Vec<PathBuf> = path.ancestors().skip(1).map(Path::to_path_buf).collect();
    dirs.reverse();
    for dir in dirs {
        if fs.stat(&dir).is_err() {
            fs.create_dir(&dir, 0o700)?;
        }
    }
    let mut file = fs.create_new(path, 0o600)?;
    let mut rest = bytes;
    while !rest.is_empty() {
        let n = file.write(rest)?;
        if n == 0 {
            return Err(io::Error::from(io::ErrorKind::WriteZero));
        }
        rest = &rest[n..];
    }
    file.sync()
}

/// A stored prefix is contiguous from seq 0 and its torn marker lies inside the file.
fn check_prefix(prefix: &StoredPrefix, file_len: usize) {
    for (i, event) in prefix.events.iter().enumerate() {
        assert_eq!(event.seq(), i as u64, "a stored prefix is not contiguous");
    }
    if let Some((index, _)) = &prefix.invalid_envelope {
        assert_eq!(
            *index,
            prefix.events.len(),
            "the invalid envelope is not next"
        );
    }
    if let Some(TornMarker::Truncate {
        truncate_to,
        recovered,
    }) = &prefix.torn
    {
        assert!(
            *truncate_to <= file_len as u64,
            "the torn marker cuts past the end of the file"
        );
        for event in recovered {
            assert!(
                prefix.events.iter().any(|e| e == event),
                "a recovered event is not in the prefix"
            );
        }
    }
}
