//! Cases that run the persistence service (create, append, load and its repair) over the
//! backend.

use super::repair::torn_log;
use super::{
    Ctx, Harness, Outcome, SuiteFailure, TURN_LEN, append, clean, concat, interrupted_turn_closers,
    lacks, load, meta, partial_turn, revision, same_events, service, turn, turns,
};

/// The persistence service over the backend: create, append, load, and load again after a
/// restart give the metadata and the events back.
// persistence §7.1 #1
pub async fn service_round_trip_over_the_backend(h: &dyn Harness) -> Outcome {
    let b = h.open().await;
    let id = "service-round-trip";
    let m = meta(id);
    let events = turns(2);
    let p = service(&b)?;
    p.create(&m).await.ctx("create")?;
    p.append(id, &events).await.ctx("append")?;
    let loaded = p.load(id).await.ctx("load")?;
    ensure!(
        loaded.meta.id == m.id && loaded.meta.cwd == m.cwd,
        "load returned {:?}",
        loaded.meta
    );
    same_events(h, "the service's load", &loaded.events.to_vec(), &events)?;
    p.dispose().await.ctx("disposing the service")?;

    let b = h.reopen(b).await;
    let p = service(&b)?;
    let loaded = p.load(id).await.ctx("load after a restart")?;
    same_events(
        h,
        "the service's load after a restart",
        &loaded.events.to_vec(),
        &events,
    )?;
    p.dispose().await.ctx("disposing the service")
}

/// The service over the backend balances an interrupted turn: `inspect` adds closers in memory
/// only, `load` commits them (the revision changes), and the log continues after them.
// persistence §7.1 #3
pub async fn service_load_repairs_an_interrupted_turn(h: &dyn Harness) -> Outcome {
    let b = h.open().await;
    let id = "service-interrupted";
    let m = meta(id);
    let events = concat(&[&turn(0, 1), &partial_turn(TURN_LEN, 2, 2)]);
    append(&b, &m, &events, false).await?;
    let before = revision(&b, id).await?;
    let p = service(&b)?;
    let inspected = p.inspect(id, None).await.ctx("inspect")?;
    let closers = interrupted_turn_closers(events.iter());
    let balanced = concat(&[&events, &closers]);
    same_events(h, "inspect", &inspected.events.to_vec(), &balanced)?;
    ensure!(
        revision(&b, id).await? == before,
        "inspect changed the revision"
    );
    let types: Vec<String> = closers.iter().map(|e| e.event_type().to_owned()).collect();
    ensure!(
        types == ["step/end", "turn/end"],
        "an open step needs step/end and turn/end, the closers are {types:?}"
    );
    let loaded = p.load(id).await.ctx("load")?;
    same_events(h, "load", &loaded.events.to_vec(), &balanced)?;
    if h.capabilities().revision_changes_on_append {
        ensure!(
            revision(&b, id).await? != before,
            "load committed closers but the revision did not change"
        );
    }
    let next = turn(balanced.len() as u64, 3);
    p.append(id, &next).await.ctx("append after load")?;
    p.dispose().await.ctx("disposing the service")?;
    let b = h.reopen(b).await;
    let stored = load(&b, id).await?;
    same_events(
        h,
        "after a restart",
        &stored.events,
        &concat(&[&balanced, &next]),
    )
}

/// The service's `load` of a torn log cuts the tail, keeps the valid prefix and commits the
/// closers.
pub async fn service_load_repairs_a_torn_tail(h: &dyn Harness) -> Outcome {
    let case = "service_load_repairs_a_torn_tail";
    if lacks(case, h.capabilities().torn_tails, "torn_tails") {
        return Ok(());
    }
    let id = "service-torn";
    let (b, _, _, _) = torn_log(h, id).await?;
    let prefix = load(&b, id).await?;
    ensure!(
        prefix.torn.is_some(),
        "a torn append is not reported as a torn tail"
    );
    let balanced = concat(&[
        &prefix.events,
        &interrupted_turn_closers(prefix.events.iter()),
    ]);
    let p = service(&b)?;
    let loaded = p.load(id).await.ctx("load of a torn log")?;
    same_events(h, "load of a torn log", &loaded.events.to_vec(), &balanced)?;
    let stored = load(&b, id).await?;
    clean("after the service's load", &stored)?;
    same_events(h, "after the service's load", &stored.events, &balanced)?;
    p.dispose().await.ctx("disposing the service")
}
