//! How a backend written outside this workspace runs the backend suite.
//!
//! `LineBackend` is a small storage backend written from the `Backend` trait's contract alone:
//! each session is an in-memory byte log of JSON lines (the header, then one event per line),
//! so it can be torn like a file. It reports torn tails with `TornMarker::Truncate`, supports
//! seeking reads, checks seqs itself and keeps one revision counter per store. Its harness
//! declares exactly that, and one macro line runs every case of the suite against it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use conformance::backend_suite::{Capabilities, Harness, Storages, async_trait};
use session_core::json::Value;
use session_core::{Event, SessionHeader};
use session_persist::{Backend, Error, Result, Revision, StoredPrefix, StoredSuffix, TornMarker};

static STORES: AtomicU64 = AtomicU64::new(1);

/// One session: its bytes and the revision of the last change.
#[derive(Clone, Default)]
struct Log {
    bytes: Vec<u8>,
    revision: u64,
}

/// The storage of a `LineBackend`, shared by the instances over it.
#[derive(Default)]
struct Store {
    id: u64,
    counter: AtomicU64,
    logs: Mutex<HashMap<String, Log>>,
}

impl Store {
    fn new() -> Arc<Store> {
        Arc::new(Store {
            id: STORES.fetch_add(1, Ordering::Relaxed),
            ..Store::default()
        })
    }

    fn logs(&self) -> MutexGuard<'_, HashMap<String, Log>> {
        self.logs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn next(&self) -> u64 {
        self.counter.fetch_add(1, Ordering::SeqCst) + 1
    }

    fn revision(&self, n: u64) -> Revision {
        Revision::new(format!("lines:{}:{n}", self.id))
    }
}

/// What a scan of a log found.
struct Scan {
    meta: SessionHeader,
    header: Value,
    events: Vec<Event>,
    /// The end of the last valid line.
    committed: usize,
}

fn corrupt(id: &str, why: &str) -> Error {
    Error::Backend(format!("corrupt line log \"{id}\": {why}"))
}

/// Reads the header line, then events while they parse and continue the seq; a bad line is a
/// torn tail only when no complete line follows it.
fn scan(id: &str, bytes: &[u8]) -> Result<Scan> {
    let mut lines = bytes.split_inclusive(|b| *b == b'\n');
    let first = lines.next().unwrap_or_default();
    let header = std::str::from_utf8(first)
        .ok()
        .and_then(|t| Value::parse(t.trim_end()).ok())
        .ok_or_else(|| corrupt(id, "bad header line"))?;
    let meta = SessionHeader::from_value(&header, id).map_err(|e| corrupt(id, &e.to_string()))?;
    let mut events = Vec::new();
    let mut committed = first.len();
    let mut at = first.len();
    let mut bad = false;
    for line in lines {
        at += line.len();
        let complete = line.ends_with(b"\n");
        let event = std::str::from_utf8(line)
            .ok()
            .and_then(|t| Event::parse(t.trim_end()).ok())
            .filter(|e| complete && e.seq() == events.len() as u64);
        match event {
            Some(_) if bad => return Err(corrupt(id, "damage before the last record")),
            Some(e) => {
                events.push(e);
                committed = at;
            }
            None if complete && bad => return Err(corrupt(id, "damage before the last record")),
            None => bad = true,
        }
    }
    Ok(Scan {
        meta,
        header,
        events,
        committed,
    })
}

fn lines(events: &[Event]) -> Vec<u8> {
    let mut out = Vec::new();
    for e in events {
        out.extend_from_slice(e.to_json().as_bytes());
        out.push(b'\n');
    }
    out
}

/// The example backend.
struct LineBackend {
    store: Arc<Store>,
}

