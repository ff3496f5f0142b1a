//! `floor`: the decode floor of a session log, the least work any restore of it must do.
//!
//! Usage: `floor <FILE> [THREADS] [zstd|none] [lines|json]` (default: 2 threads, zstd when the
//! file name ends in `.zstd`, `lines`).
//!
//! - zstd: the file's complete frames are split into `THREADS` contiguous runs of about equal
//!   compressed size; each thread decodes its run with one libzstd decompression context,
//!   reused across all of its frames, into one reused 128 KiB output buffer, and counts the
//!   newlines of the plaintext.
//! - none: the file is split into `THREADS` byte ranges and each thread counts its newlines.
//! - `json`: each thread also checks that every complete line of its plaintext is one JSON
//!   value, with `serde_json` into `IgnoredAny` (nothing is built). This is the floor of any
//!   reader that validates its lines: of the validating parsers measured on a session's lines
//!   (`serde_json`, `sonic-rs` and `simd-json`, BENCHMARKS.md), it was the fastest. A line
//!   that is not JSON fails the probe, naming its number.
//!
//! The file is read into memory before the clock starts (a restore reads it too, but the
//! floor is the decoding). Prints one line of `key=value` pairs: `seconds` (wall, decoding and
//! counting only), `lines`, `plain` (plaintext bytes), `frames`, `threads`.

#![allow(clippy::print_stdout)]

use std::process::ExitCode;
use std::time::Instant;

use session_persist::jsonl::scan_zstd_frames;
use zstd::zstd_safe::{DCtx, InBuffer, OutBuffer};

/// What a thread does with its plaintext: counts its newlines, and with `json` also checks
/// each complete line.
struct Sink {
    json: bool,
    plain: u64,
    lines: u64,
    /// The start of the line the last piece ended inside (`json` only).
    partial: Vec<u8>,
}

impl Sink {
    fn new(json: bool) -> Sink {
        Sink {
            json,
            plain: 0,
            lines: 0,
            partial: Vec::new(),
        }
    }

    fn push(&mut self, piece: &[u8]) -> Result<(), String> {
        self.plain += piece.len() as u64;
        if !self.json {
            self.lines += memchr::memchr_iter(b'\n', piece).count() as u64;
            return Ok(());
        }
        let mut rest = piece;
        while let Some(end) = memchr::memchr(b'\n', rest) {
            let (line, after) = (&rest[..end], &rest[end + 1..]);
            if self.partial.is_empty() {
                check_line(line, self.lines)?;
            } else {
                self.partial.extend_from_slice(line);
                check_line(&self.partial, self.lines)?;
                self.partial.clear();
            }
            self.lines += 1;
            rest = after;
        }
        self.partial.extend_from_slice(rest);
        Ok(())
    }

    fn finish(self) -> Result<(u64, u64), String> {
        if self.json && !self.partial.is_empty() {
            check_line(&self.partial, self.lines)?;
        }
        Ok((self.plain, self.lines))
    }
}

/// Whether `line` (the thread's line number `index`, from 0) is one JSON value.
fn check_line(line: &[u8], index: u64) -> Result<(), String> {
    serde_json::from_slice::<serde::de::IgnoredAny>(line)
        .map(|_| ())
        .map_err(|e| format!("line {index} of the thread's run: {e}"))
}

