//! Publishing a new session with all of its batches in one transaction
//! ([`Backend::publish_batches`](session_persist::Backend::publish_batches)).
//!
//! Each batch is packed as its own append would pack it, so the stored rows are the rows the
//! appends would have stored. The rows are built and sent a group of whole batches at a time
//! ([`RowGroups`]): memory holds one group's rows while the transaction grows, not the
//! session's (a 1.3M-event session's rows at once took about 300 MiB).

use std::ops::Range;

use session_core::{Event, SessionHeader};
use tokio_postgres::Transaction;

use super::rows::{InsertArrays, insert_arrays};
use super::{PostgresBackend, Result, Write};
use crate::codec::{self, EventRow};
use crate::error::Error;

/// A row group closes once it holds this many rows...
const GROUP_ROWS: usize = 1_024;

/// ...or this many bytes of lines (text or compressed), whichever comes first. Larger groups
/// save few round trips and cost peak memory: on the 1.3M-event session, 4,096 rows and 4 MiB
/// peaked about 20 MiB higher than 512 rows and 512 KiB.
const GROUP_LINE_BYTES: usize = 1 << 20;

/// The rows of consecutive whole batches, one group per `INSERT`, packed batch by batch.
pub(super) struct RowGroups<'a> {
    events: &'a [Event],
    batches: std::slice::Iter<'a, Range<usize>>,
}

impl<'a> RowGroups<'a> {
    pub(super) fn new(events: &'a [Event], batches: &'a [Range<usize>]) -> RowGroups<'a> {
        RowGroups {
            events,
            batches: batches.iter(),
        }
    }
}

impl Iterator for RowGroups<'_> {
    type Item = Result<Vec<EventRow>>;

    fn next(&mut self) -> Option<Self::Item> {
        let mut rows = Vec::new();
        let mut bytes = 0;
        while rows.len() < GROUP_ROWS && bytes < GROUP_LINE_BYTES {
            let Some(batch) = self.batches.next() else {
                break;
            };
            let packed = match self.events.get(batch.clone()) {
                Some(events) => codec::pack_batch(events),
                // `publish` checked the layout; a range past the events is still an error.
                None => Err(Error::InvalidBatches {
                    events: self.events.len(),
                    detail: format!("batch {}..{} is past the events", batch.start, batch.end),
                }),
            };
            match packed {
                Ok(packed) => {
                    bytes += packed.iter().map(line_bytes).sum::<usize>();
                    rows.extend(packed);
                }
                Err(e) => return Some(Err(e)),
            }
        }
        (!rows.is_empty()).then_some(Ok(rows))
    }
}

fn line_bytes(row: &EventRow) -> usize {
    row.text.as_ref().map_or(0, String::len) + row.zstd.as_ref().map_or(0, Vec::len)
}

impl PostgresBackend {
    /// [`Backend::publish_batches`](session_persist::Backend::publish_batches) with this
    /// crate's error type (a bad layout is [`Error::InvalidBatches`]): the session row and every
    /// batch's rows in one transaction, under a new lease at epoch 1. An existing session is
    /// [`Error::AlreadyMaterialized`]. When the connection breaks while the commit is in
    /// flight, every row group is re-read: a stored, byte-identical session is success; an
    /// absent one is published once more.
    pub async fn publish(
        &self,
        meta: &SessionHeader,
        events: &[Event],
        batches: &[Range<usize>],
    ) -> Result<()> {
        self.check_open()?;
        session_persist::check_batches(events.len(), batches).map_err(|e| match e {
            session_persist::Error::InvalidBatches { events, detail } => {
                Error::InvalidBatches { events, detail }
            }
            other => Error::InvalidBatches {
                events: events.len(),
                detail: other.to_string(),
            },
        })?;
        let first = events.first().map_or(0, Event::seq);
        let id = &*meta.id;
        if first != 0 {
            return Err(Error::AppendStart {
                id: id.to_owned(),
                first,
                expected: 0,
            });
        }
        self.ensure_schema().await?;
        self.write(Write::Publish {
            meta,
            events,
            batches,
        })
        .await
    }

    /// The publication's work inside its transaction; returns the new lease epoch. The
    /// session row records the last batch's start as its last batch, as the appends would.
    pub(super) async fn publish_in(
        &self,
        tx: &Transaction<'_>,
        meta: &SessionHeader,
        events: &[Event],
        batches: &[Range<usize>],
    ) -> Result<i64> {
        let last_batch = batches.last().map_or(0, |b| b.start);
        let epoch = self
            .insert_session(tx, meta, events.len() as u64, last_batch as u64)
            .await?;
        for group in RowGroups::new(events, batches) {
            insert_arrays(tx, &meta.id, InsertArrays::new(group?)).await?;
        }
        Ok(epoch)
    }
}
