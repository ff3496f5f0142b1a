//! Reading logs: the revision-stable file read, and the raw and Zstandard prefix readers.

use std::io;
use std::path::Path;

use session_core::Event;
use session_core::json::Value;

use super::frames::{FrameDecoder, scan_zstd_frames};
use super::fs::{Fs, Stat, read_to_end};
use super::header_line::ParsedHeader;
use super::scanner::SessionLogScanner;
use crate::backend::TornMarker;
use crate::error::{Error, Result};

/// A stored log as read: the valid prefix and what repair must cut.
#[derive(Debug)]
pub(crate) struct Prefix {
    pub(crate) header: ParsedHeader,
    pub(crate) events: Vec<Event>,
    pub(crate) invalid: Option<(usize, Value)>,
    pub(crate) torn: Option<TornMarker>,
}

/// `stat`, with a missing file as `None`.
pub(crate) fn stat_if_exists(fs: &dyn Fs, path: &Path) -> Result<Option<Stat>> {
    match fs.stat(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io("stat", path, e)),
    }
}

/// Reads a whole file between two `stat`s that agree, so the bytes belong to one revision.
/// A file that disappears reads as `None`.
pub(crate) fn stable_read(fs: &dyn Fs, path: &Path) -> Result<Option<(Vec<u8>, Stat)>> {
    loop {
        let Some(before) = stat_if_exists(fs, path)? else {
            return Ok(None);
        };
        let mut file = match fs.open_read(path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io("open", path, e)),
        };
        let bytes = read_to_end(file.as_mut()).map_err(|e| Error::io("read", path, e))?;
        drop(file);
        let Some(after) = stat_if_exists(fs, path)? else {
            return Ok(None);
        };
        if before.revision_text() == after.revision_text() {
            return Ok(Some((bytes, after)));
        }
    }
}

/// Reads a raw (plain JSONL) log. Everything after the committed bytes is a torn tail.
pub(crate) fn read_raw_prefix(buf: &[u8]) -> Result<Prefix> {
    let Some(nl) = buf.iter().position(|&b| b == b'\n') else {
        return Err(Error::EmptyLog { zstd: false });
    };
    let mut scanner = SessionLogScanner::new(&buf[..=nl])?;
    scanner.write(&buf[nl + 1..])?;
    let out = scanner.finish();
    let torn = (out.committed_bytes < buf.len() as u64).then(|| TornMarker::Truncate {
        truncate_to: out.committed_bytes,
        recovered: Vec::new(),
    });
    Ok(Prefix {
        header: out.header,
        events: out.events,
        invalid: out.invalid,
        torn,
    })
}

/// Whether `plain` is exactly one line: non-empty, ending in its only newline.
fn is_one_line(plain: &[u8]) -> bool {
    matches!(plain.split_last(), Some((b'\n', body)) if !body.contains(&b'\n'))
}

/// Reads a Zstandard log frame by frame (never holding the whole plaintext). Every complete
/// frame must be valid and end on a record boundary; a torn final frame is prefix-decoded and
/// its complete records are kept as recovered events.
pub(crate) fn read_zstd_prefix(buf: &[u8]) -> Result<Prefix> {
    let scan = scan_zstd_frames(buf, None)?;
    let Some(first) = scan.frames.first() else {
        return Err(Error::EmptyLog { zstd: true });
    };
    let mut decoder = FrameDecoder::new();
    let header = decoder.decode_frame_to_vec(&buf[first.start..first.end], first.start)?;
    if !is_one_line(&header) {
        return Err(Error::ZstdHeaderFrameLines);
    }
    let mut scanner = SessionLogScanner::new(&header)?;
    for frame in &scan.frames[1..] {
        decoder.decode_frame(&buf[frame.start..frame.end], frame.start, |chunk| {
            scanner.write(chunk)
        })?;
    }
    if scanner.committed_bytes() != scanner.bytes_written() {
        return Err(Error::ZstdTornRecord);
    }
    let Some(torn_start) = scan.torn_start else {
        let out = scanner.finish();
        return Ok(Prefix {
            header: out.header,
            events: out.events,
            invalid: out.invalid,
            torn: None,
        });
    };
    let before = scanner.event_count();
    let plain = decoder.decode_torn(&buf[torn_start..]);
    scanner.write(&plain)?;
    let out = scanner.finish();
    let recovered = out.events.get(before..).unwrap_or_default().to_vec();
    Ok(Prefix {
        header: out.header,
        events: out.events,
        invalid: out.invalid,
        torn: Some(TornMarker::Truncate {
            truncate_to: torn_start as u64,
            recovered,
        }),
    })
}

/// The logical text of a Zstandard log: the plaintext of its complete frames (a torn final
/// frame is omitted).
pub(crate) fn zstd_text(buf: &[u8]) -> Result<Vec<u8>> {
    let scan = scan_zstd_frames(buf, None)?;
    if scan.frames.is_empty() {
        return Err(Error::EmptyLog { zstd: true });
    }
    let mut decoder = FrameDecoder::new();
    let mut out = Vec::new();
    for frame in &scan.frames {
        decoder.decode_frame(&buf[frame.start..frame.end], frame.start, |chunk| {
            out.extend_from_slice(chunk);
            Ok(())
        })?;
    }
    Ok(out)
}
