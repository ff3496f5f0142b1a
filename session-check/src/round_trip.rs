//! [`check_persistence_round_trip`]: a log written through the JSONL backend loads back
//! identical and re-encodes to identical bytes.
//!
//! The check runs on whole stored sessions (`sessionctl verify`), so it holds no copy of the
//! log: each append batch is copied out of the log as it is written; the written file is
//! found by its id through the backend and read back as a stream ([`LogStream`]: the checks
//! a load applies to each record, a batch of events at a time), each event compared with the
//! event written at its seq; each append batch read back is compared with the file's logical
//! text (decoded as a second stream) and written again, then dropped; and the re-encoded file
//! is compared with the first block by block.

use std::fmt;
use std::io::Read;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use session_core::{Event, Events, SessionHeader, chunk_rows};
use session_persist::{Backend, Compression, JsonlBackend, JsonlConfig, LogStream};

use crate::{Check, Violation};

const NAME: &str = "persistence_round_trip";

/// The session id and working directory [`check_persistence_round_trip`] stores logs under.
pub const ROUND_TRIP_ID: &str = "round-trip";
const ROUND_TRIP_CWD: &str = "/conformance/round-trip";

/// The index ranges of the append batches of `len` events cut at `cuts` (see
/// [`split_batches`]).
fn batch_ranges(len: usize, cuts: &[usize]) -> Vec<Range<usize>> {
    let mut cuts: Vec<usize> = cuts
        .iter()
        .copied()
        .filter(|c| *c > 0 && *c < len)
        .collect();
    cuts.sort_unstable();
    cuts.dedup();
    let mut out = Vec::new();
    let mut start = 0;
    for c in cuts.into_iter().chain([len]) {
        if c > start {
            out.push(start..c);
        }
        start = c;
    }
    out
}

/// Splits `events` into append batches at the cut points (indexes where a new batch starts;
/// out-of-range, repeated and zero cuts are ignored). Empty input gives no batch.
pub fn split_batches(events: &[Event], cuts: &[usize]) -> Vec<Vec<Event>> {
    batch_ranges(events.len(), cuts)
        .into_iter()
        .map(|r| events[r].to_vec())
        .collect()
}

/// A fresh private directory for a scratch root: a random name under the temporary
/// directory, created exclusively with mode 0700 (`tempfile`), so nothing planted at a
/// predictable path is followed; removed when dropped.
fn temp_root(tag: &str) -> std::io::Result<tempfile::TempDir> {
    tempfile::Builder::new()
        .prefix(&format!("session-check-{tag}-"))
        .tempdir()
}

fn round_trip_meta() -> SessionHeader {
    let mut meta = SessionHeader::new(ROUND_TRIP_ID, 0);
    meta.cwd = Some(Arc::from(ROUND_TRIP_CWD));
    meta
}

/// The header line the reference writes for [`round_trip_meta`], with its newline.
fn expected_header_line() -> String {
    format!(
        "{{\"type\":\"session\",\"version\":0,\"id\":\"{ROUND_TRIP_ID}\",\"createdAt\":0,\"cwd\":\"{ROUND_TRIP_CWD}\",\"delegationDepth\":0}}\n"
    )
}

/// Compares the logical text of a log (its decoded text, read as a stream) with the text the
/// reference writes: the header line, then each batch's lines (packed chunk rows when
/// `packed`), each batch ending in a newline. Each batch's text is built and compared on its
/// own, so nothing but one batch's text is held.
struct LogicalText<R> {
    logical: R,
    packed: bool,
    /// Bytes compared so far.
    at: u64,
    /// The offset where the expected text and the log first part.
    differs: Option<u64>,
    expected: String,
    got: Vec<u8>,
}

