//! Throughput of the `PostgreSQL` backend against the server at `SESSION_PG_URL` (default
//! `host=127.0.0.1 port=5432 user=postgres dbname=test`). Without a reachable server every
//! bench prints `SKIPPED: PostgreSQL not reachable at ...` and does nothing.
//!
//! - `append/sessions/N`: N sessions appending concurrently, each one 11-event turn per
//!   iteration (one transaction each), through one backend with a pool of `min(N, 16)`
//!   connections; reported per event.
//! - `million/*`: a 1,000,000-event session of agent turns (user message, 60 reasoning and
//!   300 text deltas, assistant message; `conformance::backend_suite::fixtures::agent_session`,
//!   as in the `SQLite` bench): a full `load_stored`, and `load_stored_from` near the tail. The session is built once in the schema
//!   [`BENCH_SCHEMA`] and kept there (rebuilt when incomplete or when [`MILLION_ID`] changes).
#![allow(clippy::unwrap_used, missing_docs)]

use std::time::{Duration, Instant};

use conformance::backend_suite::fixtures::{agent_session, turn};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use session_core::SessionHeader;
use session_persist::Backend;
use session_persist_postgres::tokio_postgres::{self, NoTls};
use session_persist_postgres::{DEFAULT_URL, PostgresBackend, PostgresOptions};

/// The schema that keeps the large session between runs.
const BENCH_SCHEMA: &str = "session_persist_bench";
/// Events in the large session.
const MILLION: u64 = 1_000_000;
/// The large session's id: change it when the generator changes.
const MILLION_ID: &str = "million-v2";
/// Events per append batch when the large session is built.
const BUILD_BATCH: usize = 4_096;

fn url() -> String {
    std::env::var("SESSION_PG_URL").unwrap_or_else(|_| DEFAULT_URL.to_owned())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Whether the server answers; prints the loud skip line when it does not.
fn available(rt: &tokio::runtime::Runtime) -> bool {
    let probe = rt.block_on(async {
        let config: tokio_postgres::Config = url().parse().map_err(|e| format!("{e}"))?;
        let (client, connection) =
            tokio::time::timeout(Duration::from_secs(3), config.connect(NoTls))
                .await
                .map_err(|_| "connect timed out after 3 s".to_owned())?
                .map_err(|e| format!("{e}"))?;
        tokio::spawn(connection);
        client
            .simple_query("SELECT 1")
            .await
            .map(|_| ())
            .map_err(|e| format!("{e}"))
    });
    match probe {
        Ok(()) => true,
        Err(cause) => {
            eprintln!("SKIPPED: PostgreSQL not reachable at {} ({cause})", url());
            false
        }
    }
}

fn backend(rt: &tokio::runtime::Runtime, schema: &str, pool: usize) -> PostgresBackend {
    rt.block_on(PostgresBackend::connect(
        &url(),
        PostgresOptions::default()
            .schema(schema.to_owned())
            .pool_size(pool),
    ))
    .unwrap()
}

/// The large session, built when missing or incomplete.
fn million(rt: &tokio::runtime::Runtime, backend: &PostgresBackend) {
    let next = rt.block_on(backend.next_seq(MILLION_ID)).unwrap();
    if next == Some(MILLION) {
        return;
    }
    let started = Instant::now();
    let events = agent_session(MILLION);
    let meta = SessionHeader::new(MILLION_ID, 1_767_225_600_000);
    rt.block_on(async {
        if next.is_some() {
            let client = {
                let config: tokio_postgres::Config = url().parse().unwrap();
                let (client, connection) = config.connect(NoTls).await.unwrap();
                tokio::spawn(connection);
                client
            };
            client
                .execute(
                    &format!("DELETE FROM \"{BENCH_SCHEMA}\".sessions WHERE id = $1"),
                    &[&MILLION_ID],
                )
                .await
                .unwrap();
        }
        for (i, batch) in events.chunks(BUILD_BATCH).enumerate() {
            backend.append_batch(&meta, batch, i > 0).await.unwrap();
        }
    });
    eprintln!(
        "built {MILLION_ID} ({MILLION} events) in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

fn append(c: &mut Criterion) {
    let rt = runtime();
    if !available(&rt) {
        return;
    }
    let mut group = c.benchmark_group("append");
    for sessions in [1usize, 8, 32] {
        let schema = format!("{BENCH_SCHEMA}_append_{}", std::process::id());
        let b = backend(&rt, &schema, sessions.min(16));
        let metas: Vec<SessionHeader> = (0..sessions)
            .map(|i| SessionHeader::new(format!("s{i}"), 1_000))
            .collect();
        let mut turns = 0u64;
        group.throughput(Throughput::Elements(sessions as u64 * 11));
        group.bench_function(BenchmarkId::new("sessions", sessions), |bench| {
            bench.iter_custom(|iters| {
                let started = Instant::now();
                for _ in 0..iters {
                    let first = turns * 11;
                    let batch = turn(first, turns + 1);
                    rt.block_on(async {
                        let writes = metas.iter().map(|m| {
                            let b = b.clone();
                            let batch = batch.clone();
                            let m = m.clone();
                            tokio::spawn(async move { b.append(&m, &batch, first > 0).await })
                        });
                        for w in writes.collect::<Vec<_>>() {
                            w.await.unwrap().unwrap();
                        }
                    });
                    turns += 1;
                }
                started.elapsed()
            });
        });
        rt.block_on(async {
            b.shutdown().await.unwrap();
            let config: tokio_postgres::Config = url().parse().unwrap();
            let (client, connection) = config.connect(NoTls).await.unwrap();
            tokio::spawn(connection);
            client
                .batch_execute(&format!("DROP SCHEMA \"{schema}\" CASCADE"))
                .await
                .unwrap();
        });
    }
    group.finish();
}

fn load(c: &mut Criterion) {
    let rt = runtime();
    if !available(&rt) {
        return;
    }
    let b = backend(&rt, BENCH_SCHEMA, 4);
    million(&rt, &b);
    let mut group = c.benchmark_group("million");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    group.throughput(Throughput::Elements(MILLION));
    group.bench_function("load_stored", |bench| {
        bench.iter(|| {
            let stored = rt.block_on(b.load_stored(MILLION_ID)).unwrap().unwrap();
            assert_eq!(stored.events.len() as u64, MILLION);
        });
    });
    group.throughput(Throughput::Elements(50));
    group.bench_function("load_stored_from tail 50", |bench| {
        bench.iter(|| {
            let suffix = rt
                .block_on(b.load_stored_from(MILLION_ID, MILLION - 50))
                .unwrap()
                .unwrap();
            assert_eq!(suffix.events.len(), 50);
        });
    });
    group.finish();
    rt.block_on(b.shutdown()).unwrap();
}

criterion_group!(benches, append, load);
criterion_main!(benches);
