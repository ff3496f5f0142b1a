//! Per-call costs of the in-memory session layer, at growing session sizes.
//!
//! Run: `cargo bench -p session-bench --bench session`.

#![allow(missing_docs)] // criterion_group! generates undocumented functions

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};
use session_bench::{
    append_turn, assistant_message, chat_session, chat_session_with_events, text_chunk,
    user_message,
};
use session_core::json::Value;
use session_surface::{Draft, PreparedDraft, Session};

const SIZES: [usize; 4] = [1_000, 10_000, 100_000, 1_000_000];

fn append_mix(c: &mut Criterion) {
    let mut g = c.benchmark_group("append");
    g.bench_function("realistic_turn_9_events", |b| {
        b.iter_batched(
            || chat_session(10),
            |mut s| {
                append_turn(&mut s, 1_000_000);
                s
            },
            BatchSize::SmallInput,
        );
    });
    g.throughput(criterion::Throughput::Elements(1));
    g.bench_function("chunk", |b| {
        let mut s = chat_session(10);
        let turn = 1_000_000;
        s.append(Draft::new(
            "turn/start",
            Value::object([("turn", Value::from(turn))]),
        ))
        .expect("turn/start");
        // The draft is built once; cloning it is O(1) (shared immutable JSON), so this measures
        // validation, surface planning and commit.
        let draft = text_chunk(turn, 1, "tok ");
        b.iter(|| black_box(s.append(draft.clone()).expect("chunk")));
    });
    g.bench_function("chunk_prepared_once", |b| {
        let mut s = chat_session(10);
        let turn = 1_000_000;
        s.append(Draft::new(
            "turn/start",
            Value::object([("turn", Value::from(turn))]),
        ))
        .expect("turn/start");
        // The draft's JSON is checked and frozen once; each append runs the session checks
        // and commits a new event.
        let draft = PreparedDraft::new(text_chunk(turn, 1, "tok ")).expect("prepared");
        b.iter(|| black_box(s.append_prepared(&draft).expect("chunk")));
    });
    g.bench_function("chunk_including_draft_construction", |b| {
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

/// Appends made to one copy of a base session before it is reset to the base again (outside
/// the timed section): 1 % of the base's messages, at least 10, so every timed call runs on a
/// session within 1 % of its nominal size.
fn appends_per_reset(n: usize) -> u64 {
    (n as u64 / 100).max(10)
}

/// Times `iters` calls of `op` on a session of about `n` messages: each call appends one user
/// message to a working copy of `base` and runs `op` on it; the copy is reset to `base` every
/// [`appends_per_reset`] calls, untimed, and dropped untimed.
fn time_on_reset_copies<T>(
    base: &Session,
    n: usize,
    iters: u64,
    mut op: impl FnMut(&Session) -> T,
) -> Duration {
    let per_reset = appends_per_reset(n);
    let mut total = Duration::ZERO;
    let mut done = 0;
    while done < iters {
        let mut s = base.clone();
        let batch = per_reset.min(iters - done);
        for _ in 0..batch {
            let t = Instant::now();
            s.append(user_message("u", "more")).expect("append");
            black_box(op(&s));
            total += t.elapsed();
        }
        done += batch;
        drop(s);
    }
    total
}

/// Appends one user message, then takes `derive_messages()` (an O(1) handle); and the same,
/// then iterates every derived message (O(messages)).
fn derive_after_append(c: &mut Criterion) {
    let mut g = c.benchmark_group("derive_after_append");
    g.sample_size(20);
    for n in SIZES {
        let base = chat_session(n);
        g.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, &n| {
            b.iter_custom(|iters| time_on_reset_copies(&base, n, iters, Session::derive_messages));
        });
    }
    g.finish();
    let mut g = c.benchmark_group("derive_after_append_iterate");
    g.sample_size(10);
    for n in SIZES {
        let base = chat_session(n);
        g.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, &n| {
            b.iter_custom(|iters| {
                time_on_reset_copies(&base, n, iters, |s| {
                    s.derive_messages().iter().fold(0usize, |count, m| {
                        count + usize::from(black_box(m).get("role").is_some())
                    })
                })
            });
        });
    }
    g.finish();
}

/// Appends one user message, then takes an `events()` snapshot.
fn snapshot(c: &mut Criterion) {
    let mut g = c.benchmark_group("events_snapshot");
    g.sample_size(20);
    for n in SIZES {
        let base = chat_session(n);
        g.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, &n| {
            b.iter_custom(|iters| time_on_reset_copies(&base, n, iters, Session::events));
        });
    }
    g.finish();
}

