//! [`CrashStorage`]: an in-memory file system behind the JSONL backend's [`Fs`] seam that keeps
//! what was written apart from what was made durable, and can crash.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::OsString;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use session_persist::jsonl::fs::{DirEntry, Fs, FsFile, Stat};

/// Device ids, unique per storage in the process (so revisions of two storages never match).
static NEXT_DEVICE: AtomicU64 = AtomicU64::new(1);

/// `EIO`: what every call of a dead machine, or of a handle from before a crash, returns.
const EIO: i32 = 5;

fn eio() -> io::Error {
    io::Error::from_raw_os_error(EIO)
}

fn not_found() -> io::Error {
    io::Error::from(io::ErrorKind::NotFound)
}

fn already_exists() -> io::Error {
    io::Error::from(io::ErrorKind::AlreadyExists)
}

fn not_a_directory() -> io::Error {
    io::Error::from(io::ErrorKind::NotADirectory)
}

fn is_a_directory() -> io::Error {
    io::Error::from(io::ErrorKind::IsADirectory)
}

/// A directory entry: a file (by inode) or a directory (by inode, found by path).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Node {
    File(u64),
    Dir(u64),
}

#[derive(Debug, Clone)]
struct Dir {
    ino: u64,
    /// The entries as the running system sees them.
    live: BTreeMap<OsString, Node>,
    /// The entries a crash keeps: those present when the directory was last synced.
    durable: BTreeMap<OsString, Node>,
}

#[derive(Debug, Clone)]
struct Inode {
    /// Every byte written, as the running system reads it.
    live: Vec<u8>,
    /// The bytes of the last `sync`.
    durable: Vec<u8>,
    /// Logical modification time, from the storage's clock.
    mtime: u64,
}

#[derive(Debug, Clone)]
struct State {
    dev: u64,
    /// Incremented by every crash; handles and views of an earlier boot fail with `EIO`.
    boot: u64,
    /// The logical clock behind modification times.
    tick: u64,
    next_ino: u64,
    next_handle: u64,
    inodes: HashMap<u64, Inode>,
    dirs: HashMap<PathBuf, Dir>,
    /// Advisory locks: inode to the handle holding it.
    locks: HashMap<u64, u64>,
    /// Bytes that may still be written before the machine dies.
    budget: Option<u64>,
    dead: bool,
    syncs: u64,
}

impl State {
    fn new() -> State {
        let mut dirs = HashMap::new();
        dirs.insert(
            PathBuf::from("/"),
            Dir {
                ino: 1,
                live: BTreeMap::new(),
                durable: BTreeMap::new(),
            },
        );
        State {
            dev: NEXT_DEVICE.fetch_add(1, Ordering::Relaxed),
            boot: 0,
            tick: 1,
            next_ino: 2,
            next_handle: 1,
            inodes: HashMap::new(),
            dirs,
            locks: HashMap::new(),
            budget: None,
            dead: false,
            syncs: 0,
        }
    }

    fn tick(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }

    fn alive(&self, boot: u64) -> io::Result<()> {
        if self.dead || self.boot != boot {
            Err(eio())
        } else {
            Ok(())
        }
    }

    /// What `path` names in the live tree.
    fn lookup(&self, path: &Path) -> io::Result<Node> {
        let path = normalize(path)?;
        if let Some(dir) = self.dirs.get(&path) {
            return Ok(Node::Dir(dir.ino));
        }
        let (parent, name) = split(&path)?;
        match self.dirs.get(&parent) {
            Some(dir) => dir.live.get(&name).copied().ok_or_else(not_found),
            None => {
                // A missing parent, or a parent that is a file.
                match self.lookup(&parent) {
                    Ok(Node::File(_)) => Err(not_a_directory()),
                    _ => Err(not_found()),
                }
            }
        }
    }

    /// The live directory that will hold `path`, and the entry name.
    fn parent_of(&mut self, path: &Path) -> io::Result<(&mut Dir, OsString)> {
        let path = normalize(path)?;
        let (parent, name) = split(&path)?;
        if !self.dirs.contains_key(&parent) {
            return Err(match self.lookup(&parent) {
                Ok(Node::File(_)) => not_a_directory(),
                _ => not_found(),
            });
        }
        let dir = self.dirs.get_mut(&parent).ok_or_else(not_found)?;
        Ok((dir, name))
    }

