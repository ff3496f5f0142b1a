//! Reading logs: the revision-stable file read, and the raw and Zstandard prefix readers.
//!
//! # The restore pipeline
//!
//! A log is read in one streaming pass, never holding its whole plaintext, and the expensive
//! work is spread over the machine's cores: the calling thread reads the file in blocks and
//! cuts it into *jobs* (runs of complete Zstandard frames, or of complete plain lines); a job
//! is decoded (decompressed, split into lines, parsed and expanded into events) by whichever
//! thread is free, the calling thread included; the decoded jobs are then applied to the
//! [`SessionLogScanner`] strictly in file order, so every scanner rule (seq contiguity, torn
//! tails, the first issue, line numbers and offsets in messages) sees exactly the sequence of
//! lines the sequential reader sees. A job assumes it starts at a line boundary; when it does
//! not (a line crossing a frame boundary, which the writer never produces), its decoded lines
//! are dropped and its plaintext is rescanned in order.
//!
//! Errors keep the reference's precedence. A read error wins (the reference reads the whole
//! file first). In a Zstandard log a structural error anywhere in the file wins over any
//! decoding or scanning error (the reference scans every frame header before decoding): after
//! a decoding or scanning error the rest of the file is still read and its frames scanned.

use std::io;
use std::path::Path;

use session_core::Event;

use super::frames::{
    FrameDecoder, FrameInfo, MAX_RECORD_BYTES, PlainBudget, scan_frames, scan_zstd_frames,
};
use super::fs::{Fs, FsFile, Stat, read_to_end};
use super::header_line::ParsedHeader;
use super::pipeline::{Failure, Job, Tuning, is_small, job_frames, run_jobs};
use super::scanner::{SessionLogScanner, find_newline, rfind_newline};
use super::seal::LineDigest;
use crate::backend::{SharedEventSink, TornMarker};
use crate::error::{Error, Result};

/// A stored log as read: the valid prefix and what repair must cut.
#[derive(Debug)]
pub(crate) struct Prefix {
    pub(crate) header: ParsedHeader,
    pub(crate) events: Vec<Event>,
    pub(crate) invalid: Option<(usize, Vec<Event>)>,
    pub(crate) torn: Option<TornMarker>,
    /// The digest of every record read, when the load was asked for it.
    pub(crate) lines: Option<LineDigest>,
}

/// `stat`, with a missing file as `None`.
pub(crate) fn stat_if_exists(fs: &dyn Fs, path: &Path) -> Result<Option<Stat>> {
    match fs.stat(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io("stat", path, e)),
    }
}

/// Reads a whole file between two `stat`s that agree, so the bytes belong to one revision.
/// A file that disappears reads as `None`.
pub(crate) fn stable_read(fs: &dyn Fs, path: &Path) -> Result<Option<(Vec<u8>, Stat)>> {
    loop {
        let Some(before) = stat_if_exists(fs, path)? else {
            return Ok(None);
        };
        let mut file = match fs.open_read(path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io("open", path, e)),
        };
        let bytes = read_to_end(file.as_mut()).map_err(|e| Error::io("read", path, e))?;
        drop(file);
        let Some(after) = stat_if_exists(fs, path)? else {
            return Ok(None);
        };
        if before.revision_text() == after.revision_text() {
            return Ok(Some((bytes, after)));
        }
    }
}

