//! [`check_persistence_round_trip`]: a log written through the JSONL backend loads back
//! identical and re-encodes to identical bytes.
//!
//! The check runs on whole stored sessions (`sessionctl verify`), so its working set is kept
//! to one loaded copy of the events: batches are slices of one vector of event handles, the
//! file's logical text is decoded as a stream and compared with the expected text one batch
//! at a time, and the re-encoded file is compared with the first block by block.

use std::fmt;
use std::io::Read;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use session_core::{Event, Events, SessionHeader, chunk_rows};
use session_persist::{Backend, Compression, JsonlBackend, JsonlConfig};

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

/// Whether `logical` (the log's decoded text, read as a stream) is exactly the text the
/// reference writes for the batches `ranges` of `events`: the header line, then each batch's
/// lines (packed chunk rows when `packed`), each batch ending in a newline. Each batch's text
/// is built and compared on its own; on a difference, returns the byte offset where the
/// expected text and the log part.
fn logical_text_differs(
    mut logical: impl Read,
    events: &[Event],
    ranges: &[Range<usize>],
    packed: bool,
) -> std::io::Result<Option<u64>> {
    let mut expected = expected_header_line();
    let mut got = Vec::new();
    let mut at = 0u64;
    let mut batches = ranges.iter();
    loop {
        got.resize(expected.len(), 0);
        let n = read_full(&mut logical, &mut got)?;
        if let Some(i) = got[..n]
            .iter()
            .zip(expected.as_bytes())
            .position(|(g, e)| g != e)
        {
            return Ok(Some(at + i as u64));
        }
        if n != expected.len() {
            return Ok(Some(at + n as u64));
        }
        at += n as u64;
        let Some(range) = batches.next() else {
            // Nothing may follow the last batch.
            let mut extra = [0u8; 1];
            return Ok((read_full(&mut logical, &mut extra)? > 0).then_some(at));
        };
        expected.clear();
        chunk_rows::write_batch_lines(&events[range.clone()], packed, &mut expected);
        expected.push('\n');
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

/// Writes the batches `ranges` of `events` as one session through a fresh JSONL backend;
/// returns the log path.
async fn write_batches(
    root: &Path,
    events: &[Event],
    ranges: &[Range<usize>],
    compression: Compression,
    packed: bool,
) -> Result<PathBuf, Violation> {
    let meta = round_trip_meta();
    let backend = JsonlBackend::open(config(root, compression, packed))
        .map_err(|e| persist_violation("opening the backend", &e))?;
    for (i, range) in ranges.iter().enumerate() {
        backend
            .append_batch(&meta, &events[range.clone()], i > 0)
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

async fn round_trip(
    events: &Events,
    cuts: &[usize],
    compression: Compression,
    packed: bool,
    roots: [&Path; 2],
) -> Check {
    let ranges = batch_ranges(events.len(), cuts);
    let written = events.to_vec();
    let path = write_batches(roots[0], &written, &ranges, compression, packed).await?;

    let reader = JsonlBackend::open(config(roots[0], compression, packed))
        .map_err(|e| persist_violation("reopening the backend", &e))?;
    let stored = reader
        .load_stored(ROUND_TRIP_ID)
        .await
        .map_err(|e| persist_violation("loading the log", &e))?;
    let Some(stored) = stored else {
        reader
            .close()
            .await
            .map_err(|e| persist_violation("closing the backend", &e))?;
        return if written.is_empty() {
            Ok(())
        } else {
            Err(Violation::new(NAME, "the written log is not found"))
        };
    };
    if written.is_empty() {
        return Err(Violation::new(NAME, "an empty log was materialized"));
    }
    if stored.torn.is_some() || stored.invalid_envelope.is_some() {
        return Err(Violation::new(
            NAME,
            format!(
                "a cleanly written log reads as damaged (torn: {:?}, invalid envelope: {:?})",
                stored.torn, stored.invalid_envelope
            ),
        ));
    }
    if &*stored.meta.id != ROUND_TRIP_ID || stored.meta.cwd.as_deref() != Some(ROUND_TRIP_CWD) {
        return Err(Violation::new(
            NAME,
            format!("header read back as {:?}", stored.meta),
        ));
    }
    if let Some(i) = (0..written.len().max(stored.events.len()))
        .find(|i| written.get(*i) != stored.events.get(*i))
    {
        return Err(Violation::new(
            NAME,
            format!(
                "event {i} read back differently: wrote {:?}, read {:?}",
                written.get(i),
                stored.events.get(i)
            ),
        ));
    }
    // From here on the loaded events stand for the written ones (they are equal).
    drop(written);
    reader
        .close()
        .await
        .map_err(|e| persist_violation("closing the backend", &e))?;
    // The file's logical text (the plaintext of its frames, for zstd), streamed.
    let file = open_file(&path)?;
    let logical: Box<dyn Read> = match compression {
        Compression::None => Box::new(file),
        Compression::Zstd => Box::new(
            zstd::stream::read::Decoder::new(file)
                .map_err(|e| persist_violation("decoding the file", &e))?,
        ),
    };
    let differs = logical_text_differs(logical, &stored.events, &ranges, packed)
        .map_err(|e| persist_violation("reading the file", &e))?;
    if let Some(at) = differs {
        return Err(Violation::new(
            NAME,
            format!("the file's logical text differs from the expected text at byte {at}"),
        ));
    }
    // Re-encode what was read, batch for batch, and compare the files byte for byte.
    let path2 = write_batches(roots[1], &stored.events, &ranges, compression, packed).await?;
    drop(stored);
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
/// Memory: besides `events`, one vector of event handles (while writing) and one loaded copy
/// of the events; the logical text is streamed from the file and compared one batch at a
/// time, and files are compared in 64 KiB blocks.
pub fn check_persistence_round_trip(
    events: &Events,
    cuts: &[usize],
    compression: Compression,
    packed: bool,
) -> Check {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
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
        let differs = |bytes: &[u8]| logical_text_differs(bytes, &events, &ranges, false).unwrap();
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
