//! The writing commands: `append`, `fork`, `convert`.

use std::io::{BufRead, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};

use session_core::event::seq_value;
use session_core::json::Value;
use session_core::{Events, SessionHeader};
use session_fork::fork_events;
use session_persist::Backend;
use session_persist::write_behind::DEFAULT_MAX_PENDING_BYTES;
use session_store::{PrepareOptions, SessionPreparation, SessionStore, SharedSession};
use session_surface::Draft;

use crate::append_failure::{Accepted, flush_failure_hint};
use crate::args::Invocation;
use crate::cmd_read::{inspect_events, open_target, require_store};
use crate::error::{Error, Location, Result};
use crate::json::{float, num, obj, opt_str};
use crate::output::{Out, bytes};
use crate::progress::with_spinner;
use crate::report::turns;
use crate::store::{Store, Target};

pub(crate) fn schema(name: &str) -> (&'static str, Value) {
    ("schema", Value::from(format!("sessionctl.{name}/1")))
}

fn store_err(e: &session_store::Error) -> Error {
    match e.as_fork() {
        Some(f) => Error::Fork {
            error: f.clone(),
            hint: None,
        },
        None => Error::failed(e.to_string(), None),
    }
}

// ---- append ----

/// A parsed input line of `append`.
enum Line {
    Draft(Draft),
    Flush,
}

/// Parses one input line into a draft or a flush barrier.
fn parse_line(text: &str) -> std::result::Result<Line, String> {
    let value = Value::parse(text).map_err(|e| format!("not valid JSON: {e}"))?;
    let Some(o) = value.as_object() else {
        return Err("a draft must be a JSON object".into());
    };
    if o.contains_key("flush") {
        if o.len() == 1 && o.get("flush").and_then(Value::as_bool) == Some(true) {
            return Ok(Line::Flush);
        }
        return Err("a flush barrier is exactly {\"flush\":true}".into());
    }
    for (k, _) in o.iter() {
        if !matches!(
            k,
            "type" | "data" | "surfaceOp" | "sourceEventSeqs" | "ignorable"
        ) {
            let why = match k {
                "seq" | "time" => " (seq and time are assigned by the session)",
                _ => "",
            };
            return Err(format!(
                "unknown key \"{k}\"{why}; a draft has type, data, surfaceOp?, sourceEventSeqs?, \
                 ignorable?"
            ));
        }
    }
    let Some(ty) = o
        .get("type")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
    else {
        return Err("a draft needs a non-empty string \"type\"".into());
    };
    let Some(data) = o.get("data") else {
        return Err("a draft needs \"data\" (null is allowed)".into());
    };
    let mut draft = Draft::new(ty, data.clone());
    if let Some(op) = o.get("surfaceOp") {
        draft = draft.surface_op_value(op.clone());
    }
    if let Some(seqs) = o.get("sourceEventSeqs") {
        draft = draft.sources_value(seqs.clone());
    }
    match o.get("ignorable") {
        None => {}
        Some(Value::Bool(true)) => draft = draft.ignorable(),
        Some(_) => return Err("\"ignorable\" is either absent or true".into()),
    }
    Ok(Line::Draft(draft))
}

/// Builds the hint of a failed flush from what was accepted so far and the failure's cause.
/// Its third argument is what the store holds of the session, read back after the failure.
/// Where appended events go: the session store, and the backend behind it (read back after a
/// failed flush).
#[derive(Clone, Copy)]
struct Sink<'a> {
    sessions: &'a SessionStore,
    backend: &'a dyn session_persist::Backend,
}

type Hint<'a> = dyn Fn(
        &Accepted,
        &(dyn std::error::Error + 'static),
        &session_persist::Result<Option<session_persist::StoredPrefix>>,
    ) -> String
    + 'a;