/// Reads the stored prefix of the log at `path` in one streaming pass between two `stat`s that
/// agree (see [`stable_read`]). The outer result carries file-system errors; the inner one
/// what the log's content gives. A file that disappears reads as `None`.
/// With a `sink`, valid events are handed to it as the scanner accepts them (each attempt
/// starts it again), and the prefix's events are the ones after them. With `digest`, every
/// record read is hashed into [`Prefix::lines`].
pub(crate) fn load_prefix(
    fs: &dyn Fs,
    path: &Path,
    zstd: bool,
    sink: Option<&SharedEventSink>,
    digest: bool,
) -> Result<Option<(Result<Prefix>, Stat)>> {
    loop {
        let Some(before) = stat_if_exists(fs, path)? else {
            return Ok(None);
        };
        let mut file = match fs.open_read(path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io("open", path, e)),
        };
        let tuning = Tuning::for_size(before.size);
        let file: &mut dyn FsFile = file.as_mut();
        let mut read = |buf: &mut [u8]| file.read(buf);
        let outcome = if zstd {
            load_zstd(&mut read, tuning, sink, digest)
        } else {
            load_raw(&mut read, tuning, sink, digest)
        };
        let outcome = match outcome {
            Ok(prefix) => Ok(prefix),
            Err(Failure::Read(e)) => return Err(Error::io("read", path, e)),
            Err(Failure::Log(e)) => Err(e),
        };
        let Some(after) = stat_if_exists(fs, path)? else {
            return Ok(None);
        };
        if before.revision_text() == after.revision_text() {
            return Ok(Some((outcome, after)));
        }
    }
}

/// [`load_prefix`]'s reader over bytes in memory, with the given tuning (and, with `digest`,
/// the digest of the records read).
#[cfg(test)]
pub(crate) fn from_memory(buf: &[u8], zstd: bool, tuning: Tuning, digest: bool) -> Result<Prefix> {
    let mut rest = buf;
    let mut read = |out: &mut [u8]| {
        let n = out.len().min(rest.len());
        out[..n].copy_from_slice(&rest[..n]);
        rest = &rest[n..];
        Ok(n)
    };
    let outcome = if zstd {
        load_zstd(&mut read, tuning, None, digest)
    } else {
        load_raw(&mut read, tuning, None, digest)
    };
    outcome.map_err(|e| match e {
        Failure::Read(e) => Error::io("read", "memory", e),
        Failure::Log(e) => e,
    })
}

/// Whether `plain` is exactly one line: non-empty, ending in its only newline.
pub(crate) fn is_one_line(plain: &[u8]) -> bool {
    matches!(plain.split_last(), Some((b'\n', body)) if !body.contains(&b'\n'))
}

/// The logical text of a Zstandard log: the plaintext of its complete frames (a torn final
/// frame is omitted), under the decompression limits ([`PlainBudget`]).
pub(crate) fn zstd_text(buf: &[u8]) -> Result<Vec<u8>> {
    let scan = scan_zstd_frames(buf, None)?;
    if scan.frames.is_empty() {
        return Err(Error::EmptyLog { zstd: true });
    }
    let mut decoder = FrameDecoder::new();
    let mut budget = PlainBudget::default();
    let mut out = Vec::new();
    for frame in &scan.frames {
        budget.start_frame();
        decoder.decode_frame(&buf[frame.start..frame.end], frame.start, |chunk| {
            budget.feed(chunk, frame.start)?;
            out.extend_from_slice(chunk);
            Ok(())
        })?;
    }
    Ok(out)
}
/// The most bytes one read asks for (unless a long record needs more).
const MAX_READ_BYTES: usize = 1 << 20;

/// The most a plain log's reader buffers of one line: one byte more than [`MAX_RECORD_BYTES`],
/// enough to refuse the line.
const LINE_CAP: usize = MAX_RECORD_BYTES as usize + 1;

type ReadFn<'a> = &'a mut dyn FnMut(&mut [u8]) -> io::Result<usize>;

/// Complete frames: their bytes (from the first frame's offset) and the frames.
type FrameRun = (Vec<u8>, Vec<FrameInfo>);

/// The unconsumed bytes of a file being read front to back.
struct Input<'a> {
    read: ReadFn<'a>,
    /// Bytes from offset `base` on.
    buf: Vec<u8>,
    base: usize,
    eof: bool,
    block: usize,
}

