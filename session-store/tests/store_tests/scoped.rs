//! Scoped listeners and `flush`: session-core §8.13 (scoped.spec).
#![allow(clippy::unwrap_used)] // tests may unwrap

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::{Log, plugin, store};
use session_store::{BoxError, BoxFuture, Dispatch, Error, PrepareOptions, block_on};

fn boom(message: &str) -> BoxError {
    message.to_owned().into()
}

fn ok() -> BoxFuture<Result<(), BoxError>> {
    Box::pin(std::future::ready(Ok(())))
}

#[test]
// session-core §8.13 scoped.spec: scoped listeners hear only their own sessions
fn scoped_listeners_hear_only_their_sessions_and_global_ones_hear_all() {
    let store = store();
    let a = store.scope();
    let b = store.scope();
    let log = Log::default();
    for (name, scope) in [("a", &a), ("b", &b)] {
        let l = log.clone();
        scope.on_event(move |s, _| {
            l.push(format!("{name}:{}", s.id()));
            Ok(())
        });
    }
    let l = log.clone();
    store.on_event(move |s, _| {
        l.push(format!("global:{}", s.id()));
        Ok(())
    });
    let (in_a, _da) = a.create(Some("in-a"), PrepareOptions::default()).unwrap();
    let in_b = store
        .prepare(Some("in-b"), PrepareOptions::default())
        .unwrap();
    let _db = store.enter_in(&in_b, &b).unwrap();
    store.announce(&in_b).unwrap();
    let (unscoped, _du) = store
        .create(Some("none"), PrepareOptions::default())
        .unwrap();

    in_a.append(plugin(1)).unwrap();
    in_b.append(plugin(1)).unwrap();
    unscoped.append(plugin(1)).unwrap();
    assert_eq!(
        log.take(),
        [
            "a:in-a",
            "global:in-a",
            "b:in-b",
            "global:in-b",
            "global:none"
        ]
    );
}

#[test]
// session-core §8.13 scoped.spec: created and dispatch follow the same routing
fn created_and_dispatch_routing_follow_the_scope() {
    let store = store();
    let a = store.scope();
    let log = Log::default();
    let l = log.clone();
    a.on_created(move |s| {
        l.push(format!("a-created:{}", s.id()));
        Ok(())
    });
    let l = log.clone();
    a.on_dispatch(move |s, _| {
        l.push(format!("a-dispatch:{}", s.id()));
        Ok(())
    });
    let l = log.clone();
    a.on_dispatch_any(move |d| {
        if let Dispatch::Created(s) = d {
            l.push(format!("a-hook-created:{}", s.id()));
        }
        Ok(())
    });
    let (inside, _d1) = a.create(Some("inside"), PrepareOptions::default()).unwrap();
    let (outside, _d2) = store
        .create(Some("outside"), PrepareOptions::default())
        .unwrap();
    inside.append(plugin(1)).unwrap();
    outside.append(plugin(1)).unwrap();
    assert_eq!(
        log.take(),
        [
            "a-hook-created:inside",
            "a-created:inside",
            "a-dispatch:inside"
        ]
    );
}

#[test]
// session-core §8.13 scoped.spec: disposal uses the scope captured at enter
fn disposal_uses_the_scope_captured_at_enter() {
    let store = store();
    let a = store.scope();
    let b = store.scope();
    let log = Log::default();
    for (name, scope) in [("a", &a), ("b", &b)] {
        let l = log.clone();
        scope.on_disposed(move |s| {
            l.push(format!("{name}:{}", s.id()));
            Ok(())
        });
    }
    let session = store.prepare(Some("s"), PrepareOptions::default()).unwrap();
    let detach = a.enter(&session).unwrap();
    store.announce(&session).unwrap();
    // Detached through the store handle, not through the scope: still routed to `a`.
    assert!(store.detach(&session));
    assert_eq!(log.take(), ["a:s"]);
    detach.detach();
    assert!(log.get().is_empty());
}

