//! The JSONL / zstd-JSONL backend (`JsonlSessionPersistence`, name
//! `session-persistence-jsonl`), file-compatible with the reference.
//!
//! # Layout
//!
//! `<root>/<projectKey(cwd)>/<encodeSegment(id)>/session.jsonl.zstd` (default), or
//! `…/session.jsonl` with [`Compression::None`]; sessions without a cwd live under `_no-cwd`.
//! A root belongs to one encoding: an artifact of the other encoding is an error, never read.
//! Other files in session and project directories are ignored; a flat
//! `<project>/<name>.jsonl[.zstd]` file is refused.
//!
//! # Format
//!
//! Line 1 is the header (`toHeaderLine`), every later line one storage record: an event
//! verbatim, or a packed chunk row. The plain encoding is that text; the Zstandard encoding is
//! one checksummed frame for the header and one per append batch.
//!
//! # Durability
//!
//! The first append publishes header and batch atomically: directories are created (0700) and
//! their parents synced, the content is written and synced under
//! `<final>.<12 hex>.tmp` (0600, exclusive create), hard-linked to the final name (which never
//! overwrites), and the session directory is synced. If that last sync fails the log is on disk
//! but the batch is not acknowledged ([`Error::PublicationNotDurable`](crate::Error)); the
//! next publication of the same batch re-syncs the directories and appends only the events
//! after the published ones. Later appends write and sync one batch (the first append of an
//! instance to a log it did not publish syncs the log's directories first); on failure the log
//! is truncated back to its previous length, and a failed truncation is reported together with
//! the original error and retried before the next write.
//!
//! # Auto-seal
//!
//! When a session is released ([`Backend::release`], at retirement), a Zstandard log may be
//! sealed (one frame per turn, as [`JsonlBackend::seal`]) in the background under the released
//! writer's lock, as [`JsonlConfig::seal_policy`] decides ([`SealPolicy`]); see `auto_seal.rs`
//! for the lock, re-opening and crash rules.
//!
//! # Single writer and no silent re-creation
//!
//! A backend instance holds an exclusive advisory lock (`flock`) on every log it opened for
//! writing ([`Backend::acquire`]) or has written to, until [`Backend::release`] or
//! [`Backend::close`]; another writer gets `session "<id>" is locked by another writer` when it
//! opens the session, and writes nothing. Opening checks under the lock that the log is exactly
//! the one the writer's session was loaded from ([`Error::StaleWriter`] otherwise). The lock's
//! scope (this process, other processes, new sessions, network file systems) is described in
//! `lock.rs` and in RELIABILITY.md ("One writer per session"). Appends open the existing log
//! and never create it: a log that vanished under its writer is an error. Stale temporary
//! files of interrupted first publications (unlocked `session.jsonl*.<12 hex>.tmp`) are removed
//! when the backend opens.
//!
//! # Reading
//!
//! Torn tails are separated from corruption exactly as in the reference: see the scanner rules
//! on [`Backend::load_stored`]. Plain logs tolerate any damage after the last `turn/end`;
//! Zstandard logs tolerate only a torn final frame, whose complete records are recovered.
//!
//! Decompression is bounded: a frame may expand to at most [`MAX_FRAME_PLAINTEXT_BYTES`] and
//! a record (line) to at most [`MAX_RECORD_BYTES`]; a frame beyond either is refused with
//! [`Error::ZstdFrame`] naming its byte offset (its source is a [`PlaintextLimit`]). Frames are
//! never decoded into a buffer of their declared size: a frame whose plaintext bound exceeds
//! 4 MiB is streamed into the scanner in 1 MiB pieces, so a hostile frame costs at most one
//! record's limit of memory.
//!
//! All blocking file-system work runs on tokio's blocking pool, through the [`fs::Fs`] seam.

pub mod fs;
pub mod layout;

mod auto_seal;
mod frames;
mod header_line;
mod list;
mod lock;
mod pipeline;
mod publication;
mod read;
mod repair;
mod scanner;
mod seal;
mod stream;
mod write;

use std::collections::HashSet;
use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use session_core::json::Value;
use session_core::{Event, SessionHeader};

pub use auto_seal::{AutoSealOutcome, SEAL_PAUSE_ENV, SealPolicy, SealStep};
pub use frames::{
    FrameRange, FrameScan, MAX_FRAME_PLAINTEXT_BYTES, MAX_RECORD_BYTES, PlaintextLimit,
    PlaintextLimitKind, ZSTD_LEVEL, ZSTD_MAGIC, ZstdDecodeError, scan_zstd_frames,
};
pub use header_line::to_header_line;
pub use seal::SealReport;
pub use stream::LogStream;

