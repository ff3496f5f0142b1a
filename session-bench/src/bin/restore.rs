//! `restore`: times a full restore of a stored session and reports peak RSS.
//!
//! Usage: `restore <ROOT> <SESSION-ID> [zstd|none] [full|serial|load|inspect|compactions|uncompact]`
//!
//! - `load`: `Backend::load_stored` alone.
//! - `full` (the default): the restore-mode session construction the persistence coordinator
//!   performs (header validation, every seed check, surface fold, message derivation and the
//!   request folds) during the read, as it does: `Backend::load_stored_into` hands each batch
//!   of events to a `RestoreBuilder`; then the crash closers and the end of the restore.
//! - `serial`: the same construction after the read: `load_stored`, the closers, then
//!   `Session::from_restore_events`.
//! - `inspect`: the whole service path, `Persistence::inspect` on a fresh store.
//! - `compactions`: `Persistence::inspect_detailed` (what `sessionctl inspect` and
//!   `sessionctl compactions` read with), then the compaction history from the inspection's
//!   transcript (`compactions_of`).
//! - `uncompact`: `inspect_detailed` and the history, then `session_fork::uncompact_events` undoing the first
//!   compaction, then writing the child through the same persistence service (`enter`,
//!   `announce`, `flush`, as `sessionctl uncompact` publishes it); the child is removed
//!   afterwards.
//!
//! Prints one line of `key=value` pairs (times in seconds, `cpu` = user + system CPU time of
//! the whole process, peak RSS = `VmHWM` in MiB).

#![allow(clippy::print_stdout)]

use std::fmt::Write as _;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use session_core::json::Value;
use session_core::{Event, Events, SharedClock, SystemClock};
use session_fork::{Undo, uncompact_events};
use session_persist::jsonl::{Compression, JsonlBackend, JsonlConfig};
use session_persist::{Backend, Persistence, PersistenceOptions, SharedEventSink, StoredEventSink};
use session_repair::interrupted_turn_closers;
use session_store::{SessionStore, SharedSession};
use session_surface::{RestoreBuilder, Session, compactions_of};

/// A `/proc/self/status` memory field in MiB (`VmHWM:` is the peak RSS).
fn rss_mib(field: &str) -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

fn peak_rss_mib() -> Option<f64> {
    rss_mib("VmHWM:")
}

/// User plus system CPU seconds of this process so far (`/proc/self/stat`, 100 ticks/s).
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after the name.
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / 100.0)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Load,
    Full,
    Serial,
    Inspect,
    Compactions,
    Uncompact,
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(root), Some(id)) = (args.first(), args.get(1)) else {
        eprintln!(
            "usage: restore <ROOT> <SESSION-ID> [zstd|none] [full|serial|load|inspect|compactions|uncompact]"
        );
        return ExitCode::from(2);
    };
    let compression = match args.get(2).map(String::as_str) {
        Some("none") => Compression::None,
        _ => Compression::Zstd,
    };
    let mode = match args.get(3).map(String::as_str) {
        Some("load") => Mode::Load,
        Some("serial") => Mode::Serial,
        Some("inspect") => Mode::Inspect,
        Some("compactions") => Mode::Compactions,
        Some("uncompact") => Mode::Uncompact,
        _ => Mode::Full,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let backend = match JsonlBackend::open(JsonlConfig::new(root).compression(compression)) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("restore: {e}");
            return ExitCode::from(1);
        }
    };
    let outcome = match mode {
        Mode::Inspect | Mode::Compactions | Mode::Uncompact => inspect(&rt, backend, id, mode),
        Mode::Load | Mode::Serial => restore(&rt, &backend, id, mode == Mode::Serial),
        Mode::Full => restore_during_read(&rt, &backend, id),
    };
    match outcome {
        Ok(line) => {
            println!(
                "{line} cpu={:.2}s peak_rss={:.1}MiB",
                cpu_seconds().unwrap_or(f64::NAN),
                peak_rss_mib().unwrap_or(f64::NAN)
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("restore: {e}");
            ExitCode::from(1)
        }
    }
}

type BoxError = Box<dyn std::error::Error>;

fn restore(
    rt: &tokio::runtime::Runtime,
    backend: &JsonlBackend,
    id: &str,
    full: bool,
) -> Result<String, BoxError> {
    let start = Instant::now();
    let prefix = rt
        .block_on(backend.load_stored(id))?
        .ok_or_else(|| format!("session {id} not found"))?;
    let load = start.elapsed();
    let load_peak = peak_rss_mib().unwrap_or(f64::NAN);
    let events = prefix.events.len();
    if !full {
        return Ok(format!(
            "events={events} load_stored={:.3}s",
            load.as_secs_f64()
        ));
    }
    let t = Instant::now();
    let closers = interrupted_turn_closers(prefix.events.iter());
    let mut balanced: Vec<Event> = prefix.events;
    balanced.extend(closers.iter().cloned());
    let closers_time = t.elapsed();
    let t = Instant::now();
    let clock: SharedClock = Arc::new(SystemClock);
    // The coordinator's order: the balanced events become a frozen list, which the restored
    // session adopts as its log.
    let balanced = Events::from_vec(balanced);
    let to_list = t.elapsed();
    let session = Session::from_restore_events(id, balanced, &prefix.header_value, clock)?;
    let construct = t.elapsed();
    let total = start.elapsed();
    let line = format!(
        "events={events} closers={} session_seq={} surface={} messages={} load_stored={:.3}s closers_time={:.3}s construct={:.3}s (list={:.3}s) total={:.3}s load_peak_rss={load_peak:.1}MiB rss={:.1}MiB",
        closers.len(),
        session.seq(),
        session.surface().len(),
        session.derive_messages().len(),
        load.as_secs_f64(),
        closers_time.as_secs_f64(),
        construct.as_secs_f64(),
        to_list.as_secs_f64(),
        total.as_secs_f64(),
        rss_mib("VmRSS:").unwrap_or(f64::NAN),
    );
    drop(session);
    Ok(line)
}

