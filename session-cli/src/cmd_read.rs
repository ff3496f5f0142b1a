//! The read commands: `list`, `inspect`, `repair`, `messages`, `transcript`, `header`, `stats`.

use std::collections::HashMap;
use std::path::Path;

use session_core::json::Value;
use session_core::request::RequestAsOf;
use session_core::{Event, Events};
use session_persist::jsonl::scan_zstd_frames;
use session_persist::{Backend, Compression};
use session_surface::{Transcript, TranscriptEntry, derive_event_message, fold_surface};

use crate::args::Invocation;
use crate::error::{Error, Location, Result};
use crate::json::{float, num, obj, opt_num, opt_str, seqs, write_streamed};
use crate::output::{Out, bytes, escape_controls, table, truncate, utc};
use crate::progress::with_spinner;
use crate::render::{join_seqs, message_body, message_heading};
use crate::report;
use crate::store::{Store, StoreAt, Target, resolve};

/// Lines shown per message unless `--full`.
const MAX_MESSAGE_LINES: usize = 8;

fn schema(name: &str) -> (&'static str, Value) {
    ("schema", Value::from(format!("sessionctl.{name}/1")))
}

/// Writes one JSON document and a newline.
fn write_doc(out: &mut Out, doc: &Value) -> Result<()> {
    let mut text = doc.to_json();
    text.push('\n');
    std::io::Write::write_all(out.writer(), text.as_bytes())?;
    Ok(())
}

/// Opens the store of a SESSION operand.
pub(crate) fn open_target(
    inv: &Invocation,
    operand: &str,
    read_only: bool,
) -> Result<(Target, Store)> {
    let target = resolve(operand, &inv.global, read_only)?;
    require_store(&target.at)?;
    let store = Store::for_target(&target)?;
    Ok((target, store))
}

/// Refuses a store that does not exist (a missing root directory or database file); opening
/// one would create it.
pub(crate) fn require_store(at: &StoreAt) -> Result<()> {
    match at {
        StoreAt::Jsonl { root, .. } => require_root(root),
        StoreAt::Sqlite { path } if path.is_file() => Ok(()),
        StoreAt::Sqlite { path } if path.is_dir() => crate::store::check_database_path(path),
        // A server: connecting tells.
        StoreAt::Postgres { .. } => Ok(()),
        StoreAt::Sqlite { path } => Err(Error::failed_at(
            format!("store database {} does not exist", path.display()),
            Some(
                "pass --store sqlite:PATH naming an existing database (`append --create` and `convert` create one)"
                    .into(),
            ),
            Location {
                file: Some(path.clone()),
                ..Location::default()
            },
        )),
    }
}

/// Refuses a root that does not exist.
pub(crate) fn require_root(root: &Path) -> Result<()> {
    if root.is_dir() {
        return Ok(());
    }
    Err(Error::failed_at(
        format!("store root {} does not exist", root.display()),
        Some("pass --root DIR (default ./sessions), or a session directory or file path".into()),
        Location {
            file: Some(root.to_path_buf()),
            ..Location::default()
        },
    ))
}

/// Loads the events `load` would return, without writing (inspect semantics).
pub(crate) fn inspect_events(
    store: &Store,
    target: &Target,
) -> Result<(session_core::SessionHeader, Events)> {
    let id = target.id.clone();
    let inspection = with_spinner(format!("reading {id}"), || {
        store.block_on(store.persistence.inspect(&id, None))
    })
    .map_err(|e| store.err(e, target.file.as_deref()))?;
    // The caller keeps the events only: the session the read built (its surface, messages
    // and transcript) is not kept for reuse.
    store.persistence.discard_prepared(&id);
    Ok((inspection.meta, inspection.events))
}

/// Ends a command that has written all of its output: closes the store (which syncs and
/// releases what the command wrote, as [`Store::close`] always does), and leaves `loaded` (what
/// the command read and derived) and the session its read prepared to the operating system.
///
/// The process exits right after the command, and the operating system takes a large session's
/// memory back at once; freeing it event by event first would only delay the exit (about 50 ms
/// on one core for the 1.3M-event benchmark session). Closing the store would drop the prepared
/// session, so it is taken out first.
pub(crate) fn close_leaving<T>(store: Store, id: &str, loaded: T) -> Result<()> {
    let prepared = store.persistence.take_prepared(id);
    let closed = store.close();
    std::mem::forget((prepared, loaded));
    closed
}

