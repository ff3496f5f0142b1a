//! Checks over `logs/<name>/`: re-encoding, pure functions, the restored session and forks.

use std::path::Path;
use std::sync::Arc;

use session_core::chunk_rows::{self, Decoded};
use session_core::json::{self, Value};
use session_core::{Event, Events, FixedClock, SharedClock};
use session_surface::{Session, fold_surface};

use super::doc::{Doc, diff, short, text_diff, to_events};
use super::index::LogEntry;
use super::{Group, LayoutError, Mismatch, Options, Report};

/// The frozen clock the corpus was generated with (2026-01-01T00:00:00Z).
pub(crate) const CORPUS_CLOCK_MS: i64 = 1_767_225_600_000;

/// A group of checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Check {
    /// Every line of `session.jsonl` re-serializes byte for byte.
    Reencode,
    /// `expected.json` → `pure`: guards, `foldSurface`, `foldRequestHeader`, closers.
    Pure,
    /// `expected.json` → `session`: the restored session's results.
    Session,
    /// `forks.json`: every fork case.
    Forks,
    /// `inspect` / `load` / `readFrom` through the persistence service in both encodings, the
    /// writer's bytes, and every crash variant (including the bytes `load` leaves).
    Persistence,
    /// Every `negative/<case>/`.
    Negative,
}

impl Check {
    /// Every check.
    pub const ALL: [Check; 6] = [
        Check::Reencode,
        Check::Pure,
        Check::Session,
        Check::Forks,
        Check::Persistence,
        Check::Negative,
    ];

    /// The check's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Check::Reencode => "reencode",
            Check::Pure => "pure",
            Check::Session => "session",
            Check::Forks => "forks",
            Check::Persistence => "persistence",
            Check::Negative => "negative",
        }
    }

    /// Looks a check up by name.
    pub fn from_name(name: &str) -> Option<Check> {
        Check::ALL.into_iter().find(|c| c.name() == name)
    }
}

fn clock() -> SharedClock {
    Arc::new(FixedClock::new(CORPUS_CLOCK_MS))
}

pub(crate) fn check_log(
    dir: &Path,
    log: &LogEntry,
    options: &Options,
    report: &mut Report,
) -> Result<(), LayoutError> {
    let case = format!("logs/{}", log.name);
    let expected = Doc::open(&dir.join("expected.json"))?;
    let event_values = expected.event_list(expected.req("events")?)?;
    let events = match to_events(&event_values) {
        Ok(e) => e,
        Err(e) => {
            report.record_str(Group::Session, &case, "events", Err(e));
            return Ok(());
        }
    };
    let id = expected
        .req("sessionId")?
        .as_str()
        .unwrap_or_default()
        .to_owned();
    if options.checks.contains(&Check::Reencode) {
        report.record_str(
            Group::Reencode,
            &case,
            "reencode",
            reencode(&dir.join("session.jsonl")),
        );
    }
    if options.checks.contains(&Check::Pure) {
        check_pure(&case, &expected, &events, report)?;
    }
    if options.checks.contains(&Check::Session) {
        report.record(
            Group::Session,
            &case,
            "turns",
            diff(expected.req("turns")?, &turns_value(&events)),
        );
        check_session(&case, &id, &expected, &event_values, report)?;
    }
    if options.checks.contains(&Check::Forks) && log.fork_cases > 0 {
        super::forks::check_forks(&case, &dir.join("forks.json"), &expected, report)?;
    }
    if options.checks.contains(&Check::Persistence) {
        super::persist::check_log(&case, dir, log, &expected, report)?;
    }
    Ok(())
}

/// Reads every line back into our types and writes it again: packed rows are decoded and
/// re-packed, events re-serialized; each must reproduce its line exactly.
fn reencode(path: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    for (i, line) in text.split_terminator('\n').enumerate().skip(1) {
        let lineno = i + 1;
        let value = json::parse(line).map_err(|e| format!("line {lineno}: {e}"))?;
        let rewritten = match chunk_rows::decode_storage_record(value)
            .map_err(|e| format!("line {lineno}: {e}"))?
        {
            Decoded::Passthrough(v) => Event::from_value(&v)
                .map_err(|e| format!("line {lineno}: {e}"))?
                .to_json(),
            Decoded::Expanded(members) => {
                let mut out = String::new();
                chunk_rows::write_batch_lines(&members, true, &mut out);
                out
            }
        };
        if rewritten != line {
            return Err(format!("line {lineno}: {}", text_diff(line, &rewritten)));
        }
    }
    Ok(())
}

