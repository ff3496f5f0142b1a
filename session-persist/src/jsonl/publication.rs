//! First publications whose log reached the disk but whose directory `fsync` failed.
//!
//! [`materialize`](super::Inner::materialize) links a fully written and fsynced log into place,
//! then fsyncs the session directory. When that last `fsync` fails the log is on disk and this
//! instance holds its writer, but the batch must not be acknowledged: the directory entry may
//! not survive a power loss. The publication is remembered here, and the next publication of the
//! same log (the coordinator retries with the same first seq, possibly with more events) re-syncs
//! every directory of the path and appends only the events after the published ones, instead of
//! refusing the log it wrote itself as "already exists".
//!
//! Another instance (the next process) that appends to such a log must not rely on its entry
//! either: the first append of each log by an instance fsyncs the log's directories once, unless
//! this instance published the log itself.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use session_core::{Event, SessionHeader};

use super::Inner;
use super::lock::lock_writer;
use super::write::append_bytes;
use crate::error::{Error, Result};

/// A log this instance published without a durable directory entry.
pub(crate) struct Unsynced {
    /// The session id.
    pub(crate) id: String,
    /// The events of the published batch (their first seq is the log's first).
    pub(crate) events: Vec<Event>,
    /// The published length in bytes.
    pub(crate) bytes: u64,
}

/// The unsynced publications of one backend instance, by log path, and the logs whose
/// directories it synced.
#[derive(Default)]
pub(crate) struct UnsyncedPublications {
    map: Mutex<HashMap<PathBuf, Unsynced>>,
    /// Logs whose directory entries this instance made durable, with their session ids.
    durable: Mutex<HashMap<PathBuf, String>>,
}

impl UnsyncedPublications {
    fn durable(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, String>> {
        self.durable.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records that the directory entries of `path` (the log of session `id`) are durable.
    pub(crate) fn mark_durable(&self, id: &str, path: &Path) {
        self.durable().insert(path.to_path_buf(), id.to_owned());
    }

    fn is_durable(&self, path: &Path) -> bool {
        self.durable().contains_key(path)
    }

    /// Forgets everything about session `id` (its writer was released): a later write by this
    /// instance starts over as a new writer would.
    pub(crate) fn release(&self, id: &str) {
        self.durable().retain(|_, owner| owner != id);
        self.map().retain(|_, u| u.id != id);
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, Unsynced>> {
        self.map.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Remembers a publication whose directory `fsync` failed.
    pub(crate) fn insert(&self, path: PathBuf, published: Unsynced) {
        self.map().insert(path, published);
    }

    /// The published events of `path` when it is pending, with its length.
    fn get(&self, path: &Path) -> Option<(Vec<Event>, u64)> {
        self.map().get(path).map(|u| (u.events.clone(), u.bytes))
    }

    fn remove(&self, path: &Path) {
        self.map().remove(path);
    }
}

/// The error of a publication whose log is on disk but whose directory `fsync` failed.
pub(crate) fn not_durable(
    meta: &SessionHeader,
    path: &Path,
    events: &[Event],
    bytes: u64,
    source: Error,
) -> Error {
    let first = events.first().map_or(0, Event::seq);
    let last = events.last().map_or(first, Event::seq);
    Error::PublicationNotDurable {
        id: meta.id.to_string(),
        path: path.to_path_buf(),
        bytes,
        seqs: (first, last),
        source: Box::new(source),
    }
}

impl Inner {
    /// Completes a pending publication of `path` (see the module documentation). `None` when
    /// `path` has none.
    pub(crate) fn resume_publication(
        &self,
        meta: &SessionHeader,
        path: &Path,
        dirs: &[&Path],
        events: &[Event],
    ) -> Option<Result<()>> {
        let (published, bytes) = self.unsynced.get(path)?;
        Some(self.finish_publication(meta, path, dirs, events, &published, bytes))
    }

    fn finish_publication(
        &self,
        meta: &SessionHeader,
        path: &Path,
        dirs: &[&Path],
        events: &[Event],
        published: &[Event],
        bytes: u64,
    ) -> Result<()> {
        // Only the same batch, possibly grown, continues the published log; anything else is a
        // different session state than the one on disk.
        if events.len() < published.len() || events[..published.len()] != *published {
            return Err(Error::AlreadyMaterialized {
                id: meta.id.to_string(),
            });
        }
        let shared = self.writers.acquire(self.fs.as_ref(), &meta.id, path)?;
        let mut writer = lock_writer(&shared);
        writer.verify(self.fs.as_ref(), true)?;
        if writer.len != bytes {
            // Released and since written by someone else: not the log this instance published.
            return Err(Error::Replaced {
                id: meta.id.to_string(),
                path: path.to_path_buf(),
            });
        }
        for dir in dirs {
            if let Err(e) = self.sync_dir(dir) {
                return Err(not_durable(meta, path, published, bytes, e));
            }
        }
        let rest = &events[published.len()..];
        if !rest.is_empty() {
            let encoded = self.encode_batch(rest)?;
            append_bytes(&mut writer, &encoded)?;
        }
        self.unsynced.remove(path);
        self.unsynced.mark_durable(&meta.id, path);
        Ok(())
    }

    /// The directories whose entries lead to `path`, outermost first: the root's parent, the
    /// root, the project and the session directory.
    pub(crate) fn dir_chain<'a>(&'a self, path: &'a Path) -> Option<[&'a Path; 4]> {
        let session_dir = path.parent()?;
        let project_dir = session_dir.parent()?;
        let root_parent = self.root.parent().unwrap_or(&self.root);
        Some([root_parent, self.root.as_path(), project_dir, session_dir])
    }

    /// Before the first append of this instance to a log it did not publish: fsyncs the log's
    /// directories, so that an entry a failed publication left unsynced is durable before
    /// anything appended to it is acknowledged.
    pub(crate) fn ensure_durable_entry(&self, id: &str, path: &Path) -> Result<()> {
        if self.unsynced.is_durable(path) {
            return Ok(());
        }
        if let Some(dirs) = self.dir_chain(path) {
            for dir in dirs {
                self.sync_dir(dir)?;
            }
        }
        self.unsynced.mark_durable(id, path);
        Ok(())
    }
}
