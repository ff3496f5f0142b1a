//! The cases of the backend suite, one public async function per behaviour.

use std::collections::BTreeMap;
use std::sync::Arc;

use session_core::json::Value;
use session_core::{Event, FixedClock, SessionHeader};
use session_persist::{Backend, Error, Persistence, PersistenceOptions, Revision, StoredPrefix};
use session_repair::interrupted_turn_closers;
use session_store::SessionStore;

use super::fixtures::{
    SUITE_CWD, SUITE_TIME_MS, TURN_LEN, large_batch, meta, partial_turn, tricky_events, turn, turns,
};
use super::{Harness, SuiteFailure};
use crate::invariants::split_batches;

type Outcome = Result<(), SuiteFailure>;

macro_rules! ensure {
    ($cond:expr, $($arg:tt)+) => {
        if !$cond {
            return Err(SuiteFailure::new(format!($($arg)+)));
        }
    };
}

/// Attaches what was being done to a backend error.
trait Ctx<T> {
    fn ctx(self, what: &str) -> Result<T, SuiteFailure>;
}

impl<T> Ctx<T> for session_persist::Result<T> {
    fn ctx(self, what: &str) -> Result<T, SuiteFailure> {
        self.map_err(|e| SuiteFailure::new(format!("{what} failed: {e}")))
    }
}

/// Records the case as not applicable when `has` is false (see
/// [`run_case_verdict`](super::run_case_verdict)); returns whether the case must stop.
fn lacks(case: &str, has: bool, capability: &'static str) -> bool {
    if !has {
        super::record_not_applicable(case, capability);
    }
    !has
}

/// The stored prefix of `id`, which must exist.
async fn load(b: &Arc<dyn Backend>, id: &str) -> Result<StoredPrefix, SuiteFailure> {
    match b.load_stored(id).await {
        Ok(Some(stored)) => Ok(stored),
        Ok(None) => Err(SuiteFailure::new(format!(
            "load_stored({id:?}) found no artifact for a session that was appended to"
        ))),
        Err(e) => Err(SuiteFailure::new(format!(
            "load_stored({id:?}) failed: {e}"
        ))),
    }
}

/// The current revision of `id`, which must exist.
async fn revision(b: &Arc<dyn Backend>, id: &str) -> Result<Revision, SuiteFailure> {
    b.read_stored_revision(id)
        .await
        .ctx("read_stored_revision")?
        .ok_or_else(|| {
            SuiteFailure::new(format!(
                "read_stored_revision({id:?}) found no artifact for a stored session"
            ))
        })
}

/// `got` holds exactly `want`: same length, seqs `0..`, and each event's JSON text identical
/// (key order and number spelling included; envelope keys in the live-append order when the
/// harness declares [`Capabilities::fixed_envelope_order`](super::Capabilities::fixed_envelope_order)).
fn same_events(h: &dyn Harness, what: &str, got: &[Event], want: &[Event]) -> Outcome {
    let fixed_order = h.capabilities().fixed_envelope_order;
    let expected = |e: &Event| {
        if fixed_order {
            e.in_append_order().to_json()
        } else {
            e.to_json()
        }
    };
    for (i, e) in got.iter().enumerate() {
        ensure!(
            e.seq() == i as u64,
            "{what}: event {i} has seq {} (the stored prefix must be contiguous from 0)",
            e.seq()
        );
    }
    if let Some(i) =
        (0..got.len().min(want.len())).find(|i| got[*i].to_json() != expected(&want[*i]))
    {
        return Err(SuiteFailure::new(format!(
            "{what}: event {i} differs\n  stored:   {}\n  expected: {}",
            got[i].to_json(),
            expected(&want[i])
        )));
    }
    ensure!(
        got.len() == want.len(),
        "{what}: {} events stored, {} expected",
        got.len(),
        want.len()
    );
    Ok(())
}

/// `stored` is clean: no torn tail, no invalid record.
fn clean(what: &str, stored: &StoredPrefix) -> Outcome {
    ensure!(
        stored.torn.is_none(),
        "{what}: a cleanly written log reports a torn tail ({:?})",
        stored.torn
    );
    ensure!(
        stored.invalid_envelope.is_none(),
        "{what}: a cleanly written log reports an invalid envelope ({:?})",
        stored.invalid_envelope
    );
    Ok(())
}

async fn append(
    b: &Arc<dyn Backend>,
    m: &SessionHeader,
    events: &[Event],
    materialized: bool,
) -> Outcome {
    let first = events.first().map_or(0, Event::seq);
    b.append_batch(m, events, materialized).await.ctx(&format!(
        "append_batch of {} events from seq {first} to {:?} (is_materialized {materialized})",
        events.len(),
        &*m.id
    ))
}

fn concat(parts: &[&[Event]]) -> Vec<Event> {
    parts.iter().flat_map(|p| p.iter().cloned()).collect()
}

