//! Throughput of the `SQLite` backend.
//!
//! - `small/*`: a 4,096-chunk session in memory: appending 512-event batches, a full load,
//!   and a seeking read of the last 50 events (the reference's benchmark shapes).
//! - `append/batch/N`: appending batches of N streamed chunks to a database file (WAL,
//!   `synchronous = FULL`: one durable transaction per batch), reported per event.
//! - `million/*`: a 1,000,000-event session of agent turns (user message, streamed reasoning
//!   and text, assistant message; `conformance::backend_suite::fixtures::agent_session`) in a
//!   database file: a full `load_stored`, and `load_stored_from` near the tail. The database
//!   is built once and cached under the system temporary directory, keyed by
//!   [`MILLION_VERSION`]; change the key when the generator or the storage format changes.
#![allow(clippy::unwrap_used, missing_docs)]

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use conformance::backend_suite::fixtures::{agent_session, stream_delta};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use session_core::{Event, SessionHeader};
use session_persist::Backend;
use session_persist_sqlite::{SCHEMA_VERSION, SqliteBackend, SqliteConfig};

/// The cache key of the million-event database: bump when the generator changes.
const MILLION_VERSION: &str = "million-v2";
/// Events in the large session.
const MILLION: u64 = 1_000_000;
/// The large session's id.
const MILLION_ID: &str = "million";
/// Events per append batch when the large session is built (a write-behind batch).
const BUILD_BATCH: usize = 512;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

fn chunk(seq: u64) -> Event {
    stream_delta(seq, 1, "text-delta", 0)
}

fn private_dir(path: &Path) {
    std::fs::DirBuilder::new()
        .mode(0o700)
        .recursive(true)
        .create(path)
        .unwrap();
}

fn backend_at(path: &Path) -> SqliteBackend {
    SqliteBackend::new(SqliteConfig::new(path.to_str().unwrap())).unwrap()
}

/// The cached million-event database, built when missing or incomplete.
fn million_db(rt: &tokio::runtime::Runtime) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "session-persist-sqlite-bench-{MILLION_VERSION}-schema{SCHEMA_VERSION}"
    ));
    private_dir(&dir);
    let db = dir.join("million.db");
    if db.is_file() {
        let backend = backend_at(&db);
        let complete = rt.block_on(async {
            let tail = backend.load_stored_from(MILLION_ID, MILLION - 1).await;
            let _ = backend.close().await;
            matches!(tail, Ok(Some(t)) if t.events.len() == 1 && t.events[0].seq() == MILLION - 1)
        });
        if complete {
            return db;
        }
    }
    let building = dir.join(format!("million.{}.building.db", std::process::id()));
    let _ = std::fs::remove_file(&building);
    let started = Instant::now();
    let events = agent_session(MILLION);
    let backend = backend_at(&building);
    let meta = SessionHeader::new(MILLION_ID, 1_767_225_600_000);
    rt.block_on(async {
        for (i, batch) in events.chunks(BUILD_BATCH).enumerate() {
            backend.append_batch(&meta, batch, i > 0).await.unwrap();
        }
        backend.close().await.unwrap();
    });
    std::fs::rename(&building, &db).unwrap();
    eprintln!(
        "built {} ({MILLION} events) in {:.1} s",
        db.display(),
        started.elapsed().as_secs_f64()
    );
    db
}

fn small(c: &mut Criterion) {
    let rt = runtime();
    let events: Vec<Event> = (0..4_096).map(chunk).collect();
    let meta = SessionHeader::new("bench", 1_000);

    c.bench_function("small/append 8 batches of 512 chunks (memory)", |b| {
        b.iter(|| {
            rt.block_on(async {
                let backend = SqliteBackend::new(SqliteConfig::new(":memory:")).unwrap();
                for (i, batch) in events.chunks(512).enumerate() {
                    backend.append_batch(&meta, batch, i > 0).await.unwrap();
                }
            });
        });
    });

    let backend = SqliteBackend::new(SqliteConfig::new(":memory:")).unwrap();
    rt.block_on(async {
        for (i, batch) in events.chunks(512).enumerate() {
            backend.append_batch(&meta, batch, i > 0).await.unwrap();
        }
    });
    c.bench_function("small/load 4,096 packed chunks", |b| {
        b.iter(|| rt.block_on(backend.load_stored("bench")).unwrap());
    });
    c.bench_function("small/seek the last 50 of 4,096", |b| {
        b.iter(|| {
            rt.block_on(backend.load_stored_from("bench", 4_046))
                .unwrap()
        });
    });
}

fn append_by_batch_size(c: &mut Criterion) {
    let rt = runtime();
    let dir = std::env::temp_dir().join(format!(
        "session-persist-sqlite-bench-append-{}",
        std::process::id()
    ));
    private_dir(&dir);
    let mut group = c.benchmark_group("append/batch");
    for size in [1usize, 8, 64, 512] {
        let db = dir.join(format!("append-{size}.db"));
        let _ = std::fs::remove_file(&db);
        let backend = backend_at(&db);
        let meta = SessionHeader::new("append", 1_000);
        let mut next = 0u64;
        group.throughput(Throughput::Elements(size as u64));
        group.bench_with_input(BenchmarkId::from_parameter(size), &size, |b, &size| {
            b.iter_custom(|iters| {
                let batches: Vec<Vec<Event>> = (0..iters)
                    .map(|_| {
                        let batch = (next..next + size as u64).map(chunk).collect();
                        next += size as u64;
                        batch
                    })
                    .collect();
                rt.block_on(async {
                    let started = Instant::now();
                    for batch in &batches {
                        let first = batch[0].seq() > 0;
                        backend.append_batch(&meta, batch, first).await.unwrap();
                    }
                    started.elapsed()
                })
            });
        });
        rt.block_on(backend.close()).unwrap();
    }
    group.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

fn million(c: &mut Criterion) {
    let rt = runtime();
    let db = million_db(&rt);
    let backend = backend_at(&db);
    rt.block_on(backend.open()).unwrap();
    let mut group = c.benchmark_group("million");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    group.throughput(Throughput::Elements(MILLION));
    group.bench_function("load_stored", |b| {
        b.iter(|| {
            let stored = rt
                .block_on(backend.load_stored(MILLION_ID))
                .unwrap()
                .unwrap();
            assert_eq!(stored.events.len() as u64, MILLION);
            stored
        });
    });
    for tail in [50u64, 1_000] {
        group.throughput(Throughput::Elements(tail));
        group.bench_with_input(
            BenchmarkId::new("load_stored_from tail", tail),
            &tail,
            |b, &tail| {
                b.iter(|| {
                    let suffix = rt
                        .block_on(backend.load_stored_from(MILLION_ID, MILLION - tail))
                        .unwrap()
                        .unwrap();
                    assert_eq!(suffix.events.len() as u64, tail);
                    suffix
                });
            },
        );
    }
    group.finish();
    rt.block_on(backend.close()).unwrap();
}

criterion_group!(benches, small, append_by_batch_size, million);
criterion_main!(benches);
