//! Sealing: rewriting a closed Zstandard log into one frame per turn.
//!
//! The live writer emits one frame per write-behind batch, so a long session ends up as many
//! small frames, which decode slower and compress worse than a few large ones. Sealing rewrites
//! a session that is at rest (no open turn, no torn tail, no live writer) into the header frame,
//! verbatim, followed by one frame per turn: a new batch starts at every `turn/start`, and the
//! events before the first turn form their own batch. Chunk rows are packed as configured.
//!
//! The rewrite is crash-safe: the new content is written and synced under
//! `<final>.<12 hex>.tmp` (0600) in the session directory, read back and compared event by event
//! with the original, renamed over the log, and the directory is synced. Until the rename the
//! original is untouched; a failure removes the temporary file. The writer lock of the log is
//! held throughout, so no writer can append meanwhile. Plain logs have no frames: sealing them
//! validates the same preconditions and leaves the file byte-for-byte as it is.

use std::io;
use std::path::{Path, PathBuf};

use session_core::Event;

use super::fs::{Fs, FsFile, write_all};
use super::read::{Prefix, load_prefix, stable_read, zstd_text};
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

/// Splits `events` into the batches of a sealed log: one per turn, each starting at a
/// `turn/start`; events before the first turn form their own batch.
pub(crate) fn turn_batches(events: &[Event]) -> Vec<&[Event]> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, event) in events.iter().enumerate() {
        if i > start && event.event_type() == "turn/start" {
            out.push(&events[start..i]);
            start = i;
        }
    }
    if start < events.len() {
        out.push(&events[start..]);
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

/// The JSON text of every event, for the identity check.
fn event_texts(events: &[Event]) -> Vec<String> {
    events.iter().map(Event::to_json).collect()
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
        let Some((prefix, _)) = load_prefix(self.fs.as_ref(), path, zstd)? else {
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
        let prefix = self.sealable_prefix(id, &path)?;
        let Some((bytes, _)) = stable_read(self.fs.as_ref(), &path)? else {
            return Err(Error::NotFound { id: id.to_owned() });
        };
        let bytes_before = bytes.len() as u64;
        if self.compression == Compression::None {
            drop(lock);
            return Ok(SealReport {
                bytes_before,
                bytes_after: bytes_before,
                frames_before: 0,
                frames_after: 0,
                rewritten: false,
            });
        }
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

        // The header frame stays as it is when it holds the header line alone.
        let header_frame = &bytes[first.start..first.end];
        let header_plain = zstd_text(header_frame)?;
        let mut content = if header_plain.ends_with(b"\n")
            && !header_plain[..header_plain.len() - 1].contains(&b'\n')
        {
            header_frame.to_vec()
        } else {
            let text = zstd_text(&bytes)?;
            let line_end = text.iter().position(|&b| b == b'\n').unwrap_or(text.len());
            let mut line = String::from_utf8_lossy(&text[..line_end]).into_owned();
            line.push('\n');
            self.encode_text(&line)?
        };
        let batches = turn_batches(&prefix.events);
        for batch in &batches {
            content.extend(self.encode_batch(batch)?);
        }
        let frames_after = 1 + batches.len();

        let session_dir = path
            .parent()
            .ok_or_else(|| Error::UnnameableHeader { path: path.clone() })?
            .to_path_buf();
        let (tmp, file) = self.create_temp(&path)?;
        let outcome = self.publish_sealed(id, &path, &tmp, file, &content, &prefix);
        if let Err(e) = outcome {
            let _ = self.fs.remove_file(&tmp);
            return Err(e);
        }
        let synced = self.sync_dir(&session_dir);
        drop(lock);
        synced?;
        Ok(SealReport {
            bytes_before,
            bytes_after: content.len() as u64,
            frames_before: scan.frames.len(),
            frames_after,
            rewritten: true,
        })
    }

    /// Writes, syncs and verifies the temporary file, then renames it over the log.
    fn publish_sealed(
        &self,
        id: &str,
        path: &Path,
        tmp: &PathBuf,
        mut file: Box<dyn FsFile>,
        content: &[u8],
        original: &Prefix,
    ) -> Result<()> {
        if !file.try_lock().map_err(|e| Error::io("flock", tmp, e))? {
            return Err(Error::Locked {
                id: id.to_owned(),
                path: path.to_path_buf(),
            });
        }
        write_all(file.as_mut(), content).map_err(|e| Error::io("write", tmp, e))?;
        file.sync().map_err(|e| Error::io("fsync", tmp, e))?;
        verify_same(self.fs.as_ref(), id, tmp, original)?;
        self.fs
            .rename(tmp, path)
            .map_err(|e| Error::io("rename", tmp, e))?;
        drop(file);
        Ok(())
    }
}

/// Re-reads the sealed temporary file and checks that it holds the same header and the same
/// events, compared by their JSON text.
fn verify_same(fs: &dyn Fs, id: &str, tmp: &Path, original: &Prefix) -> Result<()> {
    let mismatch = |what: &str| Inner::refuse(id, format!("the sealed copy differs: {what}"));
    let Some((reread, _)) = load_prefix(fs, tmp, true)? else {
        return Err(mismatch("the temporary file vanished"));
    };
    let reread = reread?;
    if reread.header.value.to_json() != original.header.value.to_json() {
        return Err(mismatch("header"));
    }
    if reread.torn.is_some() || reread.invalid.is_some() {
        return Err(mismatch("the copy does not read back cleanly"));
    }
    if event_texts(&reread.events) != event_texts(&original.events) {
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
        let sizes: Vec<usize> = turn_batches(&events).iter().map(|b| b.len()).collect();
        assert_eq!(sizes, vec![1, 3, 2]);
        assert_eq!(turn_batches(&events[1..]).len(), 2);
        assert!(turn_batches(&[]).is_empty());
        assert!(open_turn(&events).is_none());
        assert_eq!(open_turn(&events[..5]).map(Event::seq), Some(4));
    }
}
