//! The shared mapping core: a [`Builder`] that turns format-neutral calls (a user message, an
//! assistant content block, a tool call and its result, usage, a compaction, a rollback, the
//! end of a turn) into drafts appended through [`Session::append`], so every rule of a live
//! append applies. Turn and step brackets are opened and closed here; calls left without a
//! result and a turn left open are closed with `session-repair`'s closers.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use session_core::Event;
use session_core::FixedClock;
use session_core::json::{self, Value};
use session_core::vocab::{
    Aborted, AssistantMessageData, Bare, CallConfig, CancelCause, ContentBlock, EpochHeader, Extra,
    Message, MessageSource, ModelSource, RequestContext, RequestHeaderData, Role, StepEnd,
    StepStart, ToolCall, ToolCallBlock, ToolResultBlock, ToolResultData, ToolSource, TurnEnd,
    TurnEndReason, TurnStart, Usage,
};
use session_repair::interrupted_turn_closers;
use session_surface::{Draft, Session};

use crate::error::{ImportError, ImportErrorKind};
use crate::report::{ImportReport, Refusal};

/// The event type of a record kept as it was: `{format, line, offset, kind, raw}`, always
/// `ignorable: true`.
pub const RECORD_EVENT: &str = "import/record";

/// A model-visible message of a replacement history (a compaction's new view).
#[derive(Debug, Clone)]
pub(crate) enum ViewItem {
    /// A user-role message.
    User(Message),
    /// An assistant message's content blocks.
    Assistant(String, Vec<ContentBlock>),
}

/// The model a request went to.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Route {
    pub(crate) provider: String,
    pub(crate) model: String,
    pub(crate) effort: Option<String>,
    pub(crate) system: Option<String>,
    pub(crate) context_window: Option<u64>,
}

#[derive(Default)]
struct PendingAssistant {
    /// The source's message id (`id` is made unique in the session from it).
    base: String,
    id: String,
    request: Option<String>,
    blocks: Vec<ContentBlock>,
    calls: Vec<(String, String, String)>,
    usage: Option<Usage>,
}

/// Builds one session.
#[allow(clippy::struct_excessive_bools)]
pub(crate) struct Builder {
    session: Session,
    clock: Arc<FixedClock>,
    format: &'static str,
    pub(crate) report: ImportReport,
    route: Route,
    header_sent: Option<Route>,
    turn: u64,
    open_turn: bool,
    turn_fresh: bool,
    step: u64,
    open_step: bool,
    step_has_results: bool,
    pending: Option<PendingAssistant>,
    step_calls: HashSet<String>,
    step_usage: Option<Usage>,
    counted_requests: HashSet<String>,
    turn_first_node: Vec<u64>,
    /// The line of the record being mapped (for refusals).
    line: u64,
    kind: String,
    ids: HashMap<String, u64>,
}

/// Adds `b` into `a`.
pub(crate) fn add_usage(a: &mut Usage, b: &Usage) {
    a.input_tokens += b.input_tokens;
    a.output_tokens += b.output_tokens;
    for (x, y) in [
        (&mut a.cache_read_tokens, b.cache_read_tokens),
        (&mut a.cache_write_tokens, b.cache_write_tokens),
        (&mut a.reasoning_tokens, b.reasoning_tokens),
    ] {
        if let Some(y) = y {
            *x = Some(x.unwrap_or(0) + y);
        }
    }
}

/// `serde_json` to our JSON value (lossless for every value `serde_json` holds).
pub(crate) fn to_value(v: &serde_json::Value) -> Value {
    json::to_value(v).unwrap_or(Value::Null)
}

/// Milliseconds since the epoch of an RFC 3339 timestamp.
pub(crate) fn parse_time(text: &str) -> Option<i64> {
    let t =
        time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).ok()?;
    i64::try_from(t.unix_timestamp_nanos() / 1_000_000).ok()
}

/// A deterministic id derived from `parts` (UUID v5 in a namespace of our own).
pub(crate) fn derived_id(parts: &[&str]) -> String {
    const NAMESPACE: uuid::Uuid = uuid::Uuid::from_u128(0x5e55_1013_0000_4000_8000_1a4b_0e7c_0de5);
    uuid::Uuid::new_v5(&NAMESPACE, parts.join("\u{1f}").as_bytes()).to_string()
}

