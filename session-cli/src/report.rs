//! The inspect report: what a session holds and what `load` would do to it, computed without
//! changing anything.

use std::borrow::Borrow;
use std::fmt::Write as _;
use std::path::PathBuf;

use session_core::json::Value;
use session_core::{Event, Events, SessionHeader};
use session_persist::{Compression, TornMarker};
use session_surface::Replacement;

use crate::error::Result;
use crate::json::{num, obj, opt_num, opt_str, seqs};
use crate::output::{Out, bytes, escape_controls, table, utc};
use crate::progress::with_spinner;
use crate::render::{event_detail, join_seqs};
use crate::store::{Store, StoreAt, Target};

/// A torn tail found by the scanner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Torn {
    /// The file length.
    pub(crate) file_bytes: Option<u64>,
    /// What `load` truncates the file to.
    pub(crate) truncate_to: Option<u64>,
    /// Complete records recovered from a torn zstd frame (re-appended by `load`).
    pub(crate) recovered: usize,
}

/// One turn of the log.
#[derive(Debug, Clone)]
#[allow(clippy::struct_field_names)] // `turn` is the reference's name for the turn number
pub(crate) struct Turn {
    /// `data.turn`.
    pub(crate) turn: Value,
    /// Seq of its `turn/start`.
    pub(crate) start: u64,
    /// Seq of its `turn/end`, if closed.
    pub(crate) end: Option<u64>,
    /// `data.reason.kind` of its `turn/end`.
    pub(crate) reason: Option<String>,
}

/// Everything `inspect` reports.
pub(crate) struct Report {
    /// The session id.
    pub(crate) id: String,
    /// The log file.
    pub(crate) file: Option<PathBuf>,
    /// The store.
    pub(crate) store: StoreAt,
    /// The file size.
    pub(crate) file_bytes: Option<u64>,
    /// Whether the file is outside its layout path (read in place).
    pub(crate) outside: bool,
    /// The header.
    pub(crate) meta: SessionHeader,
    /// The events `load` would return (stored events, then closers).
    pub(crate) events: Events,
    /// How many events are stored.
    pub(crate) stored: usize,
    /// The closers `load` would append.
    pub(crate) closers: Vec<Event>,
    /// The torn tail, if any.
    pub(crate) torn: Option<Torn>,
    /// Stored events per type, in order of first appearance.
    pub(crate) counts: Vec<(String, u64)>,
    /// Turns of the stored log.
    pub(crate) turns: Vec<Turn>,
    /// Surface nodes after `load`.
    pub(crate) surface_nodes: usize,
    /// Model-visible messages after `load`.
    pub(crate) messages: usize,
    /// Replacements (compactions and rewrites).
    pub(crate) replacements: Vec<Replacement>,
    /// Stored sessions whose `parentSession` is this one (`None`: the listing failed).
    pub(crate) children: Option<Vec<String>>,
}

/// Turns of a log, streamed from `events` (never collected: a 1.3M-event log would hold a
/// second list of its event handles, about 20 MiB).
pub(crate) fn turns(events: impl IntoIterator<Item = impl Borrow<Event>>) -> Vec<Turn> {
    session_repair::turn_spans(events)
        .into_iter()
        .map(|t| Turn {
            turn: t.turn,
            start: t.start,
            end: t.end,
            reason: t.reason,
        })
        .collect()
}

pub(crate) use session_web::{TypeCounts, TypeTally};

/// Builds the report for `target` (never writes). `children`: also list the store, to name
/// the sessions forked from it (otherwise they are `None`).
pub(crate) fn build(store: &Store, target: &Target, children: bool) -> Result<Report> {
    let id = target.id.clone();
    let file = target.file.clone();
    // One read of the log gives the validated view, the stored length and the torn tail.
    let detailed = with_spinner(format!("reading {id}"), || {
        store.block_on(store.persistence.inspect_detailed(&id, None))
    })
    .map_err(|e| store.err(e, file.as_deref()))?;
    let inspection = detailed.inspection;
    let file = file.or_else(|| store.persistence.locate(&inspection.meta).map(|l| l.path));
    let (stored_len, torn_marker) = (detailed.stored, detailed.torn);
    let file_bytes = file
        .as_deref()
        .and_then(|f| std::fs::metadata(f).ok())
        .map(|m| m.len());
    let stored_len = stored_len.min(inspection.events.len());
    let torn = torn_marker.as_ref().map(|t| match t {
        TornMarker::Truncate {
            truncate_to,
            recovered,
        } => Torn {
            file_bytes,
            truncate_to: Some(*truncate_to),
            recovered: recovered.len(),
        },
        _ => Torn {
            file_bytes,
            truncate_to: None,
            recovered: 0,
        },
    });
    let events = inspection.events.clone();
    let closers = events.suffix(stored_len).to_vec();
    let prefix = events.prefix(stored_len);
    // The type counts and the turns in one pass over the stored events.
    let mut counts = TypeCounts::default();
    let turns = turns(prefix.iter().inspect(|e| counts.push(e)));
    let counts = counts.into_rows();
    // The inspection built the session: its surface, messages and transcript are those of
    // every event including the closers, without folding the log again.
    let replacements = detailed.transcript.replacements();
    let children = children
        .then(|| store.block_on(store.persistence.list(None)).ok())
        .flatten()
        .map(|headers| {
            let mut c: Vec<String> = headers
                .iter()
                .filter(|h| h.parent_session.as_deref() == Some(id.as_str()))
                .map(|h| h.id.to_string())
                .collect();
            c.sort();
            c
        });
    Ok(Report {
        id,
        file,
        store: target.at.clone(),
        file_bytes,
        outside: target.outside,
        meta: inspection.meta,
        counts,
        turns,
        stored: stored_len,
        closers,
        torn,
        surface_nodes: detailed.surface.len(),
        messages: detailed.messages.len(),
        replacements,
        children,
        events,
    })
}

