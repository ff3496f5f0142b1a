//! What the API and the exported page show of one stored session, computed once from an
//! inspection (never a write) and then served in pages.

use std::sync::Arc;

use session_core::json::Value;
use session_core::request::RequestAsOf;
use session_core::{Event, Events, SessionHeader};
use session_persist::{DetailedInspection, TornMarker};
use session_repair::{TOOL_NOT_STARTED, TOOL_OUTCOME_UNKNOWN};
use session_surface::{Compaction, ViewSize, compactions_of, derive_event_message, fold_surface};

use crate::error::{Error, Result};
use crate::tally::counts;

use session_core::json::build::seqs;
pub(crate) use session_core::json::build::{int, num, obj, opt_num, opt_str};

/// What kind of line a timeline row is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowKind {
    /// A `turn/start … turn/end` bracket.
    Turn,
    /// A `step/start … step/end` bracket.
    Step,
    /// A model call: its streamed chunks and the `assistant/message` they built.
    Model,
    /// A `tool/call` and the `tool/result` that answered it.
    Tool,
}

impl RowKind {
    fn as_str(self) -> &'static str {
        match self {
            RowKind::Turn => "turn",
            RowKind::Step => "step",
            RowKind::Model => "model",
            RowKind::Tool => "tool",
        }
    }

    /// The zoom depth at which the row shows (0 turns, 1 steps, 2 calls).
    fn depth(self) -> usize {
        match self {
            RowKind::Turn => 0,
            RowKind::Step => 1,
            RowKind::Model | RowKind::Tool => 2,
        }
    }
}

/// One row of the timeline.
#[derive(Debug, Clone)]
pub struct Row {
    /// The kind.
    pub kind: RowKind,
    /// The first seq of the row (a model call: the seq its request is "as of").
    pub start: u64,
    /// The last seq (`None`: never closed).
    pub end: Option<u64>,
    /// Milliseconds from the first to the last event's time.
    pub duration_ms: Option<i64>,
    /// A short label (turn number, tool name, model).
    pub label: String,
    /// `data.usage` of the `assistant/message`, when recorded.
    pub usage: Option<Value>,
    /// The closer code answering a tool call (`TOOL_NOT_STARTED`, `TOOL_OUTCOME_UNKNOWN`), or
    /// `interrupted` for a turn a crash cut.
    pub flag: Option<String>,
}

/// A closer: an event crash repair appended (stored) or would append (`pending`).
#[derive(Debug, Clone)]
pub struct Closer {
    /// The event.
    pub event: Event,
    /// Its code: `TOOL_NOT_STARTED`, `TOOL_OUTCOME_UNKNOWN` or `interrupted` (a `turn/end`).
    pub code: String,
    /// Whether it is only what `load` would append (not stored yet).
    pub pending: bool,
}

/// Everything the web view shows of one session, built once from an inspection.
pub struct SessionView {
    /// The header.
    pub meta: SessionHeader,
    /// The events `load` would return (stored events, then pending closers).
    pub events: Events,
    /// How many of them are stored.
    pub stored: usize,
    /// The torn tail `load` would cut, if any.
    pub torn: Option<TornMarker>,
    /// Surface nodes and messages after every event.
    pub surface_nodes: usize,
    /// Model-visible messages after every event.
    pub messages: usize,
    /// Compactions and rewrites, in log order (`Session::compactions`' history).
    pub compactions: Vec<Compaction>,
    /// Stored and pending closers.
    pub closers: Vec<Closer>,
    /// The timeline, flattened: turns, steps, calls in log order.
    pub rows: Vec<Row>,
    /// Per zoom depth (0..=2), the indices into `rows` shown at that depth.
    pub zoom: [Vec<u32>; 3],
    /// Sessions whose `parentSession` is this one: (id, seedLength).
    pub children: Vec<(String, Option<u64>)>,
    /// The session document, computed once (it counts every event).
    summary: Value,
}

/// The closer code of `e`, if it is one.
pub fn closer_code(e: &Event) -> Option<String> {
    match e.event_type() {
        "tool/result" => {
            let code = e.data().get("error")?.get("code")?.as_str()?;
            (code == TOOL_NOT_STARTED || code == TOOL_OUTCOME_UNKNOWN).then(|| code.to_owned())
        }
        "turn/end" => {
            let kind = e.data().get("reason")?.get("kind")?.as_str()?;
            (kind == "interrupted").then(|| kind.to_owned())
        }
        _ => None,
    }
}

