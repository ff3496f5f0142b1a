//! The async backend: [`SqliteBackend`], implementing [`session_persist::Backend`].
//!
//! # Blocking
//!
//! Every `SQLite` call runs on tokio's blocking pool (`spawn_blocking`), with the store's one
//! connection behind a `std::sync::Mutex`: operations of one store are serialized (as on the
//! reference's single connection), a busy wait for another process's lock blocks a pool
//! thread rather than a runtime worker, and stores do not wait for each other.
//!
//! # Lifecycle
//!
//! [`SqliteBackend::new`] checks the configuration and touches nothing.
//! [`SqliteBackend::validate_path`] (service initialization) creates the parent directory and
//! checks the path, but opens nothing and creates no database file. The first storage
//! operation validates the path if that has not happened, creates the file (mode 0600), checks
//! it again and opens it. A failed open is not remembered: the next operation tries again.
//!
//! # Directory entries
//!
//! Every directory entry the backend creates is made durable before the database is used: the
//! parent of each directory `validate_path` created, and the database's directory at every
//! open (the file may have been created by an earlier process that failed before syncing it),
//! are fsynced (`SQLite` itself syncs the directory of the journal and WAL files it creates). A failed directory `fsync` fails the operation that needed it, so nothing
//! stored under that directory is acknowledged; the directory stays pending and the next
//! operation syncs it again. [`SqliteBackend::with_dir_sync`] replaces the `fsync` (fault
//! injection).
//!
//! # Running out of space
//!
//! `SQLite` reports a full file system as `database or disk is full`, or, in WAL mode, often as
//! `disk I/O error` (growing the WAL index fails). Both become [`Error::NoSpace`] (`ENOSPC`)
//! when the database's file system has less than [`LOW_SPACE_BYTES`](crate::LOW_SPACE_BYTES)
//! left (`statvfs` right after the failure); other I/O errors keep `SQLite`'s text.

use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::Connection;
use session_core::{Event, SessionHeader};
use session_persist::{Backend, Revision, StoredPage, StoredPrefix, StoredSuffix, TornMarker};

use crate::error::{Error, Result};
use crate::schema::RowData;
use crate::store::Store;
use crate::{BACKEND_NAME, JournalMode, MEMORY_PATH, codec, path};

/// `DEFAULT_BUSY_TIMEOUT_MS`.
pub const DEFAULT_BUSY_TIMEOUT_MS: u64 = 5_000;

/// The largest accepted `busyTimeoutMs`.
pub const MAX_BUSY_TIMEOUT_MS: u64 = 2_147_483_647;

/// What one session's rows hold ([`SqliteBackend::row_stats`]); byte counts are of the
/// stored values, not of the database pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RowStats {
    /// Physical rows.
    pub rows: u64,
    /// Packed chunk rows among them.
    pub packed_rows: u64,
    /// Rows whose `data` is a zstd BLOB.
    pub compressed_rows: u64,
    /// Bytes of the `data` values as stored (TEXT as UTF-8, BLOBs compressed).
    pub data_bytes: u64,
    /// Bytes of the `data` values as JSON text (BLOBs decompressed).
    pub text_bytes: u64,
    /// Bytes of the `type`, `source_event_seqs` and `surface_op` values.
    pub column_bytes: u64,
}

/// The backend's configuration (`path`, `journalMode`, `busyTimeoutMs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqliteConfig {
    /// The database path, or `:memory:` for a private in-memory database.
    pub path: String,
    /// The journal mode; [`JournalMode::Wal`] by default.
    pub journal_mode: JournalMode,
    /// How long to wait for another connection's lock, in ms (0 to 2,147,483,647; default
    /// 5,000). It also bounds the retries of the journal-mode change at open.
    pub busy_timeout_ms: u64,
}

impl SqliteConfig {
    /// A configuration with the defaults: WAL, 5,000 ms.
    pub fn new(path: impl Into<String>) -> SqliteConfig {
        SqliteConfig {
            path: path.into(),
            journal_mode: JournalMode::default(),
            busy_timeout_ms: DEFAULT_BUSY_TIMEOUT_MS,
        }
    }

