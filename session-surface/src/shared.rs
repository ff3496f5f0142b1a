//! A shared, observable session and its publication protocol (§2.7).
//!
//! [`SharedSession`] is a cloneable handle over one [`Session`] behind a mutex. Appends go
//! through three phases:
//!
//! 1. **Pre-commit (veto).** Every observer's [`SessionObserver::dispatch`] sees the session
//!    (log still at its old length) and the frozen candidate. An `Err` or a panic vetoes the
//!    append: nothing is committed and no listener runs.
//! 2. **Commit.**
//! 3. **Post-commit.** Every observer's [`SessionObserver::event`] runs in registration order,
//!    *without* the session lock, so it can read the session. A failure (an `Err` or a panic)
//!    is contained and reported to the warning sink as
//!    `session "<id>": session/event listener threw: Error: <message>`; later listeners still
//!    run and the append still succeeds.
//!
//! Finally, once the publication is released, every observer's
//! [`SessionObserver::settled`] learns that the append is over (committed or not); a store
//! uses it to run a detach that was requested while the append was in progress.
//!
//! Only one append is published at a time. An append made on the publishing thread while a
//! publication is in progress (from a listener or a dispatch hook) fails with
//! `session append cannot reenter while another append is being published`; appends from
//! other threads wait for the publication to finish (so a listener must not block on an
//! append it hands to another thread).

use std::any::Any;
use std::cell::Cell;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, RwLock};
use std::thread::{self, ThreadId};

use session_core::json::Value;
use session_core::{Event, Events, SessionHeader};

use crate::derive::Messages;
use crate::error::{Error, Result};
use crate::session::{BoxError, Draft, Prepared, Session};
use crate::surface::Nodes;
use crate::transcript::Transcript;

/// Receives the warnings of contained listener failures.
pub type WarningSink = Arc<dyn Fn(&str) + Send + Sync>;

/// An observer of a [`SharedSession`]'s appends.
pub trait SessionObserver: Send + Sync {
    /// Pre-commit hook: sees the session (log at its old length) and the frozen candidate.
    /// An `Err` vetoes the append. Must not call back into the [`SharedSession`]; the session
    /// is passed in directly.
    fn dispatch(&self, session: &Session, candidate: &Event) -> Result<(), BoxError> {
        let _ = (session, candidate);
        Ok(())
    }

    /// Post-commit listener: runs after the event is committed, without the session lock.
    /// A failure is contained and reported as a warning.
    fn event(&self, session: &SharedSession, event: &Event) -> Result<(), BoxError> {
        let _ = (session, event);
        Ok(())
    }

    /// Runs once the append has finished, whether it was committed (`committed` is the event),
    /// vetoed or refused, after the publication has been released and without the session
    /// lock (the `finally` of the reference's append). Every observer of the append's snapshot
    /// is told, in registration order; a panic is ignored.
    fn settled(&self, session: &SharedSession, committed: Option<&Event>) {
        let _ = (session, committed);
    }
}

/// Identifies a registered observer (see [`SharedSession::observe`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ObserverId(u64);

/// The observer set: an immutable snapshot, replaced whole on (un)registration, so that an
/// append takes it with one reference-count increment.
type Observers = Arc<[(ObserverId, Arc<dyn SessionObserver>)]>;

/// Who is publishing, and how many threads wait for the publication to end.
#[derive(Default)]
struct Publisher {
    owner: Option<ThreadId>,
    /// Threads blocked in [`SharedSession::claim`]; the end of a publication wakes them only
    /// when there are any (waking costs a system call).
    waiters: usize,
}

struct Inner {
    id: Arc<str>,
    session: Mutex<Session>,
    publisher: Mutex<Publisher>,
    publisher_done: Condvar,
    observers: RwLock<Observers>,
    next_observer: AtomicU64,
    sink: RwLock<WarningSink>,
}

thread_local! {
    /// The session (its `Inner` address) whose dispatch hooks this thread is running while
    /// holding that session's lock; 0 when none.
    static DISPATCHING: Cell<usize> = const { Cell::new(0) };
}

