//! Schema ownership: the open sequence and its pragmas, the schema-17 objects and their
//! validation, and strict decoding of stored rows.
//!
//! Stored rows are decoded column by column before any JSON is interpreted, and the first
//! column that breaks its rule is reported as `stored <column> <rule>` with the reference's
//! exact wording.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use rusqlite::types::{Value as SqlValue, ValueRef};
use rusqlite::{Connection, OptionalExtension};
use session_core::header::is_absolute_path;
use session_core::json::MAX_SAFE_INTEGER;

use crate::error::{Error, Result};
use crate::uuid::{is_uuid, random_uuid};
use crate::{APPLICATION_ID, JournalMode, SCHEMA_VERSION, sql};

/// `JOURNAL_BUSY_RETRY_INTERVAL_MS`: the pause between journal-mode attempts while the database
/// is busy.
pub const JOURNAL_BUSY_RETRY_INTERVAL: Duration = Duration::from_millis(10);

/// `SQLITE_BUSY`, the only result code a journal-mode change is retried for.
pub const SQLITE_BUSY: i32 = 5;

/// The session columns in select order (`SESSION_COLUMNS`).
pub const SESSION_COLUMNS: [&str; 11] = [
    "id",
    "version",
    "created_at",
    "cwd",
    "parent_session",
    "seed_length",
    "origin",
    "delegation_depth",
    "agent_preset",
    "incarnation",
    "revision",
];

/// The event columns in select order (`EVENT_COLUMNS`).
pub const EVENT_COLUMNS: [&str; 7] = [
    "seq",
    "type",
    "time",
    "data",
    "source_event_seqs",
    "surface_op",
    "ignorable",
];

/// Reads a column as an owned value. Text is decoded as UTF-8 lossily (invalid bytes become
/// U+FFFD), as a JavaScript reader of the column would see it.
pub(crate) fn owned(v: ValueRef<'_>) -> SqlValue {
    match v {
        ValueRef::Null => SqlValue::Null,
        ValueRef::Integer(i) => SqlValue::Integer(i),
        ValueRef::Real(r) => SqlValue::Real(r),
        ValueRef::Text(t) => SqlValue::Text(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) => SqlValue::Blob(b.to_vec()),
    }
}

/// Reads every column of a row as owned values.
pub(crate) fn row_cells(row: &rusqlite::Row<'_>, n: usize) -> rusqlite::Result<Vec<SqlValue>> {
    (0..n).map(|i| row.get_ref(i).map(owned)).collect()
}

// ---- strict field decoding ----

fn invalid(column: &'static str, rule: &'static str) -> Error {
    Error::InvalidStored { column, rule }
}

fn cell(cells: &[SqlValue], index: usize) -> &SqlValue {
    cells.get(index).unwrap_or(&SqlValue::Null)
}

/// A JavaScript number that is a safe integer (`Number.isSafeInteger`).
fn as_safe_integer(v: &SqlValue) -> Option<i64> {
    const MAX: i64 = MAX_SAFE_INTEGER;
    match *v {
        SqlValue::Integer(i) if (-MAX..=MAX).contains(&i) => Some(i),
        SqlValue::Real(r) if r.is_finite() && r.fract() == 0.0 && r.abs() <= MAX as f64 => {
            Some(r as i64)
        }
        _ => None,
    }
}

fn string_field(v: &SqlValue, column: &'static str) -> Result<String> {
    match v {
        SqlValue::Text(s) => Ok(s.clone()),
        _ => Err(invalid(column, "must be a string")),
    }
}

fn nonempty_string_field(v: &SqlValue, column: &'static str) -> Result<String> {
    let s = string_field(v, column)?;
    if s.is_empty() {
        return Err(invalid(column, "must not be empty"));
    }
    Ok(s)
}

fn nullable_string_field(v: &SqlValue, column: &'static str) -> Result<Option<String>> {
    match v {
        SqlValue::Null => Ok(None),
        SqlValue::Text(s) => Ok(Some(s.clone())),
        _ => Err(invalid(column, "must be a string or null")),
    }
}

