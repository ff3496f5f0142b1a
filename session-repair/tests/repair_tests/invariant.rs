//! The turn/step invariant: session-core §7.2 and the invariant checklist (§8.12).

#![allow(clippy::unwrap_used)] // test helpers unwrap like the tests themselves

use session_core::Event;
use session_core::json::Value;
use session_repair::{Error, Invariant, InvariantError, TOOL_NOT_STARTED, Trace};

fn ev(ty: &str, seq: u64, data: &str) -> Event {
    Event::appended(ty, seq, 0, Value::parse(data).unwrap(), None, None)
}

fn surface(ty: &str, seq: u64, data: &str, op: &str) -> Event {
    Event::appended(
        ty,
        seq,
        0,
        Value::parse(data).unwrap(),
        None,
        Some(Value::parse(op).unwrap()),
    )
}

fn result(seq: u64, turn: u32, step: u32, call: &str) -> Event {
    surface(
        "tool/result",
        seq,
        &format!(
            r#"{{"turn":{turn},"step":{step},"message":{{"id":"r{seq}","role":"user","source":{{"kind":"tool","callId":"{call}"}},"content":[{{"type":"tool-result","toolCallId":"{call}","content":[]}}]}}}}"#
        ),
        r#""append""#,
    )
}

/// Feeds events in order (seq = position) and returns the first violation's message.
fn run(events: &[(&str, &str)]) -> Result<Trace, String> {
    let mut trace = Trace::new();
    for (i, (ty, data)) in events.iter().enumerate() {
        let e = if *ty == "user/message" || *ty == "assistant/message" {
            surface(ty, i as u64, data, r#""append""#)
        } else {
            ev(ty, i as u64, data)
        };
        trace.check(&e).map_err(|e| e.to_string())?;
    }
    Ok(trace)
}

fn violation(msg: &str) -> String {
    format!("invariant violated by \"@deepseek-ai/dsh-session\": {msg}")
}

const T1: (&str, &str) = ("turn/start", r#"{"turn":1}"#);
const S1: (&str, &str) = ("step/start", r#"{"turn":1,"step":1}"#);
const SE1: (&str, &str) = ("step/end", r#"{"turn":1,"step":1}"#);
const TE1: (&str, &str) = ("turn/end", r#"{"turn":1,"reason":{"kind":"completed"}}"#);

#[test]
fn error_display_and_name() {
    let e = run(&[T1, T1]).unwrap_err();
    assert_eq!(e, violation("turn/start 1 while turn 1 is still open"));
    let err = Trace::replay(&[ev("turn/start", 0, r#"{"turn":2}"#)]).unwrap_err();
    assert_eq!(err.name(), "InvariantError");
    assert_eq!(err.message(), "turn/start expected turn 1, got 2");
    assert_eq!(Error::from(err.clone()).to_string(), err.to_string());
}

#[test]
fn well_formed_sequence_passes() {
    // session-core §8.12 #199
    let mut t = Trace::new();
    let log = [
        ev("turn/start", 0, r#"{"turn":1}"#),
        surface(
            "user/message",
            1,
            r#"{"id":"u","role":"user","source":{"kind":"user"},"content":[]}"#,
            r#""append""#,
        ),
        ev("step/start", 2, r#"{"turn":1,"step":1}"#),
        ev(
            "assistant/chunk",
            3,
            r#"{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"x"}}"#,
        ),
        surface(
            "assistant/message",
            4,
            r#"{"turn":1,"step":1,"message":{"id":"a","role":"assistant","source":{"kind":"model","provider":"p","model":"m"},"content":[{"type":"tool-call","id":"c1","name":"bash","arguments":"{}"}]}}"#,
            r#""append""#,
        ),
        ev(
            "tool/call",
            5,
            r#"{"turn":1,"step":1,"callId":"c1","name":"bash","arguments":"{}"}"#,
        ),
        result(6, 1, 1, "c1"),
        ev("step/end", 7, r#"{"turn":1,"step":1}"#),
        ev("turn/end", 8, r#"{"turn":1,"reason":{"kind":"completed"}}"#),
    ];
    for e in &log {
        t.check(e).unwrap();
    }
    assert_eq!(t.open_turn(), None);
    assert_eq!(t.next_turn(), 2);
    assert_eq!(t.last_seq(), Some(8));
    assert_eq!(Trace::replay(&log).unwrap(), t);
}

#[test]
fn staging_does_not_advance_the_trace() {
    // session-core §8.12 #200 (the veto itself is exercised through the observer adapter)
    let trace = Trace::new();
    let start = ev("turn/start", 0, r#"{"turn":1}"#);
    let staged = trace.stage(&start).unwrap();
    assert_eq!(staged.open_turn(), Some(1));
    assert_eq!(trace, Trace::new());
    // Vetoed: the staged trace is dropped; the same turn/start 1 is accepted again.
    let mut inv = Invariant::new();
    let staged = inv.stage("s", &start).unwrap();
    drop(staged);
    assert!(!inv.is_tracked("s"));
    let staged = inv.stage("s", &start).unwrap();
    inv.apply("s", staged);
    assert_eq!(inv.trace("s").unwrap().open_turn(), Some(1));
}

#[test]
fn seq_must_strictly_increase() {
    // session-core §8.12 #202
    let mut t = Trace::new();
    t.check(&ev("plugin/x", 0, "{}")).unwrap();
    let err = t.check(&ev("plugin/x", 0, "{}")).unwrap_err();
    assert_eq!(err.message(), "seq must strictly increase: saw 0 after 0");
    // Gaps are allowed.
    t.check(&ev("plugin/x", 5, "{}")).unwrap();
    let err = t.check(&ev("plugin/x", 3, "{}")).unwrap_err();
    assert_eq!(err.message(), "seq must strictly increase: saw 3 after 5");
}

#[test]
fn turn_rules() {
    // session-core §8.12 #203
    assert_eq!(
        run(&[T1, ("turn/start", r#"{"turn":2}"#)]).unwrap_err(),
        violation("turn/start 2 while turn 1 is still open")
    );
    assert_eq!(
        run(&[
            T1,
            ("turn/end", r#"{"turn":2,"reason":{"kind":"completed"}}"#)
        ])
        .unwrap_err(),
        violation("turn/end 2 does not match open turn 1")
    );
    assert_eq!(
        run(&[("turn/end", r#"{"turn":1}"#)]).unwrap_err(),
        violation("turn/end 1 does not match open turn null")
    );
    assert_eq!(
        run(&[T1, TE1, ("turn/start", r#"{"turn":3}"#)]).unwrap_err(),
        violation("turn/start expected turn 2, got 3")
    );
    assert_eq!(
        run(&[T1, S1, TE1]).unwrap_err(),
        violation("turn/end 1 while step 1 is still open")
    );
    // Core execution events are allowed inside a turn without a step.
    run(&[
        T1,
        ("todo/write", r#"{"todos":[]}"#),
        ("request/header", r#"{"header":{},"reason":"initial"}"#),
        ("request/context", r#"{"provider":"p","model":"m"}"#),
        TE1,
    ])
    .unwrap();
    // Outside a turn.
    for ty in ["request/context", "todo/write", "request/header"] {
        assert_eq!(
            run(&[(ty, "{}")]).unwrap_err(),
            violation(&format!(
                "{ty} appended outside any open turn (core execution events must be turn-enclosed)"
            ))
        );
    }
    run(&[
        (
            "user/message",
            r#"{"id":"u","role":"user","source":{"kind":"user"},"content":[]}"#,
        ),
        ("plugin/thing", "null"),
        T1,
    ])
    .unwrap();
}

#[test]
fn step_rules() {
    // session-core §8.12 #204
    assert_eq!(
        run(&[T1, ("step/start", r#"{"turn":2,"step":1}"#)]).unwrap_err(),
        violation("step/start in turn 2 but open turn is 1")
    );
    assert_eq!(
        run(&[("step/start", r#"{"turn":1,"step":1}"#)]).unwrap_err(),
        violation("step/start in turn 1 but open turn is null")
    );
    assert_eq!(
        run(&[T1, S1, ("step/start", r#"{"turn":1,"step":2}"#)]).unwrap_err(),
        violation("step/start 2 while step 1 is still open")
    );
    assert_eq!(
        run(&[T1, S1, TE1]).unwrap_err(),
        violation("turn/end 1 while step 1 is still open")
    );
    assert_eq!(
        run(&[T1, S1, ("step/end", r#"{"turn":1,"step":2}"#)]).unwrap_err(),
        violation("step/end names turn 1/step 2 but open is turn 1/step 1")
    );
    assert_eq!(
        run(&[
            T1,
            S1,
            (
                "assistant/message",
                r#"{"turn":1,"step":3,"message":{"content":[]}}"#
            )
        ])
        .unwrap_err(),
        violation("assistant/message names turn 1/step 3 but open is turn 1/step 1")
    );
    assert_eq!(
        run(&[T1, S1, SE1, ("step/start", r#"{"turn":1,"step":3}"#)]).unwrap_err(),
        violation("step/start expected step 2 in turn 1, got 3")
    );
    // Step numbers restart in each turn.
    run(&[
        T1,
        S1,
        SE1,
        TE1,
        ("turn/start", r#"{"turn":2}"#),
        ("step/start", r#"{"turn":2,"step":1}"#),
    ])
    .unwrap();
}

#[test]
fn chunk_outside_step_and_unpaired_result() {
    // session-core §8.12 #205
    assert_eq!(
        run(&[
            T1,
            (
                "assistant/chunk",
                r#"{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"x"}}"#
            )
        ])
        .unwrap_err(),
        violation("assistant/chunk names turn 1/step 1 but open is turn 1/step null")
    );
    let mut t = run(&[T1, S1]).unwrap();
    let err = t.check(&result(2, 1, 1, "c9")).unwrap_err();
    assert_eq!(
        err.message(),
        "tool/result for c9 with no prior tool/call in this step"
    );
}

#[test]
fn appended_result_needs_open_step() {
    // session-core §8.12 #206
    let mut t = run(&[T1]).unwrap();
    let err = t.check(&result(1, 1, 1, "c")).unwrap_err();
    assert_eq!(
        err.message(),
        "tool/result names turn 1/step 1 but open is turn 1/step null"
    );
}

fn replacement(seq: u64, turn: u32, step: u32) -> Event {
    surface(
        "tool/result",
        seq,
        &format!(
            r#"{{"turn":{turn},"step":{step},"message":{{"id":"r","role":"user","source":{{"kind":"tool","callId":"c"}},"content":[{{"type":"tool-result","toolCallId":"c","content":[]}}]}}}}"#
        ),
        r#"{"op":"replace","start":1,"end":1}"#,
    )
}

#[test]
fn replacement_in_later_open_turn_is_accepted() {
    // session-core §8.12 #207
    let mut t = run(&[T1, TE1, ("turn/start", r#"{"turn":2}"#)]).unwrap();
    // The replacement keeps the original's turn 1 / step 1; only an open turn is required.
    t.check(&replacement(3, 1, 1)).unwrap();
}

#[test]
fn replacement_outside_turn_is_rejected() {
    // session-core §8.12 #208
    let mut t = run(&[T1, TE1]).unwrap();
    let err = t.check(&replacement(2, 1, 1)).unwrap_err();
    assert_eq!(
        err.message(),
        "tool/result surface replacement appended outside any open turn"
    );
}

#[test]
fn not_started_result_and_unresolved_calls() {
    // session-core §8.12 #209
    let mut t = run(&[T1, S1]).unwrap();
    let synthetic = surface(
        "tool/result",
        2,
        &format!(
            r#"{{"turn":1,"step":1,"message":{{"id":"x","role":"user","source":{{"kind":"tool","callId":"never"}},"content":[{{"type":"tool-result","toolCallId":"never","isError":true,"content":[]}}]}},"error":{{"name":"ToolNotStartedError","code":"{TOOL_NOT_STARTED}"}}}}"#
        ),
        r#""append""#,
    );
    t.check(&synthetic).unwrap();
    // Without isError the exemption does not apply.
    let mut t2 = run(&[T1, S1]).unwrap();
    let not_error = surface(
        "tool/result",
        2,
        r#"{"turn":1,"step":1,"message":{"id":"x","role":"user","source":{"kind":"tool","callId":"never"},"content":[{"type":"tool-result","toolCallId":"never","content":[]}]},"error":{"name":"ToolNotStartedError","code":"TOOL_NOT_STARTED"}}"#,
        r#""append""#,
    );
    assert!(t2.check(&not_error).is_err());
    // An unresolved call left at step end is accepted.
    run(&[
        T1,
        S1,
        (
            "tool/call",
            r#"{"turn":1,"step":1,"callId":"c","name":"n","arguments":""}"#,
        ),
        SE1,
        TE1,
    ])
    .unwrap();
}

#[test]
fn result_in_later_step_does_not_pair() {
    // session-core §8.12 #210
    let mut t = run(&[
        T1,
        S1,
        (
            "tool/call",
            r#"{"turn":1,"step":1,"callId":"c","name":"n","arguments":""}"#,
        ),
        SE1,
        ("step/start", r#"{"turn":1,"step":2}"#),
    ])
    .unwrap();
    assert_eq!(t.pending_calls(), 0);
    let err = t.check(&result(5, 1, 2, "c")).unwrap_err();
    assert_eq!(
        err.message(),
        "tool/result for c with no prior tool/call in this step"
    );
}

#[test]
fn seed_with_two_turn_starts_fails_and_sessions_are_independent() {
    // session-core §8.12 #211
    let mut inv = Invariant::new();
    let seed = [
        ev("turn/start", 0, r#"{"turn":1}"#),
        ev("turn/start", 1, r#"{"turn":2}"#),
    ];
    let err = inv.track("bad", &seed).unwrap_err();
    assert_eq!(
        err,
        Invariant::replay(&seed).unwrap_err(),
        "track and replay agree"
    );
    let _: &InvariantError = &err;
    assert_eq!(
        err.to_string(),
        violation("turn/start 2 while turn 1 is still open")
    );
    assert!(!inv.is_tracked("bad"));
    inv.track("a", &seed[..1]).unwrap();
    inv.track("b", &[]).unwrap();
    inv.check("b", &ev("turn/start", 0, r#"{"turn":1}"#))
        .unwrap();
    assert_eq!(inv.trace("a").unwrap().open_turn(), Some(1));
    assert!(
        inv.check("a", &ev("turn/start", 1, r#"{"turn":2}"#))
            .is_err()
    );
    assert_eq!(inv.trace("a").unwrap().last_seq(), Some(0));
    inv.check("c", &ev("turn/start", 0, r#"{"turn":1}"#))
        .unwrap();
    assert_eq!(inv.forget("c").unwrap().open_turn(), Some(1));
    inv.clear();
    assert!(inv.trace("a").is_none());
}

#[test]
fn replay_rebuilds_open_turn_and_step() {
    // session-core §8.12 #212
    let log = [
        ev("turn/start", 0, r#"{"turn":1}"#),
        ev("step/start", 1, r#"{"turn":1,"step":1}"#),
        ev("step/end", 2, r#"{"turn":1,"step":1}"#),
        ev("step/start", 3, r#"{"turn":1,"step":2}"#),
    ];
    let t = Trace::replay(&log).unwrap();
    assert_eq!(
        (t.open_turn(), t.open_step(), t.next_step()),
        (Some(1), Some(2), 2)
    );
    let mut t = t;
    assert!(
        t.check(&ev("step/start", 4, r#"{"turn":1,"step":3}"#))
            .is_err()
    );
    t.check(&ev("step/end", 4, r#"{"turn":1,"step":2}"#))
        .unwrap();
}

#[test]
fn end_seed_marker_is_unconstrained() {
    // session-core §8.12 #213
    run(&[T1, TE1, ("session/end-seed", "{}")]).unwrap();
    let t = run(&[T1, ("session/end-seed", "{}")]).unwrap();
    assert_eq!(t.open_turn(), Some(1));
}

#[test]
fn values_print_like_javascript() {
    assert_eq!(
        run(&[("turn/start", r#"{"turn":"1"}"#)]).unwrap_err(),
        violation("turn/start expected turn 1, got 1")
    );
    assert_eq!(
        run(&[("turn/start", "{}")]).unwrap_err(),
        violation("turn/start expected turn 1, got undefined")
    );
    assert_eq!(
        run(&[("turn/start", "null")]).unwrap_err(),
        violation("turn/start expected turn 1, got undefined")
    );
    assert_eq!(
        run(&[("turn/start", r#"{"turn":1.5}"#)]).unwrap_err(),
        violation("turn/start expected turn 1, got 1.5")
    );
    // A number spelled differently still equals the expected turn.
    run(&[("turn/start", r#"{"turn":1.0}"#)]).unwrap();
    assert_eq!(
        run(&[T1, S1, ("step/end", r#"{"turn":1,"step":[1,2]}"#)]).unwrap_err(),
        violation("step/end names turn 1/step 1,2 but open is turn 1/step 1")
    );
}
