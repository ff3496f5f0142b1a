//! Compaction history and undo by branching, over random histories rich in compactions
//! (nested, overlapping, with `compaction/summary`, `session/title` and `command/done`
//! records citing them, and later turns).
//!
//! The expected views come from a naive model of the surface (a `Vec` of seqs, spliced by
//! position) that never touches `session-surface`'s surface or `session-fork`'s rewriting:
//! - `Session::compactions` reports, for each replace, the nodes the model shadowed, the view
//!   sizes before and after, and the later replace that covered it;
//! - for every compaction `k`, `uncompact(k)` derives exactly the messages of the model fold
//!   of the parent's log that skips replace `k` (a later replace whose range starts or ends
//!   at `k` starts at the first node `k` had shadowed or ends at its last), under the
//!   identity seq mapping; the child passes every checker, `verify`'s stored-log checks and
//!   the fork-prefix check, and no carried reference names an undone replace;
//! - `Undo::All` gives the view of the same log with no replace at all;
//! - for random points `from <= to`, `view_diff` applied to the model view at `from` gives
//!   the model view at `to`, whose messages (by seq) are the ones a session restored from the
//!   log up to `to` derives; every node that left is in place of a replace that entered, the
//!   sizes are the model's, and the diff is empty when `from == to`.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

use std::collections::HashMap;
use std::sync::Arc;

use conformance::r#gen::arb_compacted_history;
use conformance::invariants::{
    StoredLogChecks, check_fork_prefix, check_session, check_stored_log,
};
use proptest::prelude::*;
use session_core::json::Value;
use session_core::{Event, Events, FixedClock, SharedClock, SurfaceOp};
use session_fork::{Undo, uncompact, uncompact_events};
use session_persist::Compression;
use session_surface::{Session, ViewDiff, derive_event_message, message_chars, view_diff};

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    ProptestConfig::with_cases(cases)
}

fn clock() -> SharedClock {
    Arc::new(FixedClock::new(1_783_352_050_748))
}

fn fail(what: &str, e: &dyn std::fmt::Display) -> TestCaseError {
    TestCaseError::fail(format!("{what}: {e}"))
}

/// One replace as the naive model saw it.
#[derive(Debug, Clone, PartialEq)]
struct ModelReplace {
    seq: u64,
    shadowed: Vec<u64>,
    before: (u64, u64),
    after: (u64, u64),
    covered_by: Option<u64>,
}

/// Messages and characters of a naive node list.
fn size(events: &Events, nodes: &[u64]) -> (u64, u64) {
    let mut out = (0, 0);
    for &n in nodes {
        if let Some(m) = derive_event_message(events.get(n as usize).unwrap()) {
            out.0 += 1;
            out.1 += message_chars(m);
        }
    }
    out
}

/// The naive fold of `events`, skipping the replaces in `skip`: the final node list and the
/// replaces it applied.
fn model_fold(events: &Events, skip: &[u64]) -> (Vec<u64>, Vec<ModelReplace>) {
    let mut nodes: Vec<u64> = Vec::new();
    let mut stand_in: HashMap<u64, Vec<u64>> = HashMap::new();
    let mut replaces: Vec<ModelReplace> = Vec::new();
    for e in events {
        if !e.is_surface_event() {
            continue;
        }
        match e.surface_op() {
            Some(SurfaceOp::Append) => nodes.push(e.seq()),
            Some(SurfaceOp::Replace { start, end }) => {
                let start = stand_in.get(&start).map_or(start, |v| v[0]);
                let end = stand_in.get(&end).map_or(end, |v| *v.last().unwrap());
                let i = nodes.iter().position(|&n| n == start).unwrap();
                let j = nodes.iter().position(|&n| n == end).unwrap();
                let shadowed = nodes[i..=j].to_vec();
                if skip.contains(&e.seq()) {
                    stand_in.insert(e.seq(), shadowed);
                    continue;
                }
                let before = size(events, &nodes);
                for r in &mut replaces {
                    if shadowed.contains(&r.seq) {
                        r.covered_by = Some(e.seq());
                    }
                }
                nodes.splice(i..=j, [e.seq()]);
                replaces.push(ModelReplace {
                    seq: e.seq(),
                    shadowed,
                    before,
                    after: size(events, &nodes),
                    covered_by: None,
                });
            }
            None => {}
        }
    }
    (nodes, replaces)
}

fn messages_of(events: &Events, nodes: &[u64]) -> Vec<Value> {
    nodes
        .iter()
        .filter_map(|&n| derive_event_message(events.get(n as usize).unwrap()).cloned())
        .collect()
}