impl<'a> Input<'a> {
    fn new(read: ReadFn<'a>, block: usize) -> Input<'a> {
        Input {
            read,
            buf: Vec::new(),
            base: 0,
            eof: false,
            block,
        }
    }

    /// Reads the next block: up to a job's size (at most [`MAX_READ_BYTES`]), or as much as is
    /// buffered when that is more, so that a long record is read in a logarithmic number of
    /// steps.
    fn fill(&mut self) -> std::result::Result<(), Failure> {
        self.fill_up_to(usize::MAX)
    }

    /// [`Input::fill`], buffering at most `cap` bytes in all (at least one more).
    fn fill_up_to(&mut self, cap: usize) -> std::result::Result<(), Failure> {
        let old = self.buf.len();
        let grow = self.block.clamp(1, MAX_READ_BYTES).max(old);
        self.buf.resize((old + grow).min(cap.max(old + 1)), 0);
        loop {
            match (self.read)(&mut self.buf[old..]) {
                Ok(n) => {
                    self.buf.truncate(old + n);
                    self.eof = n == 0;
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.buf.truncate(old);
                    return Err(Failure::Read(e));
                }
            }
        }
    }

    /// Takes the first `n` buffered bytes.
    fn take(&mut self, n: usize) -> Vec<u8> {
        let rest = self.buf.split_off(n);
        self.base += n;
        std::mem::replace(&mut self.buf, rest)
    }

    /// Fills until a block is buffered or the file ends.
    fn fill_block(&mut self) -> std::result::Result<(), Failure> {
        while !self.eof && self.buf.len() < self.block {
            self.fill()?;
        }
        Ok(())
    }

    /// The next run of complete frames (at most `max_frames`): its bytes and frames. `None`
    /// at the end of the file, where `buf` keeps the torn final frame, if any.
    fn next_frames(
        &mut self,
        max_frames: Option<usize>,
    ) -> std::result::Result<Option<FrameRun>, Failure> {
        self.fill_block()?;
        loop {
            let (mut frames, _) = scan_frames(&self.buf, self.base, max_frames)?;
            frames.truncate(job_frames(&frames));
            if let Some(last) = frames.last() {
                let bytes = self.take(last.end - self.base);
                return Ok(Some((bytes, frames)));
            }
            if self.eof {
                return Ok(None);
            }
            self.fill()?;
        }
    }

    /// The next run of complete lines, or the final fragment; `None` at the end. A line (or
    /// the final fragment) longer than [`MAX_RECORD_BYTES`] is refused once one byte more
    /// than the limit is buffered.
    fn next_lines(&mut self) -> std::result::Result<Option<Vec<u8>>, Failure> {
        self.fill_block()?;
        loop {
            if let Some(nl) = rfind_newline(&self.buf) {
                return Ok(Some(self.take(nl + 1)));
            }
            self.refuse_a_long_line()?;
            if self.eof {
                return Ok((!self.buf.is_empty()).then(|| self.take(self.buf.len())));
            }
            self.fill_up_to(LINE_CAP)?;
        }
    }

    /// Refuses a buffered line (no newline in `buf`, which starts at a line) longer than
    /// [`MAX_RECORD_BYTES`].
    fn refuse_a_long_line(&self) -> std::result::Result<(), Failure> {
        if self.buf.len() as u64 > MAX_RECORD_BYTES {
            return Err(Failure::Log(Error::RecordTooLong {
                offset: self.base as u64,
                limit: MAX_RECORD_BYTES,
            }));
        }
        Ok(())
    }

    /// Reads the rest of the file, scanning its frames when `zstd` (for their errors).
    fn drain(&mut self, zstd: bool) -> std::result::Result<(), Failure> {
        loop {
            let more = if zstd {
                self.next_frames(None)?.is_some()
            } else {
                self.next_lines()?.is_some()
            };
            if !more {
                return Ok(());
            }
        }
    }
}
/// Reads a raw (plain JSONL) log. Everything after the committed bytes is a torn tail.
fn load_raw(
    read: ReadFn<'_>,
    tuning: Tuning,
    sink: Option<&SharedEventSink>,
    digest: bool,
) -> std::result::Result<Prefix, Failure> {
    let mut input = Input::new(read, tuning.job_bytes);
    match raw_prefix(&mut input, tuning, sink, digest) {
        Err(Failure::Log(e)) => {
            input.drain(false)?;
            Err(Failure::Log(e))
        }
        outcome => outcome,
    }
}

fn raw_prefix(
    input: &mut Input<'_>,
    tuning: Tuning,
    sink: Option<&SharedEventSink>,
    digest: bool,
) -> std::result::Result<Prefix, Failure> {
    input.fill_block()?;
    let nl = loop {
        if let Some(nl) = find_newline(&input.buf, 0) {
            break nl;
        }
        input.refuse_a_long_line()?;
        if input.eof {
            return Err(Failure::Log(Error::EmptyLog { zstd: false }));
        }
        input.fill_up_to(LINE_CAP)?;
    };
    let header = input.take(nl + 1);
    let mut scanner = SessionLogScanner::new(&header)?;
    scanner.attach(sink);
    if digest {
        scanner.digest_lines();
    }
    run_jobs(
        &mut || Ok(input.next_lines()?.map(Job::Text)),
        &mut scanner,
        tuning,
    )?;
    let length = input.base as u64;
    let out = scanner.finish();
    let torn = (out.committed_bytes < length).then(|| TornMarker::Truncate {
        truncate_to: out.committed_bytes,
        recovered: Vec::new(),
    });
    Ok(Prefix {
        header: out.header,
        events: out.events,
        invalid: out.invalid,
        torn,
        lines: out.lines,
    })
}

/// Reads a Zstandard log frame by frame (never holding the whole plaintext). Every complete
/// frame must be valid and end on a record boundary; a torn final frame is prefix-decoded and
/// its complete records are kept as recovered events.
fn load_zstd(
    read: ReadFn<'_>,
    tuning: Tuning,
    sink: Option<&SharedEventSink>,
    digest: bool,
) -> std::result::Result<Prefix, Failure> {
    let mut input = Input::new(read, tuning.job_bytes);
    match zstd_prefix(&mut input, tuning, sink, digest) {
        Err(Failure::Log(e)) => {
            // A structural error anywhere in the file takes precedence.
            input.drain(true)?;
            Err(Failure::Log(e))
        }
        outcome => outcome,
    }
}

fn zstd_prefix(
    input: &mut Input<'_>,
    tuning: Tuning,
    sink: Option<&SharedEventSink>,
    digest: bool,
) -> std::result::Result<Prefix, Failure> {
    let Some((bytes, frames)) = input.next_frames(Some(1))? else {
        return Err(Failure::Log(Error::EmptyLog { zstd: true }));
    };
    let mut decoder = FrameDecoder::new();
    let start = frames.first().map_or(0, |f| f.start);
    let header = decoder.decode_frame_to_vec(&bytes, start)?;
    if !is_one_line(&header) {
        return Err(Failure::Log(Error::ZstdHeaderFrameLines));
    }
    let mut scanner = SessionLogScanner::new(&header)?;
    scanner.attach(sink);
    if digest {
        scanner.digest_lines();
    }
    run_jobs(
        &mut || {
            Ok(input.next_frames(None)?.map(|(bytes, mut frames)| {
                if frames.len() == 1 && !is_small(&frames[0]) {
                    Job::Stream(bytes, frames.remove(0))
                } else {
                    Job::Frames(bytes, frames)
                }
            }))
        },
        &mut scanner,
        tuning,
    )?;
    if scanner.committed_bytes() != scanner.bytes_written() {
        return Err(Failure::Log(Error::ZstdTornRecord));
    }
    if input.buf.is_empty() {
        let out = scanner.finish();
        return Ok(Prefix {
            header: out.header,
            events: out.events,
            invalid: out.invalid,
            torn: None,
            lines: out.lines,
        });
    }
    let torn_start = input.base;
    // The recovered events stay in the prefix (the torn marker names them), not in the sink.
    scanner.detach();
    let before = scanner.event_count();
    let mut budget = PlainBudget::default();
    let plain = decoder.decode_torn(&input.buf, torn_start, &mut budget)?;
    scanner.write(&plain)?;
    let out = scanner.finish();
    let recovered = out.events.get(before..).unwrap_or_default().to_vec();
    Ok(Prefix {
        header: out.header,
        events: out.events,
        invalid: out.invalid,
        torn: Some(TornMarker::Truncate {
            truncate_to: torn_start as u64,
            recovered,
        }),
        lines: out.lines,
    })
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::jsonl::frames::encode_frame;
    use crate::jsonl::pipeline::JOB_PLAIN_BUDGET;

    /// The sequential reader over a whole buffer: the reference algorithm, with the whole
    /// input scanned first and every frame written to the scanner in order.
    fn oracle(buf: &[u8], zstd: bool) -> Result<Prefix> {
        if !zstd {
            let Some(nl) = buf.iter().position(|&b| b == b'\n') else {
                return Err(Error::EmptyLog { zstd: false });
            };
            let mut scanner = SessionLogScanner::new(&buf[..=nl])?;
            scanner.write(&buf[nl + 1..])?;
            let out = scanner.finish();
            let torn = (out.committed_bytes < buf.len() as u64).then(|| TornMarker::Truncate {
                truncate_to: out.committed_bytes,
                recovered: Vec::new(),
            });
            return Ok(Prefix {
                header: out.header,
                events: out.events,
                invalid: out.invalid,
                torn,
                lines: out.lines,
            });
        }
        let scan = scan_zstd_frames(buf, None)?;
        let Some(first) = scan.frames.first() else {
            return Err(Error::EmptyLog { zstd: true });
        };
        let mut decoder = FrameDecoder::new();
        let header = decoder.decode_frame_to_vec(&buf[first.start..first.end], first.start)?;
        if !is_one_line(&header) {
            return Err(Error::ZstdHeaderFrameLines);
        }
        let mut scanner = SessionLogScanner::new(&header)?;
        for frame in &scan.frames[1..] {
            decoder.decode_frame(&buf[frame.start..frame.end], frame.start, |chunk| {
                scanner.write(chunk)
            })?;
        }
        if scanner.committed_bytes() != scanner.bytes_written() {
            return Err(Error::ZstdTornRecord);
        }
        let Some(torn_start) = scan.torn_start else {
            let out = scanner.finish();
            return Ok(Prefix {
                header: out.header,
                events: out.events,
                invalid: out.invalid,
                torn: None,
                lines: out.lines,
            });
        };
        let before = scanner.event_count();
        let plain =
            decoder.decode_torn(&buf[torn_start..], torn_start, &mut PlainBudget::default())?;
        scanner.write(&plain)?;
        let out = scanner.finish();
        let recovered = out.events.get(before..).unwrap_or_default().to_vec();
        Ok(Prefix {
            header: out.header,
            events: out.events,
            invalid: out.invalid,
            torn: Some(TornMarker::Truncate {
                truncate_to: torn_start as u64,
                recovered,
            }),
            lines: out.lines,
        })
    }

    /// Everything observable about a read, as text.
    fn describe(outcome: &Result<Prefix>) -> String {
        match outcome {
            Err(e) => format!("error: {e}"),
            Ok(p) => {
                let lines = |events: &[Event]| {
                    events
                        .iter()
                        .map(Event::to_json)
                        .collect::<Vec<_>>()
                        .join("\n")
                };
                let torn = match &p.torn {
                    None => "none".to_owned(),
                    Some(TornMarker::Truncate {
                        truncate_to,
                        recovered,
                    }) => format!("truncate {truncate_to}, recovered:\n{}", lines(recovered)),
                    Some(other) => format!("{other:?}"),
                };
                format!(
                    "header: {}\ninvalid: {:?}\ntorn: {torn}\nevents:\n{}",
                    p.header.value.to_json(),
                    p.invalid
                        .as_ref()
                        .map(|(i, v)| (i, v.iter().map(Event::to_json).collect::<Vec<_>>())),
                    lines(&p.events)
                )
            }
        }
    }

    const TUNINGS: [Tuning; 4] = [
        Tuning {
            workers: 0,
            job_bytes: 1 << 30,
            in_flight: 1,
        },
        Tuning {
            workers: 0,
            job_bytes: 7,
            in_flight: 1,
        },
        Tuning {
            workers: 2,
            job_bytes: 61,
            in_flight: 3,
        },
        Tuning {
            workers: 1,
            job_bytes: 1000,
            in_flight: 8,
        },
    ];

    /// Every tuning reads `buf` exactly as the oracle does.
    fn check(buf: &[u8], zstd: bool, what: &str) {
        let want = describe(&oracle(buf, zstd));
        for tuning in TUNINGS {
            let got = describe(&from_memory(buf, zstd, tuning, false));
            if got != want {
                let diff = got
                    .lines()
                    .zip(want.lines())
                    .enumerate()
                    .find(|(_, (a, b))| a != b)
                    .map(|(i, (a, b))| format!("line {i}:\n  got  {a}\n  want {b}"));
                panic!("{what} with {tuning:?}: {diff:?}");
            }
        }
    }

    fn corpus_files() -> Vec<(PathBuf, bool)> {
        let root = conformance::corpus::locate();
        let mut out = Vec::new();
        let mut dirs = vec![root.join("logs"), root.join("negative")];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                if path.is_dir() {
                    if name != "after-load" {
                        dirs.push(path);
                    }
                } else if name.starts_with("after-load") {
                    // Files after the reference's repair are read by other tests.
                } else if name == "session.jsonl" {
                    out.push((path, false));
                } else if name == "session.jsonl.zstd" {
                    out.push((path, true));
                }
            }
        }
        out.sort();
        assert!(out.len() > 400, "corpus files: {}", out.len());
        out
    }

    // The streaming reader against the whole-buffer reader, over every corpus file (logs,
    // crash variants and negative cases), in one and several threads and at any job size.
    #[test]
    fn streaming_reads_match_the_sequential_reader_on_the_corpus() {
        for (path, zstd) in corpus_files() {
            let buf = std::fs::read(&path).unwrap();
            check(&buf, zstd, &path.display().to_string());
        }
    }

    // The digest of the records a load reads is that of the log's lines after the header, in
    // every tuning (lines split across jobs and frames included).
    #[test]
    fn a_loads_line_digest_is_that_of_the_records_read() {
        let mut checked = 0;
        for (path, zstd) in corpus_files() {
            let buf = std::fs::read(&path).unwrap();
            let plain = if zstd {
                match zstd::stream::decode_all(&buf[..]) {
                    Ok(plain) => plain,
                    Err(_) => continue,
                }
            } else {
                buf.clone()
            };
            let Some(nl) = plain.iter().position(|&b| b == b'\n') else {
                continue;
            };
            let mut want = LineDigest::default();
            want.lines(&plain[nl + 1..]);
            for tuning in TUNINGS {
                let Ok(prefix) = from_memory(&buf, zstd, tuning, true) else {
                    continue;
                };
                if prefix.torn.is_some() || prefix.invalid.is_some() {
                    continue;
                }
                let got = prefix.lines.expect("asked for");
                assert_eq!(got, want, "{} with {tuning:?}", path.display());
                checked += 1;
            }
        }
        assert!(checked > 400, "checked {checked}");
    }

    // A damaged frame larger than the decoder's output chunk: the lines decoded before the
    // failure reach the scanner first, as in the reference's streaming decoder.
    #[test]
    fn a_failing_large_frame_keeps_the_streaming_order_of_errors() {
        let header = "{\"type\":\"session\",\"version\":0,\"id\":\"s\",\"createdAt\":1,\"delegationDepth\":0}\n";
        let line = |seq: u64, ty: &str| {
            format!(
                "{{\"type\":\"{ty}\",\"seq\":{seq},\"time\":0,\"data\":{{\"pad\":\"{}\"}}}}\n",
                "x".repeat(200)
            )
        };
        for gap in [false, true] {
            let mut body = String::new();
            let mut seq = 0;
            while body.len() < 3 << 20 {
                if gap && seq == 5 {
                    seq += 1;
                }
                let ty = if seq == 10 { "turn/end" } else { "step/start" };
                body.push_str(&line(seq, ty));
                seq += 1;
            }
            let mut file = encode_frame(header.as_bytes()).unwrap();
            let mut frame = encode_frame(body.as_bytes()).unwrap();
            let last = frame.len() - 1;
            frame[last] ^= 0xFF;
            file.extend(frame);
            file.extend(encode_frame(line(seq, "x").as_bytes()).unwrap());
            check(&file, true, &format!("gap {gap}"));
            let e = describe(&from_memory(&file, true, TUNINGS[2], false));
            let want = if gap { "seq gap" } else { "failed validation" };
            assert!(e.contains(want), "{e}");
        }
    }

    // A job whose frames expand beyond what a decoding thread buffers (JOB_PLAIN_BUDGET):
    // its remaining frames are streamed in order, with the same events and errors as the
    // sequential reader, also when one of those frames is damaged or a line crosses frames.
    #[test]
    fn jobs_beyond_the_plaintext_budget_stream_their_remaining_frames_in_order() {
        let header = "{\"type\":\"session\",\"version\":0,\"id\":\"s\",\"createdAt\":1,\"delegationDepth\":0}\n";
        let line = |seq: u64| {
            format!(
                "{{\"type\":\"user/note\",\"seq\":{seq},\"time\":0,\"data\":{{\"pad\":\"{}\"}}}}\n",
                "y".repeat(300)
            )
        };
        for case in ["clean", "damaged", "split"] {
            let mut file = encode_frame(header.as_bytes()).unwrap();
            let mut seq = 0;
            for frame in 0..12 {
                let mut body = String::new();
                if case == "split" && frame == 10 {
                    body = format!("\"seq\":{seq},\"time\":0,\"data\":{{}}}}\n");
                    seq += 1;
                }
                while body.len() < 700 << 10 {
                    body.push_str(&line(seq));
                    seq += 1;
                }
                if case == "split" && frame == 9 {
                    // A line crossing into the next frame.
                    body.push_str("{\"type\":\"user/note\",");
                }
                let mut f = encode_frame(body.as_bytes()).unwrap();
                if case == "damaged" && frame == 10 {
                    let last = f.len() - 1;
                    f[last] ^= 0xFF;
                }
                file.extend(f);
            }
            let plain: usize = 12 * (700 << 10);
            assert!(plain > 2 * JOB_PLAIN_BUDGET);
            check(&file, true, case);
            let got = describe(&from_memory(&file, true, TUNINGS[0], false));
            match case {
                "damaged" => assert!(got.contains("failed validation"), "{got}"),
                _ => assert!(got.contains(&format!("\"seq\":{}", seq - 1)), "{case}"),
            }
        }
    }

    // Damaged files: truncations, flipped bytes, inserted garbage, lines across frames.
    #[test]
    fn streaming_reads_match_the_sequential_reader_on_damage() {
        let mut rng = 0x2545_F491_4F6C_DD1Du64;
        let mut next = move |n: usize| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            (rng % n.max(1) as u64) as usize
        };
        let files: Vec<(PathBuf, bool)> = corpus_files()
            .into_iter()
            .filter(|(p, _)| p.parent().is_some_and(|d| d.join("expected.json").exists()))
            .step_by(5)
            .collect();
        for (path, zstd) in files {
            let buf = std::fs::read(&path).unwrap();
            for round in 0..12 {
                let mut damaged = buf.clone();
                match round % 4 {
                    0 => damaged.truncate(next(buf.len())),
                    1 => {
                        let at = next(buf.len());
                        damaged[at] ^= 1 << next(8);
                    }
                    2 => {
                        let at = next(buf.len());
                        damaged.insert(at, b'\n');
                    }
                    _ => {
                        let at = next(buf.len());
                        damaged.splice(at..at, b"{\"type\":\"turn/end\"}\n".iter().copied());
                    }
                }
                check(&damaged, zstd, &format!("{} round {round}", path.display()));
            }
        }
        // Frames that split lines: re-frame the plaintext at arbitrary points.
        for (path, zstd) in corpus_files().into_iter().filter(|(_, z)| *z).step_by(7) {
            let buf = std::fs::read(&path).unwrap();
            let Ok(plain) = zstd_text(&buf) else { continue };
            let Some(nl) = plain.iter().position(|&b| b == b'\n') else {
                continue;
            };
            let mut reframed = encode_frame(&plain[..=nl]).unwrap();
            let mut at = nl + 1;
            while at < plain.len() {
                let end = (at + 1 + next(300)).min(plain.len());
                reframed.extend(encode_frame(&plain[at..end]).unwrap());
                at = end;
            }
            check(&reframed, zstd, &format!("{} reframed", path.display()));
        }
    }
}
