//! A session that loads also forks: events already stored are exempt from the stricter JSON
//! rules of a live append (issue #15 item 8).
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

use std::sync::Arc;

use session_core::json::Value;
use session_core::{FixedClock, SharedClock};
use session_fork::{fork_events, fork_session};
use session_surface::{Draft, Session};

fn clock() -> SharedClock {
    Arc::new(FixedClock::new(7))
}

fn restored(numbers: &str) -> Session {
    let lines = [
        r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#.to_owned(),
        format!(
            r#"{{"type":"assistant/message","seq":1,"time":1,"data":{{"turn":1,"step":1,"message":{{"id":"a","role":"assistant","content":[],"source":{{"kind":"model","provider":"p","model":"m"}}}},"usage":{numbers}}},"surfaceOp":"append"}}"#
        ),
        r#"{"type":"turn/end","seq":2,"time":1,"data":{"turn":1,"reason":{"kind":"completed"}}}"#
            .to_owned(),
    ];
    let seed = lines.iter().map(|l| Value::parse(l).unwrap()).collect();
    let header = Value::parse(r#"{"version":0,"id":"src","createdAt":1}"#).unwrap();
    Session::from_restore("src", seed, &header, clock()).unwrap()
}

fn usage(session: &Session) -> String {
    session
        .event(1)
        .unwrap()
        .data()
        .get("usage")
        .unwrap()
        .to_json()
}

#[test]
fn a_restored_integer_beyond_2_pow_53_forks_and_keeps_its_value() {
    // JavaScript writes a usage count of 1e20 as `100000000000000000000`.
    let source = restored(r#"{"inputTokens":100000000000000000000,"outputTokens":1}"#);
    let boundary = Value::from(2u8);
    let child = fork_session(&source, Some(&boundary), "child", clock()).unwrap();
    assert_eq!(
        usage(&child),
        r#"{"inputTokens":100000000000000000000,"outputTokens":1}"#
    );
    let child = fork_events(
        "src",
        None,
        &source.events(),
        Some(&boundary),
        "c2",
        clock(),
    )
    .unwrap();
    assert_eq!(
        usage(&child),
        r#"{"inputTokens":100000000000000000000,"outputTokens":1}"#
    );
    assert_eq!(
        child.seq(),
        4,
        "three inherited events and the end-seed marker"
    );
}

#[test]
fn stored_odd_spellings_fork_as_javascript_would_write_them() {
    // 2^53 + 1 reads as 2^53 in JavaScript, `1E2` as 100; `-0` and `1e400`, which JavaScript
    // cannot write back, keep their spelling instead of making the fork fail.
    let source = restored(r#"{"a":9007199254740993,"b":1E2,"c":1.0,"d":-0,"e":1e400}"#);
    for child in [
        fork_session(&source, None, "child", clock()).unwrap(),
        fork_events("src", None, &source.events(), None, "c2", clock()).unwrap(),
    ] {
        assert_eq!(
            usage(&child),
            r#"{"a":9007199254740992,"b":100,"c":1,"d":-0,"e":1e400}"#
        );
    }
}

#[test]
fn new_drafts_still_follow_the_append_rules() {
    let mut source = restored(r#"{"inputTokens":100000000000000000000}"#);
    let mut child = fork_session(&source, None, "child", clock()).unwrap();
    for session in [&mut source, &mut child] {
        let draft = Draft::new(
            "feedback/record",
            Value::parse(r#"{"n":100000000000000000000}"#).unwrap(),
        );
        assert_eq!(
            session.append(draft).unwrap_err().to_string(),
            r#"session event "feedback/record" carries non-JSON-serializable data"#
        );
    }
}
