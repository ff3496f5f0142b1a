//! Ready-made [`Harness`]es for the workspace's backends: the memory backend, the JSONL backend
//! on the real file system (raw or zstd, handed out directly or behind `Box<dyn Backend>` or
//! `Arc<dyn Backend>`), and the JSONL backend on the crash-simulating
//! [`CrashStorage`], whose restarts are power losses.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use session_core::{Event, SessionHeader};
use session_persist::jsonl::fs::Fs;
use session_persist::memory::MemoryBackend;
use session_persist::{Backend, Compression, JsonlBackend, JsonlConfig};

use super::{Capabilities, Harness, Storages};
use crate::crash_model::CrashStorage;

/// The memory backend ([`MemoryBackend`]); a restart is [`MemoryBackend::reopen`].
#[derive(Debug, Default)]
pub struct MemoryHarness {
    storages: Storages<MemoryBackend>,
}

impl MemoryHarness {
    /// A harness whose every `open` is a new, empty memory store.
    pub fn new() -> MemoryHarness {
        MemoryHarness::default()
    }

    fn hand_out(&self, storage: MemoryBackend) -> Arc<dyn Backend> {
        let backend: Arc<dyn Backend> = Arc::new(storage.reopen());
        self.storages.register(&backend, storage);
        backend
    }
}

#[async_trait]
impl Harness for MemoryHarness {
    async fn open(&self) -> Arc<dyn Backend> {
        self.hand_out(MemoryBackend::new())
    }

    async fn reopen(&self, old: Arc<dyn Backend>) -> Arc<dyn Backend> {
        let Some(storage) = self.storages.get(&old) else {
            panic!("MemoryHarness::reopen: the backend was not opened by this harness");
        };
        let _ = old.close().await;
        self.hand_out(storage)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::none()
            .with_revision_changes_on_append()
            .with_seq_checks()
    }
}

/// How a harness hands a backend to the suite.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Pointer {
    /// `Arc<JsonlBackend>` as `Arc<dyn Backend>`.
    #[default]
    Direct,
    /// `Arc<Box<dyn Backend>>`: every call goes through the `Box` forwarding impl.
    Boxed,
    /// `Arc<Arc<dyn Backend>>`: every call goes through the `Arc` forwarding impl.
    Arced,
}

fn wrap(backend: JsonlBackend, pointer: Pointer) -> Arc<dyn Backend> {
    match pointer {
        Pointer::Direct => Arc::new(backend),
        Pointer::Boxed => Arc::new(Box::new(backend) as Box<dyn Backend>),
        Pointer::Arced => Arc::new(Arc::new(backend) as Arc<dyn Backend>),
    }
}

/// What the JSONL backend supports.
fn jsonl_capabilities() -> Capabilities {
    Capabilities::none()
        .with_torn_tails()
        .with_raw_artifacts()
        .with_writer_lock()
        .with_revision_changes_on_append()
}

/// Where a torn write of a batch that grew a log from `before` to `bytes.len()` bytes stops:
/// half way, moved off a record boundary so that the cut is inside a record.
fn tear_point(bytes: &[u8], before: usize) -> Result<usize, String> {
    let after = bytes.len();
    if after < before + 2 {
        return Err(format!(
            "the batch added {} bytes; too few to tear",
            after.saturating_sub(before)
        ));
    }
    let mut cut = before + (after - before) / 2;
    if bytes.get(cut - 1) == Some(&b'\n') {
        cut += 1;
    }
    if cut >= after {
        return Err("no byte inside a record to cut at".to_owned());
    }
    Ok(cut)
}

static NEXT_DIR: AtomicU64 = AtomicU64::new(0);

/// The JSONL backend ([`JsonlBackend`]) on the real file system, each `open` in a new root
/// under a temporary directory that the harness removes when dropped. A restart closes the old
/// instance and opens a new one on the same root; a torn append truncates the log file in the
/// middle of the appended batch.
#[derive(Debug)]
pub struct JsonlHarness {
    compression: Compression,
    pointer: Pointer,
    base: PathBuf,
    next: AtomicU64,
    storages: Storages<PathBuf>,
}

impl JsonlHarness {
    /// A harness for the given encoding, handing out backends directly.
    pub fn new(compression: Compression) -> JsonlHarness {
        let n = NEXT_DIR.fetch_add(1, Ordering::Relaxed);
        JsonlHarness {
            compression,
            pointer: Pointer::Direct,
            base: std::env::temp_dir()
                .join(format!("conformance-suite-{}-{n}", std::process::id())),
            next: AtomicU64::new(0),
            storages: Storages::new(),
        }
    }

    /// The same harness, handing backends out through `pointer`.
    #[must_use]
    pub fn behind(mut self, pointer: Pointer) -> JsonlHarness {
        self.pointer = pointer;
        self
    }

    fn open_at(&self, root: &Path) -> Arc<dyn Backend> {
        let config = JsonlConfig::new(root).compression(self.compression);
        let backend = match JsonlBackend::open(config) {
            Ok(b) => b,
            Err(e) => panic!(
                "JsonlHarness: cannot open a backend at {}: {e}",
                root.display()
            ),
        };
        let backend = wrap(backend, self.pointer);
        self.storages.register(&backend, root.to_path_buf());
        backend
    }

    fn root_of(&self, backend: &Arc<dyn Backend>) -> PathBuf {
        match self.storages.get(backend) {
            Some(root) => root,
            None => panic!("JsonlHarness: the backend was not opened by this harness"),
        }
    }
}

impl Drop for JsonlHarness {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

#[async_trait]
impl Harness for JsonlHarness {
    async fn open(&self) -> Arc<dyn Backend> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        self.open_at(&self.base.join(format!("store-{n}")).join("root"))
    }

