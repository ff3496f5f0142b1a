//! The physical row codec of schema 17: how logical events become rows and back.
//!
//! * A **scalar row** holds one logical event: `data` is `JSON.stringify(event.data)`,
//!   `surface_op` is `JSON.stringify(surfaceOp)`, `source_event_seqs` is a varint blob (an
//!   empty array is an empty, non-NULL blob) and `ignorable` is 1 or NULL.
//! * A **packed row** holds a run of 3 to 1,024 delta chunks (`text-chunks`,
//!   `reasoning-chunks`, `tool-call-chunks`) whose `data` JSON is at most 1 MiB; its `ignorable`
//!   column is 0, the discriminator, and its surface columns are NULL. A logical ignorable event
//!   whose type happens to be a tag therefore stays a scalar row.
//! * `data` of 4,096 UTF-8 bytes or more is stored as a zstd frame (level 3, no checksum) when
//!   that is strictly smaller.
//!
//! The packed-row validator is this schema's own frozen codec, with its own messages
//! (`malformed <tag> storage row: <why>`); expansion into events is shared with `session-core`.

use std::borrow::Cow;
use std::io::Read;

pub use session_core::chunk_rows::Decoded;
use session_core::chunk_rows::{
    MAX_PACKED_DATA_BYTES, MAX_PACKED_ROW_MEMBERS, PackedRow, StorageRecord, is_row_tag,
    pack_chunk_runs_limited,
};
use session_core::event::{int_value, seq_value};
use session_core::json::{self, MAX_SAFE_INTEGER, ParseErrorKind, Value};
use session_core::{Event, EventParts, KeyOrder};

use crate::error::{Error, Result};
use crate::schema::{EventRow, RowData};

/// `ZSTD_DATA_THRESHOLD_BYTES`: data values this long (UTF-8 bytes) or longer are compressed
/// when that is strictly smaller.
pub const ZSTD_DATA_THRESHOLD_BYTES: usize = 4_096;

/// The zstd compression level of data values.
pub const ZSTD_LEVEL: i32 = 3;

/// The `ignorable` value that marks a packed row.
pub const PACKED_ROW_SENTINEL: i64 = 0;

/// The fewest members a packed row may hold.
pub const MIN_PACKED_ROW_MEMBERS: usize = 3;

/// The most bytes a compressed scalar data value may expand to. The reference sets no bound
/// (its strings are capped by the JavaScript engine at well under this); this one keeps a
/// corrupt or hostile database from exhausting memory.
pub const MAX_SCALAR_DATA_BYTES: usize = 1 << 30;

const MAX_SAFE: u64 = MAX_SAFE_INTEGER as u64;
const MAX_ZIGZAG: u64 = MAX_SAFE * 2;

// ---- data values ----

/// Encodes a serialized data value: TEXT below [`ZSTD_DATA_THRESHOLD_BYTES`], otherwise a zstd
/// frame when it is strictly smaller than the text.
pub fn encode_data(serialized: String) -> Result<RowData> {
    encode_data_with(serialized, |bytes| zstd::bulk::compress(bytes, ZSTD_LEVEL))
}

/// [`encode_data`] with the compressor supplied (it is only called from the threshold on).
pub fn encode_data_with(
    serialized: String,
    compress: impl FnOnce(&[u8]) -> std::io::Result<Vec<u8>>,
) -> Result<RowData> {
    if serialized.len() < ZSTD_DATA_THRESHOLD_BYTES {
        return Ok(RowData::Text(serialized));
    }
    let compressed = compress(serialized.as_bytes()).map_err(Error::Zstd)?;
    if compressed.len() < serialized.len() {
        Ok(RowData::Blob(compressed))
    } else {
        Ok(RowData::Text(serialized))
    }
}

/// Decodes a data value to JSON text: TEXT as is; a BLOB is zstd-decompressed (refused with
/// [`Error::BufferTooLarge`] past `limit` bytes), then decoded as strict UTF-8 (a leading BOM
/// is dropped, as the WHATWG decoder does).
pub fn decode_data(data: &RowData, limit: usize) -> Result<Cow<'_, str>> {
    match data {
        RowData::Text(s) => Ok(Cow::Borrowed(s)),
        RowData::Blob(b) => {
            let decoder = zstd::stream::read::Decoder::with_buffer(&b[..]).map_err(Error::Zstd)?;
            let mut out = Vec::new();
            decoder
                .take((limit as u64).saturating_add(1))
                .read_to_end(&mut out)
                .map_err(Error::Zstd)?;
            if out.len() > limit {
                return Err(Error::BufferTooLarge { limit });
            }
            let mut text = String::from_utf8(out).map_err(|_| Error::InvalidUtf8)?;
            if text.starts_with('\u{feff}') {
                text.drain(..'\u{feff}'.len_utf8());
            }
            Ok(Cow::Owned(text))
        }
    }
}

