//! `convert`: copies a session into another store or encoding, in the batches a live loop
//! writes, and verifies the copy by reading it back.

use std::path::{Path, PathBuf};

use session_core::json::Value;
use session_core::{Event, Events, SessionHeader};
use session_persist::{Compression, LogStream};

use crate::args::Invocation;
use crate::args::{Database, StoreSpec, parse_store_spec};
use crate::cmd_read::open_target;
use crate::cmd_write::{live_batches, schema};
use crate::error::{Error, Location, Result};
use crate::json::{num, obj, opt_str};
use crate::output::{Out, bytes, plural};
use crate::progress::with_spinner;
use crate::store::{Store, StoreAt, detect_root_compression, find_files};

fn parse_to(text: &str) -> Result<Compression> {
    match text {
        "zstd" => Ok(Compression::Zstd),
        "none" => Ok(Compression::None),
        other => Err(Error::usage(format!(
            "--to expects zstd or none, got \"{other}\""
        ))),
    }
}

/// Whether the file at `path` is a `SQLite` database (by its 16-byte header).
fn is_sqlite_file(path: &Path) -> bool {
    let mut head = [0u8; 16];
    std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head))
        .is_ok()
        && &head == b"SQLite format 3\0"
}

/// The store `convert` writes to: DEST as a store spec (`sqlite:PATH`, `jsonl:DIR`), an
/// existing `SQLite` database file, or a JSONL root directory.
fn convert_dest(text: &str, source: &StoreAt, to: Option<Compression>) -> Result<StoreAt> {
    let spec = match parse_store_spec("DEST", text) {
        Some(spec) => spec?,
        None if Path::new(text).is_file() && is_sqlite_file(Path::new(text)) => {
            StoreSpec::Database(Database::Sqlite(PathBuf::from(text)))
        }
        None => StoreSpec::Jsonl(PathBuf::from(text)),
    };
    let absolute = |p: PathBuf| std::path::absolute(&p).unwrap_or(p);
    match spec {
        StoreSpec::Database(_) if to.is_some() => Err(Error::usage(
            "--to chooses the encoding of a JSONL DEST; a database DEST takes none",
        )),
        StoreSpec::Database(Database::Sqlite(path)) => Ok(StoreAt::Sqlite {
            path: absolute(path),
        }),
        StoreSpec::Database(Database::Postgres(url)) => Ok(StoreAt::Postgres {
            url,
            take_over: false,
        }),
        StoreSpec::Jsonl(root) => {
            let root = absolute(root);
            // The root, or the first existing directory on its way, must be a directory:
            // name the file in the way rather than report ENOTDIR from deep inside a write.
            if let Some(blocker) = root.ancestors().find(|p| p.exists())
                && !blocker.is_dir()
            {
                return Err(Error::failed_at(
                    format!(
                        "DEST {} is not a directory: {} is a file",
                        root.display(),
                        blocker.display()
                    ),
                    Some(
                        "DEST is a JSONL root directory (created when missing), jsonl:DIR, \
                         sqlite:PATH (a database file) or postgres://…"
                            .into(),
                    ),
                    Location {
                        file: Some(blocker.to_path_buf()),
                        ..Location::default()
                    },
                ));
            }
            let compression = to.unwrap_or_else(|| match source.compression() {
                Some(c) => c.opposite(),
                None => detect_root_compression(&root),
            });
            Ok(StoreAt::Jsonl { root, compression })
        }
    }
}

/// The header compared across stores: a JSONL log always records a `delegationDepth` (0
/// when absent), a database keeps its absence.
fn comparable_header(meta: &SessionHeader) -> SessionHeader {
    let mut meta = meta.clone();
    meta.delegation_depth.get_or_insert(0);
    meta
}

/// A 128-bit fingerprint of a byte stream (two salted `SipHash` passes), fed in pieces: how
/// `convert` compares two logical texts without holding either.
struct Fingerprint(std::hash::DefaultHasher, std::hash::DefaultHasher);