use self::fs::{DirEntry, Fs, RealFs};
use self::header_line::{ParsedHeader, parse_lenient};
use self::layout::{LOGICAL_FILE_NAME, encode_segment, file_name, log_path, resolve_root};
use self::lock::Writers;
use self::read::{load_prefix, stable_read, stat_if_exists, zstd_text};
use crate::backend::{
    Backend, ListedSession, Location, RawArtifact, Revision, SharedEventSink, StoredPrefix,
    TornMarker, check_batches,
};
use crate::error::{Error, Result};

/// The backend's name, used in diagnostics.
pub const JSONL_BACKEND_NAME: &str = "session-persistence-jsonl";

/// The physical encoding of a JSONL root.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    /// `session.jsonl.zstd`: one checksummed Zstandard frame per batch (the default).
    #[default]
    Zstd,
    /// `session.jsonl`: plain text.
    None,
}

impl Compression {
    /// The other encoding.
    #[must_use]
    pub fn opposite(self) -> Compression {
        match self {
            Compression::Zstd => Compression::None,
            Compression::None => Compression::Zstd,
        }
    }

    /// The configuration spelling: `"zstd"` or `"none"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Compression::Zstd => "zstd",
            Compression::None => "none",
        }
    }
}

/// Configuration of a [`JsonlBackend`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonlConfig {
    /// The backend root; resolved to an absolute path once, at open.
    pub root: PathBuf,
    /// The physical encoding (default [`Compression::Zstd`]).
    pub compression: Compression,
    /// Whether appends pack runs of chunk deltas into chunk rows (default `true`). Reading
    /// always decodes packed rows.
    pub pack_chunks: bool,
    /// Whether a group- or world-writable root, project or session directory is accepted
    /// (default `false`: it is refused with [`Error::PermissiveDirectory`], because another
    /// local user could plant a link in it and redirect a session, or replace a session's log
    /// with one of their own). There is no exception for the sticky bit: a sticky
    /// world-writable root still lets anyone create a project directory in it.
    pub allow_permissive_dirs: bool,
    /// When a retired Zstandard session is sealed in the background (default
    /// [`SealPolicy::OnRetire`] with 4 KiB and 64 frames; see `auto_seal`).
    pub seal_policy: SealPolicy,
    /// Whether the instance scans the whole root (default `true`, as the reference does): on
    /// open it sweeps every session directory for stale temporary files, and its first
    /// operation checks every project and session directory for a stray flat-file log or an
    /// artifact of the other encoding, refusing the whole root on one. With `false` an
    /// operation on one session opens only that session's files: the root's own entries (a
    /// stray flat-file log there still refuses the root), and in each project directory
    /// `<id>.jsonl[.zstd]`, the session directory's log of either encoding and its temporary
    /// files (swept once). A problem of another session then does not affect it; listing still
    /// checks every entry it reads.
    pub scan_root: bool,
}

impl JsonlConfig {
    /// The default configuration for `root`: Zstandard, packed chunk rows, the default
    /// [`SealPolicy`].
    pub fn new(root: impl Into<PathBuf>) -> JsonlConfig {
        JsonlConfig {
            root: root.into(),
            compression: Compression::Zstd,
            pack_chunks: true,
            allow_permissive_dirs: false,
            seal_policy: SealPolicy::default(),
            scan_root: true,
        }
    }

    /// With the root-wide scan on (the default) or off (see [`JsonlConfig::scan_root`]).
    #[must_use]
    pub fn scan_root(mut self, scan: bool) -> JsonlConfig {
        self.scan_root = scan;
        self
    }

    /// With another auto-seal policy ([`SealPolicy::Never`] turns auto-seal off).
    #[must_use]
    pub fn seal_policy(mut self, policy: SealPolicy) -> JsonlConfig {
        self.seal_policy = policy;
        self
    }

    /// With group- or world-writable root, project and session directories accepted (or refused).
    #[must_use]
    pub fn allow_permissive_dirs(mut self, allow: bool) -> JsonlConfig {
        self.allow_permissive_dirs = allow;
        self
    }

    /// With another encoding.
    #[must_use]
    pub fn compression(mut self, compression: Compression) -> JsonlConfig {
        self.compression = compression;
        self
    }

    /// With chunk packing on or off.
    #[must_use]
    pub fn pack_chunks(mut self, pack: bool) -> JsonlConfig {
        self.pack_chunks = pack;
        self
    }
}