impl Report {
    /// The open turn of the stored log.
    pub(crate) fn open_turn(&self) -> Option<&Turn> {
        self.turns.last().filter(|t| t.end.is_none())
    }

    /// The report as the documented JSON object (without `schema`).
    pub(crate) fn to_json_fields(&self) -> Vec<(&'static str, Value)> {
        let counts = obj(self.counts.iter().map(|(t, n)| (t.as_str(), num(*n))));
        let turns = Value::array(self.turns.iter().map(|t| {
            obj([
                ("turn", t.turn.clone()),
                ("start", num(t.start)),
                ("end", opt_num(t.end)),
                ("reason", opt_str(t.reason.clone())),
            ])
        }));
        let compactions = Value::array(self.replacements.iter().map(|r| {
            let ty = self
                .events
                .get(r.seq as usize)
                .map_or("", |e| e.event_type());
            obj([
                ("seq", num(r.seq)),
                ("type", Value::from(ty)),
                ("start", num(r.start)),
                ("end", num(r.end)),
                ("shadowedSeqs", seqs(&r.shadowed_seqs)),
            ])
        }));
        let torn = self.torn.as_ref().map_or(Value::Null, |t| {
            obj([
                ("fileBytes", opt_num(t.file_bytes)),
                ("truncateTo", opt_num(t.truncate_to)),
                (
                    "cutBytes",
                    opt_num(
                        t.file_bytes
                            .zip(t.truncate_to)
                            .map(|(f, c)| f.saturating_sub(c)),
                    ),
                ),
                ("recoveredEvents", num(t.recovered as u64)),
            ])
        });
        let children = self.children.as_ref().map_or(Value::Null, |c| {
            Value::array(c.iter().map(|s| Value::from(s.as_str())))
        });
        vec![
            ("id", Value::from(self.id.as_str())),
            (
                "file",
                opt_str(self.file.as_ref().map(|f| f.display().to_string())),
            ),
            (
                "compression",
                opt_str(self.store.compression().map(Compression::as_str)),
            ),
            ("store", Value::from(self.store.spec())),
            ("fileBytes", opt_num(self.file_bytes)),
            ("inLayout", Value::from(!self.outside)),
            ("header", self.meta.to_value()),
            ("eventCount", num(self.events.len() as u64)),
            ("storedEventCount", num(self.stored as u64)),
            ("countsByType", counts),
            ("turns", turns),
            (
                "openTurn",
                self.open_turn().map_or(Value::Null, |t| t.turn.clone()),
            ),
            (
                "surface",
                obj([
                    ("nodes", num(self.surface_nodes as u64)),
                    ("messages", num(self.messages as u64)),
                    ("replaceGeneration", num(self.replacements.len() as u64)),
                ]),
            ),
            ("compactions", compactions),
            (
                "lineage",
                obj([
                    (
                        "parentSession",
                        opt_str(self.meta.parent_session.as_deref()),
                    ),
                    ("seedLength", opt_num(self.meta.seed_length)),
                    ("children", children),
                ]),
            ),
            ("tornTail", torn),
            (
                "closers",
                Value::array(self.closers.iter().map(Event::to_value)),
            ),
        ]
    }