/// Plaintext bytes and newlines of one run of zstd frames, decoded with one reused context.
fn decode_run(bytes: &[u8], json: bool) -> Result<(u64, u64), String> {
    let mut ctx = DCtx::create();
    let mut out = vec![0u8; 128 << 10];
    let mut input = InBuffer::around(bytes);
    let mut sink = Sink::new(json);
    while input.pos() < bytes.len() {
        let mut output = OutBuffer::around(&mut out[..]);
        ctx.decompress_stream(&mut output, &mut input)
            .map_err(|code| format!("zstd: {}", zstd::zstd_safe::get_error_name(code)))?;
        sink.push(output.as_slice())?;
    }
    // Flush what the context still holds for the last frame.
    loop {
        let mut output = OutBuffer::around(&mut out[..]);
        let mut empty = InBuffer::around(&[][..]);
        ctx.decompress_stream(&mut output, &mut empty)
            .map_err(|code| format!("zstd: {}", zstd::zstd_safe::get_error_name(code)))?;
        let produced = output.as_slice();
        if produced.is_empty() {
            break;
        }
        sink.push(produced)?;
    }
    sink.finish()
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

/// Splits `bytes` into at most `n` contiguous ranges of about equal size, each cut right after
/// a newline (the last range takes what follows the last cut).
fn line_ranges(bytes: &[u8], n: usize) -> Vec<(usize, usize)> {
    let size = bytes.len().div_ceil(n.max(1)).max(1);
    let mut ranges = Vec::new();
    let mut start = 0;
    while start < bytes.len() {
        let target = start.saturating_add(size).min(bytes.len());
        let end = if ranges.len() + 1 >= n {
            bytes.len()
        } else {
            memchr::memchr(b'\n', &bytes[target.saturating_sub(1)..])
                .map_or(bytes.len(), |i| target + i)
        };
        ranges.push((start, end));
        start = end;
    }
    ranges
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.first() else {
        eprintln!("usage: floor <FILE> [THREADS] [zstd|none] [lines|json]");
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
    let json = match args.get(3).map(String::as_str) {
        None | Some("lines") => false,
        Some("json") => true,
        Some(other) => {
            eprintln!("floor: expected `lines` or `json`, got `{other}`");
            return ExitCode::from(2);
        }
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
                    s.spawn(move || decode_run(run, json))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        });
        (ranges.len(), results)
    } else {
        let results = std::thread::scope(|s| {
            let handles: Vec<_> = line_ranges(&bytes, threads)
                .into_iter()
                .map(|(a, b)| {
                    let part = &bytes[a..b];
                    s.spawn(move || {
                        let mut sink = Sink::new(json);
                        sink.push(part)?;
                        sink.finish()
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
                eprintln!("floor: {path}: {e}");
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
        for json in [false, true] {
            let (plain, lines) = decode_run(&file, json).unwrap_or_default();
            assert_eq!(plain, text.len() as u64);
            assert_eq!(lines, (1..=50).sum::<u64>());
            assert!(decode_run(b"not a frame", json).is_err());
        }
        let mut bad = file.clone();
        bad.extend(zstd::encode_all(&b"{\"line\":1}\n{\"line\"\n"[..], 3).unwrap_or_default());
        assert!(decode_run(&bad, false).is_ok());
        let refused = decode_run(&bad, true).err().unwrap_or_default();
        assert!(
            refused.contains(&format!("line {}", (1..=50).sum::<u64>() + 1)),
            "{refused}"
        );
    }

    #[test]
    fn a_line_split_across_pieces_is_checked_whole() {
        let mut sink = Sink::new(true);
        for piece in [&b"{\"a\":"[..], b"[1,", b"2]}\n{}", b"\n[", b"]"] {
            assert_eq!(sink.push(piece), Ok(()));
        }
        assert_eq!(sink.finish(), Ok((17, 2)));
        let mut sink = Sink::new(true);
        assert_eq!(sink.push(b"{\"a\":"), Ok(()));
        assert!(sink.push(b"\n{}\n").is_err());
    }

    #[test]
    fn line_ranges_cut_after_newlines_and_cover_everything() {
        let bytes = b"aaa\nbb\ncccc\nd\n\neeeee";
        for n in 1..10 {
            let ranges = line_ranges(bytes, n);
            assert!(ranges.len() <= n, "{n}: {ranges:?}");
            assert_eq!(ranges.first().map(|r| r.0), Some(0));
            assert_eq!(ranges.last().map(|r| r.1), Some(bytes.len()));
            for w in ranges.windows(2) {
                assert_eq!(w[0].1, w[1].0, "{n}: {ranges:?}");
                assert_eq!(bytes[w[0].1 - 1], b'\n', "{n}: {ranges:?}");
            }
        }
        assert!(line_ranges(b"", 2).is_empty());
    }
}
