//! The decoding pipeline of log reads: jobs cut in file order, decoded on whichever thread
//! is free, applied to the [`SessionLogScanner`] strictly in order (see the [`read`](super::read)
//! module for how a load uses it).

use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Condvar, Mutex, PoisonError};

use session_core::chunk_rows::StorageDecoder;

use super::frames::{FrameDecoder, FrameInfo, MAX_BUFFERED_FRAME_PLAIN, PlainBudget};
use super::scanner::{DecodedLines, SessionLogScanner, decode_lines};
use crate::error::{Error, Result};

/// The most plaintext a decoding thread buffers for one job: once a job's frames have produced
/// this much, its remaining frames are handed back undecoded and streamed into the scanner in
/// file order (a job of ordinary frames, about 256 KiB compressed, stays far below it).
pub(super) const JOB_PLAIN_BUDGET: usize = 4 << 20;

/// Whether a frame is decoded in one piece by a worker (its plaintext bound is known and small);
/// other frames are streamed into the scanner in file order.
pub(super) fn is_small(frame: &FrameInfo) -> bool {
    frame
        .max_plain
        .is_some_and(|bound| bound <= MAX_BUFFERED_FRAME_PLAIN)
}

/// How many of `frames` one job takes: a frame that is not small alone, else the run of small
/// frames before the next one that is not.
pub(super) fn job_frames(frames: &[FrameInfo]) -> usize {
    match frames.iter().position(|f| !is_small(f)) {
        Some(0) => 1,
        Some(n) => n,
        None => frames.len(),
    }
}

/// Files at least this large are decoded on several threads.
const PARALLEL_MIN_BYTES: u64 = 1 << 20;

/// How a load is cut into jobs and spread over threads.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tuning {
    /// Decoding threads besides the calling thread (which decodes too).
    pub(crate) workers: usize,
    /// Bytes per job: compressed bytes of whole frames, or text of whole lines (a job is
    /// larger when one frame or line is).
    pub(crate) job_bytes: usize,
    /// Most jobs cut and not yet applied to the scanner.
    pub(crate) in_flight: usize,
}

impl Tuning {
    /// The tuning for a file of `size` bytes.
    pub(crate) fn for_size(size: u64) -> Tuning {
        let workers = if size < PARALLEL_MIN_BYTES {
            0
        } else {
            std::thread::available_parallelism()
                .map_or(1, std::num::NonZeroUsize::get)
                .saturating_sub(1)
                .clamp(1, 3)
        };
        // A small file is read in one step of its own size (plus the byte that tells the
        // end), not in a 256 KiB buffer that would mostly be zeroed for nothing.
        let job_bytes = usize::try_from(size)
            .map_or(usize::MAX, |s| s.saturating_add(1))
            .clamp(4 << 10, 256 << 10);
        Tuning {
            workers,
            job_bytes,
            in_flight: 4 * (workers + 1),
        }
    }
}

/// Why a load stopped.
#[derive(Debug)]
pub(super) enum Failure {
    /// Reading the file failed.
    Read(io::Error),
    /// The content is refused.
    Log(Error),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        Failure::Log(e)
    }
}

/// One unit of decoding work.
pub(super) enum Job {
    /// Complete plain lines (or the final fragment).
    Text(Vec<u8>),
    /// Complete small frames: their bytes (from the first frame's offset) and the frames.
    Frames(Vec<u8>, Vec<FrameInfo>),
    /// One frame that is not small: streamed into the scanner by the applying thread, in file
    /// order, never buffered whole.
    Stream(Vec<u8>, FrameInfo),
}

/// A decoded job.
struct Done {
    /// The job's plaintext.
    plain: Vec<u8>,
    /// Its complete lines, decoded.
    lines: DecodedLines,
    /// A frame that failed to decode, after the plaintext before it.
    error: Option<Error>,
    /// For each frame decoded: its byte offset in the file and where its plaintext ends in
    /// `plain`.
    frame_ends: Vec<(usize, usize)>,
    /// Frames left undecoded once the job's plaintext reached [`JOB_PLAIN_BUDGET`], with the
    /// job's bytes (from its first frame's offset): streamed by the applying thread.
    rest: Option<(Vec<u8>, usize, Vec<FrameInfo>)>,
}