/// The text of a closer's tool result (its honest explanation), if any.
pub fn closer_text(e: &Event) -> Option<String> {
    let content = e.data().get("message")?.get("content")?.as_array()?;
    let mut out = String::new();
    for block in content.iter() {
        if let Some(inner) = block.get("content").and_then(Value::as_array) {
            for part in inner.iter() {
                if let Some(t) = part.get("text").and_then(Value::as_str) {
                    out.push_str(t);
                }
            }
        }
    }
    (!out.is_empty()).then_some(out)
}

fn str_field(e: &Event, key: &str) -> Option<String> {
    e.data().get(key).and_then(Value::as_str).map(str::to_owned)
}

/// A view size as the JSON documents show it.
pub fn view_size_json(size: ViewSize) -> Value {
    obj([
        ("messages", num(size.messages)),
        ("chars", num(size.chars)),
        ("approxTokens", num(size.approx_tokens)),
    ])
}

/// One compaction as the JSON documents show it (`sessionctl compactions --json`, the API).
pub fn compaction_json(c: &Compaction) -> Value {
    obj([
        ("seq", num(c.seq)),
        ("type", Value::from(c.event_type.as_str())),
        ("range", obj([("start", num(c.start)), ("end", num(c.end))])),
        ("shadowed", seqs(&c.shadowed)),
        ("resolved", seqs(&c.resolved)),
        ("sourceEventSeqs", seqs(&c.source_event_seqs)),
        ("message", c.message.clone().unwrap_or(Value::Null)),
        ("before", view_size_json(c.before)),
        ("after", view_size_json(c.after)),
        ("coveredBy", opt_num(c.covered_by)),
    ])
}

/// The timeline rows of `events`.
#[allow(clippy::too_many_lines)]
pub fn timeline(events: &Events) -> Vec<Row> {
    let mut rows: Vec<Row> = Vec::new();
    let mut open_turn: Option<usize> = None;
    let mut open_step: Option<usize> = None;
    let mut open_tools: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    // The first chunk of the model call being streamed: (its seq, the seq before it).
    let mut chunk_run: Option<u64> = None;
    let time_of = |seq: u64| events.get(seq as usize).map(Event::time);
    let close = |rows: &mut Vec<Row>, i: usize, seq: u64| {
        let start_time = time_of(rows[i].start);
        rows[i].end = Some(seq);
        rows[i].duration_ms = start_time
            .zip(time_of(seq))
            .map(|(a, b)| b.saturating_sub(a));
    };
    for e in events {
        let seq = e.seq();
        match e.event_type() {
            "turn/start" => {
                let label = e
                    .data()
                    .get("turn")
                    .map_or_else(String::new, |t| format!("turn {}", t.to_json()));
                open_turn = Some(rows.len());
                open_step = None;
                rows.push(Row {
                    kind: RowKind::Turn,
                    start: seq,
                    end: None,
                    duration_ms: None,
                    label,
                    usage: None,
                    flag: None,
                });
            }
            "turn/end" => {
                if let Some(i) = open_turn.take() {
                    close(&mut rows, i, seq);
                    rows[i].flag = closer_code(e);
                }
            }
            "step/start" => {
                let label = e
                    .data()
                    .get("step")
                    .map_or_else(String::new, |s| format!("step {}", s.to_json()));
                open_step = Some(rows.len());
                rows.push(Row {
                    kind: RowKind::Step,
                    start: seq,
                    end: None,
                    duration_ms: None,
                    label,
                    usage: None,
                    flag: None,
                });
            }
            "step/end" => {
                if let Some(i) = open_step.take() {
                    close(&mut rows, i, seq);
                }
            }
            "assistant/chunk" if chunk_run.is_none() => chunk_run = Some(seq),
            "assistant/message" => {
                let first = chunk_run.take().unwrap_or(seq);
                let request = first.saturating_sub(1);
                let source = e.data().get("message").and_then(|m| m.get("source"));
                let model = source
                    .and_then(|s| s.get("model"))
                    .and_then(Value::as_str)
                    .unwrap_or("model");
                let usage = e.data().get("usage").cloned();
                rows.push(Row {
                    kind: RowKind::Model,
                    start: request,
                    end: Some(seq),
                    duration_ms: time_of(request).map(|t| e.time().saturating_sub(t)),
                    label: model.to_owned(),
                    usage,
                    flag: None,
                });
            }
            "tool/call" => {
                let name = str_field(e, "name").unwrap_or_else(|| "tool".to_owned());
                if let Some(id) = str_field(e, "callId") {
                    open_tools.insert(id, rows.len());
                }
                rows.push(Row {
                    kind: RowKind::Tool,
                    start: seq,
                    end: None,
                    duration_ms: None,
                    label: name,
                    usage: None,
                    flag: None,
                });
            }
            "tool/result" => {
                let id = e
                    .data()
                    .get("message")
                    .and_then(|m| m.get("source"))
                    .and_then(|s| s.get("callId"))
                    .and_then(Value::as_str);
                let code = closer_code(e);
                match id.and_then(|id| open_tools.remove(id)) {
                    Some(i) => {
                        close(&mut rows, i, seq);
                        rows[i].flag = code;
                    }
                    // A result with no recorded call (TOOL_NOT_STARTED answers a call the
                    // model asked for but the harness never started).
                    None => rows.push(Row {
                        kind: RowKind::Tool,
                        start: seq,
                        end: Some(seq),
                        duration_ms: Some(0),
                        label: id.unwrap_or("tool").to_owned(),
                        usage: None,
                        flag: code,
                    }),
                }
            }
            _ => {}
        }
    }
    rows
}

