//! Sealing: rewriting a closed Zstandard log into one frame per turn.
//!
//! The live writer emits one frame per write-behind batch, so a long session ends up as many
//! small frames, which decode slower and compress worse than a few large ones. Sealing rewrites
//! a session that is at rest (no open turn, no torn tail, no live writer) into the header frame,
//! verbatim, followed by one frame per turn: a new batch starts at every `turn/start`, and the
//! events before the first turn form their own batch. Chunk rows are packed as configured.
//!
//! The rewrite is crash-safe: the new content is written and synced under
//! `<final>.<12 hex>.tmp` (0600) in the session directory, read back as a load reads it and
//! compared with what was written (the header text, the event count, and the count and two
//! 64-bit hashes of the records: each line's exact bytes as encoded from the original events,
//! against each line as the load of the copy decodes it), renamed over the log, and the
//! directory is synced. Until the rename the original is
//! untouched; a failure removes the temporary file. The writer lock of the log is held
//! throughout, so no writer can append meanwhile. Plain logs have no frames: sealing them
//! validates the same preconditions and leaves the file byte-for-byte as it is. A log that
//! already has no more frames than sealing would write (the header frame and one per turn) is
//! left as it is too (`rewritten: false`).
//!
//! Memory is bounded by one copy of the log's events: the file's bytes are scanned for frames
//! and freed before the events are loaded, turns are encoded and written one at a time, and the
//! original events are freed before the copy is read back.

use std::hash::Hasher;
use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};

use session_core::Event;

use super::auto_seal::{SealPolicy, SealStep, pause_point};
use super::fs::{Fs, FsFile, write_all};
use super::read::{Prefix, is_one_line, load_prefix, stable_read, zstd_text};
use super::write::batch_text;
use super::{Compression, Inner, scan_zstd_frames};
use crate::backend::Location;
use crate::error::{Error, Result};

/// What [`JsonlBackend::seal`](super::JsonlBackend::seal) did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SealReport {
    /// Size of the log before sealing, in bytes.
    pub bytes_before: u64,
    /// Size of the log after sealing, in bytes.
    pub bytes_after: u64,
    /// Zstandard frames before sealing (0 for a plain log).
    pub frames_before: usize,
    /// Zstandard frames after sealing (0 for a plain log).
    pub frames_after: usize,
    /// Whether the log was rewritten (`false` for a plain log, whose bytes are left as they are).
    pub rewritten: bool,
}

/// Splits `events` into the batches of a sealed log, as index ranges: one per turn, each
/// starting at a `turn/start`; events before the first turn form their own batch.
pub(crate) fn turn_batches(events: &[Event]) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, event) in events.iter().enumerate() {
        if i > start && event.event_type() == "turn/start" {
            out.push(start..i);
            start = i;
        }
    }
    if start < events.len() {
        out.push(start..events.len());
    }
    out
}

/// The turn left open at the end of `events`, if any: the last `turn/start` or `turn/end` is a
/// `turn/start`.
fn open_turn(events: &[Event]) -> Option<&Event> {
    events
        .iter()
        .rev()
        .find(|e| matches!(e.event_type(), "turn/start" | "turn/end"))
        .filter(|e| e.event_type() == "turn/start")
}

impl Inner {
    fn refuse(id: &str, reason: impl Into<String>) -> Error {
        Error::SealRefused {
            id: id.to_owned(),
            reason: reason.into(),
        }
    }

