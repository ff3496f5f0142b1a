//! Derived messages: session-core §8.9 (items 172–177).

#![allow(clippy::unwrap_used)] // test helpers unwrap like the tests themselves

use crate::common::*;
use session_core::Event;
use session_core::json::Value;
use session_surface::{Draft, Messages, Session, derive_event_message, fold_surface};

/// Messages of a fresh replay: fold the surface from scratch and project every node.
fn replay(s: &Session) -> Vec<Value> {
    let events = s.events();
    let fold = fold_surface(&events).unwrap();
    fold.nodes
        .iter()
        .filter_map(|&seq| derive_event_message(events.get(seq as usize).unwrap()).cloned())
        .collect()
}

fn same(m: &Messages, expected: &[Value]) {
    assert_eq!(m.to_vec(), expected);
}

#[test]
fn cache_equals_fresh_replay_at_every_step() {
    // session-core §8.9 #172
    let mut s = session();
    let steps: Vec<Draft> = vec![
        log_only("turn/start", r#"{"turn":1}"#),
        Draft::new("user/message", user("u", "hello")).append_op(),
        log_only("step/start", r#"{"turn":1,"step":1}"#),
        Draft::new(
            "assistant/message",
            Value::Object(
                assistant("empty", "[]")
                    .as_object()
                    .unwrap()
                    .with("usage", v(r#"{"inputTokens":10,"outputTokens":0}"#)),
            ),
        )
        .append_op(),
        Draft::new("assistant/message", assistant_text("a", "hi")).append_op(),
        log_only("step/end", r#"{"turn":1,"step":1}"#),
        log_only("turn/end", r#"{"turn":1,"reason":{"kind":"completed"}}"#),
    ];
    same(&s.derive_messages(), &replay(&s));
    for draft in steps {
        push(&mut s, draft);
        same(&s.derive_messages(), &replay(&s));
    }
    assert_eq!(s.derive_messages().len(), 2);
    assert_eq!(s.surface().len(), 3);
}

#[test]
fn replace_rebuilds_and_old_results_keep_their_entries() {
    // session-core §8.9 #173
    let mut s = session();
    push(
        &mut s,
        Draft::new("user/message", user("u", "hello")).append_op(),
    );
    push(
        &mut s,
        Draft::new("assistant/message", assistant_text("a", "hi")).append_op(),
    );
    let before = s.derive_messages();
    push(
        &mut s,
        Draft::new("user/message", user("s", "summary"))
            .replace_op(0, 1)
            .sources(&[0, 1]),
    );
    let after = s.derive_messages();
    assert_eq!(after.len(), 1);
    same(&after, &replay(&s));
    assert_eq!(before.len(), 2);
}

#[test]
fn fresh_list_shared_messages() {
    // session-core §8.9 #174
    let mut s = session();
    push(
        &mut s,
        Draft::new("user/message", user("u", "hello")).append_op(),
    );
    let first = s.derive_messages();
    push(
        &mut s,
        Draft::new("user/message", user("w", "again")).append_op(),
    );
    let second = s.derive_messages();
    assert_eq!(first.len(), 1);
    assert_eq!(second.len(), 2);
    assert!(second.get(0).unwrap().ptr_eq(first.get(0).unwrap()));
}

#[test]
fn event_message_is_the_last_message() {
    // session-core §8.9 #175
    let mut s = session();
    push(
        &mut s,
        Draft::new("user/message", user("u", "hello")).append_op(),
    );
    let e: Event = push(
        &mut s,
        Draft::new("assistant/message", assistant_text("a", "hi")).append_op(),
    );
    let m = s.derive_messages();
    assert_eq!(derive_event_message(&e), m.last());
    assert_eq!(s.derive_event_message(&e), m.last());
}

#[test]
fn projected_content_is_the_stored_content() {
    // session-core §8.9 #176
    let mut s = session();
    let e = push(
        &mut s,
        Draft::new("user/message", user("u", "hello")).append_op(),
    );
    let m = s.derive_messages();
    let content = m.get(0).unwrap().get("content").unwrap();
    assert!(content.ptr_eq(e.data().get("content").unwrap()));
    assert!(content.ptr_eq(s.event(0).unwrap().data().get("content").unwrap()));
}

#[test]
fn no_message_for_boundaries_and_empty_assistant() {
    // session-core §8.9 #177
    let step = Event::parse(r#"{"type":"step/start","seq":0,"time":0,"data":{"turn":1,"step":1}}"#)
        .unwrap();
    assert!(derive_event_message(&step).is_none());
    let empty = Event::appended(
        "assistant/message",
        0,
        0,
        assistant("a", "[]"),
        None,
        Some(Value::from("append")),
    );
    assert!(derive_event_message(&empty).is_none());
    let tool = Event::appended(
        "tool/result",
        0,
        0,
        tool_result("r", "c", "x"),
        None,
        Some(Value::from("append")),
    );
    assert!(
        derive_event_message(&tool)
            .unwrap()
            .ptr_eq(tool.data().get("message").unwrap())
    );
}