fn extra(entries: Vec<(&str, Value)>) -> Extra {
    match Value::object(entries).as_object() {
        Some(o) => Extra::new(o.clone()),
        None => Extra::default(),
    }
}

/// A text block with unnamed fields.
pub(crate) fn reasoning_block(text: String, fields: Vec<(&str, Value)>) -> ContentBlock {
    ContentBlock::Reasoning(session_core::vocab::TextBlock {
        text,
        extra: extra(fields),
    })
}

impl Builder {
    /// A builder for session `id` with header `header` (a header record value).
    pub(crate) fn new(
        id: &str,
        header: Value,
        created_at: i64,
        format: &'static str,
    ) -> Result<Builder, ImportError> {
        let clock = Arc::new(FixedClock::new(created_at));
        let session = Session::create(id, None, Some(header), clock.clone()).map_err(|e| {
            ImportError::new(
                ImportErrorKind::Build,
                "",
                format!("session header refused: {e}"),
            )
            .with_source(e)
        })?;
        Ok(Builder {
            session,
            clock,
            format,
            report: ImportReport::default(),
            route: Route {
                provider: "unknown".into(),
                model: "unknown".into(),
                ..Route::default()
            },
            header_sent: None,
            turn: 0,
            open_turn: false,
            turn_fresh: false,
            step: 0,
            open_step: false,
            step_has_results: false,
            pending: None,
            step_calls: HashSet::new(),
            step_usage: None,
            counted_requests: HashSet::new(),
            turn_first_node: Vec::new(),
            line: 0,
            kind: String::new(),
            ids: HashMap::new(),
        })
    }

    /// The header record of a session: `{version: 0, id, createdAt, cwd?, ...lineage,
    /// importedFrom}`.
    #[allow(clippy::single_match_else)]
    pub(crate) fn header(
        id: &str,
        created_at: i64,
        cwd: Option<&str>,
        parent: Option<(&str, bool)>,
        imported_from: Value,
    ) -> Value {
        let cwd = cwd.filter(|c| session_core::header::is_absolute_path(c));
        let base = match parent {
            Some((parent, _)) => session_fork::child_header(id, created_at.max(0), cwd, parent, 0),
            None => {
                let mut e: Vec<(&str, Value)> = vec![
                    ("version", Value::from(0u8)),
                    ("id", Value::from(id)),
                    (
                        "createdAt",
                        json::to_value(&created_at.max(0)).unwrap_or(Value::Null),
                    ),
                ];
                if let Some(cwd) = cwd {
                    e.push(("cwd", Value::from(cwd)));
                }
                Value::object(e)
            }
        };
        let mut entries: Vec<(Arc<str>, Value)> = base
            .as_object()
            .map(|o| {
                o.iter()
                    .map(|(k, v)| (Arc::<str>::from(k), v.clone()))
                    .collect()
            })
            .unwrap_or_default();
        if let Some((_, true)) = parent {
            entries.push(("origin".into(), Value::from("subagent")));
            entries.push(("delegationDepth".into(), Value::from(1u8)));
        }
        entries.push(("importedFrom".into(), imported_from));
        Value::object(entries.iter().map(|(k, v)| (k.as_ref(), v.clone())))
    }

    /// Sets the time of the events that follow.
    pub(crate) fn set_time(&self, ms: Option<i64>) {
        if let Some(ms) = ms {
            self.clock.set(ms);
        }
    }

    /// Names the record being mapped (for refusals).
    pub(crate) fn at_record(&mut self, line: u64, kind: &str) {
        self.line = line;
        kind.clone_into(&mut self.kind);
    }

    /// A message id unique in this session, derived from `base`.
    pub(crate) fn message_id(&mut self, base: &str) -> String {
        let n = self.ids.entry(base.to_owned()).or_insert(0);
        *n += 1;
        if *n == 1 {
            base.to_owned()
        } else {
            format!("{base}#{n}")
        }
    }

    fn append(&mut self, draft: Draft) -> bool {
        match self.session.append(draft) {
            Ok(_) => true,
            Err(e) => {
                self.report.refused.push(Refusal {
                    line: self.line,
                    kind: self.kind.clone(),
                    reason: e.to_string(),
                });
                false
            }
        }
    }

