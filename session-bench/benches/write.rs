//! Write-path and listing costs of the JSONL backend.
//!
//! - `write/persist_chunks_sustained`: one producer appends chunk events to a live session
//!   through `SessionStore` + `Persistence` + `JsonlBackend` (zstd, default write-behind delay,
//!   one fsync per batch) into a temporary root; each iteration appends the first
//!   [`SUSTAINED_CHUNKS`] chunks of the generator's chunk stream
//!   ([`session_bench::generator::chunk_stream`], seed 1: reasoning, text and tool-call deltas
//!   of realistic sizes, usage and finish chunks) back to back to a new session (the 200 ms
//!   window cuts several batches that are written while the producer runs), then waits until
//!   all are durable. Throughput is in events; `write/persist_chunks_sustained_bytes` is the
//!   same run reported in bytes of the chunks' JSON text (MB/s).
//! - `write/persist_chunks`: the same with bursts of [`CHUNKS`] chunks, each made durable by
//!   an explicit flush before the window expires: the cost of a flush barrier that encodes,
//!   compresses, writes and syncs the whole burst after the producer stops.
//! - `write/memory_chunk`: `Session::append` of one chunk event alone, for comparison.
//! - `list/10000_sessions`: `Backend::list` (headers only) over a root of 10,000 sessions, each
//!   a header and one event written by the backend. The root is built once and kept under the
//!   system temporary directory for later runs.
//!
//! Run: `cargo bench -p session-bench --bench write`.

use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_main};
use session_bench::{PersistedStore, chat_session, text_chunk};
use session_core::json::Value;
use session_core::{Event, SessionHeader};
use session_persist::Backend;
use session_persist::jsonl::{JsonlBackend, JsonlConfig};
use session_surface::Draft;

/// Chunk events appended per iteration of `write/persist_chunks`.
const CHUNKS: u64 = 10_000;
/// Chunk events appended per iteration of `write/persist_chunks_sustained`.
const SUSTAINED_CHUNKS: u64 = 500_000;
/// Sessions in the listing root.
const LIST_SESSIONS: usize = 10_000;

/// A temporary directory, removed on drop.
struct TempRoot(PathBuf);

impl TempRoot {
    fn new(tag: &str) -> TempRoot {
        let dir = std::env::temp_dir().join(format!("session-bench-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp root");
        TempRoot(dir)
    }
}

impl Drop for TempRoot {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// The chunk drafts of one sustained iteration: the generator's chunk stream, in turn 1, step 1
/// of the session `open_turn` starts.
fn realistic_chunks() -> (Vec<Draft>, u64) {
    let stream =
        session_bench::generator::chunk_stream(1, SUSTAINED_CHUNKS as usize).expect("chunk stream");
    let drafts: Vec<Draft> = stream
        .into_iter()
        .map(|chunk| {
            Draft::new(
                "assistant/chunk",
                Value::object([
                    ("turn", Value::from(1u8)),
                    ("step", Value::from(1u8)),
                    ("chunk", chunk),
                ]),
            )
        })
        .collect();
    // Bytes of the appended events' JSON text, measured on a plain session.
    let mut s = chat_session(0);
    s.append(Draft::new(
        "turn/start",
        Value::object([("turn", Value::from(1u8))]),
    ))
    .expect("turn/start");
    let mut bytes = 0u64;
    for d in &drafts {
        bytes += s.append(d.clone()).expect("chunk").to_json().len() as u64 + 1;
    }
    (drafts, bytes)
}

fn persist_chunks(c: &mut Criterion) {
    let rt = runtime();
    let root = TempRoot::new("write");
    let store = PersistedStore::open(&root.0, rt.handle().clone());
    let mut next = 0u64;
    let (stream, stream_bytes) = realistic_chunks();

    let mut g = c.benchmark_group("write");
    for (name, throughput, chunks) in [
        (
            "persist_chunks_sustained",
            Throughput::Elements(SUSTAINED_CHUNKS),
            SUSTAINED_CHUNKS,
        ),
        (
            "persist_chunks_sustained_bytes",
            Throughput::Bytes(stream_bytes),
            SUSTAINED_CHUNKS,
        ),
        ("persist_chunks", Throughput::Elements(CHUNKS), CHUNKS),
    ] {
        g.throughput(throughput);
        if chunks == SUSTAINED_CHUNKS {
            g.sample_size(10);
        } else {
            g.sample_size(100);
        }
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    next += 1;
                    let id = format!("w{next}");
                    let (session, detach) = store.open_turn(&id);
                    let start = Instant::now();
                    if chunks == SUSTAINED_CHUNKS {
                        for draft in &stream {
                            session.append(draft.clone()).expect("chunk");
                        }
                    } else {
                        for _ in 0..chunks {
                            session.append(text_chunk(1, 1, "tok ")).expect("chunk");
                        }
                    }
                    store.flush(&session);
                    total += start.elapsed();
                    // Untimed: the session's memory is given back here, not by another
                    // thread during the next iteration.
                    store.retire(&id, &detach);
                    drop(session);
                }
                total
            });
        });
    }
    g.finish();
}