/// The outcome of the one-time encoding-ownership preflight.
enum Preflight {
    Pending,
    Passed,
    /// Rejected because of this opposite-encoding artifact (the rejection is kept).
    Rejected(PathBuf),
    /// Rejected because of this stray flat-file log (the rejection is kept).
    Flat(PathBuf),
}

/// Whether a file name is a flat-file session log (`<anything>.jsonl` or `.jsonl.zstd`).
pub(crate) fn is_flat_log_name(name: &std::ffi::OsStr) -> bool {
    let name = name.to_string_lossy();
    name.ends_with(layout::suffix(Compression::None))
        || name.ends_with(layout::suffix(Compression::Zstd))
}

/// The shared state of a backend instance; all methods block.
pub(crate) struct Inner {
    pub(crate) name: String,
    pub(crate) root: PathBuf,
    pub(crate) compression: Compression,
    pub(crate) pack_chunks: bool,
    pub(crate) fs: Arc<dyn Fs>,
    pub(crate) writers: Writers,
    /// Publications whose directory `fsync` failed (see `publication`).
    pub(crate) unsynced: publication::UnsyncedPublications,
    pub(crate) allow_permissive_dirs: bool,
    /// The one log file of a backend opened with [`JsonlBackend::open_file`].
    pub(crate) file: Option<PathBuf>,
    /// When retired sessions are sealed in the background.
    pub(crate) seal_policy: SealPolicy,
    /// The background seals running or finished.
    pub(crate) auto_seals: auto_seal::AutoSeals,
    preflight: Mutex<Preflight>,
    /// See [`JsonlConfig::scan_root`].
    scan_root: bool,
    /// The session directories swept of stale temporary files (without the root-wide scan).
    swept: Mutex<HashSet<PathBuf>>,
    closed: AtomicBool,
}

