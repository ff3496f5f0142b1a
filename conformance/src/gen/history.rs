//! Random valid histories: the builder that turns actions into drafts, and [`History`].

use std::fmt;
use std::sync::Arc;

use session_core::event::{is_surface_eligible_type, seq_value};
use session_core::json::{MAX_SAFE_INTEGER, Value};
use session_core::{FixedClock, SharedClock, SurfaceOp};
use session_surface::{Draft, Session};

use super::actions::{
    Action, AssistantSpec, BlockSpec, CompactSpec, ContextSpec, HeaderSpec, PluginSpec,
    RewriteSpec, StreamSpec, ToolResultSpec, ToolRoundSpec, UserSpec,
};

mod model;

/// The wall-clock time a generated session is created at (ms since the Unix epoch).
pub const START_TIME_MS: i64 = 1_783_352_050_748;

const PROVIDERS: [&str; 3] = ["deepseek-official", "openai", "local"];
const MODELS: [&str; 3] = ["deepseek-v4-flash", "deepseek-v4-pro", "tiny"];
const TOOL_NAMES: [&str; 4] = ["bash", "read", "write", "search"];

/// One draft of a history, kept in a form that is cheap to clone and print.
#[derive(Clone)]
pub(crate) struct Record {
    pub(crate) ty: Arc<str>,
    pub(crate) data: Value,
    pub(crate) surface_op: Option<Value>,
    pub(crate) sources: Option<Value>,
}

impl Record {
    pub(crate) fn new(ty: &str, data: Value) -> Record {
        Record {
            ty: Arc::from(ty),
            data,
            surface_op: None,
            sources: None,
        }
    }

    pub(crate) fn append(mut self) -> Record {
        self.surface_op = Some(SurfaceOp::Append.to_value());
        self
    }

    pub(crate) fn replace(mut self, start: u64, end: u64) -> Record {
        self.surface_op = Some(SurfaceOp::Replace { start, end }.to_value());
        self
    }

    pub(crate) fn sources(mut self, seqs: &[u64]) -> Record {
        self.sources = Some(Value::array(seqs.iter().map(|s| seq_value(*s))));
        self
    }

    pub(crate) fn to_draft(&self) -> Draft {
        let mut draft = Draft::new(self.ty.clone(), self.data.clone());
        draft.surface_op.clone_from(&self.surface_op);
        draft.source_event_seqs.clone_from(&self.sources);
        // Plugin events of unknown types are marked ignorable, as readers require.
        draft.ignorable = !session_core::event::is_known_event_type(&self.ty);
        draft
    }
}

impl fmt::Debug for Record {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.ty, self.data.to_json())?;
        if let Some(op) = &self.surface_op {
            write!(f, " surfaceOp={}", op.to_json())?;
        }
        if let Some(s) = &self.sources {
            write!(f, " sourceEventSeqs={}", s.to_json())?;
        }
        Ok(())
    }
}

/// A session's drafts that a harness could have appended, one event per draft, with the wall
/// clock at each append and the points where views were read or a fork was taken.
///
/// Every history is valid: applying its drafts in order to a fresh [`Session`] must succeed,
/// and it satisfies the optional turn/step invariant (turns numbered from 1, steps from 1
/// within a turn, chunks, messages and tool calls inside the open step, every appended
/// `tool/result` answering a `tool/call` of its step).
#[derive(Clone)]
pub struct History {
    pub(crate) id: Arc<str>,
    pub(crate) records: Vec<Record>,
    pub(crate) times: Vec<i64>,
    pub(crate) reads: Vec<usize>,
    pub(crate) forks: Vec<u64>,
}

/// A history draft that a session refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildError {
    /// Index of the refused draft (its seq).
    pub index: usize,
    /// The draft, printed.
    pub draft: String,
    /// The session's error message.
    pub error: String,
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "draft {} ({}) was refused: {}",
            self.index, self.draft, self.error
        )
    }
}

impl std::error::Error for BuildError {}