/// The persistence service over `backend`, with a fixed clock and warnings discarded.
fn service(backend: &Arc<dyn Backend>) -> Result<Persistence, SuiteFailure> {
    let store = SessionStore::new(Arc::new(FixedClock::new(SUITE_TIME_MS)));
    let service = Persistence::new(backend.clone(), store, PersistenceOptions::default())
        .ctx("building the persistence service")?;
    service.set_warning_sink(Arc::new(|_: &str| {}));
    Ok(service)
}

fn ids(headers: &[SessionHeader]) -> Vec<String> {
    let mut ids: Vec<String> = headers.iter().map(|h| h.id.to_string()).collect();
    ids.sort();
    ids
}

// After `ensure!`, so that the submodules can use it.
mod publish;
mod repair;
mod service;

pub use self::publish::*;
pub use self::repair::*;
pub use self::service::*;

/// A header stored and read back names the session, its cwd and format version 0.
fn check_header(what: &str, stored: &StoredPrefix, m: &SessionHeader) -> Outcome {
    ensure!(
        stored.meta.id == m.id,
        "{what}: header id {:?}, expected {:?}",
        stored.meta.id,
        m.id
    );
    ensure!(
        stored.meta.cwd == m.cwd,
        "{what}: header cwd {:?}, expected {:?}",
        stored.meta.cwd,
        m.cwd
    );
    ensure!(
        stored.header_value.get("id").and_then(Value::as_str) == Some(&*m.id),
        "{what}: the header record {} does not carry the id",
        stored.header_value.to_json()
    );
    ensure!(
        stored.header_value.get("version").and_then(Value::as_u64) == Some(0),
        "{what}: the header record {} is not log format version 0",
        stored.header_value.to_json()
    );
    Ok(())
}

/// An append, a load and a load after a restart give back the header and the very events
/// appended, without a torn tail.
// persistence §7.1 #1
pub async fn create_append_load_round_trip(h: &dyn Harness) -> Outcome {
    let b = h.open().await;
    let m = meta("round-trip");
    let events = turns(2);
    append(&b, &m, &events, false).await?;
    let stored = load(&b, "round-trip").await?;
    check_header("after the first append", &stored, &m)?;
    same_events(h, "after the first append", &stored.events, &events)?;
    clean("after the first append", &stored)?;

    let b = h.reopen(b).await;
    let stored = load(&b, "round-trip").await?;
    check_header("after a restart", &stored, &m)?;
    same_events(h, "after a restart", &stored.events, &events)?;
    clean("after a restart", &stored)
}

/// Before the first append nothing exists; the first append makes the header and the whole
/// batch visible together; a second first publication is refused and changes nothing, from
/// the same instance and after a restart.
pub async fn first_append_materializes_header_and_batch_atomically(h: &dyn Harness) -> Outcome {
    let b = h.open().await;
    let id = "materialize";
    let m = meta(id);
    ensure!(
        b.load_stored(id).await.ctx("load_stored")?.is_none(),
        "an unappended session has an artifact"
    );
    ensure!(
        b.read_stored_revision(id)
            .await
            .ctx("read_stored_revision")?
            .is_none(),
        "an unappended session has a revision"
    );
    ensure!(
        b.list().await.ctx("list")?.is_empty(),
        "fresh storage lists sessions"
    );

    let batch = turn(0, 1);
    append(&b, &m, &batch, false).await?;
    let stored = load(&b, id).await?;
    check_header("after the first append", &stored, &m)?;
    same_events(h, "after the first append", &stored.events, &batch)?;
    let before = stored.revision;

    for round in ["on the writing instance", "after a restart"] {
        let b = if round == "after a restart" {
            h.reopen(b.clone()).await
        } else {
            b.clone()
        };
        let other = turns(2);
        ensure!(
            b.append_batch(&m, &other, false).await.is_err(),
            "a second first publication ({round}) was accepted: an existing artifact must be \
             refused, never overwritten"
        );
        let stored = load(&b, id).await?;
        same_events(
            h,
            &format!("after a refused first publication ({round})"),
            &stored.events,
            &batch,
        )?;
        ensure!(
            stored.revision == before,
            "a refused first publication ({round}) changed the revision"
        );
        ensure!(
            b.list().await.ctx("list")?.len() == 1,
            "a refused first publication ({round}) changed the listing"
        );
    }
    Ok(())
}

