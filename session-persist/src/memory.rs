//! An in-memory [`Backend`]: the reference's memory test backend, with instrumentation.
//!
//! Logs live in a map shared by every clone of a [`MemoryBackend`], so a "reloaded" backend
//! instance (a clone) sees what an earlier one wrote, the way a file backend reopened on the
//! same root would. Appends are atomic and never tear, so [`StoredPrefix::torn`] is always
//! `None`. Revisions are `memory:<store>:<n>`: `<store>` is unique per storage map in the
//! process and `<n>` increases on every mutation.
//!
//! The instrumentation (call log, injected failures, gates, raw log injection) exists for tests
//! of the coordinator and of code built on it; it does nothing unless used.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use session_core::json::Value;
use session_core::{Event, EventParts, SessionHeader};
use tokio::sync::watch;

use crate::backend::{Backend, Revision, StoredPrefix, TornMarker};
use crate::error::{Error, Result};

static NEXT_STORE: AtomicU64 = AtomicU64::new(1);

/// The name of the memory backend.
pub const MEMORY_BACKEND_NAME: &str = "session-persistence-memory";

/// One backend call, as recorded by [`MemoryBackend::calls`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemoryCall {
    /// `load_stored(id)`.
    LoadStored(String),
    /// `read_stored_revision(id)`.
    ReadRevision(String),
    /// `append_batch`: the session, the batch's seqs and `is_materialized`.
    AppendBatch {
        /// The session id.
        id: String,
        /// The seqs of the batch.
        seqs: Vec<u64>,
        /// The flag passed by the caller.
        materialized: bool,
    },
    /// `commit_repair`: the session, whether a marker was given, and the closers' seqs.
    CommitRepair {
        /// The session id.
        id: String,
        /// Whether a torn marker was given.
        torn: bool,
        /// The closers' seqs.
        closers: Vec<u64>,
    },
    /// `list()`.
    List,
    /// `list_snapshots()`.
    ListSnapshots,
    /// `release(id)`.
    Release(String),
    /// `close()`.
    Close,
}

/// Which operations a [`Gate`] holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GateKind {
    /// `load_stored`.
    Load,
    /// `read_stored_revision`.
    Revision,
    /// `append_batch`.
    Append,
    /// `commit_repair`.
    Repair,
    /// `close`.
    Close,
}

/// Holds the gated operations of a backend until opened. Each held call waits for
/// [`Gate::open`]; [`Gate::arrived`] counts the calls that reached it.
#[derive(Debug, Clone)]
pub struct Gate {
    open: Arc<watch::Sender<bool>>,
    arrived: Arc<AtomicU64>,
    arrival: Arc<watch::Sender<u64>>,
}

impl Default for Gate {
    fn default() -> Gate {
        Gate::new()
    }
}

impl Gate {
    /// A closed gate.
    pub fn new() -> Gate {
        Gate {
            open: Arc::new(watch::channel(false).0),
            arrived: Arc::new(AtomicU64::new(0)),
            arrival: Arc::new(watch::channel(0).0),
        }
    }

    /// Lets every held and future call through.
    pub fn open(&self) {
        self.open.send_replace(true);
    }

    /// How many calls have reached the gate.
    pub fn arrived(&self) -> u64 {
        self.arrived.load(Ordering::SeqCst)
    }

    /// Waits until at least `n` calls have reached the gate.
    pub async fn wait_arrived(&self, n: u64) {
        let mut rx = self.arrival.subscribe();
        let _ = rx.wait_for(|count| *count >= n).await;
    }

    /// Waits at the gate (counted as an arrival) until it is opened; what a held backend call
    /// does. Useful for test doubles built around the memory backend.
    pub async fn pass(&self) {
        let n = self.arrived.fetch_add(1, Ordering::SeqCst) + 1;
        self.arrival.send_replace(n);
        let mut rx = self.open.subscribe();
        let _ = rx.wait_for(|open| *open).await;
    }
}

#[derive(Debug, Clone)]
struct StoredLog {
    meta: SessionHeader,
    header: Value,
    events: Vec<Event>,
    invalid: Option<(usize, Vec<Event>)>,
    revision: u64,
}

#[derive(Default)]
struct Hooks {
    calls: Vec<MemoryCall>,
    append_failures: VecDeque<String>,
    load_failures: VecDeque<String>,
    stale_revisions: usize,
    failing_appends: Option<String>,
    gates: HashMap<GateKind, Gate>,
}

