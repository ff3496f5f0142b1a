//! Cases of `Backend::publish_batches`: a new session published in several batches at once.

use std::ops::Range;

use session_persist::Error;

use super::{
    Ctx, Harness, Outcome, SuiteFailure, append, clean, concat, load, meta, same_events,
    tricky_events, turn, turns,
};
use crate::backend_suite::fixtures::TURN_LEN;

/// A session published as several batches at once loads as the same batches appended one by
/// one, before and after a restart, and continues with appends; a bad batch layout and a
/// session that already exists are refused, leaving nothing (or the existing log) stored.
pub async fn publishing_batches_at_once_stores_what_appending_them_stores(
    h: &dyn Harness,
) -> Outcome {
    let b = h.open().await;
    let events = concat(&[&turns(2), &tricky_events(2 * TURN_LEN)]);
    let n = events.len();
    let layouts: Vec<Vec<Range<usize>>> = vec![
        std::iter::once(0..n).collect(),
        (0..n).map(|i| i..i + 1).collect(),
        vec![0..3, 3..TURN_LEN as usize, TURN_LEN as usize..n],
    ];
    for (k, batches) in layouts.iter().enumerate() {
        let m = meta(&format!("published-{k}"));
        b.publish_batches(&m, events.clone(), batches)
            .await
            .ctx(&format!(
                "publish_batches of {n} events in {} batches",
                batches.len()
            ))?;
    }
    // Appends continue a published session as they continue an appended one.
    let next = turn(n as u64, 3);
    append(&b, &meta("published-2"), &next, true).await?;
    let mut b = b;
    for round in ["as written", "after a restart"] {
        if round == "after a restart" {
            b = h.reopen(b).await;
        }
        for (k, batches) in layouts.iter().enumerate() {
            let stored = load(&b, &format!("published-{k}")).await?;
            let want = if k == 2 {
                concat(&[&events, &next])
            } else {
                events.clone()
            };
            same_events(
                h,
                &format!("{round}, published in {} batches", batches.len()),
                &stored.events,
                &want,
            )?;
            clean(round, &stored)?;
        }
    }
    // Refusals: bad layouts store nothing; a second publication keeps the first.
    for bad in [
        vec![],
        vec![0..2, 3..n],
        std::iter::once(0..n - 1).collect(),
        vec![0..2, 2..2, 2..n],
    ] {
        let got = b
            .publish_batches(&meta("refused"), events.clone(), &bad)
            .await;
        ensure!(
            matches!(got, Err(Error::InvalidBatches { .. })),
            "publish_batches with batches {bad:?} of {n} events gave {got:?}, expected InvalidBatches"
        );
        let stored = b.load_stored("refused").await.ctx("load_stored")?;
        ensure!(
            stored.is_none(),
            "a refused publish_batches (batches {bad:?}) stored a session"
        );
    }
    let again = b
        .publish_batches(&meta("published-0"), events[..3].to_vec(), &[0..1, 1..3])
        .await;
    ensure!(
        again.is_err(),
        "a second publication of a stored session was accepted: an existing artifact must be \
         refused, never overwritten"
    );
    let stored = load(&b, "published-0").await?;
    same_events(
        h,
        "after a refused second publication",
        &stored.events,
        &events,
    )
}