impl<R: Read> LogicalText<R> {
    /// A comparison of `logical` that has checked its header line.
    fn new(logical: R, packed: bool) -> std::io::Result<LogicalText<R>> {
        let mut text = LogicalText {
            logical,
            packed,
            at: 0,
            differs: None,
            expected: expected_header_line(),
            got: Vec::new(),
        };
        text.compare()?;
        Ok(text)
    }

    /// Compares the next bytes of the log with `self.expected`.
    fn compare(&mut self) -> std::io::Result<()> {
        if self.differs.is_some() {
            return Ok(());
        }
        self.got.resize(self.expected.len(), 0);
        let n = read_full(&mut self.logical, &mut self.got)?;
        if let Some(i) = self.got[..n]
            .iter()
            .zip(self.expected.as_bytes())
            .position(|(g, e)| g != e)
        {
            self.differs = Some(self.at + i as u64);
        } else if n != self.expected.len() {
            self.differs = Some(self.at + n as u64);
        }
        self.at += n as u64;
        Ok(())
    }

    /// Compares the next batch of the log with the lines of `events`.
    fn batch(&mut self, events: &[Event]) -> std::io::Result<()> {
        self.expected.clear();
        chunk_rows::write_batch_lines(events, self.packed, &mut self.expected);
        self.expected.push('\n');
        self.compare()
    }

    /// Where the log and the expected text part, if they do: nothing may follow the last
    /// batch.
    fn finish(mut self) -> std::io::Result<Option<u64>> {
        if self.differs.is_none() {
            let mut extra = [0u8; 1];
            if read_full(&mut self.logical, &mut extra)? > 0 {
                self.differs = Some(self.at);
            }
        }
        Ok(self.differs)
    }
}

/// The byte offset where the contents of the readers `left` and `right` first differ (the
/// shorter one's length if one is a prefix of the other), read in blocks.
fn first_byte_difference(
    mut left: impl Read,
    mut right: impl Read,
) -> std::io::Result<Option<u64>> {
    const BLOCK: usize = 1 << 16;
    let (mut left_block, mut right_block) = (vec![0u8; BLOCK], vec![0u8; BLOCK]);
    let mut offset = 0u64;
    loop {
        let left_len = read_full(&mut left, &mut left_block)?;
        let right_len = read_full(&mut right, &mut right_block)?;
        if let Some(i) = left_block[..left_len]
            .iter()
            .zip(&right_block[..right_len])
            .position(|(l, r)| l != r)
        {
            return Ok(Some(offset + i as u64));
        }
        if left_len != right_len {
            return Ok(Some(offset + left_len.min(right_len) as u64));
        }
        if left_len == 0 {
            return Ok(None);
        }
        offset += left_len as u64;
    }
}

/// Reads until `buf` is full or the reader ends; returns how many bytes were read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

fn persist_violation(what: &str, e: &dyn fmt::Display) -> Violation {
    Violation::new(NAME, format!("{what}: {e}"))
}

fn open_file(path: &Path) -> Result<std::io::BufReader<std::fs::File>, Violation> {
    std::fs::File::open(path)
        .map(std::io::BufReader::new)
        .map_err(|e| persist_violation(&format!("opening {}", path.display()), &e))
}

fn config(root: &Path, compression: Compression, packed: bool) -> JsonlConfig {
    JsonlConfig::new(root)
        .compression(compression)
        .pack_chunks(packed)
}

/// Writes the batches `ranges` of `events` (contiguous from the first event) as one session
/// through a fresh JSONL backend, each batch copied out of the log as it is written; returns
/// the log path.
async fn write_batches(
    root: &Path,
    events: &Events,
    ranges: &[Range<usize>],
    compression: Compression,
    packed: bool,
) -> Result<PathBuf, Violation> {
    let meta = round_trip_meta();
    let backend = JsonlBackend::open(config(root, compression, packed))
        .map_err(|e| persist_violation("opening the backend", &e))?;
    let mut source = events.iter();
    for (i, range) in ranges.iter().enumerate() {
        let batch: Vec<Event> = source.by_ref().take(range.len()).cloned().collect();
        backend
            .append_batch(&meta, &batch, i > 0)
            .await
            .map_err(|e| persist_violation(&format!("appending batch {i}"), &e))?;
    }
    let path = backend
        .log_path(&meta)
        .map_err(|e| persist_violation("locating the log", &e))?;
    backend
        .close()
        .await
        .map_err(|e| persist_violation("closing the backend", &e))?;
    Ok(path)
}