    fn append_serde<T: session_core::vocab::EventPayload>(&mut self, payload: &T) -> bool {
        match Draft::from_serde(payload) {
            Ok(d) => self.append(d),
            Err(e) => {
                self.report.refused.push(Refusal {
                    line: self.line,
                    kind: self.kind.clone(),
                    reason: e.to_string(),
                });
                false
            }
        }
    }

    /// Keeps a record as an ignorable event carrying the original line.
    pub(crate) fn keep(&mut self, line: u64, offset: u64, kind: &str, raw: &str) {
        self.report.ignorable(kind);
        let data = Value::object([
            ("format", Value::from(self.format)),
            ("line", session_core::event::seq_value(line)),
            ("offset", session_core::event::seq_value(offset)),
            ("kind", Value::from(kind)),
            ("raw", Value::from(raw)),
        ]);
        let _ = self.append(Draft::new(RECORD_EVENT, data).ignorable());
    }

    /// Sets the route of later requests; inside a turn a change writes a `request/header`.
    pub(crate) fn set_route(&mut self, route: Route) {
        self.route = route;
        if self.open_turn {
            self.send_header();
        }
    }

    /// The current route.
    pub(crate) fn route(&self) -> &Route {
        &self.route
    }

    fn send_header(&mut self) {
        if self.header_sent.as_ref() == Some(&self.route) {
            return;
        }
        let reason = if self.header_sent.is_some() {
            "change"
        } else {
            "initial"
        };
        let r = self.route.clone();
        let header = RequestHeaderData {
            header: EpochHeader {
                config: CallConfig {
                    provider: r.provider.clone(),
                    model: r.model.clone(),
                    reasoning_effort: r.effort.clone().filter(|e| !e.is_empty()),
                    ..CallConfig::default()
                },
                system: r.system.clone().filter(|s| !s.is_empty()),
                ..EpochHeader::default()
            },
            reason: reason.into(),
            ..RequestHeaderData::default()
        };
        self.append_serde(&header);
        self.append_serde(&RequestContext {
            provider: r.provider.clone(),
            model: r.model.clone(),
            context_window: r.context_window,
            ..RequestContext::default()
        });
        self.header_sent = Some(r);
    }

    /// Whether a turn is open.
    pub(crate) fn turn_open(&self) -> bool {
        self.open_turn
    }

    /// Starts a turn (closing an open one as completed, unless it is still empty).
    pub(crate) fn begin_turn(&mut self) {
        if self.open_turn {
            if self.turn_fresh {
                return;
            }
            self.end_turn(TurnEndReason::Completed(Bare::default()));
        }
        self.turn += 1;
        self.step = 0;
        let turn = self.turn;
        self.append_serde(&TurnStart {
            turn,
            ..TurnStart::default()
        });
        self.open_turn = true;
        self.turn_fresh = true;
        self.report.turns += 1;
        self.send_header();
        self.turn_first_node.push(u64::MAX);
    }

    /// Opens a turn when none is.
    pub(crate) fn ensure_turn(&mut self) {
        if !self.open_turn {
            self.begin_turn();
        }
    }

    fn ensure_step(&mut self) {
        self.ensure_turn();
        self.turn_fresh = false;
        if !self.open_step {
            self.step += 1;
            let (turn, step) = (self.turn, self.step);
            self.append_serde(&StepStart {
                turn,
                step,
                ..StepStart::default()
            });
            self.open_step = true;
            self.step_has_results = false;
        }
    }

    fn note_surface(&mut self) {
        if let Some(first) = self.turn_first_node.last_mut()
            && *first == u64::MAX
        {
            *first = self.session.seq().saturating_sub(1);
        }
    }

    /// A user-role message (a prompt, injected context, a notice) in the open turn (or a new
    /// one when none is open and `starts_turn`).
    #[allow(clippy::needless_pass_by_value)]
    pub(crate) fn user_message(&mut self, message: Message, starts_turn: bool) {
        if starts_turn {
            self.end_step();
            self.begin_turn();
        } else {
            // Context injected mid-step (an approval notice between a call and its output)
            // stays in the step, after the response so far.
            self.flush();
            self.ensure_turn();
        }
        self.turn_fresh = false;
        if self.append_serde(&message) {
            self.report.user_messages += 1;
            self.note_surface();
        }
    }