    fn stat_node(&self, node: Node) -> Stat {
        match node {
            Node::Dir(ino) => Stat {
                dev: self.dev,
                ino,
                size: 0,
                mtime_ns: 0,
                ctime_ns: 0,
                is_dir: true,
            },
            Node::File(ino) => {
                let (size, mtime) = self
                    .inodes
                    .get(&ino)
                    .map_or((0, 0), |i| (i.live.len() as u64, i.mtime));
                Stat {
                    dev: self.dev,
                    ino,
                    size,
                    mtime_ns: i128::from(mtime),
                    ctime_ns: i128::from(mtime),
                    is_dir: false,
                }
            }
        }
    }

    fn open(&mut self, ino: u64, boot: u64, honor_sync: bool, state: &Shared) -> CrashFile {
        let handle = self.next_handle;
        self.next_handle += 1;
        CrashFile {
            state: state.clone(),
            boot,
            handle,
            ino,
            cursor: 0,
            honor_sync,
        }
    }

    /// Reboots from the durable image: every directory reverts to its synced entries, every
    /// file to its synced bytes plus what `keep` allows of the rest; locks and handles die.
    fn crash(&mut self, keep: &dyn Fn(&Path, u64, usize) -> usize) {
        self.boot += 1;
        self.dead = false;
        self.budget = None;
        self.locks.clear();
        for dir in self.dirs.values_mut() {
            dir.live = dir.durable.clone();
        }
        // Keep only directories reachable through durable entries; find each file's paths.
        let mut reachable: HashMap<PathBuf, Dir> = HashMap::new();
        let mut files: Vec<(PathBuf, u64)> = Vec::new();
        let mut stack = vec![PathBuf::from("/")];
        while let Some(path) = stack.pop() {
            let Some(dir) = self.dirs.remove(&path) else {
                continue;
            };
            for (name, node) in &dir.live {
                let child = path.join(name);
                match node {
                    Node::Dir(_) => stack.push(child),
                    Node::File(ino) => files.push((child, *ino)),
                }
            }
            reachable.insert(path, dir);
        }
        self.dirs = reachable;
        let mut kept: HashSet<u64> = HashSet::new();
        let mut changed: Vec<u64> = Vec::new();
        for (path, ino) in files {
            if !kept.insert(ino) {
                continue;
            }
            let Some(inode) = self.inodes.get_mut(&ino) else {
                continue;
            };
            let durable = inode.durable.len();
            let extra = inode.live.len().saturating_sub(durable);
            let keep_extra = keep(&path, durable as u64, extra).min(extra);
            // What survives: the synced bytes, then the first `keep_extra` bytes written after
            // them (when the file only grew since its sync; a file cut after its sync keeps
            // the synced bytes).
            let grew = inode.live.len() >= durable && inode.live[..durable] == inode.durable[..];
            let image = if grew {
                inode.live[..durable + keep_extra].to_vec()
            } else {
                inode.durable.clone()
            };
            if image != inode.live {
                changed.push(ino);
            }
            inode.live.clone_from(&image);
            inode.durable = image;
        }
        self.inodes.retain(|ino, _| kept.contains(ino));
        for ino in changed {
            let t = self.tick();
            if let Some(inode) = self.inodes.get_mut(&ino) {
                inode.mtime = t;
            }
        }
    }
}

type Shared = Arc<Mutex<State>>;

fn lock(state: &Shared) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// An absolute path without `.`/`..` components.
fn normalize(path: &Path) -> io::Result<PathBuf> {
    let mut out = PathBuf::from("/");
    let mut absolute = false;
    for c in path.components() {
        match c {
            Component::RootDir => absolute = true,
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(name) => out.push(name),
            Component::Prefix(_) => return Err(not_found()),
        }
    }
    if absolute {
        Ok(out)
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "crash storage paths are absolute",
        ))
    }
}

fn split(path: &Path) -> io::Result<(PathBuf, OsString)> {
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => Ok((parent.to_path_buf(), name.to_owned())),
        _ => Err(already_exists()),
    }
}