struct Storage {
    store: u64,
    counter: AtomicU64,
    logs: Mutex<HashMap<String, StoredLog>>,
}

/// An in-memory backend. Clones share the same logs and instrumentation.
#[derive(Clone)]
pub struct MemoryBackend {
    storage: Arc<Storage>,
    hooks: Arc<Mutex<Hooks>>,
    name: Arc<str>,
}

impl Default for MemoryBackend {
    fn default() -> MemoryBackend {
        MemoryBackend::new()
    }
}

impl std::fmt::Debug for MemoryBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryBackend")
            .field("name", &self.name)
            .field("store", &self.storage.store)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl MemoryBackend {
    /// An empty store named [`MEMORY_BACKEND_NAME`].
    pub fn new() -> MemoryBackend {
        MemoryBackend::named(MEMORY_BACKEND_NAME)
    }

    /// An empty store with a custom name (used in diagnostics).
    pub fn named(name: &str) -> MemoryBackend {
        MemoryBackend {
            storage: Arc::new(Storage {
                store: NEXT_STORE.fetch_add(1, Ordering::Relaxed),
                counter: AtomicU64::new(0),
                logs: Mutex::new(HashMap::new()),
            }),
            hooks: Arc::new(Mutex::new(Hooks::default())),
            name: Arc::from(name),
        }
    }

    /// Another backend instance over the same logs, with its own instrumentation (the memory
    /// equivalent of reopening a file backend on the same root).
    #[must_use]
    pub fn reopen(&self) -> MemoryBackend {
        MemoryBackend {
            storage: self.storage.clone(),
            hooks: Arc::new(Mutex::new(Hooks::default())),
            name: self.name.clone(),
        }
    }

    fn next_revision(&self) -> u64 {
        self.storage.counter.fetch_add(1, Ordering::SeqCst) + 1
    }

    fn revision(&self, n: u64) -> Revision {
        Revision::new(format!("memory:{}:{n}", self.storage.store))
    }

    fn record(&self, call: MemoryCall) {
        lock(&self.hooks).calls.push(call);
    }

    async fn gate(&self, kind: GateKind) {
        let gate = lock(&self.hooks).gates.get(&kind).cloned();
        if let Some(gate) = gate {
            gate.pass().await;
        }
    }

    // ---- instrumentation ----

    /// Every call so far, in order.
    pub fn calls(&self) -> Vec<MemoryCall> {
        lock(&self.hooks).calls.clone()
    }

    /// How many recorded calls match `pred`.
    pub fn count(&self, pred: impl Fn(&MemoryCall) -> bool) -> usize {
        lock(&self.hooks).calls.iter().filter(|c| pred(c)).count()
    }

    /// How many `load_stored` calls were made.
    pub fn loads(&self) -> usize {
        self.count(|c| matches!(c, MemoryCall::LoadStored(_)))
    }

    /// How many `append_batch` calls were made (including failed ones).
    pub fn appends(&self) -> usize {
        self.count(|c| matches!(c, MemoryCall::AppendBatch { .. }))
    }

    /// How many `commit_repair` calls were made.
    pub fn repairs(&self) -> usize {
        self.count(|c| matches!(c, MemoryCall::CommitRepair { .. }))
    }

    /// Forgets the recorded calls.
    pub fn clear_calls(&self) {
        lock(&self.hooks).calls.clear();
    }

    /// Makes the next `append_batch` fail with `message` (queued: one failure per call).
    pub fn fail_next_append(&self, message: &str) {
        lock(&self.hooks)
            .append_failures
            .push_back(message.to_owned());
    }

    /// Makes every `append_batch` fail with `message` until called with `None`.
    pub fn fail_appends(&self, message: Option<&str>) {
        lock(&self.hooks).failing_appends = message.map(str::to_owned);
    }

    /// Makes the next `load_stored` fail with `message`.
    pub fn fail_next_load(&self, message: &str) {
        lock(&self.hooks)
            .load_failures
            .push_back(message.to_owned());
    }

    /// Makes the next `read_stored_revision` of an existing log report a revision that matches
    /// nothing (as if another writer had changed the log in between).
    pub fn stale_next_revision(&self) {
        lock(&self.hooks).stale_revisions += 1;
    }

    /// Holds every later call of `kind` until the returned gate is opened.
    pub fn hold(&self, kind: GateKind) -> Gate {
        let gate = Gate::new();
        lock(&self.hooks).gates.insert(kind, gate.clone());
        gate
    }

    /// Stores a log verbatim, bypassing every check: `header` is the header record (for
    /// example with a foreign `version`), `events` the stored events. Replaces any existing
    /// log of that id and changes its revision.
    pub fn inject(&self, id: &str, header: Value, events: Vec<Event>) {
        self.inject_with_invalid(id, header, events, None);
    }

    /// Like [`MemoryBackend::inject`], with a record after `events` whose envelope is invalid.
    pub fn inject_with_invalid(
        &self,
        id: &str,
        header: Value,
        events: Vec<Event>,
        invalid: Option<Value>,
    ) {
        let meta = lenient_header(&header, id);
        let invalid =
            invalid.map(|v| (events.len(), vec![Event::verbatim(v, events.len() as u64)]));
        let revision = self.next_revision();
        lock(&self.storage.logs).insert(
            id.to_owned(),
            StoredLog {
                meta,
                header,
                events,
                invalid,
                revision,
            },
        );
    }

    /// Removes a stored log (as if its artifact were deleted).
    pub fn remove(&self, id: &str) -> bool {
        lock(&self.storage.logs).remove(id).is_some()
    }

    /// The stored events of `id`, if any.
    pub fn stored_events(&self, id: &str) -> Option<Vec<Event>> {
        lock(&self.storage.logs).get(id).map(|l| l.events.clone())
    }

    /// The stored header record of `id`, if any.
    pub fn stored_header(&self, id: &str) -> Option<Value> {
        lock(&self.storage.logs).get(id).map(|l| l.header.clone())
    }

    /// The stored seqs of `id` (empty when absent).
    pub fn stored_seqs(&self, id: &str) -> Vec<u64> {
        self.stored_events(id)
            .map(|events| events.iter().map(Event::seq).collect())
            .unwrap_or_default()
    }
}

