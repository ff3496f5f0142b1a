//! The physical row codec: how an append batch becomes rows of the `events` table and back.
//!
//! A batch is partitioned with the `SQLite` backend's rule
//! ([`pack_chunk_runs_limited`] with at most [`MAX_PACKED_ROW_MEMBERS`] members and
//! [`MAX_PACKED_DATA_BYTES`] of data per row): runs of 3 or more delta chunks become one
//! **packed row** (its line is the packed record `{"type":"text-chunks","seq0",...}`), every
//! other event is a **scalar row** (its line is the event's own JSON line). A row's `seq` is
//! its first seq and `last_seq` its last, so a seeking read selects `last_seq >= from`.
//!
//! The line is the source of truth and is stored as the exact text we produced: `line_text`
//! below [`ZSTD_THRESHOLD_BYTES`], otherwise a zstd frame in `line_zstd` when that is strictly
//! smaller. The other columns (`type`, `time`, `surface_op`, `source_event_seqs`, `ignorable`)
//! are copies for querying and are never read back into events.

use std::io::Read;

use session_core::Event;
use session_core::chunk_rows::{
    MAX_PACKED_DATA_BYTES, MAX_PACKED_ROW_MEMBERS, PackedRow, StorageRecord,
    pack_chunk_runs_limited,
};
use session_core::json::{self, Value};

use crate::error::{Error, Result};

/// Lines this long (UTF-8 bytes) or longer are compressed when that is strictly smaller.
pub const ZSTD_THRESHOLD_BYTES: usize = 4_096;

/// The zstd level of compressed lines.
pub const ZSTD_LEVEL: i32 = 3;

/// The most bytes a compressed line may expand to (a corrupt database cannot exhaust memory).
pub const MAX_LINE_BYTES: usize = 1 << 30;

/// One physical row of the `events` table (without the session id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRow {
    /// The first seq the row stands for.
    pub seq: i64,
    /// The last seq the row stands for.
    pub last_seq: i64,
    /// The event type, or the packed row's tag.
    pub ty: String,
    /// The event time, or the packed row's `time0`.
    pub time: i64,
    /// Whether the row is a packed chunk row.
    pub packed: bool,
    /// The line as text (exactly one of `text` and `zstd` is set).
    pub text: Option<String>,
    /// The line as a zstd frame.
    pub zstd: Option<Vec<u8>>,
    /// The event's `surfaceOp` as JSON text (scalar rows only).
    pub surface_op: Option<String>,
    /// The event's `sourceEventSeqs` as JSON text (scalar rows only).
    pub source_event_seqs: Option<String>,
    /// The event's `ignorable` flag (scalar rows only).
    pub ignorable: bool,
}

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Encodes a line: text below the threshold, otherwise zstd when strictly smaller.
pub fn encode_line(line: String) -> Result<(Option<String>, Option<Vec<u8>>)> {
    if line.len() < ZSTD_THRESHOLD_BYTES {
        return Ok((Some(line), None));
    }
    let compressed = zstd::bulk::compress(line.as_bytes(), ZSTD_LEVEL).map_err(Error::Zstd)?;
    if compressed.len() < line.len() {
        Ok((None, Some(compressed)))
    } else {
        Ok((Some(line), None))
    }
}

/// The row of one storage record.
pub fn bind_record(record: &StorageRecord) -> Result<EventRow> {
    match record {
        StorageRecord::Row(row) => {
            let (text, zstd) = encode_line(row.to_json())?;
            Ok(EventRow {
                seq: to_i64(row.seq0()),
                last_seq: to_i64(row.last_seq()),
                ty: row.tag().as_str().to_owned(),
                time: row.time0(),
                packed: true,
                text,
                zstd,
                surface_op: None,
                source_event_seqs: None,
                ignorable: false,
            })
        }
        StorageRecord::Event(event) => bind_event(event),
    }
}

/// The scalar row of one event.
pub fn bind_event(event: &Event) -> Result<EventRow> {
    let (text, zstd) = encode_line(event.to_json())?;
    Ok(EventRow {
        seq: to_i64(event.seq()),
        last_seq: to_i64(event.seq()),
        ty: event.event_type().to_owned(),
        time: event.time(),
        packed: false,
        text,
        zstd,
        surface_op: event.surface_op_value().map(Value::to_json),
        source_event_seqs: event.source_event_seqs_value().map(Value::to_json),
        ignorable: event.ignorable(),
    })
}

/// The rows of one append batch (packing is batch-local).
pub fn pack_batch(events: &[Event]) -> Result<Vec<EventRow>> {
    pack_chunk_runs_limited(events, MAX_PACKED_ROW_MEMBERS, MAX_PACKED_DATA_BYTES)
        .iter()
        .map(bind_record)
        .collect()
}

/// The line of a stored row, decompressed when needed.
pub fn row_line(id: &str, row: &EventRow) -> Result<String> {
    let seq = Some(row.seq as u64);
    match (&row.text, &row.zstd) {
        (Some(text), None) => Ok(text.clone()),
        (None, Some(bytes)) => {
            let decoder = zstd::stream::read::Decoder::with_buffer(&bytes[..])
                .map_err(|e| Error::corrupt(id, seq, format!("zstd: {e}")))?;
            let mut out = Vec::new();
            decoder
                .take(MAX_LINE_BYTES as u64 + 1)
                .read_to_end(&mut out)
                .map_err(|e| Error::corrupt(id, seq, format!("zstd: {e}")))?;
            if out.len() > MAX_LINE_BYTES {
                return Err(Error::corrupt(
                    id,
                    seq,
                    format!("the line expands past {MAX_LINE_BYTES} bytes"),
                ));
            }
            String::from_utf8(out).map_err(|_| Error::corrupt(id, seq, "the line is not UTF-8"))
        }
        _ => Err(Error::corrupt(
            id,
            seq,
            "exactly one of line_text and line_zstd must be set",
        )),
    }
}

/// Every event a stored row stands for, checked against the row's seq columns.
pub fn decode_row(id: &str, row: &EventRow) -> Result<Vec<Event>> {
    let seq = Some(row.seq as u64);
    let line = row_line(id, row)?;
    let value = json::parse(&line).map_err(|e| Error::corrupt(id, seq, e.to_string()))?;
    let events = if row.packed {
        match PackedRow::from_value(&value) {
            Ok(Some(packed)) => packed.expand(),
            Ok(None) => return Err(Error::corrupt(id, seq, "a packed row without a chunk tag")),
            Err(e) => return Err(Error::corrupt(id, seq, e.to_string())),
        }
    } else {
        vec![Event::from_value(&value).map_err(|e| Error::corrupt(id, seq, e.to_string()))?]
    };
    let first = events.first().map(Event::seq);
    let last = events.last().map(Event::seq);
    if first != Some(row.seq as u64) || last != Some(row.last_seq as u64) {
        return Err(Error::corrupt(
            id,
            seq,
            format!(
                "the line holds seqs {first:?}..={last:?}, the row says {}..={}",
                row.seq, row.last_seq
            ),
        ));
    }
    Ok(events)
}

/// Decodes rows that must continue the log at `expected`, in order.
pub fn decode_rows(id: &str, rows: &[EventRow], mut expected: u64) -> Result<Vec<Event>> {
    let mut out = Vec::new();
    for row in rows {
        if row.seq as u64 != expected {
            return Err(Error::corrupt(
                id,
                Some(row.seq as u64),
                format!("the log is not contiguous: expected a row at seq {expected}"),
            ));
        }
        let events = decode_row(id, row)?;
        expected = row.last_seq as u64 + 1;
        out.extend(events);
    }
    Ok(out)
}