/// Batches that continue the log append contiguously; a batch that skips seqs (at its start or
/// inside) is refused and leaves storage unchanged: by the backend when it checks, always by
/// the coordinator with the reference's message.
// persistence §7.1 #11
pub async fn append_is_contiguous_and_refuses_gaps(h: &dyn Harness) -> Outcome {
    let b = h.open().await;
    let id = "contiguous";
    let m = meta(id);
    let all = turns(3);
    append(&b, &m, &all[..11], false).await?;
    append(&b, &m, &all[11..22], true).await?;
    append(&b, &m, &all[22..], true).await?;
    let stored = load(&b, id).await?;
    same_events(h, "after three contiguous batches", &stored.events, &all)?;
    let before = stored.revision;

    if h.capabilities().seq_checks {
        let gap = turn(35, 4);
        ensure!(
            b.append_batch(&m, &gap, true).await.is_err(),
            "the backend declares seq checks but accepted a batch starting at seq 35 after 33 \
             stored events"
        );
        ensure!(
            revision(&b, id).await? == before,
            "a refused gap changed the revision"
        );
    }

    let service = service(&b)?;
    let gap = turn(34, 4);
    match service.append(id, &gap).await {
        Ok(()) => {
            return Err(SuiteFailure::new(
                "the coordinator accepted a gap at seq 34",
            ));
        }
        Err(e) => ensure!(
            e.to_string()
                == format!("append seq mismatch for \"{id}\": expected 33 at index 0, got 34"),
            "the coordinator refused a gap with the wrong error: {e}"
        ),
    }
    let next = turn(33, 4);
    let inside = [next[0].clone(), next[2].clone()];
    match service.append(id, &inside).await {
        Ok(()) => {
            return Err(SuiteFailure::new(
                "the coordinator accepted a gap inside a batch",
            ));
        }
        Err(e) => ensure!(
            e.to_string()
                == format!("append seq mismatch for \"{id}\": expected 34 at index 1, got 35"),
            "the coordinator refused a gap inside a batch with the wrong error: {e}"
        ),
    }
    let stored = load(&b, id).await?;
    same_events(h, "after refused gaps", &stored.events, &all)?;
    ensure!(
        stored.revision == before,
        "refused gaps changed the revision"
    );
    service.dispose().await.ctx("disposing the service")
}

/// Appending seqs that are already stored is refused and changes nothing: by the backend when
/// it checks, always by the coordinator.
// persistence §7.1 #10
pub async fn reappend_of_stored_seqs_is_refused(h: &dyn Harness) -> Outcome {
    let b = h.open().await;
    let id = "reappend";
    let m = meta(id);
    let events = turn(0, 1);
    append(&b, &m, &events, false).await?;
    let before = revision(&b, id).await?;
    if h.capabilities().seq_checks {
        ensure!(
            b.append_batch(&m, &events[3..], true).await.is_err(),
            "the backend declares seq checks but accepted stored seqs 3..11 again"
        );
        ensure!(
            b.append_batch(&m, &events, true).await.is_err(),
            "the backend declares seq checks but accepted the whole stored log again"
        );
    }
    let service = service(&b)?;
    match service.append(id, &events[5..]).await {
        Ok(()) => {
            return Err(SuiteFailure::new(
                "the coordinator accepted stored seqs again",
            ));
        }
        Err(e) => ensure!(
            e.to_string()
                == format!("append seq mismatch for \"{id}\": expected 11 at index 0, got 5"),
            "the coordinator refused stored seqs with the wrong error: {e}"
        ),
    }
    let stored = load(&b, id).await?;
    same_events(h, "after refused re-appends", &stored.events, &events)?;
    ensure!(
        stored.revision == before,
        "refused re-appends changed the revision"
    );
    service.dispose().await.ctx("disposing the service")
}

/// Events come back in seq order with byte-identical JSON: escapes, astral characters, numbers
/// beyond `f64`, key order, nesting, unknown (ignorable) types; after a restart too.
pub async fn load_stored_returns_events_in_order_with_identical_json(h: &dyn Harness) -> Outcome {
    let b = h.open().await;
    let id = "identical-json";
    let m = meta(id);
    let first = tricky_events(0);
    let middle = turn(first.len() as u64, 1);
    let last = tricky_events((first.len() + middle.len()) as u64);
    let events = concat(&[&first, &middle, &last]);
    append(&b, &m, &events[..6], false).await?;
    append(&b, &m, &events[6..], true).await?;
    let stored = load(&b, id).await?;
    same_events(h, "loaded", &stored.events, &events)?;
    let b = h.reopen(b).await;
    let stored = load(&b, id).await?;
    same_events(h, "loaded after a restart", &stored.events, &events)
}

/// Every header field the storage layer keeps comes back, through `load_stored`, `list` and
/// `list_snapshots`; a session without a cwd is stored too.
pub async fn header_round_trips_every_field(h: &dyn Harness) -> Outcome {
    let b = h.open().await;
    let mut full = meta("header-fields");
    full.parent_session = Some(Arc::from("parent-sëssion"));
    full.seed_length = Some(3);
    full.origin_subagent = true;
    full.delegation_depth = Some(2);
    full.agent_preset = Some(Arc::from("reviewer"));
    let mut bare = SessionHeader::new("no-cwd", SUITE_TIME_MS as u64);
    bare.delegation_depth = Some(0);
    append(&b, &full, &turn(0, 1), false).await?;
    append(&b, &bare, &turn(0, 1), false).await?;

    for round in ["as written", "after a restart"] {
        let b = if round == "after a restart" {
            h.reopen(b.clone()).await
        } else {
            b.clone()
        };
        let stored = load(&b, "header-fields").await?;
        ensure!(
            stored.meta == full,
            "{round}: header read back as {:?}, written as {full:?}",
            stored.meta
        );
        let listed = b.list().await.ctx("list")?;
        let entry = listed.iter().find(|m| &*m.id == "header-fields");
        ensure!(
            entry == Some(&full),
            "{round}: list shows the header as {entry:?}, written as {full:?}"
        );
        let snaps = b.list_snapshots().await.ctx("list_snapshots")?;
        let entry = snaps
            .iter()
            .find(|(m, _)| &*m.id == "header-fields")
            .map(|(m, _)| m);
        ensure!(
            entry == Some(&full),
            "{round}: list_snapshots shows the header as {entry:?}, written as {full:?}"
        );
        let stored = load(&b, "no-cwd").await?;
        check_header(round, &stored, &bare)?;
        ensure!(
            ids(&listed) == ["header-fields", "no-cwd"],
            "{round}: list shows {:?}",
            ids(&listed)
        );
    }
    Ok(())
}

