//! A fleet on one pool: `FLEET_SESSIONS` sessions (default 256) appending concurrently through
//! one backend whose pool holds `FLEET_POOL` connections (default 16), each session
//! `FLEET_BATCHES` batches (default 20) of one 11-event agent turn, one transaction per batch
//! (a write-behind flush). Prints the throughput (batches and events per second) and the
//! flush latency (p50, p99, max): the time from asking for a connection to the commit, pool
//! waiting included. Run with `cargo bench -p session-persist-postgres --bench fleet`.
//! Without a reachable server it prints `SKIPPED: ...` to stderr and exits 0.
#![allow(clippy::unwrap_used, missing_docs, clippy::print_stdout)]

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use conformance::backend_suite::fixtures::turn;
use session_core::SessionHeader;
use session_persist_postgres::{DEFAULT_URL, PostgresBackend, PostgresOptions};

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo test --benches` asks for the list of benches
    }
    let sessions = env("FLEET_SESSIONS", 256);
    let pool = env("FLEET_POOL", 16);
    let batches = env("FLEET_BATCHES", 20);
    let url = std::env::var("SESSION_PG_URL").unwrap_or_else(|_| DEFAULT_URL.to_owned());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let schema = format!("fleet_bench_{}", std::process::id());
    let options = PostgresOptions::default()
        .schema(&schema)
        .pool_size(pool)
        .pool_timeout(Duration::from_secs(60));
    let backend = match rt.block_on(PostgresBackend::connect(&url, options)) {
        Ok(b) => Arc::new(b),
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "SKIPPED: PostgreSQL not reachable: {e}");
            return;
        }
    };
    let per_batch = turn(0, 1).len();
    let started = Instant::now();
    let mut latencies: Vec<Duration> = rt.block_on(async {
        let tasks: Vec<_> = (0..sessions)
            .map(|s| {
                let backend = backend.clone();
                tokio::spawn(async move {
                    let meta = SessionHeader::new(format!("fleet-{s}"), 1_000);
                    let mut seq = 0;
                    let mut times = Vec::with_capacity(batches);
                    for b in 0..batches {
                        let events = turn(seq, b as u64 + 1);
                        let t = Instant::now();
                        backend.append(&meta, &events, b > 0).await.unwrap();
                        times.push(t.elapsed());
                        seq += events.len() as u64;
                    }
                    times
                })
            })
            .collect();
        let mut all = Vec::new();
        for task in tasks {
            all.extend(task.await.unwrap());
        }
        all
    });
    let wall = started.elapsed();
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    let total = latencies.len();
    println!(
        "fleet: {sessions} sessions, pool {pool}, {total} flushes of {per_batch} events in {:.2} s: \
         {:.0} flushes/s, {:.0} events/s; flush latency p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        wall.as_secs_f64(),
        total as f64 / wall.as_secs_f64(),
        (total * per_batch) as f64 / wall.as_secs_f64(),
        at(0.50).as_secs_f64() * 1e3,
        at(0.99).as_secs_f64() * 1e3,
        latencies[total - 1].as_secs_f64() * 1e3,
    );
    rt.block_on(async {
        backend.shutdown().await.unwrap();
    });
    let _ = std::process::Command::new("psql")
        .args([&url, "-qc", &format!("DROP SCHEMA {schema} CASCADE")])
        .output();
}