#[async_trait]
impl Backend for LineBackend {
    fn name(&self) -> &'static str {
        "example-lines"
    }

    async fn load_stored(&self, id: &str) -> Result<Option<StoredPrefix>> {
        let Some(log) = self.store.logs().get(id).cloned() else {
            return Ok(None);
        };
        let scan = scan(id, &log.bytes)?;
        let torn = (scan.committed < log.bytes.len()).then(|| TornMarker::Truncate {
            truncate_to: scan.committed as u64,
            recovered: Vec::new(),
        });
        Ok(Some(StoredPrefix {
            meta: scan.meta,
            header_value: scan.header,
            events: scan.events,
            invalid_envelope: None,
            revision: self.store.revision(log.revision),
            torn,
        }))
    }

    async fn read_stored_revision(&self, id: &str) -> Result<Option<Revision>> {
        Ok(self
            .store
            .logs()
            .get(id)
            .map(|l| self.store.revision(l.revision)))
    }

    fn supports_seek(&self) -> bool {
        true
    }

    async fn load_stored_from(&self, id: &str, from_seq: u64) -> Result<Option<StoredSuffix>> {
        let Some(log) = self.store.logs().get(id).cloned() else {
            return Ok(None);
        };
        let scan = scan(id, &log.bytes)?;
        Ok(Some(StoredSuffix {
            meta: scan.meta,
            header_value: scan.header,
            events: scan
                .events
                .into_iter()
                .filter(|e| e.seq() >= from_seq)
                .collect(),
        }))
    }

    async fn append_batch(
        &self,
        meta: &SessionHeader,
        events: &[Event],
        is_materialized: bool,
    ) -> Result<()> {
        let id = meta.id.to_string();
        let mut logs = self.store.logs();
        let revision = self.store.next();
        match (logs.get_mut(&id), is_materialized) {
            (Some(_), false) => Err(Error::AlreadyMaterialized { id }),
            (None, true) => Err(Error::Backend(format!("session \"{id}\" has no log"))),
            (Some(log), true) => {
                let stored = scan(&id, &log.bytes)?;
                if stored.committed != log.bytes.len() {
                    return Err(Error::Backend(format!("session \"{id}\" needs repair")));
                }
                if events.first().map(Event::seq) != Some(stored.events.len() as u64) {
                    return Err(Error::Backend(format!("session \"{id}\": seq gap")));
                }
                log.bytes.extend(lines(events));
                log.revision = revision;
                Ok(())
            }
            (None, false) => {
                let mut header = meta.clone();
                header.delegation_depth.get_or_insert(0);
                let mut bytes = header.to_value().to_json().into_bytes();
                bytes.push(b'\n');
                bytes.extend(lines(events));
                logs.insert(id, Log { bytes, revision });
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
        if torn.is_none() && closers.is_empty() {
            return Ok(());
        }
        let id = meta.id.to_string();
        let mut logs = self.store.logs();
        let revision = self.store.next();
        let log = logs
            .get_mut(&id)
            .ok_or_else(|| Error::Backend(format!("session \"{id}\" has no log")))?;
        match torn {
            None => {}
            Some(TornMarker::Truncate {
                truncate_to,
                recovered,
            }) => {
                log.bytes
                    .truncate(usize::try_from(truncate_to).unwrap_or(usize::MAX));
                log.bytes.extend(lines(&recovered));
            }
            Some(_) => {
                return Err(Error::ForeignMarker {
                    backend: self.name().to_owned(),
                });
            }
        }
        log.bytes.extend(lines(closers));
        log.revision = revision;
        Ok(())
    }

    async fn list(&self) -> Result<Vec<SessionHeader>> {
        Ok(self
            .list_snapshots()
            .await?
            .into_iter()
            .map(|(m, _)| m)
            .collect())
    }

    async fn list_snapshots(&self) -> Result<Vec<(SessionHeader, Revision)>> {
        let logs: Vec<(String, Log)> = self
            .store
            .logs()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut out = Vec::new();
        for (id, log) in logs {
            let scan = scan(&id, &log.bytes)?;
            out.push((scan.meta, self.store.revision(log.revision)));
        }
        Ok(out)
    }
}

/// The harness: stores by instance, torn appends written by hand.
#[derive(Default)]
struct LineHarness {
    storages: Storages<Arc<Store>>,
}

impl LineHarness {
    fn hand_out(&self, store: Arc<Store>) -> Arc<dyn Backend> {
        let backend: Arc<dyn Backend> = Arc::new(LineBackend {
            store: store.clone(),
        });
        self.storages.register(&backend, store);
        backend
    }

    fn store(&self, backend: &Arc<dyn Backend>) -> Arc<Store> {
        self.storages
            .get(backend)
            .expect("a backend of this harness")
    }
}

#[async_trait]
impl Harness for LineHarness {
    async fn open(&self) -> Arc<dyn Backend> {
        self.hand_out(Store::new())
    }

    async fn reopen(&self, old: Arc<dyn Backend>) -> Arc<dyn Backend> {
        let store = self.store(&old);
        old.close().await.expect("closing the old instance");
        self.hand_out(store)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::none()
            .with_torn_tails()
            .with_seek()
            .with_revision_changes_on_append()
            .with_seq_checks()
    }

    async fn tear_append(
        &self,
        backend: Arc<dyn Backend>,
        meta: &SessionHeader,
        batch: &[Event],
    ) -> std::result::Result<Arc<dyn Backend>, String> {
        let store = self.store(&backend);
        drop(backend);
        let bytes = lines(batch);
        let mut logs = store.logs();
        let log = logs.get_mut(&*meta.id).ok_or("no such session")?;
        // Half of the batch, then a line cut short.
        let cut = bytes.len() / 2;
        let cut = if bytes[cut - 1] == b'\n' {
            cut + 1
        } else {
            cut
        };
        log.bytes.extend_from_slice(&bytes[..cut]);
        log.revision = store.next();
        drop(logs);
        Ok(self.hand_out(store))
    }
}

conformance::backend_suite!(LineHarness::default());

/// The example backend really does tear and repair (the suite's torn-tail cases are not
/// skipped for it).
#[test]
fn example_backend_declares_what_the_torn_tail_cases_need() {
    let caps = LineHarness::default().capabilities();
    assert!(caps.torn_tails && caps.seek && caps.seq_checks);
    assert!(!caps.writer_lock && !caps.raw_artifacts);
}
