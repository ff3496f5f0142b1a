//! The crash model: a live session persisted through the persistence service and the JSONL
//! backend onto storage that can lose power at any moment, checked after every restart.
//!
//! [`CrashStorage`] implements the JSONL backend's file-system seam in memory and keeps written
//! bytes apart from synced bytes (see its docs). [`run`] plays a list of [`Op`]s against one
//! session:
//!
//! - [`Op::Append`] appends drafts to the live session (they wait in the write-behind buffer;
//!   the batching window is so long that only a flush writes them);
//! - [`Op::Flush`] flushes the session through the store, which must succeed and makes every
//!   appended event *acknowledged*;
//! - [`Op::CrashAt`] lets the machine die once `k` more bytes reach storage, flushes (the
//!   write is torn at byte `k` when it is longer), and loses power keeping the bytes written;
//! - [`Op::RetireCrashAt`] retires the live session (its last batch is written and the
//!   backend's auto-seal rewrites the log in the background, see `session_persist::SealPolicy`;
//!   the JSONL harness seals every retired Zstandard log it can), disposes the service, and lets
//!   the machine die once `k` more bytes reach storage, somewhere in that drain or seal;
//! - [`Op::Reopen`] restarts: after a crash, a new process boots on what survived; otherwise
//!   the service is disposed (which drains every buffered event) before the new process starts.
//!
//! After every restart the new process first reads the stored log through the backend (it must
//! be readable and never a header without events; a torn tail is counted in the [`Report`]),
//! then loads the session through the service ([`load`] commits cold recovery), and
//! [`check_reload`] requires that the loaded log is a prefix of everything appended followed by
//! exactly the closers that prefix needs, that it contains every acknowledged event, that no
//! turn is left open, and, after an orderly restart, that nothing was lost. The process then resumes the session (prepare, enter, announce) and goes
//! on. The run ends with a power loss that drops every unsynced byte and a last check.
//!
//! [`arb_ops`] generates operation lists for proptest; [`Report`] counts what a run exercised
//! (so tests can require that torn tails were actually produced and repaired).
//!
//! [`run_with`] plays the same operations on other storage through a [`CrashHarness`], which
//! opens the backend of each process and plays the machine (for example a network proxy in
//! front of a database server); [`run`] is `run_with` on fresh [`CrashStorage`].
//!
//! ```
//! use conformance::crash_model::{ModelConfig, Op, run};
//! use session_persist::Compression;
//!
//! let ops = [Op::Append(7), Op::Flush, Op::Append(3), Op::CrashAt(40), Op::Reopen];
//! let report = run(&ModelConfig::new(Compression::None), &ops)?;
//! assert_eq!(report.restarts, 2); // the crash and the final power loss
//! assert_eq!(report.torn_tails, 1);
//! # Ok::<(), conformance::crash_model::CrashFailure>(())
//! ```
//!
//! [`load`]: session_persist::Persistence::load

mod storage;

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use proptest::collection::vec;
use proptest::prelude::*;
use session_core::json::Value;
use session_core::{Event, Events, FixedClock};
use session_persist::jsonl::layout::log_path;
use session_persist::jsonl::scan_zstd_frames;
use session_persist::{
    Backend, Compression, Error, JsonlBackend, JsonlConfig, MAX_WRITE_BATCH_DELAY_MS, Persistence,
    PersistenceOptions, SealPolicy,
};
use session_repair::interrupted_turn_closers;
use session_store::{Detach, PrepareOptions, SessionStore};
use session_surface::SharedSession;

pub use self::storage::CrashStorage;
use crate::backend_suite::fixtures::{SUITE_CWD, SUITE_TIME_MS, TURN_LEN, turn_draft};
use crate::backend_suite::harnesses::CRASH_ROOT;
use crate::invariants::{check_closers, open_turn};

/// The session id of every crash-model run.
pub const CRASH_SESSION_ID: &str = "crash-model";

/// One step of a crash-model run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Append this many drafts to the live session (skipped while the machine is down).
    Append(usize),
    /// Flush the live session; it must succeed (skipped while the machine is down).
    Flush,
    /// The machine dies once this many more bytes reach storage: a flush starts, its write is
    /// torn at that byte when longer, and power is lost keeping the written bytes. Skipped
    /// while the machine is down.
    CrashAt(u64),
    /// Retire the live session (its drain and the backend's background seal run), dispose
    /// the service, and die once this many more bytes reach storage. Skipped while the machine
    /// is down.
    RetireCrashAt(u64),
    /// Restart: boot after a crash, or dispose the service and start a new process.
    Reopen,
}

