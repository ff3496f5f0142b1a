//! The golden corpus: for every `logs/*/expected.json`, `fold_surface` must match the
//! reference's `pure.foldSurface`, and `Session::from_restore` must match its `session`
//! record (surface, messages, request folds, seqs, construction marker).

#![allow(clippy::unwrap_used)] // test helpers unwrap like the tests themselves

use std::path::Path;
use std::sync::Arc;

use session_core::json::{self, Value};
use session_core::{Event, FixedClock};
use session_surface::{Session, SurfaceFold, fold_surface};

/// The reference froze `Date.now()` here while generating the corpus.
const CORPUS_NOW: i64 = 1_767_225_600_000;

/// A JSON text in JavaScript spelling, for comparing reference output with ours.
fn js_text(v: &Value) -> String {
    json::snapshot_for_append(v)
        .unwrap_or_else(|| v.clone())
        .to_json()
}

fn u64s(v: &Value) -> Vec<u64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_u64().unwrap())
        .collect()
}

/// `{"ok":true,"value":V}` → V (`null` for undefined).
fn ok_value<'a>(result: &'a Value, what: &str, name: &str) -> &'a Value {
    assert_eq!(
        result.get("ok").and_then(Value::as_bool),
        Some(true),
        "{name}: reference {what} failed: {result}"
    );
    result.get("value").unwrap()
}

fn expected_fold(v: &Value) -> SurfaceFold {
    SurfaceFold {
        nodes: u64s(v.get("nodes").unwrap()),
        replacements: v
            .get("replacements")
            .unwrap()
            .as_array()
            .unwrap()
            .iter()
            .map(|r| session_surface::Replacement {
                seq: r.get("seq").unwrap().as_u64().unwrap(),
                start: r.get("start").unwrap().as_u64().unwrap(),
                end: r.get("end").unwrap().as_u64().unwrap(),
                shadowed_seqs: u64s(r.get("shadowedSeqs").unwrap()),
            })
            .collect(),
    }
}

