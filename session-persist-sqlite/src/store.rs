//! The synchronous store: one open connection and the storage operations on it.
//!
//! Every method runs on the calling thread and may block (on I/O, or on another connection's
//! lock for up to the busy timeout); the async backend calls them from tokio's blocking pool.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use session_core::chunk_rows::MAX_PACKED_ROW_MEMBERS;
use session_core::event::{int_value, seq_value};
use session_core::json::{Value, write_js_number};
use session_core::{Event, SESSION_FORMAT_VERSION, SessionHeader, header::js_string};
use session_persist::{FormatRefusal, Revision};

use crate::codec::{PageScan, Scan, decode_row, pack_batch, scan_rows};
use crate::error::{Error, Result};
use crate::schema::{
    EVENT_COLUMNS, EventRow, RowData, SESSION_COLUMNS, SessionRow, configure, read_store_id,
    row_cells, validate_schema_for_mutation,
};
use crate::{JournalMode, MEMORY_PATH, path, sql};

/// One open database connection and the identity of its store.
pub(crate) struct Store {
    conn: Connection,
    /// The resolved path, or `:memory:`, as printed in messages.
    path: String,
    identity: String,
}

/// A stored session's header and revision, plus the header as a JSON record.
pub(crate) struct StoredMeta {
    pub(crate) meta: SessionHeader,
    pub(crate) header_value: Value,
    pub(crate) revision: Revision,
}

impl Store {
    /// Opens and configures the database at `file` (`None`: in memory), which the caller
    /// created. The deadline for busy journal-mode retries starts now.
    pub(crate) fn open(
        file: Option<&PathBuf>,
        mode: JournalMode,
        busy_timeout: Duration,
    ) -> Result<Store> {
        let started = Instant::now();
        let (conn, path_text) = match file {
            None => (Connection::open_in_memory()?, MEMORY_PATH.to_owned()),
            Some(file) => {
                let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
                    | OpenFlags::SQLITE_OPEN_CREATE
                    | OpenFlags::SQLITE_OPEN_NO_MUTEX;
                (
                    Connection::open_with_flags(file, flags)?,
                    file.display().to_string(),
                )
            }
        };
        conn.busy_timeout(busy_timeout)?;
        configure(&conn, &path_text, mode, started, busy_timeout)?;
        let store_id = read_store_id(&conn, &path_text)?;
        let identity = match file {
            None => format!("memory:store:{store_id}"),
            Some(file) => format!("{}:store:{store_id}", path::file_identity(file)?),
        };
        Ok(Store {
            conn,
            path: path_text,
            identity,
        })
    }

    /// Closes the connection.
    pub(crate) fn close(self) -> Result<()> {
        self.conn.close().map_err(|(_, e)| Error::Sqlite(e))
    }

    /// The store identity (`file:…:store:<uuid>` or `memory:store:<uuid>`).
    pub(crate) fn identity(&self) -> &str {
        &self.identity
    }

    /// The underlying connection (tests and tools).
    pub(crate) fn connection(&self) -> &Connection {
        &self.conn
    }

    fn revision(&self, row: &SessionRow) -> Revision {
        Revision::new(format!(
            "{}:incarnation:{}:revision:{}",
            self.identity, row.incarnation, row.revision
        ))
    }

    // ---- transactions ----

    fn rollback(&self, error: Error, op: &'static str) -> Error {
        // Some failures (SQLITE_FULL, SQLITE_IOERR, SQLITE_NOMEM, an interrupt) make SQLite roll
        // the transaction back itself; a ROLLBACK then fails with "no transaction is active",
        // which is no second failure.
        if self.conn.is_autocommit() {
            return error;
        }
        match self.conn.execute_batch(sql::ROLLBACK) {
            Ok(()) => error,
            Err(rollback) => Error::RollbackFailed {
                op,
                path: self.path.clone(),
                error: Box::new(error),
                rollback: Box::new(Error::Sqlite(rollback)),
            },
        }
    }

