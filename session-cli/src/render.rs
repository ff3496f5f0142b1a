//! Rendering messages and events for people: one heading line and wrapped body lines.

use session_core::Event;
use session_core::json::Value;

use crate::output::{Style, clip, escape_controls, truncate, wrap};

/// A shared `null`.
static NULL: Value = Value::Null;

fn str_at<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// Who a message is from, e.g. `user`, `assistant · provider/model`,
/// `user · plugin @x/y (snapshot)`, `tool result · call_1`.
pub(crate) fn message_heading(msg: &Value) -> String {
    escape_controls(&raw_heading(msg)).into_owned()
}

fn raw_heading(msg: &Value) -> String {
    let role = str_at(msg, "role").unwrap_or("?");
    let source = msg.get("source");
    let kind = source.and_then(|s| str_at(s, "kind")).unwrap_or("");
    match kind {
        "model" => {
            let s = source.unwrap_or(&NULL);
            format!(
                "{role} · {}/{}",
                str_at(s, "provider").unwrap_or("?"),
                str_at(s, "model").unwrap_or("?")
            )
        }
        "tool" => format!(
            "tool result · {}",
            source.and_then(|s| str_at(s, "callId")).unwrap_or("?")
        ),
        "plugin" => {
            let s = source.unwrap_or(&NULL);
            let form = str_at(s, "form")
                .map(|f| format!(" ({f})"))
                .unwrap_or_default();
            format!(
                "{role} · plugin {}{form}",
                str_at(s, "plugin").unwrap_or("?")
            )
        }
        "user" | "" => role.to_owned(),
        other => format!("{role} · {other}"),
    }
}

/// How a block is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tone {
    Plain,
    Dim,
    Cyan,
    Red,
}

impl Tone {
    fn paint(self, style: Style, s: &str) -> String {
        match self {
            Tone::Plain => s.to_owned(),
            Tone::Dim => style.dim(s),
            Tone::Cyan => style.cyan(s),
            Tone::Red => style.red(s),
        }
    }
}

/// The blocks of a content list, if it is one.
fn blocks(content: Option<&Value>) -> &[Value] {
    content
        .and_then(Value::as_array)
        .map_or(&[], |a| a.as_slice())
}

/// The plain text of a content list (blocks joined by newlines).
fn content_text(content: Option<&Value>) -> String {
    blocks(content)
        .iter()
        .map(|b| block_text(b).1)
        .collect::<Vec<_>>()
        .join("\n")
}

/// One content block as plain text, with how to show it.
fn block_text(block: &Value) -> (Tone, String) {
    let ty = str_at(block, "type").unwrap_or("?");
    match ty {
        "text" => (Tone::Plain, str_at(block, "text").unwrap_or("").to_owned()),
        "reasoning" => (
            Tone::Dim,
            format!("(thinking) {}", str_at(block, "text").unwrap_or("")),
        ),
        "tool-call" => {
            let args = match block.get("arguments") {
                Some(Value::String(s)) => s.to_string(),
                Some(other) => other.to_json(),
                None => String::new(),
            };
            (
                Tone::Cyan,
                format!(
                    "→ {}({args})  [{}]",
                    str_at(block, "name").unwrap_or("?"),
                    str_at(block, "id").unwrap_or("?")
                ),
            )
        }
        "tool-result" => {
            let inner = content_text(block.get("content"));
            if block.get("isError").and_then(Value::as_bool) == Some(true) {
                (Tone::Red, format!("← error: {inner}"))
            } else {
                (Tone::Plain, format!("← {inner}"))
            }
        }
        "image" => {
            let a = block.get("attachment").unwrap_or(&NULL);
            (
                Tone::Plain,
                format!(
                    "[image {}x{} {}]",
                    a.get("width").map(Value::to_json).unwrap_or_default(),
                    a.get("height").map(Value::to_json).unwrap_or_default(),
                    str_at(a, "mediaType").unwrap_or("?")
                ),
            )
        }
        other => (Tone::Plain, format!("[{other} block]")),
    }
}

/// The body of a message: its content as wrapped, styled, possibly clipped lines.
pub(crate) fn message_body(
    msg: &Value,
    width: usize,
    max_lines: Option<usize>,
    style: Style,
) -> Vec<String> {
    let mut lines = Vec::new();
    for block in blocks(msg.get("content")) {
        let (tone, text) = block_text(block);
        let text = escape_controls(&text);
        lines.extend(wrap(&text, width).iter().map(|l| tone.paint(style, l)));
    }
    clip(lines, max_lines)
}

/// A one-line summary of a message, at most `max` columns.
pub(crate) fn message_summary(msg: &Value, max: usize) -> String {
    let text = content_text(msg.get("content"));
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    truncate(&escape_controls(&flat), max)
}

/// A short description of an event for tables (closers, demo narration).
pub(crate) fn event_detail(event: &Event) -> String {
    escape_controls(&raw_detail(event)).into_owned()
}

fn raw_detail(event: &Event) -> String {
    let data = event.data();
    match event.event_type() {
        "tool/result" => {
            let code = data
                .get("error")
                .and_then(|e| str_at(e, "code"))
                .unwrap_or("");
            let call = data
                .get("message")
                .and_then(|m| m.get("source"))
                .and_then(|s| str_at(s, "callId"))
                .unwrap_or("?");
            let source = event
                .source_event_seqs()
                .filter(|s| !s.is_empty())
                .map(|s| format!(" (tool/call seq {})", join_seqs(&s)))
                .unwrap_or_default();
            format!("{code} call {call}{source}").trim().to_owned()
        }
        "step/end" | "step/start" => format!(
            "turn {}, step {}",
            data.get("turn").map(Value::to_json).unwrap_or_default(),
            data.get("step").map(Value::to_json).unwrap_or_default()
        ),
        "turn/end" => format!(
            "turn {}, {}",
            data.get("turn").map(Value::to_json).unwrap_or_default(),
            data.get("reason")
                .and_then(|r| str_at(r, "kind"))
                .unwrap_or("?")
        ),
        "turn/start" => format!(
            "turn {}",
            data.get("turn").map(Value::to_json).unwrap_or_default()
        ),
        "tool/call" => format!(
            "{} [{}]",
            str_at(data, "name").unwrap_or("?"),
            str_at(data, "callId").unwrap_or("?")
        ),
        _ => String::new(),
    }
}

/// Seqs as `1, 2, 3` (long lists shortened).
pub(crate) fn join_seqs(seqs: &[u64]) -> String {
    if seqs.len() > 8 {
        format!(
            "{}, … {} ({} seqs)",
            seqs[..3]
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            seqs[seqs.len() - 1],
            seqs.len()
        )
    } else {
        seqs.iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    }
}