/// A revision stays equal across reads of every kind (and a restart) while nothing changes,
/// and changes after an append.
// persistence §7.1 #9
pub async fn revision_stable_until_append(h: &dyn Harness) -> Outcome {
    let case = "revision_stable_until_append";
    if lacks(
        case,
        h.capabilities().revision_changes_on_append,
        "revision_changes_on_append",
    ) {
        return Ok(());
    }
    let b = h.open().await;
    let id = "revision";
    let m = meta(id);
    append(&b, &m, &turn(0, 1), false).await?;
    let first = revision(&b, id).await?;
    ensure!(
        load(&b, id).await?.revision == first,
        "load_stored reports another revision than read_stored_revision"
    );
    let _ = b.list().await.ctx("list")?;
    if b.supports_raw_artifacts() {
        let _ = b.read_raw(id).await.ctx("read_raw")?;
    }
    for _ in 0..3 {
        ensure!(
            revision(&b, id).await? == first,
            "the revision changed although nothing was written"
        );
    }
    let snaps = b.list_snapshots().await.ctx("list_snapshots")?;
    ensure!(
        snaps.iter().any(|(m, r)| &*m.id == id && *r == first),
        "list_snapshots does not show the current revision {first}"
    );
    let b = h.reopen(b).await;
    ensure!(
        revision(&b, id).await? == first,
        "the revision changed across a restart that wrote nothing"
    );
    append(&b, &m, &turn(TURN_LEN, 2), true).await?;
    let second = revision(&b, id).await?;
    ensure!(
        second != first,
        "the revision did not change after an append"
    );
    ensure!(
        load(&b, id).await?.revision == second,
        "load_stored reports a stale revision after an append"
    );
    let snaps = b.list_snapshots().await.ctx("list_snapshots")?;
    ensure!(
        snaps.iter().any(|(m, r)| &*m.id == id && *r == second),
        "list_snapshots reports a stale revision after an append"
    );
    Ok(())
}

/// A repair that appends closers changes the revision, and the closers follow the stored
/// prefix.
pub async fn revision_changes_after_repair(h: &dyn Harness) -> Outcome {
    let case = "revision_changes_after_repair";
    if lacks(
        case,
        h.capabilities().revision_changes_on_append,
        "revision_changes_on_append",
    ) {
        return Ok(());
    }
    let b = h.open().await;
    let id = "repair-revision";
    let m = meta(id);
    let events = concat(&[&turn(0, 1), &partial_turn(TURN_LEN, 2, 4)]);
    append(&b, &m, &events, false).await?;
    let stored = load(&b, id).await?;
    let closers = interrupted_turn_closers(stored.events.iter());
    ensure!(!closers.is_empty(), "an open turn needs closers");
    b.commit_repair(&m, None, &closers)
        .await
        .ctx("commit_repair")?;
    let after = revision(&b, id).await?;
    ensure!(
        after != stored.revision,
        "the revision did not change after a repair appended closers"
    );
    let repaired = load(&b, id).await?;
    ensure!(
        repaired.revision == after,
        "load_stored reports a stale revision after a repair"
    );
    same_events(
        h,
        "after the repair",
        &repaired.events,
        &concat(&[&events, &closers]),
    )
}

/// Two storages holding the same session never report equal revisions.
pub async fn revisions_of_different_stores_differ(h: &dyn Harness) -> Outcome {
    let a = h.open().await;
    let b = h.open().await;
    let m = meta("twin");
    append(&a, &m, &turn(0, 1), false).await?;
    append(&b, &m, &turn(0, 1), false).await?;
    let ra = revision(&a, "twin").await?;
    let rb = revision(&b, "twin").await?;
    ensure!(
        ra != rb,
        "two different storages report the same revision {ra} for the same session"
    );
    Ok(())
}

