//! The surface: session-core §8.4 (items 77–123).

#![allow(clippy::unwrap_used)] // test helpers unwrap like the tests themselves

use crate::common::*;
use session_core::Event;
use session_core::event::is_surface_eligible_type;
use session_core::json::Value;
use session_surface::{
    Draft, Replacement, Session, Surface, SurfaceError, fold_surface, fold_surface_window,
};

/// A user message event at `seq` with the given surface metadata (JSON fragments).
fn user_ev(seq: u64, op: &str, sources: Option<&str>) -> Event {
    let sources = sources.map_or(String::new(), |s| format!(r#","sourceEventSeqs":{s}"#));
    Event::parse(&format!(
        r#"{{"type":"user/message","seq":{seq},"time":0,"data":{}{sources},"surfaceOp":{op}}}"#,
        user(&format!("m{seq}"), &format!("text {seq}")).to_json()
    ))
    .unwrap()
}

fn tool_ev(seq: u64, op: &str, sources: Option<&str>, data: &Value) -> Event {
    let sources = sources.map_or(String::new(), |s| format!(r#","sourceEventSeqs":{s}"#));
    Event::parse(&format!(
        r#"{{"type":"tool/result","seq":{seq},"time":0,"data":{}{sources},"surfaceOp":{op}}}"#,
        data.to_json()
    ))
    .unwrap()
}

fn plain(seq: u64, ty: &str) -> Event {
    Event::parse(&format!(
        r#"{{"type":"{ty}","seq":{seq},"time":0,"data":{{"turn":1}}}}"#
    ))
    .unwrap()
}

fn replace(start: u64, end: u64) -> String {
    format!(r#"{{"op":"replace","start":{start},"end":{end}}}"#)
}

fn fold_err(events: &[Event]) -> String {
    fold_surface(events).unwrap_err().to_string()
}

#[test]
fn fold_accepts_absent_sources_and_full_coverage() {
    // session-core §8.4 #77
    let events = [
        user_ev(0, r#""append""#, None),
        user_ev(1, r#""append""#, None),
        user_ev(2, &replace(0, 1), Some("[0,1]")),
    ];
    let fold = fold_surface(&events).unwrap();
    assert_eq!(fold.nodes, vec![2]);
    assert_eq!(
        fold.replacements,
        vec![Replacement {
            seq: 2,
            start: 0,
            end: 1,
            shadowed_seqs: vec![0, 1]
        }]
    );
}

#[test]
fn sources_on_log_only_type() {
    // session-core §8.4 #78
    let e =
        Event::parse(r#"{"type":"turn/start","seq":0,"time":0,"data":{},"sourceEventSeqs":[]}"#)
            .unwrap();
    assert_eq!(
        fold_err(&[e]),
        r#"session event "turn/start" is not surface-eligible and cannot carry sourceEventSeqs"#
    );
}

#[test]
fn empty_sources_on_assistant_message() {
    // session-core §8.4 #79
    let mut s = session();
    let e = push(
        &mut s,
        Draft::new("assistant/message", assistant_text("a", "x"))
            .append_op()
            .sources(&[]),
    );
    assert_eq!(e.source_event_seqs_value().unwrap().to_json(), "[]");
    assert_eq!(fold_surface(&s.events()).unwrap().nodes, vec![0]);
}

#[test]
fn fold_rejects_bad_sources_and_gaps() {
    // session-core §8.4 #80
    let cases: [(&str, &str); 9] = [
        (
            "{}",
            "sourceEventSeqs on event at seq 1 must be an array when present",
        ),
        (
            "[]",
            "sourceEventSeqs must not be empty except on assistant/message",
        ),
        ("[0,0]", "sourceEventSeqs must not contain duplicates"),
        (
            "[0,null]",
            r#"session event "user/message" sourceEventSeqs must densely contain non-negative safe integers"#,
        ),
        (
            r#"["0"]"#,
            r#"session event "user/message" sourceEventSeqs must densely contain non-negative safe integers"#,
        ),
        (
            "[0.5]",
            r#"session event "user/message" sourceEventSeqs must densely contain non-negative safe integers"#,
        ),
        (
            "[-1]",
            r#"session event "user/message" sourceEventSeqs must densely contain non-negative safe integers"#,
        ),
        (
            "[1]",
            "sourceEventSeqs must reference earlier events: 1 >= current seq 1",
        ),
        (
            r#"[1,"x"]"#,
            r#"session event "user/message" sourceEventSeqs must densely contain non-negative safe integers"#,
        ),
    ];
    for (sources, message) in cases {
        let events = [
            user_ev(0, r#""append""#, None),
            user_ev(1, r#""append""#, Some(sources)),
        ];
        assert_eq!(fold_err(&events), message, "{sources}");
    }
    assert_eq!(
        fold_err(&[
            user_ev(0, r#""append""#, None),
            user_ev(2, r#""append""#, None)
        ]),
        "session event seq 2 is not contiguous; expected 1"
    );
    assert_eq!(
        fold_err(&[
            user_ev(0, r#""append""#, None),
            user_ev(1, r#""append""#, None),
            user_ev(2, &replace(0, 1), Some("[0]")),
        ]),
        "surface replace: sourceEventSeqs must include every shadowed surface node; missing 1"
    );
    assert_eq!(
        fold_err(&[
            user_ev(0, r#""append""#, None),
            user_ev(1, r#""append""#, None),
            user_ev(2, &replace(0, 1), None),
        ]),
        "surface replace: sourceEventSeqs must include every shadowed surface node; missing 0, 1"
    );
}

#[test]
fn tool_result_replace_must_rewrite_one_node() {
    // session-core §8.4 #81
    let data = tool_result("r", "c", "x");
    let events = [
        tool_ev(0, r#""append""#, None, &data),
        tool_ev(1, r#""append""#, None, &data),
        tool_ev(2, &replace(0, 1), Some("[0,1]"), &data),
    ];
    assert_eq!(
        fold_err(&events),
        "tool/result surface replacement must rewrite exactly one current node"
    );
}

#[test]
fn tool_result_replace_must_target_a_tool_result() {
    // session-core §8.4 #82
    let events = [
        user_ev(0, r#""append""#, None),
        tool_ev(1, &replace(0, 0), Some("[0]"), &tool_result("r", "c", "x")),
    ];
    assert_eq!(
        fold_err(&events),
        "tool/result surface replacement must target a current tool/result"
    );
}

#[test]
fn tool_result_replace_may_change_only_content() {
    // session-core §8.4 #83
    let original = tool_result("r", "c", "x");
    for changed in [tool_result("r", "d", "x"), tool_result("other", "c", "x")] {
        let events = [
            tool_ev(0, r#""append""#, None, &original),
            tool_ev(1, &replace(0, 0), Some("[0]"), &changed),
        ];
        assert_eq!(
            fold_err(&events),
            "tool/result surface replacement may change only content"
        );
    }
    let rewritten = tool_result("r", "c", "shorter");
    let events = [
        tool_ev(0, r#""append""#, None, &original),
        tool_ev(1, &replace(0, 0), Some("[0]"), &rewritten),
    ];
    assert_eq!(fold_surface(&events).unwrap().nodes, vec![1]);
}

fn tool_data(block_extra: &str, data_extra: &str) -> Value {
    v(&format!(
        r#"{{"turn":1,"step":1,"message":{{"id":"r","role":"user","content":[{{"type":"tool-result","toolCallId":"c","content":[]{block_extra}}}],"source":{{"kind":"tool","callId":"c"}}}}{data_extra}}}"#
    ))
}

#[test]
fn tool_result_replace_keeps_block_fields() {
    // session-core §8.4 #84
    let original = tool_data(r#","isError":false"#, "");
    for changed in [
        v(
            r#"{"turn":1,"step":1,"message":{"id":"r","role":"user","content":[{"type":"tool-result","toolCallId":"z","content":[],"isError":false}],"source":{"kind":"tool","callId":"c"}}}"#,
        ),
        tool_data(r#","isError":true"#, ""),
        tool_data("", ""),
    ] {
        let events = [
            tool_ev(0, r#""append""#, None, &original),
            tool_ev(1, &replace(0, 0), Some("[0]"), &changed),
        ];
        assert_eq!(
            fold_err(&events),
            "tool/result surface replacement may change only content",
            "{changed}"
        );
    }
}

#[test]
fn tool_result_meta_is_compared_structurally() {
    // session-core §8.4 #85
    let original = tool_data("", r#","meta":{"lines":[1,{"a":2}],"path":"/x"}"#);
    let accepted = tool_data("", r#","meta":{"path":"/x","lines":[1,{"a":2}]}"#);
    let events = [
        tool_ev(0, r#""append""#, None, &original),
        tool_ev(1, &replace(0, 0), Some("[0]"), &accepted),
    ];
    assert_eq!(fold_surface(&events).unwrap().nodes, vec![1]);
    for meta in [
        r#","meta":{"lines":[1,{"a":3}],"path":"/x"}"#,
        r#","meta":{"lines":"1","path":"/x"}"#,
        r#","meta":{"lines":[1,{"a":2}],"file":"/x"}"#,
        r#","meta":{"lines":[1,{"a":2}],"path":"/x","extra":1}"#,
        "",
    ] {
        let events = [
            tool_ev(0, r#""append""#, None, &original),
            tool_ev(1, &replace(0, 0), Some("[0]"), &tool_data("", meta)),
        ];
        assert_eq!(
            fold_err(&events),
            "tool/result surface replacement may change only content",
            "{meta}"
        );
    }
}

#[test]
fn tool_result_rewrite_requires_exactly_one_block() {
    // Decision 5: extra blocks make a rewrite invalid even when block 0 matches.
    let original = tool_data("", "");
    let two_blocks = v(
        r#"{"turn":1,"step":1,"message":{"id":"r","role":"user","content":[{"type":"tool-result","toolCallId":"c","content":[]},{"type":"text","text":"x"}],"source":{"kind":"tool","callId":"c"}}}"#,
    );
    let events = [
        tool_ev(0, r#""append""#, None, &original),
        tool_ev(1, &replace(0, 0), Some("[0]"), &two_blocks),
    ];
    assert_eq!(
        fold_err(&events),
        "tool/result surface replacement may change only content"
    );
}

const BASE: u64 = 400_000;

#[test]
fn windowed_manager_replace() {
    // session-core §8.4 #86
    let events = [
        user_ev(BASE, r#""append""#, None),
        user_ev(BASE + 1, r#""append""#, None),
        user_ev(BASE + 2, &replace(BASE, BASE), Some(&format!("[{BASE}]"))),
    ];
    let mut surface = Surface::windowed(BASE);
    for e in &events {
        let lookup = |seq: u64| events.get((seq - BASE) as usize).cloned();
        surface.push(e, &lookup).unwrap();
    }
    assert_eq!(surface.nodes(), [BASE + 2, BASE + 1]);
    assert_eq!(surface.replace_generation(), 1);
    assert_eq!(surface.position(BASE + 1), Some(1));
    assert_eq!(surface.position(BASE), None);
    assert_eq!(
        fold_surface_window(BASE, &events).unwrap().nodes,
        vec![BASE + 2, BASE + 1]
    );
}

#[test]
fn windowed_tool_result_rewrite() {
    // session-core §8.4 #87
    let events = [
        plain(BASE, "step/start"),
        tool_ev(
            BASE + 1,
            r#""append""#,
            None,
            &tool_result("r", "c", "long"),
        ),
        tool_ev(
            BASE + 2,
            &replace(BASE + 1, BASE + 1),
            Some(&format!("[{}]", BASE + 1)),
            &tool_result("r", "c", "short"),
        ),
    ];
    let fold = fold_surface_window(BASE, &events).unwrap();
    assert_eq!(fold.nodes, vec![BASE + 2]);
    let bad = [
        events[0].clone(),
        events[1].clone(),
        tool_ev(
            BASE + 2,
            &replace(BASE + 1, BASE + 1),
            Some(&format!("[{}]", BASE + 1)),
            &tool_result("r2", "c", "short"),
        ),
    ];
    assert_eq!(
        fold_surface_window(BASE, &bad).unwrap_err().to_string(),
        "tool/result surface replacement may change only content"
    );
}

#[test]
fn windowed_replace_before_window() {
    // session-core §8.4 #88
    let events = [
        user_ev(BASE, r#""append""#, None),
        user_ev(
            BASE + 1,
            &replace(BASE - 1, BASE),
            Some(&format!("[{},{BASE}]", BASE - 1)),
        ),
    ];
    assert_eq!(
        fold_surface_window(BASE, &events).unwrap_err().to_string(),
        format!(
            "surface replace: start seq {} not found in surface",
            BASE - 1
        )
    );
}

#[test]
fn fold_and_live_agree_on_nested_replaces() {
    // session-core §8.4 #89 and #90
    let mut s = session();
    push(
        &mut s,
        Draft::new("user/message", user("a", "0")).append_op(),
    );
    push(
        &mut s,
        Draft::new("user/message", user("b", "1")).append_op(),
    );
    push(
        &mut s,
        Draft::new("user/message", user("c", "2"))
            .replace_op(0, 0)
            .sources(&[0]),
    );
    push(
        &mut s,
        Draft::new("user/message", user("d", "3"))
            .replace_op(2, 1)
            .sources(&[2, 1]),
    );
    assert_eq!(s.surface().nodes(), [3]);
    let mut fold = fold_surface(&s.events()).unwrap();
    assert_eq!(fold.nodes, vec![3]);
    assert_eq!(
        fold.replacements,
        vec![
            Replacement {
                seq: 2,
                start: 0,
                end: 0,
                shadowed_seqs: vec![0]
            },
            Replacement {
                seq: 3,
                start: 2,
                end: 1,
                shadowed_seqs: vec![2, 1]
            },
        ]
    );
    fold.nodes.push(99);
    fold.replacements.clear();
    assert_eq!(s.surface().nodes(), [3]);
    assert_eq!(s.replace_generation(), 2);
}

#[test]
fn fold_and_seed_report_the_same_error() {
    // session-core §8.4 #91
    let events = [
        user_ev(0, r#""append""#, None),
        user_ev(1, &replace(42, 42), Some("[0]")),
    ];
    let inner = fold_err(&events);
    assert_eq!(inner, "surface replace: start seq 42 not found in surface");
    let seed: Vec<Value> = events.iter().map(Event::to_value).collect();
    assert_eq!(
        err(Session::create("s", Some(seed), None, clock())),
        format!("invalid seed event at index 1: {inner}")
    );
}

#[test]
fn failed_replace_changes_nothing() {
    // session-core §8.4 #92
    let mut s = session();
    push(
        &mut s,
        Draft::new("user/message", user("a", "0")).append_op(),
    );
    let before = s.surface().nodes();
    assert_eq!(
        err(s.append(
            Draft::new("user/message", user("b", "1"))
                .replace_op(0, 0)
                .sources_value(v("[]"))
        )),
        "sourceEventSeqs must not be empty except on assistant/message"
    );
    assert_eq!(
        err(s.append(Draft::new("user/message", user("b", "1")).replace_op(0, 0))),
        "surface replace: sourceEventSeqs must include every shadowed surface node; missing 0"
    );
    assert_eq!(s.surface().nodes(), before);
    assert_eq!(s.replace_generation(), 0);
    assert_eq!(s.derive_messages().len(), 1);
    push(
        &mut s,
        Draft::new("user/message", user("b", "1")).append_op(),
    );
    assert_eq!(s.surface().nodes(), [0, 1]);
    assert_eq!(before, [0]);
}

#[test]
fn fold_rejects_missing_marker() {
    // session-core §8.4 #93
    let e = Event::parse(&format!(
        r#"{{"type":"user/message","seq":0,"time":0,"data":{}}}"#,
        user("a", "x").to_json()
    ))
    .unwrap();
    assert_eq!(
        fold_err(&[e]),
        r#"session event "user/message" is surface-eligible and requires a surfaceOp marker"#
    );
}

#[test]
fn fold_rejects_marker_on_log_only_type() {
    // session-core §8.4 #94
    let e =
        Event::parse(r#"{"type":"turn/start","seq":0,"time":0,"data":{},"surfaceOp":"append"}"#)
            .unwrap();
    assert_eq!(
        fold_err(&[e]),
        r#"session event "turn/start" is not surface-eligible and cannot carry surfaceOp"#
    );
}

fn basic_turn() -> Session {
    let mut s = session();
    push(&mut s, log_only("turn/start", r#"{"turn":1}"#));
    push(
        &mut s,
        Draft::new("user/message", user("u", "hello")).append_op(),
    );
    push(
        &mut s,
        Draft::new("assistant/message", assistant_text("a", "hi")).append_op(),
    );
    push(
        &mut s,
        log_only("turn/end", r#"{"turn":1,"reason":{"kind":"completed"}}"#),
    );
    s
}

#[test]
fn append_markers_make_nodes() {
    // session-core §8.4 #95
    let s = basic_turn();
    assert_eq!(s.surface().nodes(), [1, 2]);
    assert_eq!(fold_surface(&s.events()).unwrap().nodes, vec![1, 2]);
}

#[test]
fn turn_and_step_events_only() {
    // session-core §8.4 #96
    let mut s = session();
    push(&mut s, log_only("turn/start", r#"{"turn":1}"#));
    push(&mut s, log_only("step/start", r#"{"turn":1,"step":1}"#));
    push(&mut s, log_only("step/end", r#"{"turn":1,"step":1}"#));
    push(
        &mut s,
        log_only("turn/end", r#"{"turn":1,"reason":{"kind":"completed"}}"#),
    );
    assert!(s.surface().nodes().is_empty());
    assert!(s.derive_messages().is_empty());
}

#[test]
fn appends_are_picked_up_incrementally() {
    // session-core §8.4 #97
    let mut s = session();
    push(&mut s, log_only("turn/start", r#"{"turn":1}"#));
    push(
        &mut s,
        Draft::new("user/message", user("u", "hello")).append_op(),
    );
    push(
        &mut s,
        Draft::new(
            "assistant/message",
            assistant(
                "a",
                r#"[{"type":"tool-call","id":"c","name":"bash","arguments":"{}"}]"#,
            ),
        )
        .append_op(),
    );
    assert_eq!(s.surface().len(), 2);
    push(
        &mut s,
        log_only(
            "tool/call",
            r#"{"turn":1,"step":1,"callId":"c","name":"bash","arguments":"{}"}"#,
        ),
    );
    push(
        &mut s,
        Draft::new("tool/result", tool_result("r", "c", "ok")).append_op(),
    );
    assert_eq!(s.surface().len(), 3);
    assert_eq!(s.surface().nodes().get(2), Some(4));
}

fn tool_turn() -> Session {
    let mut s = session();
    push(&mut s, log_only("turn/start", r#"{"turn":1}"#));
    push(
        &mut s,
        Draft::new("user/message", user("u", "hello")).append_op(),
    );
    push(
        &mut s,
        Draft::new(
            "assistant/message",
            assistant(
                "a",
                r#"[{"type":"tool-call","id":"c","name":"bash","arguments":"{}"}]"#,
            ),
        )
        .append_op(),
    );
    push(
        &mut s,
        log_only(
            "tool/call",
            r#"{"turn":1,"step":1,"callId":"c","name":"bash","arguments":"{}"}"#,
        ),
    );
    push(
        &mut s,
        Draft::new("tool/result", tool_result("r", "c", "ok")).append_op(),
    );
    s
}

#[test]
fn seeded_replay_keeps_nodes() {
    // session-core §8.4 #98
    let s = tool_turn();
    let replay = Session::create("r", Some(values(&s)), None, clock()).unwrap();
    assert_eq!(replay.surface().nodes(), [1, 2, 4]);
    assert_eq!(replay.derive_messages(), s.derive_messages());
}

#[test]
fn replacing_a_pair() {
    // session-core §8.4 #99
    let mut s = basic_turn();
    push(
        &mut s,
        Draft::new("user/message", user("sum", "summary"))
            .replace_op(1, 2)
            .sources(&[1, 2]),
    );
    assert_eq!(s.surface().nodes(), [4]);
}

fn three_users() -> Session {
    let mut s = session();
    for i in 0..3 {
        push(
            &mut s,
            Draft::new("user/message", user(&format!("m{i}"), &format!("{i}"))).append_op(),
        );
    }
    s
}

#[test]
fn replacing_a_prefix() {
    // session-core §8.4 #100
    let mut s = three_users();
    push(
        &mut s,
        Draft::new("user/message", user("r", "r"))
            .replace_op(0, 1)
            .sources(&[0, 1]),
    );
    assert_eq!(s.surface().nodes(), [3, 2]);
}

#[test]
fn single_node_replace() {
    // session-core §8.4 #101
    let mut s = session();
    push(
        &mut s,
        Draft::new("user/message", user("a", "0")).append_op(),
    );
    push(
        &mut s,
        Draft::new("user/message", user("b", "1")).append_op(),
    );
    push(
        &mut s,
        Draft::new("user/message", user("c", "2"))
            .replace_op(1, 1)
            .sources(&[1]),
    );
    assert_eq!(s.surface().nodes(), [0, 2]);
}

#[test]
fn replace_start_not_on_surface() {
    // session-core §8.4 #102
    let mut s = three_users();
    assert_eq!(
        err(s.append(
            Draft::new("user/message", user("r", "r"))
                .replace_op(5, 1)
                .sources(&[1])
        )),
        "surface replace: start seq 5 not found in surface"
    );
}

#[test]
fn replace_end_not_on_surface() {
    // session-core §8.4 #103
    let mut s = three_users();
    assert_eq!(
        err(s.append(
            Draft::new("user/message", user("r", "r"))
                .replace_op(0, 99)
                .sources(&[0])
        )),
        "surface replace: end seq 99 not found in surface"
    );
}

#[test]
fn reversed_range() {
    // session-core §8.4 #104
    let mut s = three_users();
    assert_eq!(
        err(s.append(
            Draft::new("user/message", user("r", "r"))
                .replace_op(1, 0)
                .sources(&[0, 1])
        )),
        "surface replace: start seq 1 (index 1) is after end seq 0 (index 0)"
    );
}

#[test]
fn sources_are_owned() {
    // session-core §8.4 #105
    let mut s = three_users();
    let mut sources = v("[0]");
    let e = push(
        &mut s,
        Draft::new("user/message", user("r", "r"))
            .replace_op(0, 0)
            .sources_value(sources.clone()),
    );
    sources = v("[7]");
    assert_eq!(sources.to_json(), "[7]");
    assert_eq!(e.source_event_seqs_value().unwrap().to_json(), "[0]");
}

#[test]
fn replace_in_the_middle() {
    // session-core §8.4 #106
    let mut s = three_users();
    push(
        &mut s,
        Draft::new("user/message", user("r", "r"))
            .replace_op(1, 1)
            .sources(&[1]),
    );
    assert_eq!(s.surface().nodes(), [0, 3, 2]);
    assert_eq!(s.surface().position(2), Some(2));
    assert_eq!(s.surface().position(3), Some(1));
    assert_eq!(s.surface().position(1), None);
    let texts: Vec<String> = s
        .derive_messages()
        .iter()
        .map(|m| m.get("id").unwrap().as_str().unwrap().to_owned())
        .collect();
    assert_eq!(texts, ["m0", "r", "m2"]);
}

#[test]
fn replace_op_is_owned() {
    // session-core §8.4 #107
    let mut s = three_users();
    let mut op = v(r#"{"op":"replace","start":0,"end":0}"#);
    let e = push(
        &mut s,
        Draft::new("user/message", user("r", "r"))
            .surface_op_value(op.clone())
            .sources(&[0]),
    );
    op = v("null");
    assert!(op.is_null());
    assert_eq!(
        e.surface_op_value().unwrap().to_json(),
        r#"{"op":"replace","start":0,"end":0}"#
    );
}

#[test]
fn messages_follow_the_surface() {
    // session-core §8.4 #108
    let s = basic_turn();
    let m = s.derive_messages();
    assert_eq!(m.len(), 2);
    assert_eq!(
        m.get(0).unwrap().get("content").unwrap().to_json(),
        r#"[{"type":"text","text":"hello"}]"#
    );
    assert_eq!(
        m.get(1).unwrap().get("role").unwrap().as_str(),
        Some("assistant")
    );
    assert_eq!(
        m.get(1).unwrap().get("content").unwrap().to_json(),
        r#"[{"type":"text","text":"hi"}]"#
    );
}

#[test]
fn chunks_and_boundaries_are_excluded() {
    // session-core §8.4 #109
    let mut s = session();
    push(&mut s, log_only("turn/start", r#"{"turn":1}"#));
    push(
        &mut s,
        Draft::new("user/message", user("u", "hello")).append_op(),
    );
    push(&mut s, log_only("step/start", r#"{"turn":1,"step":1}"#));
    push(
        &mut s,
        log_only(
            "assistant/chunk",
            r#"{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"hi"}}"#,
        ),
    );
    push(
        &mut s,
        Draft::new("assistant/message", assistant_text("a", "hi")).append_op(),
    );
    push(&mut s, log_only("step/end", r#"{"turn":1,"step":1}"#));
    push(
        &mut s,
        log_only("turn/end", r#"{"turn":1,"reason":{"kind":"completed"}}"#),
    );
    assert_eq!(s.derive_messages().len(), 2);
}

#[test]
fn replaced_messages_disappear() {
    // session-core §8.4 #110
    let mut s = basic_turn();
    let e = push(
        &mut s,
        Draft::new("user/message", user("sum", "summary"))
            .replace_op(1, 2)
            .sources(&[1, 2]),
    );
    let m = s.derive_messages();
    assert_eq!(m.len(), 1);
    assert!(m.get(0).unwrap().ptr_eq(e.data()));
}

#[test]
fn plugin_context_appears_verbatim() {
    // session-core §8.4 #111
    let mut s = session();
    let ctx = v(
        r#"{"id":"c","role":"user","content":[{"type":"text","text":"<context>x</context>"}],"source":{"kind":"plugin","plugin":"ctx"}}"#,
    );
    push(&mut s, Draft::new("user/message", ctx.clone()).append_op());
    push(
        &mut s,
        Draft::new("user/message", user("u", "hello")).append_op(),
    );
    let m = s.derive_messages();
    assert_eq!(m.get(0).unwrap(), &ctx);
    assert_eq!(m.get(1).unwrap(), &user("u", "hello"));
}

#[test]
fn returned_event_carries_metadata() {
    // session-core §8.4 #112
    let mut s = three_users();
    let e = push(
        &mut s,
        Draft::new("user/message", user("r", "r"))
            .replace_op(0, 1)
            .sources(&[0, 1, 2]),
    );
    for ev in [&e, s.event(3).unwrap()] {
        assert_eq!(ev.source_event_seqs(), Some(vec![0, 1, 2]));
        assert_eq!(
            ev.surface_op_value().unwrap().to_json(),
            r#"{"op":"replace","start":0,"end":1}"#
        );
    }
}

#[test]
fn empty_assistant_message_is_a_node_without_message() {
    // session-core §8.4 #113
    let mut s = session();
    push(
        &mut s,
        Draft::new("assistant/message", assistant("a", "[]")).append_op(),
    );
    assert_eq!(s.surface().nodes(), [0]);
    assert_eq!(s.derive_messages().len(), 0);
}

#[test]
fn log_only_event_has_no_surface_fields() {
    // session-core §8.4 #114
    let mut s = session();
    let e = push(&mut s, log_only("turn/start", r#"{"turn":1}"#));
    assert!(e.surface_op_value().is_none());
    assert!(e.source_event_seqs_value().is_none());
    assert_eq!(
        e.to_json(),
        r#"{"type":"turn/start","seq":0,"time":1000,"data":{"turn":1}}"#
    );
}

#[test]
fn append_string_is_stored() {
    // session-core §8.4 #115
    let mut s = session();
    let e = push(
        &mut s,
        Draft::new("user/message", user("u", "x")).append_op(),
    );
    assert_eq!(e.surface_op_value().unwrap().as_str(), Some("append"));
}

#[test]
fn surface_event_guards() {
    // session-core §8.4 #116–#122
    let unmarked = Event::parse(&format!(
        r#"{{"type":"user/message","seq":0,"time":0,"data":{}}}"#,
        user("a", "x").to_json()
    ))
    .unwrap();
    let turn = plain(0, "turn/start");
    let mut s = session();
    let appended = push(
        &mut s,
        Draft::new("user/message", user("a", "x")).append_op(),
    );
    let replacing = push(
        &mut s,
        Draft::new("user/message", user("b", "y"))
            .replace_op(0, 0)
            .sources(&[0]),
    );
    // #116, #118, #119, #120
    assert!(!unmarked.is_surface_event());
    assert!(!turn.is_surface_event());
    assert!(appended.is_surface_event());
    assert!(s.event(0).unwrap().is_surface_event());
    // #117
    for ty in ["user/message", "assistant/message", "tool/result"] {
        assert!(is_surface_eligible_type(ty));
    }
    assert!(!is_surface_eligible_type("turn/start"));
    assert!(!is_surface_eligible_type("assistant/chunk"));
    // #121
    assert!(appended.is_append_surface_event() && !appended.is_replacement_surface_event());
    assert!(replacing.is_replacement_surface_event() && !replacing.is_append_surface_event());
    // #122
    for e in [&unmarked, &turn] {
        assert!(!e.is_append_surface_event() && !e.is_replacement_surface_event());
    }
}

#[test]
fn replace_generation_counts_replaces() {
    // session-core §8.4 #123
    let mut s = three_users();
    assert_eq!(s.surface().replace_generation(), 0);
    push(
        &mut s,
        Draft::new("user/message", user("r", "r"))
            .replace_op(0, 0)
            .sources(&[0]),
    );
    assert_eq!(s.surface().replace_generation(), 1);
}

#[test]
fn plan_is_inert_until_applied() {
    // §3.3: validation only plans; a stale plan is not applied
    let events = [
        user_ev(0, r#""append""#, None),
        user_ev(1, r#""append""#, None),
    ];
    let lookup = |seq: u64| events.get(seq as usize).cloned();
    let mut surface = Surface::new();
    let plan = surface.plan(&events[0], &lookup).unwrap();
    assert!(surface.is_empty());
    assert_eq!(plan.seq(), 0);
    assert!(plan.shadowed().is_empty());
    let copy = plan.clone();
    surface.apply(plan);
    assert!(!surface.is_current(&copy));
    surface.apply(copy);
    assert_eq!(surface.nodes(), [0]);
    let other = Surface::new();
    let foreign = other.plan(&events[0], &lookup).unwrap();
    assert!(!surface.is_current(&foreign));
    let clone = surface.clone();
    let next = surface.plan(&events[1], &lookup).unwrap();
    assert!(surface.is_current(&next) && !clone.is_current(&next));
    assert_eq!(
        surface.plan(&events[0], &lookup).unwrap_err(),
        SurfaceError::NotContiguous {
            seq: 0,
            expected: 1
        }
    );
}

#[test]
fn transcript_keeps_originals_and_marks_replacements() {
    let mut s = three_users();
    push(&mut s, log_only("turn/start", r#"{"turn":1}"#));
    push(
        &mut s,
        Draft::new("user/message", user("r", "summary"))
            .replace_op(0, 1)
            .sources(&[0, 1]),
    );
    push(
        &mut s,
        Draft::new("assistant/message", assistant("e", "[]")).append_op(),
    );
    let t = s.transcript();
    let seqs: Vec<u64> = t
        .iter()
        .map(session_surface::TranscriptEntry::seq)
        .collect();
    assert_eq!(seqs, [0, 1, 2, 4, 5]);
    let marker = t.get(3).unwrap();
    assert!(marker.is_replacement());
    match marker {
        session_surface::TranscriptEntry::Replacement {
            start,
            end,
            shadowed_seqs,
            message,
            ..
        } => {
            assert_eq!((*start, *end), (0, 1));
            assert_eq!(&shadowed_seqs[..], &[0, 1]);
            assert_eq!(
                message.as_ref().unwrap().get("id").unwrap().as_str(),
                Some("r")
            );
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(t.get(4).unwrap().message().is_none());
    assert_eq!(
        session_surface::Transcript::from_events(&s.events()).unwrap(),
        t
    );
}
