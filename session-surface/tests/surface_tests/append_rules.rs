//! A live append applies every rule a reader applies to a stored event, with the reader's
//! message (issue #14; decision 5): a refused draft changes nothing and the session stays
//! usable.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

use std::sync::Arc;

use session_core::json::{self, Value};
use session_core::{Event, FixedClock};
use session_surface::{Draft, Session};

fn session_at(time: i64) -> Session {
    Session::create("s", None, None, Arc::new(FixedClock::new(time))).unwrap()
}

fn v(text: &str) -> Value {
    Value::parse(text).unwrap()
}

/// Appends `draft` to a fresh session; on refusal checks that nothing changed and that the
/// session still takes a valid event at seq 0.
fn refusal(draft: Draft) -> String {
    let mut s = session_at(5);
    let message = s.append(draft).unwrap_err().to_string();
    assert_eq!(s.seq(), 0, "a refused draft changed the log");
    let e = s
        .append(Draft::new("turn/start", v(r#"{"turn":1}"#)))
        .unwrap();
    assert_eq!(e.seq(), 0);
    message
}

const UNKNOWN: &str = "unknown to this harness and not marked ignorable; refusing to interpret the log \u{2014} it was likely written by a newer harness";

#[test]
fn unknown_types_need_ignorable_and_storage_tags_are_refused() {
    assert_eq!(
        refusal(Draft::new("x-plugin/event", Value::Null)),
        format!("session \"s\" contains event type \"x-plugin/event\" (seq 0) {UNKNOWN}")
    );
    let mut s = session_at(5);
    let e = s
        .append(Draft::new("x-plugin/event", Value::Null).ignorable())
        .unwrap();
    assert_eq!(
        e.to_json(),
        r#"{"type":"x-plugin/event","seq":0,"time":5,"data":null,"ignorable":true}"#
    );
    assert_eq!(Event::parse(&e.to_json()).unwrap(), e);
    for tag in ["text-chunks", "reasoning-chunks", "tool-call-chunks"] {
        assert_eq!(
            refusal(Draft::new(tag, v(r#"{"note":1}"#)).ignorable()),
            format!(
                "session \"s\" event at seq 0 has type \"{tag}\", a reserved packed-row storage tag"
            )
        );
    }
}

#[test]
fn retired_types_are_refused_with_the_readers_text() {
    assert_eq!(
        refusal(Draft::new("mode/set", v("{}"))),
        "session \"s\" contains unsupported legacy mode/set event at seq 0"
    );
    assert_eq!(
        refusal(
            Draft::new(
                "steering/message",
                v(r#"{"turn":1,"content":[],"source":{"kind":"user"}}"#)
            )
            .append_op()
        ),
        "session \"s\" contains pre-react-loop steering/message at seq 0, which readers rewrite; append the current shape"
    );
}

#[test]
fn turn_payloads_that_readers_refuse_or_rewrite_are_refused() {
    for data in [
        r#"{"turn":1,"x":1,"reason":{"kind":"completed"}}"#,
        r#"{"turn":1e300,"reason":{"kind":"completed"}}"#,
        r#"{"turn":1,"reason":{"kind":"completed","why":"x"}}"#,
        r#"{"turn":1}"#,
        r#"{"turn":0,"reason":{"kind":"completed"}}"#,
    ] {
        assert_eq!(
            refusal(Draft::new("turn/end", v(data))),
            "session \"s\" contains malformed pre-react-loop turn/end at seq 0",
            "{data}"
        );
    }
    for data in [
        r#"{"turn":1,"reason":{"kind":"aborted"}}"#,
        r#"{"turn":1,"reason":{"kind":"disposed"}}"#,
        r#"{"turn":1,"reason":{"kind":"error","step":1,"message":"m"}}"#,
    ] {
        assert_eq!(
            refusal(Draft::new("turn/end", v(data))),
            "session \"s\" contains pre-react-loop turn/end at seq 0, which readers rewrite; append the current shape",
            "{data}"
        );
    }
    assert_eq!(
        refusal(Draft::new(
            "turn/start",
            v(r#"{"turn":1,"trigger":{"kind":"user"}}"#)
        )),
        "session \"s\" contains pre-react-loop turn/start at seq 0, which readers rewrite; append the current shape"
    );
    // A crash closer copies the turn into a checked `turn/end`.
    for data in [
        r#"{"turn":1.5}"#,
        r#"{"turn":"1"}"#,
        "null",
        r#"{"turn":0}"#,
    ] {
        assert_eq!(
            refusal(Draft::new("turn/start", v(data))),
            "session \"s\" contains malformed pre-react-loop turn/start at seq 0",
            "{data}"
        );
    }
    // Current shapes, including unknown reason kinds, are accepted.
    let mut s = session_at(5);
    s.append(Draft::new("turn/start", v(r#"{"turn":1}"#)))
        .unwrap();
    s.append(Draft::new(
        "turn/end",
        v(r#"{"turn":1,"reason":{"kind":"future-kind","x":1}}"#),
    ))
    .unwrap();
    s.append(Draft::new(
        "turn/end",
        v(r#"{"turn":1,"reason":{"kind":"aborted","reason":{"kind":"user"}}}"#),
    ))
    .unwrap();
}

#[test]
fn an_unsafe_clock_time_is_refused() {
    let clock = Arc::new(FixedClock::new(5));
    let mut s = Session::create("s", None, None, clock.clone()).unwrap();
    clock.set(9_007_199_254_740_992);
    assert_eq!(
        s.append(Draft::new("turn/start", v(r#"{"turn":1}"#)))
            .unwrap_err()
            .to_string(),
        "session \"s\" event at seq 0 has time 9007199254740992, which is not a safe integer"
    );
    assert_eq!(s.seq(), 0);
}

#[test]
fn data_nested_deeper_than_a_reader_accepts_is_refused() {
    let nested = |depth: usize| v(&format!("{}1{}", "[".repeat(depth), "]".repeat(depth)));
    assert_eq!(
        refusal(Draft::new("feedback/record", nested(json::MAX_DEPTH))),
        "session event \"feedback/record\" carries non-JSON-serializable data"
    );
    let mut s = session_at(5);
    let e = s
        .append(Draft::new(
            "feedback/record",
            nested(json::MAX_APPEND_DEPTH),
        ))
        .unwrap();
    // The stored line reads back.
    assert_eq!(Event::parse(&e.to_json()).unwrap(), e);
}