impl History {
    /// A history of the given drafts, all appended at [`START_TIME_MS`] (for regression
    /// tests that replay a fixed history). Nothing is validated until it is built.
    pub fn from_drafts(id: &str, drafts: &[Draft]) -> History {
        History {
            id: Arc::from(id),
            records: drafts
                .iter()
                .map(|d| Record {
                    ty: d.ty.clone(),
                    data: d.data.clone(),
                    surface_op: d.surface_op.clone(),
                    sources: d.source_event_seqs.clone(),
                })
                .collect(),
            times: vec![START_TIME_MS; drafts.len()],
            reads: Vec::new(),
            forks: Vec::new(),
        }
    }

    /// The session id the history is built under.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Number of drafts (and of events the built session has).
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether there are no drafts.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// The drafts, in append order.
    pub fn drafts(&self) -> Vec<Draft> {
        self.records.iter().map(Record::to_draft).collect()
    }

    /// The draft at `index`.
    pub fn draft(&self, index: usize) -> Option<Draft> {
        self.records.get(index).map(Record::to_draft)
    }

    /// The wall-clock time (ms) at each append; not monotonic.
    pub fn times(&self) -> &[i64] {
        &self.times
    }

    /// Numbers of drafts applied before each read of the derived views, in order.
    pub fn read_points(&self) -> &[usize] {
        &self.reads
    }

    /// Fork boundaries (inclusive seqs) the history asks for; each is a closed-turn boundary.
    pub fn fork_points(&self) -> &[u64] {
        &self.forks
    }

    /// Every seq `b` whose prefix `0..=b` does not end inside an open turn: the boundaries a
    /// fork must accept.
    pub fn closed_turn_boundaries(&self) -> Vec<u64> {
        let mut open = false;
        let mut out = Vec::new();
        for (i, r) in self.records.iter().enumerate() {
            match &*r.ty {
                "turn/start" => open = true,
                "turn/end" => open = false,
                _ => {}
            }
            if !open {
                out.push(i as u64);
            }
        }
        out
    }

    /// The surface the drafts must produce, computed by this crate's own model of the rules
    /// (append pushes the seq; replace splices the range out and puts the seq at its start),
    /// independently of the implementation under test.
    pub fn model_nodes(&self) -> Vec<u64> {
        let mut nodes: Vec<u64> = Vec::new();
        for (i, r) in self.records.iter().enumerate() {
            if !is_surface_eligible_type(&r.ty) {
                continue;
            }
            match r
                .surface_op
                .as_ref()
                .and_then(|v| SurfaceOp::from_value(v).ok())
            {
                Some(SurfaceOp::Append) => nodes.push(i as u64),
                Some(SurfaceOp::Replace { start, end }) => {
                    let a = nodes.iter().position(|n| *n == start);
                    let b = nodes.iter().position(|n| *n == end);
                    if let (Some(a), Some(b)) = (a, b) {
                        nodes.splice(a..=b, [i as u64]);
                    }
                }
                None => {}
            }
        }
        nodes
    }

    /// The request header the drafts fold to, computed by this crate's own reading of the
    /// rules (session-core §4): the last `request/header` wins, in canonical form (`config`;
    /// `adapterDefaults` only when a marker is `true`; `system` only when non-empty; `tools`
    /// only when non-empty).
    pub fn model_request_header(&self) -> Option<Value> {
        let header = self
            .records
            .iter()
            .rev()
            .find(|r| &*r.ty == "request/header")?
            .data
            .get("header")?
            .as_object()?
            .clone();
        let mut out: Vec<(&str, Value)> = vec![("config", header.get("config")?.clone())];
        if let Some(defaults) = header.get("adapterDefaults") {
            let marked = |k: &str| defaults.get(k).and_then(Value::as_bool) == Some(true);
            if marked("reasoningEffort") || marked("maxTokens") {
                out.push(("adapterDefaults", defaults.clone()));
            }
        }
        if let Some(system) = header.get("system").filter(|s| s.is_non_empty_str()) {
            out.push(("system", system.clone()));
        }
        if let Some(tools) = header
            .get("tools")
            .filter(|t| t.as_array().is_some_and(|a| !a.is_empty()))
        {
            out.push(("tools", tools.clone()));
        }
        Some(Value::object(out))
    }