    fn transaction<T>(
        &self,
        begin: &str,
        op: &'static str,
        body: impl FnOnce(&Store) -> Result<T>,
    ) -> Result<T> {
        self.conn.execute_batch(begin)?;
        match body(self).and_then(|v| {
            self.conn.execute_batch(sql::COMMIT)?;
            Ok(v)
        }) {
            Ok(v) => Ok(v),
            Err(e) => Err(self.rollback(e, op)),
        }
    }

    // ---- row access ----

    fn session_row(&self, id: &str) -> Result<Option<SessionRow>> {
        let cells = self
            .conn
            .query_row(sql::SELECT_SESSION, [id], |r| {
                row_cells(r, SESSION_COLUMNS.len())
            })
            .optional()?;
        cells.map(|c| SessionRow::decode(&c)).transpose()
    }

    fn session_rows(&self) -> Result<Vec<SessionRow>> {
        let mut stmt = self.conn.prepare(sql::SELECT_SESSIONS)?;
        let rows = stmt.query_map([], |r| row_cells(r, SESSION_COLUMNS.len()))?;
        let mut out = Vec::new();
        for cells in rows {
            out.push(SessionRow::decode(&cells?)?);
        }
        Ok(out)
    }

    fn event_rows(&self, statement: &str, params: impl rusqlite::Params) -> Result<Vec<EventRow>> {
        let mut stmt = self.conn.prepare_cached(statement)?;
        let rows = stmt.query_map(params, |r| row_cells(r, EVENT_COLUMNS.len()))?;
        let mut out = Vec::new();
        for cells in rows {
            out.push(EventRow::decode(&cells?)?);
        }
        Ok(out)
    }

    fn all_rows(&self, id: &str) -> Result<Vec<EventRow>> {
        self.event_rows(sql::SELECT_EVENTS, [id])
    }

    /// The rows from the first physical row that may hold `from_seq` on
    /// (`physicalSpanFrom`): a packed row starting up to 1,023 seqs earlier may cover it, and a
    /// packed predecessor that does not decode is included so the scan fails closed.
    fn physical_span_from(&self, id: &str, from_seq: u64) -> Result<(u64, Vec<EventRow>)> {
        let base = self.span_base(id, from_seq)?;
        let rows = self.event_rows(sql::SELECT_EVENTS_FROM, params![id, to_sql_int(base)])?;
        Ok((base, rows))
    }

    /// The seq of the first physical row that may hold `from_seq` (see
    /// [`Store::physical_span_from`]).
    fn span_base(&self, id: &str, from_seq: u64) -> Result<u64> {
        let floor = (from_seq + 1).saturating_sub(MAX_PACKED_ROW_MEMBERS as u64);
        let predecessors = self.event_rows(
            sql::SELECT_PACKED_PREDECESSORS,
            params![id, to_sql_int(floor), to_sql_int(from_seq)],
        )?;
        let mut base = from_seq;
        for predecessor in &predecessors {
            let covers = match decode_row(predecessor) {
                Ok(events) => events.last().is_some_and(|e| e.seq() >= from_seq),
                Err(_) => true,
            };
            if covers {
                base = base.min(predecessor.seq);
            }
        }
        Ok(base)
    }

    /// The last logical event, read from the tail (`tailRows` + `logicalLastEvent`).
    fn logical_last_event(&self, id: &str) -> Result<Option<Event>> {
        let mut tail = self.event_rows(sql::SELECT_TAIL_EVENTS, params![id, 2])?;
        tail.reverse();
        let Some(first) = tail.first() else {
            return Ok(None);
        };
        let (_, rows) = self.physical_span_from(id, first.seq)?;
        let Some(start) = rows.first().map(|r| r.seq) else {
            return Ok(None);
        };
        let scan = scan_rows(&rows, start)?;
        if let Some(seq) = scan.torn_from {
            return Err(Error::InvalidTail {
                id: id.to_owned(),
                seq,
            });
        }
        Ok(scan.preserved.last().cloned())
    }

    fn insert_rows(&self, id: &str, rows: &[EventRow]) -> Result<()> {
        let mut insert = self.conn.prepare_cached(sql::INSERT_EVENT)?;
        for row in rows {
            let data: &dyn rusqlite::ToSql = match &row.data {
                RowData::Text(s) => s,
                RowData::Blob(b) => b,
            };
            insert.execute(params![
                id,
                to_sql_int(row.seq),
                row.ty,
                row.time,
                data,
                row.source_event_seqs,
                row.surface_op,
                row.ignorable,
            ])?;
        }
        Ok(())
    }

