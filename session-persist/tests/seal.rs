//! Sealing a JSONL log: one Zstandard frame per turn, crash-safe, events unchanged.
#![allow(clippy::case_sensitive_file_extension_comparisons)]
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use common::{
    EIO, FaultFs, Op, TempDir, copy_file, copy_tree, corpus, ev, meta, open, rt, texts, turn,
};
use session_core::json::Value;
use session_core::{Event, SessionHeader};
use session_persist::jsonl::layout::log_path;
use session_persist::jsonl::{scan_zstd_frames, to_header_line};
use session_persist::{Backend, Compression, Error, JsonlBackend, JsonlConfig};

/// A title event, then three turns.
fn session_events() -> Vec<Event> {
    let mut events = vec![ev("session/title", 0, r#"{"title":"t"}"#)];
    for n in 1..=3 {
        events.extend(turn(n, 1 + (n - 1) * 5));
    }
    events
}

/// Writes `events` in batches of at most two events (as a write-behind writer would), then
/// releases the writer lock.
fn write_small_batches(backend: &JsonlBackend, m: &SessionHeader, events: &[Event]) -> PathBuf {
    let rt = rt();
    for (i, batch) in events.chunks(2).enumerate() {
        rt.block_on(backend.append_batch(m, batch, i > 0)).unwrap();
    }
    rt.block_on(backend.release(&m.id)).unwrap();
    backend.log_path(m).unwrap()
}

/// Plaintext of every complete frame.
fn frame_texts(buf: &[u8]) -> Vec<String> {
    scan_zstd_frames(buf, None)
        .unwrap()
        .frames
        .iter()
        .map(|f| {
            String::from_utf8(zstd::stream::decode_all(&buf[f.start..f.end]).unwrap()).unwrap()
        })
        .collect()
}

fn first_frame(buf: &[u8]) -> Vec<u8> {
    let scan = scan_zstd_frames(buf, None).unwrap();
    buf[scan.frames[0].start..scan.frames[0].end].to_vec()
}

fn loaded(backend: &JsonlBackend, id: &str) -> Vec<String> {
    let stored = rt().block_on(backend.load_stored(id)).unwrap().unwrap();
    assert!(stored.torn.is_none());
    texts(&stored.events)
}

fn temp_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect()
}

#[test]
fn seal_rewrites_one_frame_per_turn_and_keeps_events() {
    let tmp = TempDir::new("seal-turns");
    let backend = open(&tmp.root());
    let m = meta("s");
    let events = session_events();
    let path = write_small_batches(&backend, &m, &events);
    let before = std::fs::read(&path).unwrap();
    let frames_before = frame_texts(&before).len();
    assert_eq!(frames_before, 1 + events.len().div_ceil(2));

    let report = rt().block_on(backend.seal("s")).unwrap();
    let after = std::fs::read(&path).unwrap();
    assert_eq!(report.bytes_before, before.len() as u64);
    assert_eq!(report.bytes_after, after.len() as u64);
    assert_eq!(report.frames_before, frames_before);
    assert_eq!(report.frames_after, 5);
    assert!(report.rewritten);

    // The header frame is byte-for-byte the original one.
    assert_eq!(first_frame(&after), first_frame(&before));
    let frames = frame_texts(&after);
    assert_eq!(frames.len(), 5);
    assert_eq!(frames[0], format!("{}\n", to_header_line(&m)));
    assert_eq!(frames[1], format!("{}\n", events[0].to_json()));
    for (n, frame) in frames[2..].iter().enumerate() {
        let first = 1 + n * 5;
        let expected = events[first..first + 5]
            .iter()
            .fold(String::new(), |mut out, e| {
                out.push_str(&e.to_json());
                out.push('\n');
                out
            });
        assert_eq!(frame, &expected, "turn {}", n + 1);
    }
    // A fresh instance (the reference-compatible reader) loads the same events.
    assert_eq!(loaded(&open(&tmp.root()), "s"), texts(&events));
    assert!(temp_files(path.parent().unwrap()).is_empty());
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&path).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);

    // Sealing again is a no-op that says so, and a writer can append to the sealed log
    // afterwards.
    let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
    let again = rt().block_on(backend.seal("s")).unwrap();
    assert_eq!((again.frames_before, again.frames_after), (5, 5));
    assert_eq!(
        (again.bytes_before, again.bytes_after),
        (after.len() as u64, after.len() as u64)
    );
    assert!(!again.rewritten);
    assert_eq!(std::fs::read(&path).unwrap(), after);
    assert_eq!(std::fs::metadata(&path).unwrap().modified().unwrap(), mtime);
    assert!(temp_files(path.parent().unwrap()).is_empty());
    let more = turn(4, 16);
    rt().block_on(backend.append_batch(&m, &more, true))
        .unwrap();
    let mut all = events.clone();
    all.extend(more);
    assert_eq!(loaded(&open(&tmp.root()), "s"), texts(&all));
}

