//! A fork of a live session shares the parent's validated prefix and its derived state at the
//! boundary (`fork_session`); the result must be exactly the session the validating path
//! builds from the parent's events as a foreign seed (`fork_events`): the same events, surface
//! nodes and positions, messages, header, request header and context, transcript, closers and
//! tool pairing, and the same behaviour on later appends and replaces.
//!
//! Each property runs `PROPTEST_CASES` cases (default 24).

use std::sync::Arc;

use conformance::r#gen::json::respell_numbers;
use conformance::r#gen::{History, arb_history, arb_history_of};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use session_core::event::seq_value;
use session_core::json::Value;
use session_core::{Event, FixedClock, SharedClock};
use session_fork::{fork_events, fork_session};
use session_repair::{ToolPairing, interrupted_turn_closers};
use session_surface::{Draft, Session};

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24);
    ProptestConfig {
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "proptest-regressions/fork_sharing.txt",
        ))),
        ..ProptestConfig::with_cases(cases)
    }
}

fn clock() -> SharedClock {
    Arc::new(FixedClock::new(7_000))
}

fn fail(context: &str, what: impl std::fmt::Display) -> TestCaseError {
    TestCaseError::fail(format!("{context}: {what}"))
}

fn same_event(a: &Event, b: &Event) -> bool {
    a.ptr_eq(b) || a.to_json() == b.to_json()
}

/// Every observable part of two sessions is equal.
fn assert_same(shared: &Session, validated: &Session, context: &str) -> Result<(), TestCaseError> {
    let (a, b) = (shared.events(), validated.events());
    if a.len() != b.len() {
        return Err(fail(context, format!("{} events != {}", a.len(), b.len())));
    }
    if let Some((x, y)) = a.iter().zip(b.iter()).find(|(x, y)| !same_event(x, y)) {
        return Err(fail(
            context,
            format!("event {}: {} != {}", x.seq(), x.to_json(), y.to_json()),
        ));
    }
    prop_assert_eq!(shared.id(), validated.id(), "{}", context);
    prop_assert_eq!(shared.header(), validated.header(), "{}", context);
    prop_assert_eq!(shared.seq(), validated.seq(), "{}", context);
    prop_assert_eq!(
        shared.first_live_seq(),
        validated.first_live_seq(),
        "{}",
        context
    );
    prop_assert_eq!(
        shared.surface_nodes(),
        validated.surface_nodes(),
        "{}",
        context
    );
    prop_assert_eq!(
        shared.replace_generation(),
        validated.replace_generation(),
        "{}",
        context
    );
    prop_assert_eq!(
        shared.surface().next_seq(),
        validated.surface().next_seq(),
        "{}",
        context
    );
    for seq in 0..=shared.seq() {
        prop_assert_eq!(
            shared.surface().position(seq),
            validated.surface().position(seq),
            "{} position of {}",
            context,
            seq
        );
    }
    prop_assert_eq!(
        shared.derive_messages(),
        validated.derive_messages(),
        "{}",
        context
    );
    prop_assert_eq!(
        shared.request_header(),
        validated.request_header(),
        "{}",
        context
    );
    prop_assert_eq!(
        shared.request_context(),
        validated.request_context(),
        "{}",
        context
    );
    prop_assert_eq!(shared.transcript(), validated.transcript(), "{}", context);
    let closers = |s: &Session| -> Vec<String> {
        interrupted_turn_closers(s.events().iter())
            .iter()
            .map(Event::to_json)
            .collect()
    };
    prop_assert_eq!(closers(shared), closers(validated), "{}", context);
    let (pa, pb) = (ToolPairing::new(shared), ToolPairing::new(validated));
    prop_assert_eq!(pa.balanced().ok(), pb.balanced().ok(), "{}", context);
    for seq in &shared.surface_nodes() {
        prop_assert_eq!(
            pa.balanced_before(seq).ok(),
            pb.balanced_before(seq).ok(),
            "{}",
            context
        );
        prop_assert_eq!(
            pa.balanced_after(seq).ok(),
            pb.balanced_after(seq).ok(),
            "{}",
            context
        );
    }
    Ok(())
}

fn user(id: &str) -> Value {
    Value::object([
        ("id", Value::from(id)),
        ("role", Value::from("user")),
        ("content", Value::array([])),
        ("source", Value::object([("kind", Value::from("user"))])),
    ])
}

