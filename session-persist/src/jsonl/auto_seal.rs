//! Auto-seal: sealing a Zstandard log in the background when its session is retired.
//!
//! [`SealPolicy`] decides. At [`Backend::release`](crate::Backend::release) (the coordinator
//! calls it when it retires a session), the released writer is not dropped: if the policy
//! triggers on it, it is handed, with its lock, to a job on tokio's blocking pool, and the
//! release returns at once. The job checks under that lock that the path still names the
//! locked log at the length the writer left, applies the policy to the log's frame layout,
//! and seals it exactly as [`JsonlBackend::seal`](super::JsonlBackend::seal) does (temporary
//! file, sync, read-back digest, rename, directory sync); then it drops the lock.
//!
//! **A writer re-opening the session meanwhile** ([`Backend::acquire`](crate::Backend::acquire)
//! through the same instance) waits for the job to finish: the seal completes first, under the
//! lock. A session loaded from the log before the seal renamed it still opens: the seal keeps
//! every event (the read-back digest checks that the copy loads to exactly the records the
//! writer's encoding made of them, and as many events), so the revision the session was loaded from is
//! translated to the sealed log's revision. Another instance or process trying to open the
//! session while the job holds the lock gets [`Error::Locked`](crate::Error::Locked), as it
//! would while the writer held it. A job that fails (an open turn, a torn tail, a changed log)
//! leaves the log as it is; its outcome is reported by
//! [`JsonlBackend::settle_auto_seals`](super::JsonlBackend::settle_auto_seals).
//!
//! **Memory**: a job holds one copy of the log's events while it seals (see `seal.rs`), on top
//! of whatever the application still holds of the retired session; the jobs of one instance
//! seal one at a time, so sessions retiring together do not multiply that copy.
//!
//! **Crashes**: until the rename the original log is untouched and the temporary file
//! (`<final>.<12 hex>.tmp`, unlocked once its process died) is removed the next time a backend
//! opens the root; after the rename the sealed log is complete and synced.
//!
//! **Test hook**: with `SESSION_PERSIST_SEAL_PAUSE_AT` set to a [`SealStep`] name, a seal that
//! reaches that step writes `seal paused at <step>` to standard error and sleeps forever (kill
//! tests use it to SIGKILL a process at every step).

use std::collections::{HashMap, HashSet};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use super::Inner;
use super::lock::{SharedWriter, lock_writer};
use super::seal::SealReport;
use crate::error::Result;

/// When a retired Zstandard session is sealed in the background.
///
/// The default is [`SealPolicy::OnRetire`] with [`SealPolicy::DEFAULT_MAX_AVERAGE_FRAME_BYTES`]
/// (4 KiB) and [`SealPolicy::DEFAULT_MIN_FRAMES`] (64): a write-behind writer that appended
/// many small batches leaves a log that decodes slower than one frame per turn, while a log of
/// few or large frames gains little. Plain (`Compression::None`) logs have no frames and are
/// never auto-sealed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SealPolicy {
    /// Never seal in the background (explicit [`JsonlBackend::seal`](super::JsonlBackend::seal)
    /// still works).
    Never,
    /// Seal at retirement when the retiring writer appended at least `min_frames` batches, and
    /// the log then has at least `min_frames` frames averaging under `max_average_frame_bytes`
    /// bytes (file size over frame count, the header frame included).
    OnRetire {
        /// The average frame size (bytes) at or above which the log is left as it is.
        max_average_frame_bytes: u64,
        /// The fewest batches the retiring writer appended, and frames the log has.
        min_frames: usize,
    },
}

impl SealPolicy {
    /// The default average-frame bound of [`SealPolicy::OnRetire`]: 4 KiB.
    pub const DEFAULT_MAX_AVERAGE_FRAME_BYTES: u64 = 4096;
    /// The default frame minimum of [`SealPolicy::OnRetire`].
    pub const DEFAULT_MIN_FRAMES: usize = 64;

    /// Whether a retiring writer that appended `batches` batches starts a background seal.
    pub(crate) fn triggers(&self, batches: usize) -> bool {
        match *self {
            SealPolicy::Never => false,
            SealPolicy::OnRetire { min_frames, .. } => batches >= min_frames.max(1),
        }
    }

    /// Whether a log of `frames` frames and `bytes` bytes is worth sealing.
    pub(crate) fn accepts(&self, frames: usize, bytes: u64) -> bool {
        match *self {
            SealPolicy::Never => false,
            SealPolicy::OnRetire {
                max_average_frame_bytes,
                min_frames,
            } => frames >= min_frames.max(1) && bytes / (frames as u64) < max_average_frame_bytes,
        }
    }
}

impl Default for SealPolicy {
    fn default() -> SealPolicy {
        SealPolicy::OnRetire {
            max_average_frame_bytes: SealPolicy::DEFAULT_MAX_AVERAGE_FRAME_BYTES,
            min_frames: SealPolicy::DEFAULT_MIN_FRAMES,
        }
    }
}

/// The outcome of one background seal.
#[derive(Debug)]
pub struct AutoSealOutcome {
    /// The session id.
    pub id: String,
    /// What the seal did, or why it failed (the log is then as it was).
    pub result: Result<SealReport>,
}

/// The named steps of a seal, for the `SESSION_PERSIST_SEAL_PAUSE_AT` test hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SealStep {
    /// `locked`: an auto-seal job holds the writer lock (and the instance's one sealing slot),
    /// before reading the log.
    Locked,
    /// `temp-created`: the temporary file exists, empty.
    TempCreated,
    /// `half-written`: about half the turns are written to the temporary file (not synced).
    HalfWritten,
    /// `synced`: the temporary file is complete and synced, not yet verified.
    Synced,
    /// `verified`: the copy was read back and matches; not yet renamed.
    Verified,
    /// `renamed`: the sealed log replaced the original; the directory is not yet synced.
    Renamed,
}

