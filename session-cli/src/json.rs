//! Small helpers to build the `--json` documents as [`Value`]s and to stream large arrays.

use std::io::Write;

use session_core::event::seq_value;
use session_core::json::{Number, Value};

/// An object with keys in the given order.
pub(crate) fn obj<'a>(entries: impl IntoIterator<Item = (&'a str, Value)>) -> Value {
    Value::object(entries)
}

/// A non-negative integer.
pub(crate) fn num(n: u64) -> Value {
    seq_value(n)
}

/// A float (non-finite values become `null`).
pub(crate) fn float(n: f64) -> Value {
    Number::from_f64(n).map_or(Value::Null, Value::Number)
}

/// An optional non-negative integer (`null` when absent).
pub(crate) fn opt_num(n: Option<u64>) -> Value {
    n.map_or(Value::Null, num)
}

/// An optional string (`null` when absent).
pub(crate) fn opt_str(s: Option<impl Into<Value>>) -> Value {
    s.map_or(Value::Null, Into::into)
}

/// An array of seqs.
pub(crate) fn seqs(items: &[u64]) -> Value {
    Value::array(items.iter().copied().map(num))
}

/// Writes a document whose last member is a large array, one element per line, without
/// building the whole text: `{<head members>,"<key>":[\n<e1>,\n<e2>\n]}\n`.
pub(crate) fn write_streamed<W: Write, T>(
    out: &mut W,
    head: &Value,
    key: &str,
    items: impl IntoIterator<Item = T>,
    mut element: impl FnMut(T) -> Value,
) -> std::io::Result<()> {
    let mut text = head.to_json();
    // Reopen the head object to add the array member.
    text.pop();
    if text.len() > 1 {
        text.push(',');
    }
    session_core::json::write_str(key, &mut text);
    text.push_str(":[");
    out.write_all(text.as_bytes())?;
    let mut first = true;
    let mut buf = String::new();
    for item in items {
        buf.clear();
        if !first {
            buf.push(',');
        }
        buf.push('\n');
        element(item).write_json(&mut buf);
        out.write_all(buf.as_bytes())?;
        first = false;
    }
    out.write_all(if first { b"]}\n" } else { b"\n]}\n" })?;
    Ok(())
}