/// Seqs a carried event names in the fields uncompact rewrites.
fn references(e: &Event) -> Vec<u64> {
    let mut out = e.source_event_seqs().unwrap_or_default();
    if let Some(SurfaceOp::Replace { start, end }) = e.surface_op() {
        out.extend([start, end]);
    }
    let d = e.data();
    let seqs = |v: Option<&Value>| -> Vec<u64> {
        v.and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_u64).collect())
            .unwrap_or_default()
    };
    match e.event_type() {
        "session/title" => out.extend(seqs(d.get("messageSeqs"))),
        "compaction/summary" | "compaction/prune" => {
            out.extend(seqs(d.get("shadowedSeqs")));
            if let Some(r) = d.get("shadowedRange") {
                out.extend(r.get("start").and_then(Value::as_u64));
                out.extend(r.get("end").and_then(Value::as_u64));
            }
        }
        "command/done" => out.extend(d.get("sourceEventSeq").and_then(Value::as_u64)),
        _ => {}
    }
    out
}

/// Every checker on a child, `verify`'s stored-log checks and the fork-prefix check.
fn child_holds(parent: &Session, child: &Session, undone: &[u64]) -> Result<(), TestCaseError> {
    check_session(child).map_err(|e| fail("check_session", &e))?;
    check_fork_prefix(parent, child).map_err(|e| fail("fork prefix", &e))?;
    let events = child.events();
    let how = StoredLogChecks {
        compression: Compression::None,
        strict: true,
    };
    for (name, check) in check_stored_log(
        child.id(),
        &events,
        child.header().to_value(),
        events.len(),
        how,
    ) {
        check.map_err(|e| fail(&format!("verify {name}"), &e))?;
    }
    let first = undone.iter().min().copied().unwrap_or(0);
    for e in events.iter().skip(first as usize + 1) {
        for r in references(e) {
            prop_assert!(
                !undone.contains(&r),
                "event {} still names undone replace {}: {}",
                e.seq(),
                r,
                e.to_json()
            );
        }
    }
    Ok(())
}

/// `diff` applied to the view `before`: its left nodes dropped (the rest keep their order),
/// its entered nodes put, in order, after the node each follows (first when it follows none).
fn apply(diff: &ViewDiff, before: &[u64]) -> Vec<u64> {
    let left: Vec<u64> = diff.left.iter().map(|l| l.seq).collect();
    let entered_after = |anchor: Option<u64>| {
        diff.entered
            .iter()
            .filter(move |e| e.follows == anchor)
            .map(|e| e.seq)
    };
    let mut out: Vec<u64> = entered_after(None).collect();
    for &n in before.iter().filter(|n| !left.contains(n)) {
        out.push(n);
        out.extend(entered_after(Some(n)));
    }
    out
}