impl SealStep {
    /// Every step, in order.
    pub const ALL: [SealStep; 6] = [
        SealStep::Locked,
        SealStep::TempCreated,
        SealStep::HalfWritten,
        SealStep::Synced,
        SealStep::Verified,
        SealStep::Renamed,
    ];

    /// The step's name, as `SESSION_PERSIST_SEAL_PAUSE_AT` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            SealStep::Locked => "locked",
            SealStep::TempCreated => "temp-created",
            SealStep::HalfWritten => "half-written",
            SealStep::Synced => "synced",
            SealStep::Verified => "verified",
            SealStep::Renamed => "renamed",
        }
    }
}

/// The environment variable of the pause hook.
pub const SEAL_PAUSE_ENV: &str = "SESSION_PERSIST_SEAL_PAUSE_AT";

/// Pauses forever at `step` when [`SEAL_PAUSE_ENV`] names it (see the module documentation).
pub(crate) fn pause_point(step: SealStep) {
    static PAUSE: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let pause = PAUSE.get_or_init(|| std::env::var(SEAL_PAUSE_ENV).ok());
    if pause.as_deref() == Some(step.as_str()) {
        use std::io::Write as _;
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "seal paused at {}", step.as_str());
        let _ = err.flush();
        drop(err);
        loop {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        }
    }
}

/// The background seals of one backend instance.
#[derive(Default)]
pub(crate) struct AutoSeals {
    state: Mutex<State>,
    changed: Condvar,
    /// Held by the job that is sealing: one seal at a time per instance, so memory holds at
    /// most one extra copy of a log's events however many sessions retire together.
    slot: Mutex<()>,
}

#[derive(Default)]
struct State {
    /// Sessions with a job running.
    running: HashSet<String>,
    /// The last rewrite of each session: the revision before and after it.
    renamed: HashMap<String, (String, String)>,
    /// Outcomes not yet reported by `settle`.
    finished: Vec<AutoSealOutcome>,
}

impl AutoSeals {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a job of `id` (before it is spawned, so a later `acquire` waits for it).
    pub(crate) fn start(&self, id: &str) {
        self.state().running.insert(id.to_owned());
    }

    fn finish(&self, outcome: AutoSealOutcome, renamed: Option<(String, String)>) {
        let mut state = self.state();
        state.running.remove(&outcome.id);
        match renamed {
            Some(r) => {
                state.renamed.insert(outcome.id.clone(), r);
            }
            None => {
                state.renamed.remove(&outcome.id);
            }
        }
        state.finished.push(outcome);
        drop(state);
        self.changed.notify_all();
    }

    /// Waits until no job of `id` runs, then translates `stored` (the revision a session was
    /// loaded from) to the sealed log's revision if the last seal of `id` replaced exactly
    /// that revision.
    pub(crate) fn settle_revision(&self, id: &str, stored: &str) -> Option<String> {
        let mut state = self.state();
        while state.running.contains(id) {
            state = self
                .changed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        let (before, after) = state.renamed.remove(id)?;
        (before == stored).then_some(after)
    }

    /// Waits until no job runs, and returns the outcomes not reported yet.
    pub(crate) fn settle(&self) -> Vec<AutoSealOutcome> {
        let mut state = self.state();
        while !state.running.is_empty() {
            state = self
                .changed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        std::mem::take(&mut state.finished)
    }
}

impl Inner {
    /// The background job: seals the log of the released `writer` under its lock (see the
    /// [module documentation](self)), then drops the lock and reports.
    pub(crate) fn auto_seal(&self, id: &str, writer: SharedWriter) {
        // A panic must still finish the job, or a waiting `acquire` would wait forever.
        let sealed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _slot = self
                .auto_seals
                .slot
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            self.auto_seal_locked(id, &writer)
        }));
        let (result, renamed) = sealed.unwrap_or_else(|_| {
            (
                Err(crate::error::Error::Task {
                    message: format!("the background seal of \"{id}\" panicked"),
                }),
                None,
            )
        });
        // Dropping the last handle closes the file and releases the lock.
        drop(writer);
        self.auto_seals.finish(
            AutoSealOutcome {
                id: id.to_owned(),
                result,
            },
            renamed,
        );
    }

    /// Seals the log of `writer` under its lock; with the revisions before and after a rewrite.
    fn auto_seal_locked(
        &self,
        id: &str,
        writer: &SharedWriter,
    ) -> (Result<SealReport>, Option<(String, String)>) {
        {
            let mut w = lock_writer(writer);
            pause_point(SealStep::Locked);
            let before = w
                .file
                .stat()
                .map(|s| s.revision_text())
                .map_err(|e| crate::error::Error::io("fstat", &w.path, e));
            let result = before.and_then(|before| {
                w.verify(self.fs.as_ref(), true)?;
                let report = self.seal_locked(id, &w.path, Some(&self.seal_policy))?;
                let after = if report.rewritten {
                    super::read::stat_if_exists(self.fs.as_ref(), &w.path)?
                        .map(|s| (before, s.revision_text()))
                } else {
                    None
                };
                Ok((report, after))
            });
            drop(w);
            match result {
                Ok((report, renamed)) => (Ok(report), renamed),
                Err(e) => (Err(e), None),
            }
        }
    }
}