impl SessionView {
    /// Builds the view from an inspection and the headers of the store's sessions.
    pub fn build(detailed: DetailedInspection, headers: &[SessionHeader]) -> SessionView {
        let events = detailed.inspection.events.clone();
        let stored = detailed.stored.min(events.len());
        let compactions = compactions_of(&detailed.transcript);
        let closers = events
            .iter()
            .enumerate()
            .filter_map(|(i, e)| {
                closer_code(e).map(|code| Closer {
                    event: e.clone(),
                    code,
                    pending: i >= stored,
                })
            })
            .collect();
        let rows = timeline(&events);
        let mut zoom: [Vec<u32>; 3] = Default::default();
        for (i, r) in rows.iter().enumerate() {
            for (depth, list) in zoom.iter_mut().enumerate() {
                if r.kind.depth() <= depth {
                    list.push(i as u32);
                }
            }
        }
        let id = detailed.inspection.meta.id.clone();
        let mut children: Vec<(String, Option<u64>)> = headers
            .iter()
            .filter(|h| h.parent_session.as_deref() == Some(&*id))
            .map(|h| (h.id.to_string(), h.seed_length))
            .collect();
        children.sort();
        let mut view = SessionView {
            meta: detailed.inspection.meta,
            events,
            stored,
            torn: detailed.torn,
            surface_nodes: detailed.surface.len(),
            messages: detailed.messages.len(),
            compactions,
            closers,
            rows,
            zoom,
            children,
            summary: Value::Null,
        };
        view.summary = view.build_summary();
        view
    }

    /// The session document of `GET /api/sessions/{id}` (an O(1) clone).
    pub fn summary(&self) -> Value {
        self.summary.clone()
    }

    fn build_summary(&self) -> Value {
        let counts = obj(counts(self.events.iter().take(self.stored))
            .iter()
            .map(|(t, n)| (t.as_str(), num(*n))));
        let turns = Value::array(
            session_repair::turn_spans(self.events.iter().take(self.stored))
                .into_iter()
                .map(|t| {
                    obj([
                        ("turn", t.turn),
                        ("start", num(t.start)),
                        ("end", opt_num(t.end)),
                        ("reason", opt_str(t.reason)),
                    ])
                }),
        );
        let torn = self.torn.as_ref().map_or(Value::Null, |t| match t {
            TornMarker::Truncate {
                truncate_to,
                recovered,
            } => obj([
                ("truncateTo", num(*truncate_to)),
                ("recoveredEvents", num(recovered.len() as u64)),
            ]),
            _ => obj([("truncateTo", Value::Null)]),
        });
        obj([
            ("id", Value::from(&*self.meta.id)),
            ("header", self.meta.to_value()),
            ("eventCount", num(self.events.len() as u64)),
            ("storedEventCount", num(self.stored as u64)),
            ("countsByType", counts),
            ("turns", turns),
            (
                "surface",
                obj([
                    ("nodes", num(self.surface_nodes as u64)),
                    ("messages", num(self.messages as u64)),
                    ("replaceGeneration", num(self.compactions.len() as u64)),
                ]),
            ),
            ("compactions", self.compactions_json()),
            ("closers", self.closers_json()),
            (
                "lineage",
                obj([
                    (
                        "parentSession",
                        opt_str(self.meta.parent_session.as_deref()),
                    ),
                    ("seedLength", opt_num(self.meta.seed_length)),
                    (
                        "children",
                        Value::array(self.children.iter().map(|(id, seed)| {
                            obj([
                                ("id", Value::from(id.as_str())),
                                ("seedLength", opt_num(*seed)),
                            ])
                        })),
                    ),
                ]),
            ),
            ("tornTail", torn),
            (
                "timelineRows",
                Value::array(self.zoom.iter().map(|z| num(z.len() as u64))),
            ),
        ])
    }