fn memory_chunk(c: &mut Criterion) {
    let mut g = c.benchmark_group("write");
    g.throughput(Throughput::Elements(1));
    g.bench_function("memory_chunk", |b| {
        let mut s = chat_session(10);
        let turn = 1_000_000;
        s.append(Draft::new(
            "turn/start",
            Value::object([("turn", Value::from(turn))]),
        ))
        .expect("turn/start");
        b.iter(|| black_box(s.append(text_chunk(turn, 1, "tok ")).expect("chunk")));
    });
    g.finish();
}

/// The listing root: built once (a marker file records completion) and reused.
fn list_root(rt: &tokio::runtime::Runtime) -> PathBuf {
    let root = std::env::temp_dir().join(format!("session-bench-list-{LIST_SESSIONS}-v1"));
    let marker = root.join(".complete");
    if marker.is_file() {
        return root;
    }
    let _ = std::fs::remove_dir_all(&root);
    let backend = JsonlBackend::open(JsonlConfig::new(&root)).expect("backend");
    rt.block_on(async {
        let ids: Vec<usize> = (0..LIST_SESSIONS).collect();
        for group in ids.chunks(64) {
            let mut tasks = Vec::new();
            for &n in group {
                let backend = backend.clone();
                tasks.push(tokio::spawn(async move {
                    let id = format!("s{n:05}");
                    let mut meta = SessionHeader::new(id.as_str(), 1_700_000_000_000);
                    meta.cwd = Some(format!("/bench/project-{}", n % 50).into());
                    let event = Event::appended(
                        "session/title",
                        0,
                        0,
                        Value::object([("title", Value::from(id.as_str()))]),
                        None,
                        None,
                    );
                    backend
                        .append_batch(&meta, &[event], false)
                        .await
                        .expect("write");
                    backend.release(&id).await.expect("release");
                }));
            }
            for t in tasks {
                t.await.expect("task");
            }
        }
    });
    std::fs::write(&marker, b"").expect("marker");
    root
}

fn list(c: &mut Criterion) {
    let rt = runtime();
    let root = list_root(&rt);
    let backend = JsonlBackend::open(JsonlConfig::new(&root)).expect("backend");
    let mut g = c.benchmark_group("list");
    g.throughput(Throughput::Elements(LIST_SESSIONS as u64));
    g.bench_function("10000_sessions", |b| {
        b.iter(|| {
            let headers = rt.block_on(backend.list()).expect("list");
            assert_eq!(headers.len(), LIST_SESSIONS);
            black_box(headers)
        });
    });
    g.finish();
}

/// The benchmark group (`criterion_group!` generates an undocumented function).
#[allow(missing_docs)]
mod group {
    use super::{list, memory_chunk, persist_chunks};
    criterion::criterion_group!(benches, persist_chunks, memory_chunk, list);
}
criterion_main!(group::benches);
