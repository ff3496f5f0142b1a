//! Lossless JSON: an immutable value tree, a strict parser and a `JSON.stringify`-exact writer.
//!
//! Every event payload in a session is a [`Value`]. The representation keeps what the
//! reference implementation's files need to round-trip byte for byte: JavaScript key order,
//! `JSON.stringify` escaping and number formatting, and the exact spelling of numbers read from
//! disk.
//!
//! [`Value`] implements serde's `Serialize` and `Deserialize`; [`to_value`] builds a [`Value`]
//! from any `Serialize` type and [`from_value`] reads any `Deserialize` type out of one. Through
//! these two a [`Value`] keeps its key order and number spellings; errors are [`SerdeError`]s
//! naming the JSON Pointer of the offending part.

pub mod build;
mod number;
mod parse;
mod scan;
mod serde_impl;
mod value;
mod write;

use std::sync::{Arc, OnceLock};

pub(crate) use number::write_int;
pub use number::{MAX_SAFE_INTEGER, Number, write_js_number};
pub use parse::{MAX_DEPTH, ParseError, ParseErrorKind, parse};
pub(crate) use parse::{string_at, value_at};
pub(crate) use scan::string_special;
pub(crate) use serde_impl::nested;
pub use serde_impl::{
    PathSegment, SERDE_MAX_DEPTH, SerdeError, SerdeErrorKind, from_value, to_value,
};
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

/// The index of `k` in [`COMMON_KEYS`].
fn common_key_index(k: &str) -> Option<usize> {
    Some(match k {
        "type" => 0,
        "seq" => 1,
        "time" => 2,
        "data" => 3,
        "surfaceOp" => 4,
        "sourceEventSeqs" => 5,
        "ignorable" => 6,
        "turn" => 7,
        "step" => 8,
        "chunk" => 9,
        "index" => 10,
        "text" => 11,
        "id" => 12,
        "name" => 13,
        "argumentsDelta" => 14,
        "role" => 15,
        "content" => 16,
        "source" => 17,
        "kind" => 18,
        "message" => 19,
        "callId" => 20,
        "arguments" => 21,
        "toolCallId" => 22,
        "isError" => 23,
        "usage" => 24,
        "reason" => 25,
        "header" => 26,
        "config" => 27,
        "provider" => 28,
        "model" => 29,
        "op" => 30,
        "start" => 31,
        "end" => 32,
        "error" => 33,
        "code" => 34,
        "meta" => 35,
        "blockType" => 36,
        "block" => 37,
        "inputTokens" => 38,
        "outputTokens" => 39,
        "seq0" => 40,
        "time0" => 41,
        "dt" => 42,
        "texts" => 43,
        "args" => 44,
        _ => return None,
    })
}

fn key_table() -> &'static [Arc<str>] {
    static TABLE: OnceLock<Vec<Arc<str>>> = OnceLock::new();
    TABLE.get_or_init(|| COMMON_KEYS.iter().map(|k| Arc::from(*k)).collect())
}

/// An object key, sharing storage with other uses of the same common key.
pub fn key(k: &str) -> Arc<str> {
    match common_key_index(k).and_then(|i| key_table().get(i)) {
        Some(shared) => shared.clone(),
        None => Arc::from(k),
    }
}

/// String values that recur in nearly every session (chunk kinds, roles, block types), shared
/// like the common keys so that building them costs no allocation.
const COMMON_VALUES: &[&str] = &[
    "text-delta",
    "reasoning-delta",
    "tool-call-delta",
    "text",
    "user",
    "assistant",
    "tool",
    "system",
    "model",
    "completed",
];

fn common_value_index(v: &str) -> Option<usize> {
    Some(match v {
        "text-delta" => 0,
        "reasoning-delta" => 1,
        "tool-call-delta" => 2,
        "text" => 3,
        "user" => 4,
        "assistant" => 5,
        "tool" => 6,
        "system" => 7,
        "model" => 8,
        "completed" => 9,
        _ => return None,
    })
}

fn value_table() -> &'static [Arc<str>] {
    static TABLE: OnceLock<Vec<Arc<str>>> = OnceLock::new();
    TABLE.get_or_init(|| COMMON_VALUES.iter().map(|v| Arc::from(*v)).collect())
}

/// A string value, sharing storage with other uses of the same common value.
pub fn string_value(v: &str) -> Arc<str> {
    match common_value_index(v).and_then(|i| value_table().get(i)) {
        Some(shared) => shared.clone(),
        None => Arc::from(v),
    }
}

/// The deepest nesting of non-empty containers a value may have to be appendable: a stored
/// event line wraps it in one more object, and readers refuse lines nested deeper than
/// [`MAX_DEPTH`].
pub const MAX_APPEND_DEPTH: usize = MAX_DEPTH - 1;

/// Whether a live `append` may accept `v`: every number finite, not `-0`, and not an integer
/// literal outside ±(2^53 − 1), and non-empty containers nested at most [`MAX_APPEND_DEPTH`]
/// deep (so that the stored line reads back).
pub fn is_appendable(v: &Value) -> bool {
    appendable_below(v, 0)
}