    /// The compactions as `sessionctl compactions --json` lists them.
    pub fn compactions_json(&self) -> Value {
        Value::array(self.compactions.iter().map(compaction_json))
    }

    /// The closers, each with its code, explanation and whether it is stored.
    pub fn closers_json(&self) -> Value {
        Value::array(self.closers.iter().map(|c| {
            obj([
                ("seq", num(c.event.seq())),
                ("type", Value::from(c.event.event_type())),
                ("code", Value::from(c.code.as_str())),
                ("pending", Value::from(c.pending)),
                ("explanation", opt_str(closer_explanation(c))),
            ])
        }))
    }

    /// Timeline rows `from..from+limit` at zoom `depth` (0 turns, 1 steps, 2 calls).
    pub fn timeline_page(&self, depth: usize, from: usize, limit: usize) -> Value {
        let index = &self.zoom[depth.min(2)];
        let end = from.saturating_add(limit).min(index.len());
        let rows = index.get(from.min(end)..end).unwrap_or_default();
        obj([
            ("depth", num(depth.min(2) as u64)),
            ("total", num(index.len() as u64)),
            ("from", num(from as u64)),
            (
                "rows",
                Value::array(rows.iter().map(|i| self.row_json(&self.rows[*i as usize]))),
            ),
        ])
    }

    fn row_json(&self, r: &Row) -> Value {
        obj([
            ("kind", Value::from(r.kind.as_str())),
            ("start", num(r.start)),
            ("end", opt_num(r.end)),
            (
                "time",
                self.events
                    .get(r.start as usize)
                    .map_or(Value::Null, |e| int(e.time())),
            ),
            ("durationMs", r.duration_ms.map_or(Value::Null, int)),
            ("label", Value::from(r.label.as_str())),
            ("usage", r.usage.clone().unwrap_or_default()),
            ("flag", opt_str(r.flag.as_deref())),
        ])
    }

    /// Events with `from <= seq`, at most `limit`, as stored.
    pub fn events_page(&self, from: u64, limit: usize) -> Value {
        let len = self.events.len() as u64;
        let end = from.saturating_add(limit as u64).min(len);
        let list = (from.min(end)..end).filter_map(|s| self.events.get(s as usize));
        obj([
            ("from", num(from)),
            ("total", num(len)),
            ("storedEventCount", num(self.stored as u64)),
            ("next", if end < len { num(end) } else { Value::Null }),
            ("events", Value::array(list.map(Event::to_value))),
        ])
    }

    fn prefix(&self, at: Option<u64>) -> Result<Events> {
        match at {
            None => Ok(self.events.clone()),
            Some(at) if at < self.events.len() as u64 => Ok(self.events.prefix(at as usize + 1)),
            Some(at) => Err(Error::not_found(format!(
                "seq {at} does not exist in session \"{}\" ({} events)",
                self.meta.id,
                self.events.len()
            ))),
        }
    }

    /// What the model reads as of `at` (every event when `None`): the same document as
    /// `sessionctl messages --at AT --json`, without its `schema`.
    pub fn messages_at(&self, at: Option<u64>) -> Result<Value> {
        let events = self.prefix(at)?;
        let fold = fold_surface(events.iter()).map_err(|e| {
            Error::invalid(format!(
                "the surface of session \"{}\" does not fold: {e}",
                self.meta.id
            ))
        })?;
        let items: Vec<Value> = fold
            .nodes
            .iter()
            .filter_map(|n| {
                let event = events.get(*n as usize)?;
                derive_event_message(event)
                    .map(|m| obj([("seq", num(event.seq())), ("message", m.clone())]))
            })
            .collect();
        Ok(obj([
            ("id", Value::from(&*self.meta.id)),
            ("at", opt_num(at)),
            ("count", num(items.len() as u64)),
            ("messages", Value::array(items)),
        ]))
    }