    /// The request context the drafts fold to: the last `request/context` data.
    pub fn model_request_context(&self) -> Option<Value> {
        self.records
            .iter()
            .rev()
            .find(|r| &*r.ty == "request/context")
            .map(|r| r.data.clone())
    }

    /// Whether the history ends inside an open turn.
    pub fn ends_in_open_turn(&self) -> bool {
        self.records
            .iter()
            .rev()
            .find(|r| matches!(&*r.ty, "turn/start" | "turn/end"))
            .is_some_and(|r| &*r.ty == "turn/start")
    }

    /// The history cut after its first `len` drafts (an interrupted history: a crash can cut
    /// a log at any event). Read and fork points past the cut are dropped.
    #[must_use]
    pub fn prefix(&self, len: usize) -> History {
        let len = len.min(self.records.len());
        History {
            id: self.id.clone(),
            records: self.records[..len].to_vec(),
            times: self.times[..len].to_vec(),
            reads: self.reads.iter().copied().filter(|r| *r <= len).collect(),
            forks: self
                .forks
                .iter()
                .copied()
                .filter(|f| (*f as usize) < len)
                .collect(),
        }
    }

    /// A fresh clock at the history's start time.
    pub fn clock(&self) -> Arc<FixedClock> {
        Arc::new(FixedClock::new(START_TIME_MS))
    }

    /// Creates the empty session the drafts are applied to (created at [`START_TIME_MS`]).
    pub fn empty_session(&self, clock: &Arc<FixedClock>) -> Session {
        clock.set(START_TIME_MS);
        let shared: SharedClock = clock.clone();
        match Session::create(self.id.clone(), None, None, shared) {
            Ok(session) => session,
            Err(e) => panic!("a session without seed and header must be creatable: {e}"),
        }
    }

    /// Applies the drafts to a fresh session, calling `after` with the session and the
    /// number of drafts applied so far after each one (and once before the first).
    pub fn replay(
        &self,
        mut after: impl FnMut(&Session, usize),
    ) -> Result<(Session, Arc<FixedClock>), BuildError> {
        let clock = self.clock();
        let mut session = self.empty_session(&clock);
        after(&session, 0);
        for (i, (record, time)) in self.records.iter().zip(&self.times).enumerate() {
            clock.set(*time);
            if let Err(e) = session.append(record.to_draft()) {
                return Err(BuildError {
                    index: i,
                    draft: format!("{record:?}"),
                    error: e.to_string(),
                });
            }
            after(&session, i + 1);
        }
        Ok((session, clock))
    }

    /// Applies the drafts to a fresh session.
    pub fn try_build(&self) -> Result<Session, BuildError> {
        self.replay(|_, _| {}).map(|(s, _)| s)
    }

    /// Applies the drafts to a fresh session.
    ///
    /// # Panics
    ///
    /// When the session refuses a draft: every generated history is valid, so a refusal is a
    /// conformance failure of the session.
    pub fn build(&self) -> Session {
        match self.try_build() {
            Ok(s) => s,
            Err(e) => panic!("valid history refused: {e}\n{self:?}"),
        }
    }
}

impl fmt::Debug for History {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "History {:?} ({} drafts, reads at {:?}, forks at {:?})",
            self.id,
            self.records.len(),
            self.reads,
            self.forks
        )?;
        for (i, (r, t)) in self.records.iter().zip(&self.times).enumerate() {
            writeln!(f, "  {i:>4} @{t} {r:?}")?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone)]
struct Call {
    id: String,
    name: String,
    arguments: String,
    recorded_at: Option<u64>,
}