#[test]
// session-core §8.13 scoped.spec: disposing a scope detaches what it created and drops its
// listeners
fn disposing_a_scope_detaches_its_sessions_and_removes_its_listeners() {
    let store = store();
    let owner = store.scope();
    let log = Log::default();
    let l = log.clone();
    owner.on_disposed(move |s| {
        l.push(format!("scoped-disposed:{}", s.id()));
        Ok(())
    });
    let l = log.clone();
    owner.on_event(move |s, _| {
        l.push(format!("scoped-event:{}", s.id()));
        Ok(())
    });
    let (first, _d1) = owner
        .create(Some("one"), PrepareOptions::default())
        .unwrap();
    let (second, _d2) = owner
        .create(Some("two"), PrepareOptions::default())
        .unwrap();
    let entered = store
        .prepare(Some("entered"), PrepareOptions::default())
        .unwrap();
    let _d3 = owner.enter(&entered).unwrap();
    owner.dispose();
    assert_eq!(log.take(), ["scoped-disposed:two", "scoped-disposed:one"]);
    assert!(!store.is_live(&first));
    assert!(!store.is_live(&second));
    // Entered (not created) sessions are not owned by the scope.
    assert!(store.is_live(&entered));
    entered.append(plugin(1)).unwrap();
    assert!(log.get().is_empty(), "the scope's listeners are gone");
}

#[test]
// session-core §8.13 scoped.spec: flush with no listener returns false, with one true
fn flush_reports_whether_any_listener_participated() {
    let store = store();
    let (session, _d) = store.create(Some("f"), PrepareOptions::default()).unwrap();
    assert!(!block_on(store.flush(&session)).unwrap());
    let calls = Log::default();
    let c = calls.clone();
    store.on_flush(move |s| {
        c.push(format!("flush:{}", s.id()));
        ok()
    });
    assert!(block_on(store.flush(&session)).unwrap());
    assert_eq!(calls.take(), ["flush:f"]);
}

#[test]
// session-core §8.13 scoped.spec: flush reaches scoped and global listeners
fn flush_reaches_scoped_and_global_listeners() {
    let store = store();
    let a = store.scope();
    let b = store.scope();
    let calls = Log::default();
    for (name, scope) in [("a", &a), ("b", &b)] {
        let c = calls.clone();
        scope.on_flush(move |_| {
            c.push(name);
            ok()
        });
    }
    let c = calls.clone();
    store.on_flush(move |_| {
        c.push("global");
        ok()
    });
    let (session, _d) = a.create(Some("s"), PrepareOptions::default()).unwrap();
    assert!(block_on(store.flush(&session)).unwrap());
    assert_eq!(calls.take(), ["a", "global"]);
    let (plain, _d2) = store.create(Some("p"), PrepareOptions::default()).unwrap();
    assert!(block_on(store.flush(&plain)).unwrap());
    assert_eq!(calls.take(), ["global"]);
}

#[test]
// session-core §8.13 scoped.spec: flush propagates a rejection
fn flush_propagates_a_rejection() {
    let store = store();
    store.on_flush(|_| Box::pin(async { Err(boom("disk full")) }));
    let (session, _d) = store.create(Some("r"), PrepareOptions::default()).unwrap();
    let err = block_on(store.flush(&session)).unwrap_err();
    assert!(matches!(err, Error::Listener(_)));
    assert_eq!(err.to_string(), "disk full");
}

#[test]
// session-core §8.13 scoped.spec: a synchronous throw does not stop later listeners
fn a_failing_listener_does_not_stop_later_ones() {
    let store = store();
    let calls = Log::default();
    // Fails before returning a pending future (the synchronous throw of the reference).
    store.on_flush(|_| panic!("sync throw"));
    store.on_flush(|_| Box::pin(std::future::ready(Err(boom("immediate")))));
    let c = calls.clone();
    store.on_flush(move |_| {
        c.push("later");
        ok()
    });
    let (session, _d) = store.create(Some("t"), PrepareOptions::default()).unwrap();
    let err = block_on(store.flush(&session)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "sync throw",
        "the first failure in registration order"
    );
    assert_eq!(calls.take(), ["later"]);
}