/// Events asked of the read-back stream at a time.
const READ_BATCH: usize = 4096;

/// The comparison of the events read back with the events written, one event at a time:
/// each read event must be the event written at its index, and the read events are gathered
/// into the append batches the log was written in, each handed back when it is complete.
struct ReadBack<'a> {
    written: &'a Events,
    ranges: &'a [Range<usize>],
    /// Events received.
    received: usize,
    /// The index in `ranges` of the batch being gathered.
    range: usize,
    batch: Vec<Event>,
}

impl<'a> ReadBack<'a> {
    fn new(written: &'a Events, ranges: &'a [Range<usize>]) -> ReadBack<'a> {
        ReadBack {
            written,
            ranges,
            received: 0,
            range: 0,
            batch: Vec::new(),
        }
    }

    fn difference(&self, i: usize, read: Option<&Event>) -> Violation {
        Violation::new(
            NAME,
            format!(
                "event {i} read back differently: wrote {:?}, read {read:?}",
                self.written.get(i)
            ),
        )
    }

    /// Takes the next event read; returns the batch it completes, if it does.
    fn take(&mut self, event: Event) -> Result<Option<Vec<Event>>, Violation> {
        let i = self.received;
        if self.written.get(i) != Some(&event) {
            return Err(self.difference(i, Some(&event)));
        }
        self.received += 1;
        self.batch.push(event);
        if self
            .ranges
            .get(self.range)
            .is_some_and(|r| r.end == self.received)
        {
            self.range += 1;
            return Ok(Some(std::mem::take(&mut self.batch)));
        }
        Ok(None)
    }

    /// The end of the read: every written event must have been read.
    fn finish(&self) -> Check {
        if self.received < self.written.len() {
            return Err(self.difference(self.received, None));
        }
        Ok(())
    }
}

/// The file's logical text (the plaintext of its frames, for zstd), as a stream.
fn logical_text(path: &Path, compression: Compression) -> Result<Box<dyn Read>, Violation> {
    let file = open_file(path)?;
    Ok(match compression {
        Compression::None => Box::new(file),
        Compression::Zstd => Box::new(
            zstd::stream::read::Decoder::new(file)
                .map_err(|e| persist_violation("decoding the file", &e))?,
        ),
    })
}