/// The model of a session a history is built against: everything needed to choose valid
/// next drafts.
pub(crate) struct Builder {
    pub(crate) records: Vec<Record>,
    times: Vec<i64>,
    reads: Vec<usize>,
    forks: Vec<u64>,
    time: i64,
    /// The surface, in surface order, as the spec defines it (§3.2).
    pub(crate) nodes: Vec<u64>,
    pub(crate) turn: Option<u64>,
    next_turn: u64,
    pub(crate) step: Option<u64>,
    next_step: u64,
    announced: Vec<Call>,
    called: Vec<Call>,
    counter: u64,
    provider: &'static str,
    model: &'static str,
}

fn s(text: &str) -> Value {
    Value::from(text)
}

fn text_block(text: &str) -> Value {
    Value::object([("type", s("text")), ("text", s(text))])
}

fn u(n: u64) -> Value {
    seq_value(n)
}

impl Builder {
    pub(crate) fn new() -> Builder {
        Builder {
            records: Vec::new(),
            times: Vec::new(),
            reads: Vec::new(),
            forks: Vec::new(),
            time: START_TIME_MS,
            nodes: Vec::new(),
            turn: None,
            next_turn: 1,
            step: None,
            next_step: 1,
            announced: Vec::new(),
            called: Vec::new(),
            counter: 0,
            provider: PROVIDERS[0],
            model: MODELS[0],
        }
    }

    /// Runs every action.
    pub(crate) fn run(actions: &[Action]) -> Builder {
        let mut b = Builder::new();
        for a in actions {
            b.act(a);
        }
        b
    }

    pub(crate) fn finish(self, id: &str) -> History {
        History {
            id: Arc::from(id),
            records: self.records,
            times: self.times,
            reads: self.reads,
            forks: self.forks,
        }
    }

    /// The seq the next draft gets.
    pub(crate) fn seq(&self) -> u64 {
        self.records.len() as u64
    }

    pub(crate) fn next_id(&mut self, prefix: &str) -> String {
        self.counter += 1;
        format!("{prefix}-{}", self.counter)
    }

    /// Records a draft and updates the model surface.
    pub(crate) fn push(&mut self, record: Record) -> u64 {
        let seq = self.seq();
        if is_surface_eligible_type(&record.ty) {
            match record
                .surface_op
                .as_ref()
                .and_then(|v| SurfaceOp::from_value(v).ok())
            {
                Some(SurfaceOp::Append) => self.nodes.push(seq),
                Some(SurfaceOp::Replace { start, end }) => {
                    let i = self.nodes.iter().position(|n| *n == start);
                    let j = self.nodes.iter().position(|n| *n == end);
                    if let (Some(i), Some(j)) = (i, j) {
                        self.nodes.splice(i..=j, [seq]);
                    }
                }
                None => {}
            }
        }
        self.records.push(record);
        self.times.push(self.time);
        seq
    }

    /// Picks distinct earlier seqs from selectors, skipping `exclude`.
    pub(crate) fn earlier(&self, selectors: &[usize], exclude: &[u64]) -> Vec<u64> {
        let seq = self.seq();
        let mut out: Vec<u64> = Vec::new();
        if seq == 0 {
            return out;
        }
        for sel in selectors {
            let pick = (*sel as u64) % seq;
            if !exclude.contains(&pick) && !out.contains(&pick) {
                out.push(pick);
            }
        }
        out
    }