/// `events[..=at]`, or all of them.
pub(crate) fn prefix_at(events: &Events, at: Option<u64>, id: &str) -> Result<Events> {
    let Some(at) = at else {
        return Ok(events.clone());
    };
    if at >= events.len() as u64 {
        let last = events.last().map_or_else(
            || "the log is empty".to_owned(),
            |e| format!("last seq {}", e.seq()),
        );
        return Err(Error::failed_at(
            format!("seq {at} does not exist in session \"{id}\" ({last})"),
            Some("pass --at with a seq of the log; `sessionctl inspect` shows its length".into()),
            Location {
                seq: Some(at),
                ..Location::default()
            },
        ));
    }
    Ok(events.prefix(at as usize + 1))
}

// ---- list ----

/// `list`: every stored session, each with its error when it cannot be read; one damaged
/// session never fails the listing (a layout error of the root does).
pub(crate) fn list(inv: &Invocation, out: &mut Out) -> Result<()> {
    let count = inv.flag("--count");
    let at = inv.global.store();
    require_store(&at)?;
    let store = Store::open(&at)?;
    // From the headers alone, unless `--count` asks for every log to be read.
    let rows = with_spinner("listing sessions".to_owned(), || {
        store
            .block_on(session_web::list_rows(&store.persistence, count))
            .map_err(|e| store.err(e, None))
    })?;
    if inv.global.json {
        let sessions = Value::array(rows.iter().map(session_web::ListRow::to_json));
        let doc = obj([
            schema("list"),
            ("store", Value::from(at.spec())),
            ("root", opt_str(at.path().map(|p| p.display().to_string()))),
            (
                "compression",
                opt_str(at.compression().map(Compression::as_str)),
            ),
            ("counted", Value::from(count)),
            ("sessions", sessions),
        ]);
        write_doc(out, &doc)?;
    } else if rows.is_empty() {
        out.line(&match &at {
            StoreAt::Jsonl { root, .. } => format!("no sessions under {}", root.display()),
            StoreAt::Sqlite { .. } | StoreAt::Postgres { .. } => {
                format!("no sessions in {}", at.spec())
            }
        })?;
    } else {
        let s = out.style;
        // Without `--count` the events column is left out (nothing was counted).
        let keep = |mut row: Vec<String>| {
            if !count {
                row.remove(3);
            }
            row
        };
        let mut table_rows = vec![keep(vec![
            "id".to_owned(),
            "created (UTC)".to_owned(),
            "cwd".to_owned(),
            "events".to_owned(),
            "lineage".to_owned(),
        ])];
        let mut unreadable = Vec::new();
        for r in &rows {
            let events = match (&r.events, &r.error) {
                (Some(n), _) if r.torn => s.yellow(&format!("{n} +torn")),
                (Some(n), _) => n.to_string(),
                (None, Some(e)) => s.red(&format!("error: {}", truncate(e, 40))),
                (None, None) => "-".to_owned(),
            };
            let Some(m) = &r.meta else {
                unreadable.push(r);
                continue;
            };
            let lineage = match (&m.parent_session, m.seed_length) {
                (Some(p), Some(n)) => format!("← {} @{n}", escape_controls(p)),
                (Some(p), None) => format!("← {}", escape_controls(p)),
                _ => String::new(),
            };
            table_rows.push(keep(vec![
                escape_controls(&m.id).into_owned(),
                utc(m.created_at),
                truncate(&escape_controls(m.cwd.as_deref().unwrap_or("-")), 40),
                events,
                lineage,
            ]));
        }
        if table_rows.len() > 1 {
            let right: &[usize] = if count { &[3] } else { &[] };
            for line in table(&table_rows, right, s, "") {
                out.line(&line)?;
            }
        }
        // Sessions whose header cannot be read: the file and the whole error.
        for r in unreadable {
            out.line(&s.red(&format!(
                "error: {}: {}",
                r.file.as_deref().unwrap_or("-"),
                r.error.as_deref().unwrap_or_default()
            )))?;
            if let Some(cause) = &r.cause {
                out.line(&format!("  cause: {cause}"))?;
            }
        }
    }
    store.close()
}

// ---- inspect / repair ----

