//! Cases of torn tails and repair: what a backend reports after a torn append, and what a
//! repair commits.

use super::{
    Arc, Backend, Ctx, Event, Harness, Outcome, SessionHeader, SuiteFailure, TURN_LEN, append,
    clean, concat, interrupted_turn_closers, lacks, load, meta, partial_turn, revision,
    same_events, turn,
};

/// Builds a log whose last append was torn by a crash: turn 1, then turn 2 up to its user
/// message, then a torn batch of turn 2's next five events. Returns the new backend, the
/// header, and every event appended (the torn ones last).
pub(super) async fn torn_log(
    h: &dyn Harness,
    id: &str,
) -> Result<(Arc<dyn Backend>, SessionHeader, Vec<Event>, usize), SuiteFailure> {
    let b = h.open().await;
    let m = meta(id);
    let full = turn(TURN_LEN, 2);
    let committed = concat(&[&turn(0, 1), &full[..3]]);
    append(&b, &m, &committed[..TURN_LEN as usize], false).await?;
    append(&b, &m, &committed[TURN_LEN as usize..], true).await?;
    let torn = &full[3..8];
    let b = h
        .tear_append(b, &m, torn)
        .await
        .map_err(|e| SuiteFailure::new(format!("the harness could not tear an append: {e}")))?;
    Ok((b, m, concat(&[&committed, torn]), committed.len()))
}

/// After a torn append the backend reports the valid prefix and a torn marker (not an error);
/// the repair cuts the tail, appends the closers, changes the revision, and the log goes on.
pub async fn repair_truncates_torn_tail_and_appends_closers(h: &dyn Harness) -> Outcome {
    let case = "repair_truncates_torn_tail_and_appends_closers";
    if lacks(case, h.capabilities().torn_tails, "torn_tails") {
        return Ok(());
    }
    let id = "torn-repair";
    let (b, m, all, committed) = torn_log(h, id).await?;
    let stored = load(&b, id).await?;
    ensure!(
        stored.torn.is_some(),
        "a torn append is not reported as a torn tail ({} events read)",
        stored.events.len()
    );
    let n = stored.events.len();
    ensure!(
        n >= committed && n < all.len(),
        "after a torn append {n} events were read; between {committed} and {} expected",
        all.len() - 1
    );
    same_events(
        h,
        "the prefix before the torn tail",
        &stored.events,
        &all[..n],
    )?;
    let closers = interrupted_turn_closers(stored.events.iter());
    ensure!(
        !closers.is_empty(),
        "the torn log ends in an open turn and needs closers"
    );
    b.commit_repair(&m, stored.torn.clone(), &closers)
        .await
        .ctx("commit_repair with the torn marker")?;
    let repaired = load(&b, id).await?;
    clean("after the repair", &repaired)?;
    let balanced = concat(&[&stored.events, &closers]);
    same_events(h, "after the repair", &repaired.events, &balanced)?;
    if h.capabilities().revision_changes_on_append {
        ensure!(
            repaired.revision != stored.revision,
            "the revision did not change after a repair"
        );
    }
    let next = turn(balanced.len() as u64, 3);
    append(&b, &m, &next, true).await?;
    let b = h.reopen(b).await;
    let stored = load(&b, id).await?;
    clean("after appending to a repaired log and a restart", &stored)?;
    same_events(
        h,
        "after appending to a repaired log and a restart",
        &stored.events,
        &concat(&[&balanced, &next]),
    )
}

/// Reading a torn log changes nothing: the same prefix, marker and revision every time.
pub async fn torn_tail_reads_are_observations(h: &dyn Harness) -> Outcome {
    let case = "torn_tail_reads_are_observations";
    if lacks(case, h.capabilities().torn_tails, "torn_tails") {
        return Ok(());
    }
    let id = "torn-reads";
    let (b, _, _, _) = torn_log(h, id).await?;
    let first = load(&b, id).await?;
    ensure!(
        first.torn.is_some(),
        "a torn append is not reported as a torn tail"
    );
    let _ = b.list().await.ctx("list")?;
    let _ = b.list_snapshots().await.ctx("list_snapshots")?;
    if b.supports_raw_artifacts() {
        let _ = b.read_raw(id).await.ctx("read_raw")?;
    }
    for _ in 0..2 {
        let again = load(&b, id).await?;
        ensure!(
            again.revision == first.revision,
            "reading a torn log changed its revision"
        );
        ensure!(
            again.torn == first.torn,
            "reading a torn log changed its torn marker"
        );
        same_events(
            h,
            "a second read of a torn log",
            &again.events,
            &first.events,
        )?;
        ensure!(
            revision(&b, id).await? == first.revision,
            "read_stored_revision disagrees with load_stored on a torn log"
        );
    }
    Ok(())
}

/// A repair without a torn marker only appends: every stored event stays, the closers follow.
pub async fn repair_without_marker_only_appends(h: &dyn Harness) -> Outcome {
    let b = h.open().await;
    let id = "repair-append";
    let m = meta(id);
    let events = concat(&[&turn(0, 1), &partial_turn(TURN_LEN, 2, 8)]);
    append(&b, &m, &events, false).await?;
    let stored = load(&b, id).await?;
    clean("before the repair", &stored)?;
    let closers = interrupted_turn_closers(stored.events.iter());
    ensure!(
        closers.len() == 3,
        "an interrupted recorded tool call needs three closers"
    );
    b.commit_repair(&m, None, &closers)
        .await
        .ctx("commit_repair without a marker")?;
    let repaired = load(&b, id).await?;
    clean("after the repair", &repaired)?;
    same_events(
        h,
        "after the repair",
        &repaired.events,
        &concat(&[&events, &closers]),
    )
}

/// A repair with neither marker nor closers does nothing.
pub async fn repair_without_marker_or_closers_changes_nothing(h: &dyn Harness) -> Outcome {
    let b = h.open().await;
    let id = "repair-nothing";
    let m = meta(id);
    let events = concat(&[&turn(0, 1), &partial_turn(TURN_LEN, 2, 2)]);
    append(&b, &m, &events, false).await?;
    let before = revision(&b, id).await?;
    b.commit_repair(&m, None, &[])
        .await
        .ctx("commit_repair with nothing to do")?;
    let stored = load(&b, id).await?;
    same_events(h, "after an empty repair", &stored.events, &events)?;
    ensure!(
        stored.revision == before,
        "an empty repair changed the revision"
    );
    Ok(())
}

/// Closers committed by a repair are durable: a restart reads the balanced log.
pub async fn closers_survive_reopen(h: &dyn Harness) -> Outcome {
    let b = h.open().await;
    let id = "closers-durable";
    let m = meta(id);
    let events = concat(&[&turn(0, 1), &partial_turn(TURN_LEN, 2, 5)]);
    append(&b, &m, &events, false).await?;
    let stored = load(&b, id).await?;
    let closers = interrupted_turn_closers(stored.events.iter());
    b.commit_repair(&m, None, &closers)
        .await
        .ctx("commit_repair")?;
    let b = h.reopen(b).await;
    let stored = load(&b, id).await?;
    clean("after a restart", &stored)?;
    same_events(
        h,
        "after a restart",
        &stored.events,
        &concat(&[&events, &closers]),
    )?;
    ensure!(
        interrupted_turn_closers(stored.events.iter()).is_empty(),
        "the repaired log still has an open turn after a restart"
    );
    Ok(())
}