/// Flushes `session` and returns its acknowledgement, `{"flushed":SEQ}` (the last durable seq,
/// `null` before the first event). A failure's hint (`hint`) says what is on disk, what is lost
/// when the process exits and what to run next.
async fn barrier(
    Sink { sessions, backend }: Sink<'_>,
    session: &SharedSession,
    accepted: &Accepted,
    hint: &Hint<'_>,
) -> Result<String> {
    match sessions.flush(session).await {
        Ok(_) => {}
        Err(session_store::Error::Listener(inner)) => {
            // Read back on this runtime (the command already runs inside it).
            let stored = backend.load_stored(&session.id()).await;
            return Err(Error::failed(
                format!("flush failed: {inner}"),
                Some(hint(accepted, &*inner, &stored)),
            ));
        }
        Err(other) => return Err(store_err(&other)),
    }
    let seq = session.seq();
    let flushed = if seq == 0 { Value::Null } else { num(seq - 1) };
    Ok(obj([("flushed", flushed)]).to_json())
}

/// The input of `append`: its lines, in order, as the reader delivers them.
type Lines = tokio::sync::mpsc::Receiver<std::io::Result<String>>;

/// Standard input, read on a thread of its own: the command's runtime keeps running while it
/// waits for input, so the write-behind window and byte limit fire between barriers. A small
/// bounded channel keeps the reader at most a few lines ahead.
fn stdin_lines() -> Lines {
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            if tx.blocking_send(line).is_err() {
                return;
            }
        }
    });
    rx
}

/// How many drafts `append` read, and how many of them were rejected.
#[derive(Debug, Default, PartialEq, Eq)]
struct Tally {
    total: usize,
    rejected: usize,
}

/// Appends the drafts of `lines` to `session` until the input ends: every flush barrier is
/// acknowledged through `ack` once durable, every rejected line is reported on `err` with its
/// line number. Runs on the store's runtime; the final barrier is the caller's.
#[allow(clippy::too_many_arguments)] // one call site; the parts are independent
async fn pump(
    sink: Sink<'_>,
    session: &SharedSession,
    mut lines: Lines,
    accepted: &mut Accepted,
    hint: &Hint<'_>,
    ack: &mut dyn FnMut(&str) -> Result<()>,
    enter: &mut dyn FnMut() -> Result<()>,
    err: &mut dyn Write,
) -> Result<Tally> {
    let mut tally = Tally::default();
    let mut n = 0usize;
    // Whether a turn is open: a `turn/end` with none open is refused (a turn cannot span two
    // `append` runs: resuming a session closes its open turn as interrupted).
    let mut turn_open = session
        .events()
        .iter()
        .rev()
        .find_map(|e| match e.event_type() {
            "turn/start" => Some(true),
            "turn/end" => Some(false),
            _ => None,
        })
        .unwrap_or(false);
    while let Some(line) = lines.recv().await {
        n += 1;
        let line = line.map_err(|e| {
            Error::failed(format!("cannot read standard input at line {n}: {e}"), None)
        })?;
        let text = line.trim();
        if text.is_empty() {
            continue;
        }
        let parsed = parse_line(text);
        if parsed.is_ok() {
            // The first draft or barrier publishes the session (see `append`).
            enter()?;
        }
        match parsed {
            Ok(Line::Flush) => ack(&barrier(sink, session, accepted, hint).await?)?,
            Ok(Line::Draft(draft)) if &*draft.ty == "turn/end" && !turn_open => {
                tally.total += 1;
                tally.rejected += 1;
                let _ = writeln!(
                    err,
                    "sessionctl: line {n}: rejected: turn/end, but no turn is open (a turn cannot span two `append` runs: resuming a session closes its open turn as interrupted); start a new turn with turn/start"
                );
            }
            Ok(Line::Draft(draft)) => {
                tally.total += 1;
                match session.append(draft) {
                    Ok(event) => {
                        match event.event_type() {
                            "turn/start" => turn_open = true,
                            "turn/end" => turn_open = false,
                            _ => {}
                        }
                        accepted.push(event.seq(), n);
                    }
                    Err(e) => {
                        tally.rejected += 1;
                        let _ = writeln!(err, "sessionctl: line {n}: rejected: {e}");
                    }
                }
            }
            Err(why) => {
                tally.total += 1;
                tally.rejected += 1;
                let _ = writeln!(err, "sessionctl: line {n}: rejected: {why}");
            }
        }
    }
    Ok(tally)
}

