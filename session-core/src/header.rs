//! The session header: metadata that is not replayed.

use std::sync::Arc;

use crate::Error;
use crate::event::seq_value;
use crate::json::{self, Value};

/// `SESSION_FORMAT_VERSION`: the only log format version this build reads and writes.
pub const SESSION_FORMAT_VERSION: i64 = 0;

/// The header of a session (`SessionHeader`).
///
/// A header given to a session (`create`) keeps unknown extra keys (in order, after the known
/// fields). A header read from storage is rebuilt from the known fields only
/// ([`SessionHeader::known_fields`]), as the reference's readers do: unknown stored keys are
/// not part of any read path's metadata.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionHeader {
    /// The session id.
    pub id: Arc<str>,
    /// Creation time, ms since the Unix epoch.
    pub created_at: u64,
    /// Absolute working directory.
    pub cwd: Option<Arc<str>>,
    /// Fork or seed lineage: the parent session id.
    pub parent_session: Option<Arc<str>>,
    /// How many leading events were inherited through a fork.
    pub seed_length: Option<u64>,
    /// `origin: "subagent"` when present.
    pub origin_subagent: bool,
    /// Delegation depth; absent means 0.
    pub delegation_depth: Option<u64>,
    /// Agent preset name.
    pub agent_preset: Option<Arc<str>>,
    /// Unknown keys, kept verbatim.
    pub extra: Vec<(Arc<str>, Value)>,
    /// The known fields exactly as stored, for a header read from storage without validation
    /// (`read_from`, `list`) whose stored fields the typed fields above cannot express: a
    /// foreign `version`, or a field of the wrong type (a `seedLength` written as a string).
    /// When present, [`SessionHeader::to_value`] returns it; the typed fields hold only what
    /// is well typed. `None` for every validated header.
    pub stored: Option<Value>,
}

/// `String(v)` of JavaScript for a JSON value or `undefined` (used in messages).
pub fn js_string(v: Option<&Value>) -> String {
    match v {
        None => "undefined".to_owned(),
        Some(Value::String(s)) => s.to_string(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| match i {
                Value::Null => String::new(),
                other => js_string(Some(other)),
            })
            .collect::<Vec<_>>()
            .join(","),
        Some(Value::Object(_)) => "[object Object]".to_owned(),
        Some(Value::Number(n)) => {
            let mut s = String::new();
            json::write_js_number(n.as_f64(), &mut s);
            if !n.as_f64().is_finite() {
                s = if n.as_f64().is_nan() {
                    "NaN".to_owned()
                } else if n.as_f64() > 0.0 {
                    "Infinity".to_owned()
                } else {
                    "-Infinity".to_owned()
                };
            }
            s
        }
        Some(other) => other.to_json(),
    }
}

/// The header fields of the format, in the order the header is serialized.
pub const HEADER_FIELDS: [&str; 9] = [
    "version",
    "id",
    "createdAt",
    "cwd",
    "parentSession",
    "seedLength",
    "origin",
    "delegationDepth",
    "agentPreset",
];

/// Whether `path` is absolute under POSIX rules.
pub fn is_absolute_path(path: &str) -> bool {
    path.starts_with('/')
}

impl SessionHeader {
    /// A minimal header `{version: 0, id, createdAt}`.
    pub fn new(id: impl Into<Arc<str>>, created_at: u64) -> SessionHeader {
        SessionHeader {
            id: id.into(),
            created_at,
            cwd: None,
            parent_session: None,
            seed_length: None,
            origin_subagent: false,
            delegation_depth: None,
            agent_preset: None,
            extra: Vec::new(),
            stored: None,
        }
    }

    /// A stored header record rebuilt from its known fields: each of [`HEADER_FIELDS`] present
    /// in `record`, in that order, with its stored value (not type-checked). Unknown keys and
    /// storage tags (JSONL's `"type"`) are dropped. A non-object record gives an empty object.
    pub fn known_fields(record: &Value) -> Value {
        let Some(o) = record.as_object() else {
            return Value::Object(json::Object::from_entries(Vec::new()));
        };
        let entries: Vec<(Arc<str>, Value)> = HEADER_FIELDS
            .iter()
            .filter_map(|k| o.get(k).map(|v| (json::key(k), v.clone())))
            .collect();
        Value::Object(json::Object::from_entries(entries))
    }

    /// This header, read leniently from storage, marked with the stored known fields `known`
    /// (see [`SessionHeader::known_fields`]) when they differ from what its typed fields write
    /// (see [`SessionHeader::stored`]).
    #[must_use]
    pub fn with_stored_fields(mut self, known: &Value) -> SessionHeader {
        self.stored = None;
        self.extra.clear();
        if self.to_value() != *known {
            self.stored = Some(known.clone());
        }
        self
    }

