//! Forks a session of closed turns at its end many times, for profilers.
//!
//! Run: `cargo run --release -p session-bench --example fork_profile -- 1000000 100000`
//! (parent events, forks). Prints the mean time per fork; the children are dropped after the
//! timed loop.

#![allow(clippy::print_stdout)] // the report is the program's output
#![allow(clippy::cast_precision_loss)] // counts are far below 2^52

use std::time::Instant;

use session_bench::{chat_session_with_events, clock};

fn main() {
    let mut args = std::env::args().skip(1);
    let events: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let forks: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let parent = chat_session_with_events(events);
    let mut children = Vec::with_capacity(forks);
    let start = Instant::now();
    for _ in 0..forks {
        children.push(session_fork::fork_session(&parent, None, "child", clock()).expect("fork"));
    }
    let elapsed = start.elapsed();
    println!(
        "{} events: {:.2} µs per fork",
        parent.seq(),
        elapsed.as_secs_f64() * 1e6 / forks as f64
    );
}
