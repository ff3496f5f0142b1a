//! Acknowledged ⇒ loadable for arbitrary drafts on the `PostgreSQL` backend
//! (`conformance::draft_rounds`), each round on a schema of its own. Without a server the test
//! prints `SKIPPED: PostgreSQL not reachable at ...` and passes, unless `SESSION_PG_REQUIRED=1`.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

mod common;

use std::sync::Arc;

use conformance::draft_rounds::{arb_round, check_round};
use proptest::prelude::*;
use session_core::FixedClock;

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    ProptestConfig::with_cases(cases)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn postgres_loads_exactly_the_acknowledged_drafts(round in arb_round()) {
        let Some(harness) = common::PostgresHarness::new("draft_rounds") else {
            return Ok(());
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let clock = Arc::new(FixedClock::new(1_783_352_050_748));
        runtime
            .block_on(check_round(&harness, &round, clock))
            .map_err(|e| TestCaseError::fail(format!("{e}\n{round:?}")))?;
    }
}
