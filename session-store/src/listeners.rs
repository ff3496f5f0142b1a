//! Listener registries, scopes and subscriptions.

use std::sync::{Arc, Mutex, MutexGuard, Weak};

use session_core::Event;
use session_surface::{Session, SharedSession};

use crate::BoxError;
use crate::future::BoxFuture;

/// Identifies a listener scope; `None` in a registration means the global scope.
pub(crate) type ScopeId = u64;

/// A synchronous listener taking the session.
pub(crate) type SessionFn = Arc<dyn Fn(&SharedSession) -> Result<(), BoxError> + Send + Sync>;

/// An asynchronous listener taking the session.
pub(crate) type AsyncSessionFn =
    Arc<dyn Fn(&SharedSession) -> BoxFuture<Result<(), BoxError>> + Send + Sync>;

/// A synchronous listener taking the session and an event.
pub(crate) type SessionEventFn =
    Arc<dyn Fn(&SharedSession, &Event) -> Result<(), BoxError> + Send + Sync>;

/// An asynchronous listener taking the session and an event.
pub(crate) type AsyncSessionEventFn =
    Arc<dyn Fn(&SharedSession, &Event) -> BoxFuture<Result<(), BoxError>> + Send + Sync>;

/// What a `session/created` listener is.
#[derive(Clone)]
pub(crate) enum CreatedFn {
    /// Synchronous: an error vetoes the creation.
    Sync(SessionFn),
    /// Asynchronous: a failure is only logged.
    Async(AsyncSessionFn),
}

/// What a `session/event` listener is.
#[derive(Clone)]
pub(crate) enum EventFn {
    /// Synchronous: an error is logged as "listener threw".
    Sync(SessionEventFn),
    /// Asynchronous: an error is logged as "listener rejected".
    Async(AsyncSessionEventFn),
}

/// What a `session/disposed` listener is.
#[derive(Clone)]
pub(crate) enum DisposedFn {
    /// Synchronous: an error is logged as "listener threw".
    Sync(SessionFn),
    /// Asynchronous: an error is logged as "listener rejected".
    Async(AsyncSessionFn),
}

/// A `session/flush` listener.
pub(crate) type FlushFn = AsyncSessionFn;

/// A dispatch hook.
pub(crate) type DispatchFn = Arc<dyn Fn(&Dispatch<'_>) -> Result<(), BoxError> + Send + Sync>;

/// A notification that is about to be delivered, as seen by a dispatch hook
/// ([`SessionStore::on_dispatch_any`](crate::SessionStore::on_dispatch_any)).
///
/// Hooks run before the listeners of the notification are called (the reference's
/// `internal/dispatch` phase). An error from a hook stops the notification: for an event it
/// vetoes the append (nothing is committed), for a creation it vetoes the creation, for a flush
/// it fails the flush, and for a disposal it is logged as `session "<id>": session/disposed
/// dispatch threw: <err>` while the detach still completes. Hooks only see shared references, so
/// they cannot change what the listeners receive.
#[derive(Clone, Copy)]
#[non_exhaustive]
pub enum Dispatch<'a> {
    /// `session/created` for a session being announced.
    Created(&'a SharedSession),
    /// `session/event`: `candidate` is the frozen event about to be committed; the session's log
    /// still has its old length.
    Event {
        /// The session, as it is before the commit.
        session: &'a Session,
        /// The candidate event.
        candidate: &'a Event,
    },
    /// `session/disposed` for a session being detached.
    Disposed(&'a SharedSession),
    /// `session/flush` for a session being flushed.
    Flush(&'a SharedSession),
}

/// One registered listener.
pub(crate) struct Slot<T> {
    id: u64,
    scope: Option<ScopeId>,
    pub(crate) f: T,
}

/// Every listener of one store, in registration order per kind.
#[derive(Default)]
pub(crate) struct Registry {
    next_id: u64,
    pub(crate) created: Vec<Slot<CreatedFn>>,
    pub(crate) event: Vec<Slot<EventFn>>,
    pub(crate) dispatch: Vec<Slot<DispatchFn>>,
    pub(crate) disposed: Vec<Slot<DisposedFn>>,
    pub(crate) flush: Vec<Slot<FlushFn>>,
}

/// Selects the registrations a session in `scope` hears: global ones and those of its own
/// scope, in registration order.
pub(crate) fn heard<T: Clone>(slots: &[Slot<T>], scope: Option<ScopeId>) -> Vec<T> {
    slots
        .iter()
        .filter(|s| s.scope.is_none() || s.scope == scope)
        .map(|s| s.f.clone())
        .collect()
}

impl Registry {
    fn next(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    fn remove(&mut self, id: u64) {
        self.created.retain(|s| s.id != id);
        self.event.retain(|s| s.id != id);
        self.dispatch.retain(|s| s.id != id);
        self.disposed.retain(|s| s.id != id);
        self.flush.retain(|s| s.id != id);
    }

    pub(crate) fn remove_scope(&mut self, scope: ScopeId) {
        let keep = |s: Option<ScopeId>| s != Some(scope);
        self.created.retain(|s| keep(s.scope));
        self.event.retain(|s| keep(s.scope));
        self.dispatch.retain(|s| keep(s.scope));
        self.disposed.retain(|s| keep(s.scope));
        self.flush.retain(|s| keep(s.scope));
    }
}

/// The shared handle to a store's registry.
#[derive(Clone, Default)]
pub(crate) struct Listeners(Arc<Mutex<Registry>>);

/// Adds one kind of registration.
macro_rules! register {
    ($name:ident, $field:ident, $ty:ty) => {
        pub(crate) fn $name(&self, scope: Option<ScopeId>, f: $ty) -> Subscription {
            let mut reg = self.lock();
            let id = reg.next();
            reg.$field.push(Slot { id, scope, f });
            Subscription {
                registry: Arc::downgrade(&self.0),
                id,
            }
        }
    };
}

impl Listeners {
    pub(crate) fn lock(&self) -> MutexGuard<'_, Registry> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    register!(add_created, created, CreatedFn);
    register!(add_event, event, EventFn);
    register!(add_dispatch, dispatch, DispatchFn);
    register!(add_disposed, disposed, DisposedFn);
    register!(add_flush, flush, FlushFn);
}

/// A listener registration. Dropping it keeps the listener registered;
/// [`Subscription::unsubscribe`] removes it.
pub struct Subscription {
    registry: Weak<Mutex<Registry>>,
    id: u64,
}

impl Subscription {
    /// Removes the listener. Calling it again does nothing. A notification already in progress
    /// still reaches the listener if it was resolved before the call.
    pub fn unsubscribe(&self) {
        if let Some(registry) = self.registry.upgrade() {
            registry
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .remove(self.id);
        }
    }
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}
