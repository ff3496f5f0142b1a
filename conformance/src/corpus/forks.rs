//! Checks over `logs/<name>/forks.json`: every `SessionStore::fork` case.

use std::path::Path;
use std::sync::Arc;

use session_core::event::seq_value;
use session_core::json::Value;
use session_core::{Event, FixedClock};
use session_store::{ForkSource, PrepareOptions, SeedSource, SessionStore};

use super::doc::{Doc, diff};
use super::logs::CORPUS_CLOCK_MS;
use super::{Group, LayoutError, Mismatch, Report};

pub(crate) fn check_forks(
    case: &str,
    path: &Path,
    expected: &Doc,
    report: &mut Report,
) -> Result<(), LayoutError> {
    let forks = Doc::open(path)?;
    let events = expected.event_list(expected.req("events")?)?;
    let header = expected.req("header")?.clone();
    let parent_id = forks
        .req("parent.sessionId")?
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let Some(cases) = forks.req("cases")?.as_array().cloned() else {
        return Err(LayoutError::Missing {
            path: path.to_path_buf(),
            key: "cases (array)".into(),
        });
    };
    for c in cases.iter() {
        let name = c.get("name").and_then(Value::as_str).unwrap_or("?");
        let check = format!("forks.{name}");
        let outcome = run_case(&parent_id, &events, &header, c);
        report.record(Group::Forks, case, &check, outcome);
    }
    Ok(())
}

fn run_case(parent_id: &str, events: &[Value], header: &Value, c: &Value) -> Result<(), Mismatch> {
    let store = SessionStore::new(Arc::new(FixedClock::new(CORPUS_CLOCK_MS)));
    let parent = store
        .prepare(
            Some(parent_id),
            PrepareOptions {
                seed: Some(events.to_vec()),
                seed_events: None,
                meta: Some(header.clone()),
                seed_source: SeedSource::Persistence,
            },
        )
        .map_err(|e| format!("parent: {e}"))?;
    let _detach = store
        .enter(&parent)
        .map_err(|e| format!("parent enter: {e}"))?;
    store
        .announce(&parent)
        .map_err(|e| format!("parent announce: {e}"))?;
    let boundary = c.get("boundary").filter(|b| !b.is_null());
    let child_id = c.get("childSessionId").and_then(Value::as_str);
    let result = c.get("result").cloned().unwrap_or_default();
    let want_ok = result.get("ok").and_then(Value::as_bool).unwrap_or(false);
    match store.fork(ForkSource::Session(&parent), boundary, child_id) {
        Err(e) => {
            if want_ok {
                return Err(format!("expected a child, got error: {e}").into());
            }
            let err = result.get("error").cloned().unwrap_or_default();
            let actual = match &e {
                session_store::Error::Fork(f) => Value::object([
                    ("name", Value::from(f.name())),
                    ("message", Value::from(f.message())),
                    ("code", Value::from(f.code().as_str())),
                ]),
                other => Value::object([
                    ("name", Value::from("Error")),
                    ("message", Value::from(other.to_string())),
                ]),
            };
            diff(&err, &actual)
        }
        Ok(child) => {
            if !want_ok {
                return Err(format!(
                    "expected error {}, got a child",
                    result.get("error").map(Value::to_json).unwrap_or_default()
                )
                .into());
            }
            let parent_events = parent.read(session_surface::Session::events);
            let actual = child.read(|s| {
                let events = s.events();
                Value::object([
                    ("ok", Value::Bool(true)),
                    ("id", Value::String(s.id().clone())),
                    ("header", s.header().to_value()),
                    ("firstLiveSeq", seq_value(s.first_live_seq())),
                    ("seq", seq_value(s.seq())),
                    ("eventCount", seq_value(events.len() as u64)),
                    ("events", Value::array(events.iter().map(Event::to_value))),
                    (
                        "surfaceNodes",
                        Value::array(s.surface().nodes().iter().map(seq_value)),
                    ),
                    (
                        "replaceGeneration",
                        seq_value(s.surface().replace_generation()),
                    ),
                    (
                        "derivedMessageCount",
                        seq_value(s.derive_messages().len() as u64),
                    ),
                    (
                        "interruptedTurnClosers",
                        Value::object([
                            ("ok", Value::Bool(true)),
                            (
                                "value",
                                Value::array(
                                    session_repair::interrupted_turn_closers(events.iter())
                                        .iter()
                                        .map(Event::to_value),
                                ),
                            ),
                        ]),
                    ),
                    (
                        "parentPrefixLength",
                        seq_value(
                            events
                                .iter()
                                .zip(parent_events.iter())
                                .take_while(|(a, b)| a == b)
                                .count() as u64,
                        ),
                    ),
                ])
            });
            // Compare key by key so that a difference names its field.
            let want = result.as_object().cloned().unwrap_or_default();
            for (key, want_value) in want.iter() {
                let got = actual.get(key).cloned().unwrap_or(Value::Null);
                diff(want_value, &got).map_err(|m| Mismatch {
                    detail: format!("{key}: {}", m.detail),
                    ..m
                })?;
            }
            Ok(())
        }
    }
}