    /// Writes the report for people.
    pub(crate) fn write_human(&self, out: &mut Out) -> Result<()> {
        let s = out.style;
        let mut rows: Vec<Vec<String>> = Vec::new();
        let mut field = |k: &str, v: String| rows.push(vec![s.bold(k), v]);
        field("session", escape_controls(&self.id).into_owned());
        if let Some(file) = &self.file {
            let size = self.file_bytes.map(bytes).unwrap_or_default();
            let enc = match self.store.compression() {
                Some(Compression::Zstd) => "zstd",
                Some(Compression::None) | None => "plain",
            };
            let outside = if self.outside {
                ", outside a store layout: read in place"
            } else {
                ""
            };
            field(
                "file",
                format!("{} ({enc}, {size}{outside})", file.display()),
            );
        } else if self.store.compression().is_none() {
            field("store", self.store.spec());
        }
        field(
            "created",
            format!(
                "{} UTC{}",
                utc(self.meta.created_at),
                self.meta
                    .cwd
                    .as_deref()
                    .map(|c| format!("   cwd {}", escape_controls(c)))
                    .unwrap_or_default()
            ),
        );
        let lineage = match (&self.meta.parent_session, self.meta.seed_length) {
            (Some(p), Some(n)) => format!("fork of {} (inherits {n} events)", escape_controls(p)),
            (Some(p), None) => format!("child of {}", escape_controls(p)),
            _ => "root session".to_owned(),
        };
        let children = match &self.children {
            Some(c) if !c.is_empty() => format!(
                "; forks: {}",
                c.iter()
                    .map(|id| escape_controls(id))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            _ => String::new(),
        };
        field("lineage", format!("{lineage}{children}"));
        let closers = if self.closers.is_empty() {
            String::new()
        } else {
            format!(
                "; load would add {} closer{} → {}",
                self.closers.len(),
                if self.closers.len() == 1 { "" } else { "s" },
                self.events.len()
            )
        };
        field("events", format!("{} stored{closers}", self.stored));
        let open = self
            .open_turn()
            .map(|t| format!(", turn {} open", t.turn.to_json()))
            .unwrap_or_default();
        field("turns", format!("{}{open}", self.turns.len()));
        field(
            "surface",
            format!(
                "{} nodes, {} messages, {} replacement{}",
                self.surface_nodes,
                self.messages,
                self.replacements.len(),
                if self.replacements.len() == 1 {
                    ""
                } else {
                    "s"
                }
            ),
        );
        let torn = match &self.torn {
            None => s.green("none"),
            Some(t) => {
                let mut text = String::from("found");
                if let (Some(f), Some(c)) = (t.file_bytes, t.truncate_to) {
                    let _ = write!(
                        text,
                        ": file is {f} bytes, load truncates to {c} (cuts {} bytes)",
                        f.saturating_sub(c)
                    );
                }
                if t.recovered > 0 {
                    let _ = write!(
                        text,
                        ", re-appends {} record{} recovered from the torn frame",
                        t.recovered,
                        if t.recovered == 1 { "" } else { "s" }
                    );
                }
                s.yellow(&text)
            }
        };
        field("torn tail", torn);
        for line in table(&rows, &[], crate::output::Style::new(false), "") {
            out.line(&line)?;
        }

        out.line("")?;
        out.line(&s.bold("events by type"))?;
        let mut rows = vec![vec!["type".to_owned(), "count".to_owned()]];
        rows.extend(
            self.counts
                .iter()
                .map(|(t, n)| vec![t.clone(), n.to_string()]),
        );
        for line in table(&rows, &[1], s, "  ") {
            out.line(&line)?;
        }

        if !self.turns.is_empty() {
            out.line("")?;
            out.line(&s.bold("turns"))?;
            let mut rows = vec![vec![
                "turn".to_owned(),
                "start".to_owned(),
                "end".to_owned(),
                "reason".to_owned(),
            ]];
            for t in &self.turns {
                rows.push(vec![
                    t.turn.to_json(),
                    t.start.to_string(),
                    t.end.map_or_else(|| "-".to_owned(), |e| e.to_string()),
                    t.reason.clone().unwrap_or_else(|| s.yellow("open").clone()),
                ]);
            }
            for line in table(&rows, &[0, 1, 2], s, "  ") {
                out.line(&line)?;
            }
        }

        if !self.replacements.is_empty() {
            out.line("")?;
            out.line(&s.bold("compactions"))?;
            let mut rows = vec![vec![
                "seq".to_owned(),
                "type".to_owned(),
                "replaces".to_owned(),
                "shadowed seqs".to_owned(),
            ]];
            for r in &self.replacements {
                let ty = self
                    .events
                    .get(r.seq as usize)
                    .map_or("", |e| e.event_type());
                rows.push(vec![
                    r.seq.to_string(),
                    ty.to_owned(),
                    format!("{}..{}", r.start, r.end),
                    join_seqs(&r.shadowed_seqs),
                ]);
            }
            for line in table(&rows, &[0], s, "  ") {
                out.line(&line)?;
            }
        }

        out.line("")?;
        if self.closers.is_empty() {
            out.line(&format!(
                "{} {}",
                s.bold("closers load would add:"),
                s.green("none (no open turn)")
            ))?;
        } else {
            out.line(&s.bold("closers load would add"))?;
            let mut rows = vec![vec![
                "seq".to_owned(),
                "type".to_owned(),
                "detail".to_owned(),
            ]];
            for c in &self.closers {
                rows.push(vec![
                    c.seq().to_string(),
                    c.event_type().to_owned(),
                    s.yellow(&event_detail(c)),
                ]);
            }
            for line in table(&rows, &[0], s, "  ") {
                out.line(&line)?;
            }
        }
        Ok(())
    }
}