/// [`is_appendable`] for a value nested inside `depth` non-empty containers.
fn appendable_below(v: &Value, depth: usize) -> bool {
    let mut stack = vec![(v, depth)];
    while let Some((v, depth)) = stack.pop() {
        match v {
            Value::Number(n) if !n.is_appendable() => return false,
            Value::Array(items) if !items.is_empty() => {
                if depth >= MAX_APPEND_DEPTH {
                    return false;
                }
                stack.extend(items.iter().map(|i| (i, depth + 1)));
            }
            Value::Object(o) if !o.is_empty() => {
                if depth >= MAX_APPEND_DEPTH {
                    return false;
                }
                stack.extend(o.entries().iter().map(|(_, v)| (v, depth + 1)));
            }
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
    if !append_scan(v, 0)? {
        return Some(v.clone());
    }
    Some(canonicalize(v, Number::is_verbatim))
}

/// The value a seed of already-stored events keeps for `v` (a fork child, a rebuilt
/// session): never refused, since the stricter rules of a live `append` apply to new data only.
/// Numbers that JavaScript reads back as themselves but spells differently (`1E2`, `1.0`,
/// an integer beyond 2^53 that rounds) are respelled as `JSON.parse` then `JSON.stringify`
/// would; `-0` and non-finite literals, which JavaScript cannot write back, keep the spelling
/// they were read with. `v` itself (shared, not copied) when nothing changes.
#[must_use]
pub fn snapshot_for_seed(v: &Value) -> Value {
    if !seed_respells(v) {
        return v.clone();
    }
    canonicalize(v, is_respellable)
}

/// Whether [`snapshot_for_seed`] changes `v`.
pub fn seed_respells(v: &Value) -> bool {
    has_number(v, is_respellable)
}

/// A verbatim number whose JavaScript spelling reads back as the same number.
fn is_respellable(n: &Number) -> bool {
    n.is_verbatim() && n.is_finite() && !n.is_negative_zero()
}

/// How deep [`append_scan`] recurses before it continues with an explicit stack.
const SCAN_RECURSION: usize = 32;

/// One walk for [`snapshot_for_append`]: `None` if `v` is not appendable (see
/// [`is_appendable`]), otherwise whether it holds a verbatim number. Shallow values are walked
/// recursively, without allocating; deeper levels continue iteratively.
fn append_scan(v: &Value, depth: usize) -> Option<bool> {
    match v {
        Value::Number(n) => n.is_appendable().then(|| n.is_verbatim()),
        Value::Array(items) if depth < SCAN_RECURSION => {
            let mut verbatim = false;
            for item in items.iter() {
                verbatim |= append_scan(item, depth + 1)?;
            }
            Some(verbatim)
        }
        Value::Object(o) if depth < SCAN_RECURSION => {
            let mut verbatim = false;
            for (_, item) in o.entries() {
                verbatim |= append_scan(item, depth + 1)?;
            }
            Some(verbatim)
        }
        Value::Array(_) | Value::Object(_) => {
            if appendable_below(v, depth) {
                Some(has_number(v, Number::is_verbatim))
            } else {
                None
            }
        }
        _ => Some(false),
    }
}

/// Whether `v` holds a number for which `pick` is true.
fn has_number(v: &Value, pick: fn(&Number) -> bool) -> bool {
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Value::Number(n) if pick(n) => return true,
            Value::Array(items) => stack.extend(items.iter()),
            Value::Object(o) => stack.extend(o.entries().iter().map(|(_, v)| v)),
            _ => {}
        }
    }
    false
}