impl Inner {
    fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed {
                backend: self.name.clone(),
            });
        }
        Ok(())
    }

    pub(crate) fn mismatch(&self, path: PathBuf) -> Error {
        Error::EncodingMismatch {
            path,
            configured_zstd: self.compression == Compression::Zstd,
        }
    }

    /// Refuses a log whose session directory is group- or world-writable (see
    /// [`Inner::check_private_dir`]): another user could replace the log in it, with a link or
    /// with a log of their own.
    pub(crate) fn check_session_dir(&self, log: &Path) -> Result<()> {
        match log.parent() {
            Some(dir) if self.file.is_none() => self.check_private_dir(dir),
            _ => Ok(()),
        }
    }

    /// Refuses a group- or world-writable directory (see
    /// [`JsonlConfig::allow_permissive_dirs`]); a missing one is fine.
    pub(crate) fn check_private_dir(&self, dir: &Path) -> Result<()> {
        if self.allow_permissive_dirs {
            return Ok(());
        }
        match self.fs.mode(dir) {
            Ok(mode) if mode & 0o022 != 0 => Err(Error::PermissiveDirectory {
                path: dir.to_path_buf(),
                mode,
            }),
            Ok(_) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io("stat", dir, e)),
        }
    }

    /// Refuses writes to a file read in place.
    fn check_writable(&self) -> Result<()> {
        match &self.file {
            Some(path) => Err(Error::ReadOnlyFile { path: path.clone() }),
            None => Ok(()),
        }
    }

    /// The existence test of the reference: the file opens for reading.
    pub(crate) fn exists(&self, path: &Path) -> Result<bool> {
        match self.fs.open_read(path) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(Error::io("open", path, e)),
        }
    }

    /// The entries of a directory; a missing directory has none.
    pub(crate) fn dir_entries(&self, dir: &Path) -> Result<Vec<DirEntry>> {
        match self.fs.read_dir(dir) {
            Ok(entries) => Ok(entries),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(Error::io("scandir", dir, e)),
        }
    }

    /// Every project directory (directory entries of the root; links are not followed). The
    /// root and every project directory must be private (see [`Inner::check_private_dir`]).
    pub(crate) fn project_dirs(&self) -> Result<Vec<PathBuf>> {
        if self.file.is_some() {
            return Ok(Vec::new());
        }
        self.check_private_dir(&self.root)?;
        let dirs: Vec<PathBuf> = self
            .dir_entries(&self.root)?
            .into_iter()
            .filter(|e| e.is_dir)
            .map(|e| self.root.join(e.name))
            .collect();
        for dir in &dirs {
            self.check_private_dir(dir)?;
        }
        Ok(dirs)
    }

    /// The one-time scan of the root: a stray flat-file log directly in the root or in a
    /// project directory (`FlatLayout`, naming the file), or an artifact of the other encoding
    /// in a session directory, refuses every operation on the root. A rejection is kept; I/O
    /// failures are not, so a transient error does not poison the instance.
    pub(crate) fn preflight(&self) -> Result<()> {
        self.check_open()?;
        if self.file.is_some() {
            return Ok(());
        }
        let mut state = self
            .preflight
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match &*state {
            Preflight::Passed => return Ok(()),
            Preflight::Rejected(path) => return Err(self.mismatch(path.clone())),
            Preflight::Flat(path) => return Err(Error::FlatLayout { path: path.clone() }),
            Preflight::Pending => {}
        }
        let opposite = file_name(self.compression.opposite());
        let root_entries = self.dir_entries(&self.root)?;
        if let Some(flat) = root_entries
            .iter()
            .find(|e| e.is_file && is_flat_log_name(&e.name))
        {
            let path = self.root.join(&flat.name);
            *state = Preflight::Flat(path.clone());
            return Err(Error::FlatLayout { path });
        }
        if !self.scan_root {
            // Each operation checks the paths of its own session (`find_log`, materialize,
            // listing).
            *state = Preflight::Passed;
            return Ok(());
        }
        let projects = root_entries
            .into_iter()
            .filter(|e| e.is_dir)
            .map(|e| self.root.join(e.name));
        for project in projects {
            for entry in self.dir_entries(&project)? {
                if entry.is_file && is_flat_log_name(&entry.name) {
                    let path = project.join(&entry.name);
                    *state = Preflight::Flat(path.clone());
                    return Err(Error::FlatLayout { path });
                }
                if !entry.is_dir {
                    continue;
                }
                let candidate = project.join(&entry.name).join(opposite);
                if self.exists(&candidate)? {
                    *state = Preflight::Rejected(candidate.clone());
                    return Err(self.mismatch(candidate));
                }
            }
        }
        *state = Preflight::Passed;
        Ok(())
    }

    /// The log path of `meta`.
    pub(crate) fn path_for(&self, meta: &SessionHeader) -> Result<PathBuf> {
        write::log_path_of(&self.root, meta, self.compression)
    }

    /// `findLog`: the log of `id` in any project directory.
    pub(crate) fn find_log(&self, id: &str) -> Result<Option<PathBuf>> {
        if let Some(file) = &self.file {
            return Ok(self.exists(file)?.then(|| file.clone()));
        }
        let segment = encode_segment(id)?;
        let own = file_name(self.compression);
        let opposite = file_name(self.compression.opposite());
        let mut found: Option<PathBuf> = None;
        for project in self.project_dirs()? {
            for flat_suffix in [".jsonl", ".jsonl.zstd"] {
                let flat = project.join(format!("{segment}{flat_suffix}"));
                if self.exists(&flat)? {
                    return Err(Error::FlatLayout { path: flat });
                }
            }
            let dir = project.join(&segment);
            if !self.scan_root {
                self.sweep_once(&dir);
            }
            let other = dir.join(opposite);
            if self.exists(&other)? {
                return Err(self.mismatch(other));
            }
            let path = dir.join(own);
            if self.exists(&path)? {
                if found.is_some() {
                    return Err(Error::DuplicateId { id: id.to_owned() });
                }
                found = Some(path);
            }
        }
        if let Some(path) = &found {
            self.check_session_dir(path)?;
        }
        Ok(found)
    }

    /// `assertStoredIdentity`: the header names the requested id (when one was requested), and
    /// its id and cwd name this very file.
    pub(crate) fn assert_identity(
        &self,
        path: &Path,
        requested: Option<&str>,
        header: &ParsedHeader,
    ) -> Result<()> {
        let hid = &*header.meta.id;
        if let Some(id) = requested
            && hid != id
        {
            return Err(Error::IdentityMismatch {
                path: path.to_path_buf(),
                requested: id.to_owned(),
                header_id: hid.to_owned(),
            });
        }
        if self.file.is_some() {
            // Read in place: the file is where it was named, not where its header points.
            return Ok(());
        }
        let unnameable = || Error::UnnameableHeader {
            path: path.to_path_buf(),
        };
        let cwd = match header.cwd_value() {
            None => None,
            Some(Value::String(s)) => Some(&**s),
            // Not type-checked by the storage layer: the session header validation refuses it
            // with the reference's text (`session header cwd must be a string`).
            Some(_) => return Ok(()),
        };
        let expected =
            log_path(&self.root, cwd, hid, self.compression).map_err(|_| unnameable())?;
        if expected == path {
            return Ok(());
        }
        let same = match (self.fs.canonicalize(path), self.fs.canonicalize(&expected)) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        };
        if same {
            Ok(())
        } else {
            Err(Error::IdentityPath {
                path: path.to_path_buf(),
                header_id: hid.to_owned(),
                expected,
            })
        }
    }

    fn load_stored(
        &self,
        id: &str,
        sink: Option<&SharedEventSink>,
    ) -> Result<Option<StoredPrefix>> {
        self.preflight()?;
        let Some(path) = self.find_log(id)? else {
            return Ok(None);
        };
        let zstd = self.compression == Compression::Zstd;
        let Some((prefix, stat)) = load_prefix(self.fs.as_ref(), &path, zstd, sink, false)? else {
            return Ok(None);
        };
        let prefix = prefix.map_err(|e| e.with_location(Location::jsonl(&path)))?;
        self.assert_identity(&path, Some(id), &prefix.header)?;
        Ok(Some(StoredPrefix {
            meta: prefix.header.meta,
            header_value: prefix.header.value,
            events: prefix.events,
            invalid_envelope: prefix.invalid,
            revision: Revision::new(stat.revision_text()),
            torn: prefix.torn,
        }))
    }

    fn read_stored_revision(&self, id: &str) -> Result<Option<Revision>> {
        self.preflight()?;
        let Some(path) = self.find_log(id)? else {
            return Ok(None);
        };
        Ok(stat_if_exists(self.fs.as_ref(), &path)?.map(|s| Revision::new(s.revision_text())))
    }

    fn open_writer(&self, meta: &SessionHeader, stored: Option<&str>) -> Result<()> {
        self.preflight()?;
        let path = self.path_for(meta)?;
        self.check_session_dir(&path)?;
        match stored {
            Some(revision) => {
                // A background seal of the session finishes first; it keeps every event, so
                // a session loaded before it renamed the log opens the sealed log.
                let sealed = self.auto_seals.settle_revision(&meta.id, revision);
                let revision = sealed.as_deref().unwrap_or(revision);
                self.writers
                    .open_at(self.fs.as_ref(), &meta.id, &path, revision)
                    .map(drop)
            }
            None if self.exists(&path)? => Err(Error::AlreadyMaterialized {
                id: meta.id.to_string(),
            }),
            None => self.writers.reserve(&meta.id, &path),
        }
    }

    fn read_raw(&self, id: &str) -> Result<Option<RawArtifact>> {
        self.preflight()?;
        let Some(path) = self.find_log(id)? else {
            return Ok(None);
        };
        let Some((buf, _)) = stable_read(self.fs.as_ref(), &path)? else {
            return Ok(None);
        };
        let bytes = match self.compression {
            Compression::None => buf,
            Compression::Zstd => zstd_text(&buf)?,
        };
        let content = String::from_utf8_lossy(&bytes).into_owned();
        let first = content.split('\n').next().unwrap_or_default();
        let invalid = || Error::InvalidRawHeader { path: path.clone() };
        let header = parse_lenient(first)
            .map_err(|_| invalid())?
            .ok_or_else(invalid)?;
        if &*header.meta.id != id {
            return Err(invalid());
        }
        Ok(Some(RawArtifact {
            meta: header.meta,
            filename: LOGICAL_FILE_NAME.to_owned(),
            content,
        }))
    }

    fn append_batch(
        &self,
        meta: &SessionHeader,
        events: &[Event],
        materialized: bool,
    ) -> Result<()> {
        self.preflight()?;
        self.check_writable()?;
        if events.is_empty() {
            return Ok(());
        }
        if materialized {
            self.append(meta, events)
        } else {
            self.materialize(meta, events)
        }
    }

    fn publish_batches(
        &self,
        meta: &SessionHeader,
        events: &[Event],
        batches: &[Range<usize>],
    ) -> Result<()> {
        self.preflight()?;
        self.check_writable()?;
        check_batches(events.len(), batches)?;
        self.materialize_batches(meta, events, batches)
    }

    /// The listed sessions: every session under the root, or the one file read in place.
    fn entries(&self) -> Result<Vec<(PathBuf, Result<ParsedHeader>)>> {
        let Some(file) = &self.file else {
            return self.list_entries();
        };
        self.check_open()?;
        let mut decoder = frames::FrameDecoder::new();
        let Some(line) = self.read_header_line(file, &mut decoder)? else {
            return Ok(Vec::new());
        };
        Ok(parse_lenient(&String::from_utf8_lossy(&line))?
            .map(|header| vec![(file.clone(), Ok(header))])
            .unwrap_or_default())
    }

    fn list_snapshots(&self) -> Result<Vec<(SessionHeader, Revision)>> {
        let mut out = Vec::new();
        for (path, header) in self.entries()? {
            let Ok(header) = header else {
                continue;
            };
            if let Some(stat) = stat_if_exists(self.fs.as_ref(), &path)? {
                out.push((header.meta, Revision::new(stat.revision_text())));
            }
        }
        Ok(out)
    }

    /// Removes temporary files of interrupted first publications that no live writer holds.
    fn remove_stale_temps(&self) {
        let Ok(projects) = self.project_dirs() else {
            return;
        };
        for project in projects {
            let Ok(sessions) = self.dir_entries(&project) else {
                continue;
            };
            for session in sessions.into_iter().filter(|e| e.is_dir) {
                self.sweep_session_dir(&project.join(&session.name));
            }
        }
    }

    /// [`Inner::sweep_session_dir`], once per directory and instance.
    fn sweep_once(&self, dir: &Path) {
        let first = self
            .swept
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(dir.to_path_buf());
        if first {
            self.sweep_session_dir(dir);
        }
    }

    /// Removes the temporary files in one session directory that no live writer holds.
    fn sweep_session_dir(&self, dir: &Path) {
        let Ok(entries) = self.dir_entries(dir) else {
            return;
        };
        for entry in entries {
            if !entry.is_file || !write::is_temp_name(&entry.name.to_string_lossy()) {
                continue;
            }
            let tmp = dir.join(&entry.name);
            // A live publication holds the lock on its temporary file.
            let unlocked = self
                .fs
                .open_read(&tmp)
                .and_then(|f| f.try_lock())
                .unwrap_or(false);
            if unlocked {
                let _ = self.fs.remove_file(&tmp);
            }
        }
    }
}

