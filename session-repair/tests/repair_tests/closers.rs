//! Crash-repair closers: session-core §5.1 and the repair checklist (§8.5).

#![allow(clippy::unwrap_used)] // test helpers unwrap like the tests themselves

use proptest::prelude::*;
use session_core::json::Value;
use session_core::{Event, EventParts, KeyOrder};
use session_repair::{
    TOOL_NOT_STARTED, TOOL_NOT_STARTED_TEXT, TOOL_OUTCOME_UNKNOWN, TOOL_OUTCOME_UNKNOWN_TEXT,
    Trace, interrupted_turn_closers,
};

fn v(text: &str) -> Value {
    Value::parse(text).unwrap()
}

/// A log builder with the reference's envelope shapes; `time` is 100 + seq.
#[derive(Default)]
struct Log(Vec<Event>);

impl Log {
    fn push(&mut self, ty: &str, data: &str, surface_op: Option<&str>, sources: Option<&str>) {
        let seq = self.0.len() as u64;
        self.0.push(Event::appended(
            ty,
            seq,
            100 + seq as i64,
            v(data),
            sources.map(v),
            surface_op.map(v),
        ));
    }
    fn turn_start(&mut self, turn: u32) {
        self.push("turn/start", &format!(r#"{{"turn":{turn}}}"#), None, None);
    }
    fn turn_end(&mut self, turn: u32) {
        self.push(
            "turn/end",
            &format!(r#"{{"turn":{turn},"reason":{{"kind":"completed"}}}}"#),
            None,
            None,
        );
    }
    fn step_start(&mut self, turn: u32, step: u32) {
        self.push(
            "step/start",
            &format!(r#"{{"turn":{turn},"step":{step}}}"#),
            None,
            None,
        );
    }
    fn step_end(&mut self, turn: u32, step: u32) {
        self.push(
            "step/end",
            &format!(r#"{{"turn":{turn},"step":{step}}}"#),
            None,
            None,
        );
    }
    fn user(&mut self, id: &str) {
        self.push(
            "user/message",
            &format!(
                r#"{{"id":"{id}","role":"user","source":{{"kind":"user"}},"content":[{{"type":"text","text":"hi"}}]}}"#
            ),
            Some(r#""append""#),
            None,
        );
    }
    fn assistant(&mut self, turn: u32, step: u32, calls: &[&str]) {
        let mut blocks = vec![r#"{"type":"text","text":"ok"}"#.to_owned()];
        for c in calls {
            blocks.push(format!(
                r#"{{"type":"tool-call","id":"{c}","name":"bash","arguments":"{{}}"}}"#
            ));
        }
        self.push(
            "assistant/message",
            &format!(
                r#"{{"turn":{turn},"step":{step},"message":{{"id":"a{}","role":"assistant","source":{{"kind":"model","provider":"p","model":"m"}},"content":[{}]}}}}"#,
                self.0.len(),
                blocks.join(",")
            ),
            Some(r#""append""#),
            None,
        );
    }
    fn tool_call(&mut self, turn: u32, step: u32, call: &str) {
        self.push(
            "tool/call",
            &format!(
                r#"{{"turn":{turn},"step":{step},"callId":"{call}","name":"bash","arguments":"{{}}"}}"#
            ),
            None,
            None,
        );
    }
    fn tool_result(&mut self, turn: u32, step: u32, call: &str) {
        self.push(
            "tool/result",
            &format!(
                r#"{{"turn":{turn},"step":{step},"message":{{"id":"r{}","role":"user","source":{{"kind":"tool","callId":"{call}"}},"content":[{{"type":"tool-result","toolCallId":"{call}","content":[{{"type":"text","text":"done"}}]}}]}}}}"#,
                self.0.len()
            ),
            Some(r#""append""#),
            None,
        );
    }
    fn closers(&self) -> Vec<Event> {
        interrupted_turn_closers(&self.0)
    }
}

fn types(events: &[Event]) -> Vec<(&str, u64)> {
    events.iter().map(|e| (e.event_type(), e.seq())).collect()
}

#[test]
fn balanced_log_gives_nothing() {
    // session-core §8.5 #124
    let mut log = Log::default();
    log.turn_start(1);
    log.user("u1");
    log.step_start(1, 1);
    log.assistant(1, 1, &["call-1"]);
    log.tool_call(1, 1, "call-1");
    log.tool_result(1, 1, "call-1");
    log.step_end(1, 1);
    log.turn_end(1);
    assert!(log.closers().is_empty());
}

#[test]
fn empty_log_gives_nothing() {
    // session-core §8.5 #125
    assert!(interrupted_turn_closers(&[]).is_empty());
}

#[test]
fn open_turn_without_step_gets_turn_end() {
    // session-core §8.5 #126
    let mut log = Log::default();
    log.turn_start(1);
    let closers = log.closers();
    assert_eq!(types(&closers), [("turn/end", 1)]);
    assert_eq!(
        closers[0].to_json(),
        r#"{"type":"turn/end","seq":1,"time":100,"data":{"turn":1,"reason":{"kind":"interrupted"}}}"#
    );
}

#[test]
fn open_step_gets_step_end_then_turn_end() {
    // session-core §8.5 #127
    let mut log = Log::default();
    log.turn_start(1);
    log.step_start(1, 1);
    let closers = log.closers();
    assert_eq!(types(&closers), [("step/end", 2), ("turn/end", 3)]);
    assert_eq!(
        closers[0].to_json(),
        r#"{"type":"step/end","seq":2,"time":101,"data":{"turn":1,"step":1}}"#
    );
    assert_eq!(closers[1].time(), 101);
}

#[test]
fn unrecorded_tool_call_gets_not_started_result() {
    // session-core §8.5 #128
    let mut log = Log::default();
    log.turn_start(2);
    log.step_start(2, 1);
    log.assistant(2, 1, &["call-1"]);
    let closers = log.closers();
    assert_eq!(
        types(&closers),
        [("tool/result", 3), ("step/end", 4), ("turn/end", 5)]
    );
    let result = &closers[0];
    let data = result.data();
    assert_eq!(data.get("turn").and_then(Value::as_u64), Some(2));
    assert_eq!(data.get("step").and_then(Value::as_u64), Some(1));
    assert_eq!(
        data.get("error").unwrap().to_json(),
        format!(r#"{{"name":"ToolNotStartedError","code":"{TOOL_NOT_STARTED}"}}"#)
    );
    assert!(result.source_event_seqs_value().is_none());
    assert_eq!(
        result.to_json(),
        format!(
            r#"{{"type":"tool/result","seq":3,"time":102,"data":{{"turn":2,"step":1,"message":{{"id":"interrupted-tool-result-call-1-3","role":"user","source":{{"kind":"tool","callId":"call-1"}},"content":[{{"type":"tool-result","toolCallId":"call-1","isError":true,"content":[{{"type":"text","text":"{TOOL_NOT_STARTED_TEXT}"}}]}}]}},"error":{{"name":"ToolNotStartedError","code":"TOOL_NOT_STARTED"}}}},"surfaceOp":"append"}}"#
        )
    );
    assert_eq!(
        TOOL_NOT_STARTED_TEXT,
        "The tool call was interrupted before the Harness recorded it as started. Retry it if it is still needed."
    );
}

#[test]
fn answered_call_gets_no_result() {
    // session-core §8.5 #129
    let mut log = Log::default();
    log.turn_start(1);
    log.step_start(1, 1);
    log.assistant(1, 1, &["call-1"]);
    log.tool_call(1, 1, "call-1");
    log.tool_result(1, 1, "call-1");
    assert_eq!(types(&log.closers()), [("step/end", 5), ("turn/end", 6)]);
}

#[test]
fn call_of_closed_step_gets_no_result() {
    // session-core §8.5 #130
    let mut log = Log::default();
    log.turn_start(1);
    log.step_start(1, 1);
    log.assistant(1, 1, &["call-1"]);
    log.step_end(1, 1);
    assert_eq!(types(&log.closers()), [("turn/end", 4)]);
}

#[test]
fn only_open_turn_calls_are_answered() {
    // session-core §8.5 #131
    let mut log = Log::default();
    log.turn_start(1);
    log.step_start(1, 1);
    log.assistant(1, 1, &["old-call"]);
    log.turn_end(1);
    log.turn_start(2);
    log.step_start(2, 1);
    log.assistant(2, 1, &["new-call"]);
    let closers = log.closers();
    assert_eq!(
        types(&closers),
        [("tool/result", 7), ("step/end", 8), ("turn/end", 9)]
    );
    assert_eq!(
        closers[0]
            .data()
            .get("message")
            .and_then(|m| m.get("source"))
            .and_then(|s| s.get("callId"))
            .and_then(Value::as_str),
        Some("new-call")
    );
    assert_eq!(
        closers[2].data().get("turn").and_then(Value::as_u64),
        Some(2)
    );
}

#[test]
fn only_unanswered_of_two_calls_is_answered() {
    // session-core §8.5 #132
    let mut log = Log::default();
    log.turn_start(1);
    log.step_start(1, 1);
    log.assistant(1, 1, &["call-a", "call-b"]);
    log.tool_call(1, 1, "call-a");
    log.tool_result(1, 1, "call-a");
    let closers = log.closers();
    assert_eq!(types(&closers)[0], ("tool/result", 5));
    assert_eq!(closers.len(), 3);
    let block = closers[0]
        .data()
        .get("message")
        .and_then(|m| m.get("content"))
        .and_then(Value::as_array)
        .and_then(|c| c.first().cloned())
        .unwrap();
    assert_eq!(
        block.get("toolCallId").and_then(Value::as_str),
        Some("call-b")
    );
    assert_eq!(block.get("isError").and_then(Value::as_bool), Some(true));
}

#[test]
fn recorded_call_gets_outcome_unknown_result() {
    // session-core §8.5 #133
    let mut log = Log::default();
    log.turn_start(1);
    log.step_start(1, 1);
    log.assistant(1, 1, &["call-1"]);
    log.tool_call(1, 1, "call-1");
    let closers = log.closers();
    let result = &closers[0];
    assert_eq!(result.surface_op_value().unwrap().to_json(), r#""append""#);
    assert_eq!(result.source_event_seqs(), Some(vec![3]));
    assert_eq!(
        result.data().get("error").unwrap().to_json(),
        format!(r#"{{"name":"ToolOutcomeUnknownError","code":"{TOOL_OUTCOME_UNKNOWN}"}}"#)
    );
    assert!(result.to_json().contains("Do not retry blindly."));
    assert!(result.to_json().contains(TOOL_OUTCOME_UNKNOWN_TEXT));
    // Closer key order: surfaceOp before sourceEventSeqs.
    assert!(result.to_json().ends_with(
        r#""code":"TOOL_OUTCOME_UNKNOWN"}},"surfaceOp":"append","sourceEventSeqs":[3]}"#
    ));
    assert_eq!(result.key_order(), KeyOrder::CLOSER);
}

#[test]
fn tool_call_without_block_gets_no_result() {
    // session-core §8.5 #134
    let mut log = Log::default();
    log.turn_start(1);
    log.step_start(1, 1);
    log.tool_call(1, 1, "ghost");
    assert_eq!(types(&log.closers()), [("step/end", 3), ("turn/end", 4)]);
}

#[test]
fn repeated_call_id_keeps_position_and_resets_call_seq() {
    let mut log = Log::default();
    log.turn_start(1);
    log.step_start(1, 1);
    log.assistant(1, 1, &["x", "y"]);
    log.tool_call(1, 1, "x");
    log.assistant(1, 1, &["x"]);
    let closers = log.closers();
    let ids: Vec<_> = closers[..2]
        .iter()
        .map(|e| {
            e.data()
                .get("message")
                .and_then(|m| m.get("id"))
                .and_then(Value::as_str)
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(
        ids,
        ["interrupted-tool-result-x-5", "interrupted-tool-result-y-6"]
    );
    // The re-registration reset the recorded tool/call.
    assert!(closers[0].source_event_seqs_value().is_none());
    // The last tool/call wins.
    log.tool_call(1, 1, "x");
    log.tool_call(1, 1, "x");
    assert_eq!(log.closers()[0].source_event_seqs(), Some(vec![6]));
}

#[test]
fn answered_then_reannounced_call_moves_to_the_end() {
    let mut log = Log::default();
    log.turn_start(1);
    log.step_start(1, 1);
    log.assistant(1, 1, &["x", "y"]);
    log.tool_result(1, 1, "x");
    log.assistant(1, 1, &["x"]);
    let closers = log.closers();
    let ids: Vec<_> = closers[..2]
        .iter()
        .map(|e| {
            e.data()
                .get("message")
                .unwrap()
                .get("source")
                .unwrap()
                .get("callId")
                .unwrap()
                .to_json()
        })
        .collect();
    assert_eq!(ids, [r#""y""#, r#""x""#]);
}

#[test]
fn replacement_results_answer_calls_too() {
    let mut log = Log::default();
    log.turn_start(1);
    log.step_start(1, 1);
    log.assistant(1, 1, &["x"]);
    log.push(
        "tool/result",
        r#"{"turn":1,"step":1,"message":{"id":"r","role":"user","source":{"kind":"tool","callId":"x"},"content":[]}}"#,
        Some(r#"{"op":"replace","start":2,"end":2}"#),
        Some("[2]"),
    );
    assert_eq!(types(&log.closers()), [("step/end", 4), ("turn/end", 5)]);
}

#[test]
fn closers_reuse_last_time_even_if_earlier_times_are_larger() {
    let mut log = Log(vec![
        Event::appended("turn/start", 0, 900, v(r#"{"turn":1}"#), None, None),
        Event::appended("step/start", 1, -5, v(r#"{"turn":1,"step":1}"#), None, None),
    ]);
    log.0.shrink_to_fit();
    assert!(log.closers().iter().all(|e| e.time() == -5));
}

#[test]
fn turn_and_step_are_copied_in_javascript_spelling() {
    let log = [
        Event::parse(r#"{"type":"turn/start","seq":0,"time":0,"data":{"turn":1.0}}"#).unwrap(),
        Event::parse(r#"{"type":"step/start","seq":1,"time":0,"data":{"turn":1.0,"step":1E0}}"#)
            .unwrap(),
    ];
    let closers = interrupted_turn_closers(&log);
    assert_eq!(closers[0].data().to_json(), r#"{"turn":1,"step":1}"#);
}

#[test]
fn repair_is_idempotent_and_satisfies_the_invariant() {
    let mut log = Log::default();
    log.turn_start(1);
    log.step_start(1, 1);
    log.assistant(1, 1, &["a", "b", "c"]);
    log.tool_call(1, 1, "a");
    log.tool_call(1, 1, "b");
    log.tool_result(1, 1, "b");
    let closers = log.closers();
    assert_eq!(closers.len(), 4);
    let mut repaired = log.0.clone();
    repaired.extend(closers);
    assert!(interrupted_turn_closers(&repaired).is_empty());
    Trace::replay(&repaired).unwrap();
}

#[test]
fn malformed_payloads_are_skipped() {
    let parts = |ty: &str, seq: u64, data: &str| {
        Event::from_parts(
            EventParts {
                ty: ty.into(),
                seq,
                time: 0,
                data: v(data),
                surface_op: None,
                source_event_seqs: None,
                ignorable: false,
            },
            KeyOrder::APPEND,
        )
    };
    // A turn/start without a turn leaves no turn open.
    assert!(interrupted_turn_closers(&[parts("turn/start", 0, "null")]).is_empty());
    assert!(interrupted_turn_closers(&[parts("turn/start", 0, r#"{"turn":null}"#)]).is_empty());
    // Unreadable message parts, non-string call ids and a non-numeric step are tolerated.
    let log = [
        parts("turn/start", 0, r#"{"turn":"t"}"#),
        parts("step/start", 1, r#"{"turn":"t"}"#),
        parts(
            "assistant/message",
            2,
            r#"{"message":{"content":[1,{"type":"tool-call","id":7},{"type":"tool-call","id":""},{"type":"tool-call","id":"ok"}]}}"#,
        ),
        parts("assistant/message", 3, r#"{"message":{"content":"x"}}"#),
        parts("tool/call", 4, r#"{"callId":["ok"]}"#),
        parts("tool/result", 5, r#"{"message":null}"#),
        parts("step/end", 6, "[]"),
        parts("step/start", 7, r#"{"step":2}"#),
        parts(
            "assistant/message",
            8,
            r#"{"turn":"t","message":{"content":[{"type":"tool-call","id":"z"}]}}"#,
        ),
    ];
    let closers = interrupted_turn_closers(&log);
    assert_eq!(
        types(&closers),
        [("tool/result", 9), ("step/end", 10), ("turn/end", 11)]
    );
    // The announcing message had no step, so the result has none either.
    assert_eq!(
        closers[0]
            .data()
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["turn", "message", "error"]
    );
    assert_eq!(closers[2].data().get("turn").unwrap().to_json(), r#""t""#);
}

/// Arbitrary JSON, biased towards the shapes the scan reads.
fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (0u32..4).prop_map(Value::from),
        prop_oneof![Just("tool-call"), Just("a"), Just("")].prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::array),
            prop::collection::vec(
                (
                    prop_oneof![
                        Just("turn"),
                        Just("step"),
                        Just("message"),
                        Just("content"),
                        Just("type"),
                        Just("id"),
                        Just("callId"),
                        Just("source"),
                    ],
                    inner
                ),
                0..5
            )
            .prop_map(Value::object),
        ]
    })
}

fn arb_type() -> impl Strategy<Value = &'static str> {
    prop_oneof![
        Just("turn/start"),
        Just("turn/end"),
        Just("step/start"),
        Just("step/end"),
        Just("assistant/message"),
        Just("tool/call"),
        Just("tool/result"),
        Just("user/message"),
        Just("plugin/x"),
    ]
}

/// A log that satisfies the turn/step invariant, built by a small state machine.
fn arb_valid_log() -> impl Strategy<Value = Vec<Event>> {
    prop::collection::vec(0u8..8, 0..60).prop_map(|moves| {
        let mut log = Log::default();
        let mut turn = 0u32;
        let mut step = 0u32;
        let mut in_turn = false;
        let mut in_step = false;
        let mut calls: Vec<String> = Vec::new();
        let mut recorded: Vec<String> = Vec::new();
        let mut next_call = 0;
        for m in moves {
            match (m, in_turn, in_step) {
                (0, false, _) => {
                    turn += 1;
                    step = 0;
                    in_turn = true;
                    log.turn_start(turn);
                }
                (0 | 1, true, false) => {
                    log.turn_end(turn);
                    in_turn = false;
                }
                (2, true, false) => {
                    step += 1;
                    in_step = true;
                    calls.clear();
                    recorded.clear();
                    log.step_start(turn, step);
                }
                (3, true, true) => {
                    log.step_end(turn, step);
                    in_step = false;
                }
                (4, true, true) => {
                    let ids: Vec<String> = (0..(next_call % 3))
                        .map(|k| format!("c{next_call}-{k}"))
                        .collect();
                    next_call += 1;
                    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
                    log.assistant(turn, step, &refs);
                    calls.extend(ids);
                }
                (5, true, true) if !calls.is_empty() => {
                    let c = calls.remove(0);
                    log.tool_call(turn, step, &c);
                    recorded.push(c);
                }
                (6, true, true) if !recorded.is_empty() => {
                    let c = recorded.remove(0);
                    log.tool_result(turn, step, &c);
                }
                _ => log.user("u"),
            }
        }
        log.0
    })
}

proptest! {
    #[test]
    fn never_panics_on_arbitrary_payloads(
        items in prop::collection::vec((arb_type(), arb_json()), 0..30)
    ) {
        let events: Vec<Event> = items
            .into_iter()
            .enumerate()
            .map(|(i, (ty, data))| Event::appended(ty, i as u64, 0, data, None, None))
            .collect();
        let closers = interrupted_turn_closers(&events);
        let mut repaired = events.clone();
        repaired.extend(closers);
        prop_assert!(interrupted_turn_closers(&repaired).is_empty());
    }

    #[test]
    fn closers_of_a_valid_log_keep_it_valid(log in arb_valid_log()) {
        prop_assert!(Trace::replay(&log).is_ok());
        let closers = interrupted_turn_closers(&log);
        for (i, c) in closers.iter().enumerate() {
            prop_assert_eq!(c.seq(), log.len() as u64 + i as u64);
        }
        let mut repaired = log.clone();
        repaired.extend(closers);
        prop_assert!(Trace::replay(&repaired).is_ok(), "{:?}", Trace::replay(&repaired));
        prop_assert!(interrupted_turn_closers(&repaired).is_empty());
    }
}
