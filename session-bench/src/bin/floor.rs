//! `floor`: the decode floor of a session log, the least work any restore of it must do.
//!
//! Usage: `floor <FILE> [THREADS] [zstd|none]` (default: 2 threads, zstd when the file name
//! ends in `.zstd`).
//!
//! - zstd: the file's complete frames are split into `THREADS` contiguous runs of about equal
//!   compressed size; each thread decodes its run with one libzstd decompression context,
//!   reused across all of its frames, into one reused 128 KiB output buffer, and counts the
//!   newlines of the plaintext.
//! - none: the file is split into `THREADS` byte ranges and each thread counts its newlines.
//!
//! The file is read into memory before the clock starts (a restore reads it too, but the
//! floor is the decoding). Prints one line of `key=value` pairs: `seconds` (wall, decoding and
//! counting only), `lines`, `plain` (plaintext bytes), `frames`, `threads`.

#![allow(clippy::print_stdout)]

use std::process::ExitCode;
use std::time::Instant;

use session_persist::jsonl::scan_zstd_frames;
use zstd::zstd_safe::{DCtx, InBuffer, OutBuffer};

/// Plaintext bytes and newlines of one run of zstd frames, decoded with one reused context.
fn decode_run(bytes: &[u8]) -> Result<(u64, u64), String> {
    let mut ctx = DCtx::create();
    let mut out = vec![0u8; 128 << 10];
    let mut input = InBuffer::around(bytes);
    let (mut plain, mut lines) = (0u64, 0u64);
    while input.pos() < bytes.len() {
        let mut output = OutBuffer::around(&mut out[..]);
        ctx.decompress_stream(&mut output, &mut input)
            .map_err(|code| zstd::zstd_safe::get_error_name(code).to_owned())?;
        let produced = output.as_slice();
        plain += produced.len() as u64;
        lines += memchr::memchr_iter(b'\n', produced).count() as u64;
    }
    // Flush what the context still holds for the last frame.
    loop {
        let mut output = OutBuffer::around(&mut out[..]);
        let mut empty = InBuffer::around(&[][..]);
        ctx.decompress_stream(&mut output, &mut empty)
            .map_err(|code| zstd::zstd_safe::get_error_name(code).to_owned())?;
        let produced = output.as_slice();
        if produced.is_empty() {
            break;
        }
        plain += produced.len() as u64;
        lines += memchr::memchr_iter(b'\n', produced).count() as u64;
    }
    Ok((plain, lines))
}

/// Splits `frames` (byte ranges, in order) into at most `n` contiguous runs of about equal
/// compressed size; returns each run's byte range.
fn split_runs(frames: &[(usize, usize)], n: usize) -> Vec<(usize, usize)> {
    let Some((&(first, _), &(_, last))) = frames.first().zip(frames.last()) else {
        return Vec::new();
    };
    let total = last - first;
    let mut runs = Vec::new();
    let mut start = first;
    for &(_, end) in frames {
        let target = first + total * (runs.len() + 1) / n;
        if end >= target && runs.len() + 1 < n {
            runs.push((start, end));
            start = end;
        }
    }
    if start < last {
        runs.push((start, last));
    }
    runs
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.first() else {
        eprintln!("usage: floor <FILE> [THREADS] [zstd|none]");
        return ExitCode::from(2);
    };
    let threads =
        match session_bench::count_arg(args.get(1).map(String::as_str), 2, "floor", "THREADS") {
            Ok(n) => n,
            Err(message) => {
                eprintln!("{message}");
                return ExitCode::from(2);
            }
        };
    let zstd = match args.get(2).map(String::as_str) {
        Some("zstd") => true,
        Some("none") => false,
        _ => std::path::Path::new(path)
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("zstd")),
    };
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("floor: {path}: {e}");
            return ExitCode::from(1);
        }
    };
    let start = Instant::now();
    let (frames, results) = if zstd {
        let scan = match scan_zstd_frames(&bytes, None) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("floor: {path}: {e}");
                return ExitCode::from(1);
            }
        };
        let ranges: Vec<(usize, usize)> = scan.frames.iter().map(|f| (f.start, f.end)).collect();
        let runs = split_runs(&ranges, threads);
        let results: Vec<Result<(u64, u64), String>> = std::thread::scope(|s| {
            let handles: Vec<_> = runs
                .iter()
                .map(|&(a, b)| {
                    let run = &bytes[a..b];
                    s.spawn(move || decode_run(run))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        });
        (ranges.len(), results)
    } else {
        let size = bytes.len().div_ceil(threads).max(1);
        let results = std::thread::scope(|s| {
            let handles: Vec<_> = bytes
                .chunks(size)
                .map(|part| {
                    s.spawn(move || {
                        Ok((
                            part.len() as u64,
                            memchr::memchr_iter(b'\n', part).count() as u64,
                        ))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        });
        (0, results)
    };
    let seconds = start.elapsed().as_secs_f64();
    let (mut plain, mut lines) = (0u64, 0u64);
    for r in results {
        match r {
            Ok((p, l)) => {
                plain += p;
                lines += l;
            }
            Err(e) => {
                eprintln!("floor: {path}: zstd: {e}");
                return ExitCode::from(1);
            }
        }
    }
    println!("seconds={seconds:.3} lines={lines} plain={plain} frames={frames} threads={threads}");
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_cover_every_frame_once_in_order() {
        let frames: Vec<(usize, usize)> = (0..10).map(|i| (i * 10, i * 10 + 10)).collect();
        for n in 1..12 {
            let runs = split_runs(&frames, n);
            assert!(runs.len() <= n.min(10), "{n}: {runs:?}");
            assert_eq!(runs.first().map(|r| r.0), Some(0));
            assert_eq!(runs.last().map(|r| r.1), Some(100));
            for w in runs.windows(2) {
                assert_eq!(w[0].1, w[1].0, "{n}: {runs:?}");
            }
        }
        assert!(split_runs(&[], 2).is_empty());
    }

    #[test]
    fn decoding_counts_the_lines_of_every_frame() {
        let mut file = Vec::new();
        let mut text = String::new();
        for i in 0..50 {
            let frame_text = format!("{{\"line\":{i}}}\n").repeat(i + 1);
            text.push_str(&frame_text);
            file.extend(zstd::encode_all(frame_text.as_bytes(), 3).unwrap_or_default());
        }
        let (plain, lines) = decode_run(&file).unwrap_or_default();
        assert_eq!(plain, text.len() as u64);
        assert_eq!(lines, (1..=50).sum::<u64>());
        assert!(decode_run(b"not a frame").is_err());
    }
}