/// The view diff of `events` between `from` and `to`, checked against the model.
fn check_view_diff(
    events: &Events,
    header: &Value,
    from: u64,
    to: u64,
) -> Result<(), TestCaseError> {
    let upto = events.prefix(to as usize + 1);
    let diff = view_diff(&upto, from).map_err(|e| fail("view_diff", &e))?;
    prop_assert_eq!((diff.from, diff.to), (from, to));
    let (before, _) = model_fold(&events.prefix(from as usize + 1), &[]);
    let (after, _) = model_fold(&upto, &[]);
    let applied = apply(&diff, &before);
    prop_assert_eq!(
        &applied,
        &after,
        "applying the diff {} -> {}: {:?}",
        from,
        to,
        diff
    );
    let at_to = Session::from_restore_events(
        header.get("id").and_then(Value::as_str).unwrap_or(""),
        upto.clone(),
        header,
        clock(),
    )
    .map_err(|e| fail("restoring the log up to `to`", &e))?;
    prop_assert_eq!(
        messages_of(events, &applied),
        at_to.derive_messages().to_vec()
    );
    prop_assert_eq!(
        (diff.before.messages, diff.before.chars),
        size(events, &before)
    );
    prop_assert_eq!(
        (diff.after.messages, diff.after.chars),
        size(events, &after)
    );
    for l in &diff.left {
        let by = l.replaced_by;
        let entered = diff.entered.iter().find(|e| Some(e.seq) == by);
        prop_assert!(
            entered.is_some_and(|e| e.replaces.contains(&l.seq)),
            "seq {} left for {:?}, which did not enter in its place",
            l.seq,
            by
        );
    }
    let replaced: usize = diff.entered.iter().map(|e| e.replaces.len()).sum();
    prop_assert_eq!(
        replaced,
        diff.left.len(),
        "an entered node stands for a node that did not leave"
    );
    if from == to {
        prop_assert!(
            diff.is_empty(),
            "the diff of a point with itself: {:?}",
            diff
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn applying_the_view_diff_gives_the_later_view(
        history in arb_compacted_history(36),
        points in proptest::collection::vec((any::<prop::sample::Index>(), any::<prop::sample::Index>()), 1..6),
    ) {
        let session = history.build();
        let events = session.events();
        prop_assume!(!events.is_empty());
        let header = session.header().to_value();
        let len = events.len();
        for (a, b) in points {
            let (x, y) = (a.index(len) as u64, b.index(len) as u64);
            let (from, to) = (x.min(y), x.max(y));
            check_view_diff(&events, &header, from, to)?;
            check_view_diff(&events, &header, to, to)?;
        }
    }

    #[test]
    fn compactions_match_the_model_and_uncompact_undoes_exactly_one(
        history in arb_compacted_history(36),
    ) {
        let parent = history.build();
        let events = parent.events();
        let compactions = parent.compactions();
        let (_, model) = model_fold(&events, &[]);
        prop_assert_eq!(compactions.len(), model.len());
        for (c, m) in compactions.iter().zip(&model) {
            prop_assert_eq!(c.seq, m.seq);
            prop_assert_eq!(&c.shadowed, &m.shadowed);
            prop_assert_eq!((c.before.messages, c.before.chars), m.before);
            prop_assert_eq!((c.after.messages, c.after.chars), m.after);
            prop_assert_eq!(c.covered_by, m.covered_by);
            prop_assert_eq!(c.after.approx_tokens, c.after.chars.div_ceil(4));
            let replacing = events.get(c.seq as usize).unwrap();
            prop_assert_eq!(c.message.as_ref(), derive_event_message(replacing));
            prop_assert_eq!(c.source_event_seqs.clone(), replacing.source_event_seqs().unwrap());
        }
        let before = events.clone();
        for c in &compactions {
            let child = uncompact(&parent, &Undo::Seqs(vec![c.seq]), "child", clock())
                .map_err(|e| fail(&format!("uncompact {}", c.seq), &e))?;
            let (nodes, _) = model_fold(&events, &[c.seq]);
            prop_assert_eq!(child.surface_nodes().to_vec(), nodes.clone(), "nodes, undoing {}", c.seq);
            prop_assert_eq!(child.derive_messages().to_vec(), messages_of(&events, &nodes));
            child_holds(&parent, &child, &[c.seq])?;
            // The stored-log path builds the same child.
            let stored = uncompact_events(parent.id(), None, events.clone(), &Undo::Seqs(vec![c.seq]), "child", clock())
                .map_err(|e| fail("uncompact_events", &e))?;
            prop_assert_eq!(stored.events(), child.events());
            // Every parent event after the undone replace is carried at its own seq.
            for e in events.iter().skip(c.seq as usize + 1) {
                let carried = child.events().get(e.seq() as usize).cloned().unwrap();
                prop_assert_eq!(carried.event_type(), e.event_type());
                prop_assert_eq!(carried.time(), e.time());
            }
        }
        if !compactions.is_empty() {
            let all = uncompact(&parent, &Undo::All, "child", clock())
                .map_err(|e| fail("uncompact --all", &e))?;
            let never: Vec<u64> = events
                .iter()
                .filter(|e| e.is_append_surface_event())
                .map(Event::seq)
                .collect();
            prop_assert_eq!(all.surface_nodes().to_vec(), never.clone());
            prop_assert_eq!(all.derive_messages().to_vec(), messages_of(&events, &never));
            prop_assert!(all.compactions().is_empty());
            let undone: Vec<u64> = compactions.iter().map(|c| c.seq).collect();
            child_holds(&parent, &all, &undone)?;
        }
        // The parent is never modified.
        prop_assert_eq!(parent.events(), before);
    }
}

#[test]
fn a_seq_that_is_no_replace_is_refused_by_name() {
    let parent = Session::create("p", Some(Vec::new()), None, clock()).unwrap();
    let err = uncompact(&parent, &Undo::Seqs(vec![0]), "c", clock()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "seq 0 of session \"p\" is not a surface replace"
    );
    let err = uncompact(&parent, &Undo::All, "c", clock()).unwrap_err();
    assert_eq!(err.to_string(), "session \"p\" has no compaction to undo");
}
