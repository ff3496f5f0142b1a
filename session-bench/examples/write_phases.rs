//! Times the phases of the durable write path for profilers: appending chunk events to a live
//! session that persists to the zstd JSONL backend, and the flush that makes them durable.
//!
//! Run: `cargo run --release -p session-bench --example write_phases -- 10000 20 [MODE]`
//! (events per round, rounds). Modes:
//! - `burst` (default): each round appends to a new session, then flushes it.
//! - `sustained`: one session takes every round's events back to back and flushes once at the
//!   end, so the write-behind window batches them while the producer runs.
//! - `store`: the same appends to a session of a `SessionStore` without persistence.
//! - `shared`: to a `SharedSession` outside any store.
//! - `memory`: to a plain `Session`.

#![allow(clippy::print_stdout)] // the report is the program's output
#![allow(clippy::cast_precision_loss)] // event counts are far below 2^52

use std::time::{Duration, Instant};

use session_bench::{PersistedStore, clock, text_chunk};
use session_core::json::Value;
use session_store::{PrepareOptions, SessionStore};
use session_surface::{Draft, Session, SharedSession};

fn main() {
    let mut args = std::env::args().skip(1);
    let count: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let rounds: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(20);
    let mode = args.next().unwrap_or_else(|| "burst".to_owned());
    let total = count * rounds;
    let in_memory = |append: &mut dyn FnMut(Draft)| {
        append(Draft::new(
            "turn/start",
            Value::object([("turn", Value::from(1u8))]),
        ));
        let start = Instant::now();
        for _ in 0..total {
            append(text_chunk(1, 1, "tok "));
        }
        report(total, start.elapsed(), Duration::ZERO);
    };
    match mode.as_str() {
        "memory" => {
            let mut session = Session::create("w", None, None, clock()).expect("session");
            return in_memory(&mut |d| drop(session.append(d).expect("append")));
        }
        "shared" => {
            let session =
                SharedSession::new(Session::create("w", None, None, clock()).expect("session"));
            return in_memory(&mut |d| drop(session.append(d).expect("append")));
        }
        "store" => {
            let sessions = SessionStore::new(clock());
            let (session, _detach) = sessions
                .create(Some("w"), PrepareOptions::default())
                .expect("create");
            return in_memory(&mut |d| drop(session.append(d).expect("append")));
        }
        _ => {}
    }
    let sustained = mode == "sustained";
    let root = std::env::temp_dir().join(format!("session-write-phases-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let store = PersistedStore::open(&root, rt.handle().clone());
    let open = |n: u64| store.open_turn(&format!("w{n}"));
    if mode == "repeat" {
        // One session per round, each dropped after its flush: resident memory must not
        // grow with the number of rounds.
        for n in 0..rounds {
            let (session, detach) = open(n);
            let start = Instant::now();
            for _ in 0..count {
                session.append(text_chunk(1, 1, "tok ")).expect("chunk");
            }
            store.flush(&session);
            let elapsed = start.elapsed();
            // Between rounds, not by another thread during the next one.
            store.retire(&format!("w{n}"), &detach);
            drop(session);
            let rss = std::fs::read_to_string("/proc/self/statm")
                .ok()
                .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
                .unwrap_or(0)
                * 4096;
            println!(
                "round {n}: {:.0} ms, live sessions {}, resident {} MiB",
                elapsed.as_secs_f64() * 1e3,
                store.sessions.list().len(),
                rss >> 20
            );
        }
        return;
    }
    let (mut appending, mut flushing) = (Duration::ZERO, Duration::ZERO);
    if sustained {
        let (session, _detach) = open(0);
        let start = Instant::now();
        for _ in 0..count * rounds {
            session.append(text_chunk(1, 1, "tok ")).expect("chunk");
        }
        appending += start.elapsed();
        let start = Instant::now();
        store.flush(&session);
        flushing += start.elapsed();
    } else {
        for n in 0..rounds {
            let (session, detach) = open(n);
            let start = Instant::now();
            for _ in 0..count {
                session.append(text_chunk(1, 1, "tok ")).expect("chunk");
            }
            appending += start.elapsed();
            let start = Instant::now();
            store.flush(&session);
            flushing += start.elapsed();
            detach.detach();
        }
    }
    drop(store);
    let _ = std::fs::remove_dir_all(&root);
    report(total, appending, flushing);
}

fn report(events: u64, appending: Duration, flushing: Duration) {
    let both = (appending + flushing).as_secs_f64();
    println!(
        "{events} events: append {:.1} ms, flush {:.1} ms, {:.0} k events/s",
        appending.as_secs_f64() * 1e3,
        flushing.as_secs_f64() * 1e3,
        events as f64 / both / 1e3
    );
}
