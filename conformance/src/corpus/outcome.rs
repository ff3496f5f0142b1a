//! Outcomes of persistence operations as the corpus records them: `{ok, meta, eventCount,
//! events}` or `{ok: false, error: {name, message, code?, cause?, location?}}`, built the same
//! way from the reference's expectation and from our result, so that they compare by text.

use std::path::Path;

use session_core::json::Value;
use session_core::{Event, SessionHeader};
use session_persist::Error;

use super::Mismatch;
use super::doc::{Doc, clip, text_diff, unrepresentable};

/// The result of one operation: the header and the events, or the error.
pub(crate) type Outcome = Result<(SessionHeader, Vec<Event>), Error>;

/// The error keys the corpus records, in the order both sides are written.
const ERROR_KEYS: [&str; 5] = ["name", "message", "code", "cause", "location"];

/// `text` with the temporary root written as `<root>`, as the corpus writes paths.
pub(crate) fn rootless(text: &str, root: &Path) -> String {
    text.replace(&root.display().to_string(), "<root>")
}

/// The reference's error restricted to the keys the runner compares.
fn expected_error(e: &Value) -> Value {
    let mut entries: Vec<(&str, Value)> = Vec::new();
    for key in ERROR_KEYS {
        let Some(v) = e.get(key) else { continue };
        let v = match key {
            "cause" => expected_error(v),
            "location" => Value::object(
                ["kind", "path"]
                    .into_iter()
                    .filter_map(|k| v.get(k).map(|x| (k, x.clone()))),
            ),
            _ => v.clone(),
        };
        entries.push((key, v));
    }
    Value::object(entries)
}