/// The JSONL / zstd-JSONL storage backend. See the [module documentation](self).
///
/// Cloning is cheap and shares the instance (its writer locks included).
#[derive(Clone)]
pub struct JsonlBackend {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for JsonlBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonlBackend")
            .field("root", &self.inner.root)
            .field("compression", &self.inner.compression)
            .field("pack_chunks", &self.inner.pack_chunks)
            .finish_non_exhaustive()
    }
}

impl JsonlBackend {
    /// Opens a backend over the real file system. Blocking: resolves the root, checks that an
    /// existing root is a readable directory (a missing root is created on first publication)
    /// and removes stale temporary files.
    pub fn open(config: JsonlConfig) -> Result<JsonlBackend> {
        JsonlBackend::open_with_fs(config, Arc::new(RealFs))
    }

    /// Opens a backend whose file-system calls go through `fs` (fault injection).
    pub fn open_with_fs(config: JsonlConfig, fs: Arc<dyn Fs>) -> Result<JsonlBackend> {
        let JsonlConfig {
            root,
            compression,
            pack_chunks,
            allow_permissive_dirs,
            seal_policy,
            scan_root,
        } = config;
        let root = resolve_root(&root).map_err(|e| Error::io("resolve", &root, e))?;
        match fs.read_dir(&root) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io("scandir", &root, e)),
        }
        let inner = Inner {
            name: JSONL_BACKEND_NAME.to_owned(),
            root,
            compression,
            pack_chunks,
            fs,
            writers: Writers::default(),
            unsynced: publication::UnsyncedPublications::default(),
            allow_permissive_dirs,
            file: None,
            seal_policy,
            auto_seals: auto_seal::AutoSeals::default(),
            preflight: Mutex::new(Preflight::Pending),
            scan_root,
            swept: Mutex::default(),
            closed: AtomicBool::new(false),
        };
        inner.check_private_dir(&inner.root)?;
        if inner.scan_root {
            inner.remove_stale_temps();
        }
        Ok(JsonlBackend {
            inner: Arc::new(inner),
        })
    }

    /// Opens a read-only backend over one log file where it is, outside any store layout (a
    /// copy, a download): the file is the backend's only session, whatever its header's cwd
    /// names. Loads, inspections, raw reads, revisions and listing read the file in place (the
    /// header id must still be the requested id); appends, repairs and seals are refused with
    /// [`Error::ReadOnlyFile`]. Nothing is created, linked or copied. The root reported is the
    /// file's directory.
    pub fn open_file(path: impl Into<PathBuf>, compression: Compression) -> Result<JsonlBackend> {
        let path = path.into();
        let file = resolve_root(&path).map_err(|e| Error::io("resolve", &path, e))?;
        let root = file
            .parent()
            .map_or_else(|| file.clone(), Path::to_path_buf);
        let inner = Inner {
            name: JSONL_BACKEND_NAME.to_owned(),
            root,
            compression,
            pack_chunks: true,
            fs: Arc::new(RealFs),
            writers: Writers::default(),
            unsynced: publication::UnsyncedPublications::default(),
            allow_permissive_dirs: true,
            file: Some(file),
            seal_policy: SealPolicy::Never,
            auto_seals: auto_seal::AutoSeals::default(),
            preflight: Mutex::new(Preflight::Passed),
            scan_root: false,
            swept: Mutex::default(),
            closed: AtomicBool::new(false),
        };
        Ok(JsonlBackend {
            inner: Arc::new(inner),
        })
    }

    /// The resolved root.
    pub fn root(&self) -> &Path {
        &self.inner.root
    }

    /// The configured encoding.
    pub fn compression(&self) -> Compression {
        self.inner.compression
    }

    /// Whether appends pack chunk runs.
    pub fn packs_chunks(&self) -> bool {
        self.inner.pack_chunks
    }

    /// The log path of `meta` (it may not exist yet); for a backend over one file, that file.
    pub fn log_path(&self, meta: &SessionHeader) -> Result<PathBuf> {
        match &self.inner.file {
            Some(file) => Ok(file.clone()),
            None => self.inner.path_for(meta),
        }
    }

    /// Seals the log of `id`: rewrites a Zstandard log into its header frame (unchanged) and
    /// one frame per turn, crash-safely, keeping every event identical. Refused
    /// ([`Error::SealRefused`]) for a log with an open turn, a torn tail or an invalid stored
    /// envelope, and ([`Error::Locked`]) while any writer holds the session. A plain log is left
    /// byte-for-byte as it is, and so is a log already sealed (no more frames than sealing
    /// would write); both report `rewritten: false`. The new content is written one turn at a
    /// time and synced under `<final>.<12 hex>.tmp`, read back and compared with the original
    /// (header, event count, hashes of the events' JSON texts), renamed over the log, and the
    /// directory is synced.
    pub async fn seal(&self, id: &str) -> Result<SealReport> {
        let id = id.to_owned();
        self.run(move |i| {
            i.check_writable()?;
            i.seal(&id)
        })
        .await
    }

    /// Waits until no background seal of this instance runs (see [`SealPolicy`]), and returns
    /// the outcomes of the seals finished since the last call.
    pub async fn settle_auto_seals(&self) -> Vec<AutoSealOutcome> {
        self.run(|i| Ok(i.auto_seals.settle()))
            .await
            .unwrap_or_default()
    }

    async fn run<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Inner) -> Result<T> + Send + 'static,
    {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || f(&inner))
            .await
            .map_err(|e| Error::Task {
                message: e.to_string(),
            })?
    }
}

