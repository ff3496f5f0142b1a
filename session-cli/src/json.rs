//! Small helpers to build the `--json` documents as [`Value`]s and to stream large arrays.

use std::io::Write;

use session_core::json::Value;

pub(crate) use session_core::json::build::{float, num, obj, opt_num, opt_str, seqs};

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