/// Reads a header leniently: the known fields when they have the expected types.
fn lenient_header(header: &Value, id: &str) -> SessionHeader {
    if let Ok(h) = SessionHeader::from_value(header, id) {
        return h;
    }
    let text = |k: &str| header.get(k).and_then(Value::as_arc_str).cloned();
    let mut meta = SessionHeader::new(
        header
            .get("id")
            .and_then(Value::as_arc_str)
            .cloned()
            .unwrap_or_else(|| id.into()),
        header.get("createdAt").and_then(Value::as_u64).unwrap_or(0),
    );
    meta.cwd = text("cwd");
    meta.parent_session = text("parentSession");
    meta.seed_length = header.get("seedLength").and_then(Value::as_u64);
    meta.origin_subagent = header.get("origin").and_then(Value::as_str) == Some("subagent");
    meta.delegation_depth = header.get("delegationDepth").and_then(Value::as_u64);
    meta.agent_preset = text("agentPreset");
    meta
}

/// A copy of `event` with an identity of its own (its immutable payload stays shared).
fn fresh(event: &Event) -> Event {
    Event::from_parts(
        EventParts {
            ty: event.event_type_arc().clone(),
            seq: event.seq(),
            time: event.time(),
            data: event.data().clone(),
            surface_op: event.surface_op_value().cloned(),
            source_event_seqs: event.source_event_seqs_value().cloned(),
            ignorable: event.ignorable(),
        },
        event.key_order(),
    )
}

#[async_trait]
impl Backend for MemoryBackend {
    fn name(&self) -> &str {
        &self.name
    }

    async fn load_stored(&self, id: &str) -> Result<Option<StoredPrefix>> {
        self.record(MemoryCall::LoadStored(id.to_owned()));
        self.gate(GateKind::Load).await;
        if let Some(message) = lock(&self.hooks).load_failures.pop_front() {
            return Err(Error::Backend(message));
        }
        let log = lock(&self.storage.logs).get(id).cloned();
        Ok(log.map(|log| StoredPrefix {
            meta: log.meta,
            header_value: log.header,
            // Every read gives new event objects, as a read from real storage does.
            events: log.events.iter().map(fresh).collect(),
            invalid_envelope: log.invalid,
            revision: self.revision(log.revision),
            torn: None,
        }))
    }