#[async_trait]
impl Backend for JsonlBackend {
    fn name(&self) -> &str {
        &self.inner.name
    }

    /// Reads the stored prefix: the log is found in any project directory (layout, encoding and
    /// duplicate checks apply), read between two agreeing `stat`s, scanned, and bound to `id`
    /// (the header id must be `id`, and the header's id and cwd must name this file).
    ///
    /// Scanner rules: in a plain log, the first unparsable line (blank lines included) or seq
    /// gap ends the prefix, and is corruption only if a later line decodes to a `turn/end`;
    /// otherwise everything from there on is a torn tail. In a Zstandard log every complete
    /// frame must decode, pass its checksum and end on a record boundary; only a torn final
    /// frame is tolerated, and its complete records are kept and recovered by repair.
    async fn load_stored(&self, id: &str) -> Result<Option<StoredPrefix>> {
        let id = id.to_owned();
        self.run(move |i| i.load_stored(&id, None)).await
    }

    async fn load_stored_into(
        &self,
        id: &str,
        sink: SharedEventSink,
    ) -> Result<Option<StoredPrefix>> {
        let id = id.to_owned();
        self.run(move |i| i.load_stored(&id, Some(&sink))).await
    }

    async fn read_stored_revision(&self, id: &str) -> Result<Option<Revision>> {
        let id = id.to_owned();
        self.run(move |i| i.read_stored_revision(&id)).await
    }

