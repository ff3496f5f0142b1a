//! Request-header (`request/header`) canonicalisation, equality and folding, and the
//! `request/context` fold.
//!
//! A `request/header` event records the envelope of the model requests that follow it:
//! `data = {header: {config, adapterDefaults?, system?, tools?}, reason}`. Anyone holding the
//! log can rebuild the header in force at any point by folding these events
//! ([`fold_request_header`], or incrementally with [`RequestHeaderFold`]).
//!
//! Every function here accepts any JSON value and never panics: a live `append` does not check
//! the shape of a `request/header` (only the seed path does, see
//! [`check_request_header_shape`]), so the folds must cope with whatever was logged. Where the
//! reference would throw a `TypeError` on a malformed value (for example a `null` header), the
//! behaviour chosen here is documented on each function.

use std::fmt;
use std::sync::Arc;

use crate::event::Event;
use crate::json::{self, Object, Value};

/// The event type of a request-header record.
pub const REQUEST_HEADER: &str = "request/header";

/// The event type of a request-context record.
pub const REQUEST_CONTEXT: &str = "request/context";

/// The legacy delta-encoded header event, refused everywhere.
pub const REQUEST_HEADER_DELTA: &str = "request/header-delta";

/// `canonicalHeader`: the comparable form of a request header.
///
/// Builds a new object with keys in this order:
/// - `config`: the same value (shared, not copied); omitted only when the header has no
///   `config` key (a present `null` is kept);
/// - `adapterDefaults`: the whole original value, kept only when its `reasoningEffort` or its
///   `maxTokens` is exactly `true`;
/// - `system`: kept only when it has a positive length (a non-empty string; a non-empty
///   array is kept too, as the reference's length test does);
/// - `tools`: kept only when it has a positive length (a non-empty array; likewise a
///   non-empty string).
///
/// A header that is not an object (absent, `null`, a string, an array, …) has none of these
/// keys and yields the empty object `{}`. The reference throws a `TypeError` for `null` and
/// `undefined` and yields `{}` for the other non-objects.
///
/// ```
/// use session_core::{json::Value, request::canonical_header};
///
/// let header = Value::parse(
///     r#"{"tools":[],"system":"","adapterDefaults":{},"config":{"provider":"p","model":"m"}}"#,
/// )?;
/// assert_eq!(
///     canonical_header(&header).to_json(),
///     r#"{"config":{"provider":"p","model":"m"}}"#
/// );
/// # Ok::<(), session_core::json::ParseError>(())
/// ```
pub fn canonical_header(header: &Value) -> Value {
    let Some(obj) = header.as_object() else {
        return Value::empty_object();
    };
    let mut entries: Vec<(Arc<str>, Value)> = Vec::with_capacity(4);
    if let Some(config) = obj.get("config") {
        entries.push((json::key("config"), config.clone()));
    }
    if let Some(defaults) = obj.get("adapterDefaults")
        && (is_true(defaults.get("reasoningEffort")) || is_true(defaults.get("maxTokens")))
    {
        entries.push((json::key("adapterDefaults"), defaults.clone()));
    }
    if let Some(system) = obj.get("system")
        && has_positive_length(system)
    {
        entries.push((json::key("system"), system.clone()));
    }
    if let Some(tools) = obj.get("tools")
        && has_positive_length(tools)
    {
        entries.push((json::key("tools"), tools.clone()));
    }
    Value::Object(Object::from_entries(entries))
}

fn is_true(v: Option<&Value>) -> bool {
    matches!(v, Some(Value::Bool(true)))
}

/// JavaScript `v.length > 0` for the values that have a length.
fn has_positive_length(v: &Value) -> bool {
    match v {
        Value::String(s) => !s.is_empty(),
        Value::Array(items) => !items.is_empty(),
        _ => false,
    }
}

