//! Throughput of the `SQLite` backend on a chunk-heavy session: appending 512-event batches,
//! a full load, and a seeking read of the last 50 events (the reference's benchmark shapes).
#![allow(clippy::unwrap_used, missing_docs)]

use criterion::{Criterion, criterion_group, criterion_main};
use session_core::json::Value;
use session_core::{Event, SessionHeader};
use session_persist::Backend;
use session_persist_sqlite::{SqliteBackend, SqliteConfig};

fn chunk(seq: u64) -> Event {
    let data = Value::parse(&format!(
        r#"{{"turn":1,"step":{},"chunk":{{"type":"text-delta","index":0,"text":"token {seq} "}}}}"#,
        seq / 400
    ))
    .unwrap();
    Event::appended("assistant/chunk", seq, 1_000 + seq as i64, data, None, None)
}

fn session(n: u64) -> Vec<Event> {
    (0..n).map(chunk).collect()
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let events = session(4_096);
    let meta = SessionHeader::new("bench", 1_000);

    c.bench_function("append 8 batches of 512 chunks (memory)", |b| {
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
    c.bench_function("load 4,096 packed chunks", |b| {
        b.iter(|| rt.block_on(backend.load_stored("bench")).unwrap());
    });
    c.bench_function("seek the last 50 of 4,096", |b| {
        b.iter(|| {
            rt.block_on(backend.load_stored_from("bench", 4_046))
                .unwrap()
        });
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