/// Listing shows exactly the sessions that were appended to: none on fresh storage, each once
/// after appends and after a restart, never a session the coordinator only created.
// persistence §7.1 #6
pub async fn list_shows_only_materialized_sessions(h: &dyn Harness) -> Outcome {
    let b = h.open().await;
    ensure!(
        b.list().await.ctx("list")?.is_empty(),
        "fresh storage lists sessions"
    );
    ensure!(
        b.list_snapshots().await.ctx("list_snapshots")?.is_empty(),
        "fresh storage lists snapshots"
    );
    append(&b, &meta("listed-a"), &turn(0, 1), false).await?;
    append(&b, &meta("listed-b"), &turns(2), false).await?;
    let _ = b.append_batch(&meta("listed-a"), &turn(0, 1), false).await;
    let expected = ["listed-a", "listed-b"];
    let listed = b.list().await.ctx("list")?;
    ensure!(ids(&listed) == expected, "list shows {:?}", ids(&listed));
    ensure!(
        listed.iter().all(|m| m.cwd.as_deref() == Some(SUITE_CWD)),
        "list shows headers without their cwd: {listed:?}"
    );
    let b = h.reopen(b).await;
    let listed = b.list().await.ctx("list after a restart")?;
    ensure!(
        ids(&listed) == expected,
        "after a restart list shows {:?}",
        ids(&listed)
    );

    let service = service(&b)?;
    service
        .create(&meta("created-only"))
        .await
        .ctx("creating a session through the coordinator")?;
    let through_service = service.list(None).await.ctx("the coordinator's list")?;
    ensure!(
        ids(&through_service) == expected,
        "a created but never appended session is listed: {:?}",
        ids(&through_service)
    );
    let snaps = service
        .list_snapshots(None)
        .await
        .ctx("the coordinator's list_snapshots")?;
    ensure!(
        snaps.iter().all(|s| &*s.header.id != "created-only"),
        "a created but never appended session has a snapshot"
    );
    let listed = b.list().await.ctx("list")?;
    ensure!(
        ids(&listed) == expected,
        "creating a session wrote an artifact: list shows {:?}",
        ids(&listed)
    );
    service.dispose().await.ctx("disposing the service")
}

/// `list_snapshots` names the same sessions as `list`, with the revision that
/// `read_stored_revision` and `load_stored` report; an append changes only its session's.
pub async fn list_snapshots_matches_revisions(h: &dyn Harness) -> Outcome {
    let b = h.open().await;
    append(&b, &meta("snap-a"), &turn(0, 1), false).await?;
    append(&b, &meta("snap-b"), &turn(0, 1), false).await?;
    let snaps = b.list_snapshots().await.ctx("list_snapshots")?;
    let listed = b.list().await.ctx("list")?;
    let snap_headers: Vec<SessionHeader> = snaps.iter().map(|(m, _)| m.clone()).collect();
    ensure!(
        ids(&snap_headers) == ids(&listed),
        "list_snapshots shows {:?}, list shows {:?}",
        ids(&snap_headers),
        ids(&listed)
    );
    let mut before: BTreeMap<String, Revision> = BTreeMap::new();
    for (m, r) in &snaps {
        let id = m.id.to_string();
        ensure!(
            revision(&b, &id).await? == *r,
            "list_snapshots and read_stored_revision disagree for {id:?}"
        );
        ensure!(
            load(&b, &id).await?.revision == *r,
            "list_snapshots and load_stored disagree for {id:?}"
        );
        before.insert(id, r.clone());
    }
    append(&b, &meta("snap-a"), &turn(TURN_LEN, 2), true).await?;
    let after: BTreeMap<String, Revision> = b
        .list_snapshots()
        .await
        .ctx("list_snapshots")?
        .into_iter()
        .map(|(m, r)| (m.id.to_string(), r))
        .collect();
    ensure!(
        after.get("snap-b") == before.get("snap-b"),
        "an append to one session changed another session's revision"
    );
    if h.capabilities().revision_changes_on_append {
        ensure!(
            after.get("snap-a") != before.get("snap-a"),
            "list_snapshots reports a stale revision after an append"
        );
        ensure!(
            after.get("snap-a") == Some(&revision(&b, "snap-a").await?),
            "list_snapshots and read_stored_revision disagree after an append"
        );
    }
    Ok(())
}

/// A whole-log pass in pages (`load_stored_page`) gives the stored prefix: pages of any size
/// hold exactly the requested run (an open turn as stored), every page carries the log's
/// revision and none is torn; a page past the end is empty and an unknown id has none;
/// reading changes nothing.
pub async fn read_pages_of_the_prefix(h: &dyn Harness) -> Outcome {
    let b = h.open().await;
    let id = "pages";
    let m = meta(id);
    let events = concat(&[
        &turn(0, 1),
        &turn(TURN_LEN, 2),
        &partial_turn(2 * TURN_LEN, 3, 3),
    ]);
    let split = usize::try_from(TURN_LEN).unwrap_or(0) + 4;
    append(&b, &m, &events[..split], false).await?;
    append(&b, &m, &events[split..], true).await?;
    let before = revision(&b, id).await?;
    for max in [1, 2, 5, 11, 12, 1_000] {
        let mut read = Vec::new();
        loop {
            let from = read.len() as u64;
            let page = b
                .load_stored_page(id, from, max)
                .await
                .ctx(&format!("load_stored_page({id:?}, {from}, {max})"))?
                .ok_or_else(|| SuiteFailure::new("load_stored_page found no artifact"))?;
            ensure!(
                page.revision == before,
                "load_stored_page({from}, {max}) carries another revision"
            );
            ensure!(
                !page.torn,
                "load_stored_page({from}, {max}) reports a torn tail"
            );
            ensure!(
                page.meta.id == m.id,
                "load_stored_page returned another header"
            );
            let n = page.events.len();
            ensure!(n <= max, "load_stored_page({from}, {max}) gave {n} events");
            read.extend(page.events);
            if n < max {
                break;
            }
        }
        same_events(h, &format!("pages of {max}"), &read, &events)?;
    }
    let end = events.len() as u64;
    let past = b
        .load_stored_page(id, end + 2, 3)
        .await
        .ctx("load_stored_page past the end")?
        .ok_or_else(|| SuiteFailure::new("load_stored_page past the end found no artifact"))?;
    ensure!(
        past.events.is_empty() && !past.torn,
        "a page past the end holds {} events",
        past.events.len()
    );
    ensure!(
        b.load_stored_page("no-such-session", 0, 3)
            .await
            .ctx("load_stored_page of an unknown id")?
            .is_none(),
        "load_stored_page found an unknown session"
    );
    ensure!(
        revision(&b, id).await? == before,
        "paged reads changed the revision"
    );
    Ok(())
}