fn integer_field(v: &SqlValue, column: &'static str) -> Result<i64> {
    as_safe_integer(v).ok_or_else(|| invalid(column, "must be a safe integer"))
}

fn nonnegative_field(v: &SqlValue, column: &'static str) -> Result<u64> {
    let n = integer_field(v, column)?;
    u64::try_from(n).map_err(|_| invalid(column, "must be non-negative"))
}

fn nullable_integer_field(v: &SqlValue, column: &'static str) -> Result<Option<i64>> {
    match v {
        SqlValue::Null => Ok(None),
        other => as_safe_integer(other)
            .map(Some)
            .ok_or_else(|| invalid(column, "must be a safe integer or null")),
    }
}

fn nullable_nonnegative_field(v: &SqlValue, column: &'static str) -> Result<Option<u64>> {
    match nullable_integer_field(v, column)? {
        None => Ok(None),
        Some(n) => u64::try_from(n)
            .map(Some)
            .map_err(|_| invalid(column, "must be non-negative or null")),
    }
}

/// A stored session row, validated (`decodeSessionRow`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRow {
    /// The session id (non-empty).
    pub id: String,
    /// The log format version (any safe integer; only 0 is readable).
    pub version: i64,
    /// Creation time, ms since the Unix epoch.
    pub created_at: u64,
    /// Absolute working directory.
    pub cwd: Option<String>,
    /// Fork lineage.
    pub parent_session: Option<String>,
    /// Inherited prefix length.
    pub seed_length: Option<u64>,
    /// `Some("subagent")` or `None`.
    pub origin: Option<String>,
    /// Delegation depth; `None` stays absent (unlike JSONL, which writes 0).
    pub delegation_depth: Option<u64>,
    /// Agent preset name.
    pub agent_preset: Option<String>,
    /// A UUID minted when the row was first inserted.
    pub incarnation: String,
    /// Transactions committed on this session's log.
    pub revision: u64,
}

impl SessionRow {
    /// Decodes the columns of [`SESSION_COLUMNS`], in that order, with the reference's checks
    /// and check order (`id`, `version`, `cwd`, `parent_session`, `origin`, `incarnation`,
    /// `created_at`, `seed_length`, `delegation_depth`, `agent_preset`, `revision`).
    pub fn decode(cells: &[SqlValue]) -> Result<SessionRow> {
        let c = |i| cell(cells, i);
        let id = nonempty_string_field(c(0), "id")?;
        let version = integer_field(c(1), "version")?;
        let cwd = nullable_string_field(c(3), "cwd")?;
        if cwd.as_deref().is_some_and(|p| !is_absolute_path(p)) {
            return Err(invalid("session cwd", "must be absolute"));
        }
        let parent_session = nullable_string_field(c(4), "parent_session")?;
        let origin = nullable_string_field(c(6), "origin")?;
        if origin.as_deref().is_some_and(|o| o != "subagent") {
            return Err(invalid("session origin", "must be subagent or null"));
        }
        let incarnation = nonempty_string_field(c(9), "incarnation")?;
        if !is_uuid(&incarnation) {
            return Err(invalid("session incarnation", "must be a UUID"));
        }
        Ok(SessionRow {
            id,
            version,
            created_at: nonnegative_field(c(2), "created_at")?,
            cwd,
            parent_session,
            seed_length: nullable_nonnegative_field(c(5), "seed_length")?,
            origin,
            delegation_depth: nullable_nonnegative_field(c(7), "delegation_depth")?,
            agent_preset: nullable_string_field(c(8), "agent_preset")?,
            incarnation,
            revision: nonnegative_field(c(10), "revision")?,
        })
    }
}

/// The `data` column of an event row: JSON text, or a Zstandard frame of JSON text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RowData {
    /// Stored as TEXT.
    Text(String),
    /// Stored as a BLOB (zstd-compressed UTF-8 JSON).
    Blob(Vec<u8>),
}

