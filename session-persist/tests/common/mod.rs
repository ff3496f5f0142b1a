//! Helpers shared by the integration tests: temporary roots, corpus documents, JSONL log
//! fixtures, fault injection.
#![allow(dead_code, unreachable_pub, missing_docs)]

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use session_core::json::Value;
use session_core::{Event, SessionHeader};
use session_persist::jsonl::fs::{DirEntry, Fs, FsFile, RealFs, Stat};
use session_persist::{JsonlBackend, JsonlConfig};

/// A unique temporary directory, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!(
            "persist-f-{}-{n}-{}",
            std::process::id(),
            tag.replace(['/', '\\'], "_")
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn root(&self) -> PathBuf {
        self.0.join("root")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Copies a file's bytes (fresh, writable permissions), creating parent directories.
pub fn copy_file(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
    std::fs::write(dst, std::fs::read(src).unwrap()).unwrap();
}

/// Copies a directory tree (fresh, writable permissions).
pub fn copy_tree(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for entry in std::fs::read_dir(src).unwrap() {
        let entry = entry.unwrap();
        let to = dst.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &to);
        } else {
            copy_file(&entry.path(), &to);
        }
    }
}

/// The golden corpus and its index (`None`: absent, and `SESSION_CORPUS_OPTIONAL=1`).
pub fn corpus() -> Option<conformance::corpus::Corpus> {
    conformance::corpus::Corpus::require()
}

/// A parsed corpus JSON document.
pub struct Doc(pub Value);

impl Doc {
    pub fn open(path: &Path) -> Doc {
        let text = std::fs::read_to_string(path).unwrap();
        Doc(Value::parse(&text).unwrap())
    }

    pub fn at(&self, dotted: &str) -> Option<&Value> {
        let mut v = &self.0;
        for part in dotted.split('.') {
            v = v.get(part)?;
        }
        Some(v)
    }

    pub fn req(&self, dotted: &str) -> &Value {
        self.at(dotted)
            .unwrap_or_else(|| panic!("missing key {dotted}"))
    }

    pub fn str(&self, dotted: &str) -> String {
        self.req(dotted).as_str().unwrap().to_owned()
    }

    /// Resolves an event list: an array, `{"sameAs": P}` or `{"prefixOf": P, "count": n}`.
    pub fn event_list(&self, v: &Value) -> Vec<Value> {
        if let Some(items) = v.as_array() {
            return items.to_vec();
        }
        if let Some(p) = v.get("sameAs").and_then(Value::as_str) {
            return self.event_list(self.req(p));
        }
        if let Some(p) = v.get("prefixOf").and_then(Value::as_str) {
            let n = v.get("count").and_then(Value::as_u64).unwrap() as usize;
            let mut all = self.event_list(self.req(p));
            all.truncate(n);
            return all;
        }
        panic!("not an event list: {}", v.to_json());
    }

    pub fn events_at(&self, dotted: &str) -> Vec<Value> {
        self.event_list(self.req(dotted))
    }
}

pub fn to_events(values: &[Value]) -> Vec<Event> {
    values
        .iter()
        .map(|v| Event::from_value(v).unwrap())
        .collect()
}

pub fn texts(events: &[Event]) -> Vec<String> {
    events.iter().map(Event::to_json).collect()
}

pub fn value_texts(values: &[Value]) -> Vec<String> {
    values.iter().map(Value::to_json).collect()
}

pub fn header(doc: &Doc, id: &str) -> SessionHeader {
    SessionHeader::from_value(doc.req("header"), id).unwrap()
}

/// Replaces the root path in a message with `<root>` (the corpus's convention).
pub fn rootless(message: &str, root: &Path) -> String {
    message.replace(&root.display().to_string(), "<root>")
}

pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap()
}

/// A test event `{type, seq, time: 0, data}`.
pub fn ev(ty: &str, seq: u64, data: &str) -> Event {
    Event::appended(ty, seq, 0, Value::parse(data).unwrap(), None, None)
}

// ---- JSONL logs ----

/// `EIO`, for planned faults.
pub const EIO: i32 = 5;