async fn round_trip(
    events: &Events,
    cuts: &[usize],
    compression: Compression,
    packed: bool,
    roots: [&Path; 2],
) -> Check {
    let ranges = batch_ranges(events.len(), cuts);
    let path = write_batches(roots[0], events, &ranges, compression, packed).await?;

    // The backend finds the log by its id.
    let reader = JsonlBackend::open(config(roots[0], compression, packed))
        .map_err(|e| persist_violation("reopening the backend", &e))?;
    let found = reader
        .read_stored_revision(ROUND_TRIP_ID)
        .await
        .map_err(|e| persist_violation("finding the log", &e))?;
    reader
        .close()
        .await
        .map_err(|e| persist_violation("closing the backend", &e))?;
    match (found.is_some(), events.is_empty()) {
        (false, true) => return Ok(()),
        (false, false) => return Err(Violation::new(NAME, "the written log is not found")),
        (true, true) => return Err(Violation::new(NAME, "an empty log was materialized")),
        (true, false) => {}
    }
    // Read back as a stream, with the checks a load applies to each record; a log that a load
    // would find damaged (a torn tail, an invalid envelope, a seq gap) fails to read.
    let reading_back = |e: session_persist::Error| {
        Violation::new(
            NAME,
            format!("a cleanly written log does not read back: {e}"),
        )
    };
    let mut stream = LogStream::open(&path).map_err(reading_back)?;
    let meta = stream.header();
    if &*meta.id != ROUND_TRIP_ID || meta.cwd.as_deref() != Some(ROUND_TRIP_CWD) {
        return Err(Violation::new(
            NAME,
            format!("header read back as {meta:?}"),
        ));
    }
    let reading = |e: std::io::Error| persist_violation("reading the file", &e);
    let mut text = LogicalText::new(logical_text(&path, compression)?, packed).map_err(reading)?;
    // Each batch read back is compared with the file's text and written again, batch for
    // batch, then dropped.
    let meta = round_trip_meta();
    let copy = JsonlBackend::open(config(roots[1], compression, packed))
        .map_err(|e| persist_violation("opening the backend", &e))?;
    let mut read_back = ReadBack::new(events, &ranges);
    let mut appended = 0;
    while let Some(read) = stream.next_batch(READ_BATCH).map_err(reading_back)? {
        for event in read {
            let Some(batch) = read_back.take(event)? else {
                continue;
            };
            text.batch(&batch).map_err(reading)?;
            copy.append_batch(&meta, &batch, appended > 0)
                .await
                .map_err(|e| persist_violation(&format!("appending batch {appended}"), &e))?;
            appended += 1;
        }
    }
    drop(stream);
    read_back.finish()?;
    if let Some(at) = text.finish().map_err(reading)? {
        return Err(Violation::new(
            NAME,
            format!("the file's logical text differs from the expected text at byte {at}"),
        ));
    }
    let path2 = copy
        .log_path(&meta)
        .map_err(|e| persist_violation("locating the log", &e))?;
    copy.close()
        .await
        .map_err(|e| persist_violation("closing the backend", &e))?;
    let differs = first_byte_difference(open_file(&path)?, open_file(&path2)?)
        .map_err(|e| persist_violation("reading the file", &e))?;
    if let Some(at) = differs {
        let len = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
        return Err(Violation::new(
            NAME,
            format!(
                "re-encoding the loaded events gives different bytes (from byte {at}; {} vs {} bytes)",
                len(&path),
                len(&path2)
            ),
        ));
    }
    Ok(())
}