    fn increment_revision(&self, id: &str) -> Result<()> {
        let changed = self.conn.execute(sql::UPDATE_SESSION_REVISION, [id])?;
        if changed != 1 {
            return Err(Error::MetadataRowMissing { id: id.to_owned() });
        }
        Ok(())
    }

    fn write_row(&self, meta: &SessionHeader) -> Result<()> {
        self.conn.execute(
            sql::UPSERT_SESSION,
            params![
                &*meta.id,
                SESSION_FORMAT_VERSION,
                to_sql_int(meta.created_at),
                meta.cwd.as_deref(),
                meta.parent_session.as_deref(),
                meta.seed_length.map(to_sql_int),
                meta.origin_subagent.then_some("subagent"),
                meta.delegation_depth.map(to_sql_int),
                meta.agent_preset.as_deref(),
                crate::uuid::random_uuid(),
            ],
        )?;
        Ok(())
    }

    fn stored_meta(&self, row: &SessionRow) -> Result<StoredMeta> {
        let (meta, header_value) = row_to_meta(row)?;
        Ok(StoredMeta {
            meta,
            header_value,
            revision: self.revision(row),
        })
    }

    // ---- operations ----

    /// `loadStored`: the session row and every event row in one read transaction, then the
    /// scan.
    pub(crate) fn load_stored(&self, id: &str) -> Result<Option<(StoredMeta, Scan)>> {
        let snapshot = self.transaction(sql::BEGIN, "read", |s| {
            let Some(row) = s.session_row(id)? else {
                return Ok(None);
            };
            Ok(Some((row, s.all_rows(id)?)))
        })?;
        let Some((row, rows)) = snapshot else {
            return Ok(None);
        };
        let scan = scan_rows(&rows, 0)?;
        Ok(Some((self.stored_meta(&row)?, scan)))
    }

    /// Visits the physical rows of a session in seq order, one at a time, in one read
    /// transaction (`None`: no session row); no more than one row is held.
    pub(crate) fn each_physical_row(
        &self,
        id: &str,
        mut visit: impl FnMut(&EventRow),
    ) -> Result<Option<()>> {
        self.transaction(sql::BEGIN, "read", |s| {
            if s.session_row(id)?.is_none() {
                return Ok(None);
            }
            let mut stmt = s.conn.prepare_cached(sql::SELECT_EVENTS)?;
            let mut rows = stmt.query([id])?;
            while let Some(cells) = rows.next()? {
                visit(&EventRow::decode(&row_cells(cells, EVENT_COLUMNS.len())?)?);
            }
            Ok(Some(()))
        })
    }

    /// `readStoredRevision`: one select, no transaction.
    pub(crate) fn read_stored_revision(&self, id: &str) -> Result<Option<Revision>> {
        Ok(self.session_row(id)?.map(|row| self.revision(&row)))
    }

    /// `loadStoredFrom`: the committed events with `seq >= from_seq`, reading only the rows
    /// that can hold them. A torn tail is left out silently; committed corruption fails.
    pub(crate) fn load_stored_from(
        &self,
        id: &str,
        from_seq: u64,
    ) -> Result<Option<(StoredMeta, Vec<Event>)>> {
        let snapshot = self.transaction(sql::BEGIN, "read", |s| {
            let Some(row) = s.session_row(id)? else {
                return Ok(None);
            };
            Ok(Some((row, s.physical_span_from(id, from_seq)?)))
        })?;
        let Some((row, (base, rows))) = snapshot else {
            return Ok(None);
        };
        let scan = scan_rows(&rows, base)?;
        let events = scan
            .preserved
            .into_iter()
            .filter(|e| e.seq() >= from_seq)
            .collect();
        Ok(Some((self.stored_meta(&row)?, events)))
    }