    /// Starts a new assistant message `id` (one model response; request `request`): a new
    /// step unless the open step's message is the same one.
    pub(crate) fn assistant_message(&mut self, id: &str, request: Option<&str>) {
        if let Some(p) = &self.pending
            && p.base == id
        {
            return;
        }
        self.end_step();
        self.ensure_step();
        let base = id.to_owned();
        let id = self.message_id(id);
        self.pending = Some(PendingAssistant {
            base,
            id,
            request: request.map(str::to_owned),
            ..PendingAssistant::default()
        });
    }

    fn pending_mut(&mut self, fallback_id: &str) -> &mut PendingAssistant {
        if self.step_has_results || !self.open_step {
            self.end_step();
        }
        self.ensure_step();
        if self.pending.is_none() {
            let id = self.message_id(fallback_id);
            self.pending = Some(PendingAssistant {
                base: fallback_id.to_owned(),
                id,
                ..PendingAssistant::default()
            });
        }
        self.pending.get_or_insert_with(PendingAssistant::default)
    }

    /// An assistant content block (text or reasoning) of the current model response; a block
    /// after tool results starts the next step.
    pub(crate) fn assistant_block(&mut self, fallback_id: &str, block: ContentBlock) {
        self.pending_mut(fallback_id).blocks.push(block);
    }

    /// A tool call of the current model response.
    pub(crate) fn tool_call(
        &mut self,
        fallback_id: &str,
        call_id: &str,
        name: &str,
        arguments: String,
        block_args: Value,
    ) {
        let p = self.pending_mut(fallback_id);
        p.blocks.push(ContentBlock::ToolCall(ToolCallBlock {
            id: call_id.to_owned(),
            name: name.to_owned(),
            arguments: block_args,
            extra: Extra::default(),
        }));
        p.calls
            .push((call_id.to_owned(), name.to_owned(), arguments));
    }

    /// Usage of the current model response (Claude Code: once per request id).
    pub(crate) fn response_usage(&mut self, usage: Usage) {
        if let Some(p) = &mut self.pending {
            p.usage = Some(usage);
        }
    }

    /// Usage reported apart from a response (Codex `token_count`): added to the open step.
    pub(crate) fn step_usage(&mut self, usage: &Usage) {
        if !self.open_step {
            self.ensure_step();
        }
        match &mut self.step_usage {
            Some(u) => add_usage(u, usage),
            None => self.step_usage = Some(usage.clone()),
        }
    }

    fn count_usage(&mut self, u: &Usage) {
        let t = &mut self.report.tokens;
        t.input += u.input_tokens;
        t.output += u.output_tokens;
        t.cache_read += u.cache_read_tokens.unwrap_or(0);
        t.cache_write += u.cache_write_tokens.unwrap_or(0);
        t.reasoning += u.reasoning_tokens.unwrap_or(0);
    }

    fn flush(&mut self) {
        let Some(mut p) = self.pending.take() else {
            return;
        };
        if let Some(r) = &p.request
            && !self.counted_requests.insert(r.clone())
        {
            p.usage = None;
        }
        if let Some(u) = p.usage.clone() {
            self.count_usage(&u);
        }
        let has_content = !p.blocks.is_empty();
        let data = AssistantMessageData {
            turn: self.turn,
            step: self.step,
            message: Message::new(
                p.id.clone(),
                Role::Assistant,
                p.blocks,
                MessageSource::Model(ModelSource {
                    provider: self.route.provider.clone(),
                    model: self.route.model.clone(),
                    ..ModelSource::default()
                }),
            ),
            usage: p.usage,
            ..AssistantMessageData::default()
        };
        if self.append_serde(&data) && has_content {
            self.report.assistant_messages += 1;
            self.note_surface();
        }
        for (call_id, name, arguments) in p.calls {
            let call = ToolCall {
                turn: self.turn,
                step: self.step,
                call_id: call_id.clone(),
                name,
                arguments,
                ..ToolCall::default()
            };
            if self.append_serde(&call) {
                self.report.tool_calls += 1;
                self.step_calls.insert(call_id);
            }
        }
    }