/// Random operation lists: mostly appends and flushes, with crashes (small byte counts, which
/// tear the write, and large ones, which let it finish) and restarts.
pub fn arb_ops() -> impl Strategy<Value = Vec<Op>> {
    vec(arb_op(), 1..32)
}

/// One random [`Op`].
pub fn arb_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (1usize..=9).prop_map(Op::Append),
        3 => Just(Op::Flush),
        1 => (0u64..96).prop_map(Op::CrashAt),
        1 => (0u64..4096).prop_map(Op::CrashAt),
        1 => Just(Op::Reopen),
        1 => (0u64..8192).prop_map(Op::RetireCrashAt),
    ]
}

/// How a run stores the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelConfig {
    /// The JSONL encoding.
    pub compression: Compression,
    /// Whether the storage honours `fsync` (false: a broken storage layer, for checking that
    /// the model notices lost acknowledged events).
    pub honor_sync: bool,
}

impl ModelConfig {
    /// Honest storage with the given encoding.
    pub fn new(compression: Compression) -> ModelConfig {
        ModelConfig {
            compression,
            honor_sync: true,
        }
    }
}

/// What a run exercised.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Report {
    /// Drafts appended to live sessions.
    pub appended: usize,
    /// Flushes that succeeded.
    pub flushes: usize,
    /// Power losses (crash operations and the final one).
    pub crashes: usize,
    /// Processes started after the first.
    pub restarts: usize,
    /// Restarts that found a torn tail in the stored log before loading it.
    pub torn_tails: usize,
    /// Appended events that a crash lost (never acknowledged, so allowed to be lost).
    pub lost_unacknowledged: usize,
    /// Closers that loads committed.
    pub closers: usize,
    /// Retirements ([`Op::RetireCrashAt`]) played.
    pub retirements: usize,
    /// Boots that found the log with fewer Zstandard frames than just before the crash
    /// operation: a background seal had completed (counted by the JSONL harness only).
    pub sealed_boots: usize,
}

/// A violated property: which step of the run, and what went wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrashFailure {
    /// Index of the operation during which the check failed (`ops.len()` for the final
    /// check).
    pub step: usize,
    /// What went wrong.
    pub message: String,
}

impl fmt::Display for CrashFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "step {}: {}", self.step, self.message)
    }
}

impl std::error::Error for CrashFailure {}

/// Checks a log loaded after a restart against what the previous process appended.
///
/// `appended` is every event of the previous process's live session, `acknowledged` how many of
/// them a completed flush covered, and `orderly` whether the process was disposed rather than
/// crashed. The loaded log must be `appended[..m]` followed by exactly
/// `interrupted_turn_closers(appended[..m])`, for some `m` with `acknowledged <= m` (and
/// `m == appended.len()` when orderly); the closers must balance it. Returns `m`.
///
/// # Errors
/// A description of the first property that does not hold.
pub fn check_reload(
    appended: &[Event],
    acknowledged: usize,
    loaded: &[Event],
    orderly: bool,
) -> Result<usize, String> {
    if let Some(turn) = open_turn(loaded) {
        return Err(format!("the loaded log leaves turn {turn} open"));
    }
    let text = |e: &Event| e.to_json();
    let common = appended
        .iter()
        .zip(loaded)
        .take_while(|(a, l)| text(a) == text(l))
        .count();
    if common < acknowledged {
        return Err(format!(
            "an acknowledged event was lost: {acknowledged} events were flushed, the loaded log \
             keeps only the first {common} of them{}",
            loaded
                .get(common)
                .map(|e| format!(" (then {})", e.to_json()))
                .unwrap_or_default()
        ));
    }
    for m in (acknowledged..=common).rev() {
        let closers = interrupted_turn_closers(appended[..m].iter());
        let tail = &loaded[m..];
        if tail.len() == closers.len() && tail.iter().zip(&closers).all(|(a, b)| text(a) == text(b))
        {
            let prefix: Events = appended[..m].iter().cloned().collect();
            check_closers(&prefix, &closers).map_err(|v| v.to_string())?;
            if orderly && m != appended.len() {
                return Err(format!(
                    "an orderly restart lost events: {} appended, {m} loaded",
                    appended.len()
                ));
            }
            return Ok(m);
        }
    }
    Err(format!(
        "the loaded log ({} events) is not a prefix of the {} appended events followed by its \
         closers; they agree on the first {common}{}",
        loaded.len(),
        appended.len(),
        loaded
            .get(common)
            .map(|e| format!(", then the log has {}", e.to_json()))
            .unwrap_or_default()
    ))
}

