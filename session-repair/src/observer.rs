//! The invariant as a session observer: a pre-commit veto whose transition applies on commit.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use session_core::{Event, Events};
use session_surface::{BoxError, Session, SessionObserver, SharedSession};

use crate::invariant::{Invariant, InvariantError, Trace};

#[derive(Default)]
struct State {
    invariant: Invariant,
    /// The transition staged by the last pre-commit check of each session, with the candidate
    /// it was computed for.
    staged: HashMap<Arc<str>, (Event, Trace)>,
}

/// The turn/step [`Invariant`] wired into the publication protocol of
/// [`SharedSession`](session_surface::SharedSession).
///
/// - [`dispatch`](SessionObserver::dispatch) (pre-commit) checks the candidate against a
///   *staged copy* of the session's trace; a violation vetoes the append with an
///   [`InvariantError`].
/// - [`event`](SessionObserver::event) (post-commit) applies the staged transition. A veto by
///   a later pre-commit hook therefore never advances the trace, and a failing post-commit
///   listener elsewhere does not stop it from advancing.
///
/// One observer can watch any number of sessions; each is tracked independently by id. A
/// session it has not seen yet is tracked on first contact by replaying its log, which is how
/// a freshly loaded invariant rebuilds open turns and steps. Call [`track`](Self::track) when a
/// session is created to check its seed and report a violation to the creator. Unobserving
/// removes every check; [`forget`](Self::forget) drops one session's trace when it is disposed.
#[derive(Default)]
pub struct InvariantObserver {
    state: Mutex<State>,
}

impl InvariantObserver {
    /// An observer that tracks no session yet.
    pub fn new() -> InvariantObserver {
        InvariantObserver::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// (Re)builds the trace of `session` from its whole log. A violation leaves the session
    /// untracked and is returned, so that its creation can be rolled back.
    pub fn track(&self, session: &Session) -> Result<(), InvariantError> {
        self.track_events(session.id().clone(), &session.events())
    }

    /// [`track`](Self::track) for a shared session.
    pub fn track_shared(&self, session: &SharedSession) -> Result<(), InvariantError> {
        self.track_events(session.id(), &session.events())
    }

    fn track_events(&self, id: Arc<str>, events: &Events) -> Result<(), InvariantError> {
        // Replay outside the lock: it is O(log length).
        let trace = Trace::replay(events.iter());
        let mut state = self.lock();
        state.staged.remove(&id);
        state.invariant.forget(&id);
        state.invariant.apply(id, trace?);
        Ok(())
    }

    /// Stops tracking session `id`.
    pub fn forget(&self, id: &str) {
        let mut state = self.lock();
        state.staged.remove(id);
        state.invariant.forget(id);
    }

    /// Stops tracking every session.
    pub fn clear(&self) {
        let mut state = self.lock();
        state.staged.clear();
        state.invariant.clear();
    }

    /// A copy of the trace of session `id`, if it is tracked.
    pub fn trace(&self, id: &str) -> Option<Trace> {
        self.lock().invariant.trace(id).cloned()
    }

    fn is_tracked(&self, id: &str) -> bool {
        self.lock().invariant.is_tracked(id)
    }
}

impl SessionObserver for InvariantObserver {
    fn dispatch(&self, session: &Session, candidate: &Event) -> Result<(), BoxError> {
        let id = session.id();
        if !self.is_tracked(id) {
            self.track(session)?;
        }
        let mut state = self.lock();
        let staged = state.invariant.stage(id, candidate)?;
        state.staged.insert(id.clone(), (candidate.clone(), staged));
        Ok(())
    }

    fn event(&self, session: &SharedSession, event: &Event) -> Result<(), BoxError> {
        let id = session.id();
        let mut state = self.lock();
        match state.staged.remove(&id) {
            Some((candidate, staged)) if candidate.ptr_eq(event) => {
                state.invariant.apply(id, staged);
                Ok(())
            }
            _ if state.invariant.is_tracked(&id) => {
                state.invariant.check(&id, event)?;
                Ok(())
            }
            _ => {
                // Never seen: the log (which already holds the event) is the whole story.
                drop(state);
                self.track_shared(session)?;
                Ok(())
            }
        }
    }
}