    async fn append_batch(
        &self,
        meta: &SessionHeader,
        events: &[Event],
        is_materialized: bool,
    ) -> Result<()> {
        let meta = meta.clone();
        let events = events.to_vec();
        self.run(move |i| i.append_batch(&meta, &events, is_materialized))
            .await
    }

    /// One publication of every batch, each its own frame (or run of lines), synced once.
    async fn publish_batches(
        &self,
        meta: &SessionHeader,
        events: Vec<Event>,
        batches: &[Range<usize>],
    ) -> Result<()> {
        let meta = meta.clone();
        let batches = batches.to_vec();
        self.run(move |i| i.publish_batches(&meta, &events, &batches))
            .await
    }

    async fn commit_repair(
        &self,
        meta: &SessionHeader,
        torn: Option<TornMarker>,
        closers: &[Event],
    ) -> Result<()> {
        let meta = meta.clone();
        let closers = closers.to_vec();
        self.run(move |i| {
            i.preflight()?;
            i.check_writable()?;
            i.commit_repair(&meta, torn, &closers)
        })
        .await
    }

    async fn list(&self) -> Result<Vec<SessionHeader>> {
        self.run(|i| {
            let mut out = Vec::new();
            for (_, header) in i.entries()? {
                match header {
                    Ok(h) => out.push(h.meta),
                    // As the reference's listing: a header that does not belong at its path
                    // and a duplicated id fail it; a header that cannot be read is left out.
                    Err(e) if e.fails_listing() => return Err(e),
                    Err(_) => {}
                }
            }
            Ok(out)
        })
        .await
    }

