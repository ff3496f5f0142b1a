//! [`check_persistence_round_trip`]: a log written through the JSONL backend loads back
//! identical and re-encodes to identical bytes.
//!
//! The check runs on whole stored sessions (`sessionctl verify`), so its working set is kept
//! to one loaded copy of the events and the logical text: batches are slices of one vector of
//! event handles, the expected text is built one batch at a time and compared in place, and
//! files are compared block by block rather than read whole.

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

/// Whether `text` is exactly the logical text the reference writes for the batches `ranges`
/// of `events`: the header line, then each batch's lines (packed chunk rows when `packed`),
/// each batch ending in a newline. Each batch's text is built and compared on its own; on a
/// difference, returns the byte offset where the expected text and `text` part.
fn logical_text_differs(
    text: &str,
    events: &[Event],
    ranges: &[Range<usize>],
    packed: bool,
) -> Option<usize> {
    let mut expected = expected_header_line();
    let mut at = 0;
    let mut batches = ranges.iter();
    loop {
        let got = text.as_bytes().get(at..at + expected.len());
        if got != Some(expected.as_bytes()) {
            let common = text.as_bytes()[at..]
                .iter()
                .zip(expected.as_bytes())
                .take_while(|(a, b)| a == b)
                .count();
            return Some(at + common);
        }
        at += expected.len();
        let Some(range) = batches.next() else {
            return (at != text.len()).then_some(at);
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
    let raw = reader
        .read_raw(ROUND_TRIP_ID)
        .await
        .map_err(|e| persist_violation("reading the raw log", &e))?
        .map(|r| r.content);
    reader
        .close()
        .await
        .map_err(|e| persist_violation("closing the backend", &e))?;
    let Some(raw) = raw else {
        return Err(Violation::new(NAME, "the raw log is not found"));
    };
    if let Some(at) = logical_text_differs(&raw, &stored.events, &ranges, packed) {
        let end = raw.len().min(at + 200);
        return Err(Violation::new(
            NAME,
            format!(
                "logical text differs from the expected text at byte {at}: {:?}",
                raw.get(at..end).unwrap_or_default()
            ),
        ));
    }
    if compression == Compression::None {
        let differs = first_byte_difference(open_file(&path)?, raw.as_bytes())
            .map_err(|e| persist_violation("reading the file", &e))?;
        if let Some(at) = differs {
            return Err(Violation::new(
                NAME,
                format!("file bytes differ from the logical text at byte {at}"),
            ));
        }
    }
    drop(raw);
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
/// Memory: besides `events`, one vector of event handles (while writing), one loaded copy of
/// the events and the logical text; the expected text is built one batch at a time and files
/// are compared in 64 KiB blocks.
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
