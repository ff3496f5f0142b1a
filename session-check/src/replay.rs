//! The replays that [`check_incremental_derivation`](crate::check_incremental_derivation) and
//! [`check_replay_marker`](crate::check_replay_marker) compare a session with, as separate
//! steps, so that a caller running both checks (`sessionctl verify`) restores the log once and
//! holds one replay at a time.
//!
//! A replay is compared with a [`ReplayBasis`]: the parts of the session the comparison reads
//! (its log, derived messages and request header), which a caller can keep after dropping the
//! session itself, so that a session's surface, position index and transcript are not alive
//! beside a replay's.

use session_core::Events;
use session_core::json::Value;
use session_surface::{Messages, Session};

use crate::{
    Check, Violation, check_messages_project_nodes, check_replay_events, clock, events_as_values,
    first_difference,
};

/// What a replay of a session is compared with: the session's id, header, log, derived
/// messages, folded request header and first live seq. Every part is an O(1) snapshot of the
/// session's persistent state; holding a basis keeps none of the session's surface (nodes,
/// position index, Fenwick trees), transcript or checkpoints alive.
#[derive(Debug, Clone)]
pub struct ReplayBasis {
    id: std::sync::Arc<str>,
    header: Value,
    events: Events,
    messages: Messages,
    request_header: Option<Value>,
}

impl ReplayBasis {
    /// The basis of `session`.
    pub fn of(session: &Session) -> ReplayBasis {
        ReplayBasis {
            id: session.id().clone(),
            header: session.header().to_value(),
            events: session.events(),
            messages: session.derive_messages(),
            request_header: session.request_header(),
        }
    }

    /// The session's log.
    pub fn events(&self) -> &Events {
        &self.events
    }

    /// The session's derived messages.
    pub fn messages(&self) -> &Messages {
        &self.messages
    }

    /// `Session::from_restore_events` of the session's log (see [`restore_replay_shared`]).
    pub fn restore(&self) -> session_surface::Result<Session> {
        Session::from_restore_events(self.id.clone(), self.events.clone(), &self.header, clock())
    }

    /// [`check_replay_snapshot`] against this basis: the snapshot is built and dropped here.
    pub fn check_snapshot(&self) -> Check {
        let snapshot =
            Session::create_from_events(self.id.clone(), Some(self.events.clone()), None, clock())
                .map_err(|e| {
                    Violation::new("replay_marker", format!("re-seeding the log failed: {e}"))
                })?;
        self.check_replay(&snapshot)
    }

    /// [`check_replay_restored`] against this basis.
    pub fn check_restored(&self, restored: &Session) -> Check {
        self.check_replay(restored)
    }

    /// `replay` of the session's log keeps it verbatim with one end-seed marker, derives the
    /// same messages and folds the same request header.
    fn check_replay(&self, replay: &Session) -> Check {
        const NAME: &str = "replay_marker";
        check_replay_events(&self.events, &replay.events(), replay.first_live_seq())?;
        if replay.derive_messages() != self.messages {
            return Err(Violation::new(
                NAME,
                "the replay derives different messages",
            ));
        }
        if replay.request_header() != self.request_header {
            return Err(Violation::new(
                NAME,
                "the replay folds a different request header",
            ));
        }
        Ok(())
    }
}

/// `Session::from_restore` of `session`'s log (its events as JSON values, its header): the
/// fresh replay both checks compare with.
pub fn restore_replay(session: &Session) -> session_surface::Result<Session> {
    Session::from_restore(
        session.id().clone(),
        events_as_values(&session.events()),
        &session.header().to_value(),
        clock(),
    )
}

/// `Session::from_restore_events` of `session`'s log: the same restore as [`restore_replay`]
/// (the same validation in the same order, the same messages; `session-surface` keeps the two
/// paths equal, and the property tests compare them) without a second copy of the log as JSON
/// values and as newly frozen events: the replay shares the log's storage and derives its
/// surface, messages and transcript afresh. What [`check_stored_log`](crate::check_stored_log)
/// uses on whole stored logs (through [`ReplayBasis::restore`]).
pub fn restore_replay_shared(session: &Session) -> session_surface::Result<Session> {
    ReplayBasis::of(session).restore()
}

/// `messages` equal the messages `restored` derives (see [`restore_replay`]).
pub fn check_messages_match_restored(messages: &Messages, restored: &Session) -> Check {
    let fresh = restored.derive_messages();
    if &fresh != messages {
        return Err(Violation::new(
            "incremental_derivation",
            format!(
                "messages != fresh replay: {}",
                first_difference(messages, &fresh)
            ),
        ));
    }
    Ok(())
}

/// [`check_incremental_derivation`](crate::check_incremental_derivation) against a replay
/// already restored from `session`'s log ([`restore_replay`]).
pub fn check_incremental_derivation_with(session: &Session, restored: &Session) -> Check {
    let messages = session.derive_messages();
    check_messages_project_nodes(
        &messages,
        &session.surface().nodes().to_vec(),
        &session.events(),
    )?;
    check_messages_match_restored(&messages, restored)
}

/// The snapshot half of [`check_replay_marker`](crate::check_replay_marker): re-seeding
/// `session`'s log with `Session::create_from_events` replays it correctly. The snapshot is
/// dropped before this returns.
pub fn check_replay_snapshot(session: &Session) -> Check {
    ReplayBasis::of(session).check_snapshot()
}

/// The restore half of [`check_replay_marker`](crate::check_replay_marker), against a replay
/// already restored from `session`'s log ([`restore_replay`]).
pub fn check_replay_restored(session: &Session, restored: &Session) -> Check {
    ReplayBasis::of(session).check_restored(restored)
}
