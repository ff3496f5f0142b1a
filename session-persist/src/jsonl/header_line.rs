//! The header record of a JSONL log: writing (`toHeaderLine`) and validation (`isHeaderLine`).

use std::fmt::Write as _;
use std::sync::Arc;

use session_core::header::js_string;
use session_core::json::{self, ParseError, ParseErrorKind, Value};
use session_core::{SESSION_FORMAT_VERSION, SessionHeader};

use crate::error::{Error, FormatRefusal, HeaderProblem, Result};

/// `toHeaderLine(meta)` serialized, without the newline: keys `type, version, id, createdAt,
/// cwd?, parentSession?, seedLength?, origin?, delegationDepth, agentPreset?`, with
/// `delegationDepth` always written (0 when absent). Unknown header keys are not written.
pub fn to_header_line(meta: &SessionHeader) -> String {
    let mut out = String::with_capacity(160);
    out.push_str("{\"type\":\"session\",\"version\":0,\"id\":");
    json::write_str(&meta.id, &mut out);
    let _ = write!(out, ",\"createdAt\":{}", meta.created_at);
    if let Some(cwd) = &meta.cwd {
        out.push_str(",\"cwd\":");
        json::write_str(cwd, &mut out);
    }
    if let Some(parent) = &meta.parent_session {
        out.push_str(",\"parentSession\":");
        json::write_str(parent, &mut out);
    }
    if let Some(n) = meta.seed_length {
        let _ = write!(out, ",\"seedLength\":{n}");
    }
    if meta.origin_subagent {
        out.push_str(",\"origin\":\"subagent\"");
    }
    let _ = write!(
        out,
        ",\"delegationDepth\":{}",
        meta.delegation_depth.unwrap_or(0)
    );
    if let Some(preset) = &meta.agent_preset {
        out.push_str(",\"agentPreset\":");
        json::write_str(preset, &mut out);
    }
    out.push('}');
    out
}

/// A header record that passed `isHeaderLine`.
#[derive(Debug, Clone)]
pub(crate) struct ParsedHeader {
    /// The header, read leniently: unchecked fields kept in the typed fields only when well
    /// typed, and the stored known fields kept as stored ([`SessionHeader::stored`]).
    pub(crate) meta: SessionHeader,
    /// The known fields of the record as stored ([`SessionHeader::known_fields`]): no `type`
    /// tag, no unknown keys.
    pub(crate) value: Value,
}

impl ParsedHeader {
    /// The header's `cwd` value as stored (it is not type-checked by `isHeaderLine`).
    pub(crate) fn cwd_value(&self) -> Option<&Value> {
        self.value.get("cwd")
    }
}

/// A non-negative safe integer that is not `-0`.
fn strict_count(v: Option<&Value>) -> Option<u64> {
    let n = v?.as_number()?;
    if n.is_negative_zero() {
        return None;
    }
    n.as_u64()
}

/// `isHeaderLine`: `Ok(false)` for a record that is not a session header; an error for a header
/// that uses the retired policy baseline fields.
pub(crate) fn is_header_line(v: &Value) -> Result<bool> {
    Ok(header_problem(v)?.is_none())
}

/// What keeps a record from passing `isHeaderLine` (`None`: it passes), in the order the
/// reference tests; an error for a header that uses the retired policy baseline fields.
fn header_problem(v: &Value) -> Result<Option<&'static str>> {
    let Some(o) = v.as_object() else {
        return Ok(Some("the record is not an object"));
    };
    if o.get("type").and_then(Value::as_str) != Some("session") {
        return Ok(Some("`type` is not \"session\""));
    }
    if o.get("version").and_then(Value::as_number).is_none() {
        return Ok(Some("`version` is not a number"));
    }
    if o.get("id").and_then(Value::as_str).is_none() {
        return Ok(Some("`id` is not a string"));
    }
    if o.contains_key("sandboxMode") || o.contains_key("approvalPolicy") {
        return Err(Error::RetiredHeaderFields);
    }
    if strict_count(o.get("createdAt")).is_none() {
        return Ok(Some("`createdAt` is not a non-negative safe integer"));
    }
    if strict_count(o.get("delegationDepth")).is_none() {
        return Ok(Some("`delegationDepth` is not a non-negative safe integer"));
    }
    if let Some(origin) = o.get("origin")
        && origin.as_str() != Some("subagent")
    {
        return Ok(Some("`origin` is present but not \"subagent\""));
    }
    if let Some(preset) = o.get("agentPreset")
        && preset.as_str().is_none()
    {
        return Ok(Some("`agentPreset` is present but not a string"));
    }
    Ok(None)
}

