//! The invariant as a pre-commit veto on shared sessions (session-core §7.2, §8.12).

#![allow(clippy::unwrap_used)] // test helpers unwrap like the tests themselves

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use session_core::json::Value;
use session_core::{Event, FixedClock, SharedClock};
use session_repair::{InvariantError, InvariantObserver};
use session_surface::{BoxError, Draft, Error, Session, SessionObserver, SharedSession};

fn clock() -> SharedClock {
    Arc::new(FixedClock::new(1_000))
}

fn v(text: &str) -> Value {
    Value::parse(text).unwrap()
}

fn shared(id: &str) -> SharedSession {
    SharedSession::new(Session::create(id, None, None, clock()).unwrap())
}

fn draft(ty: &str, data: &str) -> Draft {
    Draft::new(ty, v(data))
}

fn turn_start(n: u32) -> Draft {
    draft("turn/start", &format!(r#"{{"turn":{n}}}"#))
}

/// The invariant's message, when `result` is an invariant veto.
fn veto_message(result: Result<Event, Error>) -> String {
    match result {
        Err(Error::Vetoed(e)) => {
            let inv = e
                .downcast_ref::<InvariantError>()
                .expect("vetoed by the invariant");
            inv.to_string()
        }
        other => panic!("expected a veto, got {other:?}"),
    }
}

fn violation(msg: &str) -> String {
    format!("invariant violated by \"@deepseek-ai/dsh-session\": {msg}")
}

/// Vetoes every append while `on` is set.
struct Vetoer(AtomicBool);

impl SessionObserver for Vetoer {
    fn dispatch(&self, _: &Session, _: &Event) -> Result<(), BoxError> {
        if self.0.load(Ordering::SeqCst) {
            return Err("later hook says no".into());
        }
        Ok(())
    }
}

/// Fails in every post-commit callback.
struct Thrower;

impl SessionObserver for Thrower {
    fn event(&self, _: &SharedSession, _: &Event) -> Result<(), BoxError> {
        Err("listener broke".into())
    }
}

#[test]
fn one_observer_checks_every_session_it_watches() {
    // session-core §8.12 #198 (scoped mounting is a bus concept; one observer watching
    // several sessions is the equivalent) and #199 through the publication path.
    let invariant = Arc::new(InvariantObserver::new());
    let a = shared("a");
    let b = shared("b");
    a.observe(invariant.clone());
    b.observe(invariant.clone());
    a.append(turn_start(1)).unwrap();
    a.append(draft("step/start", r#"{"turn":1,"step":1}"#))
        .unwrap();
    a.append(draft(
        "assistant/chunk",
        r#"{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"x"}}"#,
    ))
    .unwrap();
    a.append(
        draft(
            "assistant/message",
            r#"{"turn":1,"step":1,"message":{"id":"m","role":"assistant","source":{"kind":"model","provider":"p","model":"m"},"content":[{"type":"tool-call","id":"c","name":"n","arguments":"{}"}]}}"#,
        )
        .append_op(),
    )
    .unwrap();
    a.append(draft(
        "tool/call",
        r#"{"turn":1,"step":1,"callId":"c","name":"n","arguments":"{}"}"#,
    ))
    .unwrap();
    a.append(
        draft(
            "tool/result",
            r#"{"turn":1,"step":1,"message":{"id":"r","role":"user","source":{"kind":"tool","callId":"c"},"content":[{"type":"tool-result","toolCallId":"c","content":[]}]}}"#,
        )
        .append_op(),
    )
    .unwrap();
    a.append(draft("step/end", r#"{"turn":1,"step":1}"#))
        .unwrap();
    a.append(draft(
        "turn/end",
        r#"{"turn":1,"reason":{"kind":"completed"}}"#,
    ))
    .unwrap();
    // Session b is tracked on its own: its first turn is 1, not 2.
    assert_eq!(
        veto_message(b.append(turn_start(2))),
        violation("turn/start expected turn 1, got 2")
    );
    assert_eq!(b.seq(), 0, "a vetoed append commits nothing");
    b.append(turn_start(1)).unwrap();
    assert_eq!(invariant.trace("a").unwrap().next_turn(), 2);
    assert_eq!(invariant.trace("b").unwrap().open_turn(), Some(1));
}

#[test]
fn later_veto_does_not_advance_the_trace() {
    // session-core §8.12 #200
    let invariant = Arc::new(InvariantObserver::new());
    let vetoer = Arc::new(Vetoer(AtomicBool::new(true)));
    let s = shared("s");
    s.observe(invariant.clone());
    s.observe(vetoer.clone());
    let err = s.append(turn_start(1)).unwrap_err();
    assert_eq!(err.to_string(), "later hook says no");
    assert_eq!(invariant.trace("s").unwrap().open_turn(), None);
    vetoer.0.store(false, Ordering::SeqCst);
    s.append(turn_start(1)).unwrap();
    assert_eq!(invariant.trace("s").unwrap().open_turn(), Some(1));
}

#[test]
fn failing_listener_does_not_stop_the_transition() {
    // session-core §8.12 #201
    let warnings = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = warnings.clone();
    let invariant = Arc::new(InvariantObserver::new());
    let s = shared("s");
    s.set_warning_sink(Arc::new(move |w: &str| {
        sink.lock().unwrap().push(w.to_owned());
    }));
    s.observe(Arc::new(Thrower));
    s.observe(invariant.clone());
    s.append(turn_start(1)).unwrap();
    s.append(draft("step/start", r#"{"turn":1,"step":1}"#))
        .unwrap();
    let warnings = warnings.lock().unwrap().clone();
    assert_eq!(
        warnings,
        vec![r#"session "s": session/event listener threw: Error: listener broke"#.to_owned(); 2]
    );
    let trace = invariant.trace("s").unwrap();
    assert_eq!((trace.open_turn(), trace.open_step()), (Some(1), Some(1)));
    assert_eq!(
        veto_message(s.append(draft("step/start", r#"{"turn":1,"step":2}"#))),
        violation("step/start 2 while step 1 is still open")
    );
}

#[test]
fn directly_emitted_repeated_seq_is_rejected() {
    // session-core §8.12 #202
    let invariant = InvariantObserver::new();
    let s = shared("s");
    s.observe(Arc::new(InvariantObserver::new()));
    let first = s.append(draft("feedback/record", "{}")).unwrap();
    invariant.track_shared(&s).unwrap();
    let err = invariant.event(&s, &first).unwrap_err();
    assert_eq!(
        err.to_string(),
        violation("seq must strictly increase: saw 0 after 0")
    );
}

#[test]
fn violating_seed_is_reported_at_creation() {
    // session-core §8.12 #211
    let seed = vec![
        v(r#"{"type":"turn/start","seq":0,"time":0,"data":{"turn":1}}"#),
        v(r#"{"type":"turn/start","seq":1,"time":0,"data":{"turn":2}}"#),
    ];
    let bad = Session::create("bad", Some(seed), None, clock()).unwrap();
    let good = Session::create("good", None, None, clock()).unwrap();
    let invariant = InvariantObserver::new();
    let err = invariant.track(&bad).unwrap_err();
    assert_eq!(
        err.to_string(),
        violation("turn/start 2 while turn 1 is still open")
    );
    assert!(invariant.trace("bad").is_none());
    invariant.track(&good).unwrap();
    assert!(invariant.trace("good").is_some());
    invariant.forget("good");
    assert!(invariant.trace("good").is_none());
}

#[test]
fn reloaded_observer_rebuilds_from_the_log() {
    // session-core §8.12 #212
    let s = shared("s");
    s.append(turn_start(1)).unwrap();
    s.append(draft("step/start", r#"{"turn":1,"step":1}"#))
        .unwrap();
    let invariant = Arc::new(InvariantObserver::new());
    s.observe(invariant.clone());
    assert_eq!(
        veto_message(s.append(draft(
            "turn/end",
            r#"{"turn":1,"reason":{"kind":"completed"}}"#
        ))),
        violation("turn/end 1 while step 1 is still open")
    );
    s.append(draft("step/end", r#"{"turn":1,"step":1}"#))
        .unwrap();
    // Clearing and coming back (an unload and reload) rebuilds the same state again.
    invariant.clear();
    assert_eq!(
        veto_message(s.append(draft("step/start", r#"{"turn":1,"step":1}"#))),
        violation("step/start expected step 2 in turn 1, got 1")
    );
}

#[test]
fn end_seed_inside_open_turn_is_accepted() {
    // session-core §8.12 #213
    let seed = vec![v(
        r#"{"type":"turn/start","seq":0,"time":0,"data":{"turn":1}}"#,
    )];
    let session = Session::create("s", Some(seed), None, clock()).unwrap();
    assert_eq!(
        session.events().get(1).unwrap().event_type(),
        "session/end-seed"
    );
    let invariant = Arc::new(InvariantObserver::new());
    invariant.track(&session).unwrap();
    assert_eq!(invariant.trace("s").unwrap().open_turn(), Some(1));
    let s = SharedSession::new(session);
    s.observe(invariant.clone());
    s.append(draft(
        "turn/end",
        r#"{"turn":1,"reason":{"kind":"completed"}}"#,
    ))
    .unwrap();
    s.append(draft("session/end-seed", "{}")).unwrap();
}

#[test]
fn unobserving_removes_every_check() {
    // session-core §8.12 #214
    let s = shared("s");
    let id = s.observe(Arc::new(InvariantObserver::new()));
    assert!(s.append(turn_start(3)).is_err());
    s.unobserve(id);
    s.append(turn_start(3)).unwrap();
    s.append(draft("request/context", r#"{"provider":"p","model":"m"}"#))
        .unwrap();
}

#[test]
fn observer_sees_events_it_did_not_stage() {
    // A session the observer first meets after the commit is tracked from its log.
    let s = shared("s");
    let e = s.append(turn_start(1)).unwrap();
    let invariant = InvariantObserver::new();
    invariant.event(&s, &e).unwrap();
    assert_eq!(invariant.trace("s").unwrap().open_turn(), Some(1));
    // A tracked session checks an unstaged event directly.
    let e2 = s
        .append(draft("step/start", r#"{"turn":1,"step":1}"#))
        .unwrap();
    invariant.event(&s, &e2).unwrap();
    assert_eq!(invariant.trace("s").unwrap().open_step(), Some(1));
}