    fn act(&mut self, action: &Action) {
        match action {
            Action::User(spec) => self.user(spec),
            Action::TurnStart => {
                if self.turn.is_none() {
                    self.turn_start();
                }
            }
            Action::TurnEnd(kind) => self.turn_end(*kind),
            Action::StepStart => {
                self.ensure_turn();
                self.step_end();
                self.step_start();
            }
            Action::StepEnd => self.step_end(),
            Action::Stream(spec) => self.stream(spec),
            Action::Assistant(spec) => self.assistant(spec),
            Action::ToolCall(pick) => self.tool_call(*pick),
            Action::ToolResult(spec) => self.tool_result(spec),
            Action::ToolRound(spec) => self.tool_round(spec),
            Action::Header(spec) => self.header(spec),
            Action::Context(spec) => self.context(spec),
            Action::Compact(spec) => self.compact(spec),
            Action::Rewrite(spec) => self.rewrite(spec),
            Action::Plugin(spec) => self.plugin(spec),
            Action::Read => self.reads.push(self.records.len()),
            Action::Fork => {
                if self.turn.is_none() && !self.records.is_empty() {
                    let b = self.seq() - 1;
                    if self.forks.last() != Some(&b) {
                        self.forks.push(b);
                    }
                }
            }
            Action::Tick(dt) => {
                self.time = self
                    .time
                    .saturating_add(*dt)
                    .clamp(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER);
            }
        }
    }

    pub(crate) fn user_message(&mut self, texts: &[String], source: u8) -> Value {
        let id = self.next_id("msg");
        let source = match source {
            0 | 1 => Value::object([("kind", s("user"))]),
            2 => Value::object([("kind", s("plugin")), ("plugin", s("watcher"))]),
            _ => Value::object([
                ("kind", s("plugin")),
                ("plugin", s("@deepseek-ai/dsh-system-prompt")),
                ("form", s("notice")),
                ("summary", s("runtime context")),
            ]),
        };
        Value::object([
            ("id", s(&id)),
            ("role", s("user")),
            ("content", Value::array(texts.iter().map(|t| text_block(t)))),
            ("source", source),
        ])
    }

    fn user(&mut self, spec: &UserSpec) {
        let data = self.user_message(&spec.texts, spec.source);
        let mut record = Record::new("user/message", data).append();
        let sources = self.earlier(&spec.sources, &[]);
        if !sources.is_empty() {
            record = record.sources(&sources);
        }
        self.push(record);
    }

    fn turn_start(&mut self) {
        let turn = self.next_turn;
        self.push(Record::new(
            "turn/start",
            Value::object([("turn", u(turn))]),
        ));
        self.turn = Some(turn);
        self.next_step = 1;
    }

    pub(crate) fn ensure_turn(&mut self) -> u64 {
        if let Some(t) = self.turn {
            return t;
        }
        let turn = self.next_turn;
        self.turn_start();
        turn
    }

    fn step_start(&mut self) {
        let turn = self.ensure_turn();
        let step = self.next_step;
        self.push(Record::new(
            "step/start",
            Value::object([("turn", u(turn)), ("step", u(step))]),
        ));
        self.step = Some(step);
    }

    /// Opens a turn and a step when needed; returns them.
    pub(crate) fn ensure_step(&mut self) -> (u64, u64) {
        let turn = self.ensure_turn();
        if self.step.is_none() {
            self.step_start();
        }
        (turn, self.step.unwrap_or(self.next_step))
    }

    fn step_end(&mut self) {
        if let (Some(turn), Some(step)) = (self.turn, self.step) {
            self.push(Record::new(
                "step/end",
                Value::object([("turn", u(turn)), ("step", u(step))]),
            ));
            self.step = None;
            self.next_step += 1;
            self.announced.clear();
            self.called.clear();
        }
    }

    fn turn_end(&mut self, kind: u8) {
        let Some(turn) = self.turn else {
            return;
        };
        self.step_end();
        let reason = match kind {
            0 => Value::object([("kind", s("completed"))]),
            1 => Value::object([
                ("kind", s("aborted")),
                ("reason", Value::object([("kind", s("user"))])),
            ]),
            2 => Value::object([("kind", s("blocked"))]),
            3 => Value::object([
                ("kind", s("error")),
                (
                    "error",
                    Value::object([("message", s("overloaded")), ("code", s("OVERLOADED"))]),
                ),
            ]),
            4 => Value::object([("kind", s("max-tokens"))]),
            _ => Value::object([
                ("kind", s("aborted")),
                (
                    "reason",
                    Value::object([("kind", s("hook")), ("reason", s("stop"))]),
                ),
            ]),
        };
        self.push(Record::new(
            "turn/end",
            Value::object([("turn", u(turn)), ("reason", reason)]),
        ));
        self.turn = None;
        self.next_turn += 1;
        self.announced.clear();
        self.called.clear();
    }

