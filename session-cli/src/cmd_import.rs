//! `import codex|claude-code FILE... [--id ID]`: imports other harnesses' logs as sessions
//! and publishes them into the store the way `fork` publishes a child (`enter` + `announce`,
//! then a flush barrier), so every backend works.

use std::path::PathBuf;

use session_core::json::Value;
use session_import::{Format, ImportOptions, ImportReport, Imported, import_file};
use session_store::SharedSession;

use crate::args::Global;
use crate::error::{Error, Location, Result};
use crate::json::{num, obj};
use crate::output::Out;
use crate::store::{Store, StoreAt};

/// The options of `import`.
pub(crate) struct ImportArgs {
    /// The source format.
    pub(crate) format: Format,
    /// The files, in order.
    pub(crate) files: Vec<PathBuf>,
    /// The id of the (first) session instead of the derived one.
    pub(crate) id: Option<String>,
}

impl ImportArgs {
    /// From the operands: the format, then the files.
    pub(crate) fn from_operands(operands: &[String], id: Option<&str>) -> Result<ImportArgs> {
        let (format, files) = operands
            .split_first()
            .ok_or_else(|| Error::usage("`import` needs a format (codex or claude-code)"))?;
        let format = Format::from_name(format).ok_or_else(|| {
            Error::usage(format!(
                "unknown import format \"{format}\"; expected codex or claude-code"
            ))
        })?;
        if files.is_empty() {
            return Err(Error::usage("`import` needs at least one FILE"));
        }
        if id == Some("") {
            return Err(Error::usage("--id must not be empty"));
        }
        if id.is_some() && files.len() > 1 {
            return Err(Error::usage(
                "--id names one session; pass one FILE with it",
            ));
        }
        Ok(ImportArgs {
            format,
            files: files.iter().map(PathBuf::from).collect(),
            id: id.map(str::to_owned),
        })
    }
}

fn counts(m: &std::collections::BTreeMap<String, u64>) -> Value {
    Value::object(m.iter().map(|(k, v)| (k.as_str(), num(*v))))
}

fn report_json(id: &str, file: Option<String>, r: &ImportReport, events: u64) -> Value {
    let t = &r.tokens;
    obj([
        ("id", Value::from(id)),
        (
            "sources",
            Value::array(r.files.iter().map(|f| Value::from(f.display().to_string()))),
        ),
        ("file", file.map_or(Value::Null, Value::from)),
        ("events", num(events)),
        ("lines", num(r.lines)),
        ("mapped", counts(&r.mapped)),
        ("ignorable", counts(&r.ignorable)),
        (
            "closed",
            obj([
                ("calls", counts(&r.closed_calls)),
                ("turns", num(r.closed_turns)),
            ]),
        ),
        (
            "refused",
            Value::array(r.refused.iter().map(|x| {
                obj([
                    ("line", num(x.line)),
                    ("kind", Value::from(x.kind.as_str())),
                    ("reason", Value::from(x.reason.as_str())),
                ])
            })),
        ),
        (
            "cut",
            Value::array(r.cut.iter().map(|c| {
                obj([
                    ("file", Value::from(c.error.file().display().to_string())),
                    ("line", num(c.error.line().unwrap_or(0))),
                    ("offset", num(c.error.offset().unwrap_or(0))),
                    ("bytes", num(c.bytes)),
                    ("reason", Value::from(c.error.message())),
                ])
            })),
        ),
        ("turns", num(r.turns)),
        ("userMessages", num(r.user_messages)),
        ("assistantMessages", num(r.assistant_messages)),
        ("toolCalls", num(r.tool_calls)),
        ("toolResults", num(r.tool_results)),
        ("compactions", num(r.compactions)),
        ("rollbacks", num(r.rollbacks)),
        (
            "tokens",
            obj([
                ("input", num(t.input)),
                ("output", num(t.output)),
                ("cacheRead", num(t.cache_read)),
                ("cacheWrite", num(t.cache_write)),
                ("reasoning", num(t.reasoning)),
            ]),
        ),
    ])
}