/// The script of drafts a run appends: complete turns of the fixture shape, numbered on from
/// the highest turn already in the log.
struct Script {
    turn: u64,
    phase: u64,
    call_seq: u64,
}

impl Script {
    fn after(events: &[Event]) -> Script {
        let last = events
            .iter()
            .filter_map(|e| e.data().get("turn").and_then(Value::as_u64))
            .max()
            .unwrap_or(0);
        Script {
            turn: last + 1,
            phase: 0,
            call_seq: 0,
        }
    }

    fn append(&mut self, session: &SharedSession) -> Result<Event, String> {
        let draft = turn_draft(self.turn, self.phase, self.call_seq);
        let event = session
            .append(draft)
            .map_err(|e| format!("the live session refused a scripted draft: {e}"))?;
        if self.phase == 7 {
            self.call_seq = event.seq();
        }
        self.phase += 1;
        if self.phase == TURN_LEN {
            self.phase = 0;
            self.turn += 1;
        }
        Ok(event)
    }
}

/// One process: a runtime, the backend and service over the storage of its boot, and the live
/// session.
struct Process {
    service: Persistence,
    backend: Arc<dyn Backend>,
    store: SessionStore,
    session: SharedSession,
    /// `None` once the session is retired.
    detach: Option<Detach>,
    script: Script,
    runtime: tokio::runtime::Runtime,
}

/// What a boot found.
struct Boot {
    process: Process,
    loaded: Vec<Event>,
    torn: bool,
}

/// What a crash-model run persists onto: storage (or the machine in front of it) that can die
/// in the middle of a write and lose power. [`run_with`] plays the operations and checks every
/// restart; the harness only opens backends and plays the machine.
///
/// A crash ([`Op::CrashAt`]`(k)`) calls [`CrashHarness::die_after`]`(k)`, flushes,
/// calls [`CrashHarness::lose_power`]`(k)` while the dying process still holds its resources,
/// ends the process, then calls [`CrashHarness::power_on`]. The final power loss of a run is
/// `lose_power(0)`, the end of the process, and `power_on`.
pub trait CrashHarness {
    /// The backend of a process booting on what survived, opened on the process's `runtime`.
    ///
    /// # Errors
    /// Why the backend does not open.
    fn open(&mut self, runtime: &tokio::runtime::Runtime) -> Result<Arc<dyn Backend>, String>;

    /// The machine dies once `bytes` more bytes reach storage: the write that crosses the
    /// limit is torn there, and nothing reaches storage afterwards.
    fn die_after(&mut self, bytes: u64);

    /// Power is lost: what was made durable survives, and up to `kept` more bytes of a write
    /// in flight may (a torn write).
    fn lose_power(&mut self, kept: u64);

    /// The crashed process is gone and the machine may boot again.
    fn power_on(&mut self);

    /// Boots that found a log a background seal had rewritten ([`Report::sealed_boots`]); 0
    /// for storage that does not seal.
    fn sealed_boots(&self) -> usize {
        0
    }
}

/// [`CrashStorage`] behind the JSONL backend, with the encoding and `fsync` honesty of a
/// [`ModelConfig`].
struct JsonlHarness {
    storage: CrashStorage,
    config: ModelConfig,
    /// The log's frame count at the last boot or crash operation (Zstandard only).
    frames: usize,
    sealed_boots: usize,
}

impl JsonlHarness {
    /// The frame count of the session's log as the running system sees it (0 for a plain or
    /// missing log).
    fn frames(&self) -> usize {
        if self.config.compression != Compression::Zstd {
            return 0;
        }
        log_path(
            Path::new(CRASH_ROOT),
            Some(SUITE_CWD),
            CRASH_SESSION_ID,
            Compression::Zstd,
        )
        .ok()
        .and_then(|path| self.storage.live_bytes(&path))
        .and_then(|bytes| scan_zstd_frames(&bytes, None).ok())
        .map_or(0, |scan| scan.frames.len())
    }
}