/// Writes `events` through the JSONL backend (one append batch per slice of `cuts`, see
/// [`split_batches`]; `compression` raw or zstd; chunk packing on or off) into a temporary
/// root and loads them back: the events must be identical (key order included), the log
/// clean (no torn tail), its logical text exactly the header line plus each batch's lines,
/// and writing the loaded events again must give byte-identical files. The temporary
/// directories are removed afterwards.
///
/// Memory: besides `events`, a few batches of event handles: the batch being written, and
/// while the log is read back ([`LogStream`], a bounded stream with the checks a load applies
/// to each record) the events of one read and of the append batch being gathered, which is
/// compared with the file's logical text (streamed from the file), written again and dropped.
/// Files are compared in 64 KiB blocks.
pub fn check_persistence_round_trip(
    events: &Events,
    cuts: &[usize],
    compression: Compression,
    packed: bool,
) -> Check {
    // The backend's blocking work runs one job at a time here, so one thread serves it: every
    // blocking job on a thread of its own would give each its own allocator arena, each
    // holding its own encoder buffers.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .max_blocking_threads(1)
        .build()
        .map_err(|e| persist_violation("starting a runtime", &e))?;
    let scratch =
        |tag| temp_root(tag).map_err(|e| persist_violation("creating a scratch directory", &e));
    let roots = [scratch("round-trip")?, scratch("re-encode")?];
    runtime.block_on(round_trip(
        events,
        cuts,
        compression,
        packed,
        [roots[0].path(), roots[1].path()],
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use session_core::json::Value;

    fn events() -> Vec<Event> {
        (0..3)
            .map(|i| Event::appended("x", i, 7, Value::parse("null").unwrap(), None, None))
            .collect()
    }

    fn text(events: &[Event], ranges: &[Range<usize>]) -> Vec<u8> {
        let mut out = expected_header_line();
        for r in ranges {
            chunk_rows::write_batch_lines(&events[r.clone()], false, &mut out);
            out.push('\n');
        }
        out.into_bytes()
    }

    #[test]
    fn logical_text_is_compared_batch_by_batch_to_the_byte() {
        let events = events();
        let ranges = batch_ranges(events.len(), &[1]);
        let good = text(&events, &ranges);
        let differs = |bytes: &[u8]| {
            let mut text = LogicalText::new(bytes, false).unwrap();
            for r in &ranges {
                text.batch(&events[r.clone()]).unwrap();
            }
            text.finish().unwrap()
        };
        assert_eq!(differs(&good), None);
        let mut changed = good.clone();
        let last = changed.len() - 3;
        changed[last] ^= 1;
        assert_eq!(differs(&changed), Some(last as u64));
        assert_eq!(
            differs(&good[..good.len() - 1]),
            Some(good.len() as u64 - 1)
        );
        let mut longer = good.clone();
        longer.push(b'\n');
        assert_eq!(differs(&longer), Some(good.len() as u64));
        // The same events in one batch are the same text: batches end in a newline each.
        let one = text(&events, &batch_ranges(events.len(), &[]));
        assert_eq!(differs(&one), None);
    }

    /// The sizes of the batches `read` completes, or the violation it stops at.
    fn read_back(
        written: &[Event],
        cuts: &[usize],
        read: &[Event],
    ) -> Result<Vec<usize>, Violation> {
        let written = Events::from_vec(written.to_vec());
        let ranges = batch_ranges(written.len(), cuts);
        let mut back = ReadBack::new(&written, &ranges);
        let mut sizes = Vec::new();
        for event in read {
            sizes.extend(back.take(event.clone())?.map(|b| b.len()));
        }
        back.finish()?;
        Ok(sizes)
    }

    #[test]
    fn events_read_back_are_compared_and_gathered_batch_by_batch() {
        let written = events();
        assert_eq!(read_back(&written, &[1], &written), Ok(vec![1, 2]));
        assert_eq!(read_back(&written, &[], &written), Ok(vec![3]));

        // A different event is named with what was written and what was read.
        let other = Event::appended("y", 1, 7, Value::parse("null").unwrap(), None, None);
        let read = [written[0].clone(), other, written[2].clone()];
        let v = read_back(&written, &[2], &read).unwrap_err();
        assert!(
            v.detail
                .starts_with("event 1 read back differently: wrote Some({\"type\":\"x\""),
            "{v}"
        );
        assert!(v.detail.contains("read Some({\"type\":\"y\""), "{v}");

        // Fewer events than were written, or more.
        let v = read_back(&written, &[], &written[..2]).unwrap_err();
        assert!(
            v.detail.starts_with("event 2 read back differently: "),
            "{v}"
        );
        assert!(v.detail.ends_with("read None"), "{v}");
        let v = read_back(&written[..2], &[], &written).unwrap_err();
        assert!(
            v.detail
                .starts_with("event 2 read back differently: wrote None"),
            "{v}"
        );
    }

    #[test]
    fn files_are_compared_block_by_block() {
        let a: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let mut b = a.clone();
        assert_eq!(first_byte_difference(&a[..], &b[..]).unwrap(), None);
        b[150_000] ^= 1;
        assert_eq!(
            first_byte_difference(&a[..], &b[..]).unwrap(),
            Some(150_000)
        );
        assert_eq!(
            first_byte_difference(&a[..], &a[..70_000]).unwrap(),
            Some(70_000)
        );
    }
}
