//! Appends chunk events to a small live session, for profilers (`valgrind --tool=callgrind`).
//!
//! Run: `cargo run --release -p session-bench --example chunk_append -- 200000`. Besides wall
//! time it reports the thread's on-CPU time, which a machine shared with other work inflates
//! much less.

#![allow(clippy::print_stdout)] // the report is the program's output
#![allow(clippy::cast_precision_loss)] // event counts are far below 2^52

use std::hint::black_box;
use std::time::Instant;

use session_bench::{chat_session, text_chunk};
use session_core::json::Value;
use session_surface::{Draft, PreparedDraft};

fn main() {
    let count: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200_000);
    let mut s = chat_session(10);
    let turn = 1_000_000;
    s.append(Draft::new(
        "turn/start",
        Value::object([("turn", Value::from(turn))]),
    ))
    .expect("turn/start");
    let draft = text_chunk(turn, 1, "tok ");
    let start = Instant::now();
    let cpu_start = cpu_seconds();
    for _ in 0..count {
        black_box(s.append(draft.clone()).expect("chunk"));
    }
    let elapsed = start.elapsed().as_secs_f64();
    let cpu = cpu_seconds().map(|end| end - cpu_start.unwrap_or(end));
    report("append(draft.clone())", count, elapsed, cpu);
    let prepared = PreparedDraft::new(draft).expect("prepared");
    let start = Instant::now();
    let cpu_start = cpu_seconds();
    for _ in 0..count {
        black_box(s.append_prepared(&prepared).expect("chunk"));
    }
    let elapsed = start.elapsed().as_secs_f64();
    let cpu = cpu_seconds().map(|end| end - cpu_start.unwrap_or(end));
    report("append_prepared(&prepared)", count, elapsed, cpu);
}

fn report(what: &str, count: usize, elapsed: f64, cpu: Option<f64>) {
    println!(
        "{count} x {what}: wall {:.1} ns/event ({:.0} events/s)",
        elapsed * 1e9 / count as f64,
        count as f64 / elapsed
    );
    if let Some(cpu) = cpu.filter(|&c| c > 0.0) {
        println!(
            "    on-CPU time {:.1} ns/event ({:.0} events/s)",
            cpu * 1e9 / count as f64,
            count as f64 / cpu
        );
    }
}

/// CPU time (user + system) of this thread so far, from `/proc/thread-self/schedstat`
/// (nanoseconds on the CPU); `None` where that file is missing.
fn cpu_seconds() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: f64 = text.split_whitespace().next()?.parse().ok()?;
    Some(ns / 1e9)
}
