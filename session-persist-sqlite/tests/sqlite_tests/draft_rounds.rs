//! Acknowledged ⇒ loadable for arbitrary drafts on the `SQLite` backend
//! (`conformance::draft_rounds`): every draft a live session accepts is in the database after
//! `flush` and `load`s back exactly, and a refused draft stores nothing.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::common::TempDir;
use conformance::backend_suite::{Capabilities, Harness, Storages, async_trait};
use conformance::draft_rounds::{Round, arb_round, check_round};
use proptest::prelude::*;
use session_core::FixedClock;
use session_persist::Backend;
use session_persist_sqlite::{JournalMode, SqliteBackend, SqliteConfig};

/// Database files under one temporary directory; a reopen closes the backend and opens the
/// same file again.
struct Databases {
    dir: TempDir,
    next: AtomicU64,
    storages: Storages<PathBuf>,
}

impl Databases {
    fn open_at(&self, db: PathBuf) -> Arc<dyn Backend> {
        let config = SqliteConfig::new(db.to_str().unwrap()).journal_mode(JournalMode::Wal);
        let backend: Arc<dyn Backend> = Arc::new(SqliteBackend::new(config).unwrap());
        self.storages.register(&backend, db);
        backend
    }
}

#[async_trait]
impl Harness for Databases {
    async fn open(&self) -> Arc<dyn Backend> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        self.open_at(self.dir.path().join(format!("drafts-{n}.db")))
    }

    async fn reopen(&self, old: Arc<dyn Backend>) -> Arc<dyn Backend> {
        let db = self.storages.get(&old).unwrap();
        let _ = old.close().await;
        drop(old);
        self.open_at(db)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::none()
    }
}

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    ProptestConfig::with_cases(cases)
}

fn run(harness: &Databases, round: &Round) -> Result<(), TestCaseError> {
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
    fn sqlite_loads_exactly_the_acknowledged_drafts(round in arb_round()) {
        let harness = Databases {
            dir: TempDir::new("draft-rounds"),
            next: AtomicU64::new(0),
            storages: Storages::new(),
        };
        run(&harness, &round)?;
    }
}