/// Reading from a seq gives the stored suffix (an open turn as stored, nothing at or past the
/// end, nothing for an unknown id), by seeking when the backend can and by the coordinator's
/// fallback otherwise; neither changes storage.
// persistence §7.1 #8
pub async fn read_from_suffix(h: &dyn Harness) -> Outcome {
    let b = h.open().await;
    let id = "suffix";
    let m = meta(id);
    let events = concat(&[&turn(0, 1), &partial_turn(TURN_LEN, 2, 3)]);
    let end = events.len() as u64;
    append(&b, &m, &events, false).await?;
    let before = revision(&b, id).await?;
    if h.capabilities().seek {
        ensure!(
            b.supports_seek(),
            "the harness declares seek but supports_seek() is false"
        );
        for from in [0, 3, end, end + 5] {
            let suffix = b
                .load_stored_from(id, from)
                .await
                .ctx(&format!("load_stored_from({id:?}, {from})"))?
                .ok_or_else(|| SuiteFailure::new("load_stored_from found no artifact"))?;
            let want = &events[usize::try_from(from.min(end)).unwrap_or(0)..];
            let got: Vec<String> = suffix.events.iter().map(Event::to_json).collect();
            let want_text: Vec<String> = want.iter().map(Event::to_json).collect();
            ensure!(
                got == want_text,
                "load_stored_from({from}) gave {} events, expected {}",
                got.len(),
                want_text.len()
            );
            ensure!(
                suffix.meta.id == m.id,
                "load_stored_from returned another header"
            );
        }
        ensure!(
            b.load_stored_from("no-such-session", 0)
                .await
                .ctx("load_stored_from of an unknown id")?
                .is_none(),
            "load_stored_from found an unknown session"
        );
    } else {
        match b.load_stored_from(id, 3).await {
            Err(Error::Unsupported { .. }) => {}
            Err(e) => {
                return Err(SuiteFailure::new(format!(
                    "a backend without seeking reads must refuse load_stored_from as unsupported, \
                     not with: {e}"
                )));
            }
            Ok(_) => {
                return Err(SuiteFailure::new(
                    "load_stored_from answered although the harness does not declare seek",
                ));
            }
        }
    }
    let service = service(&b)?;
    for from in [0, 3, end, end + 5] {
        let suffix = service
            .read_from(id, from, None)
            .await
            .ctx(&format!("the coordinator's read_from({from})"))?;
        let want = &events[usize::try_from(from.min(end)).unwrap_or(0)..];
        let got: Vec<String> = suffix.events.iter().map(Event::to_json).collect();
        let want_text: Vec<String> = want.iter().map(Event::to_json).collect();
        ensure!(
            got == want_text,
            "read_from({from}) gave {} events, expected {}",
            got.len(),
            want_text.len()
        );
    }
    match service.read_from("no-such-session", 0, None).await {
        Err(e) => ensure!(
            e.to_string() == "session \"no-such-session\" not found",
            "read_from of an unknown id failed with the wrong error: {e}"
        ),
        Ok(_) => return Err(SuiteFailure::new("read_from found an unknown session")),
    }
    let stored = load(&b, id).await?;
    same_events(h, "after reads from a seq", &stored.events, &events)?;
    ensure!(
        stored.revision == before,
        "reads from a seq changed the revision"
    );
    service.dispose().await.ctx("disposing the service")
}