/// Rebuilds `v` with every number for which `pick` is true in JavaScript spelling
/// (post-order, iterative; subtrees without such numbers are shared).
fn canonicalize(v: &Value, pick: fn(&Number) -> bool) -> Value {
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
                Value::Number(n) if pick(n) => done.push(Value::Number(n.canonical())),
                Value::Array(items) if has_number(v, pick) => {
                    tasks.push(Task::BuildArray(items.len()));
                    for item in items.iter().rev() {
                        tasks.push(Task::Visit(item));
                    }
                }
                Value::Object(o) if has_number(v, pick) => {
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

impl TryFrom<&serde_json::Value> for Value {
    type Error = SerdeError;

    /// Converts, refusing what a JavaScript reader would change (`-0`, integers outside
    /// ±(2^53 − 1)) with the path to it. Object keys follow the JavaScript order rules.
    fn try_from(v: &serde_json::Value) -> Result<Value, SerdeError> {
        to_value(v)
    }
}

impl TryFrom<serde_json::Value> for Value {
    type Error = SerdeError;
    fn try_from(v: serde_json::Value) -> Result<Value, SerdeError> {
        Value::try_from(&v)
    }
}

impl TryFrom<&Value> for serde_json::Value {
    type Error = SerdeError;

    /// Converts values (not spellings: `1.0` becomes the float 1). Integer literals that fit
    /// 64 bits stay exact. Refused, with the path to it: a number outside the double range
    /// (`1e400`), and nesting deeper than [`SERDE_MAX_DEPTH`] (`serde_json`'s own limit, whose
    /// values drop recursively).
    fn try_from(v: &Value) -> Result<serde_json::Value, SerdeError> {
        to_serde_json(v, 0)
    }
}

impl TryFrom<Value> for serde_json::Value {
    type Error = SerdeError;
    fn try_from(v: Value) -> Result<serde_json::Value, SerdeError> {
        serde_json::Value::try_from(&v)
    }
}

fn to_serde_json(v: &Value, depth: usize) -> Result<serde_json::Value, SerdeError> {
    let deeper = || {
        if depth >= SERDE_MAX_DEPTH {
            Err(SerdeError::new(SerdeErrorKind::TooDeep))
        } else {
            Ok(depth + 1)
        }
    };
    Ok(match v {
        Value::Null => serde_json::Value::Null,
        Value::Bool(b) => serde_json::Value::Bool(*b),
        Value::String(s) => serde_json::Value::String(s.to_string()),
        Value::Number(n) => serde_json::Value::Number(serde_json_number(n)?),
        Value::Array(items) => {
            let depth = deeper()?;
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                out.push(to_serde_json(item, depth).map_err(|e| e.under_index(i))?);
            }
            serde_json::Value::Array(out)
        }
        Value::Object(o) => {
            let depth = deeper()?;
            let mut out = serde_json::Map::with_capacity(o.len());
            for (k, item) in o.iter() {
                out.insert(
                    k.to_owned(),
                    to_serde_json(item, depth).map_err(|e| e.under_key(k))?,
                );
            }
            serde_json::Value::Object(out)
        }
    })
}

fn serde_json_number(n: &Number) -> Result<serde_json::Number, SerdeError> {
    if n.is_verbatim() && n.is_integer_literal() {
        let mut text = String::new();
        n.write(&mut text);
        if let Ok(u) = text.parse::<u64>() {
            return Ok(u.into());
        }
        if let Ok(i) = text.parse::<i64>() {
            return Ok(i.into());
        }
    }
    if !n.is_verbatim()
        && let Some(i) = n.as_i64()
    {
        return Ok(i.into());
    }
    serde_json::Number::from_f64(n.as_f64())
        .ok_or_else(|| SerdeError::new(SerdeErrorKind::NonFinite))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_keys_are_shared() {
        for (i, k) in COMMON_KEYS.iter().enumerate() {
            assert_eq!(common_key_index(k), Some(i), "{k}");
            assert!(Arc::ptr_eq(&key(k), &key(k)));
        }
        assert_eq!(common_key_index("other"), None);
        assert!(!Arc::ptr_eq(&key("other"), &key("other")));
    }

    #[test]
    fn common_values_are_shared() {
        for (i, v) in COMMON_VALUES.iter().enumerate() {
            assert_eq!(common_value_index(v), Some(i), "{v}");
            assert!(Arc::ptr_eq(&string_value(v), &string_value(v)));
            assert_eq!(&*string_value(v), *v);
        }
        assert_eq!(common_value_index("text-delta "), None);
        assert!(!Arc::ptr_eq(&string_value("tok"), &string_value("tok")));
        assert_eq!(Value::from("user").as_str(), Some("user"));
    }

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
        assert_eq!(
            Value::try_from(serde_json::json!({"a": [1, u64::MAX]}))
                .unwrap_err()
                .to_string(),
            "integer 18446744073709551615 is outside the safe range ±(2^53 − 1) at /a/1"
        );
        assert_eq!(
            Value::try_from(serde_json::json!(-0.0)).unwrap_err().kind(),
            &SerdeErrorKind::NegativeZero
        );
    }

    #[test]
    fn to_serde_json_is_fallible_and_names_the_place() {
        let v = parse(r#"{"b":[1,1.0,9007199254740993,-5],"a":"x"}"#).unwrap();
        let j = serde_json::Value::try_from(&v).unwrap();
        assert_eq!(
            serde_json::to_string(&j).unwrap(),
            r#"{"b":[1,1.0,9007199254740993,-5],"a":"x"}"#
        );
        let err =
            serde_json::Value::try_from(&parse(r#"{"k":[0,{"n":1e400}]}"#).unwrap()).unwrap_err();
        assert_eq!(err.kind(), &SerdeErrorKind::NonFinite);
        assert_eq!(err.pointer(), "/k/1/n");
        assert_eq!(err.to_string(), "number is NaN or infinite at /k/1/n");
        let deep = parse(&format!("{}{}", "[".repeat(200), "]".repeat(200))).unwrap();
        let err = serde_json::Value::try_from(&deep).unwrap_err();
        assert_eq!(err.kind(), &SerdeErrorKind::TooDeep);
        assert_eq!(err.path().count(), SERDE_MAX_DEPTH);
    }
}