// ---- sourceEventSeqs ----

fn append_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v & 0x7f) as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Encodes `sourceEventSeqs`: the first value as an unsigned LEB128 varint, each later one as
/// the `ZigZag` of its difference to the previous. Refuses anything but an array of
/// non-negative safe integers.
pub fn encode_source_event_seqs(values: &Value) -> Result<Vec<u8>> {
    let items = values.as_array().ok_or(Error::SourceSeqsNotIntegers)?;
    let seqs = items
        .iter()
        .map(|item| item.as_u64().ok_or(Error::SourceSeqsNotIntegers))
        .collect::<Result<Vec<u64>>>()?;
    Ok(encode_seqs(&seqs))
}

/// [`encode_source_event_seqs`] of seqs already read as integers.
fn encode_seqs(seqs: &[u64]) -> Vec<u8> {
    let mut out = Vec::with_capacity(seqs.len() * 2);
    let mut previous = 0u64;
    for (i, &v) in seqs.iter().enumerate() {
        let encoded = if i == 0 {
            v
        } else if v >= previous {
            (v - previous) * 2
        } else {
            (previous - v) * 2 - 1
        };
        append_varint(&mut out, encoded);
        previous = v;
    }
    out
}

fn malformed_seqs(why: &'static str) -> Error {
    Error::MalformedSourceSeqs { why }
}

fn read_varint(bytes: &[u8], offset: &mut usize, limit: u64) -> Result<u64> {
    let mut value = 0u64;
    let mut shift = 0u32;
    while let Some(&byte) = bytes.get(*offset) {
        *offset += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            if shift > 0 && byte == 0 {
                return Err(malformed_seqs("non-canonical varint"));
            }
            if value > limit {
                return Err(malformed_seqs("varint is out of range"));
            }
            return Ok(value);
        }
        shift += 7;
        if shift > 56 {
            return Err(malformed_seqs("varint is out of range"));
        }
    }
    Err(malformed_seqs("truncated varint"))
}

/// Decodes a `source_event_seqs` blob (see [`encode_source_event_seqs`]).
pub fn decode_source_event_seqs(bytes: &[u8]) -> Result<Vec<u64>> {
    let mut values = Vec::new();
    let mut previous = 0i128;
    let mut offset = 0;
    while offset < bytes.len() {
        let first = values.is_empty();
        let raw = read_varint(
            bytes,
            &mut offset,
            if first { MAX_SAFE } else { MAX_ZIGZAG },
        )?;
        let value = if first {
            i128::from(raw)
        } else if raw & 1 == 0 {
            previous + i128::from(raw / 2)
        } else {
            previous - i128::from(raw / 2 + 1)
        };
        let Some(v) = u64::try_from(value).ok().filter(|v| *v <= MAX_SAFE) else {
            return Err(malformed_seqs("decoded seq is out of range"));
        };
        values.push(v);
        previous = value;
    }
    Ok(values)
}

// ---- encoding rows ----

/// The physical row of one storage record (`bindRecord`).
pub fn bind_record(record: &StorageRecord) -> Result<EventRow> {
    match record {
        StorageRecord::Row(row) => Ok(EventRow {
            seq: row.seq0(),
            ty: row.tag().as_str().to_owned(),
            time: row.time0(),
            data: encode_data(row.data().to_json())?,
            source_event_seqs: None,
            surface_op: None,
            ignorable: Some(PACKED_ROW_SENTINEL),
        }),
        StorageRecord::Event(event) => bind_event(event),
    }
}

/// The scalar row of one logical event.
pub fn bind_event(event: &Event) -> Result<EventRow> {
    Ok(EventRow {
        seq: event.seq(),
        ty: event.event_type().to_owned(),
        time: event.time(),
        data: encode_data(event.data().to_json())?,
        // Read as integers first: a long array read from storage is kept as runs, and its
        // array value would be built and then kept in the event.
        source_event_seqs: match event.source_event_seqs() {
            Some(seqs) => Some(encode_seqs(&seqs)),
            None => event
                .source_event_seqs_value()
                .map(encode_source_event_seqs)
                .transpose()?,
        },
        surface_op: event.surface_op_value().map(Value::to_json),
        ignorable: event.ignorable().then_some(1),
    })
}

