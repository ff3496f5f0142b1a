//! Paged reads of a stored log ([`session_persist::Backend::load_stored_page`]).

use session_persist::StoredPage;

use super::{PostgresBackend, Result, event_rows, read_tx, row_meta, session_row, to_i64, to_u64};
use crate::error::Error;
use crate::{codec, sql};

impl PostgresBackend {
    /// [`session_persist::Backend::load_stored_page`] with this crate's error type: reads, in
    /// one repeatable-read transaction, the session row and only the event rows overlapping
    /// seqs `from_seq..from_seq + max_events` (a packed row straddling either end included),
    /// and checks that they hold every seq of the page up to the stored `next_seq`. A page is
    /// never torn: an append commits whole.
    pub async fn load_page(
        &self,
        id: &str,
        from_seq: u64,
        max_events: usize,
    ) -> Result<Option<StoredPage>> {
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
        let next_seq = to_u64(row.next_seq);
        let max = u64::try_from(max_events.max(1)).unwrap_or(u64::MAX);
        // The page's seqs: `from_seq..end`.
        let end = from_seq.saturating_add(max).min(next_seq);
        let rows = if from_seq < end {
            let bounds = [to_i64(from_seq), to_i64(end - 1)];
            event_rows(&tx, id, sql::EVENTS_RANGE, &bounds).await?
        } else {
            Vec::new()
        };
        tx.commit().await.map_err(Error::pg("load"))?;
        conn.done();
        let (meta, header_value) = row_meta(&row)?;
        let events = match rows.first() {
            None => Vec::new(),
            Some(first) => {
                if to_u64(first.seq) > from_seq {
                    return Err(Error::corrupt(
                        id,
                        Some(to_u64(first.seq)),
                        format!("no stored row holds seq {from_seq}"),
                    ));
                }
                let mut events = codec::decode_rows(id, &rows, to_u64(first.seq))?;
                events.retain(|e| (from_seq..end).contains(&e.seq()));
                events
            }
        };
        let reached = events.last().map_or(from_seq, |e| e.seq() + 1);
        if from_seq < end && reached != end {
            return Err(Error::corrupt(
                id,
                None,
                format!(
                    "next_seq is {next_seq} but the stored rows of seqs {from_seq}..{end} end at {reached}"
                ),
            ));
        }
        Ok(Some(StoredPage {
            meta,
            header_value,
            revision: self.revision(&row),
            events,
            torn: false,
        }))
    }
}