impl CrashHarness for JsonlHarness {
    fn open(&mut self, _runtime: &tokio::runtime::Runtime) -> Result<Arc<dyn Backend>, String> {
        let fs = if self.config.honor_sync {
            self.storage.fs()
        } else {
            self.storage.fs_ignoring_sync()
        };
        // Every retired Zstandard log that can be sealed is.
        let policy = SealPolicy::OnRetire {
            max_average_frame_bytes: u64::MAX,
            min_frames: 1,
        };
        let jsonl = JsonlBackend::open_with_fs(
            JsonlConfig::new(CRASH_ROOT)
                .compression(self.config.compression)
                .seal_policy(policy),
            fs,
        )
        .map_err(|e| format!("the backend does not open on the surviving storage: {e}"))?;
        let frames = self.frames();
        self.sealed_boots += usize::from(frames < self.frames);
        self.frames = frames;
        Ok(Arc::new(jsonl))
    }

    fn die_after(&mut self, bytes: u64) {
        self.frames = self.frames();
        self.storage.die_after(bytes);
    }

    fn lose_power(&mut self, kept: u64) {
        self.storage.crash_keeping(kept);
    }

    fn power_on(&mut self) {}

    fn sealed_boots(&self) -> usize {
        self.sealed_boots
    }
}

fn boot<H: CrashHarness + ?Sized>(harness: &mut H) -> Result<Boot, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a runtime: {e}"))?;
    let backend = harness.open(&runtime)?;
    let store = SessionStore::new(Arc::new(FixedClock::new(SUITE_TIME_MS)));
    store.set_warning_sink(Arc::new(|_: &str| {}));
    let (service, loaded, torn) = runtime.block_on(async {
        let torn = match backend.load_stored(CRASH_SESSION_ID).await {
            Ok(Some(stored)) if stored.events.is_empty() => {
                return Err("a first publication left a header-only or half-written log".to_owned());
            }
            Ok(stored) => stored.is_some_and(|s| s.torn.is_some()),
            Err(e) => return Err(format!("the surviving log is unreadable: {e}")),
        };
        let options = PersistenceOptions {
            write_batch_max_delay_ms: MAX_WRITE_BATCH_DELAY_MS,
            ..PersistenceOptions::default()
        };
        let service = Persistence::new(backend.clone(), store.clone(), options)
            .map_err(|e| format!("cannot build the service: {e}"))?;
        service.set_warning_sink(Arc::new(|_: &str| {}));
        let loaded = match service.load(CRASH_SESSION_ID).await {
            Ok(inspection) => inspection.events.to_vec(),
            Err(Error::NotFound { .. }) => Vec::new(),
            Err(e) => return Err(format!("load after a restart failed: {e}")),
        };
        Ok((service, loaded, torn))
    })?;
    let (session, detach) = if loaded.is_empty() {
        store
            .create(
                Some(CRASH_SESSION_ID),
                PrepareOptions {
                    meta: Some(Value::object([("cwd", Value::from(SUITE_CWD))])),
                    ..PrepareOptions::default()
                },
            )
            .map_err(|e| format!("cannot create the live session: {e}"))?
    } else {
        let preparation = runtime
            .block_on(service.prepare(CRASH_SESSION_ID, None))
            .map_err(|e| format!("cannot prepare the loaded session: {e}"))?;
        let session = preparation.session().clone();
        let detach = store
            .enter(&session)
            .map_err(|e| format!("cannot enter the resumed session: {e}"))?;
        store
            .announce(&session)
            .map_err(|e| format!("cannot announce the resumed session: {e}"))?;
        drop(preparation);
        (session, detach)
    };
    let script = Script::after(&session.events().to_vec());
    Ok(Boot {
        process: Process {
            service,
            backend,
            store,
            session,
            detach: Some(detach),
            script,
            runtime,
        },
        loaded,
        torn,
    })
}

impl Process {
    /// Ends the process without any cleanup, as a power loss does.
    fn kill(self) {
        let Process {
            service,
            backend,
            store,
            session,
            detach,
            runtime,
            ..
        } = self;
        runtime.block_on(async move {
            drop(detach);
            drop(session);
            drop(store);
            drop(service);
            drop(backend);
        });
        drop(runtime);
    }
}

/// The model's state between operations.
struct Model<'h, H: ?Sized> {
    harness: &'h mut H,
    /// `None` while the machine is down.
    process: Option<Process>,
    /// Every event of the current live session.
    appended: Vec<Event>,
    /// How many of them a completed flush covered.
    acknowledged: usize,
    report: Report,
}