/// `headerEquals`: whether two (canonical) request headers describe the same request envelope.
///
/// True only if all of these hold:
/// - the `config`s are equal under `callConfigEquals`: `provider`, `model`,
///   `reasoningEffort`, `temperature` and `maxTokens` strictly equal (absent equals only
///   absent), and `stop` absent on both sides or arrays of equal length with strictly equal
///   elements; other config keys are ignored;
/// - `adapterDefaults.reasoningEffort` and `adapterDefaults.maxTokens` strictly equal (a
///   missing `adapterDefaults` reads as absent markers);
/// - `system` strictly equal;
/// - the tool lists equal in order (absent or `null` reads as `[]`), each pair compared by
///   `JSON.stringify` equality, which is sensitive to key order.
///
/// "Strictly equal" is JavaScript `===`: scalars by value, arrays and objects by identity
/// ([`Value::ptr_eq`]). Where the reference would throw on a malformed value (a missing
/// `config`, a non-array `stop` or `tools`), this function instead reads a missing `config` as
/// one with no fields and compares a non-array `stop` or `tools` strictly.
///
/// ```
/// use session_core::{json::Value, request::header_equals};
///
/// let a = Value::parse(r#"{"config":{"provider":"p","model":"m"}}"#)?;
/// let b = Value::parse(r#"{"config":{"model":"m","provider":"p"},"tools":[]}"#)?;
/// assert!(header_equals(&a, &b));
/// # Ok::<(), session_core::json::ParseError>(())
/// ```
pub fn header_equals(a: &Value, b: &Value) -> bool {
    if !call_config_equals(a.get("config"), b.get("config")) {
        return false;
    }
    let (da, db) = (a.get("adapterDefaults"), b.get("adapterDefaults"));
    for marker in ["reasoningEffort", "maxTokens"] {
        if !strict_eq_opt(
            da.and_then(|d| d.get(marker)),
            db.and_then(|d| d.get(marker)),
        ) {
            return false;
        }
    }
    if !strict_eq_opt(a.get("system"), b.get("system")) {
        return false;
    }
    let (ta, tb) = (a.get("tools"), b.get("tools"));
    match (tool_list(ta), tool_list(tb)) {
        (Some(x), Some(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| p == q),
        _ => strict_eq_opt(ta, tb),
    }
}

/// `a.tools ?? []` as a slice; `None` for a present value that is not an array.
fn tool_list(v: Option<&Value>) -> Option<&[Value]> {
    match v {
        None | Some(Value::Null) => Some(&[]),
        Some(Value::Array(items)) => Some(items.as_slice()),
        Some(_) => None,
    }
}

/// `callConfigEquals` over two optional config values.
fn call_config_equals(a: Option<&Value>, b: Option<&Value>) -> bool {
    fn field<'a>(c: Option<&'a Value>, k: &str) -> Option<&'a Value> {
        c.and_then(|c| c.get(k))
    }
    for k in [
        "provider",
        "model",
        "reasoningEffort",
        "temperature",
        "maxTokens",
    ] {
        if !strict_eq_opt(field(a, k), field(b, k)) {
            return false;
        }
    }
    match (field(a, "stop"), field(b, "stop")) {
        (None, None) => true,
        (Some(Value::Array(x)), Some(Value::Array(y))) => {
            x.len() == y.len() && x.iter().zip(y.iter()).all(|(p, q)| strict_eq(p, q))
        }
        (Some(x), Some(y)) => strict_eq(x, y),
        _ => false,
    }
}

/// JavaScript `===` where `None` is `undefined`.
fn strict_eq_opt(a: Option<&Value>, b: Option<&Value>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(x), Some(y)) => strict_eq(x, y),
        _ => false,
    }
}

/// JavaScript `===` on JSON values: scalars by value, containers by identity.
fn strict_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Array(x), Value::Array(y)) => x.ptr_eq(y),
        (Value::Object(x), Value::Object(y)) => x.ptr_eq(y),
        _ => false,
    }
}

/// The `header` of a `request/header` event's data; `Null` when there is none.
fn header_of(event: &Event) -> &Value {
    static NULL: Value = Value::Null;
    event.data().get("header").unwrap_or(&NULL)
}

/// `foldRequestHeader(events, from?)`: the canonical header of the last `request/header` in
/// `events`, or `from` unchanged (the same value, sharing storage) when there is none.
///
/// An event whose data has no `header` folds to `{}` (see [`canonical_header`]).
///
/// ```
/// use session_core::{Event, json::Value, request::fold_request_header};
///
/// let data = Value::parse(r#"{"header":{"config":{"provider":"p","model":"m"},"tools":[]},"reason":"initial"}"#)?;
/// let events = [Event::appended("request/header", 0, 0, data, None, None)];
/// let folded = fold_request_header(&events, None).unwrap();
/// assert_eq!(folded.to_json(), r#"{"config":{"provider":"p","model":"m"}}"#);
/// # Ok::<(), session_core::json::ParseError>(())
/// ```
pub fn fold_request_header<'a>(
    events: impl IntoIterator<Item = &'a Event>,
    from: Option<Value>,
) -> Option<Value> {
    // Only the last header matters: canonicalize it once.
    let last = events
        .into_iter()
        .filter(|e| e.event_type() == REQUEST_HEADER)
        .last();
    match last {
        Some(event) => Some(canonical_header(header_of(event))),
        None => from,
    }
}