/// Builds the lenient header of a record that passed [`is_header_line`].
fn build(v: &Value) -> Option<ParsedHeader> {
    let o = v.as_object()?;
    let id: Arc<str> = o.get("id")?.as_arc_str()?.clone();
    let string = |k: &str| o.get(k).and_then(Value::as_arc_str).cloned();
    let meta = SessionHeader {
        id,
        created_at: strict_count(o.get("createdAt"))?,
        cwd: string("cwd"),
        parent_session: string("parentSession"),
        seed_length: o.get("seedLength").and_then(Value::as_u64),
        origin_subagent: o.get("origin").and_then(Value::as_str) == Some("subagent"),
        delegation_depth: Some(strict_count(o.get("delegationDepth"))?),
        agent_preset: string("agentPreset"),
        extra: Vec::new(),
        stored: None,
    };
    let value = SessionHeader::known_fields(v);
    Some(ParsedHeader {
        meta: meta.with_stored_fields(&value),
        value,
    })
}

/// The version refusal for a header record, if its numeric `version` is not 0.
pub(crate) fn version_refusal(v: &Value) -> Option<Error> {
    let o = v.as_object()?;
    let version = o.get("version")?.as_number()?;
    // `version === 0` (`-0` included).
    if version.as_i64() == Some(SESSION_FORMAT_VERSION) {
        return None;
    }
    let mut text = String::new();
    json::write_js_number(version.as_f64(), &mut text);
    Some(Error::FormatUnsupported {
        refusal: FormatRefusal::Version {
            id: js_string(o.get("id")),
            version: text,
            newer: version.as_f64() > 0.0,
        },
        location: None,
    })
}

/// The line's value, or the parser's error; a lone surrogate escape is refused.
fn parse_json(
    text: &str,
    line_offset: u64,
    line: Option<u64>,
) -> Result<std::result::Result<Value, ParseError>> {
    match json::parse(text) {
        Err(e) if e.kind == ParseErrorKind::LoneSurrogate => Err(Error::LoneSurrogate {
            line,
            offset: line_offset + e.offset as u64,
        }),
        parsed => Ok(parsed),
    }
}

/// The strict header parse of a log reader: JSON, then the version refusal, then the shape.
pub(crate) fn parse_strict(text: &str) -> Result<ParsedHeader> {
    let v =
        parse_json(text, 0, None)?.map_err(|cause| Error::HeaderNotJson { cause: Some(cause) })?;
    if let Some(refusal) = version_refusal(&v) {
        return Err(refusal);
    }
    if let Some(problem) = header_problem(&v)? {
        return Err(Error::NotSessionHeader {
            problem: HeaderProblem(problem),
        });
    }
    build(&v).ok_or(Error::NotSessionHeader {
        problem: HeaderProblem("the record is not a session header"),
    })
}