/// A JSONL backend with the default configuration at `root`.
pub fn open(root: &Path) -> JsonlBackend {
    JsonlBackend::open(JsonlConfig::new(root)).unwrap()
}

/// A session header `id`, created at 1000 ms, in the working directory `/w`.
pub fn meta(id: &str) -> SessionHeader {
    let mut m = SessionHeader::new(id, 1_000);
    m.cwd = Some("/w".into());
    m
}

/// A complete five-event turn `n` (one step, one user message) starting at seq `first`.
pub fn turn(n: u64, first: u64) -> Vec<Event> {
    let t = format!("{{\"turn\":{n}}}");
    let s = format!("{{\"turn\":{n},\"step\":1}}");
    vec![
        ev("turn/start", first, &t),
        ev("step/start", first + 1, &s),
        ev("user/message", first + 2, r#"{"text":"hi"}"#),
        ev("step/end", first + 3, &s),
        ev(
            "turn/end",
            first + 4,
            &format!("{{\"turn\":{n},\"reason\":{{\"kind\":\"completed\"}}}}"),
        ),
    ]
}

// ---- Fault injection ----

/// Which call a fault applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    ReadDir,
    Stat,
    OpenRead,
    OpenAppend,
    CreateNew,
    CreateDir,
    SyncDir,
    HardLink,
    RemoveFile,
    Canonicalize,
    Write,
    Sync,
    SetLen,
    Read,
    Rename,
}

/// A planned fault: the `nth` matching call (0-based, counted from when it was planned) fails
/// with `errno`, or for writes, writes only `short` bytes.
#[derive(Debug, Clone)]
pub struct Fault {
    pub op: Op,
    pub path_contains: Option<String>,
    pub nth: usize,
    pub errno: Option<i32>,
    pub short: Option<usize>,
    pub times: usize,
}

/// A callback run before a call (for example to race a file change against a read).
pub type Hook = Arc<dyn Fn(&Path) + Send + Sync>;

#[derive(Default)]
struct FaultState {
    faults: Vec<(Fault, usize)>,
    calls: Vec<(Op, PathBuf)>,
    hooks: Vec<(Op, Hook)>,
}

/// An [`Fs`] over the real file system that injects planned faults and records calls.
#[derive(Clone, Default)]
pub struct FaultFs {
    state: Arc<Mutex<FaultState>>,
}

impl FaultFs {
    pub fn new() -> FaultFs {
        FaultFs::default()
    }

    pub fn plan(&self, fault: Fault) {
        self.state.lock().unwrap().faults.push((fault, 0));
    }

    /// Fails the next `op` on a path containing `needle` with `errno`.
    pub fn fail_next(&self, op: Op, needle: &str, errno: i32) {
        self.plan(Fault {
            op,
            path_contains: Some(needle.to_owned()),
            nth: 0,
            errno: Some(errno),
            short: None,
            times: 1,
        });
    }

    pub fn clear(&self) {
        let mut st = self.state.lock().unwrap();
        st.faults.clear();
        st.hooks.clear();
    }

    /// Runs `hook` before every `op` call.
    pub fn on(&self, op: Op, hook: impl Fn(&Path) + Send + Sync + 'static) {
        self.state.lock().unwrap().hooks.push((op, Arc::new(hook)));
    }

    /// How many `op` calls were made on paths containing `needle`.
    pub fn calls_on(&self, op: Op, needle: &str) -> usize {
        self.state
            .lock()
            .unwrap()
            .calls
            .iter()
            .filter(|(o, p)| *o == op && p.display().to_string().contains(needle))
            .count()
    }

    pub fn calls(&self, op: Op) -> usize {
        self.state
            .lock()
            .unwrap()
            .calls
            .iter()
            .filter(|(o, _)| *o == op)
            .count()
    }

    pub fn reset_calls(&self) {
        self.state.lock().unwrap().calls.clear();
    }

