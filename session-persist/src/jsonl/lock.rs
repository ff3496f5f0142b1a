//! Single-writer ownership of session logs.
//!
//! # Scope of the lock
//!
//! A writer holds an exclusive advisory lock (`flock`) on the log file itself, from the moment
//! its session is opened for writing ([`Backend::acquire`]: the coordinator calls it when it
//! loads a session to resume or append to it) until the session is released
//! ([`Backend::release`], when the coordinator retires the session) or the backend closes.
//!
//! * **Other processes**: a second writer cannot take the lock and fails with
//!   `session "<id>" is locked by another writer` when it opens the session, before writing a
//!   byte. The kernel drops the lock when the holder exits, also when it is killed.
//! * **This process**: `flock` locks belong to open file descriptions, so a second backend
//!   instance in the same process opens the log again and is refused exactly like another
//!   process. Within one instance (its clones included) a session is opened once: a second
//!   opening, such as a second coordinator built over the same instance, is refused with the
//!   same error until the first releases it; a coordinator in turn opens each session once and
//!   refuses a second live session of an id it already writes.
//! * **A new session** has no file to lock before its first append publishes it (nothing is
//!   created before then). Within one instance it is opened once (an in-memory reservation);
//!   across instances and processes, a first publication locks its temporary file before
//!   linking it into place, so the published log is locked from the moment it becomes visible,
//!   and linking never overwrites: of two writers creating the same session, the second is
//!   refused at publication (`refusing to materialize "<id>": a log already exists on disk`)
//!   and writes nothing.
//! * **Network file systems are not supported**: `flock` on NFS, SMB and similar mounts is
//!   emulated or ignored, so two machines writing one root are not excluded.
//!
//! # Tail checks
//!
//! Opening for writing checks, under the lock, that the stored log is exactly the one the
//! writer's session was loaded from (same file, length and revision); a stale writer gets
//! [`Error::StaleWriter`] naming both positions and writes nothing. Before every write the
//! owner checks that the path still names the locked file and that its length is what the owner
//! last wrote: a log that disappeared is never re-created, and a log that was replaced or changed
//! by someone else is not appended to.
//!
//! [`Backend::acquire`]: crate::Backend::acquire
//! [`Backend::release`]: crate::Backend::release

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use super::fs::{Fs, FsFile, Stat};
use crate::error::{Error, Result};

/// The open, locked log of one session.
pub(crate) struct Writer {
    pub(crate) id: String,
    pub(crate) path: PathBuf,
    pub(crate) file: Box<dyn FsFile>,
    /// The file the lock is on.
    pub(crate) identity: Stat,
    /// The length of the log as this writer last left it.
    pub(crate) len: u64,
    /// A failed rollback left bytes beyond `len`; they are cut before the next write.
    pub(crate) rollback_pending: bool,
    /// Whether a session was opened for writing on this writer ([`Writers::open_at`], or the
    /// publication of a session opened with [`Writers::reserve`]): a second opening through
    /// this instance is refused. A log written without opening (a tool copying logs through the
    /// backend) can still be opened once.
    pub(crate) opened: bool,
    /// Batches this writer appended (its first publication counts as one): the auto-seal
    /// policy's trigger (see `auto_seal`).
    pub(crate) batches: usize,
}

impl Writer {
    /// Checks that the path still names the locked file; with `check_len`, also that nobody
    /// changed its length. Retries a pending rollback first.
    pub(crate) fn verify(&mut self, fs: &dyn Fs, check_len: bool) -> Result<()> {
        let current = match fs.stat(&self.path) {
            Ok(s) => s,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(Error::Vanished {
                    id: self.id.clone(),
                    path: self.path.clone(),
                });
            }
            Err(e) => return Err(Error::io("stat", &self.path, e)),
        };
        if !current.same_file(&self.identity) {
            return Err(self.replaced());
        }
        if self.rollback_pending {
            self.truncate(self.len)?;
            self.rollback_pending = false;
        }
        if check_len {
            let size = self
                .file
                .stat()
                .map_err(|e| Error::io("fstat", &self.path, e))?
                .size;
            if size != self.len {
                return Err(self.replaced());
            }
        }
        Ok(())
    }

    /// Truncates the log to `len` bytes and makes that durable.
    pub(crate) fn truncate(&mut self, len: u64) -> Result<()> {
        self.file
            .set_len(len)
            .map_err(|e| Error::io("ftruncate", &self.path, e))?;
        self.file
            .sync()
            .map_err(|e| Error::io("fsync", &self.path, e))?;
        self.len = len;
        Ok(())
    }

    /// Checks that the locked log is at revision `expected` (the revision the writer's session
    /// was loaded from), and adopts its length as the writer's position.
    fn check_at(&mut self, expected: &str) -> Result<()> {
        let stat = self
            .file
            .stat()
            .map_err(|e| Error::io("fstat", &self.path, e))?;
        let stored = stat.revision_text();
        if stored == expected && self.len != stat.size {
            // The loaded log holds bytes this writer did not write.
            return Err(self.replaced());
        }
        if stored != expected {
            return Err(Error::StaleWriter {
                id: self.id.clone(),
                path: self.path.clone(),
                loaded_len: revision_len(expected),
                loaded: expected.to_owned(),
                stored_len: stat.size,
                stored,
            });
        }
        self.len = stat.size;
        Ok(())
    }

    fn replaced(&self) -> Error {
        Error::Replaced {
            id: self.id.clone(),
            path: self.path.clone(),
        }
    }
}