/// Every read of a session that was never appended to says "absent" (`None`), also next to
/// stored sessions with similar ids.
pub async fn unknown_session_is_none(h: &dyn Harness) -> Outcome {
    let b = h.open().await;
    let check = |b: Arc<dyn Backend>, id: &'static str| async move {
        ensure!(
            b.load_stored(id)
                .await
                .ctx("load_stored of an unknown id")?
                .is_none(),
            "load_stored found unknown session {id:?}"
        );
        ensure!(
            b.read_stored_revision(id)
                .await
                .ctx("read_stored_revision of an unknown id")?
                .is_none(),
            "read_stored_revision found unknown session {id:?}"
        );
        if b.supports_raw_artifacts() {
            ensure!(
                b.read_raw(id)
                    .await
                    .ctx("read_raw of an unknown id")?
                    .is_none(),
                "read_raw found unknown session {id:?}"
            );
        }
        if b.supports_seek() {
            ensure!(
                b.load_stored_from(id, 0)
                    .await
                    .ctx("load_stored_from of an unknown id")?
                    .is_none(),
                "load_stored_from found unknown session {id:?}"
            );
        }
        Ok(())
    };
    check(b.clone(), "missing").await?;
    append(&b, &meta("present"), &turn(0, 1), false).await?;
    for id in ["missing", "presen", "present-2", "PRESENT"] {
        check(b.clone(), id).await?;
    }
    let listed = b.list().await.ctx("list")?;
    ensure!(ids(&listed) == ["present"], "list shows {:?}", ids(&listed));
    Ok(())
}

/// However a log is split into append batches (one batch, single events, pairs, cuts inside a
/// run of streamed chunks), it loads identically, before and after a restart.
pub async fn batches_of_any_split_load_identically(h: &dyn Harness) -> Outcome {
    let b = h.open().await;
    let events = concat(&[&turns(2), &tricky_events(2 * TURN_LEN)]);
    let n = events.len();
    let splits: Vec<Vec<usize>> = vec![
        vec![],
        (1..n).collect(),
        (2..n).step_by(2).collect(),
        vec![1],
        vec![n - 1],
        vec![4, 5],
        vec![3, 6, 14, 17],
    ];
    for (k, cuts) in splits.iter().enumerate() {
        let m = meta(&format!("split-{k}"));
        for (i, batch) in split_batches(&events, cuts).iter().enumerate() {
            append(&b, &m, batch, i > 0).await?;
        }
    }
    for round in ["as written", "after a restart"] {
        let b = if round == "after a restart" {
            h.reopen(b.clone()).await
        } else {
            b.clone()
        };
        for (k, cuts) in splits.iter().enumerate() {
            let stored = load(&b, &format!("split-{k}")).await?;
            same_events(
                h,
                &format!("{round}, batches cut at {cuts:?}"),
                &stored.events,
                &events,
            )?;
            clean(round, &stored)?;
        }
    }
    Ok(())
}

/// One batch of thousands of events, one of them a megabyte of text, round-trips.
pub async fn large_batch_round_trip(h: &dyn Harness) -> Outcome {
    let b = h.open().await;
    let id = "large";
    let m = meta(id);
    let events = large_batch(400, 1 << 20);
    append(&b, &m, &events, false).await?;
    let stored = load(&b, id).await?;
    same_events(h, "a large batch", &stored.events, &events)?;
    let b = h.reopen(b).await;
    let stored = load(&b, id).await?;
    same_events(h, "a large batch after a restart", &stored.events, &events)
}

/// Every acknowledged append survives a restart: after each append the log reads back as
/// exactly the acknowledged events (an open turn included, as stored).
pub async fn every_flushed_event_survives_reopen(h: &dyn Harness) -> Outcome {
    let id = "acknowledged";
    let m = meta(id);
    let mut b = h.open().await;
    let mut acknowledged: Vec<Event> = Vec::new();
    for k in 0..5u64 {
        let first = acknowledged.len() as u64;
        let batch = if k == 4 {
            partial_turn(first, k + 1, 4)
        } else {
            turn(first, k + 1)
        };
        append(&b, &m, &batch, k > 0).await?;
        acknowledged.extend(batch);
        b = h.reopen(b).await;
        let Some(stored) = b.load_stored(id).await.ctx("load_stored after a restart")? else {
            return Err(SuiteFailure::new(format!(
                "after a restart the session is gone although {} appended events were \
                 acknowledged",
                acknowledged.len()
            )));
        };
        same_events(
            h,
            &format!("after {} acknowledged appends and a restart", k + 1),
            &stored.events,
            &acknowledged,
        )?;
        clean("after a restart", &stored)?;
    }
    Ok(())
}

/// Sessions do not affect each other: interleaved appends, a repair of one, and other cwds.
pub async fn sessions_are_independent(h: &dyn Harness) -> Outcome {
    let b = h.open().await;
    let a = meta("indep-a");
    let bb = meta("indep-b");
    let mut c = meta("indep-c");
    c.cwd = Some(Arc::from("/conformance/other project"));
    append(&b, &a, &turn(0, 1), false).await?;
    append(&b, &bb, &turn(0, 1), false).await?;
    append(&b, &a, &turn(TURN_LEN, 2), true).await?;
    append(&b, &c, &turn(0, 1), false).await?;
    let open = partial_turn(TURN_LEN, 2, 6);
    append(&b, &bb, &open, true).await?;
    let rev_a = revision(&b, "indep-a").await?;
    let stored_b = load(&b, "indep-b").await?;
    let closers = interrupted_turn_closers(stored_b.events.iter());
    b.commit_repair(&bb, None, &closers)
        .await
        .ctx("commit_repair")?;
    ensure!(
        revision(&b, "indep-a").await? == rev_a,
        "repairing one session changed another's revision"
    );
    same_events(
        h,
        "session a",
        &load(&b, "indep-a").await?.events,
        &turns(2),
    )?;
    same_events(
        h,
        "session b",
        &load(&b, "indep-b").await?.events,
        &concat(&[&turn(0, 1), &open, &closers]),
    )?;
    let stored_c = load(&b, "indep-c").await?;
    same_events(h, "session c", &stored_c.events, &turn(0, 1))?;
    ensure!(
        stored_c.meta.cwd == c.cwd,
        "session c came back with cwd {:?}",
        stored_c.meta.cwd
    );
    Ok(())
}