/// The per-thread decoding state: one decompression context and one line decoder.
#[derive(Default)]
struct Worker {
    frames: Option<FrameDecoder>,
    lines: StorageDecoder,
}

impl Worker {
    fn run(&mut self, job: Job) -> Done {
        match job {
            Job::Text(plain) => Done {
                lines: decode_lines(&plain, &mut self.lines),
                plain,
                error: None,
                frame_ends: Vec::new(),
                rest: None,
            },
            Job::Stream(..) => Done {
                plain: Vec::new(),
                lines: DecodedLines::default(),
                error: Some(Error::Task {
                    message: "a streamed frame was handed to a decoding thread".to_owned(),
                }),
                frame_ends: Vec::new(),
                rest: None,
            },
            Job::Frames(bytes, frames) => {
                let decoder = self.frames.get_or_insert_with(FrameDecoder::new);
                let base = frames.first().map_or(0, |f| f.start);
                // Room for the usual compression ratio, so that the buffer rarely grows.
                let mut plain = Vec::with_capacity(bytes.len() * 3 + (128 << 10));
                let mut error = None;
                let mut frame_ends = Vec::with_capacity(frames.len());
                let mut decoded = 0;
                for &f in &frames {
                    if plain.len() >= JOB_PLAIN_BUDGET {
                        break;
                    }
                    let frame = &bytes[f.start - base..f.end - base];
                    let result = decoder.decode_frame_append(frame, f, &mut plain);
                    frame_ends.push((f.start, plain.len()));
                    decoded += 1;
                    if let Err(e) = result {
                        error = Some(e);
                        break;
                    }
                }
                let rest = (error.is_none() && decoded < frames.len())
                    .then(|| (bytes, base, frames[decoded..].to_vec()));
                Done {
                    lines: decode_lines(&plain, &mut self.lines),
                    plain,
                    error,
                    frame_ends,
                    rest,
                }
            }
        }
    }

    /// [`Worker::run`], with a panic turned into an error (so that a bug cannot hang the
    /// reader).
    fn run_caught(&mut self, job: Job) -> Done {
        catch_unwind(AssertUnwindSafe(|| self.run(job))).unwrap_or_else(|_| {
            *self = Worker::default();
            Done {
                plain: Vec::new(),
                lines: DecodedLines::default(),
                error: Some(Error::Task {
                    message: "a log decoding thread panicked".to_owned(),
                }),
                frame_ends: Vec::new(),
                rest: None,
            }
        })
    }
}

/// Jobs waiting for a thread.
#[derive(Default)]
struct Queue {
    state: Mutex<QueueState>,
    ready: Condvar,
}

#[derive(Default)]
struct QueueState {
    jobs: VecDeque<(usize, Job)>,
    closed: bool,
}