    /// Decides the fault for a call: an error, a short write length, or nothing.
    fn check(&self, op: Op, path: &Path) -> (Option<io::Error>, Option<usize>) {
        let hooks: Vec<Hook> = self
            .state
            .lock()
            .unwrap()
            .hooks
            .iter()
            .filter(|(o, _)| *o == op)
            .map(|(_, h)| h.clone())
            .collect();
        for hook in hooks {
            hook(path);
        }
        let mut st = self.state.lock().unwrap();
        st.calls.push((op, path.to_path_buf()));
        let text = path.display().to_string();
        for (fault, seen) in &mut st.faults {
            if fault.op != op || fault.times == 0 {
                continue;
            }
            if let Some(n) = &fault.path_contains
                && !text.contains(n.as_str())
            {
                continue;
            }
            if *seen < fault.nth {
                *seen += 1;
                continue;
            }
            fault.times -= 1;
            return (fault.errno.map(io::Error::from_raw_os_error), fault.short);
        }
        (None, None)
    }

    fn gate(&self, op: Op, path: &Path) -> io::Result<()> {
        match self.check(op, path) {
            (Some(e), _) => Err(e),
            _ => Ok(()),
        }
    }
}

struct FaultFile {
    inner: Box<dyn FsFile>,
    path: PathBuf,
    fs: FaultFs,
}

impl FsFile for FaultFile {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.fs.gate(Op::Read, &self.path)?;
        self.inner.read(buf)
    }

    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self.fs.check(Op::Write, &self.path) {
            (Some(e), None) => Err(e),
            (Some(e), Some(n)) => {
                // Write a prefix, then fail: a torn write.
                let n = n.min(buf.len());
                self.inner.write(&buf[..n])?;
                Err(e)
            }
            (None, Some(n)) => self.inner.write(&buf[..n.min(buf.len())]),
            (None, None) => self.inner.write(buf),
        }
    }

    fn sync(&mut self) -> io::Result<()> {
        self.fs.gate(Op::Sync, &self.path)?;
        self.inner.sync()
    }

    fn set_len(&mut self, len: u64) -> io::Result<()> {
        self.fs.gate(Op::SetLen, &self.path)?;
        self.inner.set_len(len)
    }

    fn stat(&self) -> io::Result<Stat> {
        self.inner.stat()
    }

    fn try_lock(&self) -> io::Result<bool> {
        self.inner.try_lock()
    }
}

impl FaultFs {
    fn wrap(&self, f: Box<dyn FsFile>, path: &Path) -> Box<dyn FsFile> {
        Box::new(FaultFile {
            inner: f,
            path: path.to_path_buf(),
            fs: self.clone(),
        })
    }
}

impl Fs for FaultFs {
    fn read_dir(&self, path: &Path) -> io::Result<Vec<DirEntry>> {
        self.gate(Op::ReadDir, path)?;
        RealFs.read_dir(path)
    }

    fn stat(&self, path: &Path) -> io::Result<Stat> {
        self.gate(Op::Stat, path)?;
        RealFs.stat(path)
    }

    fn open_read(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        self.gate(Op::OpenRead, path)?;
        Ok(self.wrap(RealFs.open_read(path)?, path))
    }

    fn open_append(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        self.gate(Op::OpenAppend, path)?;
        Ok(self.wrap(RealFs.open_append(path)?, path))
    }

    fn create_new(&self, path: &Path, mode: u32) -> io::Result<Box<dyn FsFile>> {
        self.gate(Op::CreateNew, path)?;
        Ok(self.wrap(RealFs.create_new(path, mode)?, path))
    }

    fn create_dir(&self, path: &Path, mode: u32) -> io::Result<()> {
        self.gate(Op::CreateDir, path)?;
        RealFs.create_dir(path, mode)
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        self.gate(Op::SyncDir, path)?;
        RealFs.sync_dir(path)
    }

    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.gate(Op::HardLink, to)?;
        RealFs.hard_link(from, to)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.gate(Op::RemoveFile, path)?;
        RealFs.remove_file(path)
    }

    fn canonicalize(&self, path: &Path) -> io::Result<PathBuf> {
        self.gate(Op::Canonicalize, path)?;
        RealFs.canonicalize(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.gate(Op::Rename, from)?;
        RealFs.rename(from, to)
    }
}