    /// One page of the stored prefix ([`session_persist::Backend::load_stored_page`]): the
    /// session row, then the event rows from the first that may hold `from_seq`, read one at
    /// a time in the same read transaction and only until the page is full (or, when the
    /// prefix ends first, until the damage is known to be a torn tail or committed
    /// corruption). Returns the events and whether a torn tail follows them.
    pub(crate) fn load_stored_page(
        &self,
        id: &str,
        from_seq: u64,
        max_events: usize,
    ) -> Result<Option<(StoredMeta, Vec<Event>, bool)>> {
        let snapshot = self.transaction(sql::BEGIN, "read", |s| {
            let Some(row) = s.session_row(id)? else {
                return Ok(None);
            };
            let base = s.span_base(id, from_seq)?;
            let mut scan = PageScan::new(base, from_seq, max_events);
            let mut stmt = s.conn.prepare_cached(sql::SELECT_EVENTS_FROM)?;
            let mut rows = stmt.query(params![id, to_sql_int(base)])?;
            while let Some(cells) = rows.next()? {
                let event_row = EventRow::decode(&row_cells(cells, EVENT_COLUMNS.len())?)?;
                if !scan.push(&event_row)? {
                    break;
                }
            }
            Ok(Some((row, scan)))
        })?;
        let Some((row, scan)) = snapshot else {
            return Ok(None);
        };
        let (events, torn) = scan.finish()?;
        Ok(Some((self.stored_meta(&row)?, events, torn)))
    }

    /// The checks of an append inside its transaction: the schema is still one this build
    /// writes, and `first` continues the stored log of `id` (else a stale writer), before any
    /// mutation.
    fn check_appendable(&self, id: &str, first: &Event) -> Result<()> {
        validate_schema_for_mutation(&self.conn, &self.path)?;
        let expected = self.logical_last_event(id)?.map_or(0, |e| e.seq() + 1);
        if first.seq() != expected {
            return Err(Error::AppendStart {
                id: id.to_owned(),
                first: first.seq(),
                expected,
            });
        }
        Ok(())
    }

    /// `appendBatch`: inside `BEGIN IMMEDIATE`, re-check the schema, reject a batch that does
    /// not continue the stored log (a stale writer) before any mutation, upsert the session
    /// row on first publication, insert the packed rows, bump the revision.
    pub(crate) fn append_batch(
        &self,
        meta: &SessionHeader,
        events: &[Event],
        is_materialized: bool,
    ) -> Result<()> {
        let Some(first) = events.first() else {
            return Ok(());
        };
        let rows = pack_batch(events)?;
        let id = &*meta.id;
        self.transaction(sql::BEGIN_IMMEDIATE, "append", |s| {
            s.check_appendable(id, first)?;
            if !is_materialized {
                s.write_row(meta)?;
            }
            s.insert_rows(id, &rows)?;
            s.increment_revision(id)
        })
    }

    /// `Backend::publish_batches`: the first publication of `meta` with every batch of
    /// `events` (`batches`, already checked), in one `BEGIN IMMEDIATE` transaction: the same
    /// checks and rows as [`Store::append_batch`] of each batch in turn, packed one batch at a
    /// time, so only one batch's rows are held while the transaction grows.
    pub(crate) fn publish_batches(
        &self,
        meta: &SessionHeader,
        events: &[Event],
        batches: &[std::ops::Range<usize>],
    ) -> Result<()> {
        let Some(first) = events.first() else {
            return Ok(());
        };
        let id = &*meta.id;
        self.transaction(sql::BEGIN_IMMEDIATE, "append", |s| {
            s.check_appendable(id, first)?;
            s.write_row(meta)?;
            for batch in batches {
                let rows = pack_batch(&events[batch.clone()])?;
                s.insert_rows(id, &rows)?;
            }
            s.increment_revision(id)
        })
    }

