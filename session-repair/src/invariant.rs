//! The optional turn/step invariant (`dsh-session/invariant`).

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use session_core::Event;
use session_core::header::js_string;
use session_core::json::Value;

use crate::closers::TOOL_NOT_STARTED;

/// The package the invariant reports violations for.
pub const INVARIANT_PACKAGE: &str = "@deepseek-ai/dsh-session";

/// A violation of the turn/step invariant.
///
/// Displays as `invariant violated by "@deepseek-ai/dsh-session": <message>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvariantError {
    message: String,
}

impl InvariantError {
    fn new(message: String) -> InvariantError {
        InvariantError { message }
    }

    /// The violation itself, without the `invariant violated by …` prefix.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The error's name, `"InvariantError"`.
    pub fn name(&self) -> &'static str {
        "InvariantError"
    }
}

impl fmt::Display for InvariantError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invariant violated by \"{INVARIANT_PACKAGE}\": {}",
            self.message
        )
    }
}

impl std::error::Error for InvariantError {}

/// A tool call id as the reference's `Set` would distinguish it (`SameValueZero` on primitives;
/// objects and arrays are never equal to anything, so they have no key).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum CallKey {
    Undefined,
    Null,
    Bool(bool),
    Number(u64),
    String(Arc<str>),
}

impl CallKey {
    fn of(v: Option<&Value>) -> Option<CallKey> {
        Some(match v {
            None => CallKey::Undefined,
            Some(Value::Null) => CallKey::Null,
            Some(Value::Bool(b)) => CallKey::Bool(*b),
            Some(Value::Number(n)) => {
                let x = n.as_f64();
                // SameValueZero: -0 equals 0.
                CallKey::Number(if x == 0.0 { 0 } else { x.to_bits() })
            }
            Some(Value::String(s)) => CallKey::String(s.clone()),
            Some(Value::Array(_) | Value::Object(_)) => return None,
        })
    }
}

/// Whether a JSON field (absent = `undefined`) is strictly equal to a trace slot
/// (`None` = `null`).
fn strict_eq(slot: Option<u64>, v: Option<&Value>) -> bool {
    match (slot, v) {
        (None, Some(Value::Null)) => true,
        (Some(n), Some(Value::Number(x))) => x.as_f64() == n as f64,
        _ => false,
    }
}

/// A trace slot as a template string prints it.
fn show(slot: Option<u64>) -> String {
    slot.map_or_else(|| "null".to_owned(), |n| n.to_string())
}

/// The invariant's state for one session.
///
/// `lastSeq` starts at −1 (`None`), no turn or step is open, the next turn and step are 1, and
/// no tool call is pending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trace {
    last_seq: Option<u64>,
    open_turn: Option<u64>,
    open_step: Option<u64>,
    next_turn: u64,
    next_step: u64,
    pending: HashSet<CallKey>,
}

impl Default for Trace {
    fn default() -> Trace {
        Trace::new()
    }
}

impl Trace {
    /// The state before any event.
    pub fn new() -> Trace {
        Trace {
            last_seq: None,
            open_turn: None,
            open_step: None,
            next_turn: 1,
            next_step: 1,
            pending: HashSet::new(),
        }
    }

