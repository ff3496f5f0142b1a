//! The crash model (`conformance::crash_model`) against the real server: a live session is
//! persisted through the persistence service and this backend, over a TCP proxy that plays
//! the machine. [`Op::CrashAt`]`(k)` lets the machine die once `k` more bytes reach the
//! server (the flush's transaction is cut there, and the machine refuses every connection
//! until it boots again); [`Op::Reopen`] disposes the service and starts a new process.
//! After every restart [`check_reload`] requires that the loaded log is a prefix of everything
//! appended plus honest closers, keeps every flushed event and leaves no turn open.
//!
//! A crashed process does not release its lease: the next process waits it out (a short
//! `lease_ttl` and a `lease_wait` longer than it).
//!
//! The number of random cases comes from `PROPTEST_CASES` (default 12).
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{Cut, Proxy, TestSchema, server_available, upstream};
use conformance::backend_suite::fixtures::{SUITE_CWD, SUITE_TIME_MS, TURN_LEN, turn_draft};
use conformance::crash_model::{CRASH_SESSION_ID, Op, arb_ops, check_reload};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use session_core::json::Value;
use session_core::{Event, FixedClock};
use session_persist::{Backend, Error, MAX_WRITE_BATCH_DELAY_MS, Persistence, PersistenceOptions};
use session_persist_postgres::{PostgresBackend, PostgresOptions};
use session_store::{Detach, PrepareOptions, SessionStore};
use session_surface::SharedSession;

const LEASE_TTL: Duration = Duration::from_millis(150);

/// The drafts a run appends: complete turns of the fixture shape.
struct Script {
    turn: u64,
    phase: u64,
    call_seq: u64,
}

impl Script {
    fn after(events: &[Event]) -> Script {
        let last = events
            .iter()
            .filter_map(|e| e.data().get("turn").and_then(Value::as_u64))
            .max()
            .unwrap_or(0);
        Script {
            turn: last + 1,
            phase: 0,
            call_seq: 0,
        }
    }

    fn append(&mut self, session: &SharedSession) -> Result<Event, String> {
        let event = session
            .append(turn_draft(self.turn, self.phase, self.call_seq))
            .map_err(|e| format!("the live session refused a scripted draft: {e}"))?;
        if self.phase == 7 {
            self.call_seq = event.seq();
        }
        self.phase += 1;
        if self.phase == TURN_LEN {
            self.phase = 0;
            self.turn += 1;
        }
        Ok(event)
    }
}

struct Process {
    service: Persistence,
    backend: PostgresBackend,
    store: SessionStore,
    session: SharedSession,
    detach: Detach,
    script: Script,
    runtime: tokio::runtime::Runtime,
}

impl Process {
    /// Ends the process without any cleanup, as a power loss does (leases stay held).
    fn kill(self) {
        let Process {
            service,
            backend,
            store,
            session,
            detach,
            runtime,
            ..
        } = self;
        runtime.block_on(async move {
            drop(detach);
            drop(session);
            drop(store);
            drop(service);
            drop(backend);
        });
        drop(runtime);
    }
}

struct Model {
    schema: String,
    proxy: Proxy,
    process: Option<Process>,
    appended: Vec<Event>,
    acknowledged: usize,
    restarts: usize,
    lost: usize,
}

fn boot(schema: &str, url: &str) -> Result<(Process, Vec<Event>), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let store = SessionStore::new(Arc::new(FixedClock::new(SUITE_TIME_MS)));
    store.set_warning_sink(Arc::new(|_: &str| {}));
    let (service, backend, loaded) = runtime.block_on(async {
        let options = PostgresOptions::default()
            .schema(schema.to_owned())
            .pool_size(2)
            .lease_ttl(LEASE_TTL)
            .lease_wait(LEASE_TTL * 10);
        let backend = PostgresBackend::connect(url, options)
            .await
            .map_err(|e| format!("the backend does not connect after a restart: {e}"))?;
        match backend.load(CRASH_SESSION_ID).await {
            Ok(Some(stored)) if stored.events.is_empty() => {
                return Err("a first publication left a header-only session".to_owned());
            }
            Ok(_) => {}
            Err(e) => return Err(format!("the surviving log is unreadable: {e}")),
        }
        let options = PersistenceOptions {
            write_batch_max_delay_ms: MAX_WRITE_BATCH_DELAY_MS,
            ..PersistenceOptions::default()
        };
        let dyn_backend: Arc<dyn Backend> = Arc::new(backend.clone());
        let service = Persistence::new(dyn_backend, store.clone(), options)
            .map_err(|e| format!("cannot build the service: {e}"))?;
        service.set_warning_sink(Arc::new(|_: &str| {}));
        let loaded = match service.load(CRASH_SESSION_ID).await {
            Ok(inspection) => inspection.events.to_vec(),
            Err(e) if matches!(e.root(), Error::NotFound { .. }) => Vec::new(),
            Err(e) => return Err(format!("load after a restart failed: {e}")),
        };
        Ok((service, backend, loaded))
    })?;
    let (session, detach) = if loaded.is_empty() {
        store
            .create(
                Some(CRASH_SESSION_ID),
                PrepareOptions {
                    meta: Some(Value::object([("cwd", Value::from(SUITE_CWD))])),
                    ..PrepareOptions::default()
                },
            )
            .map_err(|e| format!("cannot create the live session: {e}"))?
    } else {
        let preparation = runtime
            .block_on(service.prepare(CRASH_SESSION_ID, None))
            .map_err(|e| format!("cannot prepare the loaded session: {e}"))?;
        let session = preparation.session().clone();
        let detach = store
            .enter(&session)
            .map_err(|e| format!("cannot enter the resumed session: {e}"))?;
        store
            .announce(&session)
            .map_err(|e| format!("cannot announce the resumed session: {e}"))?;
        drop(preparation);
        (session, detach)
    };
    let script = Script::after(&session.events().to_vec());
    Ok((
        Process {
            service,
            backend,
            store,
            session,
            detach,
            script,
            runtime,
        },
        loaded,
    ))
}

