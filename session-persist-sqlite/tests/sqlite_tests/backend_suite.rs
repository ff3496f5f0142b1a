//! The workspace's backend suite (`conformance::backend_suite!`) run against the `SQLite`
//! backend: every case of the storage-backend contract is a named test here, once with the
//! default journal mode (WAL) and once with `delete`.
//!
//! The harness keeps each storage in a database file of its own under a private temporary
//! directory; a restart closes the backend and opens a new one on the same file. `SQLite`
//! commits a batch in one transaction, so a crash cannot leave half a batch behind by itself;
//! the harness produces the state the backend must still tolerate (an undecodable row after
//! the last durable `turn/end`, persistence §4.6) by committing the first part of the batch and
//! then writing the next record cut in half, through a connection of its own.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::common::TempDir;
use conformance::backend_suite::{Capabilities, Harness, Storages, async_trait};
use session_core::{Event, SessionHeader};
use session_persist::Backend;
use session_persist_sqlite::rusqlite::{Connection, params};
use session_persist_sqlite::{JournalMode, SqliteBackend, SqliteConfig};

/// The `SQLite` backend on database files under one temporary directory, removed with the
/// harness.
pub(crate) struct SqliteHarness {
    journal_mode: JournalMode,
    dir: TempDir,
    next: AtomicU64,
    storages: Storages<PathBuf>,
}

impl SqliteHarness {
    /// A harness whose stores use `journal_mode`.
    pub(crate) fn new(journal_mode: JournalMode) -> SqliteHarness {
        SqliteHarness {
            journal_mode,
            dir: TempDir::new(&format!("suite-{}", journal_mode.as_str())),
            next: AtomicU64::new(0),
            storages: Storages::new(),
        }
    }

    fn open_at(&self, db: &Path) -> Arc<dyn Backend> {
        let Some(path) = db.to_str() else {
            panic!("SqliteHarness: {} is not UTF-8", db.display());
        };
        let config = SqliteConfig::new(path).journal_mode(self.journal_mode);
        let backend = match SqliteBackend::new(config) {
            Ok(b) => b,
            Err(e) => panic!("SqliteHarness: cannot configure {}: {e}", db.display()),
        };
        let backend: Arc<dyn Backend> = Arc::new(backend);
        self.storages.register(&backend, db.to_path_buf());
        backend
    }

    fn db_of(&self, backend: &Arc<dyn Backend>) -> PathBuf {
        match self.storages.get(backend) {
            Some(db) => db,
            None => panic!("SqliteHarness: the backend was not opened by this harness"),
        }
    }
}

#[async_trait]
impl Harness for SqliteHarness {
    async fn open(&self) -> Arc<dyn Backend> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        self.open_at(&self.dir.path().join(format!("store-{n}.db")))
    }

    async fn reopen(&self, old: Arc<dyn Backend>) -> Arc<dyn Backend> {
        let db = self.db_of(&old);
        let _ = old.close().await;
        drop(old);
        self.open_at(&db)
    }

    fn capabilities(&self) -> Capabilities {
        // No raw artifacts and no per-session writer lock (persistence §4.11): a stale writer
        // is refused by the tail check instead, which is what `seq_checks` covers. Rows hold
        // the envelope as columns (schema 17 has no place for its key order), so events come
        // back in the live-append key order.
        Capabilities::none()
            .with_torn_tails()
            .with_seek()
            .with_revision_changes_on_append()
            .with_seq_checks()
            .with_fixed_envelope_order()
    }

    async fn tear_append(
        &self,
        backend: Arc<dyn Backend>,
        meta: &SessionHeader,
        batch: &[Event],
    ) -> Result<Arc<dyn Backend>, String> {
        if batch.len() < 2 {
            return Err(format!(
                "a batch of {} events is too short to tear",
                batch.len()
            ));
        }
        let db = self.db_of(&backend);
        let (written, cut) = batch.split_at(batch.len() / 2);
        backend
            .append_batch(meta, written, true)
            .await
            .map_err(|e| e.to_string())?;
        let _ = backend.close().await;
        drop(backend);
        let torn = &cut[0];
        let text = torn.data().to_json();
        let half = text
            .char_indices()
            .map(|(i, _)| i)
            .find(|i| *i >= text.len() / 2)
            .unwrap_or(text.len());
        let conn = Connection::open(&db).map_err(|e| e.to_string())?;
        conn.execute(
            "INSERT INTO events (session_id, seq, type, time, data) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![
                &*meta.id,
                torn.seq() as i64,
                torn.event_type(),
                torn.time(),
                &text[..half]
            ],
        )
        .map_err(|e| e.to_string())?;
        drop(conn);
        Ok(self.open_at(&db))
    }
}

mod wal {
    use super::*;
    conformance::backend_suite!(SqliteHarness::new(JournalMode::Wal));
}

mod delete_journal {
    use super::*;
    conformance::backend_suite!(SqliteHarness::new(JournalMode::Delete));
}

/// The cases the `SQLite` backend is not applicable to, with the capability each lacks:
/// exactly these, so a case that stops being checked here fails instead of passing unseen.
#[test]
fn not_applicable_cases_are_exactly_the_declared_gaps() {
    let got =
        conformance::backend_suite::not_applicable(&SqliteHarness::new(JournalMode::Wal)).unwrap();
    let expected: &[(&str, &str)] = &[
        ("second_writer_is_refused_until_release", "writer_lock"),
        ("raw_artifact_holds_the_header_and_events", "raw_artifacts"),
    ];
    assert_eq!(got, expected);
}
