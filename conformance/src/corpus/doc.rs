//! Reading the corpus's JSON documents: references between event lists, result shapes.

use std::path::{Path, PathBuf};

use session_core::json::Value;
use session_core::{Event, Events};

use super::{LayoutError, Mismatch};

/// Written in place of a lone UTF-16 surrogate escape of a corpus document: U+10FFFF (a
/// noncharacter that the visible corpus does not hold), followed by the escape's four hex digits.
const LONE_SURROGATE: char = '\u{10FFFF}';

/// Replaces every `\uXXXX` escape that is half of no surrogate pair with [`LONE_SURROGATE`]
/// and its hex digits, so that the document parses and only the checks that compare such a value
/// fail (see [`unrepresentable`]). Backslashes occur only inside strings in valid JSON, so a
/// plain scan over escapes is exact.
fn mark_lone_surrogates(text: &str) -> std::borrow::Cow<'_, str> {
    fn hex4(b: &[u8], at: usize) -> Option<u16> {
        let digits = std::str::from_utf8(b.get(at..at + 4)?).ok()?;
        u16::from_str_radix(digits, 16).ok()
    }
    let b = text.as_bytes();
    let mut out: Option<String> = None;
    let (mut i, mut copied) = (0, 0);
    while i < b.len() {
        if b[i] != b'\\' {
            i += 1;
            continue;
        }
        if b.get(i + 1) != Some(&b'u') {
            i += 2;
            continue;
        }
        let Some(unit) = hex4(b, i + 2) else {
            i += 2;
            continue;
        };
        let high = (0xD800..0xDC00).contains(&unit);
        let low = (0xDC00..0xE000).contains(&unit);
        if high
            && b.get(i + 6) == Some(&b'\\')
            && b.get(i + 7) == Some(&b'u')
            && hex4(b, i + 8).is_some_and(|u| (0xDC00..0xE000).contains(&u))
        {
            i += 12;
            continue;
        }
        if high || low {
            let s = out.get_or_insert_with(String::new);
            s.push_str(&text[copied..i]);
            s.push(LONE_SURROGATE);
            s.push_str(&text[i + 2..i + 6]);
            copied = i + 6;
        }
        i += 6;
    }
    match out {
        None => std::borrow::Cow::Borrowed(text),
        Some(mut s) => {
            s.push_str(&text[copied..]);
            std::borrow::Cow::Owned(s)
        }
    }
}

/// Why an expected value cannot be compared: it holds a lone UTF-16 surrogate, which this port's
/// strings cannot represent.
pub(crate) fn unrepresentable(expected: &Value) -> Option<String> {
    let text = expected.to_json();
    let at = text.find(LONE_SURROGATE)?;
    let digits: String = text[at + LONE_SURROGATE.len_utf8()..]
        .chars()
        .take(4)
        .collect();
    Some(format!(
        "the expected value holds a lone UTF-16 surrogate \\u{digits}, which this port cannot \
         represent (its strings are UTF-8); this check cannot pass"
    ))
}

/// Compares an expected value with ours by compact text.
pub(crate) fn diff(expected: &Value, actual: &Value) -> Result<(), Mismatch> {
    if let Some(reason) = unrepresentable(expected) {
        return Err(reason.into());
    }
    match json_diff(expected, actual) {
        None => Ok(()),
        Some(d) => Err(Mismatch::values(d, expected.clone(), actual.clone())),
    }
}

/// A parsed JSON document of the corpus, with the path it came from.
pub(crate) struct Doc {
    pub(crate) path: PathBuf,
    pub(crate) root: Value,
}

impl Doc {
    pub(crate) fn open(path: &Path) -> Result<Doc, LayoutError> {
        let text = std::fs::read_to_string(path).map_err(|e| LayoutError::Io {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        let root = Value::parse(&mark_lone_surrogates(&text)).map_err(|e| LayoutError::Json {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        Ok(Doc {
            path: path.to_path_buf(),
            root,
        })
    }

    /// The value at a dotted key path such as `jsonl.inspect.events`.
    pub(crate) fn at(&self, dotted: &str) -> Option<&Value> {
        let mut v = &self.root;
        for part in dotted.split('.') {
            v = v.get(part)?;
        }
        Some(v)
    }

    /// A required value at a dotted path.
    pub(crate) fn req(&self, dotted: &str) -> Result<&Value, LayoutError> {
        self.at(dotted).ok_or_else(|| LayoutError::Missing {
            path: self.path.clone(),
            key: dotted.to_owned(),
        })
    }

    /// Resolves an event list value: an array, `{"sameAs": P}` or `{"prefixOf": P, "count": n}`.
    pub(crate) fn event_list(&self, v: &Value) -> Result<Vec<Value>, LayoutError> {
        let mut v = v.clone();
        let mut limit: Option<usize> = None;
        for _ in 0..8 {
            if let Some(items) = v.as_array() {
                let n = limit.unwrap_or(items.len()).min(items.len());
                return Ok(items[..n].to_vec());
            }
            if let Some(p) = v.get("sameAs").and_then(Value::as_str) {
                v = self.req(p)?.clone();
                continue;
            }
            if let Some(p) = v.get("prefixOf").and_then(Value::as_str) {
                let count = v.get("count").and_then(Value::as_u64).unwrap_or(0) as usize;
                limit = Some(limit.map_or(count, |l| l.min(count)));
                v = self.req(p)?.clone();
                continue;
            }
            break;
        }
        Err(LayoutError::Missing {
            path: self.path.clone(),
            key: format!("event list (got {})", short(&v)),
        })
    }
}

/// Builds events from corpus event objects.
pub(crate) fn to_events(values: &[Value]) -> Result<Events, String> {
    values
        .iter()
        .enumerate()
        .map(|(i, v)| Event::from_value(v).map_err(|e| format!("event {i}: {e}")))
        .collect::<Result<Vec<_>, _>>()
        .map(Events::from_vec)
}

/// A short, single-line rendering of a value for diffs.
pub(crate) fn short(v: &Value) -> String {
    clip(&v.to_json(), 160)
}

/// Clips text to `max` characters with an ellipsis.
pub(crate) fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_owned()
    } else {
        let head: String = s.chars().take(max).collect();
        format!("{head}…")
    }
}

/// Describes the first difference between two JSON texts.
pub(crate) fn text_diff(expected: &str, actual: &str) -> String {
    let at = expected
        .bytes()
        .zip(actual.bytes())
        .position(|(a, b)| a != b)
        .unwrap_or(expected.len().min(actual.len()));
    let from = at.saturating_sub(40);
    let window = |s: &str| {
        let mut start = from.min(s.len());
        while !s.is_char_boundary(start) {
            start -= 1;
        }
        clip(&s[start..], 100)
    };
    format!(
        "differs at byte {at}: expected …{} | actual …{}",
        window(expected),
        window(actual)
    )
}

/// Compares two JSON values by their compact text; `None` when equal.
pub(crate) fn json_diff(expected: &Value, actual: &Value) -> Option<String> {
    let e = expected.to_json();
    let a = actual.to_json();
    (e != a).then(|| text_diff(&e, &a))
}
