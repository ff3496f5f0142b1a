//! `compactions`, `diff` and `uncompact`: reviewing a session's compactions and undoing them
//! by branching.
//!
//! `compactions` and `diff` read with inspect semantics (never write). `uncompact` builds the
//! child with `session_fork::uncompact` and publishes it the way `fork` does; the parent is
//! never modified.

use session_core::Events;
use session_core::json::Value;
use session_fork::{Undo, uncompact_events};
use session_surface::{ViewSize, compactions_of, derive_event_message, fold_surface, view_diff};

use crate::args::{Global, Invocation};
use crate::cmd_read::{close_leaving, inspect_events, prefix_at, require_store};
use crate::cmd_write::publish_child;
use crate::error::{Error, Result};
use crate::json::{num, obj, opt_num, opt_str, seqs};
use crate::output::{Out, escape_controls};
use crate::progress::with_spinner;
use crate::render::{join_seqs, message_heading, message_summary};
use crate::store::{Store, Target, resolve};

/// Characters of a message shown on one line of text output.
const SUMMARY_CHARS: usize = 100;

fn schema(name: &str) -> (&'static str, Value) {
    ("schema", Value::from(format!("sessionctl.{name}/1")))
}

/// `compactions SESSION`.
pub(crate) struct CompactionsArgs {
    /// The SESSION operand.
    pub(crate) session: String,
}

/// `diff SESSION --from SEQ --to SEQ`.
pub(crate) struct DiffArgs {
    /// The SESSION operand.
    pub(crate) session: String,
    /// The earlier point (inclusive seq).
    pub(crate) from: u64,
    /// The later point (inclusive seq).
    pub(crate) to: u64,
}

/// `uncompact SESSION (--compaction SEQ | --all) --id CHILD`.
pub(crate) struct UncompactArgs {
    /// The SESSION operand.
    pub(crate) session: String,
    /// The replaces to undo.
    pub(crate) undo: Undo,
    /// The child's id.
    pub(crate) child: String,
}

impl CompactionsArgs {
    /// From the hand-written parser's invocation.
    pub(crate) fn from_invocation(inv: &Invocation) -> CompactionsArgs {
        CompactionsArgs {
            session: inv.operand(0).to_owned(),
        }
    }
}

impl DiffArgs {
    /// From the hand-written parser's invocation (`--from` and `--to` are required).
    pub(crate) fn from_invocation(inv: &Invocation) -> Result<DiffArgs> {
        let required = |name: &str| {
            inv.seq_option(name)?
                .ok_or_else(|| Error::usage(format!("diff needs {name} SEQ")))
        };
        Ok(DiffArgs {
            session: inv.operand(0).to_owned(),
            from: required("--from")?,
            to: required("--to")?,
        })
    }
}

impl UncompactArgs {
    /// From the hand-written parser's invocation (exactly one of `--compaction` and `--all`,
    /// and `--id`).
    pub(crate) fn from_invocation(inv: &Invocation) -> Result<UncompactArgs> {
        let undo = match (inv.seq_option("--compaction")?, inv.flag("--all")) {
            (Some(seq), false) => Undo::Seqs(vec![seq]),
            (None, true) => Undo::All,
            _ => {
                return Err(Error::usage(
                    "uncompact needs exactly one of --compaction SEQ and --all",
                ));
            }
        };
        let child = inv
            .value("--id")
            .ok_or_else(|| Error::usage("uncompact needs --id CHILD"))?
            .to_owned();
        Ok(UncompactArgs {
            session: inv.operand(0).to_owned(),
            undo,
            child,
        })
    }
}

fn open(global: &Global, operand: &str, read_only: bool) -> Result<(Target, Store)> {
    let target = resolve(operand, global, read_only)?;
    require_store(&target.at)?;
    let store = Store::for_target(&target)?;
    Ok((target, store))
}

fn not_folding(id: &str, e: &dyn std::fmt::Display) -> Error {
    Error::failed(
        format!("the surface of session \"{id}\" does not fold: {e}"),
        None,
    )
}

use session_web::view_size_json as size_json;

fn size_text(size: ViewSize) -> String {
    format!(
        "{} message{}, {} chars (~{} tokens)",
        size.messages,
        if size.messages == 1 { "" } else { "s" },
        size.chars,
        size.approx_tokens
    )
}

use session_web::compaction_json;