    /// Sets the journal mode.
    #[must_use]
    pub fn journal_mode(mut self, mode: JournalMode) -> SqliteConfig {
        self.journal_mode = mode;
        self
    }

    /// Sets the busy timeout in ms.
    #[must_use]
    pub fn busy_timeout_ms(mut self, ms: u64) -> SqliteConfig {
        self.busy_timeout_ms = ms;
        self
    }
}

/// Where the database lives once its path was validated.
#[derive(Clone)]
enum Resolved {
    Memory,
    File(PathBuf),
}

/// The directory `fsync` the backend uses (see [`SqliteBackend::with_dir_sync`]).
pub type DirSync = Arc<dyn Fn(&Path) -> io::Result<()> + Send + Sync>;

#[derive(Default)]
struct State {
    /// `None` until the path was validated.
    resolved: Option<Resolved>,
    /// Directories whose entries changed and are not yet known to be durable.
    unsynced_dirs: Vec<PathBuf>,
    store: Option<Store>,
    closed: bool,
}

struct Inner {
    config: SqliteConfig,
    dir_sync: DirSync,
    state: Mutex<State>,
    /// Mirrors `state.store.is_some()`, readable without waiting for a running operation.
    open: AtomicBool,
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Inner {
    fn ensure_path(&self, state: &mut State) -> Result<Option<PathBuf>> {
        let resolved = match &state.resolved {
            Some(resolved) => resolved.clone(),
            None if self.config.path == MEMORY_PATH => Resolved::Memory,
            None => {
                let file = path::resolve(&self.config.path)?;
                let changed = path::prepare(&file)?;
                state.unsynced_dirs.extend(changed);
                Resolved::File(file)
            }
        };
        state.resolved = Some(resolved.clone());
        Ok(match resolved {
            Resolved::Memory => None,
            Resolved::File(file) => Some(file),
        })
    }

    /// Fsyncs every pending directory, outermost first; the first failure stops and leaves it
    /// and the ones after it pending.
    fn sync_dirs(&self, state: &mut State) -> Result<()> {
        while let Some(dir) = state.unsynced_dirs.first() {
            (self.dir_sync)(dir).map_err(|e| Error::io("fsync", dir, e))?;
            state.unsynced_dirs.remove(0);
        }
        Ok(())
    }

    fn with_store<T>(&self, f: impl FnOnce(&Store) -> Result<T>) -> Result<T> {
        let mut state = lock(&self.state);
        if state.closed {
            return Err(Error::Closed);
        }
        let result = self.with_open_store(&mut state, f);
        if matches!(result, Err(Error::RollbackFailed { .. }))
            && matches!(state.resolved, Some(Resolved::File(_)))
        {
            // The connection may still be inside the failed transaction: closing it discards
            // that transaction, and the next operation opens a fresh connection. (An in-memory
            // database would be lost with its connection, so it keeps it.)
            state.store = None;
            self.open.store(false, Ordering::SeqCst);
        }
        result.map_err(|e| match &state.resolved {
            Some(Resolved::File(file)) => classify_no_space(e, file),
            _ => e,
        })
    }

    fn with_open_store<T>(
        &self,
        state: &mut State,
        f: impl FnOnce(&Store) -> Result<T>,
    ) -> Result<T> {
        if state.store.is_none() {
            let file = self.ensure_path(state)?;
            if let Some(file) = &file {
                path::create_file(file)?;
                // Also when the file existed: an earlier process may have created it and failed
                // (or crashed) before its directory was synced.
                let dir = file
                    .parent()
                    .map_or_else(|| PathBuf::from("/"), Path::to_path_buf);
                if !state.unsynced_dirs.contains(&dir) {
                    state.unsynced_dirs.push(dir);
                }
            }
            self.sync_dirs(state)?;
            let store = Store::open(
                file.as_ref(),
                self.config.journal_mode,
                Duration::from_millis(self.config.busy_timeout_ms),
            )?;
            state.store = Some(store);
            self.open.store(true, Ordering::SeqCst);
        }
        match &state.store {
            Some(store) => f(store),
            None => Err(Error::Closed),
        }
    }
}

/// Bytes available to an unprivileged writer on the file system holding `path`.
fn available_bytes(path: &Path) -> Option<u64> {
    let dir = path.parent().unwrap_or(path);
    let st = rustix::fs::statvfs(dir).ok()?;
    Some(st.f_bavail.saturating_mul(st.f_frsize))
}

/// Reports a full file system as [`Error::NoSpace`] (see the module documentation).
fn classify_no_space(error: Error, file: &Path) -> Error {
    match error {
        Error::Sqlite(sqlite) => {
            let code = match &sqlite {
                rusqlite::Error::SqliteFailure(e, _) => Some(e.code),
                _ => None,
            };
            let candidate = matches!(
                code,
                Some(rusqlite::ErrorCode::DiskFull | rusqlite::ErrorCode::SystemIoFailure)
            );
            if !candidate {
                return Error::Sqlite(sqlite);
            }
            let available = available_bytes(file);
            let full = code == Some(rusqlite::ErrorCode::DiskFull)
                || available.is_some_and(|n| n < crate::LOW_SPACE_BYTES);
            if full {
                Error::NoSpace {
                    path: file.to_path_buf(),
                    detail: crate::error::NoSpace { sqlite, available },
                }
            } else {
                Error::Sqlite(sqlite)
            }
        }
        Error::RollbackFailed {
            op,
            path,
            error,
            rollback,
        } => Error::RollbackFailed {
            op,
            path,
            error: Box::new(classify_no_space(*error, file)),
            rollback: Box::new(classify_no_space(*rollback, file)),
        },
        other => other,
    }
}

/// The `SQLite` session-persistence backend (`session-persistence-sqlite`): one database, one
/// connection, every session in it. See the [crate documentation](crate) for the format.
#[derive(Clone)]
pub struct SqliteBackend {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for SqliteBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteBackend")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

impl SqliteBackend {
    /// A backend for `config`. Only the configuration is checked; nothing is touched on disk.
    pub fn new(config: SqliteConfig) -> Result<SqliteBackend> {
        SqliteBackend::with_dir_sync(config, Arc::new(path::sync_dir))
    }