    /// A tool result from the source. `false` when no call of the open step awaits it (the
    /// caller keeps the record as ignorable).
    pub(crate) fn tool_result(
        &mut self,
        call_id: &str,
        content: Vec<ContentBlock>,
        is_error: Option<bool>,
        meta: Option<Value>,
    ) -> bool {
        self.flush();
        if !self.open_step || !self.step_calls.contains(call_id) {
            return false;
        }
        let id = self.message_id(&format!("tool-result-{call_id}"));
        let message = Message::new(
            id,
            Role::User,
            vec![ContentBlock::ToolResult(ToolResultBlock {
                tool_call_id: call_id.to_owned(),
                content,
                is_error,
                extra: Extra::default(),
            })],
            MessageSource::Tool(ToolSource {
                call_id: call_id.to_owned(),
                ..ToolSource::default()
            }),
        );
        let data = ToolResultData {
            turn: self.turn,
            step: self.step,
            message,
            meta,
            ..ToolResultData::default()
        };
        if self.append_serde(&data) {
            self.report.tool_results += 1;
            self.step_calls.remove(call_id);
            self.step_has_results = true;
            self.note_surface();
            true
        } else {
            false
        }
    }

    /// Appends repair's closers for the open turn: with `whole`, all of them (results, the
    /// step's end, `turn/end` interrupted); otherwise only the synthetic tool results.
    fn closers(&mut self, whole: bool) -> bool {
        let events = self.session.events();
        let closers: Vec<Event> = interrupted_turn_closers(events.iter());
        drop(events);
        let mut closed_turn = false;
        for c in closers {
            let ty = c.event_type().to_owned();
            if !whole && ty != "tool/result" {
                break;
            }
            if ty == "tool/result" {
                let code = c
                    .data()
                    .get("error")
                    .and_then(|e| e.get("code"))
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned();
                *self.report.closed_calls.entry(code).or_default() += 1;
            }
            let mut draft = Draft::new(c.event_type_arc().clone(), c.data().clone());
            if let Some(op) = c.surface_op_value() {
                draft = draft.surface_op_value(op.clone());
            }
            if let Some(s) = c.source_event_seqs_value() {
                draft = draft.sources_value(s.clone());
            }
            self.clock.set(c.time());
            if self.append(draft) && ty == "turn/end" {
                closed_turn = true;
            }
        }
        closed_turn
    }

    fn write_step_usage(&mut self) {
        let Some(u) = self.step_usage.take() else {
            return;
        };
        self.count_usage(&u);
        let id = self.message_id(&format!("usage-{}-{}", self.turn, self.step));
        let data = AssistantMessageData {
            turn: self.turn,
            step: self.step,
            message: Message::new(
                id,
                Role::Assistant,
                Vec::new(),
                MessageSource::Model(ModelSource {
                    provider: self.route.provider.clone(),
                    model: self.route.model.clone(),
                    ..ModelSource::default()
                }),
            ),
            usage: Some(u),
            ..AssistantMessageData::default()
        };
        self.append_serde(&data);
    }

    /// Ends the open step: the pending response, usage reported apart, synthetic results for
    /// calls left without one (repair's closers), then `step/end`.
    pub(crate) fn end_step(&mut self) {
        if !self.open_step {
            return;
        }
        self.flush();
        self.write_step_usage();
        if !self.step_calls.is_empty() {
            self.closers(false);
            self.step_calls.clear();
        }
        let (turn, step) = (self.turn, self.step);
        self.append_serde(&StepEnd {
            turn,
            step,
            ..StepEnd::default()
        });
        self.open_step = false;
        self.step_has_results = false;
    }

    /// Ends the open turn with `reason`.
    pub(crate) fn end_turn(&mut self, reason: TurnEndReason) {
        if !self.open_turn {
            return;
        }
        self.end_step();
        let turn = self.turn;
        self.append_serde(&TurnEnd {
            turn,
            reason,
            ..TurnEnd::default()
        });
        self.open_turn = false;
        self.turn_fresh = false;
    }