/// `compactions`.
pub(crate) fn compactions(global: &Global, args: &CompactionsArgs, out: &mut Out) -> Result<()> {
    let (target, store) = open(global, &args.session, true)?;
    // The inspection built the session: its transcript holds every replacement, so the
    // history needs no second fold of the log.
    let id = target.id.clone();
    let detailed = with_spinner(format!("reading {id}"), || {
        store.block_on(store.persistence.inspect_detailed(&id, None))
    })
    .map_err(|e| store.err(e, target.file.as_deref()))?;
    let list = compactions_of(&detailed.transcript);
    if global.json {
        let doc = obj([
            schema("compactions"),
            ("id", Value::from(target.id.as_str())),
            ("count", num(list.len() as u64)),
            (
                "compactions",
                Value::array(list.iter().map(compaction_json)),
            ),
        ]);
        out.line(&doc.to_json())?;
    } else {
        let s = out.style;
        out.line(&s.bold(&format!(
            "{} compaction{} in {}",
            list.len(),
            if list.len() == 1 { "" } else { "s" },
            escape_controls(&target.id)
        )))?;
        for (i, c) in list.iter().enumerate() {
            out.line("")?;
            out.line(&format!(
                "{} {} replaced {}..{}: {} node{} ({} original event{})",
                s.bold(&format!("[{}]", i + 1)),
                s.dim(&format!("seq {} · {} ·", c.seq, c.event_type)),
                c.start,
                c.end,
                c.shadowed.len(),
                if c.shadowed.len() == 1 { "" } else { "s" },
                c.resolved.len(),
                if c.resolved.len() == 1 { "" } else { "s" },
            ))?;
            out.line(&format!("    before: {}", size_text(c.before)))?;
            out.line(&format!("    after:  {}", size_text(c.after)))?;
            if let Some(m) = &c.message {
                out.line(&format!(
                    "    {}: {}",
                    s.cyan(&message_heading(m)),
                    message_summary(m, SUMMARY_CHARS)
                ))?;
            }
            match c.covered_by {
                Some(by) => out.line(&s.yellow(&format!("    covered by seq {by}")))?,
                None => out.line("    in the current view")?,
            }
        }
    }
    close_leaving(store, &target.id, (detailed, list))
}

/// The surface nodes after `events`.
fn nodes_at(events: &Events, id: &str) -> Result<Vec<u64>> {
    Ok(fold_surface(events.iter())
        .map_err(|e| not_folding(id, &e))?
        .nodes)
}

fn message_at(events: &Events, seq: u64) -> Option<Value> {
    events
        .get(usize::try_from(seq).ok()?)
        .and_then(derive_event_message)
        .cloned()
}

/// A message's heading and first characters, or `(no message)`.
fn one_line(message: Option<&Value>) -> String {
    message.map_or_else(
        || "(no message)".into(),
        |m| {
            format!(
                "{}: {}",
                message_heading(m),
                message_summary(m, SUMMARY_CHARS)
            )
        },
    )
}

/// `diff`.
pub(crate) fn diff(global: &Global, args: &DiffArgs, out: &mut Out) -> Result<()> {
    if args.from > args.to {
        return Err(Error::usage(format!(
            "--from {} is after --to {}",
            args.from, args.to
        )));
    }
    let (target, store) = open(global, &args.session, true)?;
    let (_, events) = inspect_events(&store, &target)?;
    let to_events = prefix_at(&events, Some(args.to), &target.id)?;
    let diff = view_diff(&to_events, args.from).map_err(|e| not_folding(&target.id, &e))?;
    let (before, after) = (diff.before, diff.after);
    if global.json {
        let doc = obj([
            schema("diff"),
            ("id", Value::from(target.id.as_str())),
            ("from", num(args.from)),
            ("to", num(args.to)),
            ("before", size_json(before)),
            ("after", size_json(after)),
            (
                "left",
                Value::array(diff.left.iter().map(|l| {
                    obj([
                        ("seq", num(l.seq)),
                        ("message", message_at(&events, l.seq).unwrap_or(Value::Null)),
                        ("replacedBy", opt_num(l.replaced_by)),
                    ])
                })),
            ),
            (
                "entered",
                Value::array(diff.entered.iter().map(|e| {
                    obj([
                        ("seq", num(e.seq)),
                        ("message", message_at(&events, e.seq).unwrap_or(Value::Null)),
                        ("replaces", seqs(&e.replaces)),
                    ])
                })),
            ),
        ]);
        out.line(&doc.to_json())?;
    } else {
        let s = out.style;
        out.line(&s.bold(&format!(
            "{}: seq {} -> seq {}",
            escape_controls(&target.id),
            args.from,
            args.to
        )))?;
        out.line(&format!("  before: {}", size_text(before)))?;
        out.line(&format!("  after:  {}", size_text(after)))?;
        out.line("")?;
        out.line(&s.bold(&format!("{} left the view", diff.left.len())))?;
        for l in &diff.left {
            let what = one_line(message_at(&events, l.seq).as_ref());
            let by = l
                .replaced_by
                .map(|b| format!(" (replaced by seq {b})"))
                .unwrap_or_default();
            out.line(&s.red(&format!("  - seq {} {what}{by}", l.seq)))?;
        }
        out.line("")?;
        out.line(&s.bold(&format!("{} entered the view", diff.entered.len())))?;
        for e in &diff.entered {
            let what = one_line(message_at(&events, e.seq).as_ref());
            let stands = if e.replaces.is_empty() {
                String::new()
            } else {
                format!(" (in place of seqs {})", join_seqs(&e.replaces))
            };
            out.line(&s.green(&format!("  + seq {} {what}{stands}", e.seq)))?;
        }
    }
    close_leaving(store, &target.id, (events, to_events, diff))
}