/// The request state at the end of a prefix of a log: the last `request/header` event, the
/// header it folds to, its `reason`, and the last `request/context` event. One reading for
/// `sessionctl header` and the web view's header route.
#[derive(Debug, Clone, Default)]
pub struct RequestAsOf {
    /// The last `request/header` event.
    pub header_event: Option<Event>,
    /// The folded header ([`fold_request_header`]), `None` without a `request/header`.
    pub header: Option<Value>,
    /// The last header's `reason`.
    pub reason: Option<String>,
    /// The last `request/context` event.
    pub context_event: Option<Event>,
}

impl RequestAsOf {
    /// Reads the state from `events`, walked from the end.
    pub fn of(events: &crate::Events) -> RequestAsOf {
        let last_of = |ty: &str| events.iter().rev().find(|e| e.event_type() == ty).cloned();
        let header_event = last_of(REQUEST_HEADER);
        let context_event = last_of(REQUEST_CONTEXT);
        let header = fold_request_header(header_event.iter(), None);
        let reason = header_event
            .as_ref()
            .and_then(|e| e.data().get("reason"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        RequestAsOf {
            header_event,
            header,
            reason,
            context_event,
        }
    }

    /// The document's members after `id` and `at`: `header` (`{}` when none), `headerSeq`,
    /// `reason`, `context` (`{}` when none) and `contextSeq`.
    pub fn json_members(&self) -> [(&'static str, Value); 5] {
        let seq = |e: &Option<Event>| {
            e.as_ref()
                .map_or(Value::Null, |e| crate::event::seq_value(e.seq()))
        };
        [
            ("header", self.header.clone().unwrap_or_default()),
            ("headerSeq", seq(&self.header_event)),
            (
                "reason",
                self.reason.clone().map_or(Value::Null, Value::from),
            ),
            (
                "context",
                self.context_event
                    .as_ref()
                    .map(|e| e.data().clone())
                    .unwrap_or_default(),
            ),
            ("contextSeq", seq(&self.context_event)),
        ]
    }
}

/// The incremental form of [`fold_request_header`] (`Session.requestHeader()`).
///
/// Push events in log order; [`RequestHeaderFold::current`] is the canonical header of the
/// last `request/header` pushed, or `None` before the first one. The current value keeps its
/// identity ([`Value::ptr_eq`]) across pushes of other events.
#[derive(Debug, Clone, Default)]
pub struct RequestHeaderFold {
    state: Option<Value>,
    pushed: usize,
}

impl RequestHeaderFold {
    /// A fold that has seen no events.
    pub fn new() -> RequestHeaderFold {
        RequestHeaderFold::default()
    }

    /// Folds one event.
    pub fn push(&mut self, event: &Event) {
        self.pushed += 1;
        if event.event_type() == REQUEST_HEADER {
            self.state = Some(canonical_header(header_of(event)));
        }
    }

    /// Folds one event that the caller knows is not a `request/header`: what
    /// [`RequestHeaderFold::push`] does for it, without reading its type (a restore folds
    /// 10^6 chunk events it has already classified).
    pub fn push_other(&mut self) {
        self.pushed += 1;
    }

    /// Folds events in order.
    pub fn extend<'a>(&mut self, events: impl IntoIterator<Item = &'a Event>) {
        let mut last = None;
        for event in events {
            self.pushed += 1;
            if event.event_type() == REQUEST_HEADER {
                last = Some(event);
            }
        }
        if let Some(event) = last {
            self.state = Some(canonical_header(header_of(event)));
        }
    }

    /// The canonical header in force, or `None` before the first `request/header`.
    pub fn current(&self) -> Option<&Value> {
        self.state.as_ref()
    }

    /// How many events have been folded so far (the index of the next event to fold when
    /// the fold follows a log from its start).
    pub fn pushed(&self) -> usize {
        self.pushed
    }
}

/// The incremental `request/context` fold (`Session.requestContext()`).
///
/// [`RequestContextFold::current`] is the `data` of the last `request/context` pushed (the
/// same value, sharing storage: an immutable tree needs no defensive copy), or `None` before
/// the first one. The value keeps its identity across pushes of other events.
#[derive(Debug, Clone, Default)]
pub struct RequestContextFold {
    state: Option<Value>,
    pushed: usize,
}

impl RequestContextFold {
    /// A fold that has seen no events.
    pub fn new() -> RequestContextFold {
        RequestContextFold::default()
    }

    /// Folds one event.
    pub fn push(&mut self, event: &Event) {
        self.pushed += 1;
        if event.event_type() == REQUEST_CONTEXT {
            self.state = Some(event.data().clone());
        }
    }

    /// Folds one event that the caller knows is not a `request/context`: what
    /// [`RequestContextFold::push`] does for it, without reading its type.
    pub fn push_other(&mut self) {
        self.pushed += 1;
    }

    /// Folds events in order.
    pub fn extend<'a>(&mut self, events: impl IntoIterator<Item = &'a Event>) {
        for event in events {
            self.push(event);
        }
    }

    /// The data of the last `request/context`, or `None` before the first one.
    pub fn current(&self) -> Option<&Value> {
        self.state.as_ref()
    }

    /// How many events have been folded so far.
    pub fn pushed(&self) -> usize {
        self.pushed
    }
}

/// Why a seeded `request/header` fails the seed shape check (session-core §2.8 step 2.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestHeaderShapeIssue {
    /// `data.header` is not a non-array object whose `config` has non-empty string
    /// `provider` and `model`.
    LacksProviderModel,
    /// `config.reasoningEffort` is present but not a non-empty string.
    InvalidReasoningEffort,
    /// `header.adapterDefaults` is present but not an object of `true` markers drawn from
    /// `reasoningEffort` / `maxTokens`, each backed by a present `config` field.
    InvalidAdapterDefaults,
}

