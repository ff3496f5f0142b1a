//! Every SQL statement the backend runs, as fixed text.
//!
//! No other module writes SQL, and no statement is assembled at run time: values are always
//! bound as parameters. The schema text is laid out so that its whitespace-collapsed form is
//! exactly the reference's (the schema validator compares those strings).

/// The schema-17 DDL. Whitespace-collapsed, each `sql` in `sqlite_schema` equals the
/// reference's text.
pub(crate) const SCHEMA: &str = "\
CREATE TABLE persistence_state (
  singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
  store_id  TEXT NOT NULL
) STRICT;

CREATE TABLE sessions (
  id               TEXT PRIMARY KEY,
  version          INTEGER NOT NULL,
  created_at       INTEGER NOT NULL,
  cwd              TEXT,
  parent_session   TEXT,
  seed_length      INTEGER,
  origin           TEXT,
  delegation_depth INTEGER,
  agent_preset     TEXT,
  incarnation      TEXT NOT NULL,
  revision         INTEGER NOT NULL
) STRICT;

CREATE TABLE events (
  session_id        TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  seq               INTEGER NOT NULL,
  type              TEXT NOT NULL,
  time              INTEGER NOT NULL,
  data              ANY NOT NULL,
  source_event_seqs ANY,
  surface_op        TEXT,
  ignorable         INTEGER CHECK (ignorable IS NULL OR ignorable IN (0, 1)),
  PRIMARY KEY (session_id, seq)
) STRICT;
";

pub(crate) const TRUSTED_SCHEMA_OFF: &str = "PRAGMA trusted_schema = OFF";
pub(crate) const SELECT_TRUSTED_SCHEMA: &str = "PRAGMA trusted_schema";
pub(crate) const MMAP_OFF: &str = "PRAGMA mmap_size = 0";
pub(crate) const SELECT_MMAP_SIZE: &str = "PRAGMA mmap_size";
pub(crate) const FOREIGN_KEYS_ON: &str = "PRAGMA foreign_keys = ON";
pub(crate) const SYNCHRONOUS_FULL: &str = "PRAGMA synchronous = FULL";
pub(crate) const SELECT_SYNCHRONOUS: &str = "PRAGMA synchronous";
pub(crate) const JOURNAL_MODE_WAL: &str = "PRAGMA journal_mode = WAL";
pub(crate) const JOURNAL_MODE_DELETE: &str = "PRAGMA journal_mode = DELETE";
pub(crate) const JOURNAL_MODE_TRUNCATE: &str = "PRAGMA journal_mode = TRUNCATE";
pub(crate) const JOURNAL_MODE_PERSIST: &str = "PRAGMA journal_mode = PERSIST";
pub(crate) const SELECT_USER_VERSION: &str = "PRAGMA user_version";
pub(crate) const SELECT_APPLICATION_ID: &str = "PRAGMA application_id";
pub(crate) const SET_APPLICATION_ID: &str = "PRAGMA application_id = 1146308688";
pub(crate) const SET_USER_VERSION_17: &str = "PRAGMA user_version = 17";
pub(crate) const SELECT_USER_OBJECT_COUNT: &str =
    "SELECT count(*) FROM sqlite_schema WHERE name NOT GLOB 'sqlite_*'";
pub(crate) const SELECT_SCHEMA_OBJECTS: &str = "SELECT type, name, tbl_name, sql FROM sqlite_schema \
     WHERE name NOT GLOB 'sqlite_*' ORDER BY type, name";

pub(crate) const BEGIN: &str = "BEGIN";
pub(crate) const BEGIN_IMMEDIATE: &str = "BEGIN IMMEDIATE";
pub(crate) const COMMIT: &str = "COMMIT";
pub(crate) const ROLLBACK: &str = "ROLLBACK";

pub(crate) const INSERT_PERSISTENCE_STATE: &str =
    "INSERT INTO persistence_state (singleton, store_id) VALUES (1, ?1)";
pub(crate) const SELECT_STORE_ID: &str =
    "SELECT store_id FROM persistence_state WHERE singleton = 1";

pub(crate) const SELECT_SESSION: &str = "SELECT id, version, created_at, cwd, parent_session, \
     seed_length, origin, delegation_depth, agent_preset, incarnation, revision \
     FROM sessions WHERE id = ?1";
pub(crate) const SELECT_SESSIONS: &str = "SELECT id, version, created_at, cwd, parent_session, \
     seed_length, origin, delegation_depth, agent_preset, incarnation, revision FROM sessions";
pub(crate) const UPSERT_SESSION: &str = "INSERT INTO sessions (id, version, created_at, cwd, \
     parent_session, seed_length, origin, delegation_depth, agent_preset, incarnation, revision) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, 0) \
     ON CONFLICT(id) DO UPDATE SET version = excluded.version, \
     created_at = excluded.created_at, cwd = excluded.cwd, \
     parent_session = excluded.parent_session, seed_length = excluded.seed_length, \
     origin = excluded.origin, delegation_depth = excluded.delegation_depth, \
     agent_preset = excluded.agent_preset";
pub(crate) const UPDATE_SESSION_REVISION: &str =
    "UPDATE sessions SET revision = revision + 1 WHERE id = ?1";

pub(crate) const SELECT_EVENTS: &str = "SELECT seq, type, time, data, source_event_seqs, \
     surface_op, ignorable FROM events WHERE session_id = ?1 ORDER BY seq";
pub(crate) const SELECT_EVENTS_FROM: &str = "SELECT seq, type, time, data, source_event_seqs, \
     surface_op, ignorable FROM events WHERE session_id = ?1 AND seq >= ?2 ORDER BY seq";
pub(crate) const SELECT_TAIL_EVENTS: &str = "SELECT seq, type, time, data, source_event_seqs, \
     surface_op, ignorable FROM events WHERE session_id = ?1 ORDER BY seq DESC LIMIT ?2";
pub(crate) const SELECT_PACKED_PREDECESSORS: &str = "SELECT seq, type, time, data, \
     source_event_seqs, surface_op, ignorable FROM events \
     WHERE session_id = ?1 AND seq >= ?2 AND seq < ?3 AND ignorable = 0 \
     AND type IN ('text-chunks', 'reasoning-chunks', 'tool-call-chunks') ORDER BY seq";
pub(crate) const INSERT_EVENT: &str = "INSERT INTO events (session_id, seq, type, time, data, \
     source_event_seqs, surface_op, ignorable) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)";
pub(crate) const DELETE_EVENTS_FROM: &str =
    "DELETE FROM events WHERE session_id = ?1 AND seq >= ?2";