/// A shared handle over one session (clones are the same session); `Send + Sync`.
#[derive(Clone)]
pub struct SharedSession(Arc<Inner>);

impl fmt::Debug for SharedSession {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("SharedSession").field(&self.0.id).finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The default warning sink: standard error.
fn stderr_sink() -> WarningSink {
    Arc::new(|warning: &str| eprintln!("{warning}"))
}

/// `String(err)` of JavaScript for an error: `Error: <message>`.
fn js_error_string(message: &str) -> String {
    format!("Error: {message}")
}

/// The message of a panic payload.
fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic".to_owned()
    }
}

/// Marks the current thread as the publisher until dropped.
struct PublishGuard<'a>(&'a Inner);

impl Drop for PublishGuard<'_> {
    fn drop(&mut self) {
        let waiters = {
            let mut publisher = lock(&self.0.publisher);
            publisher.owner = None;
            publisher.waiters
        };
        if waiters > 0 {
            self.0.publisher_done.notify_all();
        }
    }
}

/// Marks the current thread as running the dispatch hooks of one session until dropped
/// (restoring the mark of an enclosing dispatch, which may be another session's).
struct DispatchGuard(usize);

impl DispatchGuard {
    fn enter(inner: &Inner) -> DispatchGuard {
        DispatchGuard(DISPATCHING.replace(std::ptr::from_ref(inner) as usize))
    }
}

impl Drop for DispatchGuard {
    fn drop(&mut self) {
        DISPATCHING.set(self.0);
    }
}

impl SharedSession {
    /// Shares `session`. Warnings go to standard error until [`SharedSession::set_warning_sink`].
    pub fn new(session: Session) -> SharedSession {
        SharedSession(Arc::new(Inner {
            id: session.id().clone(),
            session: Mutex::new(session),
            publisher: Mutex::new(Publisher::default()),
            publisher_done: Condvar::new(),
            observers: RwLock::new(Arc::new([])),
            next_observer: AtomicU64::new(1),
            sink: RwLock::new(stderr_sink()),
        }))
    }

    /// The session id.
    pub fn id(&self) -> Arc<str> {
        self.0.id.clone()
    }

    /// Whether both handles share the same session.
    pub fn ptr_eq(&self, other: &SharedSession) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// Runs `f` on the session under its lock. Do not hold on to the lock across observer
    /// calls; calling this from a dispatch hook panics (the hook receives the session
    /// directly, and the panic vetoes the append).
    pub fn read<R>(&self, f: impl FnOnce(&Session) -> R) -> R {
        assert!(
            DISPATCHING.get() != std::ptr::from_ref::<Inner>(&self.0) as usize,
            "SharedSession::read called from a dispatch hook; use the session argument"
        );
        f(&lock(&self.0.session))
    }

    /// An O(1) frozen snapshot of the log.
    pub fn events(&self) -> Events {
        self.read(Session::events)
    }

    /// The log length.
    pub fn seq(&self) -> u64 {
        self.read(Session::seq)
    }

    /// The header.
    pub fn header(&self) -> SessionHeader {
        self.read(|s| s.header().clone())
    }

    /// The derived messages (O(1) snapshot).
    pub fn derive_messages(&self) -> Messages {
        self.read(Session::derive_messages)
    }

    /// The folded request header.
    pub fn request_header(&self) -> Option<Value> {
        self.read(Session::request_header)
    }

    /// The folded request context.
    pub fn request_context(&self) -> Option<Value> {
        self.read(Session::request_context)
    }

    /// The construction seed length.
    pub fn first_live_seq(&self) -> u64 {
        self.read(Session::first_live_seq)
    }

    /// The surface nodes (O(1) snapshot).
    pub fn surface_nodes(&self) -> Nodes {
        self.read(Session::surface_nodes)
    }

    /// The replace generation.
    pub fn replace_generation(&self) -> u64 {
        self.read(Session::replace_generation)
    }

    /// The human view (O(1) snapshot).
    pub fn transcript(&self) -> Transcript {
        self.read(Session::transcript)
    }