/// `append`.
pub(crate) fn append(inv: &Invocation, out: &mut Out) -> Result<()> {
    let create = inv.flag("--create");
    if inv.value("--cwd").is_some() && !create {
        return Err(Error::usage("--cwd is only used with --create"));
    }
    let operand = inv.operand(0);
    let target = if create {
        if operand.is_empty() {
            return Err(Error::usage("SESSION must not be empty"));
        }
        Target {
            at: inv.global.store(),
            id: operand.to_owned(),
            file: None,
            outside: false,
        }
    } else {
        let target = crate::store::resolve(operand, &inv.global, false)?;
        require_store(&target.at)?;
        target
    };
    let store = Store::for_target(&target)?;
    let mut _preparation: Option<SessionPreparation> = None;
    let session = if create {
        if let Some(found) = store.lookup(&target.id)? {
            return Err(Error::failed_at(
                format!("session \"{}\" already exists", target.id),
                Some("drop --create to append to it, or choose another id".into()),
                Location {
                    file: found.file,
                    ..Location::default()
                },
            ));
        }
        let cwd = match inv.value("--cwd") {
            Some(c) => {
                std::path::absolute(c).map_err(|e| Error::io("resolve", Path::new(c), &e))?
            }
            None => std::env::current_dir().map_err(|e| Error::io("read", Path::new("."), &e))?,
        };
        let meta = obj([("cwd", Value::from(cwd.display().to_string()))]);
        let (session, _detach) = store
            .sessions
            .create(
                Some(&target.id),
                PrepareOptions {
                    meta: Some(meta),
                    ..PrepareOptions::default()
                },
            )
            .map_err(|e| match e {
                session_store::Error::Listener(inner) => Error::failed(inner.to_string(), None),
                other => store_err(&other),
            })?;
        session
    } else {
        let id = target.id.clone();
        let preparation = store
            .block_on(store.persistence.prepare(&id, None))
            .map_err(|e| store.err(e, target.file.as_deref()))?;
        // Preparing took the writer's lock (and committed any crash repair); the session is
        // published into the store, which writes its `session/end-seed` marker, only when the
        // input brings a draft or a barrier: an empty input writes nothing.
        let session = preparation.session().clone();
        _preparation = Some(preparation);
        session
    };
    // Whether the input brought a draft or a barrier (a created session is in the store
    // already, and writes nothing before its first event).
    let entered = std::cell::Cell::new(false);
    let mut enter = || -> Result<()> {
        if !entered.get() && !create {
            store.sessions.enter(&session).map_err(|e| store_err(&e))?;
            store
                .sessions
                .announce(&session)
                .map_err(|e| store_err(&e))?;
        }
        entered.set(true);
        Ok(())
    };

    // The last acknowledgement printed: the end of input repeats none.
    let last_ack = std::cell::RefCell::new(String::new());
    let mut ack = |line: &str| -> Result<()> {
        out.line(line)?;
        out.flush()?;
        line.clone_into(&mut last_ack.borrow_mut());
        Ok(())
    };
    let hint =
        |accepted: &Accepted,
         cause: &(dyn std::error::Error + 'static),
         stored: &session_persist::Result<Option<session_persist::StoredPrefix>>| {
            flush_failure_hint(
                &store,
                &session.id(),
                session.seq(),
                accepted,
                create,
                cause,
                stored,
            )
        };
    let tally = store.block_on(async {
        let mut err = std::io::stderr();
        let mut accepted = Accepted::default();
        let sink = Sink {
            sessions: &store.sessions,
            backend: &*store.backend,
        };
        let tally = pump(
            sink,
            &session,
            stdin_lines(),
            &mut accepted,
            &hint,
            &mut ack,
            &mut enter,
            &mut err,
        )
        .await?;
        if entered.get() {
            let last = barrier(sink, &session, &accepted, &hint).await?;
            if *last_ack.borrow() != last {
                ack(&last)?;
            }
        }
        Ok::<_, Error>(tally)
    })?;
    store.close()?;
    if tally.rejected > 0 {
        return Err(Error::failed(
            format!(
                "{} of {} drafts were rejected (the accepted ones are durable)",
                tally.rejected, tally.total
            ),
            Some("each rejected line is reported above with its line number".into()),
        ));
    }
    Ok(())
}

// ---- fork ----

/// The first free `<parent>-fork-<n>` in the store.
fn mint_child_id(store: &Store, parent: &str) -> Result<String> {
    for n in 1u64..=u64::from(u32::MAX) {
        let id = format!("{parent}-fork-{n}");
        if store.lookup(&id)?.is_none() {
            return Ok(id);
        }
    }
    Ok(format!("{parent}-fork"))
}

/// A suggestion for an `OPEN_TURN` refusal: the closed boundaries around the open turn.
fn boundary_hint(events: &Events, at: u64) -> Option<String> {
    let all = turns(
        events
            .prefix((at as usize + 1).min(events.len()))
            .iter()
            .cloned(),
    );
    let open = all.last().filter(|t| t.end.is_none())?;
    let closed = turns(events.iter().cloned())
        .into_iter()
        .find(|t| t.start == open.start)
        .and_then(|t| t.end);
    let mut options = Vec::new();
    if open.start > 0 {
        options.push(format!(
            "--at {} (before turn {})",
            open.start - 1,
            open.turn.to_json()
        ));
    }
    if let Some(end) = closed {
        options.push(format!("--at {end} (its turn/end)"));
    }
    (!options.is_empty()).then(|| {
        format!(
            "fork at a closed boundary instead: {}",
            options.join(" or ")
        )
    })
}

/// Writes a new child session (a fork or an uncompacted copy) into the store, in the batches
/// a live loop writes (a new one at every `turn/start` and `step/start`), never as one frame
/// of the whole child: the backend creates the log with the first batch and refuses an id
/// that exists by then. Returns the child's header, its next seq and where it is stored.
pub(crate) fn publish_child(
    store: &Store,
    child: session_surface::Session,
) -> Result<(SessionHeader, u64, Option<PathBuf>)> {
    let header = child.header().clone();
    let child_events = child.seq();
    // The child's log shares the parent's events; its derived state is dropped before the
    // write. The child is published at once, in the batches a live loop writes: a crash leaves
    // either no child or all of it, and the log is synced once, not once per batch.
    let events = child.events();
    drop(child);
    with_spinner(format!("writing {}", header.id), || {
        let batches = live_batches(&events);
        let events = events.to_vec();
        store
            .block_on(store.backend.publish_batches(&header, events, &batches))
            .map_err(|e| store.err(e, None))
    })?;
    drop(events);
    let path = store.persistence.locate(&header).map(|l| l.path);
    Ok((header, child_events, path))
}

/// `fork`.
pub(crate) fn fork(inv: &Invocation, out: &mut Out) -> Result<()> {
    let at = inv.seq_option("--at")?;
    let (target, store) = open_target(inv, inv.operand(0), false)?;
    let (meta, events) = inspect_events(&store, &target)?;
    let child_id = match inv.value("--id") {
        Some("") => return Err(Error::usage("--id must not be empty")),
        Some(id) => id.to_owned(),
        None => mint_child_id(&store, &target.id)?,
    };
    if child_id == target.id || store.lookup(&child_id)?.is_some() {
        return Err(Error::Fork {
            error: session_fork::ForkError::already_exists(&child_id),
            hint: Some("choose another --id (or omit it to mint one)".into()),
        });
    }
    let boundary = at.map(seq_value);
    // Built where the read ran (`Store::on_read_thread`), reusing the memory the read's
    // derived state freed.
    let built = {
        let (parent_id, cwd, events, child_id) = (
            target.id.clone(),
            meta.cwd.clone(),
            events.clone(),
            child_id.clone(),
        );
        let clock = store.sessions.clock().clone();
        store.on_read_thread("building the fork child", move || {
            fork_events(
                &parent_id,
                cwd.as_deref(),
                &events,
                boundary.as_ref(),
                &child_id,
                clock,
            )
        })?
    };
    let child = built.map_err(|e| match e.as_fork() {
        Some(f) => Error::Fork {
            error: f.clone(),
            hint: match f.code() {
                session_fork::ForkErrorCode::OpenTurn => {
                    boundary_hint(&events, at.unwrap_or(events.len().saturating_sub(1) as u64))
                }
                _ => Some("`sessionctl inspect` lists the turns and the last seq".into()),
            },
        },
        None => Error::failed(format!("the fork child is invalid: {e}"), None),
    })?;
    let seed_length = child.header().seed_length.unwrap_or(0);
    let (header, child_events, path) = publish_child(&store, child)?;
    if inv.global.json {
        let doc = obj([
            schema("fork"),
            ("parent", Value::from(target.id.as_str())),
            ("at", at.map_or(Value::Null, num)),
            (
                "child",
                obj([
                    ("id", Value::from(child_id.as_str())),
                    (
                        "file",
                        opt_str(path.as_ref().map(|p| p.display().to_string())),
                    ),
                    ("seedLength", num(seed_length)),
                    ("events", num(child_events)),
                    ("header", header.to_value()),
                ]),
            ),
        ]);
        out.line(&doc.to_json())?;
    } else {
        let s = out.style;
        out.line(&s.green(&format!(
            "forked {} at seq {} into {child_id}",
            target.id,
            seed_length.saturating_sub(1)
        )))?;
        out.line(&format!(
            "  inherits {seed_length} events, then a session/end-seed marker ({child_events} events)"
        ))?;
        if let Some(p) = &path {
            out.line(&format!("  file {}", p.display()))?;
        }
    }
    store.close()
}

// ---- convert ----

/// The append batches a live loop writes, as ranges of `events`: a new batch at every
/// `turn/start` and `step/start`, and, as the write-behind controller does, once a batch's
/// weight reaches its back-pressure bound.
pub(crate) fn live_batches(events: &Events) -> Vec<Range<usize>> {
    live_batches_within(events, DEFAULT_MAX_PENDING_BYTES)
}

/// [`live_batches`] with the weight bound `max_bytes` (at least one event per batch).
fn live_batches_within(events: &Events, max_bytes: usize) -> Vec<Range<usize>> {
    let mut batches = Vec::new();
    let (mut start, mut weight) = (0, 0);
    for (i, e) in events.iter().enumerate() {
        if i > start
            && (weight >= max_bytes || matches!(e.event_type(), "turn/start" | "step/start"))
        {
            batches.push(start..i);
            (start, weight) = (i, 0);
        }
        weight += e.approx_json_len();
    }
    if start < events.len() {
        batches.push(start..events.len());
    }
    batches
}

/// `seal`: rewrites a closed Zstandard log into its header frame and one frame per turn.
pub(crate) fn seal(inv: &Invocation, out: &mut Out) -> Result<()> {
    if inv.global.database.is_some() {
        return Err(Error::usage(
            "`seal` rewrites a zstd log file and works on JSONL stores only; a database store packs chunk rows as they are written and has nothing to seal",
        ));
    }
    let (target, store) = open_target(inv, inv.operand(0), false)?;
    let id = target.id.clone();
    let Some(jsonl) = store.jsonl() else {
        return Err(Error::usage("`seal` works on JSONL stores only"));
    };
    let report = with_spinner(format!("sealing {id}"), || store.block_on(jsonl.seal(&id)))
        .map_err(|e| store.err(e, target.file.as_deref()))?;
    #[allow(clippy::cast_precision_loss)] // sizes far below 2^52
    let ratio = if report.bytes_after > 0 {
        report.bytes_before as f64 / report.bytes_after as f64
    } else {
        1.0
    };
    if inv.global.json {
        let side = |bytes: u64, frames: usize| {
            obj([("bytes", num(bytes)), ("frames", num(frames as u64))])
        };
        let doc = obj([
            schema("seal"),
            ("id", Value::from(id.as_str())),
            ("compression", Value::from(target.at.encoding())),
            ("rewritten", Value::from(report.rewritten)),
            ("before", side(report.bytes_before, report.frames_before)),
            ("after", side(report.bytes_after, report.frames_after)),
            ("ratio", float((ratio * 1000.0).round() / 1000.0)),
        ]);
        out.line(&doc.to_json())?;
    } else if report.rewritten {
        let s = out.style;
        out.line(&s.green(&format!(
            "sealed {id}: {} frames → {} frames, {} → {} ({ratio:.2}x smaller)",
            report.frames_before,
            report.frames_after,
            bytes(report.bytes_before),
            bytes(report.bytes_after)
        )))?;
    } else if report.frames_before > 0 {
        out.line(&format!(
            "{id} is already sealed: {} frames, {}; nothing to rewrite",
            report.frames_before,
            bytes(report.bytes_before)
        ))?;
    } else {
        out.line(&format!(
            "{id} is a plain JSONL log ({}); it has no frames, nothing to seal",
            bytes(report.bytes_before)
        ))?;
    }
    store.close()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::path::PathBuf;
    use std::sync::Arc;
    use std::time::Duration;

    use session_core::Event;
    use session_core::clock::system_clock;
    use session_persist::{
        Compression, JsonlBackend, JsonlConfig, Persistence, PersistenceOptions,
    };
    use tokio::sync::mpsc;
    use tokio::time::Instant;

    use super::*;

    /// A fresh directory under the system temporary directory, removed on drop.
    struct Root(PathBuf);

    impl Root {
        fn new(name: &str) -> Root {
            let dir = std::env::temp_dir().join(format!(
                "sessionctl-{name}-{}-{}",
                std::process::id(),
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos()
            ));
            Root(dir)
        }
    }

    impl Drop for Root {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// The number of lines of the plain log at `path` (0 when it does not exist yet).
    fn lines_on_disk(path: &Path) -> usize {
        std::fs::read_to_string(path).map_or(0, |t| t.lines().count())
    }

    /// Waits (in real time, at most 10 s, without advancing the paused clock) until the log
    /// at `path` holds `lines` lines.
    async fn until_on_disk(path: &Path, lines: usize) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while lines_on_disk(path) < lines {
            assert!(
                std::time::Instant::now() < deadline,
                "the log never reached {lines} lines"
            );
            tokio::task::yield_now().await;
        }
    }

    /// One `append` run in this process on a paused clock: a JSONL store with the given byte
    /// limit, a new session `s`, and `drive` feeding its input.
    fn run_paused<F, Fut>(max_pending_bytes: usize, drive: F) -> (Tally, Vec<String>)
    where
        F: FnOnce(mpsc::Sender<std::io::Result<String>>, PathBuf) -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        let root = Root::new("pump");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(async {
            let backend = Arc::new(
                JsonlBackend::open(JsonlConfig::new(&root.0).compression(Compression::None))
                    .unwrap(),
            );
            let sessions = SessionStore::new(system_clock());
            let persistence = Persistence::new(
                backend.clone(),
                sessions.clone(),
                PersistenceOptions {
                    max_pending_bytes,
                    ..PersistenceOptions::default()
                },
            )
            .unwrap();
            let meta = obj([("cwd", Value::from("/w"))]);
            let (session, _detach) = sessions
                .create(
                    Some("s"),
                    PrepareOptions {
                        meta: Some(meta),
                        ..PrepareOptions::default()
                    },
                )
                .unwrap();
            let path = backend.log_path(&session.header()).unwrap();
            let (tx, rx) = mpsc::channel(4);
            let mut acks = Vec::new();
            let mut ack = |line: &str| {
                acks.push(line.to_owned());
                Ok(())
            };
            let mut err = Vec::new();
            let mut accepted = Accepted::default();
            let mut enter = || Ok(());
            let (tally, ()) = tokio::join!(
                pump(
                    Sink {
                        sessions: &sessions,
                        backend: &*backend,
                    },
                    &session,
                    rx,
                    &mut accepted,
                    &|_, _, _| String::new(),
                    &mut ack,
                    &mut enter,
                    &mut err
                ),
                drive(tx, path),
            );
            let tally = tally.unwrap();
            persistence.dispose().await.unwrap();
            assert!(err.is_empty(), "{}", String::from_utf8_lossy(&err));
            (tally, acks)
        })
    }

    const TURN: &str = r#"{"type":"turn/start","data":{"turn":1}}"#;
    const TODO: &str = r#"{"type":"todo/write","data":{"todos":[]}}"#;

    /// The write-behind window fires between barriers: with the clock paused, an unflushed
    /// draft is not on disk 199 ms after it was read and is written when the 200 ms window
    /// elapses, while the input stays open; a barrier then acknowledges it.
    #[test]
    fn append_writes_behind_when_the_window_elapses() {
        let (tally, acks) = run_paused(
            PersistenceOptions::default().max_pending_bytes,
            |tx, path| async move {
                tx.send(Ok(TURN.to_owned())).await.unwrap();
                tokio::time::sleep(Duration::from_millis(199)).await;
                assert_eq!(lines_on_disk(&path), 0, "written before the window elapsed");
                tokio::time::sleep(Duration::from_millis(2)).await;
                until_on_disk(&path, 2).await;
                tx.send(Ok(TODO.to_owned())).await.unwrap();
                tx.send(Ok(r#"{"flush":true}"#.to_owned())).await.unwrap();
                until_on_disk(&path, 3).await;
            },
        );
        assert_eq!(
            tally,
            Tally {
                total: 2,
                rejected: 0
            }
        );
        assert_eq!(acks, [r#"{"flushed":1}"#]);
    }

    /// The byte limit fires between barriers: with a limit of one byte every draft is written
    /// at once, before the paused clock moves at all.
    #[test]
    fn append_writes_at_once_when_the_byte_limit_is_reached() {
        let (tally, acks) = run_paused(1, |tx, path| async move {
            let start = Instant::now();
            tx.send(Ok(TURN.to_owned())).await.unwrap();
            until_on_disk(&path, 2).await;
            tx.send(Ok(TODO.to_owned())).await.unwrap();
            until_on_disk(&path, 3).await;
            assert_eq!(Instant::now(), start, "the paused clock did not move");
        });
        assert_eq!(
            tally,
            Tally {
                total: 2,
                rejected: 0
            }
        );
        assert!(acks.is_empty());
    }

    fn event(seq: u64, ty: &str, text_len: usize) -> Event {
        Event::parse(&format!(
            r#"{{"type":"{ty}","seq":{seq},"time":0,"data":{{"turn":1,"text":"{}"}}}}"#,
            "a".repeat(text_len)
        ))
        .unwrap()
    }

    /// The seqs of each batch.
    fn batch_seqs(events: &Events, max_bytes: usize) -> Vec<Vec<u64>> {
        let all = events.to_vec();
        live_batches_within(events, max_bytes)
            .into_iter()
            .map(|b| all[b].iter().map(Event::seq).collect())
            .collect()
    }

    #[test]
    fn live_batches_start_at_turn_and_step_starts_and_stop_at_the_weight_bound() {
        let kinds = [
            "turn/start",
            "user/message",
            "step/start",
            "assistant/message",
            "assistant/message",
            "assistant/message",
            "step/end",
            "turn/end",
        ];
        let events: Events = kinds
            .iter()
            .zip(0..)
            .map(|(ty, seq)| event(seq, ty, 1_000))
            .collect::<Vec<_>>()
            .into();
        // Unbounded: one batch per start.
        assert_eq!(
            batch_seqs(&events, usize::MAX),
            vec![vec![0, 1], vec![2, 3, 4, 5, 6, 7]]
        );
        // A bound of about two events' weight: a batch ends once it reaches the bound, with
        // the event that reached it, as the write-behind controller's does.
        let one = events.iter().next().unwrap().approx_json_len();
        assert_eq!(
            batch_seqs(&events, 2 * one),
            vec![vec![0, 1], vec![2, 3], vec![4, 5], vec![6, 7]]
        );
        // A single event over the bound is a batch of its own; nothing is lost or repeated.
        let seqs: Vec<u64> = batch_seqs(&events, 1).into_iter().flatten().collect();
        assert_eq!(seqs, (0..8).collect::<Vec<_>>());
        assert_eq!(batch_seqs(&events, 1).len(), 8);
    }
}