/// An in-memory file system for the JSONL backend ([`Fs`]) that models what a power loss keeps.
///
/// Every write lands in the *live* bytes of a file, which the running system reads; only
/// [`FsFile::sync`] copies them to the file's *durable* bytes. Directory entries work the same
/// way: creating, linking and removing change the live entries, and only [`Fs::sync_dir`] makes
/// a directory's entries durable. A crash ([`CrashStorage::crash`],
/// [`CrashStorage::crash_keeping`], [`CrashStorage::crash_cut`]) reboots from the durable image,
/// keeping as many unsynced bytes as asked (a torn write); handles and views opened before the
/// crash fail with `EIO` afterwards, and every advisory lock is released, as when a process dies.
/// [`CrashStorage::die_after`] makes the machine die in the middle of a later write.
///
/// Clones share the storage. Revisions read through it (`dev:ino:size:mtime:ctime`) are unique
/// per storage, and modification times come from a logical clock that never goes back, so a
/// revision changes whenever a file's bytes do.
///
/// ```
/// use std::path::Path;
/// use conformance::crash_model::CrashStorage;
///
/// let storage = CrashStorage::new();
/// let fs = storage.fs();
/// fs.create_dir(Path::new("/logs"), 0o700)?;
/// fs.sync_dir(Path::new("/"))?;
/// let mut file = fs.create_new(Path::new("/logs/a"), 0o600)?;
/// fs.sync_dir(Path::new("/logs"))?;
/// file.write(b"synced\n")?;
/// file.sync()?;
/// file.write(b"torn tail")?;
/// storage.crash_cut(Path::new("/logs/a"), 11); // keep 4 of the 9 unsynced bytes
/// assert_eq!(storage.live_bytes(Path::new("/logs/a")).as_deref(), Some(&b"synced\ntorn"[..]));
/// assert!(file.write(b"x").is_err(), "handles die with the crash");
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone)]
pub struct CrashStorage {
    state: Shared,
}

impl std::fmt::Debug for CrashStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = lock(&self.state);
        f.debug_struct("CrashStorage")
            .field("dev", &s.dev)
            .field("boot", &s.boot)
            .field("files", &s.inodes.len())
            .field("dead", &s.dead)
            .finish_non_exhaustive()
    }
}

impl Default for CrashStorage {
    fn default() -> CrashStorage {
        CrashStorage::new()
    }
}

impl CrashStorage {
    /// An empty storage: only the root directory `/` exists (durably).
    pub fn new() -> CrashStorage {
        CrashStorage {
            state: Arc::new(Mutex::new(State::new())),
        }
    }

    /// The file system of the current boot, with honest `fsync`s.
    pub fn fs(&self) -> Arc<dyn Fs> {
        self.view(true)
    }

    /// The file system of the current boot, with `fsync`s that do nothing (files and
    /// directories are never made durable): a broken storage layer, for testing that checks
    /// notice lost acknowledged writes.
    pub fn fs_ignoring_sync(&self) -> Arc<dyn Fs> {
        self.view(false)
    }

    fn view(&self, honor_sync: bool) -> Arc<dyn Fs> {
        let boot = lock(&self.state).boot;
        Arc::new(CrashFs {
            state: self.state.clone(),
            boot,
            honor_sync,
        })
    }

    /// An independent copy of the live state (a new storage with its own device id, no locks,
    /// and the same durable image): for measuring what a write would do without doing it.
    #[must_use]
    pub fn snapshot(&self) -> CrashStorage {
        let mut copy = lock(&self.state).clone();
        copy.dev = NEXT_DEVICE.fetch_add(1, Ordering::Relaxed);
        copy.locks.clear();
        copy.budget = None;
        copy.dead = false;
        CrashStorage {
            state: Arc::new(Mutex::new(copy)),
        }
    }

    /// The machine dies once `bytes` more bytes have been written (to any file): the write
    /// that crosses the limit stores only the bytes before it, and from then on every call
    /// fails with `EIO` until the next crash. `die_after(0)` kills the next write.
    pub fn die_after(&self, bytes: u64) {
        lock(&self.state).budget = Some(bytes);
    }

    /// Whether the machine has died (see [`CrashStorage::die_after`]).
    pub fn is_dead(&self) -> bool {
        lock(&self.state).dead
    }

    /// A power loss: every file and directory reverts to what was last synced.
    pub fn crash(&self) {
        self.crash_keeping(0);
    }

    /// A power loss that keeps up to `extra` written-but-unsynced bytes at the end of every
    /// file (a torn write); directory entries revert to what was last synced.
    pub fn crash_keeping(&self, extra: u64) {
        let keep = usize::try_from(extra).unwrap_or(usize::MAX);
        lock(&self.state).crash(&|_, _, _| keep);
    }

    /// A power loss that cuts the file at `path` at byte `len` (clamped to at least its
    /// durable and at most its written length); every other file keeps only its synced bytes.
    pub fn crash_cut(&self, path: &Path, len: u64) {
        let target = normalize(path).ok();
        lock(&self.state).crash(&|p, durable, _| {
            if Some(p) == target.as_deref() {
                usize::try_from(len.saturating_sub(durable)).unwrap_or(usize::MAX)
            } else {
                0
            }
        });
    }

    /// How many crashes (reboots) the storage has been through.
    pub fn boots(&self) -> u64 {
        lock(&self.state).boot
    }

