//! Fork boundaries and children: session-core §6.2 and the fork checklist (§8.6).

#![allow(clippy::unwrap_used)] // test helpers unwrap like the tests themselves

use std::sync::Arc;

use session_core::json::{MAX_SAFE_INTEGER, Value};
use session_core::{Event, Events, FixedClock, SharedClock};
use session_fork::{
    Error, ForkError, ForkErrorCode, child_header, fork_events, fork_session, resolve_boundary,
};
use session_surface::{Draft, Session};

const NOW: i64 = 1_767_225_600_000;

fn clock() -> SharedClock {
    Arc::new(FixedClock::new(NOW))
}

fn v(text: &str) -> Value {
    Value::parse(text).unwrap()
}

fn header(id: &str) -> Value {
    v(&format!(
        r#"{{"version":0,"id":"{id}","createdAt":5,"cwd":"/work","origin":"subagent","delegationDepth":2,"agentPreset":"p"}}"#
    ))
}

/// A live session with a header carrying every optional field.
fn session(id: &str) -> Session {
    Session::create(id, None, Some(header(id)), clock()).unwrap()
}

fn user(id: &str) -> Draft {
    Draft::new(
        "user/message",
        v(&format!(
            r#"{{"id":"{id}","role":"user","source":{{"kind":"user"}},"content":[{{"type":"text","text":"hi"}}]}}"#
        )),
    )
    .append_op()
}

