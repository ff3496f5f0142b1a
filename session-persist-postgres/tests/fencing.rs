//! Fencing: racing writers, a writer whose lease was taken over, and connections cut while a
//! commit is in flight. Each test runs in a schema of its own.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

mod common;

use std::time::Duration;

use common::{Cut, LeasePair, TestSchema, server_available};
use session_core::json::Value;
use session_core::{Event, SessionHeader};
use session_persist_postgres::{Error, PostgresBackend};

fn meta(id: &str) -> SessionHeader {
    let mut m = SessionHeader::new(id, 1_000);
    m.cwd = Some("/fencing".into());
    m
}

/// A batch of `len` events from `first`, tagged with the writer and round. Even rounds are
/// text deltas (packed rows from 3 on), odd rounds are scalar events.
fn batch(first: u64, len: u64, writer: u32, round: u32) -> Vec<Event> {
    (0..len)
        .map(|i| {
            let tag = format!("w{writer}-r{round}-{i}");
            let seq = first + i;
            let text = if round.is_multiple_of(2) {
                format!(
                    r#"{{"turn":1,"step":1,"chunk":{{"type":"text-delta","index":0,"text":"{tag}"}}}}"#
                )
            } else {
                format!(r#"{{"turn":1,"note":"{tag}"}}"#)
            };
            let ty = if round.is_multiple_of(2) {
                "assistant/chunk"
            } else {
                "note/marker"
            };
            let data = Value::parse(&text).expect("fixture JSON");
            Event::appended(ty, seq, 1_000 + seq as i64, data, None, None)
        })
        .collect()
}

fn tag_of(event: &Event) -> String {
    let data = event.data();
    data.get("note")
        .or_else(|| data.get("chunk").and_then(|c| c.get("text")))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// The stored log must be exactly the successful batches, each whole and contiguous, in
/// commit order, and nothing of a failed batch.
fn check_log(stored: &[Event], successes: &[Vec<Event>]) {
    for (i, e) in stored.iter().enumerate() {
        assert_eq!(
            e.seq(),
            i as u64,
            "the stored log has a gap or duplicate at {i}"
        );
    }
    let mut ordered: Vec<&Vec<Event>> = successes.iter().collect();
    ordered.sort_by_key(|b| b[0].seq());
    let expected: Vec<String> = ordered
        .iter()
        .flat_map(|b| b.iter().map(Event::to_json))
        .collect();
    let got: Vec<String> = stored.iter().map(Event::to_json).collect();
    assert_eq!(
        got.len(),
        expected.len(),
        "stored {} events, the successful batches hold {}",
        got.len(),
        expected.len()
    );
    for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
        assert_eq!(g, e, "event {i} is not the one a successful batch wrote");
    }
    // Each batch is whole: its tags are consecutive in the log.
    for b in ordered {
        let start = b[0].seq() as usize;
        for (k, e) in b.iter().enumerate() {
            assert_eq!(tag_of(&stored[start + k]), tag_of(e), "batch interleaved");
        }
    }
}

/// How the racing writers are configured.
#[derive(Clone, Copy)]
struct RaceMode {
    ttl: Duration,
    advisory_locks: bool,
    take_over: bool,
}

impl RaceMode {
    fn ttl(ttl: Duration) -> RaceMode {
        RaceMode {
            ttl,
            advisory_locks: true,
            take_over: false,
        }
    }
}

async fn race(rounds: u32, mode: RaceMode) {
    let ttl = mode.ttl;
    let schema = TestSchema::new();
    let options = schema
        .options()
        .lease_ttl(ttl)
        .advisory_locks(mode.advisory_locks)
        .take_over(mode.take_over);
    let a = schema.backend_with(options.clone()).await;
    let b = schema.backend_with(options).await;
    let m = meta("race");
    let first = batch(0, 2, 0, 1);
    a.append(&m, &first, false).await.unwrap();
    let mut successes = vec![first];
    let (mut lost, mut stale, mut held) = (0, 0, 0);
    for round in 0..rounds {
        let attempt = |w: &PostgresBackend, writer: u32| {
            let m = m.clone();
            let w = w.clone();
            async move {
                let next = w.next_seq("race").await.unwrap().unwrap();
                let len = u64::from(1 + (round + writer) % 5);
                let events = batch(next, len, writer, round);
                let outcome = w.append(&m, &events, true).await;
                (w, events, outcome)
            }
        };
        let (ra, rb) = tokio::join!(attempt(&a, 1), attempt(&b, 2));
        for (w, events, outcome) in [ra, rb] {
            match outcome {
                Ok(()) => successes.push(events),
                Err(Error::LeaseLost { .. }) => {
                    lost += 1;
                    w.release_lease("race").await.unwrap();
                }
                Err(Error::AppendStart { .. }) => stale += 1,
                Err(Error::LeaseHeld { .. }) => held += 1,
                Err(e) => panic!("round {round}: unexpected error {e}"),
            }
        }
    }
    let stored = a.load("race").await.unwrap().unwrap().events;
    check_log(&stored, &successes);
    eprintln!(
        "race ttl {ttl:?}: {} batches committed, {lost} lease-lost, {stale} stale, {held} held",
        successes.len()
    );
    assert!(
        successes.len() > rounds as usize / 2,
        "too few appends succeeded"
    );
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
}

// persistence.md §7.10 case 7 (stale writers are refused inside the write transaction)
/// Two writers race on one session for 200 rounds with leases that expire at once (every
/// append may be a takeover): never a duplicate, a gap or an interleaved batch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_writers_race_without_duplicates_or_gaps() {
    if !server_available("two_writers_race_without_duplicates_or_gaps") {
        return;
    }
    race(200, RaceMode::ttl(Duration::ZERO)).await;
}