/// The lenient header parse of listing and raw reads: `None` for invalid JSON or a record that
/// is not a header. The version is not checked here.
pub(crate) fn parse_lenient(text: &str) -> Result<Option<ParsedHeader>> {
    let Ok(v) = parse_json(text, 0, None)? else {
        return Ok(None);
    };
    if !is_header_line(&v)? {
        return Ok(None);
    }
    Ok(build(&v))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strict(text: &str) -> std::result::Result<ParsedHeader, String> {
        parse_strict(text).map_err(|e| e.to_string())
    }

    const OK: &str = r#"{"type":"session","version":0,"id":"s","createdAt":1,"delegationDepth":0}"#;

    #[test]
    fn header_line_key_order_and_defaults() {
        let mut meta = SessionHeader::new("s", 5);
        assert_eq!(
            to_header_line(&meta),
            r#"{"type":"session","version":0,"id":"s","createdAt":5,"delegationDepth":0}"#
        );
        meta.cwd = Some("/w".into());
        meta.parent_session = Some("p".into());
        meta.seed_length = Some(3);
        meta.origin_subagent = true;
        meta.delegation_depth = Some(2);
        meta.agent_preset = Some("a\"b".into());
        meta.extra.push(("x".into(), Value::from(1u8)));
        assert_eq!(
            to_header_line(&meta),
            r#"{"type":"session","version":0,"id":"s","createdAt":5,"cwd":"/w","parentSession":"p","seedLength":3,"origin":"subagent","delegationDepth":2,"agentPreset":"a\"b"}"#
        );
    }

    #[test]
    fn strict_parse_accepts_a_header() {
        let h = strict(OK).unwrap();
        assert_eq!(&*h.meta.id, "s");
        assert_eq!(h.meta.delegation_depth, Some(0));
        assert_eq!(
            h.value.to_json(),
            r#"{"version":0,"id":"s","createdAt":1,"delegationDepth":0}"#
        );
        // Trailing `\r` is JSON whitespace.
        assert!(strict(&format!("{OK}\r")).is_ok());
    }

    // persistence §7.6 #6
    #[test]
    fn foreign_shape_with_foreign_version_is_a_refusal() {
        let e = parse_strict(r#"{"version":42,"id":"s"}"#).unwrap_err();
        assert_eq!(e.name(), "SessionFormatUnsupportedError");
        assert!(
            e.to_string()
                .starts_with("session \"s\" uses log format v42")
        );
    }

    // persistence §7.6 #7
    #[test]
    fn scalar_header_is_not_a_refusal() {
        assert_eq!(
            strict("42").unwrap_err(),
            "corrupt session log: first line is not a session header"
        );
    }

    // persistence §7.6 #8
    #[test]
    fn refusal_names_a_numeric_id() {
        let e = strict(r#"{"type":"other","version":42,"id":123}"#).unwrap_err();
        assert!(e.starts_with("session \"123\" uses log format v42"), "{e}");
        let e = strict(r#"{"version":-1}"#).unwrap_err();
        assert!(
            e.starts_with("session \"undefined\" uses log format v-1, older than"),
            "{e}"
        );
    }

    // persistence §7.6 #42, #43
    #[test]
    fn corrupt_or_foreign_first_lines() {
        assert_eq!(
            strict("{not json").unwrap_err(),
            "corrupt session log: header line is not valid JSON"
        );
        assert_eq!(
            strict("").unwrap_err(),
            "corrupt session log: header line is not valid JSON"
        );
        assert_eq!(
            strict(r#"{"type":"turn/start","seq":0}"#).unwrap_err(),
            "corrupt session log: first line is not a session header"
        );
    }

    /// The message is the reference's; the source says what is wrong with the first line.
    #[test]
    fn a_refused_first_line_names_its_problem_as_the_source() {
        use std::error::Error as _;
        let header = |rest: &str| format!(r#"{{"type":"session","version":0,"id":"s"{rest}}}"#);
        let depth = r#","createdAt":1,"delegationDepth":0"#;
        for (line, problem) in [
            ("{not json".to_owned(), "unexpected character 'n' at byte 1"),
            ("[1]".to_owned(), "the record is not an object"),
            (
                r#"{"type":"turn/start","seq":0}"#.to_owned(),
                "`type` is not \"session\"",
            ),
            (
                r#"{"type":"session","id":"s"}"#.to_owned(),
                "`version` is not a number",
            ),
            (
                r#"{"type":"session","version":0,"id":1}"#.to_owned(),
                "`id` is not a string",
            ),
            (
                header(r#","createdAt":-1,"delegationDepth":0"#),
                "`createdAt` is not a non-negative safe integer",
            ),
            (
                header(r#","createdAt":1"#),
                "`delegationDepth` is not a non-negative safe integer",
            ),
            (
                header(&format!(r#"{depth},"origin":"user""#)),
                "`origin` is present but not \"subagent\"",
            ),
            (
                header(&format!(r#"{depth},"agentPreset":1"#)),
                "`agentPreset` is present but not a string",
            ),
        ] {
            let err = parse_strict(&line).unwrap_err();
            assert!(
                matches!(
                    err,
                    Error::HeaderNotJson { .. } | Error::NotSessionHeader { .. }
                ),
                "{line}: {err:?}"
            );
            assert_eq!(
                err.source().map(ToString::to_string).as_deref(),
                Some(problem),
                "{line}"
            );
            assert_eq!(err.position().and_then(|p| p.line), Some(1), "{line}");
        }
    }

    fn with(key: &str, raw: &str) -> String {
        format!(
            r#"{{"type":"session","version":0,"id":"s","createdAt":1,"delegationDepth":0,"{key}":{raw}}}"#
        )
    }

    // persistence §7.6 #44, #45
    #[test]
    fn created_at_must_be_a_non_negative_safe_integer() {
        for bad in ["1.5", "-1", "9007199254740992", "-0", "\"1\""] {
            assert_eq!(
                strict(&with("createdAt", bad)).unwrap_err(),
                "corrupt session log: first line is not a session header",
                "createdAt {bad}"
            );
        }
    }

    // persistence §7.6 #46, #47
    #[test]
    fn delegation_depth_is_required_and_checked() {
        assert_eq!(
            strict(r#"{"type":"session","version":0,"id":"s","createdAt":1}"#).unwrap_err(),
            "corrupt session log: first line is not a session header"
        );
        for bad in ["\"1\"", "1.5", "-1", "-0"] {
            assert_eq!(
                strict(&with("delegationDepth", bad)).unwrap_err(),
                "corrupt session log: first line is not a session header",
                "delegationDepth {bad}"
            );
        }
    }

    // persistence §7.6 #48, #49
    #[test]
    fn agent_preset_round_trips_and_is_checked() {
        let h = strict(&with("agentPreset", "\"coder\"")).unwrap();
        assert_eq!(h.meta.agent_preset.as_deref(), Some("coder"));
        assert!(to_header_line(&h.meta).ends_with(r#","agentPreset":"coder"}"#));
        assert!(strict(&with("agentPreset", "7")).is_err());
        assert!(strict(&with("origin", "\"fork\"")).is_err());
        assert!(
            strict(&with("origin", "\"subagent\""))
                .unwrap()
                .meta
                .origin_subagent
        );
    }

    // persistence §7.6 #73
    #[test]
    fn retired_policy_fields_are_refused() {
        for key in ["sandboxMode", "approvalPolicy"] {
            assert_eq!(
                strict(&with(key, "\"x\"")).unwrap_err(),
                "session header uses retired policy baseline fields"
            );
            assert!(parse_lenient(&with(key, "\"x\"")).is_err());
        }
    }

    #[test]
    fn unchecked_fields_are_kept_in_the_value() {
        let h = strict(&with("cwd", "7")).unwrap();
        assert_eq!(h.meta.cwd, None);
        assert_eq!(h.cwd_value().and_then(Value::as_f64), Some(7.0));
        assert_eq!(
            h.meta.to_value().to_json(),
            r#"{"version":0,"id":"s","createdAt":1,"cwd":7,"delegationDepth":0}"#
        );
    }

    #[test]
    fn unknown_header_keys_are_dropped_from_the_metadata() {
        let h = strict(&with("extraField", "[1]")).unwrap();
        assert!(h.meta.extra.is_empty());
        assert_eq!(h.meta.stored, None);
        assert_eq!(
            h.value.to_json(),
            r#"{"version":0,"id":"s","createdAt":1,"delegationDepth":0}"#
        );
        assert_eq!(h.meta.to_value(), h.value);
    }

    #[test]
    fn ill_typed_or_foreign_known_fields_are_kept_as_stored() {
        let h = strict(&with("seedLength", "\"3\"")).unwrap();
        assert_eq!(h.meta.seed_length, None);
        assert_eq!(
            h.meta.to_value().to_json(),
            r#"{"version":0,"id":"s","createdAt":1,"seedLength":"3","delegationDepth":0}"#
        );
        let h = parse_lenient(
            r#"{"type":"session","version":1,"id":"s","createdAt":1,"delegationDepth":0,"z":0}"#,
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            h.meta.to_value().to_json(),
            r#"{"version":1,"id":"s","createdAt":1,"delegationDepth":0}"#
        );
        // The header line written for it is the validated form.
        assert!(to_header_line(&h.meta).contains(r#""version":0"#));
    }

    #[test]
    fn lenient_parse_skips_and_does_not_check_the_version() {
        assert!(parse_lenient("{").unwrap().is_none());
        assert!(parse_lenient("42").unwrap().is_none());
        let h = parse_lenient(
            r#"{"type":"session","version":3,"id":"s","createdAt":1,"delegationDepth":0}"#,
        )
        .unwrap()
        .unwrap();
        assert!(version_refusal(&h.value).is_some());
    }

    #[test]
    fn lone_surrogates_are_refused_with_their_offset() {
        let e = parse_strict(r#"{"type":"session","version":0,"id":"\ud800","createdAt":1}"#)
            .unwrap_err();
        assert!(matches!(e, Error::LoneSurrogate { line: None, .. }), "{e}");
    }
}