    /// The event at `seq`.
    pub fn event(&self, seq: u64) -> Option<Event> {
        self.read(|s| s.event(seq).cloned())
    }

    /// Registers an observer; it sees every later append.
    pub fn observe(&self, observer: Arc<dyn SessionObserver>) -> ObserverId {
        let id = ObserverId(self.0.next_observer.fetch_add(1, Ordering::Relaxed));
        let mut observers = self
            .0
            .observers
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        *observers = observers
            .iter()
            .cloned()
            .chain(std::iter::once((id, observer)))
            .collect();
        id
    }

    /// Removes an observer. Removing an unknown id does nothing. A publication already in
    /// progress keeps the observer set it started with.
    pub fn unobserve(&self, id: ObserverId) {
        let mut observers = self
            .0
            .observers
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        if observers.iter().any(|(i, _)| *i == id) {
            *observers = observers
                .iter()
                .filter(|(i, _)| *i != id)
                .cloned()
                .collect();
        }
    }

    /// Replaces the warning sink.
    pub fn set_warning_sink(&self, sink: WarningSink) {
        *self.0.sink.write().unwrap_or_else(PoisonError::into_inner) = sink;
    }

    fn warn(&self, warning: &str) {
        let sink = self
            .0
            .sink
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        // A failing sink must not break the append either.
        let _ = catch_unwind(AssertUnwindSafe(|| sink(warning)));
    }

    /// Waits until no other thread is publishing and claims publication for this thread;
    /// fails if this thread is already publishing.
    fn claim(&self) -> Result<PublishGuard<'_>> {
        let me = thread::current().id();
        let mut publisher = lock(&self.0.publisher);
        loop {
            match publisher.owner {
                None => {
                    publisher.owner = Some(me);
                    return Ok(PublishGuard(&self.0));
                }
                Some(t) if t == me => return Err(Error::Reentrant),
                Some(_) => {
                    publisher.waiters += 1;
                    publisher = self
                        .0
                        .publisher_done
                        .wait(publisher)
                        .unwrap_or_else(PoisonError::into_inner);
                    publisher.waiters -= 1;
                }
            }
        }
    }

    /// Validated append with publication (see the module docs). Returns the committed event.
    pub fn append(&self, draft: Draft) -> Result<Event> {
        let prepared = Session::prepare(draft)?;
        let publishing = self.claim()?;
        let observers: Observers = self
            .0
            .observers
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let result = self.publish(prepared, &observers);
        drop(publishing);
        for (_, observer) in observers.iter() {
            let _ = catch_unwind(AssertUnwindSafe(|| {
                observer.settled(self, result.as_ref().ok());
            }));
        }
        result
    }

    /// Phases 1-3 of an append whose publication this thread has claimed.
    fn publish(&self, prepared: Prepared, observers: &Observers) -> Result<Event> {
        let event = {
            let mut session = lock(&self.0.session);
            let candidate = session.candidate(prepared)?;
            {
                let _dispatching = DispatchGuard::enter(&self.0);
                for (_, observer) in observers.iter() {
                    let outcome = catch_unwind(AssertUnwindSafe(|| {
                        observer.dispatch(&session, &candidate.event)
                    }));
                    match outcome {
                        Ok(Ok(())) => {}
                        Ok(Err(e)) => return Err(Error::Vetoed(Arc::from(e))),
                        Err(payload) => {
                            let message = panic_message(&*payload);
                            return Err(Error::Vetoed(Arc::from(BoxError::from(message))));
                        }
                    }
                }
            }
            session.commit(candidate)
        };
        for (_, observer) in observers.iter() {
            let outcome = catch_unwind(AssertUnwindSafe(|| observer.event(self, &event)));
            let failure = match outcome {
                Ok(Ok(())) => continue,
                Ok(Err(e)) => e.to_string(),
                Err(payload) => panic_message(&*payload),
            };
            self.warn(&format!(
                "session \"{}\": session/event listener threw: {}",
                self.0.id,
                js_error_string(&failure)
            ));
        }
        Ok(event)
    }
}