/// `inspect`.
pub(crate) fn inspect(inv: &Invocation, out: &mut Out) -> Result<()> {
    let (target, store) = open_target(inv, inv.operand(0), true)?;
    let report = report::build(&store, &target, inv.flag("--children"))?;
    if inv.global.json {
        let mut fields = vec![schema("inspect")];
        fields.extend(report.to_json_fields());
        write_doc(out, &obj(fields))?;
    } else {
        report.write_human(out)?;
    }
    out.flush()?;
    close_leaving(store, &target.id, report)
}

/// `repair`.
pub(crate) fn repair(inv: &Invocation, out: &mut Out) -> Result<()> {
    let (target, store) = open_target(inv, inv.operand(0), inv.flag("--dry-run"))?;
    let report = report::build(&store, &target, false)?;
    let dry_run = inv.flag("--dry-run");
    let needed = report.torn.is_some() || !report.closers.is_empty();
    let mut after: Option<(usize, Option<u64>)> = None;
    if needed && !dry_run {
        let id = target.id.clone();
        let loaded = with_spinner(format!("repairing {id}"), || {
            store.block_on(store.persistence.load(&id))
        })
        .map_err(|e| store.err(e, report.file.as_deref()))?;
        let size = report
            .file
            .as_deref()
            .and_then(|f| std::fs::metadata(f).ok())
            .map(|m| m.len());
        after = Some((loaded.events.len(), size));
    }
    if inv.global.json {
        let mut fields = vec![schema("repair")];
        fields.extend(report.to_json_fields());
        fields.push(("dryRun", Value::from(dry_run)));
        fields.push(("needed", Value::from(needed)));
        fields.push(("committed", Value::from(after.is_some())));
        fields.push(("eventCountAfter", opt_num(after.map(|(n, _)| n as u64))));
        fields.push(("fileBytesAfter", opt_num(after.and_then(|(_, b)| b))));
        write_doc(out, &obj(fields))?;
    } else {
        report.write_human(out)?;
        out.line("")?;
        let s = out.style;
        let line = match (needed, dry_run, after) {
            (false, _, _) => s.green("nothing to repair: no torn tail and no open turn"),
            (true, true, _) => s.yellow("dry run: nothing was written"),
            (true, false, Some((n, size))) => {
                let mut what = Vec::new();
                if let Some(t) = &report.torn {
                    if let (Some(f), Some(c)) = (t.file_bytes, t.truncate_to) {
                        what.push(format!("cut the torn tail ({} bytes)", f.saturating_sub(c)));
                    } else {
                        what.push("cut the torn tail".to_owned());
                    }
                }
                if !report.closers.is_empty() {
                    what.push(format!(
                        "appended {} closer{} (seq {}..{})",
                        report.closers.len(),
                        if report.closers.len() == 1 { "" } else { "s" },
                        report.closers[0].seq(),
                        report.closers[report.closers.len() - 1].seq()
                    ));
                }
                s.green(&format!(
                    "repaired: {}; the log now holds {n} events{}",
                    what.join(", "),
                    size.map(|b| format!(" ({})", bytes(b))).unwrap_or_default()
                ))
            }
            (true, false, None) => String::new(),
        };
        out.line(&line)?;
    }
    close_leaving(store, &target.id, report)
}

// ---- messages ----

/// `messages`.
pub(crate) fn messages(inv: &Invocation, out: &mut Out) -> Result<()> {
    let at = inv.seq_option("--at")?;
    let (target, store) = open_target(inv, inv.operand(0), true)?;
    let (_, all) = inspect_events(&store, &target)?;
    let events = prefix_at(&all, at, &target.id)?;
    let fold = fold_surface(events.iter()).map_err(|e| {
        Error::failed(
            format!(
                "the surface of session \"{}\" does not fold: {e}",
                target.id
            ),
            None,
        )
    })?;
    let items = fold.nodes.iter().filter_map(|n| {
        let event = events.get(*n as usize)?;
        derive_event_message(event).map(|m| (event.seq(), m.clone()))
    });
    let count = fold
        .nodes
        .iter()
        .filter_map(|n| events.get(*n as usize))
        .filter(|e| derive_event_message(e).is_some())
        .count();
    if inv.global.json {
        let head = obj([
            schema("messages"),
            ("id", Value::from(target.id.as_str())),
            ("at", opt_num(at)),
            ("count", num(count as u64)),
        ]);
        write_streamed(out.writer(), &head, "messages", items, |(seq, m)| {
            obj([("seq", num(seq)), ("message", m)])
        })?;
    } else {
        let s = out.style;
        let as_of = at.map(|a| format!(" as of seq {a}")).unwrap_or_default();
        out.line(&s.bold(&format!(
            "{count} model-visible message{} in {}{as_of}",
            if count == 1 { "" } else { "s" },
            escape_controls(&target.id)
        )))?;
        let max = (!inv.flag("--full")).then_some(MAX_MESSAGE_LINES);
        let width = out.width.saturating_sub(4);
        for (i, (seq, m)) in items.enumerate() {
            out.line("")?;
            out.line(&format!(
                "{} {} {}",
                s.bold(&format!("[{}]", i + 1)),
                s.dim(&format!("seq {seq} ·")),
                s.cyan(&message_heading(&m))
            ))?;
            for line in message_body(&m, width, max, s) {
                out.line(format!("    {line}").trim_end())?;
            }
        }
    }
    close_leaving(store, &target.id, (all, events, fold))
}

