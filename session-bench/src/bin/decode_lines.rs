//! `decode_lines`: the storage-line decoder alone, on one thread, over a plain JSONL file.
//!
//! Usage: `decode_lines <FILE> [ROUNDS]` (default: 3 rounds).
//!
//! Every non-empty line of the file is decoded with one `StorageDecoder`, as a log reader
//! decodes it (the fast paths for chunk rows, delta chunks and envelopes, the general JSON
//! parse for the rest), without the log rules, the restore or any I/O: the file is read into
//! memory first, and a header line decodes like any other line. The events are kept until the
//! round ends, as a reader keeps them, and dropped outside the clock. Its use is to measure
//! one kind of line in isolation, for example a log's message lines picked out with `grep`,
//! under `valgrind --tool=callgrind` (single-threaded, so the count repeats).
//!
//! Prints one line of `key=value` pairs per round: `seconds` (decoding only), `lines`,
//! `events`, `bytes`, `mb_per_s`.

#![allow(clippy::print_stdout)]

use std::process::ExitCode;
use std::time::Instant;

use session_core::chunk_rows::StorageDecoder;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.first() else {
        eprintln!("usage: decode_lines <FILE> [ROUNDS]");
        return ExitCode::from(2);
    };
    let rounds = match session_bench::count_arg(
        args.get(1).map(String::as_str),
        3,
        "decode_lines",
        "ROUNDS",
    ) {
        Ok(n) => n,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("decode_lines: {path}: {e}");
            return ExitCode::from(1);
        }
    };
    let lines: Vec<&[u8]> = bytes
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    for _ in 0..rounds {
        let mut decoder = StorageDecoder::new();
        let start = Instant::now();
        for line in &lines {
            decoder.decode_line(line);
        }
        let kept = decoder.take_events();
        let seconds = start.elapsed().as_secs_f64();
        println!(
            "seconds={seconds:.4} lines={} events={} bytes={} mb_per_s={:.0}",
            lines.len(),
            kept.len(),
            bytes.len(),
            bytes.len() as f64 / seconds / 1e6
        );
        drop(kept);
    }
    ExitCode::SUCCESS
}