    /// Reads the log's prefix and checks the preconditions of sealing.
    fn sealable_prefix(&self, id: &str, path: &Path) -> Result<Prefix> {
        let zstd = self.compression == Compression::Zstd;
        let Some((prefix, _)) = load_prefix(self.fs.as_ref(), path, zstd, None, false)? else {
            return Err(Error::NotFound { id: id.to_owned() });
        };
        let prefix = prefix.map_err(|e| e.with_location(Location::jsonl(path)))?;
        self.assert_identity(path, Some(id), &prefix.header)?;
        if prefix.torn.is_some() {
            return Err(Self::refuse(
                id,
                "the log has a torn tail (load it to repair first)",
            ));
        }
        if let Some((index, _)) = &prefix.invalid {
            return Err(Self::refuse(
                id,
                format!("stored event {index} has an invalid envelope"),
            ));
        }
        if let Some(turn) = open_turn(&prefix.events) {
            let number = turn
                .data()
                .get("turn")
                .map_or_else(|| "?".to_owned(), session_core::json::Value::to_json);
            return Err(Self::refuse(
                id,
                format!("turn {number} is open (seq {})", turn.seq()),
            ));
        }
        Ok(prefix)
    }

    /// Seals the log of `id` (see the [module documentation](self)).
    pub(crate) fn seal(&self, id: &str) -> Result<SealReport> {
        self.preflight()?;
        let Some(path) = self.find_log(id)? else {
            return Err(Error::NotFound { id: id.to_owned() });
        };
        // The writer lock: held until the rewrite is durable.
        let lock = match self.fs.open_append(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(Error::NotFound { id: id.to_owned() });
            }
            Err(e) => return Err(Error::io("open", &path, e)),
        };
        if !lock.try_lock().map_err(|e| Error::io("flock", &path, e))? {
            return Err(Error::Locked {
                id: id.to_owned(),
                path,
            });
        }
        let report = self.seal_locked(id, &path, None);
        drop(lock);
        report
    }

    /// Seals the log of `id` at `path`, whose writer lock the caller holds. With a `policy`,
    /// a Zstandard log whose frame layout the policy declines is left as it is
    /// (`rewritten: false`) before its events are loaded.
    pub(crate) fn seal_locked(
        &self,
        id: &str,
        path: &Path,
        policy: Option<&SealPolicy>,
    ) -> Result<SealReport> {
        let path = path.to_path_buf();
        if self.compression == Compression::None {
            self.sealable_prefix(id, &path)?;
            let size = super::read::stat_if_exists(self.fs.as_ref(), &path)?
                .ok_or_else(|| Error::NotFound { id: id.to_owned() })?
                .size;
            return Ok(SealReport {
                bytes_before: size,
                bytes_after: size,
                frames_before: 0,
                frames_after: 0,
                rewritten: false,
            });
        }
        // The frame layout first, so the file's bytes are freed before its events are loaded.
        let layout = self.frame_layout(id, &path)?;
        let unchanged = SealReport {
            bytes_before: layout.bytes,
            bytes_after: layout.bytes,
            frames_before: layout.frames,
            frames_after: layout.frames,
            rewritten: false,
        };
        if policy.is_some_and(|p| !p.accepts(layout.frames, layout.bytes)) {
            return Ok(unchanged);
        }
        let prefix = self.sealable_prefix(id, &path)?;
        let batches = turn_batches(&prefix.events);
        let frames_after = 1 + batches.len();
        if layout.frames <= frames_after {
            // Already sealed: rewriting would not reduce the frames.
            return Ok(unchanged);
        }

        let session_dir = path
            .parent()
            .ok_or_else(|| Error::UnnameableHeader { path: path.clone() })?
            .to_path_buf();
        let (tmp, file) = self.create_temp(&path)?;
        let outcome = self.publish_sealed(
            id,
            &path,
            &tmp,
            file,
            &layout.header_frame,
            &batches,
            prefix,
        );
        let bytes_after = match outcome {
            Ok(n) => n,
            Err(e) => {
                let _ = self.fs.remove_file(&tmp);
                return Err(e);
            }
        };
        pause_point(SealStep::Renamed);
        self.sync_dir(&session_dir)?;
        Ok(SealReport {
            bytes_before: layout.bytes,
            bytes_after,
            frames_before: layout.frames,
            frames_after,
            rewritten: true,
        })
    }

    /// Reads the log's frame layout: its size, its frame count and its header frame, which
    /// the sealed log keeps byte for byte (a log loads only when that frame holds the header
    /// line alone).
    fn frame_layout(&self, id: &str, path: &Path) -> Result<FrameLayout> {
        let Some((bytes, _)) = stable_read(self.fs.as_ref(), path)? else {
            return Err(Error::NotFound { id: id.to_owned() });
        };
        let scan = scan_zstd_frames(&bytes, None)?;
        if scan.torn_start.is_some() {
            return Err(Self::refuse(
                id,
                "the log has a torn tail (load it to repair first)",
            ));
        }
        let Some(first) = scan.frames.first() else {
            return Err(Error::EmptyLog { zstd: true });
        };
        let header_frame = &bytes[first.start..first.end];
        // A header frame holding more than the header line does not load either.
        if !is_one_line(&zstd_text(header_frame)?) {
            return Err(Error::ZstdHeaderFrameLines);
        }
        let header_frame = header_frame.to_vec();
        Ok(FrameLayout {
            bytes: bytes.len() as u64,
            frames: scan.frames.len(),
            header_frame,
        })
    }

    /// Writes the header frame and one frame per batch to the temporary file (one batch
    /// encoded at a time), syncs it, frees the original events, verifies the copy, and renames
    /// it over the log. Returns the sealed size.
    #[allow(clippy::too_many_arguments)]
    fn publish_sealed(
        &self,
        id: &str,
        path: &Path,
        tmp: &PathBuf,
        mut file: Box<dyn FsFile>,
        header_frame: &[u8],
        batches: &[Range<usize>],
        original: Prefix,
    ) -> Result<u64> {
        if !file.try_lock().map_err(|e| Error::io("flock", tmp, e))? {
            return Err(Error::Locked {
                id: id.to_owned(),
                path: path.to_path_buf(),
            });
        }
        pause_point(SealStep::TempCreated);
        let mut expected = Digest {
            header: original.header.value.to_json(),
            events: original.events.len(),
            records: LineDigest::default(),
        };
        let written = self.write_batches(
            file.as_mut(),
            tmp,
            header_frame,
            batches,
            &original,
            &mut expected.records,
        )?;
        file.sync().map_err(|e| Error::io("fsync", tmp, e))?;
        pause_point(SealStep::Synced);
        drop(original);
        verify_same(self.fs.as_ref(), id, tmp, &expected)?;
        pause_point(SealStep::Verified);
        self.fs
            .rename(tmp, path)
            .map_err(|e| Error::io("rename", tmp, e))?;
        drop(file);
        Ok(written)
    }
}

