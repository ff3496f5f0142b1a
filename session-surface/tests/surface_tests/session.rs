//! `Session` behaviour: session-core §8.1 (items 1–46) and §8.3 (items 73–76).

#![allow(clippy::unwrap_used)] // test helpers unwrap like the tests themselves

use crate::common::*;
use session_core::json::Value;
use session_core::{FixedClock, SharedClock};
use session_surface::{Draft, Error, SeedMode, Session, check_message_shape};
use std::sync::Arc;

fn turn_log() -> Session {
    let mut s = session();
    push(&mut s, log_only("turn/start", r#"{"turn":1}"#));
    push(
        &mut s,
        Draft::new("user/message", user("u1", "hi")).append_op(),
    );
    push(
        &mut s,
        log_only(
            "assistant/chunk",
            r#"{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"ok"}}"#,
        ),
    );
    push(
        &mut s,
        Draft::new(
            "assistant/message",
            assistant(
                "a1",
                r#"[{"type":"text","text":"ok"},{"type":"tool-call","id":"call-1","name":"bash","arguments":"{}"}]"#,
            ),
        )
        .append_op(),
    );
    push(
        &mut s,
        Draft::new("tool/result", tool_result("r1", "call-1", "done")).append_op(),
    );
    push(
        &mut s,
        log_only("turn/end", r#"{"turn":1,"reason":{"kind":"completed"}}"#),
    );
    s
}

#[test]
fn surface_is_the_same_object_every_time() {
    // session-core §8.1 #1
    let s = turn_log();
    assert!(std::ptr::eq(s.surface(), s.surface()));
}

#[test]
fn derives_user_assistant_tool_result() {
    // session-core §8.1 #2
    let s = turn_log();
    let messages = s.derive_messages();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m.get("role").unwrap().as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user"]);
    assert_eq!(
        messages
            .get(1)
            .unwrap()
            .get("content")
            .unwrap()
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let block = &messages
        .get(2)
        .unwrap()
        .get("content")
        .unwrap()
        .as_array()
        .unwrap()[0];
    assert_eq!(block.get("toolCallId").unwrap().as_str(), Some("call-1"));
    assert!(
        messages
            .iter()
            .all(|m| m.get("chunk").is_none() && m.get("turn").is_none())
    );
}

#[test]
fn max_tokens_turn_end_survives_cloning() {
    // session-core §8.1 #3
    let mut s = session();
    push(&mut s, log_only("turn/start", r#"{"turn":1}"#));
    let e = push(
        &mut s,
        log_only("turn/end", r#"{"turn":1,"reason":{"kind":"max-tokens"}}"#),
    );
    let replay = Session::create("r", Some(values(&s)), None, clock()).unwrap();
    assert_eq!(replay.event(1).unwrap(), &e);
    assert_eq!(
        e.data().get("reason").unwrap().to_json(),
        r#"{"kind":"max-tokens"}"#
    );
}

#[test]
fn aborted_turn_survives_replay() {
    // session-core §8.1 #4
    let mut s = session();
    push(&mut s, log_only("turn/start", r#"{"turn":1}"#));
    push(
        &mut s,
        log_only(
            "turn/end",
            r#"{"turn":1,"reason":{"kind":"aborted","reason":{"kind":"user"}}}"#,
        ),
    );
    let replay = Session::create("r", Some(values(&s)), None, clock()).unwrap();
    let events = replay.events();
    assert_eq!(events.len(), 3);
    assert_eq!(events.prefix(2), s.events());
    assert_eq!(events.get(2).unwrap().event_type(), "session/end-seed");
}

#[test]
fn plugin_and_user_messages_derive_verbatim() {
    // session-core §8.1 #5
    let mut s = session();
    let plugin = v(
        r#"{"id":"p1","role":"user","content":[{"type":"text","text":"ctx"}],"source":{"kind":"plugin","plugin":"watcher"}}"#,
    );
    push(
        &mut s,
        Draft::new("user/message", plugin.clone()).append_op(),
    );
    push(
        &mut s,
        Draft::new("user/message", user("u1", "hi")).append_op(),
    );
    let messages = s.derive_messages();
    assert_eq!(messages.len(), 2);
    assert_eq!(messages.get(0).unwrap(), &plugin);
    assert_eq!(
        messages.get(1).unwrap().get("content").unwrap().to_json(),
        r#"[{"type":"text","text":"hi"}]"#
    );
    assert!(
        messages
            .iter()
            .all(|m| m.get("role").unwrap().as_str() == Some("user"))
    );
}

#[test]
fn system_reminder_plugin_message_is_the_stored_message() {
    // session-core §8.1 #6
    let mut s = session();
    let data = v(
        r#"{"id":"p1","role":"user","content":[{"type":"text","text":"<system-reminder>x</system-reminder>"}],"source":{"kind":"plugin","plugin":"reminder","form":"notice","summary":"s"}}"#,
    );
    let e = push(&mut s, Draft::new("user/message", data).append_op());
    let m = s.derive_messages().get(0).unwrap().clone();
    assert!(m.ptr_eq(e.data()));
    assert_eq!(
        m.get("source").unwrap().to_json(),
        r#"{"kind":"plugin","plugin":"reminder","form":"notice","summary":"s"}"#
    );
}

#[test]
fn replaying_a_seed() {
    // session-core §8.1 #7
    let s = turn_log();
    let replay = Session::create("r", Some(values(&s)), None, clock()).unwrap();
    assert_eq!(replay.derive_messages(), s.derive_messages());
    assert_eq!(replay.events().prefix(s.events().len()), s.events());
    assert_eq!(replay.seq(), s.seq() + 1);
    assert_eq!(replay.first_live_seq(), s.seq());
}

#[test]
fn end_seed_marker_rules() {
    // session-core §8.1 #8
    let fresh = session();
    assert!(fresh.events().is_empty());
    assert_eq!(fresh.first_live_seq(), 0);
    let empty = Session::create("s", Some(vec![]), None, clock()).unwrap();
    assert_eq!(
        empty.events().get(0).unwrap().to_json(),
        r#"{"type":"session/end-seed","seq":0,"time":1000,"data":{}}"#
    );
    assert_eq!(empty.events().len(), 1);
    assert_eq!(empty.first_live_seq(), 0);
    let again = Session::create("s", Some(values(&empty)), None, clock()).unwrap();
    assert_eq!(again.events(), empty.events());
    assert_eq!(again.first_live_seq(), 1);
}

#[test]
fn seed_rejections_of_header_and_old_shapes() {
    // session-core §8.1 #9
    assert_eq!(
        err(seeded(&[
            r#"{"type":"request/header","seq":0,"time":0,"data":{"header":{"config":{"model":"m"}},"reason":"initial"}}"#
        ])),
        "seed request/header at index 0 lacks provider/model"
    );
    assert_eq!(
        err(seeded(&[
            r#"{"type":"assistant/message","seq":0,"time":0,"data":{"turn":1,"step":1,"content":[{"type":"text","text":"x"}]},"surfaceOp":"append"}"#
        ])),
        "seed assistant/message at index 0 lacks an identified message"
    );
    assert_eq!(
        err(seeded(&[
            r#"{"type":"request/header","seq":0,"time":0,"data":{"header":"nope","reason":"initial"}}"#
        ])),
        "seed request/header at index 0 lacks provider/model"
    );
    let ok = seeded(&[r#"{"type":"plugin/thing","seq":0,"time":0,"data":null}"#]).unwrap();
    assert!(ok.event(0).unwrap().data().is_null());
}

fn user_seed(message: &str) -> String {
    format!(r#"{{"type":"user/message","seq":0,"time":0,"data":{message},"surfaceOp":"append"}}"#)
}

fn tool_seed(message: &str) -> String {
    format!(
        r#"{{"type":"tool/result","seq":0,"time":0,"data":{{"turn":1,"step":1,"message":{message}}},"surfaceOp":"append"}}"#
    )
}

#[test]
fn malformed_seed_message_shapes() {
    // session-core §8.1 #10
    let cases: [(String, &str); 10] = [
        (
            user_seed(r#"{"role":"user","content":[],"source":{"kind":"user"}}"#),
            "seed user/message at index 0 lacks an identified message",
        ),
        (
            user_seed(r#"{"id":"","role":"user","content":[],"source":{"kind":"user"}}"#),
            "seed user/message at index 0 lacks an identified message",
        ),
        (
            user_seed(r#"{"id":"m","role":"assistant","content":[],"source":{"kind":"user"}}"#),
            r#"seed user/message at index 0 message must have role "user""#,
        ),
        (
            user_seed(r#"{"id":"m","role":"user","content":[],"source":{"kind":""}}"#),
            "seed user/message at index 0 message has invalid source",
        ),
        (
            user_seed(r#"{"id":"m","role":"user","content":"x","source":{"kind":"user"}}"#),
            "seed user/message at index 0 message has invalid content",
        ),
        (
            r#"{"type":"assistant/message","seq":0,"time":0,"data":{"message":{"id":"m","role":"assistant","content":[],"source":{"kind":"model","provider":"p"}}},"surfaceOp":"append"}"#.to_owned(),
            "seed assistant/message at index 0 message must have model source",
        ),
        (
            tool_seed(r#"{"id":"m","role":"user","content":[],"source":{"kind":"tool"}}"#),
            "seed tool/result at index 0 message must have tool source",
        ),
        (
            tool_seed(
                r#"{"id":"m","role":"user","content":[{"type":"text","text":"x"}],"source":{"kind":"tool","callId":"c"}}"#,
            ),
            "seed tool/result at index 0 message must contain one tool-result block",
        ),
        (
            tool_seed(
                r#"{"id":"m","role":"user","content":[{"type":"tool-result","toolCallId":"c","content":[]},{"type":"tool-result","toolCallId":"c","content":[]}],"source":{"kind":"tool","callId":"c"}}"#,
            ),
            "seed tool/result at index 0 message must contain one tool-result block",
        ),
        (
            tool_seed(
                r#"{"id":"m","role":"user","content":[{"type":"tool-result","toolCallId":"d","content":[]}],"source":{"kind":"tool","callId":"c"}}"#,
            ),
            "seed tool/result at index 0 message has mismatched tool call ids",
        ),
    ];
    for (event, message) in cases {
        assert_eq!(err(seeded(&[&event])), message, "{event}");
    }
}

#[test]
fn boundary_event_and_plugin_kinds_pass_unchanged() {
    // session-core §8.1 #11 (snapshotSessionEvent, reproduced on the seed path)
    let boundary = r#"{"type":"turn/start","seq":0,"time":5,"data":{"turn":1}}"#;
    let plugin = r#"{"type":"user/message","seq":1,"time":6,"data":{"id":"m","role":"user","content":[{"type":"plugin-block","payload":{"x":1}}],"source":{"kind":"some-plugin"}},"surfaceOp":"append"}"#;
    let s = seeded(&[boundary, plugin]).unwrap();
    assert_eq!(s.event(0).unwrap().to_json(), boundary);
    assert_eq!(s.event(1).unwrap().to_json(), plugin);
    assert!(check_message_shape("user/message", s.event(1).unwrap().data(), "x").is_ok());
}

#[test]
fn adopt_check_uses_the_event_subject() {
    // session-core §8.1 #12 and #13 (adoptSessionEvent: frozen by construction in Rust; the
    // check itself is `check_message_shape` with subject `session event at seq <seq>`)
    let good = user("m", "x");
    assert!(check_message_shape("user/message", &good, "session event at seq 3").is_ok());
    let bad = v(r#"{"id":"m","role":"assistant","content":[],"source":{"kind":"user"}}"#);
    assert_eq!(
        check_message_shape("user/message", &bad, "session event at seq 3")
            .unwrap_err()
            .to_string(),
        r#"session event at seq 3 message must have role "user""#
    );
    assert!(check_message_shape("turn/start", &Value::Null, "x").is_ok());
}

fn header_seed(header: &str) -> String {
    format!(
        r#"{{"type":"request/header","seq":0,"time":0,"data":{{"header":{header},"reason":"initial"}}}}"#
    )
}

#[test]
fn reasoning_effort_in_seed_headers() {
    // session-core §8.1 #14
    let good = header_seed(r#"{"config":{"provider":"p","model":"m","reasoningEffort":"high"}}"#);
    let s = seeded(&[&good]).unwrap();
    assert_eq!(s.event(0).unwrap().to_json(), good);
    assert_eq!(
        s.request_header().unwrap().to_json(),
        r#"{"config":{"provider":"p","model":"m","reasoningEffort":"high"}}"#
    );
    for bad in [r#""""#, "1"] {
        let e = header_seed(&format!(
            r#"{{"config":{{"provider":"p","model":"m","reasoningEffort":{bad}}}}}"#
        ));
        assert_eq!(
            err(seeded(&[&e])),
            "seed request/header at index 0 has an invalid reasoningEffort"
        );
    }
}

#[test]
fn adapter_defaults_in_seed_headers() {
    // session-core §8.1 #15
    let good = header_seed(
        r#"{"config":{"provider":"p","model":"m","maxTokens":10},"adapterDefaults":{"maxTokens":true}}"#,
    );
    let s = seeded(&[&good]).unwrap();
    assert_eq!(s.event(0).unwrap().to_json(), good);
    for bad in [
        "null",
        "[]",
        r#"{"unknown":true}"#,
        r#"{"maxTokens":false}"#,
        r#"{"reasoningEffort":true}"#,
    ] {
        let e = header_seed(&format!(
            r#"{{"config":{{"provider":"p","model":"m","maxTokens":10}},"adapterDefaults":{bad}}}"#
        ));
        assert_eq!(
            err(seeded(&[&e])),
            "seed request/header at index 0 has invalid adapterDefaults",
            "{bad}"
        );
    }
}

#[test]
fn derived_messages_are_snapshots() {
    // session-core §8.1 #16 (immutable values; reordering a copy changes nothing)
    let s = turn_log();
    let first = s.derive_messages();
    let mut copy = first.to_vec();
    copy.reverse();
    assert_eq!(s.derive_messages(), first);
    assert_eq!(s.events().len(), 6);
    assert_ne!(copy[0], *first.get(0).unwrap());
}

#[test]
fn append_rejects_non_json_numbers() {
    // session-core §8.1 #17 (the Rust analogue: non-finite, -0, unsafe integers; decision 3)
    let mut s = session();
    for data in [
        "1e400",
        "-0",
        r#"{"a":[1,-1e400]}"#,
        "[9007199254740993]",
        r#"{"deep":{"x":-0.0}}"#,
    ] {
        assert_eq!(
            err(s.append(Draft::new("feedback/record", v(data)))),
            r#"session event "feedback/record" carries non-JSON-serializable data"#,
            "{data}"
        );
    }
    assert!(s.events().is_empty());
}

#[test]
fn eligible_type_without_marker_is_rejected() {
    // session-core §8.1 #18
    let mut s = session();
    assert_eq!(
        err(s.append(Draft::new("user/message", user("m", "x")))),
        r#"session event "user/message" is surface-eligible and requires a surfaceOp marker"#
    );
    assert!(s.events().is_empty());
    assert!(s.surface().is_empty());
}

#[test]
fn dense_arrays_and_objects_are_accepted() {
    // session-core §8.1 #19
    let mut s = session();
    let data = v(r#"{"a":[[1,2],[{"b":[true,null,"x"]}]],"c":{"d":{}}}"#);
    let e = push(&mut s, Draft::new("feedback/record", data.clone()));
    assert_eq!(e.data(), &data);
}

#[test]
fn seed_with_non_json_number_is_rejected() {
    // session-core §8.1 #20 (BigInt has no Rust analogue; unsafe integers and -0 do)
    assert_eq!(
        err(seeded(&[
            r#"{"type":"plugin/x","seq":0,"time":0,"data":{"n":9007199254740993}}"#
        ])),
        "seed event at index 0 is not losslessly JSON-serializable"
    );
    assert_eq!(
        err(seeded(&[
            r#"{"type":"plugin/x","seq":0,"time":0,"data":-0}"#
        ])),
        "seed event at index 0 is not losslessly JSON-serializable"
    );
}

#[test]
fn seed_with_seq_gap_is_rejected() {
    // session-core §8.1 #21
    assert_eq!(
        err(seeded(&[
            r#"{"type":"turn/start","seq":0,"time":0,"data":{"turn":1}}"#,
            r#"{"type":"turn/end","seq":5,"time":0,"data":{"turn":1}}"#
        ])),
        "seed event at index 1 has seq 5 (expected 1); seed must be contiguous from 0"
    );
}

#[test]
fn seed_message_without_marker_is_rejected() {
    // session-core §8.1 #22
    let e = format!(
        r#"{{"type":"user/message","seq":0,"time":0,"data":{}}}"#,
        user("m", "x").to_json()
    );
    assert_eq!(
        err(seeded(&[&e])),
        r#"invalid seed event at index 0: session event "user/message" is surface-eligible and requires a surfaceOp marker"#
    );
}

#[test]
fn well_formed_seed_is_kept_verbatim() {
    // session-core §8.1 #23
    let seed = [
        r#"{"type":"turn/start","seq":0,"time":7,"data":{"turn":1}}"#.to_owned(),
        format!(
            r#"{{"type":"user/message","seq":1,"time":8,"data":{},"surfaceOp":"append"}}"#,
            user("m", "x").to_json()
        ),
        r#"{"seq":2,"type":"turn/end","time":9,"data":{"turn":1,"reason":{"kind":"completed"}}}"#
            .to_owned(),
    ];
    let s = seeded(&seed.iter().map(String::as_str).collect::<Vec<_>>()).unwrap();
    assert_eq!(s.first_live_seq(), 3);
    for (i, text) in seed.iter().enumerate() {
        assert_eq!(&s.event(i as u64).unwrap().to_json(), text);
    }
}

#[test]
fn seed_values_are_stored_as_given() {
    // session-core §8.1 #24 and #25 [JS single read]: reproduced as "the stored value is the
    // value given", with the data shared rather than copied.
    let data = v(r#"{"value":"accepted","nested":{"n":1}}"#);
    let seed = vec![Value::object([
        ("type", Value::from("plugin/x")),
        ("seq", Value::from(0u8)),
        ("time", Value::from(0u8)),
        ("data", data.clone()),
    ])];
    let s = Session::create("s", Some(seed), None, clock()).unwrap();
    assert!(s.event(0).unwrap().data().ptr_eq(&data));
}

#[test]
fn seed_surface_metadata_must_be_json() {
    // session-core §8.1 #26 and #27 (BigInt / class instance → a non-finite number)
    let e = format!(
        r#"{{"type":"user/message","seq":0,"time":0,"data":{},"surfaceOp":{{"op":"replace","start":1e400,"end":0}}}}"#,
        user("m", "x").to_json()
    );
    assert_eq!(
        err(seeded(&[&e])),
        "seed event at index 0 is not losslessly JSON-serializable"
    );
    let e = format!(
        r#"{{"type":"user/message","seq":0,"time":0,"data":{},"surfaceOp":"append","sourceEventSeqs":[-0]}}"#,
        user("m", "x").to_json()
    );
    assert_eq!(
        err(seeded(&[&e])),
        "seed event at index 0 is not losslessly JSON-serializable"
    );
}

#[test]
fn seed_entries_that_are_not_records() {
    // session-core §8.1 #28 and #29 [JS prototypes]: a non-object entry is an invalid envelope
    // (decision for `null`, §9 item 9); an object's key order is kept.
    for bad in ["null", "1", "[]", r#""event""#] {
        assert_eq!(
            err(Session::create("s", Some(vec![v(bad)]), None, clock())),
            "seed event at index 0 has an invalid event envelope"
        );
    }
}

#[test]
fn seed_replace_op_is_stored() {
    // session-core §8.1 #30
    let m0 = user("m0", "a").to_json();
    let m1 = user("m1", "b").to_json();
    let s = seeded(&[
        &format!(r#"{{"type":"user/message","seq":0,"time":0,"data":{m0},"surfaceOp":"append"}}"#),
        &format!(
            r#"{{"type":"user/message","seq":1,"time":0,"data":{m1},"surfaceOp":{{"op":"replace","start":0,"end":0}},"sourceEventSeqs":[0]}}"#
        ),
    ])
    .unwrap();
    assert_eq!(
        s.event(1).unwrap().surface_op_value().unwrap().to_json(),
        r#"{"op":"replace","start":0,"end":0}"#
    );
    assert_eq!(s.surface().nodes(), [1]);
}

#[test]
fn seed_surface_errors_are_wrapped() {
    // session-core §8.1 #31
    let m0 = user("m0", "a").to_json();
    let m1 = user("m1", "b").to_json();
    assert_eq!(
        err(seeded(&[
            &format!(
                r#"{{"type":"user/message","seq":0,"time":0,"data":{m0},"surfaceOp":"append"}}"#
            ),
            &format!(
                r#"{{"type":"user/message","seq":1,"time":0,"data":{m1},"surfaceOp":{{"op":"replace","start":7,"end":7}},"sourceEventSeqs":[0]}}"#
            ),
        ])),
        "invalid seed event at index 1: surface replace: start seq 7 not found in surface"
    );
}

#[test]
fn seed_is_owned_by_the_session() {
    // session-core §8.1 #32
    let mut seed = vec![v(r#"{"type":"plugin/x","seq":0,"time":0,"data":{"a":1}}"#)];
    let s = Session::create("s", Some(seed.clone()), None, clock()).unwrap();
    seed[0] = v(r#"{"type":"plugin/x","seq":0,"time":0,"data":{"a":2}}"#);
    assert_eq!(s.event(0).unwrap().data().to_json(), r#"{"a":1}"#);
}

#[test]
fn appended_data_is_owned_by_the_session() {
    // session-core §8.1 #33
    let mut s = session();
    let mut data = v(r#"{"a":1}"#);
    let e = push(&mut s, Draft::new("feedback/record", data.clone()));
    data = v(r#"{"a":2}"#);
    assert_eq!(data.to_json(), r#"{"a":2}"#);
    assert_eq!(e.data().to_json(), r#"{"a":1}"#);
    assert_eq!(s.event(0).unwrap().data().to_json(), r#"{"a":1}"#);
}

#[test]
fn append_value_is_stored_as_given() {
    // session-core §8.1 #34 [JS getter]: the stored value is the given one.
    let mut s = session();
    let e = push(
        &mut s,
        Draft::new("feedback/record", v(r#"{"value":"accepted"}"#)),
    );
    assert_eq!(e.data().to_json(), r#"{"value":"accepted"}"#);
}

#[test]
fn append_surface_metadata_must_be_json() {
    // session-core §8.1 #35 and #36
    let mut s = session();
    assert_eq!(
        err(s.append(
            Draft::new("user/message", user("m", "x"))
                .append_op()
                .sources_value(v("[9007199254740993]"))
        )),
        r#"session event "user/message" carries non-JSON-serializable surface metadata"#
    );
    assert_eq!(
        err(s.append(
            Draft::new("user/message", user("m", "x"))
                .surface_op_value(v(r#"{"op":"replace","start":-0,"end":0}"#))
        )),
        r#"session event "user/message" carries non-JSON-serializable surface metadata"#
    );
    assert!(s.events().is_empty());
}

#[test]
fn append_stores_the_surface_op() {
    // session-core §8.1 #37
    let mut s = session();
    push(
        &mut s,
        Draft::new("user/message", user("a", "x")).append_op(),
    );
    let e = push(
        &mut s,
        Draft::new("user/message", user("b", "y"))
            .replace_op(0, 0)
            .sources(&[0]),
    );
    assert_eq!(
        e.to_json(),
        format!(
            r#"{{"type":"user/message","seq":1,"time":1000,"data":{},"sourceEventSeqs":[0],"surfaceOp":{{"op":"replace","start":0,"end":0}}}}"#,
            user("b", "y").to_json()
        )
    );
}

#[test]
fn append_rejects_invalid_surface_metadata() {
    // session-core §8.1 #38
    let mut s = session();
    push(&mut s, log_only("turn/start", r#"{"turn":1}"#));
    assert_eq!(
        err(s.append(
            Draft::new("user/message", user("m", "x")).surface_op_value(v(r#""invalid""#))
        )),
        r#"session event "user/message" carries an invalid surfaceOp"#
    );
    assert_eq!(
        err(s.append(
            Draft::new("user/message", user("m", "x"))
                .surface_op_value(v(r#"{"op":"replace","start":-1,"end":0}"#))
        )),
        r#"session event "user/message" carries an invalid replace surfaceOp"#
    );
    assert_eq!(
        err(s.append(
            Draft::new("user/message", user("m", "x"))
                .append_op()
                .sources_value(v("[0,-1]"))
        )),
        r#"session event "user/message" sourceEventSeqs must densely contain non-negative safe integers"#
    );
    assert_eq!(s.events().len(), 1);
}

#[test]
fn surface_op_on_log_only_type() {
    // session-core §8.1 #39
    let mut s = session();
    assert_eq!(
        err(s.append(log_only("turn/start", r#"{"turn":1}"#).append_op())),
        r#"session event "turn/start" is not surface-eligible and cannot carry surfaceOp"#
    );
    assert_eq!(
        err(seeded(&[
            r#"{"type":"turn/start","seq":0,"time":0,"data":{"turn":1},"surfaceOp":"append"}"#
        ])),
        r#"invalid seed event at index 0: session event "turn/start" is not surface-eligible and cannot carry surfaceOp"#
    );
}

#[test]
fn returned_and_stored_events_are_the_same_value() {
    // session-core §8.1 #40 (immutability is by type; the returned event is the stored one)
    let mut s = session();
    let e = push(
        &mut s,
        Draft::new("user/message", user("m", "x")).append_op(),
    );
    assert!(e.ptr_eq(s.event(0).unwrap()));
    let seeded = Session::create("r", Some(values(&s)), None, clock()).unwrap();
    assert_eq!(seeded.event(0).unwrap(), &e);
}

#[test]
fn restore_handles_deep_nesting() {
    // session-core §8.1 #41
    let depth = 20_000;
    let data = format!("{}1{}", "[".repeat(depth), "]".repeat(depth));
    let event = v(&format!(
        r#"{{"type":"plugin/x","seq":0,"time":0,"data":{data}}}"#
    ));
    let header = v(r#"{"version":0,"id":"s","createdAt":1}"#);
    let s = Session::from_restore("s", vec![event], &header, clock()).unwrap();
    assert_eq!(s.seq(), 2);
    let s2 = Session::create("s", Some(values(&s)), None, clock()).unwrap();
    assert_eq!(s2.events(), s.events());
}

#[test]
fn events_snapshot_is_frozen() {
    // session-core §8.1 #42
    let mut s = session();
    push(&mut s, log_only("turn/start", r#"{"turn":1}"#));
    let a = s.events();
    let b = s.events();
    assert_eq!(a, b);
    push(
        &mut s,
        log_only("turn/end", r#"{"turn":1,"reason":{"kind":"completed"}}"#),
    );
    assert_eq!(a.len(), 1);
    assert_eq!(s.events().len(), 2);
}

#[test]
fn explicit_header_is_copied() {
    // session-core §8.1 #43
    let mut header = v(
        r#"{"version":0,"id":"s","createdAt":123,"cwd":"/accepted","parentSession":"parent","seedLength":2}"#,
    );
    let s = Session::create("s", None, Some(header.clone()), clock()).unwrap();
    header = v("{}");
    assert_eq!(header.to_json(), "{}");
    assert_eq!(
        s.header().to_value().to_json(),
        r#"{"version":0,"id":"s","createdAt":123,"cwd":"/accepted","parentSession":"parent","seedLength":2}"#
    );
}

#[test]
fn header_rejections() {
    // session-core §8.1 #44
    assert_eq!(
        err(Session::create(
            "s",
            None,
            Some(v(
                r#"{"version":0,"id":"s","createdAt":1,"parentSession":-0}"#
            )),
            clock()
        )),
        "session header is not losslessly JSON-serializable"
    );
    for bad in ["null", "1", "[]"] {
        assert_eq!(
            err(Session::from_restore("s", vec![], &v(bad), clock())),
            "session header is not a plain JSON record"
        );
    }
    assert_eq!(
        err(Session::create(
            "s",
            None,
            Some(v(r#"{"version":0,"id":"t","createdAt":1}"#)),
            clock()
        )),
        r#"session header id "t" does not match session id "s""#
    );
    assert_eq!(
        err(Session::from_seed(
            "s",
            None,
            None,
            SeedMode::Restore,
            clock()
        )),
        "session header is not a plain JSON record"
    );
}

#[test]
fn header_scalar_rejections() {
    // session-core §8.1 #45
    let cases = [
        ("1", "session header is not a plain JSON record"),
        ("null", "session header is not a plain JSON record"),
        (
            r#"{"version":1,"id":"s","createdAt":1}"#,
            "session header version must be 0, got 1",
        ),
        (
            r#"{"version":0,"id":"s","createdAt":"123"}"#,
            "session header createdAt must be a non-negative safe integer",
        ),
        (
            r#"{"version":0,"id":"s","createdAt":1,"cwd":1}"#,
            "session header cwd must be a string",
        ),
        (
            r#"{"version":0,"id":"s","createdAt":1,"cwd":"relative"}"#,
            r#"session header cwd must be an absolute path, got "relative""#,
        ),
        (
            r#"{"version":0,"id":"s","createdAt":1,"parentSession":1}"#,
            "session header parentSession must be a string",
        ),
        (
            r#"{"version":0,"id":"s","createdAt":1,"seedLength":"1"}"#,
            "session header seedLength must be a non-negative safe integer",
        ),
        (
            r#"{"version":0,"id":"s","createdAt":1,"seedLength":0.5}"#,
            "session header seedLength must be a non-negative safe integer",
        ),
        (
            r#"{"version":0,"id":"s","createdAt":1,"seedLength":-1}"#,
            "session header seedLength must be a non-negative safe integer",
        ),
    ];
    for (header, message) in cases {
        assert_eq!(
            err(Session::create("s", None, Some(v(header)), clock())),
            message,
            "{header}"
        );
        assert_eq!(
            err(Session::from_restore("s", vec![], &v(header), clock())),
            message,
            "{header}"
        );
    }
}

#[test]
fn seed_envelope_rejections() {
    // session-core §8.1 #46
    let bad = [
        r#"{"type":"x","seq":0,"time":0,"data":null,"extra":1}"#,
        r#"{"type":1,"seq":0,"time":0,"data":null}"#,
        r#"{"type":"x","seq":"0","time":0,"data":null}"#,
        r#"{"type":"x","seq":0.5,"time":0,"data":null}"#,
        r#"{"type":"x","seq":-1,"time":0,"data":null}"#,
        r#"{"type":"x","seq":0,"time":"1","data":null}"#,
        r#"{"type":"x","seq":0,"time":0.5,"data":null}"#,
        r#"{"type":"x","seq":0,"time":0}"#,
        r#"{"type":"x","seq":0,"time":0,"data":null,"ignorable":false}"#,
        r#"{"type":"x","seq":0,"time":0,"data":null,"ignorable":"yes"}"#,
    ];
    for e in bad {
        assert_eq!(
            err(seeded(&[e])),
            "seed event at index 0 has an invalid event envelope",
            "{e}"
        );
    }
    let ok = r#"{"type":"x","seq":0,"time":0,"data":null,"ignorable":true}"#;
    let s = seeded(&[ok]).unwrap();
    assert_eq!(s.event(0).unwrap().to_json(), ok);
    assert!(s.event(0).unwrap().ignorable());
}

#[test]
fn seed_error_precedes_header_error_in_snapshot_mode() {
    // session-core §2.8 step 4 ordering, and restore mode validating the header first
    let seed = vec![v(r#"{"type":1}"#)];
    let header = v(r#"{"version":1}"#);
    assert_eq!(
        err(Session::create(
            "s",
            Some(seed.clone()),
            Some(header.clone()),
            clock()
        )),
        "seed event at index 0 has an invalid event envelope"
    );
    assert_eq!(
        err(Session::from_restore("s", seed, &header, clock())),
        "session header version must be 0, got 1"
    );
}

#[test]
fn legacy_request_header_forms() {
    // session-core §8.7 #154 and #155 (the seed and append paths live here)
    let mut s = session();
    assert_eq!(
        err(s.append(log_only("request/header-delta", "{}"))),
        r#"session event "request/header-delta" uses unsupported legacy request/header-delta format"#
    );
    assert_eq!(
        err(s.append(log_only(
            "request/header",
            r#"{"header":{"config":{"provider":"p","model":"m"}},"reason":"fallback"}"#
        ))),
        r#"session event "request/header" uses unsupported legacy request/header reason "fallback""#
    );
    assert!(s.events().is_empty());
    assert_eq!(
        err(seeded(&[
            r#"{"type":"request/header-delta","seq":0,"time":0,"data":{},"extra":1}"#
        ])),
        "seed event at index 0 uses unsupported legacy request/header-delta format"
    );
    assert_eq!(
        err(seeded(&[
            r#"{"type":"request/header","seq":0,"time":0,"data":{"header":{"config":{"provider":"p","model":"m"}},"reason":"fallback"}}"#
        ])),
        r#"seed event at index 0 uses unsupported legacy request/header reason "fallback""#
    );
}

#[test]
fn message_shapes_are_checked_on_append() {
    // Decision 5: the seed's message-shape messages, with subject `session event at seq <seq>`
    let mut s = session();
    push(&mut s, log_only("turn/start", r#"{"turn":1}"#));
    assert_eq!(
        err(s.append(
            Draft::new(
                "user/message",
                v(r#"{"role":"user","content":[],"source":{"kind":"user"}}"#)
            )
            .append_op()
        )),
        "session event at seq 1 lacks an identified message"
    );
    assert_eq!(
        err(s.append(
            Draft::new(
                "tool/result",
                v(r#"{"message":{"id":"m","role":"user","content":[{"type":"tool-result","toolCallId":"c","content":[]},{"type":"text","text":"x"}],"source":{"kind":"tool","callId":"c"}}}"#)
            )
            .append_op()
        )),
        "session event at seq 1 message must contain one tool-result block"
    );
    // The shape check runs before the surface check (as on the seed path).
    assert_eq!(
        err(s.append(Draft::new("assistant/message", v(r#"{"message":null}"#)))),
        "session event at seq 1 lacks an identified message"
    );
    assert_eq!(s.seq(), 1);
}

#[test]
fn restore_keeps_numbers_as_written() {
    // Decision 3: numbers read from disk are kept exactly as written
    let event = v(
        r#"{"type":"plugin/x","seq":0,"time":0,"data":{"a":1.0,"b":-0,"c":12345678901234567890}}"#,
    );
    let header = v(r#"{"version":0,"id":"s","createdAt":1}"#);
    let s = Session::from_restore("s", vec![event], &header, clock()).unwrap();
    assert_eq!(
        s.event(0).unwrap().data().to_json(),
        r#"{"a":1.0,"b":-0,"c":12345678901234567890}"#
    );
}

#[test]
fn snapshot_seed_respells_numbers() {
    // Snapshot mode stores what a live append would: JavaScript number spelling.
    let s = seeded(&[r#"{"type":"plugin/x","seq":0,"time":0,"data":{"a":1.0,"b":1E3}}"#]).unwrap();
    assert_eq!(s.event(0).unwrap().data().to_json(), r#"{"a":1,"b":1000}"#);
}

#[test]
fn create_from_events_shares_and_revalidates() {
    // Fork children: snapshot mode over already-built events
    let parent = turn_log();
    let child = Session::create_from_events("c", Some(parent.events()), None, clock()).unwrap();
    assert!(child.event(1).unwrap().ptr_eq(parent.event(1).unwrap()));
    assert_eq!(child.first_live_seq(), parent.seq());
    assert_eq!(child.derive_messages(), parent.derive_messages());
    let header = v(r#"{"version":0,"id":"s","createdAt":1}"#);
    let restored = Session::from_restore(
        "s",
        vec![v(r#"{"type":"plugin/x","seq":0,"time":0,"data":-0}"#)],
        &header,
        clock(),
    )
    .unwrap();
    // Stored events are exempt from the append JSON rules: the `-0` a log holds is kept (a
    // log that loads also forks), while a seed of values is new data and refuses it.
    let child = Session::create_from_events("c", Some(restored.events()), None, clock()).unwrap();
    assert!(child.event(0).unwrap().ptr_eq(restored.event(0).unwrap()));
    assert_eq!(
        child.event(0).unwrap().to_json(),
        r#"{"type":"plugin/x","seq":0,"time":0,"data":-0}"#
    );
    let values = vec![restored.event(0).unwrap().to_value()];
    assert_eq!(
        err(Session::create("c", Some(values), None, clock())),
        "seed event at index 0 is not losslessly JSON-serializable"
    );
}

#[test]
fn create_from_events_respells_from_the_first_event_it_must_change() {
    // The events before the first respelled one are taken as they are (the log shares the
    // seed's storage for them); that one is respelled and the later ones are taken as they
    // are too, every one of them checked.
    let header = v(r#"{"version":0,"id":"s","createdAt":1}"#);
    let stored = [
        r#"{"type":"plugin/x","seq":0,"time":0,"data":{"a":1}}"#,
        r#"{"type":"plugin/x","seq":1,"time":0,"data":{"a":1.0}}"#,
        r#"{"type":"user/message","seq":2,"time":0,"data":{"id":"u","role":"user","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}},"surfaceOp":"append"}"#,
    ];
    let restored =
        Session::from_restore("s", stored.iter().map(|e| v(e)).collect(), &header, clock())
            .unwrap();
    let seed = restored.events();
    let child = Session::create_from_events("c", Some(seed.clone()), None, clock()).unwrap();
    assert_eq!(
        child.events().len(),
        seed.len(),
        "the seed ends in its marker"
    );
    for i in [0, 2, 3] {
        assert!(
            child
                .event(i)
                .unwrap()
                .ptr_eq(seed.get(i as usize).unwrap()),
            "{i}"
        );
    }
    assert!(!child.event(1).unwrap().ptr_eq(seed.get(1).unwrap()));
    assert_eq!(child.event(1).unwrap().data().to_json(), r#"{"a":1}"#);
    assert_eq!(child.first_live_seq(), 4);
    assert_eq!(child.surface().nodes(), vec![2]);
    assert_eq!(child.derive_messages(), restored.derive_messages());
    // A seq gap is found at its index both before and after a respelled event.
    let event = |text: &str| session_core::Event::from_value(&v(text)).unwrap();
    for (events, index) in [
        (
            vec![
                stored[0],
                stored[1],
                r#"{"type":"plugin/x","seq":3,"time":0,"data":{}}"#,
            ],
            2,
        ),
        (
            vec![
                stored[0],
                r#"{"type":"plugin/x","seq":2,"time":0,"data":{"a":1.0}}"#,
            ],
            1,
        ),
    ] {
        let events: Vec<_> = events.into_iter().map(event).collect();
        let seq = events[index].seq();
        assert_eq!(
            err(Session::create_from_events(
                "c",
                Some(events.into()),
                None,
                clock()
            )),
            format!(
                "seed event at index {index} has seq {seq} (expected {index}); seed must be contiguous from 0"
            )
        );
    }
}

#[test]
fn default_header_uses_the_clock() {
    // session-core §8.2 #55 and #60 (Session.create without a store)
    let clock: SharedClock = Arc::new(FixedClock::new(1_767_225_600_000));
    let s = Session::create("s", None, None, clock).unwrap();
    assert_eq!(
        s.header().to_value().to_json(),
        r#"{"version":0,"id":"s","createdAt":1767225600000}"#
    );
}

#[test]
fn append_with_veto_changes_nothing() {
    // §2.2 step 8 / §3.3: a vetoed candidate leaves everything unchanged
    let mut s = session();
    push(
        &mut s,
        Draft::new("user/message", user("a", "x")).append_op(),
    );
    let before = s.surface().nodes();
    let result = s.append_with(
        Draft::new("user/message", user("b", "y"))
            .replace_op(0, 0)
            .sources(&[0]),
        &mut |session, candidate| {
            assert_eq!(session.seq(), 1);
            assert_eq!(candidate.seq(), 1);
            Err("no".into())
        },
    );
    assert!(matches!(result, Err(Error::Vetoed(_))));
    assert_eq!(err(result), "no");
    assert_eq!(s.surface().nodes(), before);
    assert_eq!(s.replace_generation(), 0);
    assert_eq!(s.seq(), 1);
    let e = s
        .append_with(Draft::new("feedback/record", Value::Null), &mut |_, _| {
            Ok(())
        })
        .unwrap();
    assert_eq!(e.seq(), 1);
}

#[test]
fn todo_write_is_copied() {
    // session-core §8.3 #73
    let mut s = session();
    let mut todos = v(r#"{"todos":[{"content":"a","status":"pending"}]}"#);
    let e = push(&mut s, Draft::new("todo/write", todos.clone()));
    todos = v(r#"{"todos":[]}"#);
    assert_eq!(todos.to_json(), r#"{"todos":[]}"#);
    assert_eq!(
        e.data().to_json(),
        r#"{"todos":[{"content":"a","status":"pending"}]}"#
    );
}

fn last_todos(s: &Session) -> Option<Value> {
    s.events()
        .iter()
        .rev()
        .find(|e| e.event_type() == "todo/write")
        .map(|e| e.data().get("todos").unwrap().clone())
}

#[test]
fn latest_todo_write_wins() {
    // session-core §8.3 #74
    let mut s = session();
    push(
        &mut s,
        log_only(
            "todo/write",
            r#"{"todos":[{"content":"a","status":"pending"}]}"#,
        ),
    );
    push(
        &mut s,
        log_only(
            "todo/write",
            r#"{"todos":[{"content":"a","status":"completed"}]}"#,
        ),
    );
    assert_eq!(
        last_todos(&s).unwrap().to_json(),
        r#"[{"content":"a","status":"completed"}]"#
    );
}

#[test]
fn todo_write_is_log_only() {
    // session-core §8.3 #75
    let mut s = session();
    push(&mut s, log_only("todo/write", r#"{"todos":[]}"#));
    assert!(s.derive_messages().is_empty());
    assert!(s.surface().is_empty());
    assert!(s.transcript().is_empty());
}

#[test]
fn todo_write_replays_from_a_seed() {
    // session-core §8.3 #76
    let s = seeded(&[
        r#"{"type":"todo/write","seq":0,"time":0,"data":{"todos":[{"content":"a","status":"in_progress"}]}}"#,
    ])
    .unwrap();
    assert_eq!(s.seq(), 2);
    assert_eq!(
        s.events()
            .iter()
            .filter(|e| e.event_type() == "session/end-seed")
            .count(),
        1
    );
    assert_eq!(
        last_todos(&s).unwrap().to_json(),
        r#"[{"content":"a","status":"in_progress"}]"#
    );
}

#[test]
fn request_folds_follow_appends() {
    // session-core §8.7 #156–#159 as seen through the session
    let mut s = session();
    assert!(s.request_context().is_none());
    assert!(s.request_header().is_none());
    push(
        &mut s,
        log_only(
            "request/header",
            r#"{"header":{"config":{"provider":"p","model":"m"},"tools":[],"system":""},"reason":"initial"}"#,
        ),
    );
    push(
        &mut s,
        log_only("request/context", r#"{"provider":"p","model":"m"}"#),
    );
    let header = s.request_header().unwrap();
    assert_eq!(
        header.to_json(),
        r#"{"config":{"provider":"p","model":"m"}}"#
    );
    push(&mut s, log_only("turn/start", r#"{"turn":1}"#));
    assert!(s.request_header().unwrap().ptr_eq(&header));
    push(
        &mut s,
        log_only(
            "request/context",
            r#"{"provider":"q","model":"n","contextWindow":1000}"#,
        ),
    );
    assert_eq!(
        s.request_context().unwrap().to_json(),
        r#"{"provider":"q","model":"n","contextWindow":1000}"#
    );
    let replay = Session::create("r", Some(values(&s)), None, clock()).unwrap();
    assert_eq!(replay.request_context(), s.request_context());
    assert_eq!(replay.request_header(), s.request_header());
}

#[test]
fn live_request_header_shape_is_checked_like_a_seed() {
    // Port decision 5, extended: what a reload would refuse cannot be appended.
    let mut s = session();
    for (data, tail) in [
        (
            r#"{"header":{"config":{"model":"m"}},"reason":"initial"}"#,
            "lacks provider/model",
        ),
        (
            r#"{"header":{"config":{"provider":"p","model":"m","reasoningEffort":""}},"reason":"initial"}"#,
            "has an invalid reasoningEffort",
        ),
        (
            r#"{"header":{"config":{"provider":"p","model":"m"},"adapterDefaults":{"maxTokens":true}},"reason":"initial"}"#,
            "has invalid adapterDefaults",
        ),
    ] {
        let err = s
            .append(Draft::new("request/header", Value::parse(data).unwrap()))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("session event request/header at seq 0 {tail}")
        );
        assert_eq!(s.seq(), 0);
    }
    let ok = r#"{"header":{"config":{"provider":"p","model":"m"}},"reason":"initial"}"#;
    s.append(Draft::new("request/header", Value::parse(ok).unwrap()))
        .unwrap();
    assert_eq!(s.seq(), 1);
}
