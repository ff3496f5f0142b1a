//! Paged reads of a stored log ([`session_persist::Backend::load_stored_page`]).

use session_persist::StoredPage;

use super::{PostgresBackend, Result, SessionRow, decode_window, row_meta, to_i64, to_u64};
use crate::error::Error;
use crate::sql;

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
        let max = u64::try_from(max_events.max(1)).unwrap_or(u64::MAX);
        // The page's seqs: `from_seq..end`, known once the session row is read.
        let page_end = |row: &SessionRow| from_seq.saturating_add(max).min(to_u64(row.next_seq));
        let select = |row: &SessionRow| {
            let end = page_end(row);
            (from_seq < end).then(|| (sql::EVENTS_RANGE, vec![to_i64(from_seq), to_i64(end - 1)]))
        };
        let Some((row, rows)) = self.read_session(id, select).await? else {
            return Ok(None);
        };
        let next_seq = to_u64(row.next_seq);
        let end = page_end(&row);
        let (meta, header_value) = row_meta(&row)?;
        let events = decode_window(id, &rows, from_seq, end)?;
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