    async fn list_entries(&self) -> Result<Vec<ListedSession>> {
        self.run(|i| {
            Ok(i.entries()?
                .into_iter()
                .map(|(path, header)| ListedSession {
                    location: Some(Location::jsonl(path)),
                    header: header.map(|h| h.meta),
                })
                .collect())
        })
        .await
    }

    async fn list_snapshots(&self) -> Result<Vec<(SessionHeader, Revision)>> {
        self.run(Inner::list_snapshots).await
    }

    fn locate(&self, meta: &SessionHeader) -> Option<Location> {
        self.log_path(meta).ok().map(Location::jsonl)
    }

    fn supports_raw_artifacts(&self) -> bool {
        true
    }

    /// The logical text of the log: plain logs verbatim (a torn fragment included), Zstandard
    /// logs as the plaintext of their complete frames.
    async fn read_raw(&self, id: &str) -> Result<Option<RawArtifact>> {
        let id = id.to_owned();
        self.run(move |i| i.read_raw(&id)).await
    }

    /// Opens the log for writing: locks it and checks, under the lock, that it is exactly at
    /// `stored` ([`Error::StaleWriter`] otherwise; a log another instance or process holds is
    /// [`Error::Locked`]). For a new session (`None`) there is no file to lock yet: it checks
    /// that no log exists and that this instance has not opened the session already, and the
    /// first publication locks the log it links into place.
    async fn acquire(&self, meta: &SessionHeader, stored: Option<&Revision>) -> Result<()> {
        let meta = meta.clone();
        let stored = stored.map(|r| r.as_str().to_owned());
        self.run(move |i| i.open_writer(&meta, stored.as_deref()))
            .await
    }

    /// Releases the session's writer lock; when the [`SealPolicy`] triggers on the writer, the
    /// lock passes to a background seal instead, and the release returns without waiting.
    async fn release(&self, id: &str) -> Result<()> {
        let owned = id.to_owned();
        let sealing = self
            .run(move |i| {
                let writers = i.writers.take(&owned);
                i.unsynced.release(&owned);
                let triggers = i.compression == Compression::Zstd
                    && !i.closed.load(Ordering::Acquire)
                    && writers.len() == 1
                    && writers
                        .first()
                        .is_some_and(|w| i.seal_policy.triggers(lock::lock_writer(w).batches));
                if triggers {
                    // Registered before the release returns, so a later `acquire` waits.
                    i.auto_seals.start(&owned);
                    Ok(Some(writers))
                } else {
                    drop(writers);
                    Ok(None)
                }
            })
            .await?;
        let Some(writers) = sealing else {
            return Ok(());
        };
        let inner = self.inner.clone();
        let id = id.to_owned();
        drop(tokio::task::spawn_blocking(move || {
            for writer in writers {
                inner.auto_seal(&id, writer);
            }
        }));
        Ok(())
    }

    /// Closes the instance: every later operation fails, and every writer lock is released.
    async fn close(&self) -> Result<()> {
        self.run(|i| {
            i.closed.store(true, Ordering::Release);
            i.writers.clear();
            // Background seals hold their own locks: let them finish.
            let _ = i.auto_seals.settle();
            Ok(())
        })
        .await
    }
}
