//! `SessionPreparation` (§6.3): a disposable wrapper around an unpublished session.

use std::sync::Mutex;

use session_surface::SharedSession;

type Release = Box<dyn FnOnce() + Send>;

/// An unpublished session together with a release action (for example giving back a
/// reservation), run once when the preparation is disposed or dropped.
pub struct SessionPreparation {
    session: SharedSession,
    release: Mutex<Option<Release>>,
}

impl SessionPreparation {
    /// Wraps `session`; `release` runs at most once, on [`SessionPreparation::dispose`] or drop.
    pub fn new(
        session: SharedSession,
        release: Option<Box<dyn FnOnce() + Send>>,
    ) -> SessionPreparation {
        SessionPreparation {
            session,
            release: Mutex::new(release),
        }
    }

    /// The prepared session.
    pub fn session(&self) -> &SharedSession {
        &self.session
    }

    /// Runs the release action; further calls do nothing.
    pub fn dispose(&self) {
        let release = self
            .release
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(release) = release {
            release();
        }
    }

    /// Whether the release action has run (or there was none).
    pub fn is_disposed(&self) -> bool {
        self.release
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_none()
    }
}

impl Drop for SessionPreparation {
    fn drop(&mut self) {
        self.dispose();
    }
}

impl std::fmt::Debug for SessionPreparation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionPreparation")
            .field("session", &self.session)
            .field("disposed", &self.is_disposed())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use session_core::FixedClock;
    use session_surface::Session;

    fn session() -> SharedSession {
        SharedSession::new(
            Session::create("prep", None, None, Arc::new(FixedClock::new(1))).unwrap(),
        )
    }

    #[test]
    // session-core §6.3
    fn release_runs_once_on_dispose_or_drop() {
        let count = Arc::new(AtomicUsize::new(0));
        let c = count.clone();
        let prep = SessionPreparation::new(
            session(),
            Some(Box::new(move || {
                c.fetch_add(1, Ordering::SeqCst);
            })),
        );
        assert_eq!(&*prep.session().id(), "prep");
        assert!(!prep.is_disposed());
        prep.dispose();
        prep.dispose();
        drop(prep);
        assert_eq!(count.load(Ordering::SeqCst), 1);

        let c = count.clone();
        drop(SessionPreparation::new(
            session(),
            Some(Box::new(move || {
                c.fetch_add(1, Ordering::SeqCst);
            })),
        ));
        assert_eq!(count.load(Ordering::SeqCst), 2);
        let none = SessionPreparation::new(session(), None);
        assert!(none.is_disposed());
        none.dispose();
    }
}