    /// The trace of a whole log, checking every event in order; the first violation wins.
    pub fn replay<'a>(
        events: impl IntoIterator<Item = &'a Event>,
    ) -> Result<Trace, InvariantError> {
        let mut trace = Trace::new();
        for event in events {
            trace.check(event)?;
        }
        Ok(trace)
    }

    /// The seq of the last accepted event (`None` before any).
    pub fn last_seq(&self) -> Option<u64> {
        self.last_seq
    }

    /// The open turn, if any.
    pub fn open_turn(&self) -> Option<u64> {
        self.open_turn
    }

    /// The open step, if any.
    pub fn open_step(&self) -> Option<u64> {
        self.open_step
    }

    /// The number the next `turn/start` must carry.
    pub fn next_turn(&self) -> u64 {
        self.next_turn
    }

    /// The number the next `step/start` of the open turn must carry.
    pub fn next_step(&self) -> u64 {
        self.next_step
    }

    /// How many tool calls of the open step have no result yet.
    pub fn pending_calls(&self) -> usize {
        self.pending.len()
    }

    /// The trace after `event`, or the violation it commits. `self` is unchanged, so the
    /// result can be held as a staged transition and applied only once the event commits.
    pub fn stage(&self, event: &Event) -> Result<Trace, InvariantError> {
        let mut next = self.clone();
        next.check(event)?;
        Ok(next)
    }

    /// Checks `event` and advances the trace; on a violation the trace is unchanged.
    pub fn check(&mut self, event: &Event) -> Result<(), InvariantError> {
        self.validate(event)?;
        self.advance(event);
        Ok(())
    }

    /// The checks of §7.2, without changing anything.
    fn validate(&self, event: &Event) -> Result<(), InvariantError> {
        let fail = |m: String| Err(InvariantError::new(m));
        let seq = event.seq();
        if let Some(last) = self.last_seq
            && seq <= last
        {
            return fail(format!(
                "seq must strictly increase: saw {seq} after {last}"
            ));
        }
        let ty = event.event_type();
        // Chunks are most of a log: their `data` is not built just to read turn and step.
        let (turn, step) = event.turn_and_step();
        match ty {
            "turn/start" => {
                if let Some(open) = self.open_turn {
                    return fail(format!(
                        "turn/start {} while turn {open} is still open",
                        js_string(turn)
                    ));
                }
                if !strict_eq(Some(self.next_turn), turn) {
                    return fail(format!(
                        "turn/start expected turn {}, got {}",
                        self.next_turn,
                        js_string(turn)
                    ));
                }
            }
            "turn/end" => {
                if !strict_eq(self.open_turn, turn) {
                    return fail(format!(
                        "turn/end {} does not match open turn {}",
                        js_string(turn),
                        show(self.open_turn)
                    ));
                }
                if let Some(open) = self.open_step {
                    return fail(format!(
                        "turn/end {} while step {open} is still open",
                        js_string(turn)
                    ));
                }
            }
            "step/start" => {
                if !strict_eq(self.open_turn, turn) {
                    return fail(format!(
                        "step/start in turn {} but open turn is {}",
                        js_string(turn),
                        show(self.open_turn)
                    ));
                }
                if let Some(open) = self.open_step {
                    return fail(format!(
                        "step/start {} while step {open} is still open",
                        js_string(step)
                    ));
                }
                if !strict_eq(Some(self.next_step), step) {
                    return fail(format!(
                        "step/start expected step {} in turn {}, got {}",
                        self.next_step,
                        js_string(turn),
                        js_string(step)
                    ));
                }
            }
            "step/end" | "assistant/chunk" | "assistant/message" | "tool/call" => {
                self.names_open_step(ty, turn, step)?;
            }
            "tool/result" => {
                if event.surface_op_value().and_then(Value::as_str) == Some("append") {
                    self.names_open_step(ty, turn, step)?;
                    let data = event.data();
                    let message = data.get("message");
                    let call_id = message
                        .and_then(|m| m.get("source"))
                        .and_then(|s| s.get("callId"));
                    let pending = CallKey::of(call_id).is_some_and(|k| self.pending.contains(&k));
                    if !pending && !is_not_started_result(data) {
                        return fail(format!(
                            "tool/result for {} with no prior tool/call in this step",
                            js_string(call_id)
                        ));
                    }
                } else if self.open_turn.is_none() {
                    return fail(
                        "tool/result surface replacement appended outside any open turn".to_owned(),
                    );
                }
            }
            "todo/write" | "request/header" | "request/context" if self.open_turn.is_none() => {
                return fail(format!(
                    "{ty} appended outside any open turn (core execution events must be turn-enclosed)"
                ));
            }
            _ => {}
        }
        Ok(())
    }

    fn names_open_step(
        &self,
        ty: &str,
        turn: Option<&Value>,
        step: Option<&Value>,
    ) -> Result<(), InvariantError> {
        if strict_eq(self.open_turn, turn) && strict_eq(self.open_step, step) {
            return Ok(());
        }
        Err(InvariantError::new(format!(
            "{ty} names turn {}/step {} but open is turn {}/step {}",
            js_string(turn),
            js_string(step),
            show(self.open_turn),
            show(self.open_step)
        )))
    }

    /// Applies a validated event.
    fn advance(&mut self, event: &Event) {
        self.last_seq = Some(event.seq());
        match event.event_type() {
            "turn/start" => {
                self.open_turn = Some(self.next_turn);
                self.next_step = 1;
            }
            "turn/end" => {
                self.open_turn = None;
                self.next_turn = self.next_turn.saturating_add(1);
            }
            "step/start" => self.open_step = Some(self.next_step),
            "step/end" => {
                self.pending.clear();
                self.open_step = None;
                self.next_step = self.next_step.saturating_add(1);
            }
            "tool/call" => {
                if let Some(k) = CallKey::of(event.data().get("callId")) {
                    self.pending.insert(k);
                }
            }
            "tool/result" if event.surface_op_value().and_then(Value::as_str) == Some("append") => {
                let call_id = event
                    .data()
                    .get("message")
                    .and_then(|m| m.get("source"))
                    .and_then(|s| s.get("callId"));
                if let Some(k) = CallKey::of(call_id) {
                    self.pending.remove(&k);
                }
            }
            _ => {}
        }
    }
}