// ---- transcript ----

/// `transcript`.
pub(crate) fn transcript(inv: &Invocation, out: &mut Out) -> Result<()> {
    let (target, store) = open_target(inv, inv.operand(0), true)?;
    let (_, events) = inspect_events(&store, &target)?;
    let transcript = Transcript::from_events(events.iter()).map_err(|e| {
        Error::failed(
            format!(
                "the surface of session \"{}\" does not fold: {e}",
                target.id
            ),
            None,
        )
    })?;
    let mut shadowed_by: HashMap<u64, u64> = HashMap::new();
    for entry in transcript.iter() {
        if let TranscriptEntry::Replacement {
            event,
            shadowed_seqs,
            ..
        } = entry
        {
            for s in shadowed_seqs.iter() {
                shadowed_by.insert(*s, event.seq());
            }
        }
    }
    if inv.global.json {
        let head = obj([
            schema("transcript"),
            ("id", Value::from(target.id.as_str())),
            ("count", num(transcript.len() as u64)),
        ]);
        write_streamed(out.writer(), &head, "entries", transcript.iter(), |entry| {
            transcript_json(entry, &shadowed_by)
        })?;
    } else {
        let s = out.style;
        out.line(&s.bold(&format!(
            "transcript of {}: {} entr{}",
            escape_controls(&target.id),
            transcript.len(),
            if transcript.len() == 1 { "y" } else { "ies" }
        )))?;
        let max = (!inv.flag("--full")).then_some(MAX_MESSAGE_LINES);
        let width = out.width.saturating_sub(4);
        for entry in transcript.iter() {
            out.line("")?;
            match entry {
                TranscriptEntry::Replacement {
                    event,
                    start,
                    end,
                    shadowed_seqs,
                    message,
                    ..
                } => {
                    out.line(&s.magenta(&format!(
                        "── seq {} · {} replaced the surface range {start}..{end} (seqs {}) ──",
                        event.seq(),
                        event.event_type(),
                        join_seqs(shadowed_seqs)
                    )))?;
                    if let Some(m) = message {
                        out.line(&format!("    {}", s.cyan(&message_heading(m))))?;
                        for line in message_body(m, width, max, s) {
                            out.line(format!("    {line}").trim_end())?;
                        }
                    }
                }
                other => {
                    let seq = other.seq();
                    let note = shadowed_by
                        .get(&seq)
                        .map(|r| s.magenta(&format!("  (compacted by seq {r})")))
                        .unwrap_or_default();
                    let heading = other.message().map_or_else(
                        || format!("{} (no message)", other.event().event_type()),
                        message_heading,
                    );
                    out.line(&format!(
                        "{} {}{note}",
                        s.dim(&format!("seq {seq} ·")),
                        s.cyan(&heading)
                    ))?;
                    if let Some(m) = other.message() {
                        for line in message_body(m, width, max, s) {
                            out.line(format!("    {line}").trim_end())?;
                        }
                    }
                }
            }
        }
    }
    close_leaving(store, &target.id, (events, transcript))
}

fn transcript_json(entry: &TranscriptEntry, shadowed_by: &HashMap<u64, u64>) -> Value {
    match entry {
        TranscriptEntry::Replacement {
            event,
            start,
            end,
            shadowed_seqs,
            message,
            ..
        } => obj([
            ("kind", Value::from("replacement")),
            ("seq", num(event.seq())),
            ("type", Value::from(event.event_type())),
            ("start", num(*start)),
            ("end", num(*end)),
            ("shadowedSeqs", seqs(shadowed_seqs)),
            ("message", message.clone().unwrap_or_default()),
        ]),
        other => obj([
            ("kind", Value::from("message")),
            ("seq", num(other.seq())),
            ("type", Value::from(other.event().event_type())),
            (
                "shadowedBy",
                opt_num(shadowed_by.get(&other.seq()).copied()),
            ),
            ("message", other.message().cloned().unwrap_or_default()),
        ]),
    }
}

