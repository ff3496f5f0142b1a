//! The rows of the schema: the SQL that reads and writes them, and their decoding into
//! headers and event rows.

use crate::sql;

use super::{
    Duration, Error, EventRow, FormatRefusal, GenericClient, Result, Row, SessionHeader, ToSql,
    Transaction, Type, Value, json,
};

/// A decoded session row.
#[derive(Debug, Clone)]
pub(super) struct SessionRow {
    pub(super) id: String,
    pub(super) version: i32,
    pub(super) created_at: i64,
    pub(super) cwd: Option<String>,
    pub(super) parent_session: Option<String>,
    pub(super) seed_length: Option<i64>,
    pub(super) origin: Option<String>,
    pub(super) delegation_depth: Option<i64>,
    pub(super) agent_preset: Option<String>,
    pub(super) header_json: String,
    pub(super) incarnation: String,
    pub(super) revision: i64,
    pub(super) next_seq: i64,
    pub(super) lease_epoch: i64,
    pub(super) lease_holder: Option<String>,
    pub(super) lease_live: bool,
    pub(super) lease_ms: i64,
}

pub(super) fn cell<'a, T: tokio_postgres::types::FromSql<'a>>(
    row: &'a Row,
    i: usize,
    id: &str,
    seq: Option<u64>,
) -> Result<T> {
    row.try_get(i)
        .map_err(|e| Error::corrupt(id, seq, format!("column {i}: {e}")))
}

impl SessionRow {
    pub(super) fn decode(row: &Row, id: &str) -> Result<SessionRow> {
        Ok(SessionRow {
            id: cell(row, 0, id, None)?,
            version: cell(row, 1, id, None)?,
            created_at: cell(row, 2, id, None)?,
            cwd: cell(row, 3, id, None)?,
            parent_session: cell(row, 4, id, None)?,
            seed_length: cell(row, 5, id, None)?,
            origin: cell(row, 6, id, None)?,
            delegation_depth: cell(row, 7, id, None)?,
            agent_preset: cell(row, 8, id, None)?,
            header_json: cell(row, 9, id, None)?,
            incarnation: cell(row, 10, id, None)?,
            revision: cell(row, 11, id, None)?,
            next_seq: cell(row, 12, id, None)?,
            lease_epoch: cell(row, 13, id, None)?,
            lease_holder: cell(row, 14, id, None)?,
            lease_live: cell(row, 15, id, None)?,
            lease_ms: cell(row, 16, id, None)?,
        })
    }
}

pub(super) fn decode_event_row(row: &Row, id: &str) -> Result<EventRow> {
    Ok(EventRow {
        seq: cell(row, 0, id, None)?,
        last_seq: cell(row, 1, id, None)?,
        ty: cell(row, 2, id, None)?,
        time: cell(row, 3, id, None)?,
        packed: cell(row, 4, id, None)?,
        text: cell(row, 5, id, None)?,
        zstd: cell(row, 6, id, None)?,
        surface_op: cell(row, 7, id, None)?,
        source_event_seqs: cell(row, 8, id, None)?,
        ignorable: cell(row, 9, id, None)?,
    })
}

pub(super) fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

