//! Writing logs: batch encoding, durable first publication and append with rollback.

use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};

use session_core::chunk_rows::write_batch_lines;
use session_core::{Event, SessionHeader};

use super::Inner;
use super::frames::encode_frame;
use super::fs::write_all;
use super::header_line::to_header_line;
use super::layout::file_name;
use super::lock::{Writer, lock_writer};
use super::publication::{Unsynced, not_durable};
use super::read::stat_if_exists;
use super::{Compression, layout};
use crate::error::{Error, Result};

/// Mode of directories the backend creates.
const DIR_MODE: u32 = 0o700;
/// Mode of the temporary file of a first publication.
const TEMP_MODE: u32 = 0o600;

/// The logical text of one batch: its records (packed when `pack`), each ending in `\n`.
pub(crate) fn batch_text(events: &[Event], pack: bool) -> String {
    let mut out = String::with_capacity(events.len() * 128);
    write_batch_lines(events, pack, &mut out);
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    out
}

/// Twelve lowercase hex digits from six random bytes (the random leading half of a v4 UUID).
fn random_hex12() -> String {
    let mut hex = uuid::Uuid::new_v4().simple().to_string();
    hex.truncate(12);
    hex
}

/// Whether `name` is the temporary file of a first publication
/// (`session.jsonl[.zstd].<12 hex>.tmp`).
pub(crate) fn is_temp_name(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("session.jsonl.") else {
        return false;
    };
    let rest = rest.strip_prefix("zstd.").unwrap_or(rest);
    let Some(hex) = rest.strip_suffix(".tmp") else {
        return false;
    };
    hex.len() == 12 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

impl Inner {
    /// Encodes bytes of the physical encoding from logical text.
    pub(crate) fn encode_text(&self, text: &str) -> Result<Vec<u8>> {
        match self.compression {
            Compression::None => Ok(text.as_bytes().to_vec()),
            Compression::Zstd => encode_frame(text.as_bytes()),
        }
    }

    /// One append batch in the physical encoding: raw lines, or one checksummed frame.
    pub(crate) fn encode_batch(&self, events: &[Event]) -> Result<Vec<u8>> {
        self.encode_text(&batch_text(events, self.pack_chunks))
    }

    /// A whole new log: the header (its own frame) and the first batch.
    fn encode_new_log(&self, meta: &SessionHeader, events: &[Event]) -> Result<Vec<u8>> {
        let mut header = to_header_line(meta);
        header.push('\n');
        let mut out = self.encode_text(&header)?;
        out.extend(self.encode_batch(events)?);
        Ok(out)
    }

    pub(crate) fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.fs
            .sync_dir(dir)
            .map_err(|e| Error::io("fsync", dir, e))
    }

    /// Creates one directory (mode 0700); an existing directory is fine.
    fn ensure_dir(&self, dir: &Path) -> Result<()> {
        match self.fs.create_dir(dir, DIR_MODE) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => match self.fs.stat(dir) {
                Ok(s) if s.is_dir => Ok(()),
                _ => Err(Error::io("mkdir", dir, e)),
            },
            Err(e) => Err(Error::io("mkdir", dir, e)),
        }
    }

    /// Creates a directory and its missing ancestors (mode 0700).
    fn ensure_dir_all(&self, dir: &Path) -> Result<()> {
        let mut missing: Vec<PathBuf> = Vec::new();
        let mut at = Some(dir);
        while let Some(p) = at {
            match self.fs.stat(p) {
                Ok(s) if s.is_dir => break,
                Ok(_) => {
                    return Err(Error::io(
                        "mkdir",
                        p,
                        io::Error::from(io::ErrorKind::AlreadyExists),
                    ));
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    missing.push(p.to_path_buf());
                    at = p.parent();
                }
                Err(e) => return Err(Error::io("stat", p, e)),
            }
        }
        for p in missing.iter().rev() {
            self.ensure_dir(p)?;
        }
        Ok(())
    }

    /// Durable first publication of header plus first batch (see the crate documentation):
    /// every byte is written and synced under a temporary name, then hard-linked into place,
    /// which never overwrites an existing log.
    pub(crate) fn materialize(&self, meta: &SessionHeader, events: &[Event]) -> Result<()> {
        self.materialize_batches(meta, events, std::slice::from_ref(&(0..events.len())))
    }

    /// [`Inner::materialize`] of a log whose events are several batches (`batches`, checked by
    /// the caller): the header frame, then one frame (or run of lines) per batch, all written
    /// and synced under the temporary name before the one link that publishes them. The header
    /// and the first batch are encoded before anything is touched, as for one batch; each later
    /// batch is encoded right before it is written, so only one batch's encoding is held.
    pub(crate) fn materialize_batches(
        &self,
        meta: &SessionHeader,
        events: &[Event],
        batches: &[Range<usize>],
    ) -> Result<()> {
        let path = self.path_for(meta)?;
        let (Some(session_dir), Some(project_dir)) =
            (path.parent(), path.parent().and_then(Path::parent))
        else {
            return Err(Error::UnnameableHeader { path });
        };
        let root_parent = self.root.parent().unwrap_or(&self.root);
        let dirs = [root_parent, self.root.as_path(), project_dir, session_dir];
        if let Some(resumed) = self.resume_publication(meta, &path, &dirs, events) {
            return resumed;
        }
        let opposite = session_dir.join(file_name(self.compression.opposite()));
        if self.exists(&opposite)? {
            return Err(self.mismatch(opposite));
        }
        let (first, later) = match batches.split_first() {
            Some((first, later)) => (first.clone(), later),
            None => (0..events.len(), &[][..]),
        };
        let content = self.encode_new_log(meta, &events[first])?;

        self.ensure_dir_all(&self.root)?;
        self.sync_dir(root_parent)?;
        self.check_private_dir(&self.root)?;
        self.ensure_dir(project_dir)?;
        self.check_private_dir(project_dir)?;
        self.sync_dir(&self.root)?;
        self.ensure_dir(session_dir)?;
        self.check_private_dir(session_dir)?;
        self.sync_dir(project_dir)?;
        if self.exists(&path)? {
            return Err(Error::AlreadyMaterialized {
                id: meta.id.to_string(),
            });
        }

        let (tmp, mut file) = self.create_locked_temp(meta, &path)?;
        let cleanup = |fs: &dyn super::fs::Fs| {
            let _ = fs.remove_file(&tmp);
        };
        let mut bytes = content.len() as u64;
        let mut written =
            write_all(file.as_mut(), &content).map_err(|e| Error::io("write", &tmp, e));
        drop(content);
        for batch in later {
            if written.is_err() {
                break;
            }
            written = self.encode_batch(&events[batch.clone()]).and_then(|frame| {
                bytes += frame.len() as u64;
                write_all(file.as_mut(), &frame).map_err(|e| Error::io("write", &tmp, e))
            });
        }
        let written = written.and_then(|()| file.sync().map_err(|e| Error::io("fsync", &tmp, e)));
        if let Err(e) = written {
            cleanup(self.fs.as_ref());
            return Err(e);
        }
        if let Err(e) = self.fs.hard_link(&tmp, &path) {
            cleanup(self.fs.as_ref());
            return Err(if e.kind() == io::ErrorKind::AlreadyExists {
                Error::AlreadyMaterialized {
                    id: meta.id.to_string(),
                }
            } else {
                Error::io("link", &tmp, e)
            });
        }
        let identity = file.stat().map_err(|e| Error::io("fstat", &path, e));
        let synced = self.sync_dir(session_dir);
        cleanup(self.fs.as_ref());
        let identity = identity?;
        let opened = self.writers.take_reservation(&path);
        self.writers.insert(Writer {
            id: meta.id.to_string(),
            path: path.clone(),
            file,
            identity,
            len: bytes,
            rollback_pending: false,
            opened,
            batches: batches.len().max(1),
        });
        if let Err(e) = synced {
            self.unsynced.insert(
                path.clone(),
                Unsynced {
                    id: meta.id.to_string(),
                    events: events.to_vec(),
                    bytes,
                },
            );
            return Err(not_durable(meta, &path, events, bytes, e));
        }
        self.unsynced.mark_durable(&meta.id, &path);
        Ok(())
    }

    /// A temporary file for the first publication of `path`, created exclusively and locked.
    /// Another backend opening the root sweeps unlocked temporary files away (those of
    /// interrupted publications), and may open, lock or remove a new one in the instant between
    /// its creation and its lock: then this makes another. The returned file is locked and is
    /// still the one its name links to, so no sweep touches it until it is published.
    fn create_locked_temp(
        &self,
        meta: &SessionHeader,
        path: &Path,
    ) -> Result<(PathBuf, Box<dyn super::fs::FsFile>)> {
        const ATTEMPTS: usize = 16;
        for _ in 0..ATTEMPTS {
            let (tmp, file) = self.create_temp(path)?;
            let locked = match file.try_lock() {
                Ok(locked) => locked,
                Err(e) => {
                    let _ = self.fs.remove_file(&tmp);
                    return Err(Error::io("flock", &tmp, e));
                }
            };
            if !locked {
                // A sweep holds it and removes it.
                continue;
            }
            let ours = file.stat().map_err(|e| Error::io("fstat", &tmp, e))?;
            match stat_if_exists(self.fs.as_ref(), &tmp)? {
                Some(named) if named.same_file(&ours) => return Ok((tmp, file)),
                // A sweep removed it before the lock.
                _ => {}
            }
        }
        Err(Error::Locked {
            id: meta.id.to_string(),
            path: path.to_path_buf(),
        })
    }

    /// Creates `<final>.<12 hex>.tmp` exclusively with mode 0600.
    pub(crate) fn create_temp(&self, path: &Path) -> Result<(PathBuf, Box<dyn super::fs::FsFile>)> {
        let mut attempts = 0;
        loop {
            let mut name = path.as_os_str().to_owned();
            name.push(format!(".{}.tmp", random_hex12()));
            let tmp = PathBuf::from(name);
            match self.fs.create_new(&tmp, TEMP_MODE) {
                Ok(f) => return Ok((tmp, f)),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempts < 8 => {
                    attempts += 1;
                }
                Err(e) => return Err(Error::io("open", &tmp, e)),
            }
        }
    }

    /// Appends one batch to an existing log (never creating it).
    pub(crate) fn append(&self, meta: &SessionHeader, events: &[Event]) -> Result<()> {
        let path = self.path_for(meta)?;
        self.check_session_dir(&path)?;
        let bytes = self.encode_batch(events)?;
        let shared = self.writers.acquire(self.fs.as_ref(), &meta.id, &path)?;
        let mut writer = lock_writer(&shared);
        writer.verify(self.fs.as_ref(), true)?;
        self.ensure_durable_entry(&meta.id, &path)?;
        append_bytes(&mut writer, &bytes)
    }
}