// ---- header ----

/// `header`.
pub(crate) fn header(inv: &Invocation, out: &mut Out) -> Result<()> {
    let at = inv.seq_option("--at")?;
    let (target, store) = open_target(inv, inv.operand(0), true)?;
    let (_, all) = inspect_events(&store, &target)?;
    let events = prefix_at(&all, at, &target.id)?;
    let request = RequestAsOf::of(&events);
    if inv.global.json {
        let doc = obj([
            schema("header"),
            ("id", Value::from(target.id.as_str())),
            ("at", opt_num(at)),
        ]
        .into_iter()
        .chain(request.json_members()));
        write_doc(out, &doc)?;
    } else {
        let s = out.style;
        let as_of = at.map(|a| format!(" as of seq {a}")).unwrap_or_default();
        let Some(h) = request.header else {
            out.line(&format!(
                "no request header in {}{as_of} (no request/header event)",
                escape_controls(&target.id)
            ))?;
            return close_leaving(store, &target.id, (all, events));
        };
        let seq = request.header_event.as_ref().map_or(0, Event::seq);
        out.line(&s.bold(&format!(
            "request header of {}{as_of}: set at seq {seq} ({})",
            escape_controls(&target.id),
            request.reason.as_deref().unwrap_or("no reason")
        )))?;
        let mut rows: Vec<Vec<String>> = Vec::new();
        if let Some(config) = h.get("config").and_then(Value::as_object) {
            for (k, v) in config.iter() {
                rows.push(vec![k.to_owned(), scalar(v)]);
            }
        }
        if let Some(a) = h.get("adapterDefaults") {
            rows.push(vec!["adapterDefaults".into(), a.to_json()]);
        }
        if let Some(tools) = h.get("tools").and_then(Value::as_array) {
            let names: Vec<String> = tools
                .as_slice()
                .iter()
                .map(|t| {
                    t.get("name")
                        .and_then(Value::as_str)
                        .unwrap_or("?")
                        .to_owned()
                })
                .collect();
            rows.push(vec![
                "tools".into(),
                format!("{} ({})", names.len(), names.join(", ")),
            ]);
        }
        if let Some(system) = h.get("system").and_then(Value::as_str) {
            let flat: String = system.split_whitespace().collect::<Vec<_>>().join(" ");
            rows.push(vec![
                "system".into(),
                format!(
                    "{} ({} chars)",
                    truncate(&flat, out.width.saturating_sub(30)),
                    system.chars().count()
                ),
            ]);
        }
        if let Some(ctx) = &request.context_event {
            let d = ctx.data();
            let mut parts = Vec::new();
            for k in ["provider", "model", "contextWindow"] {
                if let Some(v) = d.get(k) {
                    parts.push(format!("{k} {}", scalar(v)));
                }
            }
            rows.push(vec![
                "context".into(),
                format!(
                    "{} (request/context at seq {})",
                    parts.join(", "),
                    ctx.seq()
                ),
            ]);
        }
        let rows: Vec<Vec<String>> = rows
            .into_iter()
            .map(|mut r| {
                r[0] = s.bold(&r[0]);
                r
            })
            .collect();
        for line in table(&rows, &[], crate::output::Style::new(false), "  ") {
            out.line(&line)?;
        }
    }
    close_leaving(store, &target.id, (all, events))
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.to_string(),
        other => other.to_json(),
    }
}

// ---- stats ----

/// Adds each event's count and JSON bytes (its line, newline included) to its type's row.
fn tally_events(tally: &mut crate::report::TypeTally<(u64, u64)>, events: &[Event]) {
    let mut buf = String::new();
    for e in events {
        buf.clear();
        e.write_json(&mut buf);
        let row = tally.entry(e.event_type());
        row.0 += 1;
        row.1 += buf.len() as u64 + 1;
    }
}

/// What `stats` reads from a JSONL log streamed a batch at a time.
struct StreamedStats {
    tally: crate::report::TypeTally<(u64, u64)>,
    events: usize,
    records: u64,
    plaintext: u64,
}