    fn tool_round(&mut self, spec: &ToolRoundSpec) {
        let before = self.announced.len();
        self.stream(&spec.stream);
        let new: Vec<String> = self.announced[before.min(self.announced.len())..]
            .iter()
            .map(|c| c.id.clone())
            .collect();
        for (id, (record, _)) in new.iter().zip(&spec.calls) {
            let position = self.announced.iter().position(|c| &c.id == id);
            if let (true, Some(k)) = (*record, position) {
                self.tool_call(k);
            }
        }
        for (id, (_, result)) in new.iter().zip(&spec.calls) {
            let position = self.called.iter().position(|c| &c.id == id);
            if let (Some(result), Some(k)) = (result, position) {
                self.tool_result(&ToolResultSpec {
                    pick: k,
                    ..result.clone()
                });
            }
        }
    }

    fn tool_call(&mut self, pick: usize) {
        let (Some(turn), Some(step)) = (self.turn, self.step) else {
            return;
        };
        if self.announced.is_empty() {
            return;
        }
        let mut call = self.announced.remove(pick % self.announced.len());
        let seq = self.push(Record::new(
            "tool/call",
            Value::object([
                ("turn", u(turn)),
                ("step", u(step)),
                ("callId", s(&call.id)),
                ("name", s(&call.name)),
                ("arguments", s(&call.arguments)),
            ]),
        ));
        call.recorded_at = Some(seq);
        self.called.push(call);
    }

    /// A `tool/result` payload.
    pub(crate) fn tool_result_data(
        &mut self,
        turn: u64,
        step: u64,
        call_id: &str,
        text: &str,
        error_mode: u8,
        meta: Option<Value>,
    ) -> Value {
        let id = self.next_id("result");
        let mut block = vec![
            ("type", s("tool-result")),
            ("toolCallId", s(call_id)),
            ("content", Value::array([text_block(text)])),
        ];
        match error_mode {
            1 => block.push(("isError", Value::Bool(false))),
            2 => block.push(("isError", Value::Bool(true))),
            _ => {}
        }
        let message = Value::object([
            ("id", s(&id)),
            ("role", s("user")),
            (
                "source",
                Value::object([("kind", s("tool")), ("callId", s(call_id))]),
            ),
            ("content", Value::array([Value::object(block)])),
        ]);
        let mut data = vec![("turn", u(turn)), ("step", u(step)), ("message", message)];
        if error_mode == 2 {
            data.push((
                "error",
                Value::object([("name", s("ToolError")), ("code", s("TOOL_FAILED"))]),
            ));
        }
        if let Some(meta) = meta {
            data.push(("meta", meta));
        }
        Value::object(data)
    }

    fn tool_result(&mut self, spec: &ToolResultSpec) {
        let (Some(turn), Some(step)) = (self.turn, self.step) else {
            return;
        };
        if self.called.is_empty() {
            return;
        }
        let call = self.called.remove(spec.pick % self.called.len());
        let data = self.tool_result_data(
            turn,
            step,
            &call.id,
            &spec.text,
            spec.error_mode,
            spec.meta.clone(),
        );
        let mut record = Record::new("tool/result", data).append();
        if let (true, Some(call_seq)) = (spec.cite, call.recorded_at) {
            record = record.sources(&[call_seq]);
        }
        self.push(record);
    }