/// Writes and syncs `bytes` at the end of the log. On failure the log is truncated back to its
/// previous length; if that fails too, both errors are reported (`AggregateError`) and the cut
/// is retried before the next write.
pub(crate) fn append_bytes(writer: &mut Writer, bytes: &[u8]) -> Result<()> {
    let before = writer.len;
    let path = writer.path.clone();
    let result = write_all(writer.file.as_mut(), bytes)
        .map_err(|e| Error::io("write", &path, e))
        .and_then(|()| writer.file.sync().map_err(|e| Error::io("fsync", &path, e)));
    match result {
        Ok(()) => {
            writer.len = before + bytes.len() as u64;
            writer.batches += 1;
            Ok(())
        }
        Err(error) => match writer.truncate(before) {
            Ok(()) => Err(error),
            Err(rollback) => {
                writer.rollback_pending = true;
                Err(Error::RollbackFailed {
                    path,
                    error: Box::new(error),
                    rollback: Box::new(rollback),
                })
            }
        },
    }
}

/// The path of the log for `meta`, as the layout names it.
pub(crate) fn log_path_of(
    root: &Path,
    meta: &SessionHeader,
    compression: Compression,
) -> Result<PathBuf> {
    layout::log_path(root, meta.cwd.as_deref(), &meta.id, compression)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_names() {
        let name = format!("session.jsonl.{}.tmp", random_hex12());
        assert!(is_temp_name(&name), "{name}");
        assert_ne!(random_hex12(), random_hex12());
        assert!(is_temp_name("session.jsonl.zstd.0123456789ab.tmp"));
        assert!(!is_temp_name("session.jsonl.zstd"));
        assert!(!is_temp_name("session.jsonl.0123456789AB.tmp"));
        assert!(!is_temp_name("session.jsonl.0123.tmp"));
        assert!(!is_temp_name("metadata.json"));
        assert_ne!(random_hex12(), random_hex12());
    }
}
