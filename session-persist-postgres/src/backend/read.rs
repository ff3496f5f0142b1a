//! The one read transaction that [`PostgresBackend::load`], [`PostgresBackend::load_from`] and
//! [`PostgresBackend::load_page`] share, and the decoding of a window of event rows.

use session_core::Event;

use super::{PostgresBackend, Result, SessionRow, event_rows, read_tx, session_row, to_u64};
use crate::codec::{self, EventRow};
use crate::error::Error;
use crate::sql;

/// The event rows a read takes, chosen once the session row is read: a statement of [`sql`]
/// (`EVENTS_*`) and the bounds binding its `$2`, `$3`.
pub(super) type EventSelect = Option<(&'static str, Vec<i64>)>;

impl PostgresBackend {
    /// Reads, in one `REPEATABLE READ, READ ONLY` transaction, the session row of `id` and
    /// the event rows `select` picks for it (`None`: no event rows). `Ok(None)`: no such
    /// session, or no schema yet. The connection goes back to the pool only when the
    /// transaction committed; on any error it is dropped.
    pub(super) async fn read_session(
        &self,
        id: &str,
        select: impl FnOnce(&SessionRow) -> EventSelect + Send,
    ) -> Result<Option<(SessionRow, Vec<EventRow>)>> {
        self.check_open()?;
        if !self.has_schema().await? {
            return Ok(None);
        }
        let mut conn = self.inner.pool.get().await?;
        let tx = read_tx(conn.client()).await?;
        let Some(row) = session_row(&tx, id, sql::SESSION_ROW).await? else {
            drop(tx);
            conn.done();
            return Ok(None);
        };
        let rows = match select(&row) {
            Some((statement, bounds)) => event_rows(&tx, id, statement, &bounds).await?,
            None => Vec::new(),
        };
        tx.commit().await.map_err(Error::pg("load"))?;
        conn.done();
        Ok(Some((row, rows)))
    }
}

/// Decodes event rows read from `from_seq` on and keeps the events of seqs `from_seq..end`.
/// The first row must hold `from_seq` (a packed row may start before it); no rows give no
/// events.
pub(super) fn decode_window(
    id: &str,
    rows: &[EventRow],
    from_seq: u64,
    end: u64,
) -> Result<Vec<Event>> {
    let Some(first) = rows.first() else {
        return Ok(Vec::new());
    };
    let first_seq = to_u64(first.seq);
    if first_seq > from_seq {
        return Err(Error::corrupt(
            id,
            Some(first_seq),
            format!("no stored row holds seq {from_seq}"),
        ));
    }
    let mut events = codec::decode_rows(id, rows, first_seq)?;
    events.retain(|e| (from_seq..end).contains(&e.seq()));
    Ok(events)
}