    async fn read_stored_revision(&self, id: &str) -> Result<Option<Revision>> {
        self.record(MemoryCall::ReadRevision(id.to_owned()));
        self.gate(GateKind::Revision).await;
        let revision = lock(&self.storage.logs).get(id).map(|l| l.revision);
        let Some(n) = revision else {
            return Ok(None);
        };
        let mut hooks = lock(&self.hooks);
        if hooks.stale_revisions > 0 {
            hooks.stale_revisions -= 1;
            return Ok(Some(Revision::new(format!(
                "memory:{}:stale",
                self.storage.store
            ))));
        }
        Ok(Some(self.revision(n)))
    }

    async fn append_batch(
        &self,
        meta: &SessionHeader,
        events: &[Event],
        is_materialized: bool,
    ) -> Result<()> {
        self.record(MemoryCall::AppendBatch {
            id: meta.id.to_string(),
            seqs: events.iter().map(Event::seq).collect(),
            materialized: is_materialized,
        });
        self.gate(GateKind::Append).await;
        {
            let mut hooks = lock(&self.hooks);
            if let Some(message) = hooks
                .append_failures
                .pop_front()
                .or_else(|| hooks.failing_appends.clone())
            {
                return Err(Error::Backend(message));
            }
        }
        if events.is_empty() {
            return Ok(());
        }
        let revision = self.next_revision();
        let mut logs = lock(&self.storage.logs);
        let id = meta.id.to_string();
        match logs.get_mut(&id) {
            Some(_) if !is_materialized => Err(Error::AlreadyMaterialized { id }),
            None if is_materialized => Err(Error::Backend(format!(
                "session \"{id}\" disappeared from the memory backend under its writer"
            ))),
            Some(log) => {
                let next = log.events.len() as u64;
                if events[0].seq() != next {
                    return Err(Error::Backend(format!(
                        "session {id} append starts at seq {}, stored next seq is {next}",
                        events[0].seq()
                    )));
                }
                log.events.extend_from_slice(events);
                log.revision = revision;
                Ok(())
            }
            None => {
                let mut header = meta.clone();
                if header.delegation_depth.is_none() {
                    header.delegation_depth = Some(0);
                }
                logs.insert(
                    id,
                    StoredLog {
                        header: header.to_value(),
                        meta: header,
                        events: events.to_vec(),
                        invalid: None,
                        revision,
                    },
                );
                Ok(())
            }
        }
    }

    async fn commit_repair(
        &self,
        meta: &SessionHeader,
        torn: Option<TornMarker>,
        closers: &[Event],
    ) -> Result<()> {
        self.record(MemoryCall::CommitRepair {
            id: meta.id.to_string(),
            torn: torn.is_some(),
            closers: closers.iter().map(Event::seq).collect(),
        });
        self.gate(GateKind::Repair).await;
        if torn.is_some() {
            return Err(Error::ForeignMarker {
                backend: self.name.to_string(),
            });
        }
        if closers.is_empty() {
            return Ok(());
        }
        let revision = self.next_revision();
        let mut logs = lock(&self.storage.logs);
        let id = meta.id.to_string();
        let Some(log) = logs.get_mut(&id) else {
            return Err(Error::Backend(format!(
                "session \"{id}\" disappeared from the memory backend before its repair"
            )));
        };
        let next = log.events.len() as u64;
        if closers[0].seq() != next {
            return Err(Error::Backend(format!(
                "session {id} repair is stale: closer starts at seq {}, stored next seq is {next}",
                closers[0].seq()
            )));
        }
        log.events.extend_from_slice(closers);
        log.revision = revision;
        Ok(())
    }

    async fn list(&self) -> Result<Vec<SessionHeader>> {
        self.record(MemoryCall::List);
        Ok(lock(&self.storage.logs)
            .values()
            .map(|l| l.meta.clone())
            .collect())
    }

    async fn list_snapshots(&self) -> Result<Vec<(SessionHeader, Revision)>> {
        self.record(MemoryCall::ListSnapshots);
        let logs: Vec<(SessionHeader, u64)> = lock(&self.storage.logs)
            .values()
            .map(|l| (l.meta.clone(), l.revision))
            .collect();
        Ok(logs
            .into_iter()
            .map(|(meta, n)| (meta, self.revision(n)))
            .collect())
    }

    async fn release(&self, id: &str) -> Result<()> {
        self.record(MemoryCall::Release(id.to_owned()));
        Ok(())
    }

