//! Deciding an unknown commit outcome. When the connection breaks while a `COMMIT` is in
//! flight, the writer cannot tell whether its transaction committed. It re-reads what it
//! wrote, under locks that wait until the broken connection's transaction is decided, and
//! compares it row by row, bytes included: a stored, identical write is success, an absent
//! one may be retried, anything else is [`Error::CommitOutcomeMismatch`].

use std::ops::Range;

use session_core::Event;
use tokio_postgres::{Client, Transaction};

use super::publish::RowGroups;
use super::{
    PostgresBackend, RESOLVE_LOCK_TIMEOUT, Resolution, Result, SessionRow, Write, event_rows,
    session_row, to_u64,
};
use crate::codec::EventRow;
use crate::error::Error;
use crate::schema::SESSION_LOCK_CLASS;
use crate::sql;

impl PostgresBackend {
    /// Opens the transaction that decides an outcome for session `id` and reads its row. The
    /// session's advisory lock and a `FOR SHARE` lock on the row wait (at most
    /// [`RESOLVE_LOCK_TIMEOUT`]) until the broken connection's transaction is decided.
    async fn deciding_tx<'c>(
        &self,
        client: &'c mut Client,
        id: &str,
    ) -> Result<(Transaction<'c>, Option<SessionRow>)> {
        let tx = client.transaction().await.map_err(Error::pg("resolve"))?;
        tx.batch_execute(&format!(
            "SET LOCAL lock_timeout = '{RESOLVE_LOCK_TIMEOUT}'"
        ))
        .await
        .map_err(Error::pg("resolve"))?;
        if self.inner.options.advisory_locks {
            tx.execute(sql::SESSION_ADVISORY_LOCK, &[&SESSION_LOCK_CLASS, &id])
                .await
                .map_err(Error::pg("resolve"))?;
        }
        let row = session_row(&tx, id, sql::SESSION_ROW_FOR_SHARE).await?;
        Ok((tx, row))
    }

    /// Decides `write`, whose commit outcome is unknown.
    pub(super) async fn decide(&self, write: &Write<'_>) -> Result<Resolution> {
        match *write {
            Write::Append { meta, rows, .. } => self.resolve(&meta.id, rows).await,
            Write::Publish {
                meta,
                events,
                batches,
            } => self.resolve_publication(&meta.id, events, batches).await,
        }
    }

    /// Decides an append of `rows`: the batch's seqs are re-read and compared.
    async fn resolve(&self, id: &str, rows: &[EventRow]) -> Result<Resolution> {
        let first = rows.first().map_or(0, |r| r.seq);
        let last = rows.last().map_or(first, |r| r.last_seq);
        let mut conn = self.inner.pool.get().await?;
        let (tx, row) = self.deciding_tx(conn.client(), id).await?;
        let stored = event_rows(&tx, id, sql::EVENTS_RANGE, &[first, last]).await?;
        tx.commit().await.map_err(Error::pg("resolve"))?;
        conn.done();
        let Some(row) = row else {
            return Ok(Resolution::Absent);
        };
        if stored.is_empty() {
            return Ok(Resolution::Absent);
        }
        if stored.as_slice() == rows {
            return self.committed_by_me(id, to_u64(first), &row);
        }
        Err(Error::CommitOutcomeMismatch {
            id: id.to_owned(),
            first: to_u64(first),
            why: format!(
                "{} stored rows overlap seqs {first}..={last} and differ from the batch",
                stored.len()
            ),
        })
    }

    /// Decides a publication of `events` in `batches` ([`PostgresBackend::publish`]). It was
    /// one transaction, so the session is absent or whole: no session row is
    /// [`Resolution::Absent`]; a row is compared with the publication's tail and every row
    /// group, one group in memory at a time.
    async fn resolve_publication(
        &self,
        id: &str,
        events: &[Event],
        batches: &[Range<usize>],
    ) -> Result<Resolution> {
        let mut conn = self.inner.pool.get().await?;
        let (tx, row) = self.deciding_tx(conn.client(), id).await?;
        let Some(row) = row else {
            tx.commit().await.map_err(Error::pg("resolve"))?;
            conn.done();
            return Ok(Resolution::Absent);
        };
        let mismatch = |why: String| Error::CommitOutcomeMismatch {
            id: id.to_owned(),
            first: 0,
            why,
        };
        if to_u64(row.next_seq) != events.len() as u64 {
            return Err(mismatch(format!(
                "a session is stored with its next seq at {}, the publication ends at {}",
                row.next_seq,
                events.len()
            )));
        }
        for group in RowGroups::new(events, batches) {
            let rows = group?;
            let first = rows.first().map_or(0, |r| r.seq);
            let last = rows.last().map_or(first, |r| r.last_seq);
            let stored = event_rows(&tx, id, sql::EVENTS_RANGE, &[first, last]).await?;
            if stored != rows {
                return Err(mismatch(format!(
                    "{} stored rows overlap seqs {first}..={last} and differ from the \
                     publication's {}",
                    stored.len(),
                    rows.len()
                )));
            }
        }
        tx.commit().await.map_err(Error::pg("resolve"))?;
        conn.done();
        self.committed_by_me(id, 0, &row)
    }

    /// A write found stored is this writer's only while it still holds the lease.
    fn committed_by_me(&self, id: &str, first: u64, row: &SessionRow) -> Result<Resolution> {
        if row.lease_holder.as_deref() == Some(self.inner.holder.as_str()) {
            return Ok(Resolution::Committed(row.lease_epoch));
        }
        Err(Error::CommitOutcomeMismatch {
            id: id.to_owned(),
            first,
            why: "the write is stored, but another writer holds the lease now".to_owned(),
        })
    }
}