#[test]
// session-core §8.13 scoped.spec: flush waits for slow listeners before throwing
fn flush_waits_for_slow_listeners_before_failing() {
    let store = store();
    let finished = Arc::new(Mutex::new(false));
    store.on_flush(|_| Box::pin(async { Err(boom("fast failure")) }));
    let f = finished.clone();
    store.on_flush(move |_| {
        let f = f.clone();
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            tx.send(()).ok();
        });
        Box::pin(Channel { rx, done: Some(f) })
    });
    let (session, _d) = store
        .create(Some("slow"), PrepareOptions::default())
        .unwrap();
    let err = block_on(store.flush(&session)).unwrap_err();
    assert_eq!(err.to_string(), "fast failure");
    assert!(*finished.lock().unwrap(), "the slow listener settled first");
}

/// Completes when the sender signals; polls by re-waking itself (keeps the test free of a
/// runtime).
struct Channel {
    rx: std::sync::mpsc::Receiver<()>,
    done: Option<Arc<Mutex<bool>>>,
}

impl std::future::Future for Channel {
    type Output = Result<(), BoxError>;
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        if self.rx.try_recv().is_ok() {
            if let Some(done) = self.done.take() {
                *done.lock().unwrap() = true;
            }
            return std::task::Poll::Ready(Ok(()));
        }
        let waker = cx.waker().clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(2));
            waker.wake();
        });
        std::task::Poll::Pending
    }
}

#[test]
// session-core §8.13 scoped.spec: flush rejects prepared or detached sessions
fn flush_rejects_sessions_that_are_not_live() {
    let store = store();
    let calls = Log::default();
    let c = calls.clone();
    store.on_flush(move |_| {
        c.push("called");
        ok()
    });
    let prepared = store
        .prepare(Some("prep"), PrepareOptions::default())
        .unwrap();
    let err = block_on(store.flush(&prepared)).unwrap_err();
    assert!(matches!(err, Error::NotLive { .. }));
    assert_eq!(
        err.to_string(),
        r#"session "prep" is not live in this store"#
    );
    let (session, detach) = store
        .create(Some("gone"), PrepareOptions::default())
        .unwrap();
    detach.detach();
    let err = block_on(store.flush(&session)).unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"session "gone" is not live in this store"#
    );
    assert!(calls.get().is_empty());
}

#[test]
// session-core §8.13 scoped.spec: a flush dispatch hook failure fails the flush
fn a_flush_dispatch_failure_fails_the_flush_without_starting_listeners() {
    let store = store();
    let calls = Log::default();
    let c = calls.clone();
    store.on_flush(move |_| {
        c.push("called");
        ok()
    });
    store.on_dispatch_any(|d| match d {
        Dispatch::Flush(_) => Err(boom("no flush")),
        _ => Ok(()),
    });
    let (session, _d) = store.create(Some("h"), PrepareOptions::default()).unwrap();
    assert_eq!(
        block_on(store.flush(&session)).unwrap_err().to_string(),
        "no flush"
    );
    assert!(calls.get().is_empty());
}

#[test]
// session-core §8.13 scoped.spec: listeners start when flush is called
fn flush_starts_listeners_when_called() {
    let store = store();
    let calls = Log::default();
    let c = calls.clone();
    store.on_flush(move |_| {
        c.push("started");
        ok()
    });
    let (session, _d) = store.create(Some("s"), PrepareOptions::default()).unwrap();
    let pending = store.flush(&session);
    assert_eq!(calls.take(), ["started"]);
    assert!(block_on(pending).unwrap());
}
