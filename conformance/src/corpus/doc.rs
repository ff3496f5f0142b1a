//! Reading the corpus's JSON documents: references between event lists, result shapes.

use std::path::{Path, PathBuf};

use session_core::json::Value;
use session_core::{Event, Events};

use super::LayoutError;

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
        let root = Value::parse(&text).map_err(|e| LayoutError::Json {
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