/// One physical event row, validated column by column but not yet interpreted
/// (`decodeEventRow`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRow {
    /// The seq of the (first) logical event.
    pub seq: u64,
    /// The event type, or a packed-row tag.
    pub ty: String,
    /// The time of the (first) logical event.
    pub time: i64,
    /// The data value.
    pub data: RowData,
    /// The varint `sourceEventSeqs` blob.
    pub source_event_seqs: Option<Vec<u8>>,
    /// `JSON.stringify(surfaceOp)`.
    pub surface_op: Option<String>,
    /// `Some(0)`: packed row; `Some(1)`: logical `ignorable: true`; `None`: neither.
    pub ignorable: Option<i64>,
}

impl EventRow {
    /// Decodes the columns of [`EVENT_COLUMNS`], in that order, with the reference's checks
    /// and check order (`ignorable` first).
    pub fn decode(cells: &[SqlValue]) -> Result<EventRow> {
        let c = |i| cell(cells, i);
        let ignorable = nullable_integer_field(c(6), "ignorable")?;
        if ignorable.is_some_and(|n| n != 0 && n != 1) {
            return Err(invalid("event ignorable", "must be 0, 1, or null"));
        }
        let seq = nonnegative_field(c(0), "seq")?;
        let ty = nonempty_string_field(c(1), "type")?;
        let time = integer_field(c(2), "time")?;
        let data = match c(3) {
            SqlValue::Text(s) => RowData::Text(s.clone()),
            SqlValue::Blob(b) => RowData::Blob(b.clone()),
            _ => return Err(invalid("data", "must be a string or blob")),
        };
        let source_event_seqs = match c(4) {
            SqlValue::Null => None,
            SqlValue::Blob(b) => Some(b.clone()),
            _ => return Err(invalid("source_event_seqs", "must be a blob or null")),
        };
        let surface_op = nullable_string_field(c(5), "surface_op")?;
        Ok(EventRow {
            seq,
            ty,
            time,
            data,
            source_event_seqs,
            surface_op,
            ignorable,
        })
    }
}

/// Decodes the `store_id` column (`decodeStoreIdentity`).
pub fn decode_store_identity(v: &SqlValue) -> Result<String> {
    let id = nonempty_string_field(v, "store_id")?;
    if !is_uuid(&id) {
        return Err(invalid("store_id", "must be a UUID"));
    }
    Ok(id)
}

// ---- open sequence ----

fn pragma_integer(conn: &Connection, statement: &str, name: &'static str) -> Result<i64> {
    let v = conn.query_row(statement, [], |r| r.get_ref(0).map(owned))?;
    integer_field(&v, name)
}

/// One schema object as compared by the validator (`sql` whitespace-collapsed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaObject {
    /// `table`, `index`, …
    pub kind: String,
    /// The object name.
    pub name: String,
    /// The table it belongs to.
    pub tbl_name: String,
    /// Its DDL, with each whitespace run collapsed to one space and trimmed.
    pub sql: String,
}

/// Collapses each whitespace run to one space and trims (`normalizeSql`).
pub fn normalize_sql(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The user schema objects of a database, in `type, name` order.
pub fn schema_objects(conn: &Connection) -> Result<Vec<SchemaObject>> {
    let mut stmt = conn.prepare(sql::SELECT_SCHEMA_OBJECTS)?;
    let rows = stmt.query_map([], |r| row_cells(r, 4))?;
    let mut out = Vec::new();
    for row in rows {
        let row = row?;
        out.push(SchemaObject {
            kind: string_field(cell(&row, 0), "type")?,
            name: string_field(cell(&row, 1), "name")?,
            tbl_name: string_field(cell(&row, 2), "tbl_name")?,
            sql: normalize_sql(&string_field(cell(&row, 3), "sql")?),
        });
    }
    Ok(out)
}

/// The schema objects a fresh in-memory database gets from the schema-17 DDL, computed once.
pub fn canonical_schema() -> Result<&'static [SchemaObject]> {
    static CANONICAL: OnceLock<Vec<SchemaObject>> = OnceLock::new();
    if let Some(objects) = CANONICAL.get() {
        return Ok(objects);
    }
    let reference = Connection::open_in_memory()?;
    reference.execute_batch(sql::FOREIGN_KEYS_ON)?;
    reference.execute_batch(sql::SCHEMA)?;
    let objects = schema_objects(&reference)?;
    Ok(CANONICAL.get_or_init(|| objects))
}

