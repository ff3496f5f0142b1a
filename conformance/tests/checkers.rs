//! The invariant checkers themselves: each passes on a valid input and fails, naming its
//! invariant, on a deliberately broken one. The generators' helpers are checked too.

use std::sync::Arc;

use conformance::r#gen::{Attempt, History, InvalidCase, Mutation, START_TIME_MS};
use conformance::invariants::{
    ReplayBasis, StoredLogChecks, check_incremental_derivation_with, check_messages_match_restored,
    check_replay_restored, check_replay_snapshot, check_stored_log, restore_replay,
};
use conformance::invariants::{
    Violation, check_closers, check_closers_balance, check_fork_events, check_fork_prefix,
    check_incremental_derivation, check_messages_match_replay, check_messages_project_nodes,
    check_nodes_match_fold, check_persistence_round_trip, check_replay_events, check_replay_marker,
    check_seqs_contiguous, check_session, check_surface_matches_fold, check_transcript_holds,
    check_transcript_holds_appends, check_turn_invariant, open_turn, split_batches,
};
use session_core::event::seq_value;
use session_core::json::Value;
use session_core::{Event, Events, FixedClock, SharedClock};
use session_fork::fork_session;
use session_persist::Compression;
use session_repair::interrupted_turn_closers;
use session_surface::{Draft, Messages, Session, Transcript};

fn clock() -> SharedClock {
    Arc::new(FixedClock::new(START_TIME_MS))
}

fn v(text: &str) -> Value {
    Value::parse(text).expect("test JSON")
}

fn ev(seq: u64, ty: &str, data: &str) -> Event {
    Event::appended(ty, seq, 7, v(data), None, None)
}

fn user(id: &str) -> Draft {
    Draft::new(
        "user/message",
        v(&format!(
            r#"{{"id":"{id}","role":"user","content":[{{"type":"text","text":"{id}"}}],"source":{{"kind":"user"}}}}"#
        )),
    )
    .append_op()
}

