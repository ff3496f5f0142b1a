//! A session store persisted to a zstd JSONL root, as the write benches and
//! `examples/write_phases` drive it.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use session_core::json::Value;
use session_persist::jsonl::{JsonlBackend, JsonlConfig};
use session_persist::{Persistence, PersistenceOptions};
use session_store::{Detach, PrepareOptions, SessionStore};
use session_surface::{Draft, SharedSession};

use crate::clock;

/// A [`SessionStore`] whose sessions persist through [`Persistence`] and the zstd JSONL
/// backend (default write-behind, an fsync per batch) under one root.
pub struct PersistedStore {
    /// The store the sessions live in.
    pub sessions: SessionStore,
    /// The persistence service listening to it.
    pub persistence: Persistence,
    runtime: tokio::runtime::Handle,
}

impl PersistedStore {
    /// Opens the backend at `root` and attaches persistence to a new store, running its
    /// background work on `runtime`.
    pub fn open(root: &Path, runtime: tokio::runtime::Handle) -> PersistedStore {
        let backend = JsonlBackend::open(JsonlConfig::new(root)).expect("backend");
        let sessions = SessionStore::new(clock());
        let persistence = Persistence::new(
            Arc::new(backend),
            sessions.clone(),
            PersistenceOptions {
                runtime: Some(runtime.clone()),
                ..PersistenceOptions::default()
            },
        )
        .expect("persistence");
        PersistedStore {
            sessions,
            persistence,
            runtime,
        }
    }

    /// A new live session `id` with an open turn, already durable, ready for chunk events.
    pub fn open_turn(&self, id: &str) -> (SharedSession, Detach) {
        let (session, detach) = self
            .sessions
            .create(
                Some(id),
                PrepareOptions {
                    meta: Some(Value::object([("cwd", Value::from("/bench/write"))])),
                    ..PrepareOptions::default()
                },
            )
            .expect("create");
        session
            .append(Draft::new(
                "turn/start",
                Value::object([("turn", Value::from(1u8))]),
            ))
            .expect("turn/start");
        self.flush(&session);
        (session, detach)
    }

    /// Waits until every event of `session` is durable.
    pub fn flush(&self, session: &SharedSession) {
        self.runtime
            .block_on(self.sessions.flush(session))
            .expect("flush");
    }

    /// Detaches session `id` and waits for its retirement, which runs on the runtime and may
    /// hold the last handle: afterwards the caller's handle is the last one, so dropping it
    /// gives the session's memory back on the caller's thread, not on another thread while
    /// the next measurement runs.
    pub fn retire(&self, id: &str, detach: &Detach) {
        detach.detach();
        while self.persistence.live_sessions() > 0 || self.persistence.retiring(id) {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}
