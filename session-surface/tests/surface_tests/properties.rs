//! Property-based checks: session-core §8.10 (items 178–183), plus a model-based check of the
//! surface index (positions, messages) against a naive list.

#![allow(clippy::unwrap_used, clippy::many_single_char_names)] // test helpers unwrap like the tests themselves

use crate::common::*;
use proptest::prelude::*;
use session_core::json::Value;
use session_surface::{Draft, Session, Transcript, fold_surface};

#[derive(Debug, Clone)]
enum Op {
    User,
    Assistant { empty: bool },
    ToolPair,
    LogOnly(u8),
    Replace { a: usize, b: usize, assistant: bool },
    Rewrite(usize),
    BadReplace(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => Just(Op::User),
        2 => any::<bool>().prop_map(|empty| Op::Assistant { empty }),
        2 => Just(Op::ToolPair),
        3 => (0u8..4).prop_map(Op::LogOnly),
        2 => (any::<usize>(), any::<usize>(), any::<bool>())
            .prop_map(|(a, b, assistant)| Op::Replace { a, b, assistant }),
        1 => any::<usize>().prop_map(Op::Rewrite),
        1 => any::<usize>().prop_map(Op::BadReplace),
    ]
}

/// A naive surface: (seq, derived message) in surface order.
type Model = Vec<(u64, Option<Value>)>;

fn message_of(s: &Session, seq: u64) -> Option<Value> {
    s.derive_event_message(s.event(seq).unwrap()).cloned()
}