/// One writer per session: a second instance cannot write a session the first holds, and
/// writes nothing; after `release` it can, and then the first cannot until the second closes.
pub async fn second_writer_is_refused_until_release(h: &dyn Harness) -> Outcome {
    let case = "second_writer_is_refused_until_release";
    if lacks(case, h.capabilities().writer_lock, "writer_lock") {
        return Ok(());
    }
    let first = h.open().await;
    let id = "single-writer";
    let m = meta(id);
    append(&first, &m, &turn(0, 1), false).await?;
    let Some(second) = h.open_concurrent(&first).await else {
        return Err(SuiteFailure::new(
            "the harness declares writer_lock but open_concurrent gave no second instance",
        ));
    };
    ensure!(
        second
            .append_batch(&m, &turn(TURN_LEN, 2), true)
            .await
            .is_err(),
        "a second instance appended to a session the first instance holds"
    );
    same_events(
        h,
        "after a refused second writer",
        &load(&second, id).await?.events,
        &turn(0, 1),
    )?;
    first.release(id).await.ctx("release")?;
    append(&second, &m, &turn(TURN_LEN, 2), true).await?;
    ensure!(
        first
            .append_batch(&m, &turn(2 * TURN_LEN, 3), true)
            .await
            .is_err(),
        "the first instance appended to a session the second instance now holds"
    );
    second.close().await.ctx("closing the second instance")?;
    append(&first, &m, &turn(2 * TURN_LEN, 3), true).await?;
    same_events(
        h,
        "after the writers took turns",
        &load(&first, id).await?.events,
        &turns(3),
    )
}

/// The raw artifact of a stored session starts with its header line, holds more than the
/// header, does not change the revision, and is absent for unknown ids.
pub async fn raw_artifact_holds_the_header_and_events(h: &dyn Harness) -> Outcome {
    let case = "raw_artifact_holds_the_header_and_events";
    if lacks(case, h.capabilities().raw_artifacts, "raw_artifacts") {
        return Ok(());
    }
    let b = h.open().await;
    ensure!(
        b.supports_raw_artifacts(),
        "the harness declares raw_artifacts but supports_raw_artifacts() is false"
    );
    let id = "raw";
    let m = meta(id);
    append(&b, &m, &turn(0, 1), false).await?;
    let before = revision(&b, id).await?;
    let raw = b
        .read_raw(id)
        .await
        .ctx("read_raw")?
        .ok_or_else(|| SuiteFailure::new("read_raw found no artifact for a stored session"))?;
    ensure!(
        raw.meta.id == m.id,
        "read_raw returned the header of {:?}",
        raw.meta.id
    );
    ensure!(!raw.filename.is_empty(), "read_raw returned no file name");
    let first_line = raw.content.lines().next().unwrap_or_default();
    let header = Value::parse(first_line).ok();
    ensure!(
        header
            .as_ref()
            .and_then(|v| v.get("id"))
            .and_then(Value::as_str)
            == Some(id),
        "the raw artifact does not start with the session's header line: {first_line:?}"
    );
    ensure!(
        raw.content.lines().count() > 1,
        "the raw artifact holds only the header"
    );
    ensure!(
        raw.content.contains("question 1"),
        "the raw artifact does not hold the stored user message"
    );
    ensure!(
        revision(&b, id).await? == before,
        "read_raw changed the revision"
    );
    ensure!(
        b.read_raw("no-such-session")
            .await
            .ctx("read_raw")?
            .is_none(),
        "read_raw found an unknown session"
    );
    Ok(())
}

/// The harness's capabilities agree with what the backend says about itself.
pub async fn declared_capabilities_match_backend(h: &dyn Harness) -> Outcome {
    let caps = h.capabilities();
    let b = h.open().await;
    ensure!(
        caps.seek == b.supports_seek(),
        "the harness declares seek = {} but supports_seek() is {}",
        caps.seek,
        b.supports_seek()
    );
    ensure!(
        caps.raw_artifacts == b.supports_raw_artifacts(),
        "the harness declares raw_artifacts = {} but supports_raw_artifacts() is {}",
        caps.raw_artifacts,
        b.supports_raw_artifacts()
    );
    ensure!(!b.name().is_empty(), "the backend has no name");
    Ok(())
}