impl Queue {
    fn lock(&self) -> std::sync::MutexGuard<'_, QueueState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn push(&self, id: usize, job: Job) {
        self.lock().jobs.push_back((id, job));
        self.ready.notify_one();
    }

    fn try_pop(&self) -> Option<(usize, Job)> {
        self.lock().jobs.pop_front()
    }

    /// The next job; `None` once the queue is closed.
    fn pop(&self) -> Option<(usize, Job)> {
        let mut state = self.lock();
        loop {
            if state.closed {
                return None;
            }
            if let Some(job) = state.jobs.pop_front() {
                return Some(job);
            }
            state = self
                .ready
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    fn close(&self) {
        let mut state = self.lock();
        state.closed = true;
        state.jobs.clear();
        drop(state);
        self.ready.notify_all();
    }
}

/// Cuts jobs with `next_job`, decodes them on `tuning.workers` threads plus this one, and
/// applies them to `scanner` in order. Stops at the first error.
pub(super) fn run_jobs(
    next_job: &mut dyn FnMut() -> std::result::Result<Option<Job>, Failure>,
    scanner: &mut SessionLogScanner,
    tuning: Tuning,
) -> std::result::Result<(), Failure> {
    let queue = Queue::default();
    let stop = AtomicBool::new(false);
    let (results, finished) = mpsc::channel::<(usize, Done)>();
    std::thread::scope(|scope| {
        let mut workers = 0;
        for _ in 0..tuning.workers {
            let results = results.clone();
            let (queue, stop) = (&queue, &stop);
            let spawned = std::thread::Builder::new()
                .name("session-log-decode".to_owned())
                .spawn_scoped(scope, move || {
                    let mut worker = Worker::default();
                    while let Some((id, job)) = queue.pop() {
                        if stop.load(Ordering::Relaxed) {
                            return;
                        }
                        if results.send((id, worker.run_caught(job))).is_err() {
                            return;
                        }
                    }
                });
            if spawned.is_ok() {
                workers += 1;
            }
        }
        drop(results);
        let outcome = apply_jobs(next_job, scanner, tuning, &queue, &finished, workers);
        stop.store(true, Ordering::Relaxed);
        queue.close();
        outcome
    })
}

/// Streams one complete frame into the scanner in pieces, under the decompression budget.
fn stream_frame(
    own: &mut Worker,
    scanner: &mut SessionLogScanner,
    budget: &mut PlainBudget,
    frame: &[u8],
    info: FrameInfo,
) -> Result<()> {
    let decoder = own.frames.get_or_insert_with(FrameDecoder::new);
    budget.start_frame();
    decoder.decode_frame(frame, info.start, |piece| {
        budget.feed(piece, info.start)?;
        scanner.write(piece)
    })
}

fn apply_jobs(
    next_job: &mut dyn FnMut() -> std::result::Result<Option<Job>, Failure>,
    scanner: &mut SessionLogScanner,
    tuning: Tuning,
    queue: &Queue,
    finished: &mpsc::Receiver<(usize, Done)>,
    workers: usize,
) -> std::result::Result<(), Failure> {
    let mut own = Worker::default();
    let mut done: BTreeMap<usize, Done> = BTreeMap::new();
    let (mut cut, mut applied) = (0usize, 0usize);
    let mut more = true;
    // A frame to stream once every job before it is applied; no job is cut after it until then.
    let mut held: Option<(usize, Vec<u8>, FrameInfo)> = None;
    let mut budget = PlainBudget::default();
    loop {
        while more && held.is_none() && cut - applied < tuning.in_flight.max(1) {
            match next_job()? {
                Some(Job::Stream(bytes, info)) => {
                    held = Some((cut, bytes, info));
                    cut += 1;
                }
                Some(job) if workers == 0 => {
                    done.insert(cut, own.run_caught(job));
                    cut += 1;
                }
                Some(job) => {
                    queue.push(cut, job);
                    cut += 1;
                }
                None => more = false,
            }
        }
        if applied == cut {
            return Ok(());
        }
        if let Some((id, bytes, info)) = held.take() {
            if id == applied {
                stream_frame(&mut own, scanner, &mut budget, &bytes, info)?;
                applied += 1;
                continue;
            }
            held = Some((id, bytes, info));
        }
        while let Ok((id, out)) = finished.try_recv() {
            done.insert(id, out);
        }
        let Some(next) = done.remove(&applied) else {
            // Help with one job instead of waiting, then cut more.
            if let Some((id, job)) = queue.try_pop() {
                done.insert(id, own.run_caught(job));
                continue;
            }
            match finished.recv() {
                Ok((id, out)) => {
                    done.insert(id, out);
                }
                Err(_) => {
                    return Err(Failure::Log(Error::Task {
                        message: "the log decoding threads stopped".to_owned(),
                    }));
                }
            }
            continue;
        };
        applied += 1;
        let mut from = 0;
        for &(offset, end) in &next.frame_ends {
            budget.start_frame();
            budget.feed(&next.plain[from..end], offset)?;
            from = end;
        }
        scanner.write_decoded(&next.plain, next.lines)?;
        if let Some(e) = next.error {
            return Err(Failure::Log(e));
        }
        if let Some((bytes, base, frames)) = next.rest {
            for f in frames {
                let frame = &bytes[f.start - base..f.end - base];
                stream_frame(&mut own, scanner, &mut budget, frame, f)?;
            }
        }
    }
}