    /// A backend for `config` that fsyncs directories with `dir_sync` instead of opening the
    /// directory and calling `fsync` (fault injection: a test makes it fail).
    pub fn with_dir_sync(config: SqliteConfig, dir_sync: DirSync) -> Result<SqliteBackend> {
        if config.busy_timeout_ms > MAX_BUSY_TIMEOUT_MS {
            return Err(Error::InvalidConfig(
                "busyTimeoutMs must be an integer between 0 and 2147483647",
            ));
        }
        Ok(SqliteBackend {
            inner: Arc::new(Inner {
                config,
                dir_sync,
                state: Mutex::new(State::default()),
                open: AtomicBool::new(false),
            }),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &SqliteConfig {
        &self.inner.config
    }

    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Inner) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || f(&inner))
            .await
            .map_err(|e| Error::Task(e.to_string()))?
    }

    async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Store) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        self.blocking(move |inner| inner.with_store(f)).await
    }

    /// Service initialization: resolves the path, creates its parent directory (mode 0700)
    /// and checks the parent and any existing file. Opens nothing and creates no database
    /// file. Done once; later calls return at once.
    pub async fn validate_path(&self) -> Result<()> {
        self.blocking(|inner| {
            let mut state = lock(&inner.state);
            inner.ensure_path(&mut state)?;
            inner.sync_dirs(&mut state)
        })
        .await
    }

    /// Opens the database now (it is otherwise opened by the first storage operation).
    pub async fn open(&self) -> Result<()> {
        self.run(|_| Ok(())).await
    }