/// Checks that the database holds exactly the schema-17 objects (`validateRequiredSchema`).
pub fn validate_required_schema(conn: &Connection, path: &str) -> Result<()> {
    if schema_objects(conn)? != canonical_schema()? {
        return Err(Error::SchemaObjects {
            path: path.to_owned(),
        });
    }
    Ok(())
}

/// The re-check every mutation runs inside its `BEGIN IMMEDIATE`
/// (`validateSchemaForMutation`): application id, schema objects, then `user_version`.
pub fn validate_schema_for_mutation(conn: &Connection, path: &str) -> Result<()> {
    let version = pragma_integer(conn, sql::SELECT_USER_VERSION, "user_version")?;
    let application_id = pragma_integer(conn, sql::SELECT_APPLICATION_ID, "application_id")?;
    if application_id != APPLICATION_ID {
        return Err(Error::ApplicationIdChanged {
            got: application_id,
        });
    }
    validate_required_schema(conn, path)?;
    if version != SCHEMA_VERSION {
        return Err(Error::SchemaChanged { got: version });
    }
    Ok(())
}

/// `PRAGMA trusted_schema = OFF` and `PRAGMA mmap_size = 0`, each read back.
fn configure_connection_security(conn: &Connection, path: &str) -> Result<()> {
    conn.execute_batch(sql::TRUSTED_SCHEMA_OFF)?;
    let trusted = pragma_integer(conn, sql::SELECT_TRUSTED_SCHEMA, "trusted_schema")?;
    if trusted != 0 {
        return Err(Error::PragmaNotApplied {
            path: path.to_owned(),
            pragma: "trusted_schema",
            value: trusted,
            expected: "0",
        });
    }
    conn.execute_batch(sql::MMAP_OFF)?;
    if path == crate::MEMORY_PATH {
        return Ok(());
    }
    let mmap = pragma_integer(conn, sql::SELECT_MMAP_SIZE, "mmap_size")?;
    if mmap != 0 {
        return Err(Error::PragmaNotApplied {
            path: path.to_owned(),
            pragma: "mmap_size",
            value: mmap,
            expected: "0",
        });
    }
    Ok(())
}

/// Checks ownership and creates the schema of a pristine database, in one immediate
/// transaction.
fn configure_database(conn: &Connection, path: &str) -> Result<()> {
    conn.execute_batch(sql::FOREIGN_KEYS_ON)?;
    conn.execute_batch(sql::BEGIN_IMMEDIATE)?;
    let result = (|| {
        let on_disk = pragma_integer(conn, sql::SELECT_USER_VERSION, "user_version")?;
        let application_id = pragma_integer(conn, sql::SELECT_APPLICATION_ID, "application_id")?;
        let objects = pragma_integer(conn, sql::SELECT_USER_OBJECT_COUNT, "count")?;
        if on_disk == 0 && (application_id != 0 || objects > 0) {
            return Err(Error::Unversioned {
                path: path.to_owned(),
            });
        }
        if on_disk != 0 && on_disk != SCHEMA_VERSION {
            return Err(Error::SchemaVersion {
                path: path.to_owned(),
                version: on_disk,
            });
        }
        if on_disk != 0 && application_id != APPLICATION_ID {
            return Err(Error::ApplicationId {
                path: path.to_owned(),
                id: application_id,
            });
        }
        if on_disk == 0 {
            conn.execute_batch(sql::SCHEMA)?;
            conn.execute(sql::INSERT_PERSISTENCE_STATE, [random_uuid()])?;
            conn.execute_batch(sql::SET_APPLICATION_ID)?;
            conn.execute_batch(sql::SET_USER_VERSION_17)?;
        }
        validate_required_schema(conn, path)?;
        conn.execute_batch(sql::COMMIT)?;
        Ok(())
    })();
    if result.is_err() && !conn.is_autocommit() {
        // The ownership failure is the actionable one; a failed rollback adds nothing.
        let _ = conn.execute_batch(sql::ROLLBACK);
    }
    result
}