/// The rows of one append batch: delta-chunk runs packed with the bounds of this schema
/// (3..1,024 members, at most 1 MiB of data), everything else scalar. Packing is batch-local.
pub fn pack_batch(events: &[Event]) -> Result<Vec<EventRow>> {
    pack_chunk_runs_limited(events, MAX_PACKED_ROW_MEMBERS, MAX_PACKED_DATA_BYTES)
        .iter()
        .map(bind_record)
        .collect()
}

// ---- decoding rows ----

fn parse_json(text: &str, seq: u64) -> Result<Value> {
    json::parse(text).map_err(|e| {
        if e.kind == ParseErrorKind::LoneSurrogate {
            Error::LoneSurrogate { seq }
        } else {
            Error::Json(e)
        }
    })
}

fn malformed(tag: &str, why: &'static str) -> Error {
    Error::MalformedRow {
        tag: tag.to_owned(),
        why,
    }
}

/// Whether a row carries the packed discriminator.
pub fn is_packed(row: &EventRow) -> bool {
    row.ignorable == Some(PACKED_ROW_SENTINEL)
}

/// Every logical event a physical row stands for (`decodeRow`), all or nothing.
pub fn decode_row(row: &EventRow) -> Result<Vec<Event>> {
    if !is_packed(row) {
        return decode_scalar(row).map(|e| vec![e]);
    }
    if !is_row_tag(&row.ty) {
        return Err(malformed(
            &row.ty,
            "packed discriminator requires a chunk tag",
        ));
    }
    if row.source_event_seqs.is_some() || row.surface_op.is_some() {
        return Err(malformed(&row.ty, "packed surface fields must be null"));
    }
    let text = decode_data(&row.data, MAX_PACKED_DATA_BYTES)?;
    decode_serialized_chunk_row(&row.ty, row.seq, row.time, &text)
}

fn decode_scalar(row: &EventRow) -> Result<Event> {
    let source_event_seqs = match &row.source_event_seqs {
        None => None,
        Some(bytes) => Some(Value::array(
            decode_source_event_seqs(bytes)?.into_iter().map(seq_value),
        )),
    };
    let surface_op = match &row.surface_op {
        None => None,
        Some(text) => Some(parse_json(text, row.seq)?),
    };
    let data = parse_json(&decode_data(&row.data, MAX_SCALAR_DATA_BYTES)?, row.seq)?;
    Ok(Event::from_parts(
        EventParts {
            ty: row.ty.as_str().into(),
            seq: row.seq,
            time: row.time,
            data,
            surface_op,
            source_event_seqs,
            ignorable: row.ignorable == Some(1),
        },
        KeyOrder::APPEND,
    ))
}

/// Decodes a packed row from its physical fields (`decodeSerializedChunkRow`): the byte bound
/// is checked before the JSON is parsed, then the row is validated and expanded.
pub fn decode_serialized_chunk_row(
    tag: &str,
    seq0: u64,
    time0: i64,
    serialized: &str,
) -> Result<Vec<Event>> {
    if serialized.len() > MAX_PACKED_DATA_BYTES {
        return Err(malformed(tag, "data exceeds 1048576 UTF-8 bytes"));
    }
    let data = parse_json(serialized, seq0)?;
    let record = Value::object([
        ("type", Value::from(tag)),
        ("seq0", seq_value(seq0)),
        ("time0", int_value(time0)),
        ("data", data),
    ]);
    validate_row(&record, tag, Some(serialized.len()))?;
    expand(&record, tag)
}

/// Decodes one parsed storage record of this schema (`decodeStorageRecord`): a value that is
/// not an object with a packed-row tag as its `type` is passed through unvalidated; a tagged
/// record is validated with this schema's rules (3..1,024 members, at most 1 MiB of data) and
/// expanded.
pub fn decode_storage_record(value: &Value) -> Result<Decoded> {
    let tag = value
        .as_object()
        .and_then(|o| o.get("type"))
        .and_then(Value::as_str)
        .filter(|t| is_row_tag(t));
    let Some(tag) = tag else {
        return Ok(Decoded::Passthrough(value.clone()));
    };
    validate_row(value, tag, None)?;
    expand(value, tag).map(Decoded::Expanded)
}

fn expand(record: &Value, tag: &str) -> Result<Vec<Event>> {
    match PackedRow::from_value(record) {
        Ok(Some(row)) => Ok(row.expand()),
        // Unreachable after the stricter validation; reported rather than trusted.
        Ok(None) => Err(malformed(tag, "packed discriminator requires a chunk tag")),
        Err(_) => Err(malformed(tag, "invalid packed row")),
    }
}

