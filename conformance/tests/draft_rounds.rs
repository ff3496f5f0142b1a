//! Acknowledged ⇒ loadable for arbitrary drafts, on the memory and JSONL (raw and zstd)
//! backends (`conformance::draft_rounds`). `SQLite` and `PostgreSQL` run the same rounds from
//! their crates' tests.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

use std::sync::Arc;

use conformance::backend_suite::Harness;
use conformance::backend_suite::harnesses::{JsonlHarness, MemoryHarness};
use conformance::draft_rounds::{Round, arb_round, check_round};
use proptest::prelude::*;
use session_core::FixedClock;
use session_persist::Compression;

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    ProptestConfig::with_cases(cases)
}

fn run(harness: &dyn Harness, round: &Round) -> Result<(), TestCaseError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let clock = Arc::new(FixedClock::new(1_783_352_050_748));
    runtime
        .block_on(check_round(harness, round, clock))
        .map_err(|e| TestCaseError::fail(format!("{e}\n{round:?}")))
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn memory_loads_exactly_the_acknowledged_drafts(round in arb_round()) {
        run(&MemoryHarness::new(), &round)?;
    }

    #[test]
    fn jsonl_raw_loads_exactly_the_acknowledged_drafts(round in arb_round()) {
        run(&JsonlHarness::new(Compression::None), &round)?;
    }

    #[test]
    fn jsonl_zstd_loads_exactly_the_acknowledged_drafts(round in arb_round()) {
        run(&JsonlHarness::new(Compression::Zstd), &round)?;
    }
}