#[test]
fn seal_without_turns_or_events() {
    let tmp = TempDir::new("seal-noturn");
    let backend = open(&tmp.root());
    let m = meta("s");
    let events = vec![
        ev("session/title", 0, r#"{"title":"a"}"#),
        ev("session/title", 1, r#"{"title":"b"}"#),
        ev("session/title", 2, r#"{"title":"c"}"#),
    ];
    let path = write_small_batches(&backend, &m, &events);
    let report = rt().block_on(backend.seal("s")).unwrap();
    assert_eq!((report.frames_before, report.frames_after), (3, 2));
    assert_eq!(frame_texts(&std::fs::read(&path).unwrap()).len(), 2);
    assert_eq!(loaded(&backend, "s"), texts(&events));
}

#[test]
fn seal_refuses_an_open_turn() {
    let tmp = TempDir::new("seal-open");
    let backend = open(&tmp.root());
    let m = meta("s");
    let mut events = turn(1, 0);
    events.push(ev("turn/start", 5, r#"{"turn":2}"#));
    events.push(ev("user/message", 6, r#"{"text":"x"}"#));
    let path = write_small_batches(&backend, &m, &events);
    let before = std::fs::read(&path).unwrap();
    let err = rt().block_on(backend.seal("s")).unwrap_err();
    assert!(matches!(err, Error::SealRefused { .. }));
    assert_eq!(
        err.to_string(),
        "cannot seal session \"s\": turn 2 is open (seq 5)"
    );
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

#[test]
fn seal_refuses_a_torn_tail() {
    let tmp = TempDir::new("seal-torn");
    let backend = open(&tmp.root());
    let m = meta("s");
    let path = write_small_batches(&backend, &m, &turn(1, 0));
    let mut bytes = std::fs::read(&path).unwrap();
    let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
    enc.include_checksum(true).unwrap();
    std::io::Write::write_all(&mut enc, b"{\"type\":\"turn/start\"").unwrap();
    let frame = enc.finish().unwrap();
    bytes.extend_from_slice(&frame[..frame.len() - 3]);
    std::fs::write(&path, &bytes).unwrap();
    let err = rt().block_on(backend.seal("s")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot seal session \"s\": the log has a torn tail (load it to repair first)"
    );
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
}

#[test]
fn seal_refuses_a_locked_session() {
    let tmp = TempDir::new("seal-locked");
    let writer = open(&tmp.root());
    let m = meta("s");
    let events = turn(1, 0);
    let rt = rt();
    rt.block_on(writer.append_batch(&m, &events[..2], false))
        .unwrap();
    rt.block_on(writer.append_batch(&m, &events[2..], true))
        .unwrap();
    let path = writer.log_path(&m).unwrap();
    let before = std::fs::read(&path).unwrap();
    let locked = "session \"s\" is locked by another writer";
    // Another instance, and the writing instance itself, are both refused.
    let other = open(&tmp.root());
    let err = rt.block_on(other.seal("s")).unwrap_err();
    assert!(matches!(err, Error::Locked { .. }));
    assert_eq!(err.to_string(), locked);
    assert_eq!(
        rt.block_on(writer.seal("s")).unwrap_err().to_string(),
        locked
    );
    assert_eq!(std::fs::read(&path).unwrap(), before);
    // Once released, sealing proceeds.
    rt.block_on(writer.release("s")).unwrap();
    assert_eq!(rt.block_on(other.seal("s")).unwrap().frames_after, 2);
}

#[test]
fn seal_of_a_missing_session() {
    let tmp = TempDir::new("seal-missing");
    let backend = open(&tmp.root());
    assert_eq!(
        rt().block_on(backend.seal("nope")).unwrap_err().to_string(),
        "session \"nope\" not found"
    );
}

#[test]
fn seal_of_a_plain_log_leaves_it_as_it_is() {
    let tmp = TempDir::new("seal-raw");
    let backend =
        JsonlBackend::open(JsonlConfig::new(tmp.root()).compression(Compression::None)).unwrap();
    let m = meta("s");
    let path = write_small_batches(&backend, &m, &session_events());
    let before = std::fs::read(&path).unwrap();
    let report = rt().block_on(backend.seal("s")).unwrap();
    assert!(!report.rewritten);
    assert_eq!(report.bytes_before, before.len() as u64);
    assert_eq!(report.bytes_after, before.len() as u64);
    assert_eq!((report.frames_before, report.frames_after), (0, 0));
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

/// A seal on a log of small batches that `arm` makes fail and `refused` checks the error of:
/// the original stays byte for byte, no temporary file is left and the log loads as before;
/// with the fault cleared, the seal succeeds. Returns the root, for further checks.
fn refused_seal(tag: &str, arm: impl FnOnce(&FaultFs), refused: impl FnOnce(&Error)) -> TempDir {
    let tmp = TempDir::new(tag);
    let fs = FaultFs::new();
    let backend =
        JsonlBackend::open_with_fs(JsonlConfig::new(tmp.root()), Arc::new(fs.clone())).unwrap();
    let m = meta("s");
    let events = session_events();
    let path = write_small_batches(&backend, &m, &events);
    let before = std::fs::read(&path).unwrap();
    arm(&fs);
    let err = rt().block_on(backend.seal("s")).unwrap_err();
    refused(&err);
    assert_eq!(std::fs::read(&path).unwrap(), before, "original untouched");
    assert!(temp_files(path.parent().unwrap()).is_empty());
    assert_eq!(loaded(&backend, "s"), texts(&events));
    // Without the fault, sealing succeeds.
    fs.clear();
    assert_eq!(rt().block_on(backend.seal("s")).unwrap().frames_after, 5);
    assert_eq!(loaded(&backend, "s"), texts(&events));
    tmp
}

fn crash_case(op: Op, needle: &str, tag: &str) {
    refused_seal(
        tag,
        |fs| fs.fail_next(op, needle, EIO),
        |err| assert_eq!(err.code(), Some("EIO"), "{err}"),
    );
}

#[test]
fn seal_is_crash_safe_when_rename_fails() {
    crash_case(Op::Rename, ".tmp", "seal-rename");
}

#[test]
fn seal_is_crash_safe_when_fsync_fails() {
    crash_case(Op::Sync, ".tmp", "seal-fsync");
}

#[test]
fn seal_is_crash_safe_when_write_fails() {
    crash_case(Op::Write, ".tmp", "seal-write");
}

#[test]
fn seal_is_crash_safe_when_the_temporary_file_cannot_be_created() {
    crash_case(Op::CreateNew, ".tmp", "seal-create");
}

#[test]
fn seal_is_crash_safe_when_the_copy_cannot_be_reopened_for_verification() {
    crash_case(Op::OpenRead, ".tmp", "seal-reopen");
}

#[test]
fn seal_is_crash_safe_when_reading_the_copy_back_fails() {
    crash_case(Op::Read, ".tmp", "seal-reread");
}

/// Seals every log of `root` and checks the outcome: a sealed log loads (through a fresh
/// instance) to the same header and events; a refused one is left untouched. Returns
/// `(sealed, refused)`.
fn seal_all(root: &Path, origin: &Path) -> (usize, usize) {
    let rt = rt();
    let (mut sealed, mut refused) = (0, 0);
    let Ok(backend) = JsonlBackend::open(JsonlConfig::new(root)) else {
        return (0, 0);
    };
    let Ok(metas) = rt.block_on(backend.list()) else {
        return (0, 0);
    };
    for meta in metas {
        let id = meta.id.to_string();
        let path = backend.log_path(&meta).unwrap();
        let before_bytes = std::fs::read(&path).ok();
        let before = rt.block_on(backend.load_stored(&id));
        match rt.block_on(backend.seal(&id)) {
            Ok(report) => {
                sealed += 1;
                let before = before.unwrap().unwrap();
                let after = rt.block_on(open(root).load_stored(&id)).unwrap().unwrap();
                let at = origin.display();
                assert_eq!(texts(&after.events), texts(&before.events), "{at}");
                assert_eq!(after.header_value.to_json(), before.header_value.to_json());
                assert!(after.torn.is_none() && before.torn.is_none(), "{at}");
                assert_eq!(
                    report.bytes_after,
                    std::fs::read(&path).unwrap().len() as u64
                );
                assert!(temp_files(path.parent().unwrap()).is_empty());
            }
            Err(e) => {
                refused += 1;
                let at = origin.display();
                assert_eq!(std::fs::read(&path).ok(), before_bytes, "{at}");
                // Only logs that cannot be sealed are refused.
                let sealable = before
                    .ok()
                    .flatten()
                    .is_some_and(|p| p.torn.is_none() && p.invalid_envelope.is_none());
                assert!(
                    !sealable || matches!(e, Error::SealRefused { .. }),
                    "{at}: {e}"
                );
            }
        }
    }
    (sealed, refused)
}

/// Every Zstandard log of the golden corpus, copied into a backend root: each sealable log seals
/// and loads to the same events; every other log is refused and left untouched.
#[test]
fn seal_golden_corpus_logs() {
    let Some(corpus) = corpus() else { return };
    let mut files: Vec<PathBuf> = Vec::new();
    for dir in corpus.logs().into_iter().chain(corpus.negative_cases()) {
        collect_zstd_logs(&dir, &mut files);
    }
    files.sort();
    assert!(files.len() > 100, "{}", files.len());
    let (mut sealed, mut refused) = (0, 0);
    for (n, file) in files.iter().enumerate() {
        let tmp = TempDir::new(&format!("seal-corpus-{n}"));
        let root = tmp.root();
        if file.components().any(|c| c.as_os_str() == "negative") {
            // Negative cases already hold a backend root.
            let Some(src) = file.ancestors().nth(3) else {
                continue;
            };
            copy_tree(src, &root);
        } else {
            let bytes = std::fs::read(file).unwrap();
            let header = frame_texts(&bytes).into_iter().next().unwrap();
            let header = Value::parse(header.trim_end()).unwrap();
            let id = header.get("id").and_then(Value::as_str).unwrap().to_owned();
            let cwd = header.get("cwd").and_then(Value::as_str).map(str::to_owned);
            let path = log_path(&root, cwd.as_deref(), &id, Compression::Zstd).unwrap();
            copy_file(file, &path);
        }
        let (s, r) = seal_all(&root, file);
        sealed += s;
        refused += r;
    }
    assert!(sealed > 100, "sealed {sealed}, refused {refused}");
    assert!(refused > 10, "sealed {sealed}, refused {refused}");
}

/// Every `session.jsonl.zstd` below `dir`.
fn collect_zstd_logs(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_zstd_logs(&path, out);
        } else if path.file_name().is_some_and(|n| n == "session.jsonl.zstd") {
            out.push(path);
        }
    }
}

/// One checksummed frame of `text`.
fn frame(text: &str) -> Vec<u8> {
    let mut enc = zstd::stream::Encoder::new(Vec::new(), 3).unwrap();
    enc.include_checksum(true).unwrap();
    std::io::Write::write_all(&mut enc, text.as_bytes()).unwrap();
    enc.finish().unwrap()
}

#[test]
fn seal_refuses_a_header_frame_shared_with_events() {
    let tmp = TempDir::new("seal-shared-header");
    let backend = open(&tmp.root());
    let m = meta("s");
    let events = session_events();
    let path = write_small_batches(&backend, &m, &events);
    // The header line and the first events in one frame: the reader refuses such a log, and
    // so does seal, leaving the file as it is.
    let mut first = format!("{}\n", to_header_line(&m));
    for e in &events[..3] {
        first.push_str(&e.to_json());
        first.push('\n');
    }
    let mut bytes = frame(&first);
    for e in &events[3..] {
        bytes.extend(frame(&format!("{}\n", e.to_json())));
    }
    std::fs::write(&path, &bytes).unwrap();
    let err = rt().block_on(backend.load_stored("s")).unwrap_err();
    assert!(matches!(err, Error::ZstdHeaderFrameLines), "{err:?}");
    let err = rt().block_on(backend.seal("s")).unwrap_err();
    assert!(matches!(err, Error::ZstdHeaderFrameLines), "{err:?}");
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
    assert!(temp_files(path.parent().unwrap()).is_empty());
}

#[test]
fn seal_refuses_a_copy_with_one_altered_event() {
    // Right before the copy is read back, one event of turn 2 is changed in it: the frame is
    // re-encoded with a valid checksum and the log still loads, with the same event count.
    let altered = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = altered.clone();
    let arm = move |fs: &FaultFs| {
        fs.on(Op::OpenRead, move |p: &Path| {
            if !p.to_string_lossy().ends_with(".tmp") || flag.swap(true, Ordering::SeqCst) {
                return;
            }
            let bytes = std::fs::read(p).unwrap();
            let mut texts = frame_texts(&bytes);
            assert_eq!(texts.len(), 5);
            assert!(texts[3].contains(r#""text":"hi""#), "{}", texts[3]);
            texts[3] = texts[3].replacen(r#""text":"hi""#, r#""text":"ho""#, 1);
            let mut out = first_frame(&bytes);
            for text in &texts[1..] {
                out.extend(frame(text));
            }
            std::fs::write(p, out).unwrap();
        });
    };
    let tmp = refused_seal("seal-altered", arm, |err| {
        assert!(altered.load(Ordering::SeqCst), "the copy was read back");
        assert!(
            matches!(err, Error::SealRefused { reason, .. } if reason == "the sealed copy differs: events"),
            "{err:?}"
        );
    });
    // Left alone, the same copy verified and replaced the log.
    assert_eq!(loaded(&open(&tmp.root()), "s"), texts(&session_events()));
}