    /// The folded request header as of `at`: the same document as `sessionctl header --at AT
    /// --json`, without its `schema`.
    pub fn header_at(&self, at: Option<u64>) -> Result<Value> {
        let events = self.prefix(at)?;
        let request = RequestAsOf::of(&events);
        Ok(obj([
            ("id", Value::from(&*self.meta.id)),
            ("at", opt_num(at)),
        ]
        .into_iter()
        .chain(request.json_members())))
    }
}

/// The explanation shown with a closer: its own text for a tool result, and what an
/// interrupted `turn/end` means otherwise.
fn closer_explanation(c: &Closer) -> Option<String> {
    closer_text(&c.event).or_else(|| {
        (c.code == "interrupted").then(|| {
            "The turn was cut by a crash; repair closed it with an interrupted turn/end.".to_owned()
        })
    })
}

/// Shared, immutable views handed to the handlers.
pub(crate) type SharedView = Arc<SessionView>;

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(ty: &str, seq: u64, time: i64, data: &str) -> Event {
        Event::appended(ty, seq, time, Value::parse(data).expect("json"), None, None)
    }

    #[test]
    fn timeline_rows_nest_turns_steps_and_calls_with_durations() {
        let events = Events::from_vec(vec![
            ev("turn/start", 0, 100, r#"{"turn":1}"#),
            ev("step/start", 1, 110, r#"{"turn":1,"step":1}"#),
            ev(
                "assistant/chunk",
                2,
                130,
                r#"{"chunk":{"type":"text-delta","delta":"x"}}"#,
            ),
            ev(
                "assistant/message",
                3,
                170,
                r#"{"message":{"source":{"model":"m1"}},"usage":{"inputTokens":5}}"#,
            ),
            ev("tool/call", 4, 200, r#"{"callId":"c1","name":"bash"}"#),
            ev(
                "tool/result",
                5,
                260,
                r#"{"message":{"source":{"callId":"c1"}},"error":{"code":"TOOL_OUTCOME_UNKNOWN"}}"#,
            ),
            ev("step/end", 6, 270, "{}"),
            ev("turn/end", 7, 300, r#"{"reason":{"kind":"interrupted"}}"#),
            ev("turn/start", 8, 400, r#"{"turn":2}"#),
        ]);
        let rows = timeline(&events);
        let kinds: Vec<RowKind> = rows.iter().map(|r| r.kind).collect();
        assert_eq!(
            kinds,
            [
                RowKind::Turn,
                RowKind::Step,
                RowKind::Model,
                RowKind::Tool,
                RowKind::Turn
            ]
        );
        assert_eq!((rows[0].end, rows[0].duration_ms), (Some(7), Some(200)));
        assert_eq!(rows[0].flag.as_deref(), Some("interrupted"));
        assert_eq!((rows[1].end, rows[1].duration_ms), (Some(6), Some(160)));
        // The model call is as of the event before its first chunk.
        assert_eq!(
            (rows[2].start, rows[2].end, rows[2].duration_ms),
            (1, Some(3), Some(60))
        );
        assert_eq!(rows[2].label, "m1");
        assert_eq!(
            rows[2].usage.as_ref().map(Value::to_json).as_deref(),
            Some(r#"{"inputTokens":5}"#)
        );
        assert_eq!((rows[3].end, rows[3].duration_ms), (Some(5), Some(60)));
        assert_eq!(rows[3].flag.as_deref(), Some("TOOL_OUTCOME_UNKNOWN"));
        assert_eq!((rows[4].end, rows[4].duration_ms), (None, None));
    }

    #[test]
    fn hostile_shapes_make_rows_without_panicking() {
        let events = Events::from_vec(vec![
            ev("turn/end", 0, 5, r#"{"reason":7}"#),
            ev("step/end", 1, -5, "[]"),
            ev("tool/result", 2, i64::MIN / 2, r#"{"message":"x"}"#),
            ev("assistant/message", 3, 0, "null"),
            ev("tool/call", 4, 0, r#"{"callId":5}"#),
        ]);
        let rows = timeline(&events);
        assert_eq!(rows.len(), 3);
        assert!(closer_code(&events.to_vec()[0]).is_none());
    }
}