/// A synthetic not-started result: `content[0].isError === true` and
/// `error.code === "TOOL_NOT_STARTED"`.
fn is_not_started_result(data: &Value) -> bool {
    let is_error = data
        .get("message")
        .and_then(|m| m.get("content"))
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .and_then(|b| b.get("isError"))
        .and_then(Value::as_bool)
        == Some(true);
    is_error
        && data
            .get("error")
            .and_then(|e| e.get("code"))
            .and_then(Value::as_str)
            == Some(TOOL_NOT_STARTED)
}

/// The invariant over many sessions: one [`Trace`] per session id.
///
/// Checking is split in two so that it can run as a pre-commit veto: [`Invariant::stage`]
/// computes the next trace without changing anything, and [`Invariant::apply`] installs it
/// once the event has actually committed. A veto raised later in the same pre-commit phase
/// therefore never advances the trace. [`Invariant::check`] does both at once.
#[derive(Debug, Clone, Default)]
pub struct Invariant {
    traces: HashMap<Arc<str>, Trace>,
}

impl Invariant {
    /// An invariant that tracks no session yet.
    pub fn new() -> Invariant {
        Invariant::default()
    }

    /// The trace of a whole log (see [`Trace::replay`]).
    pub fn replay<'a>(
        events: impl IntoIterator<Item = &'a Event>,
    ) -> Result<Trace, InvariantError> {
        Trace::replay(events)
    }

    /// Starts (or restarts) tracking `session` from its whole log, as at creation or when the
    /// invariant is loaded over existing sessions. On a violation the session is not tracked
    /// and the error is returned, so that the creation can be rolled back.
    pub fn track<'a>(
        &mut self,
        session: impl Into<Arc<str>>,
        events: impl IntoIterator<Item = &'a Event>,
    ) -> Result<(), InvariantError> {
        let session = session.into();
        self.traces.remove(&session);
        let trace = Trace::replay(events)?;
        self.traces.insert(session, trace);
        Ok(())
    }

    /// Stops tracking `session`.
    pub fn forget(&mut self, session: &str) -> Option<Trace> {
        self.traces.remove(session)
    }

    /// Stops tracking every session.
    pub fn clear(&mut self) {
        self.traces.clear();
    }

    /// The trace of `session`, if it is tracked.
    pub fn trace(&self, session: &str) -> Option<&Trace> {
        self.traces.get(session)
    }

    /// Whether `session` is tracked.
    pub fn is_tracked(&self, session: &str) -> bool {
        self.traces.contains_key(session)
    }

    /// The trace `session` would have after `event` (an untracked session starts from
    /// [`Trace::new`]). Nothing changes.
    pub fn stage(&self, session: &str, event: &Event) -> Result<Trace, InvariantError> {
        match self.traces.get(session) {
            Some(trace) => trace.stage(event),
            None => Trace::new().stage(event),
        }
    }

    /// Installs a staged trace for `session`.
    pub fn apply(&mut self, session: impl Into<Arc<str>>, trace: Trace) {
        self.traces.insert(session.into(), trace);
    }

    /// Checks `event` for `session` and advances its trace; on a violation nothing changes.
    pub fn check(&mut self, session: &str, event: &Event) -> Result<(), InvariantError> {
        if let Some(trace) = self.traces.get_mut(session) {
            return trace.check(event);
        }
        let mut trace = Trace::new();
        trace.check(event)?;
        self.traces.insert(Arc::from(session), trace);
        Ok(())
    }
}