    /// How many file and directory syncs have been made durable.
    pub fn syncs(&self) -> u64 {
        lock(&self.state).syncs
    }

    /// The live bytes of the file at `path`, if it exists.
    pub fn live_bytes(&self, path: &Path) -> Option<Vec<u8>> {
        let s = lock(&self.state);
        match s.lookup(path) {
            Ok(Node::File(ino)) => s.inodes.get(&ino).map(|i| i.live.clone()),
            _ => None,
        }
    }

    /// The live length of the file at `path` (0 when absent).
    pub fn live_len(&self, path: &Path) -> u64 {
        self.live_bytes(path).map_or(0, |b| b.len() as u64)
    }
}

/// A view of a [`CrashStorage`] for one boot.
struct CrashFs {
    state: Shared,
    boot: u64,
    honor_sync: bool,
}

impl CrashFs {
    fn with<T>(&self, f: impl FnOnce(&mut State) -> io::Result<T>) -> io::Result<T> {
        let mut s = lock(&self.state);
        s.alive(self.boot)?;
        f(&mut s)
    }
}

impl Fs for CrashFs {
    fn read_dir(&self, path: &Path) -> io::Result<Vec<DirEntry>> {
        self.with(|s| {
            let path = normalize(path)?;
            let Some(dir) = s.dirs.get(&path) else {
                return Err(match s.lookup(&path) {
                    Ok(Node::File(_)) => not_a_directory(),
                    _ => not_found(),
                });
            };
            Ok(dir
                .live
                .iter()
                .map(|(name, node)| DirEntry {
                    name: name.clone(),
                    is_dir: matches!(node, Node::Dir(_)),
                    is_file: matches!(node, Node::File(_)),
                })
                .collect())
        })
    }

    fn stat(&self, path: &Path) -> io::Result<Stat> {
        self.with(|s| {
            let node = s.lookup(path)?;
            Ok(s.stat_node(node))
        })
    }

    fn open_read(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        let state = self.state.clone();
        self.with(|s| {
            // Opening a directory succeeds on Unix; reading it fails.
            let (Node::File(ino) | Node::Dir(ino)) = s.lookup(path)?;
            Ok(Box::new(s.open(ino, self.boot, self.honor_sync, &state)) as Box<dyn FsFile>)
        })
    }

    fn open_append(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        let state = self.state.clone();
        self.with(|s| match s.lookup(path)? {
            Node::File(ino) => {
                Ok(Box::new(s.open(ino, self.boot, self.honor_sync, &state)) as Box<dyn FsFile>)
            }
            Node::Dir(_) => Err(is_a_directory()),
        })
    }

    fn create_new(&self, path: &Path, _mode: u32) -> io::Result<Box<dyn FsFile>> {
        let state = self.state.clone();
        self.with(|s| {
            if s.lookup(path).is_ok() {
                return Err(already_exists());
            }
            let ino = s.next_ino;
            let t = s.tick();
            let (dir, name) = s.parent_of(path)?;
            dir.live.insert(name, Node::File(ino));
            s.next_ino += 1;
            s.inodes.insert(
                ino,
                Inode {
                    live: Vec::new(),
                    durable: Vec::new(),
                    mtime: t,
                },
            );
            Ok(Box::new(s.open(ino, self.boot, self.honor_sync, &state)) as Box<dyn FsFile>)
        })
    }

