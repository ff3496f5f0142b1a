//! Tool-pairing balance over the surface (session-core §5.2).

#![allow(clippy::unwrap_used)] // test helpers unwrap like the tests themselves

use std::sync::Arc;

use session_core::json::Value;
use session_core::{Event, FixedClock};
use session_repair::{Error, ToolPairing, ToolPairingCache};
use session_surface::{Draft, Session};

fn v(text: &str) -> Value {
    Value::parse(text).unwrap()
}

fn session(id: &str) -> Session {
    Session::create(id, None, None, Arc::new(FixedClock::new(0))).unwrap()
}

fn user(s: &mut Session) -> u64 {
    let n = s.seq();
    s.append(
        Draft::new(
            "user/message",
            v(&format!(
                r#"{{"id":"u{n}","role":"user","source":{{"kind":"user"}},"content":[]}}"#
            )),
        )
        .append_op(),
    )
    .unwrap()
    .seq()
}

fn assistant(s: &mut Session, calls: &[&str]) -> u64 {
    let blocks: Vec<String> = calls
        .iter()
        .map(|c| format!(r#"{{"type":"tool-call","id":"{c}","name":"n","arguments":"{{}}"}}"#))
        .chain(std::iter::once(r#"{"type":"text","text":"t"}"#.to_owned()))
        .collect();
    let n = s.seq();
    s.append(
        Draft::new(
            "assistant/message",
            v(&format!(
                r#"{{"turn":1,"step":1,"message":{{"id":"a{n}","role":"assistant","source":{{"kind":"model","provider":"p","model":"m"}},"content":[{}]}}}}"#,
                blocks.join(",")
            )),
        )
        .append_op(),
    )
    .unwrap()
    .seq()
}

fn result_data(call: &str, n: u64, text: &str) -> Value {
    v(&format!(
        r#"{{"turn":1,"step":1,"message":{{"id":"r{n}","role":"user","source":{{"kind":"tool","callId":"{call}"}},"content":[{{"type":"tool-result","toolCallId":"{call}","content":[{{"type":"text","text":"{text}"}}]}}]}}}}"#
    ))
}

fn result(s: &mut Session, call: &str) -> u64 {
    let n = s.seq();
    s.append(Draft::new("tool/result", result_data(call, n, "x")).append_op())
        .unwrap()
        .seq()
}

#[test]
fn cuts_around_calls_and_results() {
    let mut s = session("s");
    let u = user(&mut s);
    let a = assistant(&mut s, &["c1", "c2"]);
    let r1 = result(&mut s, "c1");
    let r2 = result(&mut s, "c2");
    let p = ToolPairing::new(&s);
    assert_eq!(p.balanced_before(u), Ok(true));
    assert_eq!(p.balanced_after(u), Ok(true));
    assert_eq!(p.balanced_before(a), Ok(true));
    assert_eq!(p.balanced_after(a), Ok(false));
    assert_eq!(p.balanced_after(r1), Ok(false));
    assert_eq!(p.balanced_before(r2), Ok(false));
    assert_eq!(p.balanced_after(r2), Ok(true));
    assert_eq!(p.balanced(), Ok(true));
    assert_eq!(p.processed(), 4);
    assert_eq!(p.generation(), Some(0));
}

#[test]
fn empty_surface_is_balanced_and_unknown_seqs_fail() {
    let mut s = session("s");
    let p = ToolPairing::new(&s);
    assert_eq!(p.balanced(), Ok(true));
    let err = p.balanced_before(0).unwrap_err();
    assert_eq!(err, Error::SurfaceSeqNotFound { seq: 0 });
    assert_eq!(
        err.to_string(),
        "tool-pairing balance: surface seq 0 not found"
    );
    // A log-only event is not a surface node.
    s.append(Draft::new("turn/start", v(r#"{"turn":1}"#)))
        .unwrap();
    let p = ToolPairing::new(&s);
    assert_eq!(
        p.balanced_after(0).unwrap_err().to_string(),
        "tool-pairing balance: surface seq 0 not found"
    );
}

#[test]
fn unmatched_result_is_a_corrupt_surface() {
    let mut s = session("s");
    user(&mut s);
    let r = result(&mut s, "ghost");
    let p = ToolPairing::new(&s);
    let err = p.balanced_before(0).unwrap_err();
    assert_eq!(err, Error::UnmatchedToolResult { seq: r });
    assert_eq!(
        err.to_string(),
        "tool-pairing balance: tool/result at surface seq 1 has no matching tool-call (corrupt surface)"
    );
    assert!(p.balanced().is_err());
}

#[test]
fn missing_event_is_a_corrupt_surface() {
    let event = Event::appended("user/message", 0, 0, v("{}"), None, Some(v(r#""append""#)));
    let p = ToolPairing::from_nodes(0, &[0, 7], |seq| (seq == 0).then(|| event.clone()));
    let err = p.balanced_after(0).unwrap_err();
    assert_eq!(err, Error::MissingEvent { seq: 7 });
    assert_eq!(
        err.to_string(),
        "tool-pairing balance: surface seq 7 has no matching session event (corrupt surface)"
    );
}

#[test]
fn incremental_growth_and_rebuild_after_replace() {
    let mut s = session("s");
    let mut cache = ToolPairingCache::new();
    let a = assistant(&mut s, &["c1"]);
    assert_eq!(cache.balanced_after(&s, a), Ok(false));
    assert_eq!(cache.pairing(&s).processed(), 1);
    let r = result(&mut s, "c1");
    assert_eq!(cache.balanced_after(&s, r), Ok(true));
    assert_eq!(cache.pairing(&s).processed(), 2);
    // Rewrite the result (a replace): the balance is rebuilt under the new generation.
    let n = s.seq();
    let rewritten = s
        .append(
            Draft::new("tool/result", result_data("c1", r, "short"))
                .replace_op(r, r)
                .sources(&[r]),
        )
        .unwrap()
        .seq();
    assert_eq!(n, rewritten);
    assert_eq!(s.replace_generation(), 1);
    assert_eq!(cache.balanced_after(&s, rewritten), Ok(true));
    assert_eq!(
        cache.balanced_after(&s, r),
        Err(Error::SurfaceSeqNotFound { seq: r })
    );
    assert_eq!(cache.pairing(&s).generation(), Some(1));
    // Compacting the call and its result into one user message.
    let summary = s
        .append(
            Draft::new(
                "user/message",
                v(r#"{"id":"sum","role":"user","source":{"kind":"user"},"content":[]}"#),
            )
            .replace_op(a, rewritten)
            .sources(&[a, rewritten]),
        )
        .unwrap()
        .seq();
    assert_eq!(cache.balanced_before(&s, summary), Ok(true));
    assert_eq!(cache.balanced(&s), Ok(true));
    cache.forget("s");
}

#[test]
fn a_different_session_with_the_same_id_is_walked_again() {
    let mut cache = ToolPairingCache::new();
    let mut first = session("same");
    assistant(&mut first, &["c1"]);
    assert_eq!(cache.balanced(&first), Ok(false));
    let mut second = session("same");
    user(&mut second);
    user(&mut second);
    assert_eq!(cache.balanced(&second), Ok(true));
    assert_eq!(cache.balanced_before(&second, 1), Ok(true));
}