    /// Whether the database is open.
    pub fn is_open(&self) -> bool {
        self.inner.open.load(Ordering::SeqCst)
    }

    /// The store identity: `file:<dev>:<ino>:<birthtimeNs>:store:<uuid>` or
    /// `memory:store:<uuid>`. Opens the database.
    pub async fn store_identity(&self) -> Result<String> {
        self.run(|s| Ok(s.identity().to_owned())).await
    }

    /// Runs `f` on the store's connection, inside the store's lock (diagnostics and tests:
    /// inspecting rows or pragmas of an in-memory database). Opens the database.
    pub async fn with_connection<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> T + Send + 'static,
    ) -> Result<T> {
        self.run(move |s| Ok(f(s.connection()))).await
    }

    /// [`Backend::load_stored`] with this crate's error type.
    pub async fn load(&self, id: &str) -> Result<Option<StoredPrefix>> {
        let id = id.to_owned();
        let loaded = self.run(move |s| s.load_stored(&id)).await?;
        Ok(loaded.map(|(meta, scan)| StoredPrefix {
            meta: meta.meta,
            header_value: meta.header_value,
            events: scan.preserved,
            invalid_envelope: None,
            revision: meta.revision,
            torn: scan.torn_from.map(TornMarker::FromSeq),
        }))
    }

    /// [`Backend::read_stored_revision`] with this crate's error type.
    pub async fn revision(&self, id: &str) -> Result<Option<Revision>> {
        let id = id.to_owned();
        self.run(move |s| s.read_stored_revision(&id)).await
    }

    /// [`Backend::load_stored_from`] with this crate's error type.
    pub async fn load_from(&self, id: &str, from_seq: u64) -> Result<Option<StoredSuffix>> {
        let id = id.to_owned();
        let loaded = self.run(move |s| s.load_stored_from(&id, from_seq)).await?;
        Ok(loaded.map(|(meta, events)| StoredSuffix {
            meta: meta.meta,
            header_value: meta.header_value,
            events,
        }))
    }

    /// [`Backend::load_stored_page`] with this crate's error type.
    pub async fn load_page(
        &self,
        id: &str,
        from_seq: u64,
        max_events: usize,
    ) -> Result<Option<StoredPage>> {
        let id = id.to_owned();
        let loaded = self
            .run(move |s| s.load_stored_page(&id, from_seq, max_events))
            .await?;
        Ok(loaded.map(|(meta, events, torn)| StoredPage {
            meta: meta.meta,
            header_value: meta.header_value,
            revision: meta.revision,
            events,
            torn,
        }))
    }

    /// [`Backend::append_batch`] with this crate's error type.
    pub async fn append(
        &self,
        meta: &SessionHeader,
        events: &[Event],
        is_materialized: bool,
    ) -> Result<()> {
        let meta = meta.clone();
        let events = events.to_vec();
        self.run(move |s| s.append_batch(&meta, &events, is_materialized))
            .await
    }

    /// [`Backend::commit_repair`] with this crate's error type; `torn` is the seq marker.
    pub async fn repair(
        &self,
        meta: &SessionHeader,
        torn: Option<u64>,
        closers: &[Event],
    ) -> Result<()> {
        let meta = meta.clone();
        let closers = closers.to_vec();
        self.run(move |s| s.commit_repair(&meta, torn, &closers))
            .await
    }

    /// [`Backend::list_snapshots`] with this crate's error type.
    pub async fn snapshots(&self) -> Result<Vec<(SessionHeader, Revision)>> {
        let listed = self.run(Store::list).await?;
        Ok(listed.into_iter().map(|m| (m.meta, m.revision)).collect())
    }

    /// What a session occupies in the database, measured from its rows (`None`: no such
    /// session). Decompresses every compressed `data` value once, so it costs a full read;
    /// the rows are visited one at a time, never held together.
    pub async fn row_stats(&self, id: &str) -> Result<Option<RowStats>> {
        let id = id.to_owned();
        self.run(move |s| {
            let mut stats = RowStats::default();
            let found = s.each_physical_row(&id, |row| {
                stats.rows += 1;
                if codec::is_packed(row) {
                    stats.packed_rows += 1;
                }
                let stored = match &row.data {
                    RowData::Text(t) => t.len(),
                    RowData::Blob(b) => {
                        stats.compressed_rows += 1;
                        b.len()
                    }
                };
                stats.data_bytes += stored as u64;
                stats.text_bytes += codec::decode_data(&row.data, codec::MAX_SCALAR_DATA_BYTES)
                    .map_or(stored, |t| t.len()) as u64;
                stats.column_bytes += (row.ty.len()
                    + row.source_event_seqs.as_ref().map_or(0, Vec::len)
                    + row.surface_op.as_ref().map_or(0, String::len))
                    as u64;
            })?;
            Ok(found.map(|()| stats))
        })
        .await
    }

    /// [`Backend::close`] with this crate's error type. Closing a store that never opened
    /// only settles its path validation; later operations fail with [`Error::Closed`].
    pub async fn shutdown(&self) -> Result<()> {
        self.blocking(|inner| {
            let mut state = lock(&inner.state);
            state.closed = true;
            inner.open.store(false, Ordering::SeqCst);
            match state.store.take() {
                Some(store) => store.close(),
                None => Ok(()),
            }
        })
        .await
    }
}