impl Inner {
    /// Writes the header frame and one frame per batch of `original`'s events to `file`, one
    /// batch encoded at a time, hashing every record written into `records`. Returns the bytes
    /// written.
    fn write_batches(
        &self,
        file: &mut dyn FsFile,
        tmp: &Path,
        header_frame: &[u8],
        batches: &[Range<usize>],
        original: &Prefix,
        records: &mut LineDigest,
    ) -> Result<u64> {
        let mut written = header_frame.len() as u64;
        write_all(file, header_frame).map_err(|e| Error::io("write", tmp, e))?;
        for (i, batch) in batches.iter().enumerate() {
            let text = batch_text(&original.events[batch.clone()], self.pack_chunks);
            records.lines(text.as_bytes());
            let frame = self.encode_text(&text)?;
            drop(text);
            write_all(file, &frame).map_err(|e| Error::io("write", tmp, e))?;
            written += frame.len() as u64;
            if i == batches.len() / 2 {
                pause_point(SealStep::HalfWritten);
            }
        }
        Ok(written)
    }
}

/// What [`Inner::frame_layout`] found.
struct FrameLayout {
    bytes: u64,
    frames: usize,
    header_frame: Vec<u8>,
}

/// The identity of a sealed log's content: the header's JSON text, the event count, and the
/// digest of its records (the lines after the header) as written, or as read back.
#[derive(Debug, PartialEq, Eq)]
struct Digest {
    header: String,
    events: usize,
    records: LineDigest,
}

