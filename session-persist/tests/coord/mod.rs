//! Helpers shared by the coordinator suites: backends under test, session builders, events.
#![allow(
    dead_code,
    unreachable_pub,
    missing_docs,
    clippy::missing_panics_doc,
    clippy::unwrap_used
)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use session_core::json::Value;
use session_core::{Event, FixedClock, SessionHeader};
use session_persist::memory::MemoryBackend;
use session_persist::{
    Backend, Compression, JsonlBackend, JsonlConfig, Persistence, PersistenceOptions,
};
use session_store::{Detach, PrepareOptions, SessionStore, SharedSession};
use session_surface::Draft;

/// The clock every test store uses.
pub const NOW: i64 = 1_767_225_600_000;

/// Which backend a suite runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Memory,
    JsonlRaw,
    JsonlZstd,
}

/// A storage medium that survives backend instances (a memory map or a JSONL root).
pub struct Env {
    pub kind: Kind,
    memory: MemoryBackend,
    dir: Option<PathBuf>,
}

impl Drop for Env {
    fn drop(&mut self) {
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

impl Env {
    pub fn new(kind: Kind) -> Env {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = (kind != Kind::Memory).then(|| {
            let n = N.fetch_add(1, Ordering::Relaxed);
            let dir =
                std::env::temp_dir().join(format!("coord-g-{}-{n}-{:?}", std::process::id(), kind));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            dir
        });
        Env {
            kind,
            memory: MemoryBackend::new(),
            dir,
        }
    }

    pub fn memory(&self) -> Option<&MemoryBackend> {
        (self.kind == Kind::Memory).then_some(&self.memory)
    }

    pub fn root(&self) -> PathBuf {
        self.dir.as_ref().unwrap().join("root")
    }

    /// A new backend instance over this medium.
    pub fn backend(&self) -> Arc<dyn Backend> {
        match self.kind {
            Kind::Memory => Arc::new(self.memory.reopen()),
            Kind::JsonlRaw => Arc::new(
                JsonlBackend::open(JsonlConfig::new(self.root()).compression(Compression::None))
                    .unwrap(),
            ),
            Kind::JsonlZstd => Arc::new(
                JsonlBackend::open(JsonlConfig::new(self.root()).compression(Compression::Zstd))
                    .unwrap(),
            ),
        }
    }

    /// Damages the tail of a stored log the way a crash mid-append would. Memory logs never
    /// tear: returns `false` there.
    pub fn corrupt_tail(&self, meta: &SessionHeader, next_seq: u64) -> bool {
        use std::io::Write as _;
        if self.kind == Kind::Memory {
            return false;
        }
        let compression = if self.kind == Kind::JsonlZstd {
            Compression::Zstd
        } else {
            Compression::None
        };
        let path = JsonlBackend::open(JsonlConfig::new(self.root()).compression(compression))
            .unwrap()
            .log_path(meta)
            .unwrap();
        let fragment = format!(r#"{{"type":"assistant/chunk","seq":{next_seq},"ti"#);
        let bytes = match self.kind {
            Kind::JsonlZstd => {
                let mut frame = zstd_frame(format!("{fragment}\n").as_bytes());
                frame.truncate(frame.len() - 2);
                frame
            }
            _ => fragment.into_bytes(),
        };
        let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
        f.write_all(&bytes).unwrap();
        true
    }
}

impl Env {
    /// Writes a stored log directly (bypassing the coordinator): `header` is the header record
    /// without any storage tag (defaults to `meta`'s), `events` are stored verbatim.
    pub fn seed_log(&self, meta: &SessionHeader, header: Option<Value>, events: &[Event]) {
        let header = header.unwrap_or_else(|| {
            let mut m = meta.clone();
            if m.delegation_depth.is_none() {
                m.delegation_depth = Some(0);
            }
            m.to_value()
        });
        if self.kind == Kind::Memory {
            self.memory.inject(&meta.id, header, events.to_vec());
            return;
        }
        let backend = JsonlBackend::open(JsonlConfig::new(self.root()).compression(
            if self.kind == Kind::JsonlZstd {
                Compression::Zstd
            } else {
                Compression::None
            },
        ))
        .unwrap();
        let path = backend.log_path(meta).unwrap();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let mut entries: Vec<(String, Value)> = vec![("type".into(), Value::from("session"))];
        for (k, v) in header.as_object().unwrap().iter() {
            entries.push((k.to_owned(), v.clone()));
        }
        let header_line = Value::object(entries).to_json() + "\n";
        let mut body = String::new();
        for e in events {
            body.push_str(&e.to_json());
            body.push('\n');
        }
        let bytes = if self.kind == Kind::JsonlZstd {
            let mut out = zstd_frame(header_line.as_bytes());
            if !body.is_empty() {
                out.extend(zstd_frame(body.as_bytes()));
            }
            out
        } else {
            (header_line + &body).into_bytes()
        };
        std::fs::write(path, bytes).unwrap();
    }

    /// The stored seqs of `id` as a fresh backend instance reads them.
    pub async fn stored(&self, id: &str) -> Vec<Event> {
        self.backend()
            .load_stored(id)
            .await
            .unwrap()
            .map(|s| s.events)
            .unwrap_or_default()
    }
}

fn zstd_frame(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut enc = zstd::stream::Encoder::new(&mut out, 3).unwrap();
    enc.include_checksum(true).unwrap();
    std::io::Write::write_all(&mut enc, bytes).unwrap();
    enc.finish().unwrap();
    out
}

/// A store with a fixed clock.
pub fn store() -> SessionStore {
    SessionStore::new(Arc::new(FixedClock::new(NOW)))
}

/// A service over `backend` for `store`, collecting warnings.
pub fn service(backend: Arc<dyn Backend>, store: &SessionStore) -> (Persistence, Warnings) {
    service_with(backend, store, PersistenceOptions::default())
}

pub fn service_with(
    backend: Arc<dyn Backend>,
    store: &SessionStore,
    options: PersistenceOptions,
) -> (Persistence, Warnings) {
    let p = Persistence::new(backend, store.clone(), options).unwrap();
    let warnings = Warnings::default();
    let sink = warnings.clone();
    p.set_warning_sink(Arc::new(move |w: &str| {
        sink.0.lock().unwrap().push(w.to_owned());
    }));
    (p, warnings)
}

/// Collected warnings.
#[derive(Clone, Default)]
pub struct Warnings(pub Arc<Mutex<Vec<String>>>);

impl Warnings {
    pub fn all(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

pub fn v(text: &str) -> Value {
    Value::parse(text).unwrap()
}

pub fn meta(id: &str) -> SessionHeader {
    let mut m = SessionHeader::new(id, 1_000);
    m.cwd = Some("/proj".into());
    m
}

pub fn meta_value(cwd: Option<&str>) -> Value {
    match cwd {
        Some(c) => v(&format!(r#"{{"cwd":"{c}"}}"#)),
        None => v("{}"),
    }
}

/// Creates, enters and announces a live session in `store`.
pub fn live(store: &SessionStore, id: &str, cwd: Option<&str>) -> (SharedSession, Detach) {
    store
        .create(
            Some(id),
            PrepareOptions {
                meta: Some(meta_value(cwd)),
                ..PrepareOptions::default()
            },
        )
        .unwrap()
}

/// A live session with a seed.
pub fn live_seeded(
    store: &SessionStore,
    id: &str,
    cwd: Option<&str>,
    seed: &[Event],
) -> (SharedSession, Detach) {
    store
        .create(
            Some(id),
            PrepareOptions {
                seed: Some(seed.iter().map(Event::to_value).collect()),
                meta: Some(meta_value(cwd)),
                ..PrepareOptions::default()
            },
        )
        .unwrap()
}

pub fn turn_start(turn: u64) -> Draft {
    Draft::new("turn/start", v(&format!(r#"{{"turn":{turn}}}"#)))
}

pub fn step_start(turn: u64, step: u64) -> Draft {
    Draft::new(
        "step/start",
        v(&format!(r#"{{"turn":{turn},"step":{step}}}"#)),
    )
}

pub fn step_end(turn: u64, step: u64) -> Draft {
    Draft::new(
        "step/end",
        v(&format!(r#"{{"turn":{turn},"step":{step}}}"#)),
    )
}

pub fn turn_end(turn: u64) -> Draft {
    Draft::new(
        "turn/end",
        v(&format!(
            r#"{{"turn":{turn},"reason":{{"kind":"completed"}}}}"#
        )),
    )
}

pub fn user(id: &str, text: &str) -> Draft {
    Draft::new(
        "user/message",
        v(&format!(
            r#"{{"id":"{id}","role":"user","content":[{{"type":"text","text":"{text}"}}],"source":{{"kind":"user"}}}}"#
        )),
    )
    .append_op()
}

pub fn assistant(turn: u64, step: u64, id: &str, text: &str) -> Draft {
    Draft::new(
        "assistant/message",
        v(&format!(
            r#"{{"turn":{turn},"step":{step},"message":{{"id":"{id}","role":"assistant","content":[{{"type":"text","text":"{text}"}}],"source":{{"kind":"model","provider":"p","model":"m"}}}}}}"#
        )),
    )
    .append_op()
}

/// Appends one complete turn (6 events) to a live session.
pub fn complete_turn(session: &SharedSession, turn: u64) {
    session.append(turn_start(turn)).unwrap();
    session.append(step_start(turn, 1)).unwrap();
    session.append(user(&format!("u{turn}"), "hi")).unwrap();
    session
        .append(assistant(turn, 1, &format!("a{turn}"), "hello"))
        .unwrap();
    session.append(step_end(turn, 1)).unwrap();
    session.append(turn_end(turn)).unwrap();
}

/// One stored event, built from JSON.
pub fn ev(text: &str) -> Event {
    Event::parse(text).unwrap()
}

/// A complete turn as stored events starting at `seq`.
pub fn turn_events(first: u64, turn: u64) -> Vec<Event> {
    let s = first;
    vec![
        ev(&format!(
            r#"{{"type":"turn/start","seq":{s},"time":1,"data":{{"turn":{turn}}}}}"#
        )),
        ev(&format!(
            r#"{{"type":"step/start","seq":{},"time":1,"data":{{"turn":{turn},"step":1}}}}"#,
            s + 1
        )),
        ev(&format!(
            r#"{{"type":"user/message","seq":{},"time":1,"data":{{"id":"u{turn}","role":"user","content":[{{"type":"text","text":"hi"}}],"source":{{"kind":"user"}}}},"surfaceOp":"append"}}"#,
            s + 2
        )),
        ev(&format!(
            r#"{{"type":"assistant/message","seq":{},"time":1,"data":{{"turn":{turn},"step":1,"message":{{"id":"a{turn}","role":"assistant","content":[{{"type":"text","text":"hello"}}],"source":{{"kind":"model","provider":"p","model":"m"}}}}}},"surfaceOp":"append"}}"#,
            s + 3
        )),
        ev(&format!(
            r#"{{"type":"step/end","seq":{},"time":1,"data":{{"turn":{turn},"step":1}}}}"#,
            s + 4
        )),
        ev(&format!(
            r#"{{"type":"turn/end","seq":{},"time":1,"data":{{"turn":{turn},"reason":{{"kind":"completed"}}}}}}"#,
            s + 5
        )),
    ]
}

pub fn types(events: impl IntoIterator<Item = Event>) -> Vec<String> {
    events
        .into_iter()
        .map(|e| e.event_type().to_owned())
        .collect()
}

pub fn seqs(events: impl IntoIterator<Item = Event>) -> Vec<u64> {
    events.into_iter().map(|e| e.seq()).collect()
}

/// Lets spawned tasks run.
pub async fn settle() {
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
}