#[async_trait]
impl Backend for SqliteBackend {
    fn name(&self) -> &str {
        BACKEND_NAME
    }

    async fn load_stored(&self, id: &str) -> session_persist::Result<Option<StoredPrefix>> {
        Ok(self.load(id).await?)
    }

    async fn read_stored_revision(&self, id: &str) -> session_persist::Result<Option<Revision>> {
        Ok(self.revision(id).await?)
    }

    fn supports_seek(&self) -> bool {
        true
    }

    async fn load_stored_from(
        &self,
        id: &str,
        from_seq: u64,
    ) -> session_persist::Result<Option<StoredSuffix>> {
        Ok(self.load_from(id, from_seq).await?)
    }

    async fn load_stored_page(
        &self,
        id: &str,
        from_seq: u64,
        max_events: usize,
    ) -> session_persist::Result<Option<StoredPage>> {
        Ok(self.load_page(id, from_seq, max_events).await?)
    }

    async fn append_batch(
        &self,
        meta: &SessionHeader,
        events: &[Event],
        is_materialized: bool,
    ) -> session_persist::Result<()> {
        Ok(self.append(meta, events, is_materialized).await?)
    }

    /// One transaction for every batch, each packed as its own append would pack it.
    async fn publish_batches(
        &self,
        meta: &SessionHeader,
        events: Vec<Event>,
        batches: &[Range<usize>],
    ) -> session_persist::Result<()> {
        session_persist::check_batches(events.len(), batches)?;
        let meta = meta.clone();
        let batches = batches.to_vec();
        Ok(self
            .run(move |s| s.publish_batches(&meta, &events, &batches))
            .await?)
    }

    async fn commit_repair(
        &self,
        meta: &SessionHeader,
        torn: Option<TornMarker>,
        closers: &[Event],
    ) -> session_persist::Result<()> {
        let torn = match torn {
            None => None,
            Some(TornMarker::FromSeq(seq)) => Some(seq),
            Some(_) => return Err(Error::ForeignMarker.into()),
        };
        Ok(self.repair(meta, torn, closers).await?)
    }

    async fn list(&self) -> session_persist::Result<Vec<SessionHeader>> {
        let listed = self.run(Store::list).await?;
        Ok(listed.into_iter().map(|m| m.meta).collect())
    }

    async fn list_snapshots(&self) -> session_persist::Result<Vec<(SessionHeader, Revision)>> {
        Ok(self.snapshots().await?)
    }

    async fn close(&self) -> session_persist::Result<()> {
        Ok(self.shutdown().await?)
    }
}