pub(super) fn to_u64(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

pub(super) fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// The header of a session row (columns) and the header record as written.
pub(super) fn row_meta(row: &SessionRow) -> Result<(SessionHeader, Value)> {
    if row.version != 0 {
        return Err(Error::FormatUnsupported(FormatRefusal::Version {
            id: row.id.clone(),
            version: row.version.to_string(),
            newer: row.version > 0,
        }));
    }
    let header_value = json::parse(&row.header_json)
        .map_err(|e| Error::corrupt(&row.id, None, format!("header_json: {e}")))?;
    // Rebuilt from the known fields only: unknown stored keys are not part of the metadata.
    let header_value = SessionHeader::known_fields(&header_value);
    Ok((row_header(row), header_value))
}

/// The header of a session row's columns, for any format version: a version other than 0 is
/// kept as stored ([`SessionHeader::stored`]), so a listing shows it (only opening refuses).
pub(super) fn row_header(row: &SessionRow) -> SessionHeader {
    let mut meta = SessionHeader::new(row.id.as_str(), to_u64(row.created_at));
    meta.cwd = row.cwd.as_deref().map(Into::into);
    meta.parent_session = row.parent_session.as_deref().map(Into::into);
    meta.seed_length = row.seed_length.map(to_u64);
    meta.origin_subagent = row.origin.is_some();
    meta.delegation_depth = row.delegation_depth.map(to_u64);
    meta.agent_preset = row.agent_preset.as_deref().map(Into::into);
    if row.version != 0
        && let Some(fields) = meta.to_value().as_object()
    {
        let stored = fields.with(
            "version",
            session_core::event::int_value(i64::from(row.version)),
        );
        meta.stored = Some(Value::Object(stored));
    }
    meta
}

/// The arrays of an `unnest` insert: one array a column.
#[derive(Default)]
pub(super) struct InsertArrays {
    seq: Vec<i64>,
    last_seq: Vec<i64>,
    ty: Vec<String>,
    time: Vec<i64>,
    packed: Vec<bool>,
    text: Vec<Option<String>>,
    zstd: Vec<Option<Vec<u8>>>,
    surface_op: Vec<Option<String>>,
    source_event_seqs: Vec<Option<String>>,
    ignorable: Vec<bool>,
}

impl InsertArrays {
    /// The columns of `rows`, which are moved in (not copied).
    pub(super) fn new(rows: impl IntoIterator<Item = EventRow>) -> InsertArrays {
        let mut a = InsertArrays::default();
        for r in rows {
            a.seq.push(r.seq);
            a.last_seq.push(r.last_seq);
            a.ty.push(r.ty);
            a.time.push(r.time);
            a.packed.push(r.packed);
            a.text.push(r.text);
            a.zstd.push(r.zstd);
            a.surface_op.push(r.surface_op);
            a.source_event_seqs.push(r.source_event_seqs);
            a.ignorable.push(r.ignorable);
        }
        a
    }
}

/// Inserts copies of `rows` (kept by the caller: an append compares them with the stored tail
/// when its commit outcome is unknown).
pub(super) async fn insert_rows(tx: &Transaction<'_>, id: &str, rows: &[EventRow]) -> Result<()> {
    insert_arrays(tx, id, InsertArrays::new(rows.iter().cloned())).await
}

/// Inserts the rows of `a` in one `unnest` statement.
pub(super) async fn insert_arrays(tx: &Transaction<'_>, id: &str, a: InsertArrays) -> Result<()> {
    if a.seq.is_empty() {
        return Ok(());
    }
    tx.execute_typed(
        sql::INSERT_EVENTS,
        &[
            (&id, Type::TEXT),
            (&a.seq, Type::INT8_ARRAY),
            (&a.last_seq, Type::INT8_ARRAY),
            (&a.ty, Type::TEXT_ARRAY),
            (&a.time, Type::INT8_ARRAY),
            (&a.packed, Type::BOOL_ARRAY),
            (&a.text, Type::TEXT_ARRAY),
            (&a.zstd, Type::BYTEA_ARRAY),
            (&a.surface_op, Type::TEXT_ARRAY),
            (&a.source_event_seqs, Type::TEXT_ARRAY),
            (&a.ignorable, Type::BOOL_ARRAY),
        ],
    )
    .await
    .map_err(Error::pg("insert events"))?;
    Ok(())
}

/// Reads one session row with `statement` (one of [`sql::SESSION_ROW`] and its locking
/// forms).
pub(super) async fn session_row(
    client: &impl GenericClient,
    id: &str,
    statement: &'static str,
) -> Result<Option<SessionRow>> {
    let row = client
        .query_typed_opt(statement, &[(&id, Type::TEXT)])
        .await
        .map_err(Error::pg("read session"))?;
    row.map(|r| SessionRow::decode(&r, id)).transpose()
}

/// Reads a session's event rows with `statement` (one of the `EVENTS_*` of [`sql`]),
/// `bounds` binding `$2`, `$3`.
pub(super) async fn event_rows(
    client: &impl GenericClient,
    id: &str,
    statement: &'static str,
    bounds: &[i64],
) -> Result<Vec<EventRow>> {
    let mut params: Vec<(&(dyn ToSql + Sync), Type)> = vec![(&id, Type::TEXT)];
    params.extend(
        bounds
            .iter()
            .map(|b| (b as &(dyn ToSql + Sync), Type::INT8)),
    );
    let rows = client
        .query_typed(statement, &params)
        .await
        .map_err(Error::pg("read events"))?;
    rows.iter().map(|r| decode_event_row(r, id)).collect()
}