/// The length field of a JSONL revision text (`dev:ino:size:mtimeNs:ctimeNs`).
fn revision_len(revision: &str) -> Option<u64> {
    revision.split(':').nth(2)?.parse().ok()
}

/// A shared, lockable writer.
pub(crate) type SharedWriter = Arc<Mutex<Writer>>;

/// Locks a writer, recovering from poisoning (a panic elsewhere cannot corrupt the state: every
/// field is updated only after the call it describes succeeded).
pub(crate) fn lock_writer(w: &SharedWriter) -> std::sync::MutexGuard<'_, Writer> {
    w.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The writers of one backend instance, by log path (with their session ids).
#[derive(Default)]
pub(crate) struct Writers {
    map: Mutex<HashMap<PathBuf, (String, SharedWriter)>>,
    /// New sessions opened for writing before their first publication, by log path (with
    /// their session ids).
    creating: Mutex<HashMap<PathBuf, String>>,
}

impl Writers {
    fn creating(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, String>> {
        self.creating.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Opens the new session `id` (no log yet) for writing through this instance: a second
    /// opening through the instance is refused until the first is released. Nothing on disk
    /// can be locked yet; the first publication locks the log it links into place.
    pub(crate) fn reserve(&self, id: &str, path: &Path) -> Result<()> {
        let mut creating = self.creating();
        if creating.contains_key(path) {
            return Err(Error::Locked {
                id: id.to_owned(),
                path: path.to_path_buf(),
            });
        }
        creating.insert(path.to_path_buf(), id.to_owned());
        Ok(())
    }

    /// Whether the new session at `path` was opened for writing ([`Writers::reserve`]); the
    /// reservation is consumed by its publication.
    pub(crate) fn take_reservation(&self, path: &Path) -> bool {
        self.creating().remove(path).is_some()
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, (String, SharedWriter)>> {
        self.map.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The writer of an existing log: the one this instance holds, or the log opened (never
    /// created) and locked now.
    pub(crate) fn acquire(&self, fs: &dyn Fs, id: &str, path: &Path) -> Result<SharedWriter> {
        // Held across the open so that two threads of this instance cannot race for the lock.
        let mut map = self.map();
        if let Some((_, w)) = map.get(path) {
            return Ok(w.clone());
        }
        let file = match fs.open_append(path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(Error::Vanished {
                    id: id.to_owned(),
                    path: path.to_path_buf(),
                });
            }
            Err(e) => return Err(Error::io("open", path, e)),
        };
        if !file.try_lock().map_err(|e| Error::io("flock", path, e))? {
            return Err(Error::Locked {
                id: id.to_owned(),
                path: path.to_path_buf(),
            });
        }
        let identity = file.stat().map_err(|e| Error::io("fstat", path, e))?;
        let writer = Arc::new(Mutex::new(Writer {
            id: id.to_owned(),
            path: path.to_path_buf(),
            file,
            identity,
            len: identity.size,
            rollback_pending: false,
            opened: false,
            batches: 0,
        }));
        map.insert(path.to_path_buf(), (id.to_owned(), writer.clone()));
        Ok(writer)
    }

    /// Opens the existing log of `id` for writing: takes its lock (or uses the writer this
    /// instance already holds, unless the session was opened on it already: then it is
    /// [`Error::Locked`]) and checks, under the lock, that the log is exactly at revision
    /// `expected`. On a mismatch nothing is kept: a lock taken here is released.
    pub(crate) fn open_at(
        &self,
        fs: &dyn Fs,
        id: &str,
        path: &Path,
        expected: &str,
    ) -> Result<SharedWriter> {
        let held = self.map().contains_key(path);
        let shared = self.acquire(fs, id, path)?;
        let checked = {
            let mut writer = lock_writer(&shared);
            if writer.opened {
                // Another user of this instance (a second service over it) opened the session.
                return Err(Error::Locked {
                    id: id.to_owned(),
                    path: path.to_path_buf(),
                });
            }
            let checked = writer
                .verify(fs, false)
                .and_then(|()| writer.check_at(expected));
            writer.opened = checked.is_ok();
            checked
        };
        if let Err(e) = checked {
            if !held {
                self.map().remove(path);
            }
            return Err(e);
        }
        Ok(shared)
    }

    /// Registers the writer of a log this instance just published.
    pub(crate) fn insert(&self, writer: Writer) -> SharedWriter {
        let key = (writer.path.clone(), writer.id.clone());
        let shared = Arc::new(Mutex::new(writer));
        self.map().insert(key.0, (key.1, shared.clone()));
        shared
    }

    /// Removes the writers of session `id` from the instance and returns them: their locks are
    /// held until the caller drops them.
    pub(crate) fn take(&self, id: &str) -> Vec<SharedWriter> {
        self.creating().retain(|_, owner| owner != id);
        let mut map = self.map();
        let paths: Vec<PathBuf> = map
            .iter()
            .filter(|(_, (owner, _))| owner == id)
            .map(|(path, _)| path.clone())
            .collect();
        paths
            .iter()
            .filter_map(|path| map.remove(path).map(|(_, w)| w))
            .collect()
    }

    /// Drops every writer.
    pub(crate) fn clear(&self) {
        self.creating().clear();
        self.map().clear();
    }
}