    /// Ends the open turn as aborted by the user.
    pub(crate) fn abort_turn(&mut self) {
        self.end_turn(TurnEndReason::Aborted(Aborted {
            reason: CancelCause::User(Bare::default()),
            ..Aborted::default()
        }));
    }

    /// A compaction: the whole current surface is replaced by `items` (the source tool's view
    /// after it), the first item's event citing every shadowed node in `sourceEventSeqs`.
    /// With no item the view becomes empty (an empty assistant message replaces it).
    pub(crate) fn compaction(&mut self, items: Vec<ViewItem>, id_base: &str) {
        self.end_step();
        self.ensure_step();
        let nodes = self.session.surface_nodes().to_vec();
        let mut items = items;
        if items.is_empty() && !nodes.is_empty() {
            items.push(ViewItem::Assistant(format!("{id_base}-empty"), Vec::new()));
        }
        for (i, item) in items.into_iter().enumerate() {
            let draft = match item {
                ViewItem::User(m) => Draft::from_serde(&m),
                ViewItem::Assistant(id, blocks) => {
                    let id = self.message_id(&id);
                    Draft::from_serde(&AssistantMessageData {
                        turn: self.turn,
                        step: self.step,
                        message: Message::new(
                            id,
                            Role::Assistant,
                            blocks,
                            MessageSource::Model(ModelSource {
                                provider: self.route.provider.clone(),
                                model: self.route.model.clone(),
                                ..ModelSource::default()
                            }),
                        ),
                        ..AssistantMessageData::default()
                    })
                }
            };
            let Ok(mut draft) = draft else { continue };
            if i == 0
                && let (Some(&first), Some(&last)) = (nodes.first(), nodes.last())
            {
                draft = draft.replace_op(first, last).sources(&nodes);
            }
            self.append(draft);
        }
        self.report.compactions += 1;
        self.end_step();
        for first in &mut self.turn_first_node {
            *first = u64::MAX - 1;
        }
    }

    /// A rollback of the last `n` turns: their surface range is replaced by an empty assistant
    /// message, so the model view no longer holds them. `false` when they are not on the
    /// surface (nothing to undo).
    pub(crate) fn rollback(&mut self, n: u64) -> bool {
        self.end_turn(TurnEndReason::Completed(Bare::default()));
        let firsts: Vec<u64> = self
            .turn_first_node
            .iter()
            .copied()
            .filter(|&s| s < u64::MAX - 1)
            .collect();
        let Ok(n) = usize::try_from(n) else {
            return false;
        };
        if n == 0 || firsts.is_empty() {
            return false;
        }
        let start = firsts[firsts.len().saturating_sub(n)];
        let nodes = self.session.surface_nodes().to_vec();
        let Some(pos) = nodes.iter().position(|&s| s == start) else {
            return false;
        };
        let shadowed: Vec<u64> = nodes[pos..].to_vec();
        let (Some(&first), Some(&last)) = (shadowed.first(), shadowed.last()) else {
            return false;
        };
        let keep = self.turn_first_node.len().saturating_sub(n);
        self.turn_first_node.truncate(keep);
        self.begin_turn();
        self.ensure_step();
        let id = self.message_id(&format!("rollback-{}", self.turn));
        let data = AssistantMessageData {
            turn: self.turn,
            step: self.step,
            message: Message::new(
                id,
                Role::Assistant,
                Vec::new(),
                MessageSource::Model(ModelSource {
                    provider: self.route.provider.clone(),
                    model: self.route.model.clone(),
                    ..ModelSource::default()
                }),
            ),
            ..AssistantMessageData::default()
        };
        let ok = match Draft::from_serde(&data) {
            Ok(d) => self.append(d.replace_op(first, last).sources(&shadowed)),
            Err(_) => false,
        };
        self.turn_first_node.pop();
        self.end_turn(TurnEndReason::Completed(Bare::default()));
        if ok {
            self.report.rollbacks += 1;
        }
        ok
    }

    /// Finishes the session: an open turn is closed with repair's closers (synthetic results,
    /// `turn/end` interrupted).
    pub(crate) fn finish(mut self) -> (Session, ImportReport) {
        if self.open_turn {
            self.flush();
            self.write_step_usage();
            if self.closers(true) {
                self.report.closed_turns += 1;
            }
        }
        (self.session, self.report)
    }
}