/// Whether `e` is `SQLITE_BUSY` exactly (extended code 5).
pub fn is_sqlite_busy(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _) if f.extended_code == SQLITE_BUSY)
}

/// Runs `attempt` (a journal-mode change) until it succeeds, retrying only `SQLITE_BUSY` while
/// the open-relative `deadline` has not passed, pausing `min(10 ms, remaining)` between
/// attempts (`selectJournalMode`'s loop). The clock and the pause are injected so the policy
/// can be tested without a real lock.
pub fn retry_journal_busy<T>(
    deadline: Instant,
    mut attempt: impl FnMut() -> rusqlite::Result<T>,
    mut now: impl FnMut() -> Instant,
    mut sleep: impl FnMut(Duration),
) -> rusqlite::Result<T> {
    loop {
        match attempt() {
            Ok(v) => return Ok(v),
            Err(e) => {
                let remaining = deadline.saturating_duration_since(now());
                // The reference rounds the remaining time up to whole milliseconds.
                let remaining_ms = remaining.as_nanos().div_ceil(1_000_000);
                if !is_sqlite_busy(&e) || remaining_ms == 0 {
                    return Err(e);
                }
                sleep(JOURNAL_BUSY_RETRY_INTERVAL.min(remaining));
                if now() >= deadline {
                    return Err(e);
                }
            }
        }
    }
}

fn journal_statement(mode: JournalMode) -> &'static str {
    match mode {
        JournalMode::Wal => sql::JOURNAL_MODE_WAL,
        JournalMode::Delete => sql::JOURNAL_MODE_DELETE,
        JournalMode::Truncate => sql::JOURNAL_MODE_TRUNCATE,
        JournalMode::Persist => sql::JOURNAL_MODE_PERSIST,
    }
}

fn select_journal_mode(
    conn: &Connection,
    path: &str,
    mode: JournalMode,
    deadline: Instant,
) -> Result<()> {
    let selected = retry_journal_busy(
        deadline,
        || conn.query_row(journal_statement(mode), [], |r| r.get_ref(0).map(owned)),
        Instant::now,
        std::thread::sleep,
    )?;
    let selected = string_field(&selected, "journal_mode")?.to_lowercase();
    let expected = if path == crate::MEMORY_PATH {
        "memory"
    } else {
        mode.as_str()
    };
    if selected != expected {
        return Err(Error::JournalMode {
            path: path.to_owned(),
            selected,
            expected: expected.to_owned(),
        });
    }
    Ok(())
}

fn configure_durability(conn: &Connection, path: &str) -> Result<()> {
    conn.execute_batch(sql::SYNCHRONOUS_FULL)?;
    let synchronous = pragma_integer(conn, sql::SELECT_SYNCHRONOUS, "synchronous")?;
    if synchronous != 2 {
        return Err(Error::PragmaNotApplied {
            path: path.to_owned(),
            pragma: "synchronous",
            value: synchronous,
            expected: "FULL (2)",
        });
    }
    Ok(())
}

/// Runs the open sequence on a fresh connection (`openDatabase`): hardening pragmas, schema
/// ownership and creation, journal mode (busy-retried until `started + busy_timeout`),
/// durability. The connection's busy timeout must already be set.
pub fn configure(
    conn: &Connection,
    path: &str,
    mode: JournalMode,
    started: Instant,
    busy_timeout: Duration,
) -> Result<()> {
    configure_connection_security(conn, path)?;
    configure_database(conn, path)?;
    select_journal_mode(conn, path, mode, started + busy_timeout)?;
    configure_durability(conn, path)
}

/// Reads and validates the store id (`select-store-id`).
pub fn read_store_id(conn: &Connection, path: &str) -> Result<String> {
    let row = conn
        .query_row(sql::SELECT_STORE_ID, [], |r| r.get_ref(0).map(owned))
        .optional()?;
    let Some(value) = row else {
        return Err(Error::NoStoreIdentity {
            path: path.to_owned(),
            cause: None,
        });
    };
    decode_store_identity(&value).map_err(|cause| Error::NoStoreIdentity {
        path: path.to_owned(),
        cause: Some(Box::new(cause)),
    })
}
