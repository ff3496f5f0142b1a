//! Observers and publication (§2.7): session-core §8.2 items 63–67 on `SharedSession`.

#![allow(clippy::unwrap_used)] // test helpers unwrap like the tests themselves

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::Duration;

use crate::common::*;
use session_core::Event;
use session_surface::{BoxError, Draft, Session, SessionObserver, SharedSession};

type Log = Arc<Mutex<Vec<String>>>;

fn shared() -> (SharedSession, Log) {
    let s = SharedSession::new(session());
    let warnings: Log = Arc::default();
    let sink = warnings.clone();
    s.set_warning_sink(Arc::new(move |w: &str| {
        sink.lock().unwrap().push(w.to_owned());
    }));
    (s, warnings)
}

/// A listener that records what it saw and optionally fails.
struct Recorder {
    name: &'static str,
    seen: Log,
    fail: Option<&'static str>,
    panic: bool,
}

impl SessionObserver for Recorder {
    fn event(&self, session: &SharedSession, event: &Event) -> Result<(), BoxError> {
        // The event is committed before listeners run, and the session can be read.
        assert_eq!(session.seq(), event.seq() + 1);
        self.seen
            .lock()
            .unwrap()
            .push(format!("{}:{}", self.name, event.seq()));
        assert!(!self.panic, "listener exploded");
        match self.fail {
            Some(m) => Err(m.into()),
            None => Ok(()),
        }
    }
}

fn recorder(name: &'static str, seen: &Log) -> Arc<Recorder> {
    Arc::new(Recorder {
        name,
        seen: seen.clone(),
        fail: None,
        panic: false,
    })
}