/// This schema's envelope checks, then its data checks (`validateRow`).
fn validate_row(record: &Value, tag: &str, serialized_len: Option<usize>) -> Result<()> {
    let Some(obj) = record
        .as_object()
        .filter(|o| o.has_exactly_keys(&["type", "seq0", "time0", "data"]))
    else {
        return Err(malformed(tag, "invalid envelope fields"));
    };
    let Some(seq0) = obj.get("seq0").and_then(Value::as_u64) else {
        return Err(malformed(tag, "seq0 must be non-negative"));
    };
    let Some(time0) = obj.get("time0").and_then(Value::as_i64) else {
        return Err(malformed(tag, "time0 must be a safe integer"));
    };
    let null = Value::Null;
    let data = obj.get("data").unwrap_or(&null);
    validate_packed_data(tag, seq0, time0, data, serialized_len)
}

fn has_exactly(data: Option<&json::Object>, keys: &[&str]) -> bool {
    match data {
        Some(o) => o.has_exactly_keys(keys),
        // An array is an object whose keys are its indices: never one of these key sets.
        None => false,
    }
}

/// This schema's packed-row data validation, with its messages.
fn validate_packed_data(
    tag: &str,
    seq0: u64,
    time0: i64,
    data: &Value,
    serialized_len: Option<usize>,
) -> Result<()> {
    let object = match data {
        Value::Object(o) => Some(o),
        Value::Array(_) => None,
        _ => return Err(malformed(tag, "data must be an object")),
    };
    let tool = tag == "tool-call-chunks";
    let payload_key = if tool {
        let named = has_exactly(
            object,
            &["turn", "step", "index", "id", "name", "dt", "args"],
        );
        if !named && !has_exactly(object, &["turn", "step", "index", "id", "dt", "args"]) {
            return Err(malformed(tag, "invalid tool-call data fields"));
        }
        let is_str = |k: &str| data.get(k).is_some_and(|v| v.as_str().is_some());
        if !is_str("id") || (named && !is_str("name")) {
            return Err(malformed(tag, "id and optional name must be strings"));
        }
        "args"
    } else {
        if !has_exactly(object, &["turn", "step", "index", "dt", "texts"]) {
            return Err(malformed(tag, "invalid text data fields"));
        }
        "texts"
    };
    let is_number = |k: &str| data.get(k).is_some_and(|v| v.as_number().is_some());
    if !is_number("turn") || !is_number("step") || !is_number("index") {
        return Err(malformed(tag, "turn/step/index must be numbers"));
    }
    let members = data.get(payload_key).and_then(Value::as_array);
    let Some(members) = members.filter(|m| {
        (MIN_PACKED_ROW_MEMBERS..=MAX_PACKED_ROW_MEMBERS).contains(&m.len())
            && m.iter().all(|v| v.as_str().is_some())
    }) else {
        return Err(malformed(
            tag,
            if tool {
                "args must contain 3..1024 strings"
            } else {
                "texts must contain 3..1024 strings"
            },
        ));
    };
    let gaps = data.get("dt").and_then(Value::as_array);
    let Some(gaps) = gaps.filter(|g| g.iter().all(|v| v.as_i64().is_some())) else {
        return Err(malformed(tag, "dt must be an array of safe integers"));
    };
    if gaps.len() + 1 != members.len() {
        return Err(malformed(tag, "dt length must match the member count"));
    }
    if serialized_len.unwrap_or_else(|| data.to_json().len()) > MAX_PACKED_DATA_BYTES {
        return Err(malformed(tag, "data exceeds 1048576 UTF-8 bytes"));
    }
    if seq0 + members.len() as u64 - 1 > MAX_SAFE {
        return Err(malformed(tag, "member seqs exceed safe integers"));
    }
    let mut time = time0;
    for gap in gaps.iter() {
        time += gap.as_i64().unwrap_or(0);
        if time.unsigned_abs() > MAX_SAFE {
            return Err(malformed(tag, "member times exceed safe integers"));
        }
    }
    Ok(())
}

// ---- scanning ----

/// The result of [`scan_rows`].
#[derive(Debug, Clone, Default)]
pub struct Scan {
    /// The contiguous logical prefix.
    pub preserved: Vec<Event>,
    /// The first seq of the first row that must be removed, when there is a torn tail.
    pub torn_from: Option<u64>,
}

fn contains_turn_end(events: &[Event]) -> bool {
    events.iter().any(|e| e.event_type() == "turn/end")
}