fn assistant(turn: u32, step: u32, call: Option<&str>) -> Draft {
    let call = call.map_or(String::new(), |c| {
        format!(r#",{{"type":"tool-call","id":"{c}","name":"bash","arguments":"{{}}"}}"#)
    });
    Draft::new(
        "assistant/message",
        v(&format!(
            r#"{{"turn":{turn},"step":{step},"message":{{"id":"a{turn}-{step}","role":"assistant","source":{{"kind":"model","provider":"p","model":"m"}},"content":[{{"type":"text","text":"ok"}}{call}]}}}}"#
        )),
    )
    .append_op()
}

fn plain(ty: &str, data: &str) -> Draft {
    Draft::new(ty, v(data))
}

/// Appends one complete turn `turn` with a user message and an assistant reply ending with
/// `reason`.
fn closed_turn(s: &mut Session, turn: u32, reason: &str) {
    s.append(plain("turn/start", &format!(r#"{{"turn":{turn}}}"#)))
        .unwrap();
    s.append(user(&format!("u{turn}"))).unwrap();
    s.append(plain(
        "step/start",
        &format!(r#"{{"turn":{turn},"step":1}}"#),
    ))
    .unwrap();
    s.append(assistant(turn, 1, None)).unwrap();
    s.append(plain("step/end", &format!(r#"{{"turn":{turn},"step":1}}"#)))
        .unwrap();
    s.append(plain(
        "turn/end",
        &format!(r#"{{"turn":{turn},"reason":{reason}}}"#),
    ))
    .unwrap();
}

fn fork_err(source: &Session, boundary: Option<&Value>) -> ForkError {
    match fork_session(source, boundary, "child", clock()) {
        Err(Error::Fork(e)) => e,
        Err(other) => panic!("unexpected error {other}"),
        Ok(_) => panic!("fork unexpectedly succeeded"),
    }
}

#[test]
fn fork_of_empty_source() {
    // session-core §8.6 #135
    let source = session("empty");
    let child = fork_session(&source, None, "child", clock()).unwrap();
    assert_eq!(
        child.header().to_value().to_json(),
        format!(
            r#"{{"version":0,"id":"child","createdAt":{NOW},"cwd":"/work","parentSession":"empty","seedLength":0}}"#
        )
    );
    assert_eq!(child.first_live_seq(), 0);
    let events = child.events();
    assert_eq!(events.len(), 1);
    assert_eq!(
        events.get(0).unwrap().to_json(),
        format!(r#"{{"type":"session/end-seed","seq":0,"time":{NOW},"data":{{}}}}"#)
    );
}

#[test]
fn default_fork_after_closed_turn_shares_the_prefix() {
    // session-core §8.6 #136
    let mut source = session("src");
    closed_turn(&mut source, 1, r#"{"kind":"completed"}"#);
    let before = source.events();
    let mut child = fork_session(&source, None, "child", clock()).unwrap();
    let h = child.header();
    assert_eq!(h.parent_session.as_deref(), Some("src"));
    assert_eq!(h.seed_length, Some(before.len() as u64));
    assert_eq!(h.cwd.as_deref(), Some("/work"));
    assert_eq!(h.created_at, NOW as u64);
    // origin, delegationDepth, agentPreset and the source's createdAt are not inherited.
    assert!(!h.origin_subagent);
    assert_eq!(h.delegation_depth, None);
    assert_eq!(h.agent_preset, None);
    // The inherited events are the parent's own frozen events, not copies.
    for (i, e) in before.iter().enumerate() {
        assert!(
            child.events().get(i).unwrap().ptr_eq(e),
            "event {i} is shared"
        );
    }
    assert_eq!(
        child.events().get(before.len()).unwrap().event_type(),
        "session/end-seed"
    );
    // Growing the child leaves the source untouched.
    child.append(plain("turn/start", r#"{"turn":2}"#)).unwrap();
    assert_eq!(source.events(), before);
    assert_eq!(source.seq(), before.len() as u64);
}

#[test]
fn log_only_events_after_closed_turn_are_included() {
    // session-core §8.6 #137
    let mut source = session("src");
    closed_turn(&mut source, 1, r#"{"kind":"completed"}"#);
    source
        .append(plain("session/title", r#"{"title":"t"}"#))
        .unwrap();
    source
        .append(plain("todo/write", r#"{"todos":[]}"#))
        .unwrap();
    let child = fork_session(&source, None, "child", clock()).unwrap();
    assert_eq!(child.header().seed_length, Some(8));
    assert_eq!(child.events().get(7).unwrap().event_type(), "todo/write");
    assert_eq!(child.first_live_seq(), 8);
}

#[test]
fn fork_at_earlier_turn_while_source_is_mid_turn() {
    // session-core §8.6 #138
    let mut source = session("src");
    closed_turn(&mut source, 1, r#"{"kind":"completed"}"#);
    source.append(plain("turn/start", r#"{"turn":2}"#)).unwrap();
    source.append(user("u2")).unwrap();
    let b = 5u32; // turn/end of turn 1
    let child = fork_session(&source, Some(&Value::from(b)), "child", clock()).unwrap();
    assert_eq!(child.header().seed_length, Some(u64::from(b) + 1));
    let messages = child.derive_messages();
    assert_eq!(messages.len(), 2);
    assert_eq!(
        messages.get(0).unwrap().get("id").and_then(Value::as_str),
        Some("u1")
    );
    // The default boundary is refused: the tail is inside turn 2.
    let err = fork_err(&source, None);
    assert_eq!(err.code(), ForkErrorCode::OpenTurn);
    assert_eq!(
        err.message(),
        r#"fork boundary 7 in session "src" ends inside open turn 2"#
    );
}

#[test]
fn any_turn_end_reason_is_a_boundary() {
    // session-core §8.6 #139
    let reasons = [
        r#"{"kind":"completed"}"#,
        r#"{"kind":"aborted","reason":{"kind":"user"}}"#,
        r#"{"kind":"error","error":{"message":"boom","code":"E"}}"#,
        r#"{"kind":"aborted","reason":{"kind":"disposed"}}"#,
        r#"{"kind":"max-tokens"}"#,
        r#"{"kind":"interrupted"}"#,
    ];
    for reason in reasons {
        let mut source = session("src");
        closed_turn(&mut source, 1, reason);
        let child = fork_session(&source, Some(&Value::from(5)), "child", clock()).unwrap();
        assert_eq!(child.header().seed_length, Some(6), "{reason}");
        assert_eq!(
            child
                .events()
                .get(5)
                .unwrap()
                .data()
                .get("reason")
                .unwrap()
                .to_json(),
            reason
        );
    }
}

#[test]
fn inherited_plugin_bracket_sits_before_the_marker() {
    // session-core §8.6 #140
    let mut source = session("src");
    closed_turn(&mut source, 1, r#"{"kind":"completed"}"#);
    let bracket = source
        .append(plain("tool-workflow/run-start", r#"{"runId":"r"}"#))
        .unwrap();
    assert!(
        source
            .events()
            .iter()
            .all(|e| e.event_type() != "session/end-seed"),
        "the live parent has no marker"
    );
    let child = fork_session(&source, None, "child", clock()).unwrap();
    assert_eq!(child.first_live_seq(), bracket.seq() + 1);
    let events = child.events();
    assert_eq!(
        events.get(bracket.seq() as usize).unwrap().event_type(),
        "tool-workflow/run-start"
    );
    assert_eq!(
        events.get(bracket.seq() as usize + 1).unwrap().event_type(),
        "session/end-seed"
    );
}

#[test]
fn invalid_boundaries() {
    // session-core §8.6 #141
    let empty = session("empty");
    let err = fork_err(&empty, Some(&Value::from(0)));
    assert_eq!(err.code(), ForkErrorCode::InvalidBoundary);
    assert_eq!(
        err.message(),
        r#"fork boundary 0 does not exist in session "empty" (last seq: none)"#
    );
    let mut source = session("src");
    closed_turn(&mut source, 1, r#"{"kind":"completed"}"#);
    let not_safe = |got: &str| {
        format!(r#"fork boundary for session "src" must be a non-negative safe integer, got {got}"#)
    };
    for (b, got) in [
        ("-1", "-1"),
        ("0.5", "0.5"),
        ("1.5", "1.5"),
        ("9007199254740992", "9007199254740992"),
        (r#""0""#, "0"),
        ("null", "null"),
        ("true", "true"),
        ("[1]", "1"),
        ("{}", "[object Object]"),
    ] {
        let err = fork_err(&source, Some(&v(b)));
        assert_eq!(err.code(), ForkErrorCode::InvalidBoundary);
        assert_eq!(err.message(), not_safe(got), "boundary {b}");
    }
    assert_eq!(
        MAX_SAFE_INTEGER + 1,
        9_007_199_254_740_992,
        "the case above is MAX_SAFE + 1"
    );
    let err = fork_err(&source, Some(&Value::from(6)));
    assert_eq!(
        err.message(),
        r#"fork boundary 6 does not exist in session "src" (last seq: 5)"#
    );
    let err = fork_err(&source, Some(&v("9007199254740991")));
    assert_eq!(
        err.message(),
        r#"fork boundary 9007199254740991 does not exist in session "src" (last seq: 5)"#
    );
    // A number spelled differently is the same boundary.
    let child = fork_session(&source, Some(&v("5.0")), "child", clock()).unwrap();
    assert_eq!(child.header().seed_length, Some(6));
}

#[test]
fn corrupted_source_log() {
    // session-core §8.6 #142
    let mut source = session("src");
    closed_turn(&mut source, 1, r#"{"kind":"completed"}"#);
    let mut events = source.events().to_vec();
    let e = &events[2];
    events[2] = Event::appended(e.event_type(), 99, e.time(), e.data().clone(), None, None);
    let corrupt = Events::from_vec(events);
    let err = resolve_boundary(&corrupt, "src", Some(&Value::from(2))).unwrap_err();
    assert_eq!(err.code(), ForkErrorCode::InvalidBoundary);
    assert_eq!(
        err.message(),
        r#"fork boundary 2 does not match a contiguous event seq in session "src""#
    );
    // Through fork_events as well, and nothing is built.
    let err = fork_events("src", None, &corrupt, Some(&Value::from(2)), "c", clock()).unwrap_err();
    assert_eq!(
        err.as_fork().unwrap().code(),
        ForkErrorCode::InvalidBoundary
    );
    // A corrupt last seq makes the default boundary point past the end.
    let mut events = source.events().to_vec();
    let last = events.pop().unwrap();
    events.push(Event::appended(
        last.event_type(),
        40,
        0,
        last.data().clone(),
        None,
        None,
    ));
    let err = resolve_boundary(&Events::from_vec(events), "src", None).unwrap_err();
    assert_eq!(
        err.message(),
        r#"fork boundary 40 does not exist in session "src" (last seq: 40)"#
    );
}

#[test]
fn store_level_error_texts() {
    // session-core §8.6 #143, #144, #145, #147: raised by the store, with these constructors.
    let e = ForkError::not_found("missing");
    assert_eq!(
        (e.code(), e.to_string()),
        (
            ForkErrorCode::SessionNotFound,
            r#"session "missing" not found"#.to_owned()
        )
    );
    let e = ForkError::not_live("s");
    assert_eq!(
        (e.code(), e.message()),
        (
            ForkErrorCode::SessionNotLive,
            r#"session "s" is not the live store instance"#
        )
    );
    let e = ForkError::already_exists("c");
    assert_eq!(
        (e.code(), e.message()),
        (
            ForkErrorCode::SessionAlreadyExists,
            r#"session "c" already exists"#
        )
    );
    assert_eq!(e.name(), "SessionForkError");
    for code in [
        ForkErrorCode::SessionNotFound,
        ForkErrorCode::SessionNotLive,
        ForkErrorCode::SessionAlreadyExists,
        ForkErrorCode::InvalidBoundary,
        ForkErrorCode::OpenTurn,
    ] {
        assert_eq!(ForkErrorCode::parse(&code.to_string()), Some(code));
    }
    assert_eq!(ForkErrorCode::OpenTurn.to_string(), "OPEN_TURN");
}

#[test]
fn boundaries_inside_an_open_turn() {
    // session-core §8.6 #146
    let mut source = session("src");
    source.append(plain("turn/start", r#"{"turn":1}"#)).unwrap();
    source
        .append(plain("step/start", r#"{"turn":1,"step":1}"#))
        .unwrap();
    source.append(user("u1")).unwrap();
    source.append(assistant(1, 1, Some("c1"))).unwrap();
    source
        .append(plain(
            "tool/call",
            r#"{"turn":1,"step":1,"callId":"c1","name":"bash","arguments":"{}"}"#,
        ))
        .unwrap();
    for b in 0..5u8 {
        let err = fork_err(&source, Some(&Value::from(b)));
        assert_eq!(err.code(), ForkErrorCode::OpenTurn);
        assert_eq!(
            err.message(),
            format!(r#"fork boundary {b} in session "src" ends inside open turn 1"#)
        );
    }
}

#[test]
fn pre_turn_events_and_unbalanced_steps_are_not_examined() {
    // session-core §9 #13: only turn/start and turn/end decide.
    let mut source = session("src");
    source
        .append(plain("step/start", r#"{"turn":7,"step":1}"#))
        .unwrap();
    source.append(user("u0")).unwrap();
    source.append(assistant(7, 1, Some("dangling"))).unwrap();
    let child = fork_session(&source, None, "child", clock()).unwrap();
    assert_eq!(child.header().seed_length, Some(3));
    assert_eq!(
        resolve_boundary(&source.events(), "src", Some(&Value::from(0))).unwrap(),
        1
    );
}

#[test]
fn prefix_ending_in_a_marker_gets_no_new_one() {
    // session-core §9 #7
    let seed: Vec<Value> = [
        r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#,
        r#"{"type":"turn/end","seq":1,"time":2,"data":{"turn":1,"reason":{"kind":"completed"}}}"#,
    ]
    .iter()
    .map(|t| v(t))
    .collect();
    let source = Session::create("src", Some(seed), None, clock()).unwrap();
    assert_eq!(source.seq(), 3);
    let child = fork_session(&source, None, "child", clock()).unwrap();
    assert_eq!(child.header().seed_length, Some(3));
    assert_eq!(child.first_live_seq(), 3);
    assert_eq!(child.seq(), 3);
    assert_eq!(child.events(), source.events());
    // Forking before the marker adds a fresh one, timed by the clock.
    let child = fork_session(&source, Some(&Value::from(1)), "child", clock()).unwrap();
    assert_eq!(child.seq(), 3);
    assert_eq!(child.events().get(2).unwrap().time(), NOW);
}

#[test]
fn child_errors_propagate_as_session_errors() {
    let mut source = session("src");
    closed_turn(&mut source, 1, r#"{"kind":"completed"}"#);
    // A negative clock gives an invalid createdAt: the header check fails, not the fork.
    let bad: SharedClock = Arc::new(FixedClock::new(-1));
    let err = fork_session(&source, None, "child", bad).unwrap_err();
    assert!(matches!(err, Error::Session(_)), "{err}");
    assert!(err.as_fork().is_none());
}

#[test]
fn child_header_key_order() {
    assert_eq!(
        child_header("c", 7, None, "p", 3).to_json(),
        r#"{"version":0,"id":"c","createdAt":7,"parentSession":"p","seedLength":3}"#
    );
    assert_eq!(
        child_header("c", 7, Some("/x"), "p", 0).to_json(),
        r#"{"version":0,"id":"c","createdAt":7,"cwd":"/x","parentSession":"p","seedLength":0}"#
    );
}

/// Appends a closed turn: a user message, a step with `chunks` chunks and an assistant
/// message; every third turn also compacts the oldest surface nodes (a replace that reaches
/// back across earlier turns), and every fifth sets a request context.
fn long_turn(s: &mut Session, turn: u32, chunks: usize) {
    s.append(plain("turn/start", &format!(r#"{{"turn":{turn}}}"#)))
        .unwrap();
    s.append(user(&format!("u{turn}"))).unwrap();
    s.append(plain(
        "step/start",
        &format!(r#"{{"turn":{turn},"step":1}}"#),
    ))
    .unwrap();
    for _ in 0..chunks {
        s.append(plain(
            "assistant/chunk",
            &format!(
                r#"{{"turn":{turn},"step":1,"chunk":{{"type":"text-delta","index":0,"text":"t"}}}}"#
            ),
        ))
        .unwrap();
    }
    s.append(assistant(turn, 1, None)).unwrap();
    if turn.is_multiple_of(5) {
        s.append(plain("request/context", &format!(r#"{{"turn":{turn}}}"#)))
            .unwrap();
    }
    if turn.is_multiple_of(3) {
        let nodes = s.surface_nodes().to_vec();
        let range = &nodes[..nodes.len().min(4)];
        let compaction = Draft::new(
            "user/message",
            v(&format!(
                r#"{{"id":"c{turn}","role":"user","source":{{"kind":"compaction"}},"content":[]}}"#
            )),
        )
        .replace_op(range[0], range[range.len() - 1])
        .sources(range);
        s.append(compaction).unwrap();
    }
    s.append(plain("step/end", &format!(r#"{{"turn":{turn},"step":1}}"#)))
        .unwrap();
    s.append(plain(
        "turn/end",
        &format!(r#"{{"turn":{turn},"reason":{{"kind":"completed"}}}}"#),
    ))
    .unwrap();
}

/// Everything a fork child exposes, for comparing two children.
fn observable(s: &Session) -> String {
    let events: Vec<String> = s.events().iter().map(Event::to_json).collect();
    let positions: Vec<Option<usize>> = (0..=s.seq()).map(|q| s.surface().position(q)).collect();
    format!(
        "{:?}\n{:?}\n{} {}\n{:?}\n{:?} {}\n{:?}\n{:?}\n{:?}\n{}",
        events,
        s.header(),
        s.seq(),
        s.first_live_seq(),
        s.surface_nodes(),
        positions,
        s.replace_generation(),
        s.derive_messages(),
        s.request_header(),
        s.request_context(),
        s.transcript().len(),
    )
}

#[test]
// session-core §8.6 #136-#138: a fork of a live session (sharing the parent's derived state at
// checkpoints) is the session the validating path builds, at every closed-turn boundary of a
// log that crosses several checkpoints, and it continues the same way.
fn shared_fork_matches_validating_fork_across_checkpoints() {
    let mut parent = session("parent");
    let mut turn = 0;
    while parent.seq() < 1_300 {
        turn += 1;
        long_turn(&mut parent, turn, (turn as usize * 7) % 40);
    }
    let closed: Vec<u64> = parent
        .events()
        .iter()
        .filter(|e| e.event_type() == "turn/end")
        .map(Event::seq)
        .collect();
    assert!(closed.len() > 20);
    for b in closed {
        let boundary = Value::from(u32::try_from(b).unwrap());
        let mut shared = fork_session(&parent, Some(&boundary), "child", clock()).unwrap();
        let mut validated = fork_events(
            "parent",
            Some("/work"),
            &parent.events(),
            Some(&boundary),
            "child",
            clock(),
        )
        .unwrap();
        assert_eq!(observable(&shared), observable(&validated), "fork at {b}");
        assert!(shared.transcript() == validated.transcript(), "fork at {b}");
        // The inherited events are the parent's frozen objects.
        assert!(shared.event(b).unwrap().ptr_eq(parent.event(b).unwrap()));
        long_turn(&mut shared, 10_000, 3);
        long_turn(&mut validated, 10_000, 3);
        assert_eq!(
            observable(&shared),
            observable(&validated),
            "continued fork at {b}"
        );
        assert!(
            shared.transcript() == validated.transcript(),
            "continued fork at {b}"
        );
    }
}

#[test]
// session-core §8.6 #136-#138 and §2.8: a restored parent whose events keep non-JavaScript
// number spellings forks into the same child as the validating path (which rewrites them),
// and one whose events are in append form shares them.
fn restored_parent_forks_like_the_validating_path() {
    let respelled = [
        r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1.0}}"#,
        r#"{"type":"turn/end","seq":1,"time":2,"data":{"turn":1,"reason":{"kind":"completed"}}}"#,
    ];
    let plain_seed = [
        r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#,
        r#"{"type":"turn/end","seq":1,"time":2,"data":{"turn":1,"reason":{"kind":"completed"}}}"#,
    ];
    for seed in [respelled, plain_seed] {
        let values: Vec<Value> = seed.iter().map(|t| v(t)).collect();
        let parent = Session::from_restore("parent", values, &header("parent"), clock()).unwrap();
        for b in [1u32, 2] {
            let boundary = Value::from(b);
            let shared = fork_session(&parent, Some(&boundary), "child", clock()).unwrap();
            let validated = fork_events(
                "parent",
                Some("/work"),
                &parent.events(),
                Some(&boundary),
                "child",
                clock(),
            )
            .unwrap();
            assert_eq!(observable(&shared), observable(&validated), "fork at {b}");
        }
    }
}
