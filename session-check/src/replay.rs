//! The replays that [`check_incremental_derivation`](crate::check_incremental_derivation) and
//! [`check_replay_marker`](crate::check_replay_marker) compare a session with, as separate
//! steps, so that a caller running both checks (`sessionctl verify`) restores the log once and
//! holds one replay at a time.

use session_core::Events;
use session_surface::{Messages, Session};

use crate::{
    Check, Violation, check_messages_project_nodes, check_replay_events, clock, events_as_values,
    first_difference,
};

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
/// uses on whole stored logs.
pub fn restore_replay_shared(session: &Session) -> session_surface::Result<Session> {
    Session::from_restore_events(
        session.id().clone(),
        session.events(),
        &session.header().to_value(),
        clock(),
    )
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

/// `replay` of `original`'s log keeps it verbatim with one end-seed marker, derives the same
/// messages and folds the same request header.
fn check_replay(original: &Session, events: &Events, replay: &Session) -> Check {
    const NAME: &str = "replay_marker";
    check_replay_events(events, &replay.events(), replay.first_live_seq())?;
    if replay.derive_messages() != original.derive_messages() {
        return Err(Violation::new(
            NAME,
            "the replay derives different messages",
        ));
    }
    if replay.request_header() != original.request_header() {
        return Err(Violation::new(
            NAME,
            "the replay folds a different request header",
        ));
    }
    Ok(())
}

/// The snapshot half of [`check_replay_marker`](crate::check_replay_marker): re-seeding
/// `session`'s log with `Session::create_from_events` replays it correctly. The snapshot is
/// dropped before this returns.
pub fn check_replay_snapshot(session: &Session) -> Check {
    let events = session.events();
    let snapshot =
        Session::create_from_events(session.id().clone(), Some(events.clone()), None, clock())
            .map_err(|e| {
                Violation::new("replay_marker", format!("re-seeding the log failed: {e}"))
            })?;
    check_replay(session, &events, &snapshot)
}

/// The restore half of [`check_replay_marker`](crate::check_replay_marker), against a replay
/// already restored from `session`'s log ([`restore_replay`]).
pub fn check_replay_restored(session: &Session, restored: &Session) -> Check {
    check_replay(session, &session.events(), restored)
}