/// Restores the session from the events as the read hands them over.
struct Restorer {
    id: String,
    builder: Option<RestoreBuilder>,
    error: Option<String>,
}

impl StoredEventSink for Restorer {
    fn start(&mut self, header: &Value) {
        let clock: SharedClock = Arc::new(SystemClock);
        self.error = None;
        self.builder = match RestoreBuilder::new(self.id.as_str(), header, clock) {
            Ok(b) => Some(b),
            Err(e) => {
                self.error = Some(e.to_string());
                None
            }
        };
    }

    fn accept(&mut self, events: &mut Vec<Event>) {
        for event in events.drain(..) {
            if let Some(builder) = &mut self.builder
                && let Err(e) = builder.push(event)
            {
                self.error = Some(e.to_string());
                self.builder = None;
            }
        }
    }
}

fn restore_during_read(
    rt: &tokio::runtime::Runtime,
    backend: &JsonlBackend,
    id: &str,
) -> Result<String, BoxError> {
    let start = Instant::now();
    let sink = Arc::new(Mutex::new(Restorer {
        id: id.to_owned(),
        builder: None,
        error: None,
    }));
    let shared: SharedEventSink = sink.clone();
    let prefix = rt
        .block_on(backend.load_stored_into(id, shared))?
        .ok_or_else(|| format!("session {id} not found"))?;
    let load = start.elapsed();
    let load_peak = peak_rss_mib().unwrap_or(f64::NAN);
    let mut restorer = sink.lock().map_err(|_| "the restore panicked")?;
    if let Some(e) = restorer.error.take() {
        return Err(e.into());
    }
    let mut builder = restorer.builder.take().ok_or("no restore was started")?;
    drop(restorer);
    let t = Instant::now();
    // Events the read kept back (recovered from a torn frame) come after the handed ones.
    for event in prefix.events {
        builder.push(event)?;
    }
    let events = builder.len();
    let closers = interrupted_turn_closers(builder.events().iter());
    for closer in &closers {
        builder.push(closer.clone())?;
    }
    let session = builder.finish()?;
    let finish = t.elapsed();
    let total = start.elapsed();
    let line = format!(
        "events={events} closers={} session_seq={} surface={} messages={} load_stored_into={:.3}s finish={:.3}s total={:.3}s load_peak_rss={load_peak:.1}MiB rss={:.1}MiB",
        closers.len(),
        session.seq(),
        session.surface().len(),
        session.derive_messages().len(),
        load.as_secs_f64(),
        finish.as_secs_f64(),
        total.as_secs_f64(),
        rss_mib("VmRSS:").unwrap_or(f64::NAN),
    );
    drop(session);
    Ok(line)
}

fn inspect(
    rt: &tokio::runtime::Runtime,
    backend: JsonlBackend,
    id: &str,
    mode: Mode,
) -> Result<String, BoxError> {
    let clock: SharedClock = Arc::new(SystemClock);
    rt.block_on(async {
        let store = SessionStore::new(clock.clone());
        let persistence = Persistence::new(
            Arc::new(backend),
            store.clone(),
            PersistenceOptions::default(),
        )?;
        let start = Instant::now();
        if mode == Mode::Inspect {
            let view = persistence.inspect(id, None).await?;
            let line = format!(
                "events={} inspect={:.3}s",
                view.events.len(),
                start.elapsed().as_secs_f64()
            );
            drop(view);
            persistence.dispose().await?;
            return Ok(line);
        }
        let detailed = persistence.inspect_detailed(id, None).await?;
        let inspected = start.elapsed();
        let view = detailed.inspection;
        let mut line = format!(
            "events={} inspect_detailed={:.3}s",
            view.events.len(),
            inspected.as_secs_f64()
        );
        {
            let t = Instant::now();
            let compactions = compactions_of(&detailed.transcript);
            let _ = write!(
                line,
                " compactions={} history={:.3}s",
                compactions.len(),
                t.elapsed().as_secs_f64()
            );
            if mode == Mode::Uncompact {
                let first = compactions
                    .first()
                    .ok_or("the session has no compaction")?
                    .seq;
                let child_id = format!("{id}-uncompact-bench");
                let t = Instant::now();
                let child = uncompact_events(
                    id,
                    view.meta.cwd.as_deref(),
                    view.events.clone(),
                    &Undo::Seqs(vec![first]),
                    &child_id,
                    clock.clone(),
                )?;
                let built = t.elapsed();
                let t = Instant::now();
                let shared = SharedSession::new(child);
                let _detach = store.enter(&shared)?;
                store.announce(&shared)?;
                store.flush(&shared).await?;
                let written = t.elapsed();
                let path = persistence.locate(&shared.header()).map(|l| l.path);
                let _ = write!(
                    line,
                    " undone={first} child_events={} build={:.3}s write={:.3}s",
                    shared.seq(),
                    built.as_secs_f64(),
                    written.as_secs_f64()
                );
                drop(shared);
                persistence.dispose().await?;
                if let Some(dir) = path.as_ref().and_then(|p| p.parent()) {
                    std::fs::remove_dir_all(dir)?;
                }
                let _ = write!(line, " total={:.3}s", start.elapsed().as_secs_f64());
                return Ok(line);
            }
        }
        let _ = write!(line, " total={:.3}s", start.elapsed().as_secs_f64());
        drop(view);
        persistence.dispose().await?;
        Ok(line)
    })
}