fn check_log(dir: &Path) -> usize {
    let name = dir.file_name().unwrap().to_string_lossy().into_owned();
    let text = std::fs::read_to_string(dir.join("expected.json")).unwrap();
    let doc = Value::parse(&text).unwrap();
    let id = doc.get("sessionId").unwrap().as_str().unwrap();
    let header = doc.get("header").unwrap();
    let event_values: Vec<Value> = doc.get("events").unwrap().as_array().unwrap().to_vec();
    let events: Vec<Event> = event_values
        .iter()
        .map(|e| Event::from_value(e).unwrap())
        .collect();

    // pure.foldSurface
    let pure = doc.get("pure").unwrap();
    let fold = fold_surface(&events).unwrap();
    let expected = expected_fold(ok_value(
        pure.get("foldSurface").unwrap(),
        "foldSurface",
        &name,
    ));
    assert_eq!(fold, expected, "{name}: foldSurface");

    // Session.fromRestore(id, events, header)
    let reference = doc.get("session").unwrap();
    assert_eq!(reference.get("ok").and_then(Value::as_bool), Some(true));
    let clock = Arc::new(FixedClock::new(CORPUS_NOW));
    let session = Session::from_restore(id, event_values.clone(), header, clock.clone()).unwrap();

    // The parsed-events constructor builds the same session from the same events.
    let from_events = Session::from_restore_events(id, events.clone(), header, clock).unwrap();
    let lines = |s: &Session| s.events().iter().map(Event::to_json).collect::<Vec<_>>();
    assert_eq!(
        lines(&from_events),
        lines(&session),
        "{name}: restored events"
    );
    assert_eq!(
        from_events.surface_nodes(),
        session.surface_nodes(),
        "{name}: nodes"
    );
    assert_eq!(
        from_events.derive_messages(),
        session.derive_messages(),
        "{name}"
    );
    assert_eq!(
        from_events.transcript(),
        session.transcript(),
        "{name}: transcript"
    );
    assert_eq!(
        from_events.request_header(),
        session.request_header(),
        "{name}"
    );
    assert_eq!(
        from_events.request_context(),
        session.request_context(),
        "{name}"
    );
    assert_eq!(
        from_events.replace_generation(),
        session.replace_generation()
    );
    assert_eq!(from_events.first_live_seq(), session.first_live_seq());
    assert_eq!(from_events.header(), session.header(), "{name}: header");
    // ... and shares them instead of copying.
    for (a, b) in from_events.events().iter().zip(&events) {
        assert!(a.ptr_eq(b), "{name}: event {} is shared", b.seq());
    }

    assert_eq!(
        session.surface().nodes().to_vec(),
        u64s(reference.get("surfaceNodes").unwrap()),
        "{name}: surfaceNodes"
    );
    assert_eq!(
        Some(session.replace_generation()),
        reference.get("replaceGeneration").unwrap().as_u64(),
        "{name}: replaceGeneration"
    );
    let replacements = expected_fold(&Value::object([
        ("nodes", Value::array([])),
        (
            "replacements",
            reference.get("surfaceReplacements").unwrap().clone(),
        ),
    ]));
    let live_fold = fold_surface(&session.events()).unwrap();
    assert_eq!(
        live_fold.replacements, replacements.replacements,
        "{name}: surfaceReplacements"
    );

    let messages = ok_value(
        reference.get("deriveMessages").unwrap(),
        "deriveMessages",
        &name,
    )
    .as_array()
    .unwrap();
    let ours = session.derive_messages();
    assert_eq!(ours.len(), messages.len(), "{name}: message count");
    for (i, (a, b)) in ours.iter().zip(messages.iter()).enumerate() {
        assert_eq!(a.to_json(), js_text(b), "{name}: message {i}");
    }

    for (key, ours) in [
        ("requestHeader", session.request_header()),
        ("requestContext", session.request_context()),
    ] {
        let expected = ok_value(reference.get(key).unwrap(), key, &name);
        assert_eq!(
            ours.map_or_else(|| "null".to_owned(), |v| v.to_json()),
            js_text(expected),
            "{name}: {key}"
        );
    }

    assert_eq!(
        Some(session.first_live_seq()),
        reference.get("firstLiveSeq").unwrap().as_u64(),
        "{name}: firstLiveSeq"
    );
    assert_eq!(
        Some(session.seq()),
        reference.get("seq").unwrap().as_u64(),
        "{name}: seq"
    );
    let appended: Vec<String> = session
        .events()
        .suffix(events.len())
        .iter()
        .map(Event::to_json)
        .collect();
    let expected_appended: Vec<String> = reference
        .get("eventsAppendedByConstruction")
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(js_text)
        .collect();
    assert_eq!(
        appended, expected_appended,
        "{name}: eventsAppendedByConstruction"
    );

    // The restored prefix is the input, byte for byte.
    for (a, b) in session.events().iter().zip(&events) {
        assert_eq!(a.to_json(), b.to_json(), "{name}: event {}", b.seq());
    }

    // Guards per event, over the session's events (marker included).
    for (key, guard) in [
        (
            "isAppendSurfaceEvent",
            Event::is_append_surface_event as fn(&Event) -> bool,
        ),
        (
            "isReplacementSurfaceEvent",
            Event::is_replacement_surface_event,
        ),
    ] {
        let expected: Vec<bool> = reference
            .get(key)
            .unwrap()
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b.as_bool().unwrap())
            .collect();
        let ours: Vec<bool> = session.events().iter().map(guard).collect();
        assert_eq!(ours, expected, "{name}: {key}");
    }

    // A snapshot-mode replay of the restored log agrees too.
    let replay = Session::create(
        id,
        Some(session.events().iter().map(Event::to_value).collect()),
        Some(header.clone()),
        Arc::new(FixedClock::new(CORPUS_NOW)),
    )
    .unwrap();
    assert_eq!(replay.events(), session.events(), "{name}: replay");
    assert_eq!(
        replay.derive_messages(),
        session.derive_messages(),
        "{name}: replay messages"
    );
    1
}

#[test]
fn golden_corpus_logs() {
    let Some(corpus) = conformance::corpus::Corpus::require() else {
        return;
    };
    let checked: usize = corpus.logs().iter().map(|d| check_log(d)).sum();
    assert_eq!(
        checked,
        corpus.index.logs.len(),
        "every log of the corpus index is checked"
    );
}