impl RequestHeaderShapeIssue {
    /// The end of the reference's message, after `seed request/header at index <i> `.
    pub fn message_tail(self) -> &'static str {
        match self {
            RequestHeaderShapeIssue::LacksProviderModel => "lacks provider/model",
            RequestHeaderShapeIssue::InvalidReasoningEffort => "has an invalid reasoningEffort",
            RequestHeaderShapeIssue::InvalidAdapterDefaults => "has invalid adapterDefaults",
        }
    }

    /// The full seed message: `seed request/header at index <index> <tail>`.
    pub fn seed_message(self, index: usize) -> String {
        format!(
            "seed request/header at index {index} {}",
            self.message_tail()
        )
    }
}

impl fmt::Display for RequestHeaderShapeIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message_tail())
    }
}

/// The seed shape check of a `request/header` event's `data`, in the reference's order:
/// 1. `data.header` is a non-array object whose `config` has non-empty string `provider` and
///    `model`;
/// 2. `config.reasoningEffort`, when present (a `null` counts as present), is a non-empty
///    string;
/// 3. `header.adapterDefaults`, when present, is a non-null, non-array object whose keys are
///    drawn from `reasoningEffort` / `maxTokens`, every value exactly `true`, and each marker's
///    matching `config` field present.
///
/// ```
/// use session_core::{json::Value, request::{check_request_header_shape, RequestHeaderShapeIssue}};
///
/// let data = Value::parse(r#"{"header":{"config":{"model":"m"}},"reason":"initial"}"#)?;
/// assert_eq!(
///     check_request_header_shape(&data),
///     Err(RequestHeaderShapeIssue::LacksProviderModel)
/// );
/// # Ok::<(), session_core::json::ParseError>(())
/// ```
pub fn check_request_header_shape(data: &Value) -> Result<(), RequestHeaderShapeIssue> {
    let Some(header) = data.get("header").and_then(Value::as_object) else {
        return Err(RequestHeaderShapeIssue::LacksProviderModel);
    };
    let config = header.get("config");
    let config_field = |k: &str| config.and_then(|c| c.get(k));
    if !config_field("provider").is_some_and(Value::is_non_empty_str)
        || !config_field("model").is_some_and(Value::is_non_empty_str)
    {
        return Err(RequestHeaderShapeIssue::LacksProviderModel);
    }
    if let Some(effort) = config_field("reasoningEffort")
        && !effort.is_non_empty_str()
    {
        return Err(RequestHeaderShapeIssue::InvalidReasoningEffort);
    }
    if let Some(defaults) = header.get("adapterDefaults") {
        let Some(markers) = defaults.as_object() else {
            return Err(RequestHeaderShapeIssue::InvalidAdapterDefaults);
        };
        for (k, v) in markers.iter() {
            let known = k == "reasoningEffort" || k == "maxTokens";
            if !known || !matches!(v, Value::Bool(true)) || config_field(k).is_none() {
                return Err(RequestHeaderShapeIssue::InvalidAdapterDefaults);
            }
        }
    }
    Ok(())
}