impl Model {
    fn restart(&mut self, orderly: bool) -> Result<(), String> {
        let (process, loaded) = boot(&self.schema, &self.proxy.url())?;
        let kept = check_reload(&self.appended, self.acknowledged, &loaded, orderly)?;
        self.restarts += 1;
        self.lost += self.appended.len() - kept;
        self.appended = process.session.events().to_vec();
        self.acknowledged = loaded.len();
        self.process = Some(process);
        Ok(())
    }

    fn apply(&mut self, op: Op) -> Result<(), String> {
        match op {
            Op::Append(n) => {
                let Some(p) = self.process.as_mut() else {
                    return Ok(());
                };
                for _ in 0..n {
                    let event = p.script.append(&p.session)?;
                    self.appended.push(event);
                }
            }
            Op::Flush => {
                let Some(p) = self.process.as_ref() else {
                    return Ok(());
                };
                let target = self.appended.len();
                p.runtime
                    .block_on(p.store.flush(&p.session))
                    .map_err(|e| format!("a flush on a healthy server failed: {e}"))?;
                self.acknowledged = target;
            }
            Op::CrashAt(k) => {
                let Some(p) = self.process.take() else {
                    return Ok(());
                };
                self.proxy.arm(Cut::DieAfterBytes(k));
                let target = self.appended.len();
                if p.runtime.block_on(p.store.flush(&p.session)).is_ok() {
                    self.acknowledged = target;
                }
                p.kill();
                self.proxy.up();
            }
            Op::Reopen => match self.process.take() {
                None => self.restart(false)?,
                Some(p) => {
                    let disposed = p.runtime.block_on(async {
                        p.service.dispose().await?;
                        p.backend.close().await
                    });
                    p.kill();
                    disposed.map_err(|e| format!("disposing the service failed: {e}"))?;
                    self.restart(true)?;
                }
            },
        }
        Ok(())
    }
}

/// What a run exercised.
#[derive(Debug, Default)]
struct Report {
    restarts: usize,
    lost: usize,
}

fn run(ops: &[Op]) -> Result<Report, String> {
    let schema = TestSchema::new();
    let proxy_runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let proxy = proxy_runtime.block_on(Proxy::start(upstream()));
    let (first, _) = boot(&schema.name, &proxy.url()).map_err(|e| format!("boot: {e}"))?;
    let mut model = Model {
        schema: schema.name.clone(),
        proxy,
        appended: first.session.events().to_vec(),
        process: Some(first),
        acknowledged: 0,
        restarts: 0,
        lost: 0,
    };
    for (step, op) in ops.iter().enumerate() {
        model
            .apply(*op)
            .map_err(|e| format!("step {step} ({op:?}): {e}"))?;
    }
    // A final crash.
    if let Some(p) = model.process.take() {
        p.kill();
    }
    model
        .restart(false)
        .map_err(|e| format!("final restart: {e}"))?;
    if let Some(p) = model.process.take() {
        p.kill();
    }
    drop(proxy_runtime);
    Ok(Report {
        restarts: model.restarts,
        lost: model.lost,
    })
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12)
}

/// Random appends, flushes, crashes at any byte and restarts.
#[test]
fn sessions_survive_any_crash() {
    if !server_available("sessions_survive_any_crash") {
        return;
    }
    let mut runner = TestRunner::new(Config {
        failure_persistence: None,
        ..Config::with_cases(cases())
    });
    let outcome = runner.run(&arb_ops(), |ops| {
        let report = run(&ops);
        prop_assert!(report.is_ok(), "{}", report.unwrap_err());
        Ok(())
    });
    if let Err(e) = outcome {
        panic!("{e}");
    }
}

/// Scripted crashes: during the first publication, in the middle of a flush, after a flush
/// completed, and orderly restarts.
#[test]
fn scripted_crashes_and_restarts_hold() {
    if !server_available("scripted_crashes_and_restarts_hold") {
        return;
    }
    // A crash during the first publication leaves no session: nothing was acknowledged.
    let report = run(&[Op::Append(4), Op::CrashAt(10), Op::Reopen]).unwrap();
    assert_eq!(report.lost, 4, "{report:?}");
    // A flush cut early loses only the unflushed events; the open turn is closed.
    let report = run(&[
        Op::Append(7),
        Op::Flush,
        Op::Append(3),
        Op::CrashAt(40),
        Op::Reopen,
        Op::Append(11),
        Op::Flush,
    ])
    .unwrap();
    assert_eq!(report.lost, 3, "{report:?}");
    assert_eq!(report.restarts, 2);
    // A long enough budget lets the flush finish: nothing is lost.
    let report = run(&[Op::Append(5), Op::CrashAt(1_000_000)]).unwrap();
    assert_eq!(report.lost, 0, "{report:?}");
    // Orderly restarts lose nothing.
    let report = run(&[
        Op::Append(9),
        Op::Reopen,
        Op::Append(9),
        Op::Reopen,
        Op::Reopen,
    ])
    .unwrap();
    assert_eq!(report.lost, 0, "{report:?}");
}