/// `uncompact`.
pub(crate) fn uncompact(global: &Global, args: &UncompactArgs, out: &mut Out) -> Result<()> {
    if args.child.is_empty() {
        return Err(Error::usage("--id must not be empty"));
    }
    let (target, store) = open(global, &args.session, false)?;
    let (meta, events) = inspect_events(&store, &target)?;
    if args.child == target.id || store.lookup(&args.child)?.is_some() {
        return Err(Error::Fork {
            error: session_fork::ForkError::already_exists(&args.child),
            hint: Some("choose another --id".into()),
        });
    }
    let clock = store.sessions.clock().clone();
    let parent_messages = nodes_at(&events, &target.id)?
        .iter()
        .filter(|&&n| message_at(&events, n).is_some())
        .count();
    // The child is built where the read ran (`Store::on_read_thread`), reusing the memory
    // the read's derived state freed.
    let (parent_id, parent_cwd, undo, child_id) = (
        target.id.clone(),
        meta.cwd.clone(),
        args.undo.clone(),
        args.child.clone(),
    );
    let child = store
        .on_read_thread("building the child", move || {
            uncompact_events(
                &parent_id,
                parent_cwd.as_deref(),
                events,
                &undo,
                &child_id,
                clock,
            )
        })?
        .map_err(|e| {
            let hint = match &e {
                session_fork::Error::Uncompact(_) => {
                    Some("`sessionctl compactions` lists the seqs of the replaces".into())
                }
                _ => None,
            };
            Error::failed(e.to_string(), hint)
        })?;
    let undone: Vec<u64> = match &args.undo {
        Undo::Seqs(s) => {
            let mut s = s.clone();
            s.sort_unstable();
            s.dedup();
            s
        }
        Undo::All => {
            let mut all: Vec<u64> = child
                .events()
                .iter()
                .rev()
                .find(|e| e.event_type() == session_fork::PROVENANCE_TYPE)
                .and_then(|e| {
                    e.data()
                        .get("undone")
                        .and_then(Value::as_array)
                        .map(|a| a.iter().filter_map(Value::as_u64).collect())
                })
                .unwrap_or_default();
            all.sort_unstable();
            all
        }
    };
    let child_messages = child.derive_messages().len();
    let seed_length = child.header().seed_length.unwrap_or(0);
    let (header, child_events, path) = publish_child(&store, child)?;
    if global.json {
        let doc = obj([
            schema("uncompact"),
            ("parent", Value::from(target.id.as_str())),
            ("undone", seqs(&undone)),
            (
                "child",
                obj([
                    ("id", Value::from(args.child.as_str())),
                    (
                        "file",
                        opt_str(path.as_ref().map(|p| p.display().to_string())),
                    ),
                    ("seedLength", num(seed_length)),
                    ("events", num(child_events)),
                    ("header", header.to_value()),
                ]),
            ),
            (
                "messages",
                obj([
                    ("parent", num(parent_messages as u64)),
                    ("child", num(child_messages as u64)),
                ]),
            ),
        ]);
        out.line(&doc.to_json())?;
    } else {
        let s = out.style;
        out.line(&s.green(&format!(
            "undid compaction{} {} of {} into {}",
            if undone.len() == 1 { "" } else { "s" },
            join_seqs(&undone),
            target.id,
            args.child
        )))?;
        out.line(&format!(
            "  the model reads {child_messages} messages (the parent: {parent_messages}); {child_events} events, inherits {seed_length}"
        ))?;
        if let Some(p) = &path {
            out.line(&format!("  file {}", p.display()))?;
        }
    }
    store.close()
}