/// The same race with live leases: the second writer is refused while the first holds it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_writers_race_with_live_leases() {
    if !server_available("two_writers_race_with_live_leases") {
        return;
    }
    race(50, RaceMode::ttl(Duration::from_secs(30))).await;
}

/// Correctness does not rest on advisory locks (stubs on some distributed systems): the
/// same race with none taken, leases expiring at once, never duplicates, skips or interleaves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_writers_without_advisory_locks_stay_correct() {
    if !server_available("racing_writers_without_advisory_locks_stay_correct") {
        return;
    }
    let mode = RaceMode {
        advisory_locks: false,
        ..RaceMode::ttl(Duration::ZERO)
    };
    race(200, mode).await;
}

/// Two writers that both take live leases over (operator takeover on both sides, no advisory
/// locks): each takeover fences the other, and the log stays exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_takeovers_stay_correct() {
    if !server_available("racing_takeovers_stay_correct") {
        return;
    }
    let mode = RaceMode {
        ttl: Duration::from_secs(30),
        advisory_locks: false,
        take_over: true,
    };
    race(100, mode).await;
}

/// Without advisory locks, writers racing to publish the same new session: exactly one
/// publication commits, the others are refused as already materialized (the primary key
/// decides), and the stored log is the winner's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_first_publications_without_advisory_locks() {
    if !server_available("racing_first_publications_without_advisory_locks") {
        return;
    }
    let schema = TestSchema::new();
    let options = schema.options().advisory_locks(false);
    let mut writers = Vec::new();
    for _ in 0..4 {
        writers.push(schema.backend_with(options.clone()).await);
    }
    for round in 0..20_u32 {
        let id = format!("first-{round}");
        let m = meta(&id);
        let tasks: Vec<_> = writers
            .iter()
            .enumerate()
            .map(|(w, backend)| {
                let backend = backend.clone();
                let m = m.clone();
                let events = batch(0, 3, w as u32, round);
                tokio::spawn(async move {
                    let outcome = backend.append(&m, &events, false).await;
                    (events, outcome)
                })
            })
            .collect();
        let mut winners = Vec::new();
        for task in tasks {
            match task.await.unwrap() {
                (events, Ok(())) => winners.push(events),
                (_, Err(Error::AlreadyMaterialized { .. })) => {}
                (_, Err(e)) => panic!("round {round}: unexpected error {e}"),
            }
        }
        assert_eq!(
            winners.len(),
            1,
            "round {round}: {} publications",
            winners.len()
        );
        let stored = writers[0].load(&id).await.unwrap().unwrap().events;
        check_log(&stored, &winners);
    }
}

