//! Compact serialization with `JSON.stringify` escaping.

use super::value::Value;

enum Step<'a> {
    Value(&'a Value),
    Raw(&'static str),
    Key(&'a str),
}

/// Appends the compact JSON text of `v` to `out` (iterative: no recursion).
pub(crate) fn write_value(v: &Value, out: &mut String) {
    let mut stack: Vec<Step<'_>> = vec![Step::Value(v)];
    while let Some(step) = stack.pop() {
        match step {
            Step::Raw(s) => out.push_str(s),
            Step::Key(k) => {
                write_str(k, out);
                out.push(':');
            }
            Step::Value(v) => match v {
                Value::Null => out.push_str("null"),
                Value::Bool(true) => out.push_str("true"),
                Value::Bool(false) => out.push_str("false"),
                Value::Number(n) => n.write(out),
                Value::String(s) => write_str(s, out),
                Value::Array(items) => {
                    if items.is_empty() {
                        out.push_str("[]");
                        continue;
                    }
                    out.push('[');
                    stack.push(Step::Raw("]"));
                    for (i, item) in items.iter().enumerate().rev() {
                        stack.push(Step::Value(item));
                        if i > 0 {
                            stack.push(Step::Raw(","));
                        }
                    }
                }
                Value::Object(obj) => {
                    if obj.is_empty() {
                        out.push_str("{}");
                        continue;
                    }
                    out.push('{');
                    stack.push(Step::Raw("}"));
                    for (i, (k, item)) in obj.entries().iter().enumerate().rev() {
                        stack.push(Step::Value(item));
                        stack.push(Step::Key(k));
                        if i > 0 {
                            stack.push(Step::Raw(","));
                        }
                    }
                }
            },
        }
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Appends `s` as a JSON string literal, escaped exactly as `JSON.stringify` does: `"` and `\`,
/// the short escapes `\b \f \n \r \t`, other control characters as lowercase `\u00xx`;
/// `/`, U+2028, U+2029 and all other characters raw.
pub fn write_str(s: &str, out: &mut String) {
    out.reserve(s.len() + 2);
    out.push('"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let esc: &str = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            0x00..=0x1f => "",
            _ => continue,
        };
        out.push_str(&s[start..i]);
        if esc.is_empty() {
            out.push_str("\\u00");
            out.push(HEX[(b >> 4) as usize] as char);
            out.push(HEX[(b & 0xf) as usize] as char);
        } else {
            out.push_str(esc);
        }
        start = i + 1;
    }
    out.push_str(&s[start..]);
    out.push('"');
}