/// Whether a `request/header` event's `data` uses the legacy `reason: "fallback"` (a
/// non-array object whose `reason` is the string `"fallback"`), which is refused everywhere.
pub fn is_legacy_fallback_header(data: &Value) -> bool {
    data.as_object()
        .and_then(|o| o.get("reason"))
        .and_then(Value::as_str)
        == Some("fallback")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(text: &str) -> Value {
        Value::parse(text).unwrap()
    }

    fn header_event(seq: u64, header: &str) -> Event {
        let data = p(&format!(r#"{{"header":{header},"reason":"change"}}"#));
        Event::appended(REQUEST_HEADER, seq, 0, data, None, None)
    }

    fn event(ty: &str, seq: u64, data: &str) -> Event {
        Event::appended(ty, seq, 0, p(data), None, None)
    }

    const TOOL_A: &str = r#"{"name":"a","description":"A","parameters":{"type":"object"}}"#;
    const TOOL_B: &str = r#"{"name":"b","description":"B","parameters":{"type":"object"}}"#;

    fn full_header() -> String {
        format!(
            r#"{{"config":{{"provider":"p","model":"m","reasoningEffort":"high","maxTokens":10}},"adapterDefaults":{{"maxTokens":true}},"system":"sys","tools":[{TOOL_A},{TOOL_B}]}}"#
        )
    }

    // session-core §8.7 #149
    #[test]
    fn canonical_header_drops_empty_fields_and_keeps_values() {
        let raw = p(
            r#"{"tools":[],"system":"","adapterDefaults":{},"config":{"provider":"p","model":"m"}}"#,
        );
        let canon = canonical_header(&raw);
        assert_eq!(
            canon.to_json(),
            r#"{"config":{"provider":"p","model":"m"}}"#
        );
        // `config` is shared, not copied.
        assert!(
            canon
                .get("config")
                .unwrap()
                .ptr_eq(raw.get("config").unwrap())
        );

        // Fields with values are kept, in canonical order, whatever the input order.
        let raw = p(&format!(
            r#"{{"tools":[{TOOL_A}],"system":"s","adapterDefaults":{{"reasoningEffort":true}},"config":{{"provider":"p","model":"m","reasoningEffort":"low"}},"extra":1}}"#
        ));
        assert_eq!(
            canonical_header(&raw).to_json(),
            format!(
                r#"{{"config":{{"provider":"p","model":"m","reasoningEffort":"low"}},"adapterDefaults":{{"reasoningEffort":true}},"system":"s","tools":[{TOOL_A}]}}"#
            )
        );

        // adapterDefaults without a true marker is dropped; with one it is kept whole.
        let raw = p(r#"{"config":{},"adapterDefaults":{"maxTokens":false,"reasoningEffort":1}}"#);
        assert_eq!(canonical_header(&raw).to_json(), r#"{"config":{}}"#);
        let raw = p(r#"{"config":{},"adapterDefaults":{"maxTokens":true,"other":0}}"#);
        assert_eq!(
            canonical_header(&raw).to_json(),
            r#"{"config":{},"adapterDefaults":{"maxTokens":true,"other":0}}"#
        );
    }

    #[test]
    fn canonical_header_of_malformed_headers_does_not_panic() {
        for text in ["null", "\"x\"", "[1]", "3", "true", "{}"] {
            assert_eq!(canonical_header(&p(text)).to_json(), "{}", "{text}");
        }
        // A present null config is kept; an absent one is omitted.
        assert_eq!(
            canonical_header(&p(r#"{"config":null}"#)).to_json(),
            r#"{"config":null}"#
        );
        // Non-string, non-array system / tools have no length and are dropped.
        assert_eq!(
            canonical_header(&p(r#"{"system":{},"tools":5,"adapterDefaults":null}"#)).to_json(),
            "{}"
        );
        let folded = fold_request_header(&[event(REQUEST_HEADER, 0, "null")], None).unwrap();
        assert_eq!(folded.to_json(), "{}");
    }

    // session-core §8.7 #150
    #[test]
    fn header_equals_clone_and_each_difference() {
        let base = canonical_header(&p(&full_header()));
        let clone = canonical_header(&p(&full_header()));
        assert!(!base.ptr_eq(&clone));
        assert!(header_equals(&base, &clone));
        assert!(header_equals(&base, &base));

        let variants = [
            // model
            full_header().replace(r#""model":"m""#, r#""model":"m2""#),
            // reasoningEffort
            full_header().replace(r#""reasoningEffort":"high""#, r#""reasoningEffort":"low""#),
            // adapterDefaults.maxTokens
            full_header().replace(
                r#""adapterDefaults":{"maxTokens":true},"#,
                r#""adapterDefaults":{"reasoningEffort":true},"#,
            ),
            // system
            full_header().replace(r#""system":"sys""#, r#""system":"other""#),
            // a tool's description
            full_header().replace(r#""description":"B""#, r#""description":"B2""#),
            // tool order
            full_header().replace(
                &format!("[{TOOL_A},{TOOL_B}]"),
                &format!("[{TOOL_B},{TOOL_A}]"),
            ),
            // a tool's key order (JSON.stringify equality is order-sensitive)
            full_header().replace(
                r#"{"name":"a","description":"A","parameters":{"type":"object"}}"#,
                r#"{"description":"A","name":"a","parameters":{"type":"object"}}"#,
            ),
        ];
        for v in &variants {
            assert_ne!(v, &full_header());
            let other = canonical_header(&p(v));
            assert!(!header_equals(&base, &other), "{v}");
            assert!(!header_equals(&other, &base), "{v}");
        }

        // tools [] versus [a] (raw, so the empty list is not dropped first).
        let empty = p(r#"{"config":{"provider":"p","model":"m"},"tools":[]}"#);
        let one = p(&format!(
            r#"{{"config":{{"provider":"p","model":"m"}},"tools":[{TOOL_A}]}}"#
        ));
        assert!(!header_equals(&empty, &one));
        assert!(!header_equals(&one, &empty));

        // adapterDefaults {maxTokens:true} versus absent.
        let with =
            p(r#"{"config":{"provider":"p","model":"m"},"adapterDefaults":{"maxTokens":true}}"#);
        let without = p(r#"{"config":{"provider":"p","model":"m"}}"#);
        assert!(!header_equals(&with, &without));
    }

    // session-core §8.7 #151
    #[test]
    fn absent_tools_equal_empty_tools() {
        let absent = p(r#"{"config":{"provider":"p","model":"m"}}"#);
        let empty = p(r#"{"config":{"provider":"p","model":"m"},"tools":[]}"#);
        let null = p(r#"{"config":{"provider":"p","model":"m"},"tools":null}"#);
        assert!(header_equals(&absent, &empty));
        assert!(header_equals(&empty, &absent));
        assert!(header_equals(&null, &absent));
    }

    #[test]
    fn call_config_equality_rules() {
        let h = |config: &str| p(&format!(r#"{{"config":{config}}}"#));
        let base = h(r#"{"provider":"p","model":"m","temperature":0.5,"stop":["a","b"]}"#);
        // Other config keys are ignored; key order does not matter; numbers by value.
        assert!(header_equals(
            &base,
            &h(r#"{"stop":["a","b"],"temperature":5e-1,"model":"m","provider":"p","x":1}"#)
        ));
        for other in [
            r#"{"provider":"p","model":"m","temperature":0.6,"stop":["a","b"]}"#,
            r#"{"provider":"p","model":"m","stop":["a","b"]}"#,
            r#"{"provider":"p","model":"m","temperature":0.5,"stop":["a"]}"#,
            r#"{"provider":"p","model":"m","temperature":0.5,"stop":["a","c"]}"#,
            r#"{"provider":"p","model":"m","temperature":0.5}"#,
            r#"{"provider":"p","model":"m","temperature":0.5,"stop":["a","b"],"maxTokens":null}"#,
        ] {
            assert!(!header_equals(&base, &h(other)), "{other}");
        }
        // maxTokens: absent equals only absent; null is a value.
        assert!(header_equals(
            &h(r#"{"maxTokens":null}"#),
            &h(r#"{"maxTokens":null}"#)
        ));
        // Containers compare by identity (JavaScript ===).
        let a = h(r#"{"provider":{"a":1}}"#);
        let b = h(r#"{"provider":{"a":1}}"#);
        assert!(!header_equals(&a, &b));
        assert!(header_equals(&a, &a.clone()));
        // A missing config reads as one with no fields; a non-array stop compares strictly.
        assert!(header_equals(&p("{}"), &p(r#"{"config":{}}"#)));
        assert!(header_equals(&h(r#"{"stop":"x"}"#), &h(r#"{"stop":"x"}"#)));
        assert!(!header_equals(
            &h(r#"{"stop":"x"}"#),
            &h(r#"{"stop":["x"]}"#)
        ));
        // system compares strictly; absent equals only absent.
        assert!(!header_equals(&h("{}"), &p(r#"{"config":{},"system":""}"#)));
    }

    // session-core §8.7 #152
    #[test]
    fn fold_without_headers_returns_from_unchanged() {
        let events = [
            event("turn/start", 0, r#"{"turn":1}"#),
            event(REQUEST_CONTEXT, 1, r#"{"provider":"p","model":"m"}"#),
        ];
        assert!(fold_request_header(&events, None).is_none());
        assert!(fold_request_header(std::iter::empty(), None).is_none());
        let from = p(r#"{"config":{"provider":"p","model":"m"}}"#);
        let folded = fold_request_header(&events, Some(from.clone())).unwrap();
        assert!(folded.ptr_eq(&from));
    }

    // session-core §8.7 #153
    #[test]
    fn last_header_wins_in_canonical_form() {
        let events = [
            header_event(
                0,
                r#"{"config":{"provider":"p","model":"first"},"system":"s"}"#,
            ),
            event("turn/start", 1, r#"{"turn":1}"#),
            header_event(
                2,
                r#"{"config":{"provider":"p","model":"second"},"system":"","tools":[]}"#,
            ),
            event("step/start", 3, r#"{"turn":1,"step":1}"#),
        ];
        let from = p(r#"{"config":{"provider":"x","model":"y"}}"#);
        let folded = fold_request_header(&events, Some(from)).unwrap();
        assert_eq!(
            folded.to_json(),
            r#"{"config":{"provider":"p","model":"second"}}"#
        );
        let mut fold = RequestHeaderFold::new();
        fold.extend(&events[..2]);
        assert_eq!(
            fold.current().unwrap().to_json(),
            r#"{"config":{"provider":"p","model":"first"},"system":"s"}"#
        );
        fold.extend(&events[2..]);
        assert_eq!(fold.current().unwrap(), &folded);
        assert_eq!(fold.pushed(), 4);
    }

    // session-core §2.10: identity is kept across events that are not headers.
    #[test]
    fn header_fold_is_incremental_and_keeps_identity() {
        let mut fold = RequestHeaderFold::new();
        assert!(fold.current().is_none());
        fold.push(&event("turn/start", 0, r#"{"turn":1}"#));
        assert!(fold.current().is_none());
        fold.push(&header_event(
            1,
            r#"{"config":{"provider":"p","model":"m"}}"#,
        ));
        let first = fold.current().unwrap().clone();
        fold.push(&event("step/start", 2, r#"{"turn":1,"step":1}"#));
        assert!(fold.current().unwrap().ptr_eq(&first));
        fold.push(&header_event(
            3,
            r#"{"config":{"provider":"p","model":"n"}}"#,
        ));
        assert!(!fold.current().unwrap().ptr_eq(&first));
        assert_eq!(fold.pushed(), 4);
    }

    // session-core §8.7 #156
    #[test]
    fn request_context_is_none_before_any_record() {
        let mut fold = RequestContextFold::new();
        assert!(fold.current().is_none());
        fold.push(&header_event(
            0,
            r#"{"config":{"provider":"p","model":"m"}}"#,
        ));
        assert!(fold.current().is_none());
    }

    // session-core §8.7 #157
    #[test]
    fn request_context_seeded_log_last_record_wins() {
        let events = [
            event(
                REQUEST_CONTEXT,
                0,
                r#"{"provider":"p","model":"a","contextWindow":1000}"#,
            ),
            event("turn/start", 1, r#"{"turn":1}"#),
            event(
                REQUEST_CONTEXT,
                2,
                r#"{"provider":"p","model":"b","contextWindow":2000}"#,
            ),
            event("turn/end", 3, r#"{"turn":1}"#),
        ];
        let mut fold = RequestContextFold::new();
        fold.extend(&events);
        let current = fold.current().unwrap();
        assert_eq!(
            current.to_json(),
            r#"{"provider":"p","model":"b","contextWindow":2000}"#
        );
        // The stored value is the event's own frozen data.
        assert!(current.ptr_eq(events[2].data()));
    }

    // session-core §8.7 #158, #159
    #[test]
    fn request_context_fold_is_incremental() {
        let mut fold = RequestContextFold::new();
        fold.push(&event(
            REQUEST_CONTEXT,
            0,
            r#"{"provider":"p","model":"a"}"#,
        ));
        let first = fold.current().unwrap().clone();
        assert_eq!(first.to_json(), r#"{"provider":"p","model":"a"}"#);
        // Unrelated events are skipped and keep the identity.
        fold.push(&event("turn/start", 1, r#"{"turn":1}"#));
        assert!(fold.current().unwrap().ptr_eq(&first));
        // A batch appended between two reads folds to its last record.
        fold.extend(&[
            event(
                REQUEST_CONTEXT,
                2,
                r#"{"provider":"p","model":"b","contextWindow":1}"#,
            ),
            event("step/start", 3, r#"{"turn":1,"step":1}"#),
            event(REQUEST_CONTEXT, 4, r#"{"provider":"q","model":"c"}"#),
        ]);
        assert_eq!(
            fold.current().unwrap().to_json(),
            r#"{"provider":"q","model":"c"}"#
        );
        assert_eq!(fold.pushed(), 5);
    }

    // session-core §8.1 #9 (request/header part)
    #[test]
    fn shape_lacks_provider_model() {
        for data in [
            r#"{"header":{"config":{"model":"m"}},"reason":"initial"}"#,
            r#"{"header":{"config":{"provider":"p"}},"reason":"initial"}"#,
            r#"{"header":{"config":{"provider":"","model":"m"}}}"#,
            r#"{"header":{"config":{"provider":"p","model":1}}}"#,
            r#"{"header":{"config":"pm"}}"#,
            r#"{"header":{}}"#,
            r#"{"header":"h"}"#,
            r#"{"header":[{"config":{"provider":"p","model":"m"}}]}"#,
            r#"{"header":null}"#,
            "{}",
            "null",
            r#"[{"header":{"config":{"provider":"p","model":"m"}}}]"#,
        ] {
            let issue = check_request_header_shape(&p(data)).unwrap_err();
            assert_eq!(issue, RequestHeaderShapeIssue::LacksProviderModel, "{data}");
            assert_eq!(
                issue.seed_message(0),
                "seed request/header at index 0 lacks provider/model"
            );
        }
        assert_eq!(
            check_request_header_shape(&p(
                r#"{"header":{"config":{"provider":"p","model":"m"}},"reason":"initial"}"#
            )),
            Ok(())
        );
    }

    // session-core §8.1 #14
    #[test]
    fn shape_reasoning_effort() {
        let ok = p(
            r#"{"header":{"config":{"provider":"p","model":"m","reasoningEffort":"high"}},"reason":"initial"}"#,
        );
        assert_eq!(check_request_header_shape(&ok), Ok(()));
        for effort in [r#""""#, "1", "null", "[]"] {
            let data = p(&format!(
                r#"{{"header":{{"config":{{"provider":"p","model":"m","reasoningEffort":{effort}}}}}}}"#
            ));
            let issue = check_request_header_shape(&data).unwrap_err();
            assert_eq!(
                issue,
                RequestHeaderShapeIssue::InvalidReasoningEffort,
                "{effort}"
            );
            assert_eq!(
                issue.seed_message(3),
                "seed request/header at index 3 has an invalid reasoningEffort"
            );
        }
    }

    // session-core §8.1 #15
    #[test]
    fn shape_adapter_defaults() {
        let with = |defaults: &str, config_extra: &str| {
            p(&format!(
                r#"{{"header":{{"config":{{"provider":"p","model":"m"{config_extra}}},"adapterDefaults":{defaults}}}}}"#
            ))
        };
        assert_eq!(
            check_request_header_shape(&with(r#"{"maxTokens":true}"#, r#","maxTokens":8"#)),
            Ok(())
        );
        assert_eq!(
            check_request_header_shape(&with(
                r#"{"reasoningEffort":true,"maxTokens":true}"#,
                r#","maxTokens":null,"reasoningEffort":"x""#
            )),
            Ok(())
        );
        assert_eq!(check_request_header_shape(&with("{}", "")), Ok(()));
        for (defaults, extra) in [
            ("null", ""),
            ("[]", ""),
            ("true", ""),
            (r#"{"unknown":true}"#, ""),
            (r#"{"maxTokens":false}"#, r#","maxTokens":8"#),
            (r#"{"maxTokens":1}"#, r#","maxTokens":8"#),
            (r#"{"reasoningEffort":true}"#, ""),
            (r#"{"maxTokens":true}"#, ""),
        ] {
            let issue = check_request_header_shape(&with(defaults, extra)).unwrap_err();
            assert_eq!(
                issue,
                RequestHeaderShapeIssue::InvalidAdapterDefaults,
                "{defaults}"
            );
            assert_eq!(
                issue.seed_message(0),
                "seed request/header at index 0 has invalid adapterDefaults"
            );
            assert_eq!(issue.to_string(), "has invalid adapterDefaults");
        }
    }

    #[test]
    fn shape_checks_run_in_order() {
        // provider/model before reasoningEffort before adapterDefaults.
        let data = p(
            r#"{"header":{"config":{"provider":"p","reasoningEffort":""},"adapterDefaults":null}}"#,
        );
        assert_eq!(
            check_request_header_shape(&data),
            Err(RequestHeaderShapeIssue::LacksProviderModel)
        );
        let data = p(
            r#"{"header":{"config":{"provider":"p","model":"m","reasoningEffort":""},"adapterDefaults":null}}"#,
        );
        assert_eq!(
            check_request_header_shape(&data),
            Err(RequestHeaderShapeIssue::InvalidReasoningEffort)
        );
    }

    // session-core §8.7 #155 (the data test)
    #[test]
    fn legacy_fallback_reason() {
        assert!(is_legacy_fallback_header(&p(
            r#"{"header":{},"reason":"fallback"}"#
        )));
        for data in [
            r#"{"header":{},"reason":"change"}"#,
            r#"{"header":{}}"#,
            r#"[{"reason":"fallback"}]"#,
            r#""fallback""#,
            "null",
            r#"{"reason":["fallback"]}"#,
        ] {
            assert!(!is_legacy_fallback_header(&p(data)), "{data}");
        }
    }
}