/// A writer whose lease was taken over fails with the lease error and writes nothing; after
/// releasing it is refused while the new holder's lease is live.
#[tokio::test]
async fn taken_over_writer_fails_with_lease_lost() {
    if !server_available("taken_over_writer_fails_with_lease_lost") {
        return;
    }
    let schema = TestSchema::new();
    let pair = LeasePair::new(&schema).await;
    let (a, b) = (&pair.short, &pair.long);
    let m = meta("takeover");
    a.append(&m, &batch(0, 3, 1, 0), false).await.unwrap();
    assert_eq!(a.held_epoch("takeover"), Some(1));
    // While A's lease is live, B is refused.
    let refused = b.append(&m, &batch(3, 2, 2, 1), true).await;
    assert!(
        matches!(refused, Err(Error::LeaseHeld { epoch: 1, .. })),
        "{refused:?}"
    );
    pair.expire().await;
    b.append(&m, &batch(3, 2, 2, 1), true).await.unwrap();
    assert_eq!(b.held_epoch("takeover"), Some(2));
    let before = a.load("takeover").await.unwrap().unwrap();
    let stale = a.append(&m, &batch(5, 2, 1, 2), true).await;
    match stale {
        Err(Error::LeaseLost { held, current, .. }) => assert_eq!((held, current), (1, 2)),
        other => panic!("expected LeaseLost, got {other:?}"),
    }
    let after = a.load("takeover").await.unwrap().unwrap();
    assert_eq!(after.events, before.events, "the stale writer wrote");
    assert_eq!(after.revision, before.revision);
    // Re-acquiring is refused while B's lease is live.
    a.release_lease("takeover").await.unwrap();
    let again = a.append(&m, &batch(5, 2, 1, 2), true).await;
    assert!(
        matches!(again, Err(Error::LeaseHeld { epoch: 2, .. })),
        "{again:?}"
    );
    // After B closes, A takes over at epoch 3.
    b.shutdown().await.unwrap();
    a.append(&m, &batch(5, 2, 1, 2), true).await.unwrap();
    assert_eq!(a.held_epoch("takeover"), Some(3));
    assert_eq!(a.load("takeover").await.unwrap().unwrap().events.len(), 7);
}

/// A lease that expired without a takeover is renewed by its holder's next append.
#[tokio::test]
async fn expired_lease_without_takeover_is_renewed() {
    if !server_available("expired_lease_without_takeover_is_renewed") {
        return;
    }
    let schema = TestSchema::new();
    let ttl = Duration::from_millis(50);
    let a = schema.backend_with(schema.options().lease_ttl(ttl)).await;
    let m = meta("renew");
    a.append(&m, &batch(0, 3, 1, 0), false).await.unwrap();
    tokio::time::sleep(ttl * 3).await;
    a.append(&m, &batch(3, 3, 1, 1), true).await.unwrap();
    assert_eq!(a.held_epoch("renew"), Some(1));
}

/// A stale batch (wrong first seq) fails with a typed error before anything is written.
// persistence.md §7.1 case 10 (re-appending stored seqs rejects), §7.10 case 7 (a stale
// append is refused and the winner's tail is kept)
#[tokio::test]
async fn stale_seq_is_refused_before_writing() {
    if !server_available("stale_seq_is_refused_before_writing") {
        return;
    }
    let schema = TestSchema::new();
    let a = schema.backend().await;
    let m = meta("stale");
    a.append(&m, &batch(0, 4, 1, 0), false).await.unwrap();
    for first in [0, 2, 3, 5] {
        let refused = a.append(&m, &batch(first, 2, 1, 1), true).await;
        match refused {
            Err(Error::AppendStart {
                first: f, expected, ..
            }) => assert_eq!((f, expected), (first, 4)),
            other => panic!("expected AppendStart, got {other:?}"),
        }
    }
    let refused = a.append(&m, &batch(0, 1, 1, 1), false).await;
    assert!(
        matches!(refused, Err(Error::AlreadyMaterialized { .. })),
        "{refused:?}"
    );
    assert_eq!(a.load("stale").await.unwrap().unwrap().events.len(), 4);
}

/// The connection is cut right after the COMMIT reaches the server: the append cannot see
/// the answer, re-reads the tail, finds its batch and reports success. No duplicate.
#[tokio::test]
async fn commit_answer_lost_resolves_by_reading_the_tail() {
    if !server_available("commit_answer_lost_resolves_by_reading_the_tail") {
        return;
    }
    let schema = TestSchema::new();
    let (proxy, backend) = schema.through_proxy().await;
    let m = meta("cut-after");
    let mut all = batch(0, 5, 1, 0);
    proxy.arm(Cut::AfterCommit);
    backend.append(&m, &all, false).await.unwrap();
    assert_eq!(proxy.cuts(), 1, "the first publication's commit was cut");
    let next = batch(5, 4, 1, 1);
    proxy.arm(Cut::AfterCommit);
    backend.append(&m, &next, true).await.unwrap();
    assert_eq!(proxy.cuts(), 2);
    all.extend(next);
    let stored = backend.load("cut-after").await.unwrap().unwrap().events;
    check_log(&stored, &[all]);
    // The writer still holds its lease and goes on.
    backend.append(&m, &batch(9, 3, 1, 2), true).await.unwrap();
}

