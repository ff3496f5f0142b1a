//! [`check_stored_log`]: every checker that applies to one stored log, run with a bounded
//! working set (what `sessionctl verify` reports).

use session_core::json::Value;
use session_core::{Events, FixedClock, SharedClock};
use session_persist::Compression;
use session_surface::Session;
use std::sync::Arc;

use crate::{
    Check, Violation, check_closers_balance, check_incremental_derivation_with,
    check_messages_project_nodes, check_persistence_round_trip, check_replay_restored,
    check_replay_snapshot, check_seqs_contiguous, check_surface_matches_fold,
    check_transcript_holds_appends, check_turn_invariant, restore_replay_shared,
};

/// How [`check_stored_log`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoredLogChecks {
    /// The compression the persistence round trip writes with (the log's own).
    pub compression: Compression,
    /// Also check the optional turn/step invariant (`turn_invariant`).
    pub strict: bool,
}

/// Runs every checker that applies to a stored log and returns each check's name and
/// outcome, in this order: `seqs_contiguous`; then, on a session built from the log
/// (`Session::create_from_events`; `session_builds` fails when it cannot be built),
/// `surface_matches_fold`, `incremental_derivation`, `transcript_holds_appends`,
/// `replay_marker`; then `closers_balance` and `persistence_round_trip` (with a batch cut at
/// every `turn/start` and `step/start`, chunks packed) over the first `stored` events, and
/// `turn_invariant` when [`StoredLogChecks::strict`].
///
/// `events` is the log as inspected (the stored events, then any closers a load would add);
/// `header` the session header record.
///
/// Memory: the checks run one after the other and share what they can. One session is built
/// from the log; the fresh replay that `incremental_derivation` and `replay_marker` both
/// compare with is restored once ([`restore_replay_shared`](crate::restore_replay_shared):
/// `Session::from_restore_events` over the log's own events, not a second copy as JSON
/// values), after the snapshot replay is dropped; the session and the replay are dropped
/// before the round trip, which holds one loaded copy of the events and streams the file (see
/// [`check_persistence_round_trip`]).
pub fn check_stored_log(
    id: &str,
    events: &Events,
    header: Value,
    stored: usize,
    how: StoredLogChecks,
) -> Vec<(&'static str, Check)> {
    let clock: SharedClock = Arc::new(FixedClock::new(0));
    let mut checks = vec![("seqs_contiguous", check_seqs_contiguous(events))];
    match Session::create_from_events(id, Some(events.clone()), Some(header), clock) {
        Ok(session) => checks.extend(session_checks(&session)),
        Err(e) => checks.push((
            "session_builds",
            Err(Violation::new("session_builds", e.to_string())),
        )),
    }
    let prefix = events.prefix(stored);
    checks.push(("closers_balance", check_closers_balance(&prefix)));
    let cuts: Vec<usize> = prefix
        .iter()
        .enumerate()
        .filter(|(_, e)| matches!(e.event_type(), "turn/start" | "step/start"))
        .map(|(i, _)| i)
        .collect();
    checks.push((
        "persistence_round_trip",
        check_persistence_round_trip(&prefix, &cuts, how.compression, true),
    ));
    if how.strict {
        checks.push(("turn_invariant", check_turn_invariant(events)));
    }
    checks
}

/// The session-level checks of [`check_stored_log`], one replay alive at a time.
fn session_checks(session: &Session) -> [(&'static str, Check); 4] {
    let surface = check_surface_matches_fold(session);
    let transcript = check_transcript_holds_appends(session);
    let snapshot = check_replay_snapshot(session);
    let (incremental, replay) = match restore_replay_shared(session) {
        Ok(restored) => (
            check_incremental_derivation_with(session, &restored),
            snapshot.and_then(|()| check_replay_restored(session, &restored)),
        ),
        Err(e) => {
            let failed = |name| Violation::new(name, format!("restoring the log failed: {e}"));
            let projected = check_messages_project_nodes(
                &session.derive_messages(),
                &session.surface().nodes().to_vec(),
                &session.events(),
            );
            (
                projected.and_then(|()| Err(failed("incremental_derivation"))),
                snapshot.and_then(|()| Err(failed("replay_marker"))),
            )
        }
    };
    [
        ("surface_matches_fold", surface),
        ("incremental_derivation", incremental),
        ("transcript_holds_appends", transcript),
        ("replay_marker", replay),
    ]
}