/// The work of a pass over a log, per event: its type and seq read, in a for loop as the passes
/// over a log are written.
fn pass<'a>(events: impl Iterator<Item = &'a session_core::Event>) -> (u64, u64) {
    let (mut ends, mut seqs) = (0u64, 0u64);
    for e in events {
        ends += u64::from(e.event_type() == "turn/end");
        seqs ^= e.seq();
    }
    (ends, seqs)
}

/// One pass over every event of a log (the pass `sessionctl inspect` makes for its type counts
/// and turns): the log's leaf iterator against `imbl`'s element iterator over the same events.
fn iterate(c: &mut Criterion) {
    let mut g = c.benchmark_group("events_iterate");
    g.sample_size(20);
    for n in [10_000, 1_000_000] {
        let events = chat_session_with_events(n).events();
        let elements: imbl::Vector<session_core::Event> = events.iter().cloned().collect();
        assert_eq!(elements.len(), events.len());
        g.bench_with_input(BenchmarkId::new("leaf", n), &n, |b, _| {
            b.iter(|| black_box(pass(events.iter())));
        });
        g.bench_with_input(BenchmarkId::new("element", n), &n, |b, _| {
            b.iter(|| black_box(pass(elements.iter())));
        });
    }
    g.finish();
}

fn replace(c: &mut Criterion) {
    let mut g = c.benchmark_group("compaction_replace_10_nodes");
    g.sample_size(20);
    for n in SIZES {
        let mut s = chat_session(n);
        let mut turn = 2_000_000;
        g.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    // Keep the surface at its size: replenish outside the timed section.
                    while s.surface().nodes().len() < n {
                        turn += 1;
                        append_turn(&mut s, turn);
                    }
                    // Replace the 10 nodes in the middle of the surface with one summary.
                    let nodes = s.surface().nodes();
                    let mid = nodes.len() / 2;
                    let start = nodes.get(mid).expect("node");
                    let end = nodes.get(mid + 9).expect("node");
                    let sources: Vec<u64> = (mid..mid + 10)
                        .map(|i| nodes.get(i).expect("node"))
                        .collect();
                    let draft = assistant_message("summary", 1, 1, "summary")
                        .replace_op(start, end)
                        .sources(&sources);
                    let t = Instant::now();
                    black_box(s.append(draft).expect("replace"));
                    total += t.elapsed();
                }
                total
            });
        });
    }
    g.finish();
}

fn fork(c: &mut Criterion) {
    let mut g = c.benchmark_group("fork");
    g.sample_size(20);
    for n in SIZES {
        // A session of closed turns with `n` events: the last closed turn is its end.
        let parent = chat_session_with_events(n);
        // The child is dropped outside the timed section (`iter_with_large_drop`).
        g.bench_with_input(BenchmarkId::new("last_closed_turn", n), &n, |b, _| {
            b.iter_with_large_drop(|| {
                session_fork::fork_session(&parent, None, "child", session_bench::clock())
                    .expect("fork")
            });
        });
        // The last closed turn at or before the middle: the derived state is brought forward
        // from the nearest checkpoint.
        let middle = last_closed_turn_before(&parent, parent.seq() / 2);
        g.bench_with_input(BenchmarkId::new("middle_closed_turn", n), &n, |b, _| {
            b.iter_with_large_drop(|| {
                session_fork::fork_session(
                    &parent,
                    Some(&session_core::event::seq_value(middle)),
                    "child",
                    session_bench::clock(),
                )
                .expect("fork")
            });
        });
    }
    g.finish();
}

/// The seq of the last `turn/end` at or before `seq`.
fn last_closed_turn_before(s: &Session, seq: u64) -> u64 {
    (0..=seq)
        .rev()
        .find(|&q| s.event(q).is_some_and(|e| e.event_type() == "turn/end"))
        .expect("a closed turn")
}

criterion_group!(
    benches,
    append_mix,
    derive_after_append,
    snapshot,
    iterate,
    replace,
    fork
);
criterion_main!(benches);
