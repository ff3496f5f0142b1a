//! `Session::from_restore_events` and `RestoreBuilder` (the restore fed one event at a time)
//! against `Session::from_restore`: the same validation with the same messages, and the same
//! session, for seeds given as parsed events.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap like the tests

use crate::common::{assistant_text, clock, tool_result, user, v};
use session_core::json::Value;
use session_core::{Event, Events};
use session_surface::{Draft, RestoreBuilder, Session};

fn line(ty: &str, seq: u64, data: &Value, extra: &str) -> String {
    format!(
        r#"{{"type":"{ty}","seq":{seq},"time":{},"data":{}{extra}}}"#,
        100 + seq,
        data.to_json()
    )
}

/// A live session with user and tool messages, chunks, a tool-result rewrite and a compaction.
fn live_lines() -> Vec<String> {
    let mut s = Session::create("s", None, None, clock()).unwrap();
    let log = |ty: &str, data: &str| Draft::new(ty, v(data));
    s.append(log("turn/start", r#"{"turn":1}"#)).unwrap();
    s.append(Draft::new("user/message", user("u1", "hi")).append_op())
        .unwrap();
    s.append(log("step/start", r#"{"turn":1,"step":1}"#))
        .unwrap();
    for text in ["a", "b", "c"] {
        s.append(log(
            "assistant/chunk",
            &format!(
                r#"{{"turn":1,"step":1,"chunk":{{"type":"text-delta","index":0,"text":"{text}"}}}}"#
            ),
        ))
        .unwrap();
    }
    s.append(Draft::new("assistant/message", assistant_text("a1", "abc")).append_op())
        .unwrap();
    s.append(Draft::new("tool/result", tool_result("r1", "call-1", "done")).append_op())
        .unwrap();
    let r1 = s.seq() - 1;
    s.append(
        Draft::new("tool/result", tool_result("r1", "call-1", "shorter"))
            .replace_op(r1, r1)
            .sources(&[r1]),
    )
    .unwrap();
    s.append(log(
        "request/header",
        r#"{"header":{"config":{"provider":"p","model":"m"}}}"#,
    ))
    .unwrap();
    s.append(log("request/context", r#"{"window":10}"#))
        .unwrap();
    let rewritten = s.seq() - 3;
    s.append(
        Draft::new("user/message", user("c1", "summary"))
            .replace_op(1, rewritten)
            .sources(&[1, 6, rewritten]),
    )
    .unwrap();
    s.append(log("step/end", r#"{"turn":1,"step":1}"#)).unwrap();
    s.append(log(
        "turn/end",
        r#"{"turn":1,"reason":{"kind":"completed"}}"#,
    ))
    .unwrap();
    s.events().iter().map(Event::to_json).collect()
}

fn check(lines: &[String], header: &Value) -> Option<String> {
    let values: Vec<Value> = lines.iter().map(|l| v(l)).collect();
    let events: Vec<Event> = match values.iter().map(Event::from_value).collect() {
        Ok(events) => events,
        // Not representable as events: only the value constructor can see it.
        Err(_) => return None,
    };
    let by_values = Session::from_restore("s", values, header, clock());
    let by_events = Session::from_restore_events("s", events.clone(), header, clock());
    let shared =
        Session::from_restore_events("s", Events::from_vec(events.clone()), header, clock());
    let built = (|| {
        let mut builder = RestoreBuilder::new("s", header, clock())?;
        for event in &events {
            builder.push(event.clone())?;
        }
        assert_eq!(builder.len(), events.len());
        builder.finish()
    })();
    // `try_push` refuses what `push` refuses, and hands the refused event back.
    let tried = (|| {
        let mut builder = RestoreBuilder::new("s", header, clock())?;
        for event in &events {
            if let Err((back, e)) = builder.try_push(event.clone()) {
                assert!(back.ptr_eq(event), "the refused event comes back");
                return Err(e);
            }
        }
        builder.finish()
    })();
    match (&built, &tried) {
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
        (Ok(a), Ok(b)) => {
            let lines = |s: &Session| s.events().iter().map(Event::to_json).collect::<Vec<_>>();
            assert_eq!(lines(a), lines(b));
        }
        _ => panic!("push and try_push disagree"),
    }
    match (by_values, by_events, shared, built) {
        (Err(a), Err(b), Err(c), Err(d)) => {
            assert_eq!(a.to_string(), b.to_string());
            assert_eq!(a.to_string(), c.to_string());
            assert_eq!(a.to_string(), d.to_string());
            Some(a.to_string())
        }
        (Ok(a), Ok(b), Ok(c), Ok(d)) => {
            for b in [&b, &c, &d] {
                let lines = |s: &Session| s.events().iter().map(Event::to_json).collect::<Vec<_>>();
                assert_eq!(lines(b), lines(&a));
                assert_eq!(b.surface_nodes(), a.surface_nodes());
                assert_eq!(b.derive_messages(), a.derive_messages());
                assert_eq!(b.transcript(), a.transcript());
                assert_eq!(b.request_header(), a.request_header());
                assert_eq!(b.request_context(), a.request_context());
                assert_eq!(b.replace_generation(), a.replace_generation());
                assert_eq!(b.first_live_seq(), a.first_live_seq());
                assert_eq!(b.header(), a.header());
                for (x, y) in b.events().iter().zip(&events) {
                    assert!(x.ptr_eq(y));
                }
            }
            None
        }
        (a, b, c, d) => panic!(
            "constructors disagree: {:?} / {:?} / {:?} / {:?}",
            a.err().map(|e| e.to_string()),
            b.err().map(|e| e.to_string()),
            c.err().map(|e| e.to_string()),
            d.err().map(|e| e.to_string())
        ),
    }
}

#[test]
fn valid_seeds_restore_the_same_session() {
    let header = v(r#"{"version":0,"id":"s","createdAt":5}"#);
    let lines = live_lines();
    for n in 0..=lines.len() {
        assert_eq!(check(&lines[..n], &header), None, "prefix {n}");
    }
    // The session keeps working after the restore.
    let events: Vec<Event> = lines.iter().map(|l| Event::parse(l).unwrap()).collect();
    let mut s = Session::from_restore_events("s", events, &header, clock()).unwrap();
    s.append(Draft::new("user/message", user("u2", "again")).append_op())
        .unwrap();
    assert_eq!(s.derive_messages().len(), 2);
}

#[test]
fn invalid_seeds_fail_with_the_same_messages() {
    let good = v(r#"{"version":0,"id":"s","createdAt":5}"#);
    let lines = live_lines();
    // Header problems come first, even with a bad seed.
    for header in [
        "null",
        "[]",
        r#"{"version":1,"id":"s","createdAt":5}"#,
        r#"{"version":0,"id":"t","createdAt":5}"#,
        r#"{"version":0,"id":"s","createdAt":-1}"#,
    ] {
        let bad_seed = vec![line("x", 3, &v("{}"), "")];
        let msg = check(&bad_seed, &v(header)).expect("a header error");
        assert!(msg.contains("header"), "{msg}");
    }
    let replace = |i: usize, from: &str, to: &str| {
        let mut l = lines.clone();
        assert!(l[i].contains(from), "{}", l[i]);
        l[i] = l[i].replacen(from, to, 1);
        l
    };
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            replace(0, "turn/start", "request/header-delta"),
            "request/header-delta",
        ),
        (replace(1, r#""seq":1"#, r#""seq":2"#), "contiguous"),
        (
            replace(1, r#","surfaceOp":"append""#, ""),
            "requires a surfaceOp",
        ),
        (
            replace(1, r#""surfaceOp":"append""#, r#""surfaceOp":"prepend""#),
            "invalid surfaceOp",
        ),
        (
            replace(
                0,
                r#""data":{"turn":1}"#,
                r#""data":{"turn":1},"surfaceOp":"append""#,
            ),
            "cannot carry surfaceOp",
        ),
        (
            replace(1, r#""role":"user""#, r#""role":"assistant""#),
            "role",
        ),
        (
            replace(8, r#""sourceEventSeqs":[7]"#, r#""sourceEventSeqs":[]"#),
            "sourceEventSeqs",
        ),
        (
            replace(8, r#""id":"r1""#, r#""id":"r2""#),
            "may change only content",
        ),
        (
            replace(
                8,
                r#""source":{"kind":"tool","callId":"call-1"}"#,
                r#""source":{"kind":"tool","callId":"call-2"}"#,
            ),
            "tool",
        ),
        (
            replace(
                9,
                r#""config":{"provider":"p","model":"m"}"#,
                r#""config":{"provider":"","model":"m"}"#,
            ),
            "request/header",
        ),
        (
            replace(
                9,
                r#""header":{"config":{"provider":"p","model":"m"}}"#,
                r#""header":{"config":{"provider":"p","model":"m"}},"reason":"fallback""#,
            ),
            "fallback",
        ),
        (
            replace(
                11,
                r#""op":"replace","start":1"#,
                r#""op":"replace","start":99"#,
            ),
            "not found",
        ),
    ];
    for (seed, want) in cases {
        let msg = check(&seed, &good).unwrap_or_else(|| panic!("{want}: accepted"));
        assert!(msg.contains(want), "{want}: {msg}");
    }
}