impl Fingerprint {
    fn new() -> Fingerprint {
        use std::hash::Hasher as _;
        let mut a = std::hash::DefaultHasher::new();
        let mut b = std::hash::DefaultHasher::new();
        a.write_u8(0);
        b.write_u8(1);
        Fingerprint(a, b)
    }

    fn update(&mut self, bytes: &[u8]) {
        use std::hash::Hasher as _;
        self.0.write(bytes);
        self.1.write(bytes);
    }

    fn finish(&self) -> (u64, u64) {
        use std::hash::Hasher as _;
        (self.0.finish(), self.1.finish())
    }
}

/// The fingerprint of a JSONL log's logical text, read as a stream (a `.zstd` file decoded
/// as it is read); `None` when it cannot be read.
fn log_text_print(path: &Path) -> Option<(u64, u64)> {
    let file = std::fs::File::open(path).ok()?;
    let mut reader: Box<dyn std::io::Read> = if path.extension().is_some_and(|e| e == "zstd") {
        Box::new(zstd::stream::read::Decoder::new(file).ok()?)
    } else {
        Box::new(file)
    };
    let mut f = Fingerprint::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                f.update(&buf[..n]);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    Some(f.finish())
}

/// How many events `convert` reads back at a time from the copy.
const READ_BACK_EVENTS: usize = 4096;

/// Which envelope key orders a copied event may be in and still verify.
#[derive(Clone, Copy, PartialEq, Eq)]
enum KeyOrders {
    /// The source's only: its JSON is byte-identical.
    Source,
    /// The source's or the live-append order (a database on either side: `SQLite` rows give
    /// events back in the live-append key order).
    SourceOrAppend,
}

/// A copy's header and events, fed in order, compared with the source's events: whether the
/// copy verifies (each event's JSON, or its live-append-order JSON when a database is on
/// either side, is the source's) and whether every event's JSON is identical.
struct CopyCheck<'a> {
    expected: &'a Events,
    key_order: KeyOrders,
    header: &'a SessionHeader,
    read: usize,
    header_same: bool,
    verified: bool,
    identical: bool,
}

impl<'a> CopyCheck<'a> {
    fn new(expected: &'a Events, key_order: KeyOrders, header: &'a SessionHeader) -> CopyCheck<'a> {
        CopyCheck {
            expected,
            key_order,
            header,
            read: 0,
            header_same: false,
            verified: true,
            identical: true,
        }
    }

    fn header(&mut self, copy: &SessionHeader) {
        self.header_same = comparable_header(copy) == *self.header;
    }

    fn feed(&mut self, events: &[Event]) {
        for event in events {
            let Some(source) = self.expected.get(self.read) else {
                self.verified = false;
                self.identical = false;
                return;
            };
            self.read += 1;
            let same = event.to_json() == source.to_json();
            self.identical &= same;
            self.verified &= same
                || (self.key_order == KeyOrders::SourceOrAppend
                    && event.in_append_order().to_json() == source.in_append_order().to_json());
        }
    }

    /// `(verified, identical)`.
    fn finish(&self) -> (bool, bool) {
        let same_length = self.read == self.expected.len();
        (
            self.verified && self.header_same && same_length,
            self.identical && same_length,
        )
    }
}

/// Feeds a stored copy of session `id` to `copy` a page of `page_events` events at a time
/// ([`session_persist::Backend::load_stored_page`]), so that the copy is never held whole.
/// `false` when the copy cannot verify whatever its events: it is missing, a torn tail
/// follows its prefix, or it changed between two pages (another revision).
async fn read_back_pages(
    backend: &dyn session_persist::Backend,
    id: &str,
    page_events: usize,
    copy: &mut CopyCheck<'_>,
) -> session_persist::Result<bool> {
    let mut revision = None;
    let mut from = 0u64;
    loop {
        let Some(page) = backend.load_stored_page(id, from, page_events).await? else {
            return Ok(false);
        };
        match &revision {
            None => {
                copy.header(&page.meta);
                revision = Some(page.revision);
            }
            Some(r) if *r != page.revision => return Ok(false),
            Some(_) => {}
        }
        copy.feed(&page.events);
        if page.torn {
            return Ok(false);
        }
        if page.events.len() < page_events.max(1) {
            return Ok(true);
        }
        from += page.events.len() as u64;
    }
}