    fn create_dir(&self, path: &Path, _mode: u32) -> io::Result<()> {
        self.with(|s| {
            let path = normalize(path)?;
            if s.lookup(&path).is_ok() {
                return Err(already_exists());
            }
            let ino = s.next_ino;
            let (dir, name) = s.parent_of(&path)?;
            dir.live.insert(name, Node::Dir(ino));
            s.next_ino += 1;
            s.dirs.insert(
                path,
                Dir {
                    ino,
                    live: BTreeMap::new(),
                    durable: BTreeMap::new(),
                },
            );
            Ok(())
        })
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        let honor = self.honor_sync;
        self.with(|s| {
            let path = normalize(path)?;
            let Some(dir) = s.dirs.get_mut(&path) else {
                return Err(match s.lookup(&path) {
                    Ok(Node::File(_)) => not_a_directory(),
                    _ => not_found(),
                });
            };
            if honor {
                dir.durable = dir.live.clone();
                s.syncs += 1;
            }
            Ok(())
        })
    }

    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.with(|s| {
            let Node::File(ino) = s.lookup(from)? else {
                return Err(io::Error::from(io::ErrorKind::PermissionDenied));
            };
            if s.lookup(to).is_ok() {
                return Err(already_exists());
            }
            let (dir, name) = s.parent_of(to)?;
            dir.live.insert(name, Node::File(ino));
            Ok(())
        })
    }

    /// Replaces `to` with the file `from` in the live entries (as `rename(2)`); like every
    /// entry change it survives a crash only once its directories are synced.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.with(|s| {
            let Node::File(ino) = s.lookup(from)? else {
                return Err(is_a_directory());
            };
            if let Ok(Node::Dir(_)) = s.lookup(to) {
                return Err(is_a_directory());
            }
            let (dir, name) = s.parent_of(from)?;
            dir.live.remove(&name);
            let (dir, name) = s.parent_of(to)?;
            dir.live.insert(name, Node::File(ino));
            Ok(())
        })
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.with(|s| match s.lookup(path)? {
            Node::Dir(_) => Err(is_a_directory()),
            Node::File(_) => {
                let (dir, name) = s.parent_of(path)?;
                dir.live.remove(&name);
                Ok(())
            }
        })
    }

    fn canonicalize(&self, path: &Path) -> io::Result<PathBuf> {
        self.with(|s| {
            s.lookup(path)?;
            normalize(path)
        })
    }
}

/// An open file description of a [`CrashStorage`] file.
struct CrashFile {
    state: Shared,
    boot: u64,
    handle: u64,
    ino: u64,
    cursor: usize,
    honor_sync: bool,
}

impl CrashFile {
    fn with<T>(&self, f: impl FnOnce(&mut State) -> io::Result<T>) -> io::Result<T> {
        let mut s = lock(&self.state);
        s.alive(self.boot)?;
        f(&mut s)
    }
}

impl FsFile for CrashFile {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let (ino, at) = (self.ino, self.cursor);
        let n = self.with(|s| {
            if !s.inodes.contains_key(&ino) {
                return Err(is_a_directory());
            }
            let live = s.inodes.get(&ino).map_or(&[][..], |i| &i.live[..]);
            let rest = live.get(at..).unwrap_or_default();
            let n = rest.len().min(buf.len());
            buf[..n].copy_from_slice(&rest[..n]);
            Ok(n)
        })?;
        self.cursor += n;
        Ok(n)
    }

    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let ino = self.ino;
        self.with(|s| {
            let mut n = buf.len();
            if let Some(budget) = s.budget {
                let allowed = usize::try_from(budget).unwrap_or(usize::MAX);
                if allowed == 0 && n > 0 {
                    s.dead = true;
                    return Err(eio());
                }
                n = n.min(allowed);
                s.budget = Some(budget - n as u64);
                if n < buf.len() {
                    // The machine dies right after this partial write.
                    s.dead = true;
                }
            }
            let t = s.tick();
            let inode = s.inodes.get_mut(&ino).ok_or_else(is_a_directory)?;
            inode.live.extend_from_slice(&buf[..n]);
            inode.mtime = t;
            Ok(n)
        })
    }

    fn sync(&mut self) -> io::Result<()> {
        let (ino, honor) = (self.ino, self.honor_sync);
        self.with(|s| {
            if honor {
                if let Some(inode) = s.inodes.get_mut(&ino) {
                    inode.durable.clone_from(&inode.live);
                }
                s.syncs += 1;
            }
            Ok(())
        })
    }

    fn set_len(&mut self, len: u64) -> io::Result<()> {
        let ino = self.ino;
        self.with(|s| {
            let len =
                usize::try_from(len).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
            let t = s.tick();
            let inode = s.inodes.get_mut(&ino).ok_or_else(is_a_directory)?;
            inode.live.resize(len, 0);
            inode.mtime = t;
            Ok(())
        })
    }

    fn stat(&self) -> io::Result<Stat> {
        let ino = self.ino;
        self.with(|s| {
            let node = if s.inodes.contains_key(&ino) {
                Node::File(ino)
            } else {
                Node::Dir(ino)
            };
            Ok(s.stat_node(node))
        })
    }

    fn try_lock(&self) -> io::Result<bool> {
        let (ino, handle) = (self.ino, self.handle);
        self.with(|s| match s.locks.get(&ino) {
            Some(holder) if *holder != handle => Ok(false),
            _ => {
                s.locks.insert(ino, handle);
                Ok(true)
            }
        })
    }
}

impl Drop for CrashFile {
    fn drop(&mut self) {
        let mut s = lock(&self.state);
        if s.locks.get(&self.ino) == Some(&self.handle) {
            s.locks.remove(&self.ino);
        }
    }
}