    /// Validates a header value for session `id`, in the reference's order; the first failure
    /// wins and carries the reference's exact message.
    pub fn from_value(v: &Value, id: &str) -> Result<SessionHeader, Error> {
        let fail = |m: String| Err(Error::Header(m));
        let Some(o) = v.as_object() else {
            return fail("session header is not a plain JSON record".into());
        };
        let version = o.get("version");
        if version.and_then(Value::as_f64) != Some(0.0) {
            return fail(format!(
                "session header version must be 0, got {}",
                js_string(version)
            ));
        }
        let hid = o.get("id");
        if hid.and_then(Value::as_str) != Some(id) {
            return fail(format!(
                "session header id \"{}\" does not match session id \"{id}\"",
                js_string(hid)
            ));
        }
        let Some(created_at) = o.get("createdAt").and_then(Value::as_u64) else {
            return fail("session header createdAt must be a non-negative safe integer".into());
        };
        let cwd = match o.get("cwd") {
            None => None,
            Some(Value::String(s)) => {
                if !is_absolute_path(s) {
                    return fail(format!(
                        "session header cwd must be an absolute path, got \"{s}\""
                    ));
                }
                Some(s.clone())
            }
            Some(_) => return fail("session header cwd must be a string".into()),
        };
        let parent_session = match o.get("parentSession") {
            None => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => return fail("session header parentSession must be a string".into()),
        };
        let seed_length = match o.get("seedLength") {
            None => None,
            Some(v) => match v.as_u64() {
                Some(n) => Some(n),
                None => {
                    return fail(
                        "session header seedLength must be a non-negative safe integer".into(),
                    );
                }
            },
        };
        let origin_subagent = match o.get("origin") {
            None => false,
            Some(v) if v.as_str() == Some("subagent") => true,
            Some(_) => return fail("session header origin must be \"subagent\"".into()),
        };
        let delegation_depth = match o.get("delegationDepth") {
            None => None,
            Some(v) => match v.as_u64() {
                Some(n) => Some(n),
                None => {
                    return fail(
                        "session header delegationDepth must be a non-negative safe integer".into(),
                    );
                }
            },
        };
        let agent_preset = match o.get("agentPreset") {
            None => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => return fail("session header agentPreset must be a string".into()),
        };
        let extra = o
            .entries()
            .iter()
            .filter(|(k, _)| !HEADER_FIELDS.contains(&&**k))
            .cloned()
            .collect();
        Ok(SessionHeader {
            id: id.into(),
            created_at,
            cwd,
            parent_session,
            seed_length,
            origin_subagent,
            delegation_depth,
            agent_preset,
            extra,
            stored: None,
        })
    }

    /// The header as JSON: `version, id, createdAt, cwd?, parentSession?, seedLength?,
    /// origin?, delegationDepth?, agentPreset?`, then unknown keys; or the stored fields, when
    /// the header carries them ([`SessionHeader::stored`]).
    pub fn to_value(&self) -> Value {
        if let Some(stored) = &self.stored {
            return stored.clone();
        }
        let mut e: Vec<(Arc<str>, Value)> = Vec::with_capacity(9 + self.extra.len());
        e.push((json::key("version"), Value::from(0u8)));
        e.push((json::key("id"), Value::String(self.id.clone())));
        e.push((json::key("createdAt"), seq_value(self.created_at)));
        if let Some(c) = &self.cwd {
            e.push((json::key("cwd"), Value::String(c.clone())));
        }
        if let Some(p) = &self.parent_session {
            e.push((json::key("parentSession"), Value::String(p.clone())));
        }
        if let Some(n) = self.seed_length {
            e.push((json::key("seedLength"), seq_value(n)));
        }
        if self.origin_subagent {
            e.push((json::key("origin"), Value::from("subagent")));
        }
        if let Some(n) = self.delegation_depth {
            e.push((json::key("delegationDepth"), seq_value(n)));
        }
        if let Some(a) = &self.agent_preset {
            e.push((json::key("agentPreset"), Value::String(a.clone())));
        }
        e.extend(self.extra.iter().cloned());
        Value::Object(json::Object::from_entries(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str, expect: Result<&str, &str>) {
        let v = json::parse(text).unwrap();
        match (SessionHeader::from_value(&v, "s"), expect) {
            (Ok(h), Ok(out)) => assert_eq!(h.to_value().to_json(), out),
            (Err(e), Err(msg)) => assert_eq!(e.to_string(), msg),
            (got, _) => panic!("{text}: unexpected {got:?}"),
        }
    }

    #[test]
    fn validation_order_and_messages() {
        check("1", Err("session header is not a plain JSON record"));
        check("null", Err("session header is not a plain JSON record"));
        check("[]", Err("session header is not a plain JSON record"));
        check("{}", Err("session header version must be 0, got undefined"));
        check(
            r#"{"version":1}"#,
            Err("session header version must be 0, got 1"),
        );
        check(
            r#"{"version":0,"id":"t"}"#,
            Err(r#"session header id "t" does not match session id "s""#),
        );
        check(
            r#"{"version":0,"id":"s","createdAt":"123"}"#,
            Err("session header createdAt must be a non-negative safe integer"),
        );
        check(
            r#"{"version":0,"id":"s","createdAt":1,"cwd":1}"#,
            Err("session header cwd must be a string"),
        );
        check(
            r#"{"version":0,"id":"s","createdAt":1,"cwd":"relative"}"#,
            Err(r#"session header cwd must be an absolute path, got "relative""#),
        );
        check(
            r#"{"version":0,"id":"s","createdAt":1,"parentSession":1}"#,
            Err("session header parentSession must be a string"),
        );
        check(
            r#"{"version":0,"id":"s","createdAt":1,"seedLength":0.5}"#,
            Err("session header seedLength must be a non-negative safe integer"),
        );
        check(
            r#"{"version":0,"id":"s","createdAt":1,"origin":"fork"}"#,
            Err(r#"session header origin must be "subagent""#),
        );
        check(
            r#"{"version":0,"id":"s","createdAt":1,"delegationDepth":-1}"#,
            Err("session header delegationDepth must be a non-negative safe integer"),
        );
        check(
            r#"{"version":0,"id":"s","createdAt":1,"agentPreset":1}"#,
            Err("session header agentPreset must be a string"),
        );
        check(
            r#"{"x":1,"agentPreset":"a","id":"s","version":0,"createdAt":123,"cwd":"/accepted","parentSession":"parent","seedLength":2}"#,
            Ok(
                r#"{"version":0,"id":"s","createdAt":123,"cwd":"/accepted","parentSession":"parent","seedLength":2,"agentPreset":"a","x":1}"#,
            ),
        );
    }
}
