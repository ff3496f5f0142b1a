//! [`check_stored_log`]: every checker that applies to one stored log, run with a bounded
//! working set (what `sessionctl verify` reports).

use session_core::json::Value;
use session_core::{Events, FixedClock, SharedClock};
use session_persist::Compression;
use session_surface::Session;
use std::sync::Arc;

use crate::{
    Check, ReplayBasis, Violation, check_closers_balance, check_messages_match_restored,
    check_messages_project_nodes, check_nodes_match_fold, check_persistence_round_trip,
    check_seqs_contiguous, check_surface_positions, check_transcript_holds_appends,
    check_turn_invariant,
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
/// from the log, sharing its storage (`Session::create_from_events` takes the events as they
/// are); the checks that read its surface and transcript run first, then only its node list
/// and [`ReplayBasis`] (log, messages, request header) are kept and the session is dropped.
/// The fresh fold of the log, the snapshot replay and the restored replay
/// ([`ReplayBasis::restore`]: `Session::from_restore_events` over the log's own events, not a
/// second copy as JSON values) are then alive one at a time, each sharing the log's storage.
/// The closers are checked on a log that continues from the stored one, and the round trip
/// writes and reads the log back a batch at a time (see [`check_persistence_round_trip`]).
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
        Ok(session) => checks.extend(session_checks(session)),
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

/// The session-level checks of [`check_stored_log`], one replay alive at a time. The checks
/// that read the session's own derived state run first; then only its node list, replace
/// generation and [`ReplayBasis`] are kept and the session is dropped, before the fresh fold
/// of the log is compared with its nodes, the snapshot replay is built and dropped, and then
/// the restored replay.
fn session_checks(session: Session) -> [(&'static str, Check); 4] {
    let nodes = session.surface().nodes().to_vec();
    let generation = session.replace_generation();
    let positions = check_surface_positions(&session, &nodes);
    let transcript = check_transcript_holds_appends(&session);
    let basis = ReplayBasis::of(&session);
    let projected = check_messages_project_nodes(basis.messages(), &nodes, &session.events());
    drop(session);
    let surface = check_nodes_match_fold(&nodes, generation, basis.events()).and(positions);
    drop(nodes);
    let snapshot = basis.check_snapshot();
    let (incremental, replay) = match basis.restore() {
        Ok(restored) => (
            projected.and_then(|()| check_messages_match_restored(basis.messages(), &restored)),
            snapshot.and_then(|()| basis.check_restored(&restored)),
        ),
        Err(e) => {
            let failed = |name| Violation::new(name, format!("restoring the log failed: {e}"));
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