/// One link of our error's cause chain, shaped like `want` (the reference's error at the same
/// depth): `name`, `message`, `code` always; `cause` and `location` where `want` has them.
fn actual_error(err: &(dyn std::error::Error + 'static), want: &Value, root: &Path) -> Value {
    let ours = err.downcast_ref::<Error>();
    let mut entries: Vec<(&str, Value)> = vec![
        ("name", Value::from(ours.map_or("Error", Error::name))),
        ("message", Value::from(rootless(&err.to_string(), root))),
    ];
    if let Some(code) = Error::code_of(err) {
        entries.push(("code", Value::from(code)));
    }
    if let Some(want_cause) = want.get("cause") {
        let cause = err
            .source()
            .map_or(Value::Null, |c| actual_error(c, want_cause, root));
        entries.push(("cause", cause));
    }
    if want.get("location").is_some() {
        let location = ours.and_then(Error::location).map_or(Value::Null, |at| {
            let mut loc: Vec<(&str, Value)> = vec![("kind", Value::from(at.kind.as_str()))];
            if want.get("location").and_then(|l| l.get("path")).is_some() {
                loc.push((
                    "path",
                    Value::from(rootless(&at.path.display().to_string(), root)),
                ));
            }
            Value::object(loc)
        });
        entries.push(("location", location));
    }
    Value::object(entries)
}

/// The expectation at `key` of `doc`, normalised: event references resolved, error keys
/// restricted to those the runner compares.
pub(crate) fn expected_outcome(doc: &Doc, key: &str) -> Result<Value, String> {
    let expected = doc.req(key).map_err(|e| e.to_string())?;
    if expected.get("ok").and_then(Value::as_bool) == Some(true) {
        let mut entries: Vec<(&str, Value)> = vec![("ok", Value::Bool(true))];
        if let Some(meta) = expected.get("meta") {
            entries.push(("meta", meta.clone()));
        }
        if let Some(count) = expected.get("eventCount") {
            entries.push(("eventCount", count.clone()));
        }
        if let Some(events) = expected.get("events") {
            let list = doc.event_list(events).map_err(|e| e.to_string())?;
            entries.push(("events", Value::array(list)));
        }
        Ok(Value::object(entries))
    } else {
        let error = expected.get("error").map_or(Value::Null, expected_error);
        Ok(Value::object([
            ("ok", Value::Bool(false)),
            ("error", error),
        ]))
    }
}

/// Our outcome, shaped like `want` (from [`expected_outcome`]).
pub(crate) fn actual_outcome(got: &Outcome, want: &Value, root: &Path) -> Value {
    match got {
        Ok((meta, events)) => {
            // Against an expected error, the whole result is shown (and compared by the
            // known-divergence rules).
            let all = want.get("ok").and_then(Value::as_bool) != Some(true);
            let mut entries: Vec<(&str, Value)> = vec![("ok", Value::Bool(true))];
            if all || want.get("meta").is_some() {
                entries.push(("meta", meta.to_value()));
            }
            if all || want.get("eventCount").is_some() {
                entries.push((
                    "eventCount",
                    session_core::event::seq_value(events.len() as u64),
                ));
            }
            if all || want.get("events").is_some() {
                entries.push(("events", Value::array(events.iter().map(Event::to_value))));
            }
            Value::object(entries)
        }
        Err(err) => {
            let want_error = want.get("error").cloned().unwrap_or_default();
            Value::object([
                ("ok", Value::Bool(false)),
                ("error", actual_error(err, &want_error, root)),
            ])
        }
    }
}

/// Describes how `actual` differs from `want` (both normalised outcomes).
fn describe(want: &Value, actual: &Value) -> String {
    let want_ok = want.get("ok").and_then(Value::as_bool) == Some(true);
    let got_ok = actual.get("ok").and_then(Value::as_bool) == Some(true);
    let count = |v: &Value| {
        v.get("events")
            .and_then(Value::as_array)
            .map_or(0, |a| a.len())
    };
    let error = |v: &Value| {
        let e = v.get("error");
        let name = e
            .and_then(|e| e.get("name"))
            .and_then(Value::as_str)
            .unwrap_or("?");
        let message = e.and_then(|e| e.get("message")).map(Value::to_json);
        format!("{name}: {}", message.unwrap_or_default())
    };
    match (want_ok, got_ok) {
        (true, false) => format!("expected success, got {}", clip(&error(actual), 240)),
        (false, true) => format!(
            "expected error {}, got {} events",
            clip(&error(want), 240),
            count(actual)
        ),
        (false, false) => {
            let (w, a) = (want.get("error"), actual.get("error"));
            if w.and_then(|e| e.get("name")) != a.and_then(|e| e.get("name"))
                || w.and_then(|e| e.get("message")) != a.and_then(|e| e.get("message"))
            {
                format!("expected {}, got {}", error(want), error(actual))
            } else {
                let (w, a) = (
                    w.map(Value::to_json).unwrap_or_default(),
                    a.map(Value::to_json).unwrap_or_default(),
                );
                format!("error {}", text_diff(&w, &a))
            }
        }
        (true, true) => {
            if want.get("meta") != actual.get("meta") {
                let text = |v: &Value| v.get("meta").map(Value::to_json).unwrap_or_default();
                return format!("meta: expected {} got {}", text(want), text(actual));
            }
            let (we, ae) = (
                want.get("events").and_then(Value::as_array),
                actual.get("events").and_then(Value::as_array),
            );
            if let (Some(we), Some(ae)) = (we, ae) {
                if we.len() != ae.len() {
                    return format!("expected {} events, got {}", we.len(), ae.len());
                }
                for (i, (w, a)) in we.iter().zip(ae.iter()).enumerate() {
                    let (w, a) = (w.to_json(), a.to_json());
                    if w != a {
                        return format!("event {i}: {}", text_diff(&w, &a));
                    }
                }
            }
            text_diff(&want.to_json(), &actual.to_json())
        }
    }
}

/// Compares our outcome with the expectation at `key` of `doc`.
pub(crate) fn compare(doc: &Doc, key: &str, got: &Outcome, root: &Path) -> Result<(), Mismatch> {
    let want = expected_outcome(doc, key)?;
    if let Some(reason) = unrepresentable(&want) {
        return Err(reason.into());
    }
    let actual = actual_outcome(got, &want, root);
    if want.to_json() == actual.to_json() {
        Ok(())
    } else {
        Err(Mismatch::values(describe(&want, &actual), want, actual))
    }
}