/// A JSONL log's per-type tally, record count and plaintext length, read a batch of events at
/// a time (the log is never held whole); `None` when it does not read cleanly to its end.
fn stream_stats(file: &Path) -> Option<StreamedStats> {
    let mut stream = session_persist::LogStream::open(file).ok()?;
    let mut tally = crate::report::TypeTally::<(u64, u64)>::default();
    let mut events = 0;
    while let Some(batch) = stream.next_batch(4096).ok()? {
        tally_events(&mut tally, &batch);
        events += batch.len();
    }
    Some(StreamedStats {
        tally,
        events,
        records: stream.records(),
        plaintext: stream.plaintext_bytes(),
    })
}

/// `stats`.
pub(crate) fn stats(inv: &Invocation, out: &mut Out) -> Result<()> {
    let (target, store) = open_target(inv, inv.operand(0), true)?;
    let id = target.id.clone();
    // A JSONL log that reads cleanly to its end is streamed; any other is read whole (its
    // torn tail reported).
    let streamed = match (store.jsonl(), target.file.as_deref()) {
        (Some(_), Some(file)) => with_spinner(format!("reading {id}"), || stream_stats(file)),
        _ => None,
    };
    let mut rows: Option<session_persist_sqlite::RowStats> = None;
    let (file, event_count, torn, tally, plaintext, records) = if let Some(s) = streamed {
        (
            target.file.clone(),
            s.events,
            false,
            s.tally,
            s.plaintext,
            s.records,
        )
    } else {
        let stored = with_spinner(format!("reading {id}"), || {
            store.block_on(store.backend.load_stored(&id))
        })
        .map_err(|e| store.err(e, target.file.as_deref()))?
        .ok_or_else(|| {
            store.err(
                session_persist::Error::NotFound { id: id.clone() },
                target.file.as_deref(),
            )
        })?;
        let file = target.file.clone().or_else(|| store.log_file(&stored.meta));
        let mut tally = crate::report::TypeTally::<(u64, u64)>::default();
        tally_events(&mut tally, &stored.events);
        let (plaintext, records) = if let Some(sqlite) = store.sqlite() {
            let stats = store
                .block_on(sqlite.row_stats(&id))
                .map_err(|e| store.err(e.into(), None))?
                .unwrap_or_default();
            rows = Some(stats);
            (stats.text_bytes, stats.rows)
        } else if store.jsonl().is_none() {
            // A database server: no file and no row sizes; the events are what is known.
            (0, stored.events.len() as u64)
        } else {
            let raw = with_spinner(format!("reading the logical text of {id}"), || {
                store.block_on(store.persistence.read_raw(&id, None))
            })
            .map_err(|e| store.err(e, file.as_deref()))?;
            let plaintext = raw.as_ref().map_or(0, |r| r.content.len() as u64);
            let records = raw.as_ref().map_or(0, |r| {
                r.content
                    .split('\n')
                    .filter(|l| !l.is_empty())
                    .count()
                    .saturating_sub(1)
            });
            (plaintext, records as u64)
        };
        let event_count = stored.events.len();
        (
            file,
            event_count,
            stored.torn.is_some(),
            tally,
            plaintext,
            records,
        )
    };
    let (file_bytes, frames) = if let Some(r) = &rows {
        (r.data_bytes + r.column_bytes, None)
    } else {
        match file.as_deref() {
            Some(f) if store.jsonl().is_some() => {
                with_spinner(format!("reading the file of {id}"), || {
                    let data = std::fs::read(f).map_err(|e| Error::io("read", f, &e))?;
                    let frames = (target.at.compression() == Some(Compression::Zstd))
                        .then(|| scan_zstd_frames(&data, None).ok())
                        .flatten()
                        .map(|scan| (scan.frames.len(), scan.torn_start.is_some()));
                    Ok::<_, Error>((data.len() as u64, frames))
                })?
            }
            _ => (0, None),
        }
    };
    let mut per_type: Vec<(String, u64, u64)> = tally
        .into_rows()
        .into_iter()
        .map(|(t, (n, b))| (t, n, b))
        .collect();
    per_type.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)));
    let event_bytes: u64 = per_type.iter().map(|t| t.2).sum();
    let ratio = if file_bytes > 0 {
        plaintext as f64 / file_bytes as f64
    } else {
        0.0
    };
    if inv.global.json {
        let doc = obj([
            schema("stats"),
            ("id", Value::from(id.as_str())),
            (
                "file",
                opt_str(file.as_ref().map(|f| f.display().to_string())),
            ),
            ("store", Value::from(target.at.spec())),
            ("compression", Value::from(target.at.encoding())),
            ("fileBytes", num(file_bytes)),
            ("plaintextBytes", num(plaintext)),
            ("compressionRatio", float((ratio * 1000.0).round() / 1000.0)),
            ("frames", opt_num(frames.map(|f| f.0 as u64))),
            ("records", num(records)),
            ("events", num(event_count as u64)),
            ("eventBytes", num(event_bytes)),
            ("tornTail", Value::from(torn)),
            (
                "rows",
                rows.map_or(Value::Null, |r| {
                    obj([
                        ("rows", num(r.rows)),
                        ("packedRows", num(r.packed_rows)),
                        ("compressedRows", num(r.compressed_rows)),
                        ("dataBytes", num(r.data_bytes)),
                        ("textBytes", num(r.text_bytes)),
                        ("columnBytes", num(r.column_bytes)),
                    ])
                }),
            ),
            (
                "byType",
                Value::array(per_type.iter().map(|(t, n, b)| {
                    obj([
                        ("type", Value::from(t.as_str())),
                        ("count", num(*n)),
                        ("bytes", num(*b)),
                    ])
                })),
            ),
        ]);
        write_doc(out, &doc)?;
    } else {
        let s = out.style;
        // A database server reports no sizes: say so rather than print "0 B" and "0.00x".
        let sizes_known = rows.is_some() || store.jsonl().is_some();
        let na = || "n/a (the server reports no sizes)".to_owned();
        let mut rows = vec![
            vec![s.bold("session"), escape_controls(&id).into_owned()],
            vec![
                s.bold(if rows.is_some() { "store" } else { "file" }),
                if rows.is_some() {
                    target.at.spec()
                } else {
                    file.as_ref()
                        .map_or_else(|| "-".into(), |f| f.display().to_string())
                },
            ],
            match &rows {
                None if !sizes_known => vec![s.bold("on disk"), na()],
                None => vec![
                    s.bold("on disk"),
                    format!(
                        "{} ({file_bytes} bytes, {})",
                        bytes(file_bytes),
                        target.at.encoding()
                    ),
                ],
                Some(r) => vec![
                    s.bold("in rows"),
                    format!(
                        "{} ({file_bytes} bytes in {} rows: {} packed, {} compressed)",
                        bytes(file_bytes),
                        r.rows,
                        r.packed_rows,
                        r.compressed_rows
                    ),
                ],
            },
            vec![
                s.bold("plaintext"),
                if !sizes_known {
                    na()
                } else if rows.is_some() {
                    format!(
                        "{} ({plaintext} bytes of row data as JSON)",
                        bytes(plaintext)
                    )
                } else {
                    format!(
                        "{} ({plaintext} bytes, {records} records)",
                        bytes(plaintext)
                    )
                },
            ],
            vec![
                s.bold("ratio"),
                if sizes_known {
                    format!("{ratio:.2}x")
                } else {
                    "n/a".to_owned()
                },
            ],
            vec![
                s.bold("events"),
                format!(
                    "{} ({} as unpacked JSON lines){}",
                    event_count,
                    bytes(event_bytes),
                    if torn { ", torn tail" } else { "" }
                ),
            ],
        ];
        if let Some((n, torn)) = frames {
            rows.push(vec![
                s.bold("frames"),
                format!("{n} complete{}", if torn { " + 1 torn" } else { "" }),
            ]);
        }
        for line in table(&rows, &[], crate::output::Style::new(false), "") {
            out.line(&line)?;
        }
        out.line("")?;
        let mut rows = vec![vec![
            "type".to_owned(),
            "count".to_owned(),
            "bytes".to_owned(),
            "share".to_owned(),
        ]];
        for (t, n, b) in &per_type {
            let share = if event_bytes > 0 {
                *b as f64 * 100.0 / event_bytes as f64
            } else {
                0.0
            };
            rows.push(vec![
                t.clone(),
                n.to_string(),
                bytes(*b),
                format!("{share:.1}%"),
            ]);
        }
        for line in table(&rows, &[1, 2, 3], s, "  ") {
            out.line(&line)?;
        }
    }
    store.close()
}