    fn header(&mut self, spec: &HeaderSpec) {
        self.ensure_turn();
        let provider = PROVIDERS[usize::from(spec.provider) % PROVIDERS.len()];
        let model = MODELS[usize::from(spec.model) % MODELS.len()];
        let mut config = vec![("provider", s(provider)), ("model", s(model))];
        if let Some(e) = spec.reasoning_effort {
            config.push((
                "reasoningEffort",
                s(["low", "medium", "high"][usize::from(e) % 3]),
            ));
        }
        if let Some(t) = spec.temperature {
            let t = [0.0, 0.2, 0.7, 1.0, 1.5][usize::from(t) % 5];
            if let Some(n) = session_core::json::Number::from_f64(t) {
                config.push(("temperature", Value::Number(n)));
            }
        }
        if let Some(m) = spec.max_tokens {
            config.push(("maxTokens", Value::from(m)));
        }
        if let Some(stop) = &spec.stop {
            config.push(("stop", Value::array(stop.iter().map(|x| s(x)))));
        }
        let mut header = vec![("config", Value::object(config))];
        match spec.adapter_defaults {
            1 => header.push(("adapterDefaults", Value::empty_object())),
            2 | 3 => {
                let mut markers = Vec::new();
                if spec.reasoning_effort.is_some() && spec.adapter_defaults == 2 {
                    markers.push(("reasoningEffort", Value::Bool(true)));
                }
                if spec.max_tokens.is_some() {
                    markers.push(("maxTokens", Value::Bool(true)));
                }
                header.push(("adapterDefaults", Value::object(markers)));
            }
            _ => {}
        }
        if let Some(system) = &spec.system {
            header.push(("system", s(system)));
        }
        if !spec.tools.is_empty() || spec.reason == 0 {
            header.push((
                "tools",
                Value::array(spec.tools.iter().map(|t| {
                    let name = TOOL_NAMES[usize::from(*t) % TOOL_NAMES.len()];
                    Value::object([
                        ("name", s(name)),
                        ("description", s(&format!("The {name} tool."))),
                        (
                            "parameters",
                            Value::object([
                                ("type", s("object")),
                                ("properties", Value::empty_object()),
                            ]),
                        ),
                    ])
                })),
            ));
        }
        let reason = ["initial", "resume", "change"][usize::from(spec.reason) % 3];
        self.push(Record::new(
            "request/header",
            Value::object([("header", Value::object(header)), ("reason", s(reason))]),
        ));
        self.provider = provider;
        self.model = model;
    }

    fn context(&mut self, spec: &ContextSpec) {
        self.ensure_turn();
        let mut data = vec![
            (
                "provider",
                s(PROVIDERS[usize::from(spec.provider) % PROVIDERS.len()]),
            ),
            ("model", s(MODELS[usize::from(spec.model) % MODELS.len()])),
        ];
        if let Some(w) = spec.context_window {
            data.push(("contextWindow", Value::from(w)));
        }
        self.push(Record::new("request/context", Value::object(data)));
    }

    fn compact(&mut self, spec: &CompactSpec) {
        if self.nodes.is_empty() {
            return;
        }
        let record = if spec.by_assistant {
            let (turn, step) = self.ensure_step();
            let content = if spec.empty {
                Vec::new()
            } else {
                vec![text_block(&spec.summary)]
            };
            self.assistant_record(turn, step, content, None)
        } else {
            let data = self.user_message(std::slice::from_ref(&spec.summary), 3);
            Record::new("user/message", data)
        };
        let len = self.nodes.len();
        let i = spec.start % len;
        let j = i + spec.width % (len - i);
        let covered: Vec<u64> = self.nodes[i..=j].to_vec();
        let (start, end) = (self.nodes[i], self.nodes[j]);
        let mut sources = covered.clone();
        sources.extend(self.earlier(&spec.extra, &covered));
        if spec.bookkeeping & 1 != 0 {
            // The reference's compact plugin records its summary first and cites it.
            let summary = Value::object([
                ("compactionId", Value::from(self.next_id("compaction"))),
                ("summary", Value::array([text_block(&spec.summary)])),
                (
                    "shadowedRange",
                    Value::object([("start", seq_value(start)), ("end", seq_value(end))]),
                ),
                (
                    "shadowedSeqs",
                    Value::array(covered.iter().map(|&n| seq_value(n))),
                ),
                ("shadowedTokenCount", Value::from(0u8)),
                ("provider", Value::from("deepseek")),
                ("model", Value::from("deepseek-chat")),
            ]);
            sources.push(self.push(Record::new("compaction/summary", summary)));
        }
        if spec.reverse {
            sources.reverse();
        }
        let record = record.replace(start, end).sources(&sources);
        let seq = self.push(record);
        if spec.bookkeeping & 2 != 0 {
            let cited: Vec<Value> = self.nodes.iter().take(3).map(|&n| seq_value(n)).collect();
            let title = Value::object([
                ("title", Value::from(spec.summary.as_str())),
                ("messageSeqs", Value::array(cited)),
                ("source", Value::object([("kind", Value::from("fallback"))])),
            ]);
            self.push(Record::new("session/title", title));
        }
        if spec.bookkeeping & 4 != 0 {
            let done = Value::object([
                ("commandId", Value::from(self.next_id("command"))),
                ("kind", Value::from("success")),
                ("sourceEventSeq", seq_value(seq)),
            ]);
            self.push(Record::new("command/done", done));
        }
    }

