//! Lossless JSON: an immutable value tree, a strict parser and a `JSON.stringify`-exact writer.
//!
//! Every event payload in a session is a [`Value`]. The representation keeps what the
//! reference implementation's files need to round-trip byte for byte: JavaScript key order,
//! `JSON.stringify` escaping and number formatting, and the exact spelling of numbers read from
//! disk.

mod number;
mod parse;
mod scan;
mod value;
mod write;

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

pub use number::{MAX_SAFE_INTEGER, Number, write_js_number};
pub(crate) use parse::string_at;
pub use parse::{MAX_DEPTH, ParseError, ParseErrorKind, parse};
pub(crate) use scan::string_special;
pub use value::{Array, Object, Value};
pub use write::write_str;

/// Keys that occur in nearly every event; parsing shares one allocation for each.
const COMMON_KEYS: &[&str] = &[
    "type",
    "seq",
    "time",
    "data",
    "surfaceOp",
    "sourceEventSeqs",
    "ignorable",
    "turn",
    "step",
    "chunk",
    "index",
    "text",
    "id",
    "name",
    "argumentsDelta",
    "role",
    "content",
    "source",
    "kind",
    "message",
    "callId",
    "arguments",
    "toolCallId",
    "isError",
    "usage",
    "reason",
    "header",
    "config",
    "provider",
    "model",
    "op",
    "start",
    "end",
    "error",
    "code",
    "meta",
    "blockType",
    "block",
    "inputTokens",
    "outputTokens",
    "seq0",
    "time0",
    "dt",
    "texts",
    "args",
];

/// FNV-1a: a fast hash for the short, trusted strings of the key table.
#[derive(Default)]
struct Fnv(u64);

impl std::hash::Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for &b in bytes {
            h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
        self.0 = h;
    }
}

type KeyTable = HashMap<&'static str, Arc<str>, std::hash::BuildHasherDefault<Fnv>>;

fn key_table() -> &'static KeyTable {
    static TABLE: OnceLock<KeyTable> = OnceLock::new();
    TABLE.get_or_init(|| COMMON_KEYS.iter().map(|k| (*k, Arc::from(*k))).collect())
}

/// An object key, sharing storage with other uses of the same common key.
pub fn key(k: &str) -> Arc<str> {
    match key_table().get(k) {
        Some(shared) => shared.clone(),
        None => Arc::from(k),
    }
}

/// Whether a live `append` may accept `v`: every number finite, not `-0`, and not an integer
/// literal outside ±(2^53 − 1). Strings, arrays and objects are always acceptable.
pub fn is_appendable(v: &Value) -> bool {
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Value::Number(n) if !n.is_appendable() => return false,
            Value::Array(items) => stack.extend(items.iter()),
            Value::Object(o) => stack.extend(o.entries().iter().map(|(_, v)| v)),
            _ => {}
        }
    }
    true
}

/// The value a live `append` stores for `v`: `None` if it is not appendable (see
/// [`is_appendable`]); otherwise `v` itself, or, when it holds numbers spelled differently from
/// JavaScript, a copy with those numbers respelled (what `JSON.parse` then `JSON.stringify`
/// would give).
pub fn snapshot_for_append(v: &Value) -> Option<Value> {
    if !is_appendable(v) {
        return None;
    }
    if !has_verbatim_number(v) {
        return Some(v.clone());
    }
    Some(canonicalize(v))
}

fn has_verbatim_number(v: &Value) -> bool {
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Value::Number(n) if n.is_verbatim() => return true,
            Value::Array(items) => stack.extend(items.iter()),
            Value::Object(o) => stack.extend(o.entries().iter().map(|(_, v)| v)),
            _ => {}
        }
    }
    false
}

/// Rebuilds `v` with every number in JavaScript spelling (post-order, iterative).
fn canonicalize(v: &Value) -> Value {
    enum Task<'a> {
        Visit(&'a Value),
        BuildArray(usize),
        BuildObject(&'a Object),
    }
    let mut tasks = vec![Task::Visit(v)];
    let mut done: Vec<Value> = Vec::new();
    while let Some(t) = tasks.pop() {
        match t {
            Task::Visit(v) => match v {
                Value::Number(n) => done.push(Value::Number(n.canonical())),
                Value::Array(items) if has_verbatim_number(v) => {
                    tasks.push(Task::BuildArray(items.len()));
                    for item in items.iter().rev() {
                        tasks.push(Task::Visit(item));
                    }
                }
                Value::Object(o) if has_verbatim_number(v) => {
                    tasks.push(Task::BuildObject(o));
                    for (_, item) in o.entries().iter().rev() {
                        tasks.push(Task::Visit(item));
                    }
                }
                other => done.push(other.clone()),
            },
            Task::BuildArray(n) => {
                let items = done.split_off(done.len() - n);
                done.push(Value::Array(Array::new(items)));
            }
            Task::BuildObject(o) => {
                let values = done.split_off(done.len() - o.len());
                let entries = o
                    .entries()
                    .iter()
                    .zip(values)
                    .map(|((k, _), v)| (k.clone(), v));
                done.push(Value::Object(Object::from_entries(entries)));
            }
        }
    }
    done.pop().unwrap_or_default()
}

/// Why a `serde_json::Value` cannot become a session [`Value`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotLosslessError;

impl std::fmt::Display for NotLosslessError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("value is not losslessly JSON-serializable")
    }
}

impl std::error::Error for NotLosslessError {}

impl TryFrom<&serde_json::Value> for Value {
    type Error = NotLosslessError;

    /// Converts, refusing what a JavaScript reader would change: `-0`, integers outside
    /// ±(2^53 − 1). Object keys follow the JavaScript order rules.
    fn try_from(v: &serde_json::Value) -> Result<Value, NotLosslessError> {
        // Serialize through text so that deep values do not recurse here.
        let text = serde_json::to_string(v).map_err(|_| NotLosslessError)?;
        let parsed = parse(&text).map_err(|_| NotLosslessError)?;
        snapshot_for_append(&parsed).ok_or(NotLosslessError)
    }
}

impl TryFrom<serde_json::Value> for Value {
    type Error = NotLosslessError;
    fn try_from(v: serde_json::Value) -> Result<Value, NotLosslessError> {
        Value::try_from(&v)
    }
}

impl From<&Value> for serde_json::Value {
    fn from(v: &Value) -> serde_json::Value {
        serde_json::from_str(&v.to_json()).unwrap_or(serde_json::Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn append_snapshot_rules() {
        let p = |s: &str| parse(s).unwrap();
        assert!(snapshot_for_append(&p(r#"{"a":-0}"#)).is_none());
        assert!(snapshot_for_append(&p("[9007199254740992]")).is_none());
        assert_eq!(
            snapshot_for_append(&p(r#"{"a":[1.0,{"b":1E3}],"c":"x"}"#))
                .unwrap()
                .to_json(),
            r#"{"a":[1,{"b":1000}],"c":"x"}"#
        );
        let plain = p(r#"{"a":[1,2]}"#);
        assert!(snapshot_for_append(&plain).unwrap().ptr_eq(&plain));
    }

    #[test]
    fn from_serde_json() {
        let v = serde_json::json!({"b": 1, "2": [true, null, "x"], "a": 1.5});
        assert_eq!(
            Value::try_from(&v).unwrap().to_json(),
            r#"{"2":[true,null,"x"],"b":1,"a":1.5}"#
        );
        assert!(Value::try_from(serde_json::json!(u64::MAX)).is_err());
        assert!(Value::try_from(serde_json::json!(-0.0)).is_err());
    }
}