#[test]
fn listener_failures_are_contained() {
    // session-core §8.2 #63 (a rejected promise has no Rust analogue; a panic is the second
    // failure form and is contained the same way)
    let (s, warnings) = shared();
    let seen: Log = Arc::default();
    s.observe(Arc::new(Recorder {
        name: "throws",
        seen: seen.clone(),
        fail: Some("boom"),
        panic: false,
    }));
    s.observe(Arc::new(Recorder {
        name: "panics",
        seen: seen.clone(),
        fail: None,
        panic: true,
    }));
    s.observe(recorder("later", &seen));
    let e = s.append(log_only("turn/start", r#"{"turn":1}"#)).unwrap();
    assert_eq!(e.seq(), 0);
    assert_eq!(s.seq(), 1);
    assert_eq!(*seen.lock().unwrap(), ["throws:0", "panics:0", "later:0"]);
    assert_eq!(
        *warnings.lock().unwrap(),
        [
            r#"session "s": session/event listener threw: Error: boom"#,
            r#"session "s": session/event listener threw: Error: listener exploded"#,
        ]
    );
}

struct Veto {
    saw_len: Arc<AtomicUsize>,
}

impl SessionObserver for Veto {
    fn dispatch(&self, session: &Session, candidate: &Event) -> Result<(), BoxError> {
        self.saw_len.store(session.seq() as usize, Ordering::SeqCst);
        assert_eq!(candidate.seq(), session.seq());
        Err("vetoed by invariant".into())
    }
}

#[test]
fn dispatch_veto_commits_nothing() {
    // session-core §8.2 #64
    let (s, _) = shared();
    let seen: Log = Arc::default();
    let saw_len = Arc::new(AtomicUsize::new(99));
    let veto = s.observe(Arc::new(Veto {
        saw_len: saw_len.clone(),
    }));
    s.observe(recorder("listener", &seen));
    let result = s.append(log_only("turn/start", r#"{"turn":1}"#));
    assert_eq!(err(result), "vetoed by invariant");
    assert_eq!(saw_len.load(Ordering::SeqCst), 0);
    assert_eq!(s.seq(), 0);
    assert!(seen.lock().unwrap().is_empty());
    s.unobserve(veto);
    let e = s.append(log_only("turn/start", r#"{"turn":1}"#)).unwrap();
    assert_eq!(e.seq(), 0);
    assert_eq!(*seen.lock().unwrap(), ["listener:0"]);
}

struct VetoReplaces;

impl SessionObserver for VetoReplaces {
    fn dispatch(&self, _: &Session, candidate: &Event) -> Result<(), BoxError> {
        if candidate.is_replacement_surface_event() {
            Err("no replaces".into())
        } else {
            Ok(())
        }
    }
}

#[test]
fn vetoed_replace_leaves_surface() {
    // session-core §8.2 #65
    let (s, _) = shared();
    s.append(log_only("turn/start", r#"{"turn":1}"#)).unwrap();
    s.append(log_only("step/start", r#"{"turn":1,"step":1}"#))
        .unwrap();
    s.append(Draft::new("user/message", user("a", "x")).append_op())
        .unwrap();
    s.observe(Arc::new(VetoReplaces));
    assert_eq!(s.surface_nodes(), [2]);
    let result = s.append(
        Draft::new("user/message", user("b", "y"))
            .replace_op(2, 2)
            .sources(&[2]),
    );
    assert_eq!(err(result), "no replaces");
    assert_eq!(s.surface_nodes(), [2]);
    assert_eq!(s.replace_generation(), 0);
    s.append(Draft::new("user/message", user("c", "z")).append_op())
        .unwrap();
    assert_eq!(s.surface_nodes(), [2, 3]);
    assert_eq!(s.derive_messages().len(), 2);
}

struct FailingResolution;

impl SessionObserver for FailingResolution {
    fn dispatch(&self, _: &Session, _: &Event) -> Result<(), BoxError> {
        panic!("dispatch resolution failed");
    }
}

#[test]
fn dispatch_failure_propagates() {
    // session-core §8.2 #66
    let (s, warnings) = shared();
    let seen: Log = Arc::default();
    s.observe(Arc::new(FailingResolution));
    s.observe(recorder("listener", &seen));
    let result = s.append(log_only("turn/start", r#"{"turn":1}"#));
    assert_eq!(err(result), "dispatch resolution failed");
    assert_eq!(s.seq(), 0);
    assert!(seen.lock().unwrap().is_empty());
    assert!(warnings.lock().unwrap().is_empty());
    // The session stays usable.
    assert_eq!(s.events().len(), 0);
}

struct Reenter {
    result: Log,
}

impl SessionObserver for Reenter {
    fn event(&self, session: &SharedSession, _: &Event) -> Result<(), BoxError> {
        let r = session.append(log_only("feedback/record", "{}"));
        self.result.lock().unwrap().push(match &r {
            Ok(_) => "ok".to_owned(),
            Err(e) => e.to_string(),
        });
        r.map(|_| ()).map_err(BoxError::from)
    }
}

#[test]
fn reentrant_append_is_rejected_and_contained() {
    // session-core §8.2 #67
    let (s, warnings) = shared();
    let seen: Log = Arc::default();
    let result: Log = Arc::default();
    s.observe(Arc::new(Reenter {
        result: result.clone(),
    }));
    s.observe(recorder("later", &seen));
    let e = s.append(log_only("turn/start", r#"{"turn":1}"#)).unwrap();
    assert_eq!(e.seq(), 0);
    assert_eq!(s.seq(), 1);
    assert_eq!(
        *result.lock().unwrap(),
        ["session append cannot reenter while another append is being published"]
    );
    assert_eq!(
        *warnings.lock().unwrap(),
        [
            r#"session "s": session/event listener threw: Error: session append cannot reenter while another append is being published"#
        ]
    );
    assert_eq!(*seen.lock().unwrap(), ["later:0"]);
}

struct ReenterFromDispatch {
    shared: Mutex<Option<SharedSession>>,
}

impl SessionObserver for ReenterFromDispatch {
    fn dispatch(&self, _: &Session, _: &Event) -> Result<(), BoxError> {
        let shared = self.shared.lock().unwrap().clone().unwrap();
        shared.append(log_only("feedback/record", "{}"))?;
        Ok(())
    }
}

#[test]
fn reentrant_append_from_dispatch_vetoes() {
    let (s, _) = shared();
    let observer = Arc::new(ReenterFromDispatch {
        shared: Mutex::new(Some(s.clone())),
    });
    s.observe(observer.clone());
    assert_eq!(
        err(s.append(log_only("turn/start", r#"{"turn":1}"#))),
        "session append cannot reenter while another append is being published"
    );
    assert_eq!(s.seq(), 0);
    *observer.shared.lock().unwrap() = None;
}

/// A listener that holds publication until another thread has started appending.
struct Slow {
    started: Arc<Barrier>,
    seen: Log,
}

impl SessionObserver for Slow {
    fn event(&self, _: &SharedSession, event: &Event) -> Result<(), BoxError> {
        if event.seq() == 0 {
            self.started.wait();
            thread::sleep(Duration::from_millis(50));
        }
        self.seen
            .lock()
            .unwrap()
            .push(format!("slow:{}", event.seq()));
        Ok(())
    }
}

#[test]
fn appends_from_other_threads_wait_for_publication() {
    let (s, warnings) = shared();
    let seen: Log = Arc::default();
    let started = Arc::new(Barrier::new(2));
    s.observe(Arc::new(Slow {
        started: started.clone(),
        seen: seen.clone(),
    }));
    let other = s.clone();
    let gate = started.clone();
    let worker = thread::spawn(move || {
        gate.wait();
        other
            .append(log_only("plugin/other", "{}").ignorable())
            .unwrap()
    });
    let first = s
        .append(log_only("plugin/first", "{}").ignorable())
        .unwrap();
    let second = worker.join().unwrap();
    assert_eq!(first.seq(), 0);
    assert_eq!(second.seq(), 1);
    assert_eq!(*seen.lock().unwrap(), ["slow:0", "slow:1"]);
    assert!(warnings.lock().unwrap().is_empty());
}

fn assert_send_sync<T: Send + Sync>() {}

#[test]
fn handles_share_one_session() {
    let (s, _) = shared();
    let t = s.clone();
    t.append(Draft::new("user/message", user("a", "x")).append_op())
        .unwrap();
    assert!(s.ptr_eq(&t));
    assert_eq!(&*s.id(), "s");
    assert_eq!(s.seq(), 1);
    assert_eq!(
        s.header().to_value().to_json(),
        t.header().to_value().to_json()
    );
    assert_eq!(s.transcript().len(), 1);
    assert_eq!(s.first_live_seq(), 0);
    assert!(s.request_header().is_none() && s.request_context().is_none());
    assert_eq!(s.event(0).unwrap().seq(), 0);
    assert!(!s.ptr_eq(&SharedSession::new(session())));
    assert_send_sync::<SharedSession>();
}

struct ReadsInDispatch {
    shared: Mutex<Option<SharedSession>>,
}

impl SessionObserver for ReadsInDispatch {
    fn dispatch(&self, _: &Session, _: &Event) -> Result<(), BoxError> {
        let shared = self.shared.lock().unwrap().clone().unwrap();
        let _ = shared.seq();
        Ok(())
    }
}

#[test]
fn reading_the_shared_handle_in_dispatch_vetoes_instead_of_deadlocking() {
    let (s, _) = shared();
    let observer = Arc::new(ReadsInDispatch {
        shared: Mutex::new(Some(s.clone())),
    });
    s.observe(observer.clone());
    let message = err(s.append(log_only("feedback/record", "{}")));
    assert!(message.contains("dispatch hook"), "{message}");
    assert_eq!(s.seq(), 0);
    *observer.shared.lock().unwrap() = None;
}