/// Applies `ops`, checking each step against the naive model; returns the session.
fn run(ops: &[Op], skip_log_only: bool) -> (Session, Model) {
    let mut s = session();
    let mut model: Model = Vec::new();
    let mut counter = 0u32;
    let mut next_id = |prefix: &str| {
        counter += 1;
        format!("{prefix}{counter}")
    };
    for op in ops {
        match op {
            Op::User => {
                let e = push(
                    &mut s,
                    Draft::new("user/message", user(&next_id("u"), "hello")).append_op(),
                );
                model.push((e.seq(), message_of(&s, e.seq())));
            }
            Op::Assistant { empty } => {
                let data = if *empty {
                    assistant(&next_id("a"), "[]")
                } else {
                    assistant_text(&next_id("a"), "answer")
                };
                let e = push(&mut s, Draft::new("assistant/message", data).append_op());
                model.push((e.seq(), message_of(&s, e.seq())));
            }
            Op::ToolPair => {
                let call = next_id("call");
                let a = push(
                    &mut s,
                    Draft::new(
                        "assistant/message",
                        assistant(
                            &next_id("a"),
                            &format!(
                                r#"[{{"type":"tool-call","id":"{call}","name":"bash","arguments":"{{}}"}}]"#
                            ),
                        ),
                    )
                    .append_op(),
                );
                model.push((a.seq(), message_of(&s, a.seq())));
                let c = push(
                    &mut s,
                    log_only(
                        "tool/call",
                        &format!(
                            r#"{{"turn":1,"step":1,"callId":"{call}","name":"bash","arguments":"{{}}"}}"#
                        ),
                    ),
                );
                let r = push(
                    &mut s,
                    Draft::new("tool/result", tool_result(&next_id("r"), &call, "output"))
                        .append_op()
                        .sources(&[c.seq()]),
                );
                model.push((r.seq(), message_of(&s, r.seq())));
            }
            Op::LogOnly(kind) => {
                if skip_log_only {
                    continue;
                }
                let (ty, data) = match kind {
                    0 => ("turn/start", r#"{"turn":1}"#),
                    1 => ("step/end", r#"{"turn":1,"step":1}"#),
                    2 => ("todo/write", r#"{"todos":[]}"#),
                    _ => ("request/context", r#"{"provider":"p","model":"m"}"#),
                };
                push(&mut s, log_only(ty, data));
            }
            Op::Replace { a, b, assistant } => {
                if model.is_empty() {
                    continue;
                }
                let (mut i, mut j) = (a % model.len(), b % model.len());
                if i > j {
                    std::mem::swap(&mut i, &mut j);
                }
                let shadowed: Vec<u64> = model[i..=j].iter().map(|(seq, _)| *seq).collect();
                let (ty, data) = if *assistant {
                    (
                        "assistant/message",
                        assistant_text(&next_id("sum"), "summary"),
                    )
                } else {
                    ("user/message", user(&next_id("sum"), "summary"))
                };
                let e = push(
                    &mut s,
                    Draft::new(ty, data)
                        .replace_op(model[i].0, model[j].0)
                        .sources(&shadowed),
                );
                let m = message_of(&s, e.seq());
                model.splice(i..=j, [(e.seq(), m)]);
            }
            Op::Rewrite(k) => {
                let tools: Vec<usize> = (0..model.len())
                    .filter(|&i| s.event(model[i].0).unwrap().event_type() == "tool/result")
                    .collect();
                if tools.is_empty() {
                    continue;
                }
                let i = tools[k % tools.len()];
                let target = s.event(model[i].0).unwrap().clone();
                let message = target.data().get("message").unwrap();
                let id = message.get("id").unwrap().as_str().unwrap().to_owned();
                let call = message
                    .get("source")
                    .unwrap()
                    .get("callId")
                    .unwrap()
                    .as_str()
                    .unwrap()
                    .to_owned();
                let e = push(
                    &mut s,
                    Draft::new("tool/result", tool_result(&id, &call, "[pruned]"))
                        .replace_op(target.seq(), target.seq())
                        .sources(&[target.seq()]),
                );
                model[i] = (e.seq(), message_of(&s, e.seq()));
            }
            Op::BadReplace(k) => {
                if model.len() < 2 {
                    continue;
                }
                let i = 1 + k % (model.len() - 1);
                let before = (s.surface().nodes(), s.derive_messages(), s.seq());
                let result = s.append(
                    Draft::new("user/message", user("bad", "x"))
                        .replace_op(model[i].0, model[i - 1].0)
                        .sources(&[model[i].0, model[i - 1].0]),
                );
                assert!(result.is_err());
                assert_eq!((s.surface().nodes(), s.derive_messages(), s.seq()), before);
            }
        }
        check_model(&s, &model);
    }
    (s, model)
}

fn check_model(s: &Session, model: &Model) {
    let seqs: Vec<u64> = model.iter().map(|(seq, _)| *seq).collect();
    assert_eq!(s.surface().nodes().to_vec(), seqs);
    let messages: Vec<Value> = model.iter().filter_map(|(_, m)| m.clone()).collect();
    assert_eq!(s.derive_messages().to_vec(), messages);
    for seq in 0..s.seq() {
        assert_eq!(
            s.surface().position(seq),
            model.iter().position(|(x, _)| *x == seq),
            "position of {seq}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn surface_index_matches_naive_model(ops in proptest::collection::vec(op(), 0..80)) {
        let (s, _) = run(&ops, false);
        let events = s.events();
        prop_assert_eq!(fold_surface(&events).unwrap().nodes, s.surface().nodes().to_vec());
        prop_assert_eq!(Transcript::from_events(&events).unwrap(), s.transcript());
    }

    #[test]
    fn derive_messages_is_deterministic(ops in proptest::collection::vec(op(), 0..60)) {
        // session-core §8.10 #178
        let (s, _) = run(&ops, false);
        prop_assert_eq!(s.derive_messages(), s.derive_messages());
        let (again, _) = run(&ops, false);
        prop_assert_eq!(again.derive_messages(), s.derive_messages());
    }

    #[test]
    fn seq_is_index(ops in proptest::collection::vec(op(), 0..60)) {
        // session-core §8.10 #179
        let (s, _) = run(&ops, false);
        for (i, e) in s.events().iter().enumerate() {
            prop_assert_eq!(e.seq(), i as u64);
        }
        prop_assert_eq!(s.seq(), s.events().len() as u64);
    }

    #[test]
    fn replay_is_identical(ops in proptest::collection::vec(op(), 0..60)) {
        // session-core §8.10 #180
        let (s, _) = run(&ops, false);
        let replay = Session::create("r", Some(values(&s)), None, clock()).unwrap();
        prop_assert_eq!(replay.derive_messages(), s.derive_messages());
        prop_assert_eq!(replay.events().prefix(s.events().len()), s.events());
        prop_assert_eq!(replay.seq(), s.seq() + 1);
        prop_assert_eq!(replay.surface().nodes(), s.surface().nodes());
        prop_assert_eq!(replay.replace_generation(), s.replace_generation());
        prop_assert_eq!(replay.request_context(), s.request_context());
    }

    #[test]
    fn replaying_a_terminated_log_adds_nothing(ops in proptest::collection::vec(op(), 0..40)) {
        // session-core §8.10 #181
        let (s, _) = run(&ops, false);
        let once = Session::create("r", Some(values(&s)), None, clock()).unwrap();
        let twice = Session::create("r", Some(values(&once)), None, clock()).unwrap();
        prop_assert_eq!(twice.events(), once.events());
        prop_assert_eq!(twice.first_live_seq(), once.seq());
    }

    #[test]
    fn log_only_events_do_not_change_history(ops in proptest::collection::vec(op(), 0..60)) {
        // session-core §8.10 #182
        let (with, _) = run(&ops, false);
        let (without, _) = run(&ops, true);
        prop_assert_eq!(with.derive_messages(), without.derive_messages());
    }

    #[test]
    fn messages_have_known_roles(ops in proptest::collection::vec(op(), 0..60)) {
        // session-core §8.10 #183
        let (s, _) = run(&ops, false);
        let before = s.events();
        for m in &s.derive_messages() {
            let role = m.get("role").and_then(Value::as_str);
            prop_assert!(matches!(role, Some("user" | "assistant" | "system")));
        }
        prop_assert_eq!(s.events(), before);
    }
}