    /// `commitRepair`: atomically delete the torn tail (checking that it still starts at
    /// `torn`), append the closers as scalar rows and bump the revision.
    pub(crate) fn commit_repair(
        &self,
        meta: &SessionHeader,
        torn: Option<u64>,
        closers: &[Event],
    ) -> Result<()> {
        if torn.is_none() && closers.is_empty() {
            return Ok(());
        }
        let rows = closers
            .iter()
            .map(crate::codec::bind_event)
            .collect::<Result<Vec<_>>>()?;
        let id = &*meta.id;
        self.transaction(sql::BEGIN_IMMEDIATE, "repair", |s| {
            validate_schema_for_mutation(&s.conn, &s.path)?;
            if s.session_row(id)?.is_none() {
                return Err(Error::MetadataRowMissing { id: id.to_owned() });
            }
            let current = scan_rows(&s.all_rows(id)?, 0)?;
            match (torn, current.torn_from) {
                (Some(marker), found) => {
                    if found != Some(marker) {
                        return Err(Error::StaleRepairTail {
                            id: id.to_owned(),
                            marker,
                        });
                    }
                    s.conn
                        .execute(sql::DELETE_EVENTS_FROM, params![id, to_sql_int(marker)])?;
                }
                (None, Some(seq)) => {
                    return Err(Error::OmittedTornTail {
                        id: id.to_owned(),
                        seq,
                    });
                }
                (None, None) => {}
            }
            if let Some(first) = closers.first() {
                let expected = current.preserved.last().map_or(0, |e| e.seq() + 1);
                if first.seq() != expected {
                    return Err(Error::StaleCloser {
                        id: id.to_owned(),
                        seq: first.seq(),
                        expected,
                    });
                }
                s.insert_rows(id, &rows)?;
            }
            s.increment_revision(id)
        })
    }

    /// Every session row, decoded (`list`; unordered). Headers are read leniently: a row
    /// whose format version is not 0 is listed as stored (only opening it refuses).
    pub(crate) fn list(&self) -> Result<Vec<StoredMeta>> {
        Ok(self
            .session_rows()?
            .iter()
            .map(|row| {
                let (meta, header_value) = row_fields(row);
                StoredMeta {
                    meta,
                    header_value,
                    revision: self.revision(row),
                }
            })
            .collect())
    }
}

/// Seqs and other safe integers always fit an `i64`.
fn to_sql_int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// `rowToMeta`: the header of a validated session row (NULL columns are omitted, so
/// `delegationDepth` stays absent), and the same as a JSON record in the reference's key
/// order. A version other than 0 is refused here ([`Error::FormatUnsupported`]).
pub(crate) fn row_to_meta(row: &SessionRow) -> Result<(SessionHeader, Value)> {
    if row.version != SESSION_FORMAT_VERSION {
        let mut version = String::new();
        write_js_number(row.version as f64, &mut version);
        return Err(Error::FormatUnsupported(FormatRefusal::Version {
            id: js_string(Some(&Value::string(row.id.as_str()))),
            version,
            newer: row.version > SESSION_FORMAT_VERSION,
        }));
    }
    Ok(row_fields(row))
}

/// The header of a session row and its JSON record, for any format version: a version other
/// than 0 is kept as stored ([`SessionHeader::stored`]).
fn row_fields(row: &SessionRow) -> (SessionHeader, Value) {
    let mut meta = SessionHeader::new(row.id.as_str(), row.created_at);
    meta.cwd = row.cwd.as_deref().map(Into::into);
    meta.parent_session = row.parent_session.as_deref().map(Into::into);
    meta.seed_length = row.seed_length;
    meta.origin_subagent = row.origin.is_some();
    meta.delegation_depth = row.delegation_depth;
    meta.agent_preset = row.agent_preset.as_deref().map(Into::into);
    let mut entries: Vec<(&str, Value)> = vec![
        ("version", int_value(row.version)),
        ("id", Value::string(row.id.as_str())),
        ("createdAt", seq_value(row.created_at)),
    ];
    let text = |k, v: &Option<String>| v.as_deref().map(|s| (k, Value::string(s)));
    let number = |k, v: Option<u64>| v.map(|n| (k, seq_value(n)));
    entries.extend(text("cwd", &row.cwd));
    entries.extend(text("parentSession", &row.parent_session));
    entries.extend(number("seedLength", row.seed_length));
    entries.extend(text("origin", &row.origin));
    entries.extend(number("delegationDepth", row.delegation_depth));
    entries.extend(text("agentPreset", &row.agent_preset));
    let value = Value::object(entries);
    (meta.with_stored_fields(&value), value)
}