/// Two 64-bit hashes (`foldhash`'s quality hasher under two fixed seeds) of a sequence of
/// lines, each hashed as its bytes with its newline, and the number of lines: what sealing
/// compares between the records it wrote and the records a load reads back from the copy.
#[derive(Clone)]
pub(crate) struct LineDigest {
    hashers: (
        foldhash::quality::FoldHasher<'static>,
        foldhash::quality::FoldHasher<'static>,
    ),
    lines: u64,
}

impl Default for LineDigest {
    fn default() -> LineDigest {
        use std::hash::BuildHasher;
        LineDigest {
            hashers: (
                foldhash::quality::FixedState::with_seed(0x5ea1_0001).build_hasher(),
                foldhash::quality::FixedState::with_seed(0x5ea1_0002).build_hasher(),
            ),
            lines: 0,
        }
    }
}

impl LineDigest {
    /// Hashes each line of `text`, which ends at the end of a line (a fragment after the last
    /// newline is hashed as one more line).
    pub(crate) fn lines(&mut self, text: &[u8]) {
        let mut start = 0;
        for end in memchr::memchr_iter(b'\n', text) {
            self.line(&text[start..=end]);
            start = end + 1;
        }
        if start < text.len() {
            self.line(&text[start..]);
        }
    }

    fn line(&mut self, line: &[u8]) {
        self.hashers.0.write(line);
        self.hashers.1.write(line);
        self.lines += 1;
    }

    /// The line count and the two hashes.
    fn finish(&self) -> (u64, u64, u64) {
        (self.lines, self.hashers.0.finish(), self.hashers.1.finish())
    }
}

impl PartialEq for LineDigest {
    fn eq(&self, other: &LineDigest) -> bool {
        self.finish() == other.finish()
    }
}

impl Eq for LineDigest {}

impl std::fmt::Debug for LineDigest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (lines, a, b) = self.finish();
        write!(f, "LineDigest({lines} lines, {a:016x}, {b:016x})")
    }
}

/// Re-reads the sealed temporary file as a load reads it and checks that it holds the same
/// header, the same number of events and exactly the records that were written (see
/// [`Digest`]).
fn verify_same(fs: &dyn Fs, id: &str, tmp: &Path, expected: &Digest) -> Result<()> {
    let mismatch = |what: &str| Inner::refuse(id, format!("the sealed copy differs: {what}"));
    let Some((reread, _)) = load_prefix(fs, tmp, true, None, true)? else {
        return Err(mismatch("the temporary file vanished"));
    };
    let mut reread = reread?;
    if reread.torn.is_some() || reread.invalid.is_some() {
        return Err(mismatch("the copy does not read back cleanly"));
    }
    let actual = Digest {
        header: reread.header.value.to_json(),
        events: reread.events.len(),
        records: reread.lines.take().unwrap_or_default(),
    };
    drop(reread);
    if actual.header != expected.header {
        return Err(mismatch("header"));
    }
    if actual != *expected {
        return Err(mismatch("events"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use session_core::json::Value;

    fn ev(ty: &str, seq: u64) -> Event {
        let data = Value::parse(r#"{"turn":1}"#).unwrap();
        Event::appended(ty, seq, 0, data, None, None)
    }

    #[test]
    fn batches_split_at_turn_start() {
        let events = vec![
            ev("session/title", 0),
            ev("turn/start", 1),
            ev("user/message", 2),
            ev("turn/end", 3),
            ev("turn/start", 4),
            ev("turn/end", 5),
        ];
        let sizes: Vec<usize> = turn_batches(&events)
            .iter()
            .map(ExactSizeIterator::len)
            .collect();
        assert_eq!(sizes, vec![1, 3, 2]);
        assert_eq!(turn_batches(&events[1..]).len(), 2);
        assert!(turn_batches(&[]).is_empty());
        assert!(open_turn(&events).is_none());
        assert_eq!(open_turn(&events[..5]).map(Event::seq), Some(4));
    }
}