/// The connection is cut instead of sending the COMMIT: the server rolls back, the tail
/// shows the batch absent, and the single safe retry writes it once.
#[tokio::test]
async fn commit_never_sent_is_retried_once() {
    if !server_available("commit_never_sent_is_retried_once") {
        return;
    }
    let schema = TestSchema::new();
    let (proxy, backend) = schema.through_proxy().await;
    let m = meta("cut-before");
    let first = batch(0, 5, 1, 0);
    backend.append(&m, &first, false).await.unwrap();
    let next = batch(5, 4, 1, 1);
    proxy.arm(Cut::BeforeCommit);
    backend.append(&m, &next, true).await.unwrap();
    assert_eq!(proxy.cuts(), 1);
    let stored = backend.load("cut-before").await.unwrap().unwrap().events;
    check_log(&stored, &[first, next]);
}

/// Cuts at many byte offsets: an append either succeeds and is stored once, or fails and
/// stored nothing; the log is always exactly the successful batches.
#[tokio::test]
async fn cuts_at_any_byte_never_duplicate_or_skip() {
    if !server_available("cuts_at_any_byte_never_duplicate_or_skip") {
        return;
    }
    let schema = TestSchema::new();
    let (proxy, backend) = schema.through_proxy().await;
    let m = meta("cut-bytes");
    let first = batch(0, 3, 1, 0);
    backend.append(&m, &first, false).await.unwrap();
    // Measure the client bytes of one append, then cut at offsets all over that range.
    proxy.arm(Cut::Never);
    let second = batch(3, 3, 1, 1);
    backend.append(&m, &second, true).await.unwrap();
    let span = proxy.forwarded();
    assert!(span > 100, "an append sent only {span} bytes");
    let mut successes = vec![first, second];
    let mut failures = 0;
    for round in 2..80u32 {
        let next = backend.next_seq("cut-bytes").await.unwrap().unwrap();
        let events = batch(next, u64::from(1 + round % 6), 1, round);
        proxy.arm(Cut::AfterBytes(u64::from(round) * 7919 % (span + 200)));
        match backend.append(&m, &events, true).await {
            Ok(()) => successes.push(events),
            Err(e) => {
                assert!(e.is_connection_loss(), "round {round}: {e}");
                failures += 1;
            }
        }
        proxy.arm(Cut::Never);
    }
    let stored = backend.load("cut-bytes").await.unwrap().unwrap().events;
    check_log(&stored, &successes);
    eprintln!(
        "cuts: an append sends {span} bytes; {} appends stored, {failures} failed, {} \
         connections cut",
        successes.len(),
        proxy.cuts()
    );
    assert!(
        failures > 0 && successes.len() > 10,
        "the cuts did not cover both outcomes"
    );
    assert!(proxy.cuts() > 10, "the proxy cut too few connections");
}

/// A connection terminated by the server (`pg_terminate_backend`) mid-transaction: the
/// append fails before commit and writes nothing; the next append goes through.
#[tokio::test]
async fn terminated_backend_writes_nothing() {
    if !server_available("terminated_backend_writes_nothing") {
        return;
    }
    let schema = TestSchema::new();
    let backend = schema.backend_with(schema.options().pool_size(1)).await;
    let m = meta("terminate");
    backend.append(&m, &batch(0, 3, 1, 0), false).await.unwrap();
    let admin = schema.client().await;
    // Hold the session row so that the append waits inside its transaction.
    admin.batch_execute("BEGIN").await.unwrap();
    admin
        .execute(
            "SELECT 1 FROM sessions WHERE id = 'terminate' FOR UPDATE",
            &[],
        )
        .await
        .unwrap();
    let appending = {
        let backend = backend.clone();
        let m = m.clone();
        tokio::spawn(async move { backend.append(&m, &batch(3, 3, 1, 1), true).await })
    };
    // Wait until the append blocks on the row lock, then terminate its connection.
    let mut terminated = 0i64;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let row = admin
            .query_one(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                 WHERE pg_backend_pid() = ANY (pg_blocking_pids(pid))",
                &[],
            )
            .await
            .unwrap();
        terminated = row.get(0);
        if terminated > 0 {
            break;
        }
    }
    assert_eq!(terminated, 1, "the blocked append was not found");
    admin.batch_execute("ROLLBACK").await.unwrap();
    let outcome = appending.await.unwrap();
    assert!(
        outcome.is_err(),
        "a terminated transaction reported success"
    );
    assert_eq!(
        backend
            .load("terminate")
            .await
            .unwrap()
            .unwrap()
            .events
            .len(),
        3
    );
    backend.append(&m, &batch(3, 3, 1, 1), true).await.unwrap();
    assert_eq!(
        backend
            .load("terminate")
            .await
            .unwrap()
            .unwrap()
            .events
            .len(),
        6
    );
}