fn human(out: &mut Out, id: &str, file: Option<&str>, r: &ImportReport, events: u64) -> Result<()> {
    let s = out.style;
    out.line(&s.green(&format!("imported {id} ({events} events)")))?;
    if let Some(f) = file {
        out.line(&format!("  file {f}"))?;
    }
    out.line(&format!(
        "  mapped {} record(s): {} turn(s), {} user / {} assistant message(s), {} tool call(s), {} result(s), {} compaction(s), {} rollback(s)",
        r.mapped_total(),
        r.turns,
        r.user_messages,
        r.assistant_messages,
        r.tool_calls,
        r.tool_results,
        r.compactions,
        r.rollbacks
    ))?;
    out.line(&format!(
        "  kept {} record(s) as ignorable{}",
        r.ignorable_total(),
        if r.ignorable.is_empty() {
            String::new()
        } else {
            format!(
                ": {}",
                r.ignorable
                    .iter()
                    .map(|(k, v)| format!("{k} {v}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    ))?;
    out.line(&format!(
        "  closed {} call(s) without a result{}, {} turn(s) as interrupted",
        r.closed_calls_total(),
        if r.closed_calls.is_empty() {
            String::new()
        } else {
            format!(
                " ({})",
                r.closed_calls
                    .iter()
                    .map(|(k, v)| format!("{k} {v}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        },
        r.closed_turns
    ))?;
    out.line(&format!("  refused {} record(s)", r.refused.len()))?;
    for x in &r.refused {
        out.line(&format!("    line {} ({}): {}", x.line, x.kind, x.reason))?;
    }
    if !r.cut.is_empty() {
        out.line(&s.red(&format!("  cut {} line(s)", r.cut.len())))?;
        for c in &r.cut {
            out.line(&format!("    {} ({} bytes)", c.error, c.bytes))?;
        }
    }
    let t = &r.tokens;
    out.line(&format!(
        "  tokens: input {}, output {}, cache read {}, cache write {}, reasoning {}",
        t.input, t.output, t.cache_read, t.cache_write, t.reasoning
    ))?;
    Ok(())
}

/// `import`.
pub(crate) fn import(args: &ImportArgs, global: &Global, out: &mut Out) -> Result<()> {
    let mut sessions: Vec<Imported> = Vec::new();
    for file in &args.files {
        let options = ImportOptions {
            id: args.id.clone(),
        };
        let imported = import_file(args.format, file, &options).map_err(|e| {
            Error::failed_at(
                format!("cannot import: {e}"),
                Some(format!("is it a {} file?", args.format.as_str())),
                Location {
                    file: Some(e.file().to_path_buf()),
                    line: e.line(),
                    offset: e.offset(),
                    ..Location::default()
                },
            )
        })?;
        for i in imported {
            if sessions.iter().any(|s| s.session.id() == i.session.id()) {
                continue;
            }
            sessions.push(i);
        }
    }
    let at = global.store();
    if let StoreAt::Jsonl { root, .. } = &at
        && !root.exists()
    {
        std::fs::create_dir_all(root).map_err(|e| Error::io("create", root, &e))?;
    }
    let store = Store::open(&at)?;
    for i in &sessions {
        if store.lookup(i.session.id())?.is_some() {
            return Err(Error::failed(
                format!("session \"{}\" already exists in the store", i.session.id()),
                Some("pass --id to import under another id, or import into another store".into()),
            ));
        }
    }
    let mut docs = Vec::new();
    for i in sessions {
        let id = i.session.id().to_string();
        let events = i.session.seq();
        let shared = SharedSession::new(i.session);
        store
            .sessions
            .enter(&shared)
            .map_err(|e| Error::failed(e.to_string(), None))?;
        store
            .sessions
            .announce(&shared)
            .map_err(|e| Error::failed(e.to_string(), None))?;
        store
            .block_on(store.sessions.flush(&shared))
            .map_err(|e| Error::failed(format!("writing {id} failed: {e}"), None))?;
        let header = shared.header();
        let file = store
            .persistence
            .locate(&header)
            .map(|l| l.path.display().to_string());
        if global.json {
            docs.push(report_json(&id, file, &i.report, events));
        } else {
            human(out, &id, file.as_deref(), &i.report, events)?;
        }
    }
    if global.json {
        let doc = obj([
            ("schema", Value::from("sessionctl.import/1")),
            ("format", Value::from(args.format.as_str())),
            ("sessions", Value::array(docs)),
        ]);
        out.line(&doc.to_json())?;
    }
    store.close()
}