    /// The current surface nodes that are `tool/result` events.
    pub(crate) fn tool_result_nodes(&self) -> Vec<u64> {
        self.nodes
            .iter()
            .copied()
            .filter(|n| {
                self.records
                    .get(*n as usize)
                    .is_some_and(|r| &*r.ty == "tool/result")
            })
            .collect()
    }

    /// `data` of the `tool/result` at `seq` with `content[0].content` replaced.
    pub(crate) fn rewritten(&self, seq: u64, text: &str) -> Option<Value> {
        let data = self.records.get(seq as usize)?.data.as_object()?;
        let message = data.get("message")?.as_object()?;
        let content = message.get("content")?.as_array()?;
        let first = content.first()?.as_object()?;
        let first = first.with("content", Value::array([text_block(text)]));
        let mut blocks = vec![Value::Object(first)];
        blocks.extend(content.iter().skip(1).cloned());
        let message = message.with("content", Value::array(blocks));
        Some(Value::Object(data.with("message", Value::Object(message))))
    }

    fn rewrite(&mut self, spec: &RewriteSpec) {
        let candidates = self.tool_result_nodes();
        if candidates.is_empty() {
            return;
        }
        let target = candidates[spec.pick % candidates.len()];
        let Some(data) = self.rewritten(target, &spec.text) else {
            return;
        };
        self.ensure_turn();
        let mut sources = vec![target];
        sources.extend(self.earlier(&spec.extra, &[target]));
        let record = Record::new("tool/result", data)
            .replace(target, target)
            .sources(&sources);
        self.push(record);
    }

    fn plugin(&mut self, spec: &PluginSpec) {
        let record = match spec.kind {
            0 => Record::new(&format!("x-{}/event", spec.name), spec.data.clone()),
            1 | 2 => Record::new(
                "feedback/record",
                Value::object([("text", s(&spec.name)), ("extra", spec.data.clone())]),
            ),
            3 => {
                self.ensure_turn();
                Record::new(
                    "todo/write",
                    Value::object([(
                        "todos",
                        Value::array([Value::object([
                            ("content", s(&spec.name)),
                            ("status", s("in_progress")),
                        ])]),
                    )]),
                )
            }
            4 => {
                let seqs: Vec<Value> = self.nodes.iter().take(2).map(|n| u(*n)).collect();
                Record::new(
                    "session/title",
                    Value::object([
                        ("title", s(&spec.name)),
                        ("messageSeqs", Value::array(seqs)),
                        ("source", Value::object([("kind", s("fallback"))])),
                    ]),
                )
            }
            _ => Record::new(
                "plan/mode",
                Value::object([("active", Value::Bool(spec.name.len().is_multiple_of(2)))]),
            ),
        };
        self.push(record);
    }
}