    async fn reopen(&self, old: Arc<dyn Backend>) -> Arc<dyn Backend> {
        let root = self.root_of(&old);
        let _ = old.close().await;
        drop(old);
        self.open_at(&root)
    }

    fn capabilities(&self) -> Capabilities {
        jsonl_capabilities()
    }

    async fn open_concurrent(&self, live: &Arc<dyn Backend>) -> Option<Arc<dyn Backend>> {
        Some(self.open_at(&self.root_of(live)))
    }

    async fn tear_append(
        &self,
        backend: Arc<dyn Backend>,
        meta: &SessionHeader,
        batch: &[Event],
    ) -> Result<Arc<dyn Backend>, String> {
        let root = self.root_of(&backend);
        let path = backend
            .locate(meta)
            .ok_or("the backend cannot locate the log")?
            .path;
        let before = std::fs::metadata(&path).map_err(|e| e.to_string())?.len();
        backend
            .append_batch(meta, batch, true)
            .await
            .map_err(|e| e.to_string())?;
        let _ = backend.close().await;
        drop(backend);
        let bytes = std::fs::read(&path).map_err(|e| e.to_string())?;
        let cut = tear_point(&bytes, usize::try_from(before).unwrap_or(usize::MAX))?;
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .and_then(|f| f.set_len(cut as u64))
            .map_err(|e| e.to_string())?;
        Ok(self.open_at(&root))
    }
}

/// The root of the JSONL backend on a [`CrashStorage`].
pub const CRASH_ROOT: &str = "/sessions";

/// The JSONL backend on a [`CrashStorage`] (nothing touches the disk). A restart is a power
/// loss: every unsynced byte and directory entry is dropped. A torn append lets the machine
/// die half way through writing the batch and keeps the bytes written before.
///
/// [`CrashJsonlHarness::ignoring_sync`] builds one whose file system ignores `fsync`: a broken
/// storage layer that acknowledges appends before they are durable, for checking that the
/// suite notices.
#[derive(Debug)]
pub struct CrashJsonlHarness {
    compression: Compression,
    honor_sync: bool,
    storages: Storages<CrashStorage>,
}

impl CrashJsonlHarness {
    /// A harness for the given encoding over honest storage.
    pub fn new(compression: Compression) -> CrashJsonlHarness {
        CrashJsonlHarness {
            compression,
            honor_sync: true,
            storages: Storages::new(),
        }
    }

    /// A harness whose storage never makes anything durable (`fsync` does nothing).
    pub fn ignoring_sync(compression: Compression) -> CrashJsonlHarness {
        CrashJsonlHarness {
            honor_sync: false,
            ..CrashJsonlHarness::new(compression)
        }
    }

    fn fs(&self, storage: &CrashStorage) -> Arc<dyn Fs> {
        if self.honor_sync {
            storage.fs()
        } else {
            storage.fs_ignoring_sync()
        }
    }

    fn config(&self) -> JsonlConfig {
        JsonlConfig::new(CRASH_ROOT).compression(self.compression)
    }

    fn open_on(&self, storage: CrashStorage) -> Arc<dyn Backend> {
        let backend = match JsonlBackend::open_with_fs(self.config(), self.fs(&storage)) {
            Ok(b) => b,
            Err(e) => panic!("CrashJsonlHarness: cannot open a backend: {e}"),
        };
        let backend: Arc<dyn Backend> = Arc::new(backend);
        self.storages.register(&backend, storage);
        backend
    }

    fn storage_of(&self, backend: &Arc<dyn Backend>) -> CrashStorage {
        match self.storages.get(backend) {
            Some(storage) => storage,
            None => panic!("CrashJsonlHarness: the backend was not opened by this harness"),
        }
    }
}

#[async_trait]
impl Harness for CrashJsonlHarness {
    async fn open(&self) -> Arc<dyn Backend> {
        self.open_on(CrashStorage::new())
    }

    async fn reopen(&self, old: Arc<dyn Backend>) -> Arc<dyn Backend> {
        let storage = self.storage_of(&old);
        drop(old);
        storage.crash();
        self.open_on(storage)
    }

    fn capabilities(&self) -> Capabilities {
        jsonl_capabilities()
    }

    async fn open_concurrent(&self, live: &Arc<dyn Backend>) -> Option<Arc<dyn Backend>> {
        Some(self.open_on(self.storage_of(live)))
    }

    async fn tear_append(
        &self,
        backend: Arc<dyn Backend>,
        meta: &SessionHeader,
        batch: &[Event],
    ) -> Result<Arc<dyn Backend>, String> {
        let storage = self.storage_of(&backend);
        let path = backend
            .locate(meta)
            .ok_or("the backend cannot locate the log")?
            .path;
        let before = storage.live_len(&path);
        // Measure the batch's bytes on a copy of the machine.
        let copy = storage.snapshot();
        let measuring =
            JsonlBackend::open_with_fs(self.config(), self.fs(&copy)).map_err(|e| e.to_string())?;
        measuring
            .append_batch(meta, batch, true)
            .await
            .map_err(|e| e.to_string())?;
        let bytes = copy.live_bytes(&path).unwrap_or_default();
        let cut = tear_point(&bytes, usize::try_from(before).unwrap_or(usize::MAX))?;
        storage.die_after(cut as u64 - before);
        if backend.append_batch(meta, batch, true).await.is_ok() {
            return Err("the append succeeded although the machine died during it".to_owned());
        }
        drop(backend);
        storage.crash_keeping(u64::MAX);
        Ok(self.open_on(storage))
    }
}