/// `{start, end, turn}` of every turn, as the corpus's top-level `turns` records them.
fn turns_value(events: &Events) -> Value {
    Value::array(
        session_repair::turn_spans(events.iter())
            .into_iter()
            .map(|t| {
                Value::object([
                    ("start", session_core::event::seq_value(t.start)),
                    (
                        "end",
                        t.end.map_or(Value::Null, session_core::event::seq_value),
                    ),
                    ("turn", t.turn),
                ])
            }),
    )
}

/// Compares an `{ok, value | error}` expectation with our outcome.
pub(crate) fn expect_result(
    expected: &Value,
    actual: Result<Value, String>,
) -> Result<(), Mismatch> {
    let ok = expected.get("ok").and_then(Value::as_bool).unwrap_or(false);
    match (ok, actual) {
        (true, Ok(v)) => diff(&expected.get("value").cloned().unwrap_or(Value::Null), &v),
        (true, Err(e)) => Err(format!("expected success, got error: {e}").into()),
        (false, Ok(v)) => Err(format!(
            "expected error {}, got {}",
            short(expected.get("error").unwrap_or(&Value::Null)),
            short(&v)
        )
        .into()),
        (false, Err(e)) => {
            let want = expected
                .get("error")
                .and_then(|e| e.get("message"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            if want == e {
                Ok(())
            } else {
                Err(format!("expected error {want:?}, got {e:?}").into())
            }
        }
    }
}

fn bools(values: impl Iterator<Item = bool>) -> Value {
    Value::array(values.map(Value::Bool))
}

fn seqs(values: impl IntoIterator<Item = u64>) -> Value {
    Value::array(values.into_iter().map(session_core::event::seq_value))
}

fn fold_value(events: &Events) -> Result<Value, String> {
    let fold = fold_surface(events.iter()).map_err(|e| e.to_string())?;
    let replacements = fold.replacements.iter().map(|r| {
        Value::object([
            ("seq", session_core::event::seq_value(r.seq)),
            ("start", session_core::event::seq_value(r.start)),
            ("end", session_core::event::seq_value(r.end)),
            ("shadowedSeqs", seqs(r.shadowed_seqs.iter().copied())),
        ])
    });
    Ok(Value::object([
        ("nodes", seqs(fold.nodes.iter().copied())),
        ("replacements", Value::array(replacements)),
    ]))
}

fn closers_value(events: &Events) -> Value {
    Value::array(
        session_repair::interrupted_turn_closers(events.iter())
            .iter()
            .map(Event::to_value),
    )
}

fn check_pure(
    case: &str,
    expected: &Doc,
    events: &Events,
    report: &mut Report,
) -> Result<(), LayoutError> {
    report.record(
        Group::Pure,
        case,
        "pure.isAppendSurfaceEvent",
        diff(
            expected.req("pure.isAppendSurfaceEvent")?,
            &bools(events.iter().map(Event::is_append_surface_event)),
        ),
    );
    report.record(
        Group::Pure,
        case,
        "pure.isReplacementSurfaceEvent",
        diff(
            expected.req("pure.isReplacementSurfaceEvent")?,
            &bools(events.iter().map(Event::is_replacement_surface_event)),
        ),
    );
    report.record(
        Group::Pure,
        case,
        "pure.foldSurface",
        expect_result(expected.req("pure.foldSurface")?, fold_value(events)),
    );
    report.record(
        Group::Pure,
        case,
        "pure.foldRequestHeader",
        expect_result(
            expected.req("pure.foldRequestHeader")?,
            Ok(session_core::request::fold_request_header(events.iter(), None).unwrap_or_default()),
        ),
    );
    report.record(
        Group::Pure,
        case,
        "pure.interruptedTurnClosers",
        expect_result(
            expected.req("pure.interruptedTurnClosers")?,
            Ok(closers_value(events)),
        ),
    );
    Ok(())
}

fn check_session(
    case: &str,
    id: &str,
    expected: &Doc,
    event_values: &[Value],
    report: &mut Report,
) -> Result<(), LayoutError> {
    let header = expected.req("header")?;
    let session = match Session::from_restore(id, event_values.to_vec(), header, clock()) {
        Ok(s) => s,
        Err(e) => {
            let want_ok = expected.req("session.ok")?.as_bool().unwrap_or(false);
            report.record_str(
                Group::Session,
                case,
                "session.construction",
                if want_ok {
                    Err(format!("construction failed: {e}"))
                } else {
                    Ok(())
                },
            );
            return Ok(());
        }
    };
    let events = session.events();
    let first_live = session.first_live_seq() as usize;
    let appended: Vec<Value> = events
        .iter()
        .skip(event_values.len().min(first_live.max(event_values.len())))
        .map(Event::to_value)
        .collect();
    let checks: Vec<(&str, Value)> = vec![
        (
            "eventCount",
            session_core::event::seq_value(events.len() as u64),
        ),
        ("eventsAppendedByConstruction", Value::array(appended)),
        (
            "firstLiveSeq",
            session_core::event::seq_value(session.first_live_seq()),
        ),
        ("seq", session_core::event::seq_value(session.seq())),
        ("surfaceNodes", seqs(session.surface().nodes().iter())),
        (
            "replaceGeneration",
            session_core::event::seq_value(session.surface().replace_generation()),
        ),
        (
            "isAppendSurfaceEvent",
            bools(events.iter().map(Event::is_append_surface_event)),
        ),
        (
            "isReplacementSurfaceEvent",
            bools(events.iter().map(Event::is_replacement_surface_event)),
        ),
    ];
    for (key, actual) in checks {
        let path = format!("session.{key}");
        report.record(
            Group::Session,
            case,
            &path,
            diff(expected.req(&path)?, &actual),
        );
    }
    let results: Vec<(&str, Result<Value, String>)> = vec![
        (
            "deriveMessages",
            Ok(Value::array(session.derive_messages().iter().cloned())),
        ),
        (
            "requestHeader",
            Ok(session.request_header().unwrap_or_default()),
        ),
        (
            "requestContext",
            Ok(session.request_context().unwrap_or_default()),
        ),
        (
            "foldRequestHeader",
            Ok(session_core::request::fold_request_header(events.iter(), None).unwrap_or_default()),
        ),
        ("interruptedTurnClosers", Ok(closers_value(&events))),
    ];
    for (key, actual) in results {
        let path = format!("session.{key}");
        report.record(
            Group::Session,
            case,
            &path,
            expect_result(expected.req(&path)?, actual),
        );
    }
    // Surface replacements as a fresh fold reports them.
    if let Some(want) = expected.at("session.surfaceReplacements") {
        let actual = fold_value(&events)
            .map(|v| v.get("replacements").cloned().unwrap_or_default())
            .unwrap_or_default();
        report.record(
            Group::Session,
            case,
            "session.surfaceReplacements",
            diff(want, &actual),
        );
    }
    check_tool_pairing(case, expected, &session, report)
}

fn check_tool_pairing(
    case: &str,
    expected: &Doc,
    session: &Session,
    report: &mut Report,
) -> Result<(), LayoutError> {
    let Some(cases) = expected.at("session.toolPairing").and_then(Value::as_array) else {
        return Ok(());
    };
    let pairing = session_repair::ToolPairing::new(session);
    for c in cases.iter() {
        let seq = c.get("seq").and_then(Value::as_u64).unwrap_or_default();
        for (key, actual) in [
            ("before", pairing.balanced_before(seq)),
            ("after", pairing.balanced_after(seq)),
        ] {
            let want = c.get(key).cloned().unwrap_or_default();
            report.record(
                Group::Session,
                case,
                &format!("session.toolPairing[{seq}].{key}"),
                expect_result(&want, actual.map(Value::Bool).map_err(|e| e.to_string())),
            );
        }
    }
    let balanced = match session.surface().nodes().iter().next_back() {
        Some(last) => pairing.balanced_after(last),
        None => Ok(true),
    };
    report.record(
        Group::Session,
        case,
        "session.toolPairingBalanced",
        expect_result(
            expected.req("session.toolPairingBalanced")?,
            balanced.map(Value::Bool).map_err(|e| e.to_string()),
        ),
    );
    Ok(())
}
