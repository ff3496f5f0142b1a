//! The crash model (`conformance::crash_model`) against the real server: `run_with` persists
//! a live session through the persistence service and this backend, over a TCP proxy that
//! plays the machine ([`PostgresHarness`]). [`Op::CrashAt`]`(k)` lets the machine die once `k`
//! more bytes reach the server (the flush's transaction is cut there, and the machine refuses
//! every connection until it boots again); [`Op::Reopen`] disposes the service and starts a
//! new process. After every restart the model requires that the loaded log is a prefix of
//! everything appended plus honest closers, keeps every flushed event and leaves no turn open.
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
use conformance::crash_model::{CrashFailure, CrashHarness, Op, Report, arb_ops, run_with};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use session_persist::Backend;
use session_persist_postgres::{PostgresBackend, PostgresOptions};

const LEASE_TTL: Duration = Duration::from_millis(150);

/// The server behind a proxy that plays the machine; every process connects to a schema of
/// its own run.
struct PostgresHarness {
    schema: String,
    proxy: Proxy,
}

impl CrashHarness for PostgresHarness {
    fn open(&mut self, runtime: &tokio::runtime::Runtime) -> Result<Arc<dyn Backend>, String> {
        let options = PostgresOptions::default()
            .schema(self.schema.clone())
            .pool_size(2)
            .lease_ttl(LEASE_TTL)
            .lease_wait(LEASE_TTL * 10);
        let backend = runtime
            .block_on(PostgresBackend::connect(&self.proxy.url(), options))
            .map_err(|e| format!("the backend does not connect after a restart: {e}"))?;
        Ok(Arc::new(backend))
    }

    fn die_after(&mut self, bytes: u64) {
        self.proxy.arm(Cut::DieAfterBytes(bytes));
    }

    /// The proxy already cut the transaction in flight: nothing more is lost.
    fn lose_power(&mut self, _kept: u64) {}

    fn power_on(&mut self) {
        self.proxy.up();
    }
}

fn run(ops: &[Op]) -> Result<Report, CrashFailure> {
    let schema = TestSchema::new();
    let proxy_runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let mut harness = PostgresHarness {
        schema: schema.name.clone(),
        proxy: proxy_runtime.block_on(Proxy::start(upstream())),
    };
    let report = run_with(&mut harness, ops);
    drop(proxy_runtime);
    report
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
    assert_eq!(report.lost_unacknowledged, 4, "{report:?}");
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
    assert_eq!(report.lost_unacknowledged, 3, "{report:?}");
    assert_eq!(report.restarts, 2);
    // A long enough budget lets the flush finish: nothing is lost.
    let report = run(&[Op::Append(5), Op::CrashAt(1_000_000)]).unwrap();
    assert_eq!(report.lost_unacknowledged, 0, "{report:?}");
    // Orderly restarts lose nothing.
    let report = run(&[
        Op::Append(9),
        Op::Reopen,
        Op::Append(9),
        Op::Reopen,
        Op::Reopen,
    ])
    .unwrap();
    assert_eq!(report.lost_unacknowledged, 0, "{report:?}");
}