/// A lone surrogate is a refusal of this build, never evidence of a torn row.
fn decoded(row: &EventRow) -> Result<Option<Vec<Event>>> {
    match decode_row(row) {
        Ok(events) => Ok(Some(events)),
        Err(e @ Error::LoneSurrogate { .. }) => Err(e),
        Err(_) => Ok(None),
    }
}

/// [`scan_rows`] over rows fed one at a time, for one page of the prefix: the events with
/// `seq >= from_seq`, at most `max_events`. Rows are read only until the page is full; when
/// the prefix ends before that (a row that does not decode or does not continue it), the
/// following rows are read until one decodes with a `turn/end`, which makes the damage
/// committed corruption, as in [`scan_rows`].
pub(crate) struct PageScan {
    from_seq: u64,
    max_events: usize,
    expected: u64,
    events: Vec<Event>,
    /// The first seq of the row that ended the prefix, and whether a `turn/end` was found in
    /// it or after it.
    broken: Option<(u64, bool)>,
}

impl PageScan {
    /// A page from `from_seq`, whose first physical row starts at `base` (at most
    /// `from_seq`: a packed row may cover it).
    pub(crate) fn new(base: u64, from_seq: u64, max_events: usize) -> PageScan {
        PageScan {
            from_seq,
            max_events: max_events.max(1),
            expected: base,
            events: Vec::new(),
            broken: None,
        }
    }

    /// Feeds the next physical row; `false` when no more rows are needed.
    pub(crate) fn push(&mut self, row: &EventRow) -> Result<bool> {
        let events = decoded(row)?;
        let has_end = events.as_deref().is_some_and(contains_turn_end);
        if let Some((_, committed)) = &mut self.broken {
            *committed = has_end;
            return Ok(!has_end);
        }
        let expected = self.expected;
        match events {
            Some(events)
                if events
                    .iter()
                    .enumerate()
                    .all(|(k, e)| e.seq() == expected + k as u64) =>
            {
                self.expected += events.len() as u64;
                let from_seq = self.from_seq;
                self.events
                    .extend(events.into_iter().filter(|e| e.seq() >= from_seq));
                if self.events.len() >= self.max_events {
                    self.events.truncate(self.max_events);
                    return Ok(false);
                }
                Ok(true)
            }
            _ => {
                self.broken = Some((row.seq, has_end));
                Ok(!has_end)
            }
        }
    }

    /// The page's events and whether a torn tail follows them.
    pub(crate) fn finish(self) -> Result<(Vec<Event>, bool)> {
        match self.broken {
            Some((seq, true)) => Err(Error::CorruptCommitted { seq }),
            Some((_, false)) => Ok((self.events, true)),
            None => Ok((self.events, false)),
        }
    }
}

/// Validates and flattens physical rows (ordered by seq) into their logical prefix
/// (`scanRows`), expecting the first logical seq to be `base`.
///
/// A row that does not decode, or whose events do not continue the prefix, ends it. When a
/// decodable row containing a `turn/end` follows (or is) that row, the damage is committed
/// corruption ([`Error::CorruptCommitted`]); otherwise the rest is a torn tail starting at the
/// row's seq.
pub fn scan_rows(rows: &[EventRow], base: u64) -> Result<Scan> {
    let mut cache: Vec<Option<Option<Vec<Event>>>> = vec![None; rows.len()];
    let mut last_turn_end = None;
    for (index, row) in rows.iter().enumerate().rev() {
        let events = decoded(row)?;
        let has_end = events.as_deref().is_some_and(contains_turn_end);
        cache[index] = Some(events);
        if has_end {
            last_turn_end = Some(index);
            break;
        }
    }
    let committed = |index: usize| last_turn_end.is_some_and(|end| index <= end);
    let mut preserved = Vec::new();
    let mut expected = base;
    for (index, row) in rows.iter().enumerate() {
        let events = match cache[index].take() {
            Some(events) => events,
            None => decoded(row)?,
        };
        let contiguous = events.as_ref().is_some_and(|events| {
            events
                .iter()
                .enumerate()
                .all(|(k, e)| e.seq() == expected + k as u64)
        });
        match events {
            Some(events) if contiguous => {
                expected += events.len() as u64;
                preserved.extend(events);
            }
            _ => {
                if committed(index) {
                    return Err(Error::CorruptCommitted { seq: row.seq });
                }
                return Ok(Scan {
                    preserved,
                    torn_from: Some(row.seq),
                });
            }
        }
    }
    Ok(Scan {
        preserved,
        torn_from: None,
    })
}