/// What a session occupies in a store: its log file, or its rows.
fn stored_bytes(store: &Store, id: &str, file: Option<&Path>) -> u64 {
    if let Some(sqlite) = store.sqlite() {
        return store
            .block_on(sqlite.row_stats(id))
            .ok()
            .flatten()
            .map_or(0, |r| r.data_bytes + r.column_bytes);
    }
    file_bytes(file)
}

/// The length of a log file (0 when there is none).
fn file_bytes(file: Option<&Path>) -> u64 {
    file.and_then(|f| std::fs::metadata(f).ok())
        .map_or(0, |m| m.len())
}

/// `convert`.
pub(crate) fn convert(inv: &Invocation, out: &mut Out) -> Result<()> {
    let to = inv.value("--to").map(parse_to).transpose()?;
    let (target, store) = open_target(inv, inv.operand(0), true)?;
    let dest_at = convert_dest(inv.operand(1), &target.at, to)?;
    // A file read in place has no store of its own (its directory is not a root).
    if !target.outside && target.at.same_place(&dest_at) {
        if let StoreAt::Sqlite { .. } | StoreAt::Postgres { .. } = dest_at {
            return Err(Error::usage(
                "DEST is the session's own database; pass another store",
            ));
        }
        if target.at.compression() == dest_at.compression() {
            return Err(Error::usage(
                "DEST is the session's own store with the same encoding; pass another store or --to",
            ));
        }
        return Err(Error::failed(
            "a root holds one encoding; convert into another root".to_owned(),
            Some("pass a DEST directory other than the session's root".into()),
        ));
    }
    // Validate the whole log (the reference's read path) and take the stored events from the
    // same read: the inspection's events before the closers it adds in memory. The derived
    // state the read built is dropped at once; only the events are kept.
    let id = target.id.clone();
    let detailed = with_spinner(format!("reading {id}"), || {
        store.block_on(store.persistence.inspect_detailed(&id, None))
    })
    .map_err(|e| store.err(e, target.file.as_deref()))?;
    store.persistence.discard_prepared(&id);
    let session_persist::DetailedInspection {
        inspection,
        stored,
        torn,
        surface,
        messages,
        transcript,
    } = detailed;
    drop((surface, messages, transcript));
    let meta = inspection.meta;
    let events = inspection.events.prefix(stored);
    drop(inspection.events);
    let source_file = target.file.clone().or_else(|| store.log_file(&meta));
    let source_location = || Location {
        file: source_file.clone(),
        ..Location::default()
    };
    if torn.is_some() {
        return Err(Error::failed_at(
            format!(
                "session \"{id}\" has a torn tail; convert copies events unchanged and will not drop it"
            ),
            Some(match (&source_file, target.outside) {
                // `repair` writes, and refuses a file outside a store layout.
                (Some(file), true) => format!(
                    "`sessionctl repair {} --dry-run` shows what repair cuts; repair refuses a file outside a store layout, so copy it to <root>/<project>/{id}/ first and repair it there",
                    file.display()
                ),
                _ => format!(
                    "run `sessionctl {} repair {id}` first (or `sessionctl {} inspect {id}` to see what it cuts)",
                    target.at.option(),
                    target.at.option()
                ),
            }),
            source_location(),
        ));
    }
    if events.is_empty() {
        return Err(Error::failed_at(
            format!("session \"{id}\" has no events; a log is only written with its first batch"),
            None,
            source_location(),
        ));
    }
    let exists = |file: Option<PathBuf>| {
        Error::failed_at(
            format!("session \"{id}\" already exists in {}", dest_at.spec()),
            Some("choose another DEST, or remove that session first".into()),
            Location {
                file: file.or_else(|| dest_at.path().map(Path::to_path_buf)),
                ..Location::default()
            },
        )
    };
    match &dest_at {
        StoreAt::Jsonl { root, .. } => {
            if let Some((file, _)) = find_files(root, &id).first() {
                return Err(exists(Some(file.clone())));
            }
        }
        StoreAt::Postgres { .. } => {
            let probe = Store::open(&dest_at)?;
            let found = probe.lookup(&id)?;
            probe.close()?;
            if found.is_some() {
                return Err(exists(None));
            }
        }
        StoreAt::Sqlite { path } => {
            if path.exists() {
                let probe = Store::open(&dest_at)?;
                let found = probe.lookup(&id)?;
                probe.close()?;
                if found.is_some() {
                    return Err(exists(None));
                }
            }
        }
    }
    // The source store is closed once its events are read: its runtime and threads are not
    // kept while the copy is written and read back.
    let source_sqlite = store.sqlite().is_some();
    let source_jsonl = store.jsonl().is_some();
    store.close()?;
    let dest = Store::open(&dest_at)?;
    let event_count = events.len() as u64;
    // One publication of every batch: a crash leaves either no copy or all of it.
    let batches = live_batches(&events);
    let batch_count = batches.len() as u64;
    with_spinner(format!("writing {id} into {}", dest_at.spec()), || {
        if batches.is_empty() {
            return Ok(());
        }
        let events = events.to_vec();
        dest.block_on(dest.backend.publish_batches(&meta, events, &batches))
            .map_err(|e| dest.err(e, None))
    })?;
    let dest_file = dest.log_file(&meta);
    // SQLite rows give events back in the live-append key order.
    let fixed_order = source_sqlite || dest.sqlite().is_some();
    dest.close()?;
    let header = comparable_header(&meta);
    // Verify: a fresh backend reads back the same header and events, a bounded part of the
    // copy at a time, compared with the source's events as it is read.
    let check = Store::open(&dest_at)?;
    let (verified, events_identical) =
        with_spinner(format!("reading the copy of {id} back"), || {
            let key_order = if fixed_order {
                KeyOrders::SourceOrAppend
            } else {
                KeyOrders::Source
            };
            let mut copy = CopyCheck::new(&events, key_order, &header);
            if let (Some(_), Some(file)) = (check.jsonl(), dest_file.as_deref()) {
                // A JSONL copy is streamed back a batch at a time.
                let located = |e| check.err(e, Some(file));
                let mut stream = LogStream::open(file).map_err(located)?;
                copy.header(stream.header());
                while let Some(batch) = stream.next_batch(READ_BACK_EVENTS).map_err(located)? {
                    copy.feed(&batch);
                }
            } else {
                // A database copy is read back a page of rows at a time.
                let complete = check
                    .block_on(read_back_pages(
                        &*check.backend,
                        &id,
                        READ_BACK_EVENTS,
                        &mut copy,
                    ))
                    .map_err(|e| check.err(e, dest_file.as_deref()))?;
                if !complete {
                    return Ok((false, false));
                }
            }
            Ok::<_, Error>(copy.finish())
        })?;
    let databases = !source_jsonl || check.jsonl().is_none();
    drop(events);
    if !verified {
        return Err(Error::failed_at(
            format!("the converted log of \"{id}\" does not read back identical"),
            Some("the destination was left in place for examination".into()),
            Location {
                file: dest_file.or_else(|| dest_at.path().map(Path::to_path_buf)),
                ..Location::default()
            },
        ));
    }
    let text_identical = if databases {
        None
    } else {
        // Both logical texts are streamed, never held.
        let source_text = source_file.as_deref().and_then(log_text_print);
        Some(source_text.is_some() && source_text == dest_file.as_deref().and_then(log_text_print))
    };
    let from_bytes = if source_sqlite {
        let source = Store::open(&target.at)?;
        let n = stored_bytes(&source, &id, source_file.as_deref());
        source.close()?;
        n
    } else {
        file_bytes(source_file.as_deref())
    };
    let to_bytes = stored_bytes(&check, &id, dest_file.as_deref());
    if inv.global.json {
        let side = |at: &StoreAt, file: &Option<PathBuf>, n: u64| {
            obj([
                (
                    "file",
                    opt_str(file.as_ref().map(|f| f.display().to_string())),
                ),
                ("compression", Value::from(at.encoding())),
                ("store", Value::from(at.spec())),
                ("bytes", num(n)),
            ])
        };
        let doc = obj([
            schema("convert"),
            ("id", Value::from(id.as_str())),
            ("from", side(&target.at, &source_file, from_bytes)),
            ("to", side(&dest_at, &dest_file, to_bytes)),
            ("events", num(event_count)),
            ("batches", num(batch_count)),
            ("verified", Value::from(true)),
            ("eventsIdentical", Value::from(events_identical)),
            (
                "logicalTextIdentical",
                text_identical.map_or(Value::Null, Value::from),
            ),
        ]);
        out.line(&doc.to_json())?;
    } else {
        let s = out.style;
        out.line(&s.green(&format!(
            "converted {id}: {} in {}, {} → {}",
            plural(event_count, "event"),
            plural(batch_count, "batch"),
            target.at.encoding(),
            dest_at.encoding()
        )))?;
        let place = |at: &StoreAt, file: &Option<PathBuf>| {
            file.as_ref()
                .map_or_else(|| at.spec(), |f| f.display().to_string())
        };
        out.line(&format!(
            "  from {} ({})",
            place(&target.at, &source_file),
            bytes(from_bytes)
        ))?;
        out.line(&format!(
            "  to   {} ({})",
            place(&dest_at, &dest_file),
            bytes(to_bytes)
        ))?;
        let detail = match (text_identical, events_identical) {
            (Some(true), _) => "logical text identical",
            (Some(false), _) => "logical text re-encoded (chunk packing differs)",
            (None, true) => "every event byte-identical",
            (None, false) => {
                "envelope keys of some events in the database's fixed order (content identical)"
            }
        };
        out.line(&format!(
            "  verified: header and events read back identical; {detail}"
        ))?;
    }
    check.close()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use session_core::json::Value;
    use session_core::{Event, Events, SessionHeader};
    use session_persist::Backend;
    use session_persist_sqlite::{SqliteBackend, SqliteConfig};

    use super::{CopyCheck, KeyOrders, read_back_pages};

    fn ev(ty: &str, seq: u64, data: &str) -> Event {
        Event::appended(
            ty,
            seq,
            1_000 + seq as i64,
            Value::parse(data).unwrap(),
            None,
            None,
        )
    }

    /// Turns of a step each, with runs of text deltas that the backend packs into rows.
    fn events() -> Vec<Event> {
        let mut out = Vec::new();
        for turn in 1..=6u64 {
            let seq = out.len() as u64;
            out.push(ev("turn/start", seq, &format!(r#"{{"turn":{turn}}}"#)));
            out.push(ev(
                "step/start",
                seq + 1,
                &format!(r#"{{"turn":{turn},"step":1}}"#),
            ));
            for k in 0..40u64 {
                let seq = out.len() as u64;
                out.push(ev(
                    "assistant/chunk",
                    seq,
                    &format!(
                        r#"{{"turn":{turn},"step":1,"chunk":{{"type":"text-delta","index":0,"text":"word {k} "}}}}"#
                    ),
                ));
            }
            let seq = out.len() as u64;
            out.push(ev(
                "step/end",
                seq,
                &format!(r#"{{"turn":{turn},"step":1}}"#),
            ));
            out.push(ev(
                "turn/end",
                seq + 1,
                &format!(r#"{{"turn":{turn},"reason":{{"kind":"completed"}}}}"#),
            ));
        }
        out
    }

    /// A database holding `events` as session "s", one append per turn.
    fn stored(rt: &tokio::runtime::Runtime, events: &[Event]) -> SqliteBackend {
        let backend = SqliteBackend::new(SqliteConfig::new(":memory:")).unwrap();
        let meta = SessionHeader::new("s", 1_000);
        let mut first = 0;
        for i in 0..events.len() {
            if i + 1 == events.len() || events[i + 1].event_type() == "turn/start" {
                rt.block_on(backend.append_batch(&meta, &events[first..=i], first > 0))
                    .unwrap();
                first = i + 1;
            }
        }
        backend
    }

    /// `(complete, verified, identical)` of the paged read-back of "s" against `source`.
    fn read_back(
        rt: &tokio::runtime::Runtime,
        backend: &SqliteBackend,
        source: &Events,
        page_events: usize,
    ) -> (bool, bool, bool) {
        let header = super::comparable_header(&SessionHeader::new("s", 1_000));
        let mut copy = CopyCheck::new(source, KeyOrders::SourceOrAppend, &header);
        let complete = rt
            .block_on(read_back_pages(backend, "s", page_events, &mut copy))
            .unwrap();
        let (verified, identical) = copy.finish();
        (complete, verified, identical)
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn an_intact_copy_verifies_in_pages_of_any_size() {
        let rt = runtime();
        let source = events();
        let backend = stored(&rt, &source);
        let expected = Events::from_vec(source);
        for page in [1, 7, 40, 41, 100, 4096] {
            assert_eq!(
                read_back(&rt, &backend, &expected, page),
                (true, true, true),
                "pages of {page}"
            );
        }
    }

    #[test]
    fn an_altered_copy_fails_the_paged_comparison() {
        let rt = runtime();
        let source = events();
        let expected = Events::from_vec(source.clone());
        // One character of a packed chunk row late in the copy (so in a later page).
        let backend = stored(&rt, &source);
        let changed = rt
            .block_on(backend.with_connection(|c| {
                c.execute(
                    "UPDATE events SET data = replace(data, 'word 7 ', 'word 8 ') \
                     WHERE session_id = 's' AND seq = (SELECT max(seq) FROM events \
                     WHERE session_id = 's' AND ignorable = 0)",
                    [],
                )
                .unwrap()
            }))
            .unwrap();
        assert_eq!(changed, 1);
        let still = rt
            .block_on(backend.with_connection(|c| {
                c.query_row(
                    "SELECT count(*) FROM events WHERE data LIKE '%word 7 %'",
                    [],
                    |r| r.get::<_, i64>(0),
                )
                .unwrap()
            }))
            .unwrap();
        assert_eq!(still, 5, "one of the six packed rows was altered");
        assert!(!read_back(&rt, &backend, &expected, 16).1);
        // A scalar row's payload.
        let backend = stored(&rt, &source);
        rt.block_on(backend.with_connection(|c| {
            c.execute(
                "UPDATE events SET data = replace(data, '\"turn\":5', '\"turn\":9') \
                 WHERE session_id = 's' AND type = 'turn/start'",
                [],
            )
            .unwrap()
        }))
        .unwrap();
        assert!(!read_back(&rt, &backend, &expected, 16).1);
        // A copy missing its last event (a shorter copy) and one with an extra event.
        let backend = stored(&rt, &source[..source.len() - 1]);
        assert!(!read_back(&rt, &backend, &expected, 16).1);
        let mut longer = source.clone();
        longer.push(ev("turn/start", source.len() as u64, r#"{"turn":7}"#));
        let backend = stored(&rt, &longer);
        assert!(!read_back(&rt, &backend, &expected, 16).1);
    }

    #[test]
    fn a_torn_copy_is_incomplete() {
        let rt = runtime();
        let source = events();
        let expected = Events::from_vec(source.clone());
        let backend = stored(&rt, &source);
        // A row after the last turn/end that does not decode: a torn tail.
        let next = source.len() as i64;
        rt.block_on(backend.with_connection(move |c| {
            c.execute(
                "INSERT INTO events (session_id, seq, type, time, data) \
                 VALUES ('s', ?1, 'turn/start', 1000, '{not json')",
                [next],
            )
            .unwrap()
        }))
        .unwrap();
        let (complete, ..) = read_back(&rt, &backend, &expected, 16);
        assert!(!complete);
    }
}