impl<H: CrashHarness + ?Sized> Model<'_, H> {
    /// Starts a process on the storage and checks what it loads against the previous one.
    fn restart(&mut self, orderly: bool) -> Result<(), String> {
        let Boot {
            process,
            loaded,
            torn,
        } = boot(self.harness)?;
        let kept = check_reload(&self.appended, self.acknowledged, &loaded, orderly)?;
        self.report.restarts += 1;
        self.report.torn_tails += usize::from(torn);
        self.report.lost_unacknowledged += self.appended.len() - kept;
        self.report.closers += loaded.len() - kept;
        self.appended = process.session.events().to_vec();
        self.acknowledged = loaded.len();
        self.process = Some(process);
        Ok(())
    }

    fn apply(&mut self, op: Op) -> Result<(), String> {
        match op {
            Op::Append(n) => {
                let Some(p) = self.process.as_mut() else {
                    return Ok(());
                };
                for _ in 0..n {
                    let event = p.script.append(&p.session)?;
                    self.appended.push(event);
                }
                self.report.appended += n;
            }
            Op::Flush => {
                let Some(p) = self.process.as_ref() else {
                    return Ok(());
                };
                let target = self.appended.len();
                p.runtime
                    .block_on(p.store.flush(&p.session))
                    .map_err(|e| format!("a flush on healthy storage failed: {e}"))?;
                self.acknowledged = target;
                self.report.flushes += 1;
            }
            Op::CrashAt(k) => {
                let Some(p) = self.process.take() else {
                    return Ok(());
                };
                self.harness.die_after(k);
                let target = self.appended.len();
                if p.runtime.block_on(p.store.flush(&p.session)).is_ok() {
                    // The flush finished before the machine died: acknowledged.
                    self.acknowledged = target;
                    self.report.flushes += 1;
                }
                self.power_loss(p, k);
            }
            Op::RetireCrashAt(k) => {
                let Some(mut p) = self.process.take() else {
                    return Ok(());
                };
                self.harness.die_after(k);
                if let Some(detach) = p.detach.take() {
                    detach.detach();
                }
                // Waits for the retirement, and closing the backend for its background seal;
                // either may fail once the machine died.
                let _ = p.runtime.block_on(p.service.dispose());
                self.report.retirements += 1;
                self.power_loss(p, k);
            }
            Op::Reopen => match self.process.take() {
                None => self.restart(false)?,
                Some(p) => {
                    let disposed = p.runtime.block_on(p.service.dispose());
                    p.kill();
                    disposed.map_err(|e| format!("disposing the service failed: {e}"))?;
                    self.restart(true)?;
                }
            },
        }
        Ok(())
    }

    /// Power is lost under the running process `p`, keeping up to `kept` unsynced bytes.
    fn power_loss(&mut self, p: Process, kept: u64) {
        self.harness.lose_power(kept);
        self.report.crashes += 1;
        p.kill();
        self.harness.power_on();
    }
}

/// Plays `ops` (see the module docs) on fresh [`CrashStorage`] through the JSONL backend and
/// checks every restart.
///
/// # Errors
/// The first violated property, with the step it was found at.
pub fn run(config: &ModelConfig, ops: &[Op]) -> Result<Report, CrashFailure> {
    let mut harness = JsonlHarness {
        storage: CrashStorage::new(),
        config: *config,
        frames: 0,
        sealed_boots: 0,
    };
    run_with(&mut harness, ops)
}

/// Plays `ops` (see the module docs) on the storage of `harness`, which must hold no session
/// [`CRASH_SESSION_ID`] yet, and checks every restart.
///
/// # Errors
/// The first violated property, with the step it was found at.
pub fn run_with<H: CrashHarness + ?Sized>(
    harness: &mut H,
    ops: &[Op],
) -> Result<Report, CrashFailure> {
    let fail = |step: usize| move |message: String| CrashFailure { step, message };
    let first = boot(harness).map_err(fail(0))?;
    let mut model = Model {
        harness,
        appended: first.process.session.events().to_vec(),
        process: Some(first.process),
        acknowledged: 0,
        report: Report::default(),
    };
    for (step, op) in ops.iter().enumerate() {
        model.apply(*op).map_err(fail(step))?;
    }
    // A final power loss that keeps nothing unsynced.
    let end = ops.len();
    if let Some(p) = model.process.take() {
        model.power_loss(p, 0);
    }
    model.restart(false).map_err(fail(end))?;
    if let Some(p) = model.process.take() {
        p.kill();
    }
    model.report.sealed_boots = model.harness.sealed_boots();
    Ok(model.report)
}