    async fn close(&self) -> Result<()> {
        self.record(MemoryCall::Close);
        self.gate(GateKind::Close).await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(id: &str) -> SessionHeader {
        let mut m = SessionHeader::new(id, 1_000);
        m.cwd = Some("/proj".into());
        m
    }

    fn ev(seq: u64) -> Event {
        Event::appended("turn/start", seq, 0, Value::Null, None, None)
    }

    #[tokio::test]
    async fn materializes_appends_and_revises() {
        let b = MemoryBackend::new();
        assert!(b.load_stored("s").await.unwrap().is_none());
        assert!(b.read_stored_revision("s").await.unwrap().is_none());
        b.append_batch(&meta("s"), &[ev(0), ev(1)], false)
            .await
            .unwrap();
        let r1 = b.read_stored_revision("s").await.unwrap().unwrap();
        let stored = b.load_stored("s").await.unwrap().unwrap();
        assert_eq!(stored.revision, r1);
        assert!(stored.torn.is_none());
        assert_eq!(stored.events.len(), 2);
        assert_eq!(
            stored.header_value.get("delegationDepth").unwrap().as_u64(),
            Some(0)
        );
        assert_eq!(
            b.read_stored_revision("s").await.unwrap().unwrap(),
            r1,
            "reads do not change the revision"
        );
        b.append_batch(&meta("s"), &[ev(2)], true).await.unwrap();
        assert_ne!(b.read_stored_revision("s").await.unwrap().unwrap(), r1);
        // Refusals: re-materialization, stale seqs, disappeared artifacts.
        assert!(matches!(
            b.append_batch(&meta("s"), &[ev(3)], false).await,
            Err(Error::AlreadyMaterialized { .. })
        ));
        assert!(b.append_batch(&meta("s"), &[ev(1)], true).await.is_err());
        assert!(b.append_batch(&meta("t"), &[ev(0)], true).await.is_err());
        assert_eq!(b.stored_seqs("s"), vec![0, 1, 2]);
    }

    #[tokio::test]
    async fn revisions_differ_between_stores_and_agree_across_reopen() {
        let a = MemoryBackend::new();
        let b = MemoryBackend::new();
        a.append_batch(&meta("s"), &[ev(0)], false).await.unwrap();
        b.append_batch(&meta("s"), &[ev(0)], false).await.unwrap();
        let ra = a.read_stored_revision("s").await.unwrap();
        assert_ne!(ra, b.read_stored_revision("s").await.unwrap());
        assert_eq!(ra, a.reopen().read_stored_revision("s").await.unwrap());
        assert_eq!(a.list().await.unwrap().len(), 1);
        assert_eq!(a.list_snapshots().await.unwrap()[0].1, ra.unwrap());
    }

    #[tokio::test]
    async fn injected_failures_and_gates() {
        let b = MemoryBackend::new();
        b.fail_next_append("disk unavailable");
        let err = b
            .append_batch(&meta("s"), &[ev(0)], false)
            .await
            .unwrap_err();
        assert_eq!(err.to_string(), "disk unavailable");
        assert!(
            b.load_stored("s").await.unwrap().is_none(),
            "a failed append leaves nothing"
        );
        let gate = b.hold(GateKind::Append);
        let task = {
            let b = b.clone();
            tokio::spawn(async move { b.append_batch(&meta("s"), &[ev(0)], false).await })
        };
        gate.wait_arrived(1).await;
        assert!(b.stored_events("s").is_none());
        gate.open();
        task.await.unwrap().unwrap();
        assert_eq!(b.stored_seqs("s"), vec![0]);
        assert_eq!(b.appends(), 2);
    }

    #[tokio::test]
    async fn repairs_append_closers_and_refuse_foreign_markers() {
        let b = MemoryBackend::new();
        b.append_batch(&meta("s"), &[ev(0)], false).await.unwrap();
        b.commit_repair(&meta("s"), None, &[]).await.unwrap();
        b.commit_repair(&meta("s"), None, &[ev(1)]).await.unwrap();
        assert_eq!(b.stored_seqs("s"), vec![0, 1]);
        assert!(b.commit_repair(&meta("s"), None, &[ev(5)]).await.is_err());
        assert!(
            b.commit_repair(&meta("s"), Some(TornMarker::FromSeq(1)), &[])
                .await
                .is_err()
        );
    }
}