/// Appends the same drafts to both children (a message, then a compaction of the whole
/// surface) and compares them after each: the shared derived state must behave like a fresh
/// one, not only look like it.
fn continue_both(
    shared: &mut Session,
    validated: &mut Session,
    context: &str,
) -> Result<(), TestCaseError> {
    let message = Draft::new("user/message", user("after-fork")).append_op();
    let a = shared
        .append(message.clone())
        .map_err(|e| fail(context, e))?;
    let b = validated.append(message).map_err(|e| fail(context, e))?;
    prop_assert_eq!(a.to_json(), b.to_json(), "{}", context);
    assert_same(shared, validated, context)?;
    let nodes = shared.surface_nodes().to_vec();
    if let (Some(&first), Some(&last)) = (nodes.first(), nodes.last()) {
        let compaction = Draft::new("user/message", user("summary"))
            .replace_op(first, last)
            .sources(&nodes);
        let a = shared
            .append(compaction.clone())
            .map_err(|e| fail(context, e))?;
        let b = validated.append(compaction).map_err(|e| fail(context, e))?;
        prop_assert_eq!(a.to_json(), b.to_json(), "{}", context);
        assert_same(shared, validated, context)?;
    }
    Ok(())
}

/// Forks `parent` at every closed-turn boundary (and with no boundary) both ways and compares
/// the children, then continues them.
fn check_every_boundary(parent: &Session, history: &History) -> Result<(), TestCaseError> {
    let mut boundaries: Vec<Option<u64>> = history
        .closed_turn_boundaries()
        .into_iter()
        .map(Some)
        .collect();
    boundaries.push(None);
    for b in boundaries {
        let context = format!("fork of {} at {b:?}", parent.id());
        let boundary = b.map(seq_value);
        let shared = fork_session(parent, boundary.as_ref(), "child", clock());
        let validated = fork_events(
            parent.id(),
            parent.header().cwd.as_deref(),
            &parent.events(),
            boundary.as_ref(),
            "child",
            clock(),
        );
        let (mut shared, mut validated) = match (shared, validated) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(a), Err(b)) => {
                prop_assert_eq!(a.to_string(), b.to_string(), "{}", context);
                continue;
            }
            (a, b) => {
                return Err(fail(
                    &context,
                    format!("outcomes differ: {:?} / {:?}", a.err(), b.err()),
                ));
            }
        };
        assert_same(&shared, &validated, &context)?;
        continue_both(&mut shared, &mut validated, &context)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    /// Live parents, short and long (long ones cross several derived-state checkpoints).
    // session-core §8.6 #136-#138
    #[test]
    fn shared_fork_equals_validating_fork(history in arb_history()) {
        let parent = history.build();
        check_every_boundary(&parent, &history)?;
    }

    /// Long live parents: forks between checkpoints bring the derived state forward.
    // session-core §8.6 #136-#138
    #[test]
    fn shared_fork_equals_validating_fork_long(history in arb_history_of(600)) {
        let parent = history.build();
        check_every_boundary(&parent, &history)?;
        // A fork of a fork (the child's inherited checkpoints are the parent's).
        if let Some(&b) = history.closed_turn_boundaries().last() {
            let child = fork_session(&parent, Some(&seq_value(b)), "child", clock())
                .map_err(|e| fail("child", e))?;
            for g in [b + 1, b / 2] {
                if history.closed_turn_boundaries().contains(&g) || g == b + 1 {
                    let boundary = seq_value(g);
                    let shared = fork_session(&child, Some(&boundary), "grandchild", clock());
                    let validated = fork_events(
                        child.id(),
                        None,
                        &child.events(),
                        Some(&boundary),
                        "grandchild",
                        clock(),
                    );
                    match (shared, validated) {
                        (Ok(a), Ok(b)) => assert_same(&a, &b, "grandchild")?,
                        (Err(a), Err(b)) => prop_assert_eq!(a.to_string(), b.to_string()),
                        (a, b) => return Err(fail("grandchild", format!("{:?} / {:?}", a.err(), b.err()))),
                    }
                }
            }
        }
    }

    /// Restored parents: events kept as read (possibly with non-canonical number spellings,
    /// which a snapshot seed rewrites) give the same child as the validating path.
    // session-core §8.6 #136-#138, §2.8
    #[test]
    fn shared_fork_of_restored_parent(
        history in arb_history_of(200),
        picks in proptest::collection::vec(any::<u8>(), 0..8),
    ) {
        let live = history.build();
        let values: Vec<Value> = live
            .events()
            .iter()
            .map(|e| respell_numbers(&e.to_value(), &picks))
            .collect();
        let header = live.header().to_value();
        let parent = Session::from_restore(live.id().clone(), values, &header, clock())
            .map_err(|e| fail("restore", e))?;
        check_every_boundary(&parent, &history)?;
    }
}