fn turn_start(turn: u64) -> Draft {
    Draft::new("turn/start", v(&format!(r#"{{"turn":{turn}}}"#)))
}

fn turn_end(turn: u64) -> Draft {
    Draft::new(
        "turn/end",
        v(&format!(
            r#"{{"turn":{turn},"reason":{{"kind":"completed"}}}}"#
        )),
    )
}

/// turn 1 { user a, user b }, user c replacing a..b, turn 2 { user d } (closed).
fn sample() -> History {
    History::from_drafts(
        "sample",
        &[
            turn_start(1),
            user("a"),
            user("b"),
            turn_end(1),
            Draft::new(
                "user/message",
                v(r#"{"id":"c","role":"user","content":[],"source":{"kind":"user"}}"#),
            )
            .replace_op(1, 2)
            .sources(&[1, 2]),
            turn_start(2),
            user("d"),
            turn_end(2),
        ],
    )
}

fn assert_violates(check: Result<(), Violation>, invariant: &str, detail: &str) {
    let v = check.expect_err("the checker accepted a broken input");
    assert_eq!(v.invariant, invariant, "{v}");
    assert!(v.detail.contains(detail), "{v}");
}

#[test]
fn a_valid_session_passes_every_checker() {
    let session = sample().build();
    check_session(&session).unwrap();
    check_replay_marker(&session).unwrap();
    check_turn_invariant(&session.events()).unwrap();
    assert_eq!(session.surface().nodes().to_vec(), vec![4, 6]);
    assert_eq!(sample().model_nodes(), vec![4, 6]);
}

#[test]
fn seqs_contiguous_fails_on_a_gap() {
    let events = Events::from_vec(vec![ev(0, "x", "null"), ev(2, "x", "null")]);
    assert_violates(
        check_seqs_contiguous(&events),
        "seqs_contiguous",
        "event at index 1 has seq 2",
    );
    check_seqs_contiguous(&events.prefix(1)).unwrap();
}

#[test]
fn surface_fold_fails_on_a_tampered_node_list() {
    let session = sample().build();
    let events = session.events();
    check_surface_matches_fold(&session).unwrap();
    check_nodes_match_fold(&[4, 6], 1, &events).unwrap();
    assert_violates(
        check_nodes_match_fold(&[6, 4], 1, &events),
        "surface_matches_fold",
        "live nodes [6, 4] != folded nodes [4, 6]",
    );
    assert_violates(
        check_nodes_match_fold(&[1, 2, 6], 1, &events),
        "surface_matches_fold",
        "folded nodes",
    );
    assert_violates(
        check_nodes_match_fold(&[4, 6], 0, &events),
        "surface_matches_fold",
        "replace generation 0 != 1 replacements",
    );
    // A log the fold refuses (a replace citing too little) is reported, not a panic.
    let bad = Events::from_vec(vec![
        Event::appended("user/message", 0, 0, v("{}"), None, Some(v(r#""append""#))),
        Event::appended(
            "user/message",
            1,
            0,
            v("{}"),
            None,
            Some(v(r#"{"op":"replace","start":0,"end":0}"#)),
        ),
    ]);
    assert_violates(
        check_nodes_match_fold(&[1], 1, &bad),
        "surface_matches_fold",
        "missing 0",
    );
}

#[test]
fn incremental_derivation_fails_on_tampered_messages() {
    let session = sample().build();
    let events = session.events();
    let nodes = session.surface().nodes().to_vec();
    let messages = session.derive_messages();
    check_incremental_derivation(&session).unwrap();
    check_messages_project_nodes(&messages, &nodes, &events).unwrap();
    let header = session.header().to_value();
    check_messages_match_replay(&messages, &events, &header).unwrap();

    let mut reversed = messages.to_vec();
    reversed.reverse();
    let reversed: Messages = reversed.into_iter().collect();
    assert_violates(
        check_messages_project_nodes(&reversed, &nodes, &events),
        "incremental_derivation",
        "first difference at 0",
    );
    assert_violates(
        check_messages_match_replay(&reversed, &events, &header),
        "incremental_derivation",
        "messages != fresh replay",
    );
    let stale: Messages = messages.iter().take(1).cloned().collect();
    assert_violates(
        check_messages_project_nodes(&stale, &nodes, &events),
        "incremental_derivation",
        "1 vs 2 messages",
    );
    assert_violates(
        check_messages_project_nodes(&messages, &[4, 60], &events),
        "incremental_derivation",
        "node 60 has no event",
    );
}

#[test]
fn transcript_check_fails_on_a_transcript_that_misses_appends() {
    let session = sample().build();
    let events = session.events();
    check_transcript_holds_appends(&session).unwrap();
    // The compaction hid a and b from the surface, but the transcript keeps them.
    assert_eq!(session.transcript().len(), 4);
    let partial = Transcript::from_events(events.prefix(2).iter()).unwrap();
    assert_violates(
        check_transcript_holds(&partial, &events),
        "transcript_holds_appends",
        "surface event 2 is missing from the transcript",
    );
    let other = History::from_drafts("other", &[user("z")]).build();
    assert_violates(
        check_transcript_holds(&other.transcript(), &events),
        "transcript_holds_appends",
        "transcript entry for seq 0 found where seq 1 was expected",
    );
    let full = session.transcript();
    assert_violates(
        check_transcript_holds(&full, &events.prefix(3)),
        "transcript_holds_appends",
        "beyond the log",
    );
}

#[test]
fn closers_check_fails_on_wrong_closers() {
    let open = History::from_drafts("open", &[turn_start(1), user("a")]).build();
    let events = open.events();
    assert_eq!(open_turn(&events.to_vec()), Some(1));
    check_closers_balance(&events).unwrap();
    let closers = interrupted_turn_closers(events.iter());
    check_closers(&events, &closers).unwrap();

    assert_violates(
        check_closers(&events, &[]),
        "closers_balance",
        "turn 1 is still open after the closers",
    );
    let late = Event::appended(
        "turn/end",
        5,
        START_TIME_MS,
        v(r#"{"turn":1,"reason":{"kind":"interrupted"}}"#),
        None,
        None,
    );
    assert_violates(
        check_closers(&events, &[late]),
        "closers_balance",
        "closer 0 has seq 5, expected 2",
    );
    let retimed = Event::appended(
        "turn/end",
        2,
        0,
        v(r#"{"turn":1,"reason":{"kind":"interrupted"}}"#),
        None,
        None,
    );
    assert_violates(
        check_closers(&events, &[retimed]),
        "closers_balance",
        "closer 0 has time 0",
    );
    // A log with a seq gap: the closers follow the last seq, not the length.
    let gapped = Events::from_vec(vec![
        ev(0, "turn/start", r#"{"turn":1}"#),
        ev(5, "x", "null"),
    ]);
    assert_violates(
        check_closers_balance(&gapped),
        "closers_balance",
        "closer 0 has seq 6, expected 2",
    );
}

#[test]
fn fork_prefix_fails_on_a_child_that_differs() {
    let parent = sample().build();
    let child = fork_session(&parent, Some(&seq_value(3)), "child", clock()).unwrap();
    check_fork_prefix(&parent, &child).unwrap();
    check_fork_events(&parent.events(), &child.events(), 4).unwrap();

    // A "child" whose inherited event 2 is not the parent's.
    let mut seed: Vec<Value> = parent
        .events()
        .prefix(4)
        .iter()
        .map(Event::to_value)
        .collect();
    let altered = parent.events().get(2).unwrap().to_value();
    let altered = altered.as_object().unwrap().with("time", Value::from(1u8));
    seed[2] = Value::Object(altered);
    let header =
        v(r#"{"version":0,"id":"forged","createdAt":1,"parentSession":"sample","seedLength":4}"#);
    let forged = Session::create("forged", Some(seed), Some(header), clock()).unwrap();
    assert_violates(
        check_fork_prefix(&parent, &forged),
        "fork_prefix",
        "event 2 differs",
    );
    // Missing lineage.
    let orphan = Session::create(
        "orphan",
        Some(
            parent
                .events()
                .prefix(4)
                .iter()
                .map(Event::to_value)
                .collect(),
        ),
        None,
        clock(),
    )
    .unwrap();
    assert_violates(
        check_fork_prefix(&parent, &orphan),
        "fork_prefix",
        "child parentSession None",
    );
    // No end-seed marker after the inherited prefix.
    assert_violates(
        check_fork_events(&parent.events(), &parent.events(), 4),
        "fork_prefix",
        "child event 4 is not the end-seed marker",
    );
    assert_violates(
        check_fork_events(&parent.events(), &child.events(), 40),
        "fork_prefix",
        "seedLength 40 exceeds",
    );
}

#[test]
fn replay_check_fails_on_missing_or_extra_markers() {
    let session = sample().build();
    let events = session.events();
    let replay = Session::create(
        "r",
        Some(events.iter().map(Event::to_value).collect()),
        None,
        clock(),
    )
    .unwrap();
    check_replay_events(&events, &replay.events(), replay.first_live_seq()).unwrap();
    assert_violates(
        check_replay_events(&events, &events, 8),
        "replay_marker",
        "replay has 8 events, expected 9",
    );
    assert_violates(
        check_replay_events(&events, &replay.events(), 9),
        "replay_marker",
        "firstLiveSeq 9 != seed length 8",
    );
    let mut twice = replay.events().to_vec();
    twice.push(Event::appended(
        "session/end-seed",
        9,
        0,
        v("{}"),
        None,
        None,
    ));
    let twice: Events = twice.into_iter().collect();
    assert_violates(
        check_replay_events(&events, &twice, 8),
        "replay_marker",
        "replay has 10 events, expected 9",
    );
    let mut other = events.to_vec();
    other.push(ev(8, "x", "{}"));
    let other: Events = other.into_iter().collect();
    assert_violates(
        check_replay_events(&events, &other, 8),
        "replay_marker",
        "event 8 is not a `session/end-seed` marker",
    );
    // A log that already ends in the marker replays unchanged.
    check_replay_events(&replay.events(), &replay.events(), 9).unwrap();
}

#[test]
fn turn_invariant_fails_on_a_skipped_turn() {
    let events = Events::from_vec(vec![ev(0, "turn/start", r#"{"turn":2}"#)]);
    assert_violates(
        check_turn_invariant(&events),
        "turn_invariant",
        "turn/start expected turn 1, got 2",
    );
}

#[test]
fn invalid_case_attempt_reports_acceptance_and_changes() {
    // A mutation that is in fact valid: the attempt sees no error and a change.
    let case = InvalidCase {
        setup: sample(),
        mutation: Mutation::Append(user("e")),
        expected_error: "anything".to_owned(),
    };
    let Attempt { error, changed } = case.attempt();
    assert_eq!(error, None);
    assert!(changed.unwrap().contains("seq 8 -> 9"));
    // A real refusal changes nothing.
    let case = InvalidCase {
        setup: sample(),
        mutation: Mutation::Append(user("e").surface_op_value(Value::from("invalid"))),
        expected_error: String::new(),
    };
    assert_eq!(
        case.attempt(),
        Attempt {
            error: Some("session event \"user/message\" carries an invalid surfaceOp".to_owned()),
            changed: None,
        }
    );
    let case = InvalidCase {
        setup: sample(),
        mutation: Mutation::SeedSeq { index: 3, seq: 9 },
        expected_error: String::new(),
    };
    assert_eq!(
        case.attempt().error.as_deref(),
        Some("seed event at index 3 has seq 9 (expected 3); seed must be contiguous from 0")
    );
    let case = InvalidCase {
        setup: sample(),
        mutation: Mutation::SeedExtraKey {
            index: 0,
            key: "extra".to_owned(),
        },
        expected_error: String::new(),
    };
    assert_eq!(
        case.attempt().error.as_deref(),
        Some("seed event at index 0 has an invalid event envelope")
    );
}

#[test]
fn history_helpers() {
    let h = sample();
    assert_eq!(h.len(), 8);
    assert_eq!(h.closed_turn_boundaries(), vec![3, 4, 7]);
    assert!(!h.ends_in_open_turn());
    let cut = h.prefix(6);
    assert!(cut.ends_in_open_turn());
    assert_eq!(cut.model_nodes(), vec![4]);
    assert_eq!(cut.build().seq(), 6);
    let refused = History::from_drafts("bad", &[user("a").replace_op(0, 0)]);
    let err = refused.try_build().unwrap_err();
    assert_eq!(err.index, 0);
    assert_eq!(
        err.error,
        "surface replace: start seq 0 not found in surface"
    );
}

#[test]
fn persistence_round_trip_passes_and_fails() {
    let events = sample().build().events();
    for compression in [Compression::None, Compression::Zstd] {
        for packed in [false, true] {
            check_persistence_round_trip(&events, &[2, 5], compression, packed).unwrap();
        }
    }
    check_persistence_round_trip(&Events::default(), &[], Compression::Zstd, true).unwrap();
    // A log with a seq gap cannot come back as written.
    let gapped = Events::from_vec(vec![ev(0, "x", "null"), ev(2, "x", "null")]);
    let v = check_persistence_round_trip(&gapped, &[], Compression::None, false).unwrap_err();
    assert_eq!(v.invariant, "persistence_round_trip", "{v}");
}

#[test]
fn batches_split_at_cut_points() {
    let events: Vec<Event> = (0..5).map(|i| ev(i, "x", "null")).collect();
    let sizes = |cuts: &[usize]| -> Vec<usize> {
        split_batches(&events, cuts).iter().map(Vec::len).collect()
    };
    assert_eq!(sizes(&[]), vec![5]);
    assert_eq!(sizes(&[3, 1, 3, 0, 9]), vec![1, 2, 2]);
    assert!(split_batches(&[], &[1]).is_empty());
}

#[test]
fn stored_unknown_types_are_refused_on_the_read_path() {
    // persistence §1.4 (unknown type text), §1.6 step 4
    let drafts = sample().drafts();
    for (zstd, file) in [(false, "session.jsonl"), (true, "session.jsonl.zstd")] {
        let case = InvalidCase {
            setup: History::from_drafts("invalid", &drafts),
            mutation: Mutation::StoredUnknownType {
                ty: "context/message".to_owned(),
                zstd,
            },
            expected_error: String::new(),
        };
        let attempt = case.attempt();
        assert_eq!(
            attempt.error.as_deref(),
            Some(
                format!(
                    "session \"invalid\" contains event type \"context/message\" (seq 8) unknown to this harness and not marked ignorable; refusing to interpret the log \u{2014} it was likely written by a newer harness (raw log: <root>/--conformance-invalid--/invalid/{file})"
                )
                .as_str()
            )
        );
        assert_eq!(attempt.changed, None);
    }
    // An earlier plugin event of an unknown type is appended as ignorable, so the planted
    // one is named.
    let mut drafts = sample().drafts();
    drafts.push(Draft::new("x-plugin/event", Value::Null).ignorable());
    let case = InvalidCase {
        setup: History::from_drafts("invalid", &drafts),
        mutation: Mutation::StoredUnknownType {
            ty: "future/thing".to_owned(),
            zstd: false,
        },
        expected_error: String::new(),
    };
    assert!(
        case.attempt()
            .error
            .unwrap()
            .starts_with("session \"invalid\" contains event type \"future/thing\" (seq 9) ")
    );
}

/// The shared-replay halves `verify` uses catch what the self-contained checkers catch: tampered
/// messages against the one restored replay, and a replay of another log.
#[test]
fn shared_replay_checks_fail_on_tampered_input() {
    let session = sample().build();
    let restored = restore_replay(&session).unwrap();
    check_incremental_derivation_with(&session, &restored).unwrap();
    check_replay_snapshot(&session).unwrap();
    check_replay_restored(&session, &restored).unwrap();

    let mut reversed = session.derive_messages().to_vec();
    reversed.reverse();
    let reversed: Messages = reversed.into_iter().collect();
    assert_violates(
        check_messages_match_restored(&reversed, &restored),
        "incremental_derivation",
        "messages != fresh replay",
    );
    // A replay restored from a different log is not this session's replay.
    let other = Session::from_restore(
        "sample",
        session
            .events()
            .iter()
            .take(3)
            .map(Event::to_value)
            .collect(),
        &session.header().to_value(),
        clock(),
    )
    .unwrap();
    assert_violates(
        check_replay_restored(&session, &other),
        "replay_marker",
        "replay has",
    );
    assert_violates(
        check_incremental_derivation_with(&session, &other),
        "incremental_derivation",
        "messages != fresh replay",
    );
}

/// A replay basis outlives its session (what `check_stored_log` keeps while the replays are
/// built) and still tells this session's replays from another log's.
#[test]
fn replay_basis_checks_replays_after_the_session_is_dropped() {
    let session = sample().build();
    let messages = session.derive_messages();
    let basis = ReplayBasis::of(&session);
    let other = Session::from_restore_events(
        "sample",
        session.events().prefix(3),
        &session.header().to_value(),
        clock(),
    )
    .unwrap();
    drop(session);
    assert_eq!(basis.messages(), &messages);
    basis.check_snapshot().unwrap();
    let restored = basis.restore().unwrap();
    basis.check_restored(&restored).unwrap();
    check_messages_match_restored(basis.messages(), &restored).unwrap();
    assert_violates(basis.check_restored(&other), "replay_marker", "replay has");
    assert_violates(
        check_messages_match_restored(basis.messages(), &other),
        "incremental_derivation",
        "messages != fresh replay",
    );
}

/// `check_stored_log` (what `sessionctl verify` runs) reports every check by name, in order,
/// passes a valid log, and fails a log with a seq gap in each check that sees the gap.
#[test]
fn stored_log_checks_name_every_check_and_catch_a_gap() {
    let session = sample().build();
    let events = session.events();
    let header = session.header().to_value();
    let how = StoredLogChecks {
        compression: Compression::Zstd,
        strict: true,
    };
    let checks = check_stored_log("sample", &events, header.clone(), events.len(), how);
    let names: Vec<&str> = checks.iter().map(|(n, _)| *n).collect();
    assert_eq!(
        names,
        [
            "seqs_contiguous",
            "surface_matches_fold",
            "incremental_derivation",
            "transcript_holds_appends",
            "replay_marker",
            "closers_balance",
            "persistence_round_trip",
            "turn_invariant",
        ]
    );
    for (name, check) in &checks {
        assert!(check.is_ok(), "{name}: {check:?}");
    }
    let lenient = StoredLogChecks {
        compression: Compression::None,
        strict: false,
    };
    assert_eq!(
        check_stored_log("sample", &events, header.clone(), events.len(), lenient).len(),
        7
    );

    let gapped = Events::from_vec(vec![ev(0, "x", "null"), ev(2, "x", "null")]);
    let checks = check_stored_log("sample", &gapped, header, 2, lenient);
    let failed: Vec<&str> = checks
        .iter()
        .filter(|(_, c)| c.is_err())
        .map(|(n, _)| *n)
        .collect();
    assert_eq!(
        failed,
        [
            "seqs_contiguous",
            "session_builds",
            "closers_balance",
            "persistence_round_trip"
        ],
        "{checks:?}"
    );
}
