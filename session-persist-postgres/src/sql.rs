//! Every SQL statement the backend runs on `sessions` and `events`, in one place, so the key
//! of each can be checked ([`STATEMENTS`]).
//!
//! Each statement that reads, locks or writes one session names it: `WHERE id = $1` on
//! `sessions`, `WHERE session_id = $1` on `events`, or an insert carrying the id in `$1`.
//! So both tables can be distributed and co-located by the session id (Citus
//! `create_distributed_table(..., colocate_with => ...)`, a `CockroachDB` or `YugabyteDB` hash
//! primary key on it) and every write and every row lock stays on one shard. The only
//! statements that span sessions are the two listing reads ([`Key::Scan`]), which take no
//! locks. Migrations (in [`crate::schema`]) are the schema's own statements, not listed here.

macro_rules! session_columns {
    () => {
        "id, version, created_at, cwd, parent_session, seed_length, origin, delegation_depth, \
         agent_preset, header_json, incarnation::text, revision, next_seq, lease_epoch, \
         lease_holder::text, (lease_holder IS NOT NULL AND lease_expires_at > now()) AS \
         lease_live, coalesce((extract(epoch FROM (lease_expires_at - now())) * 1000)::bigint, \
         0) AS lease_ms"
    };
}

macro_rules! event_columns {
    () => {
        "seq, last_seq, type, time, packed, line_text, line_zstd, surface_op, \
         source_event_seqs, ignorable"
    };
}

/// How a statement is keyed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// By one session id: the parameter that carries it (`$1`, `$2`).
    Session(&'static str),
    /// By two session ids (a fork copies from the parent `$1` into the child `$2`).
    TwoSessions(&'static str, &'static str),
    /// A read across sessions, without locks (listing).
    Scan,
}

/// One session row.
pub const SESSION_ROW: &str = concat!(
    "SELECT ",
    session_columns!(),
    " FROM sessions WHERE id = $1"
);
/// One session row, locked for a write.
pub const SESSION_ROW_FOR_UPDATE: &str = concat!(
    "SELECT ",
    session_columns!(),
    " FROM sessions WHERE id = $1 FOR UPDATE"
);
/// One session row, share-locked (fork source, commit-outcome settling).
pub const SESSION_ROW_FOR_SHARE: &str = concat!(
    "SELECT ",
    session_columns!(),
    " FROM sessions WHERE id = $1 FOR SHARE"
);
/// A page of headers in id order.
pub const LIST_PAGE: &str = concat!(
    "SELECT ",
    session_columns!(),
    " FROM sessions WHERE ($1::text IS NULL OR id > $1) ORDER BY id LIMIT $2"
);
/// Every header.
pub const LIST_ALL: &str = concat!("SELECT ", session_columns!(), " FROM sessions ORDER BY id");
/// Every event row of a session.
pub const EVENTS_ALL: &str = concat!(
    "SELECT ",
    event_columns!(),
    " FROM events WHERE session_id = $1 ORDER BY seq"
);
/// The event rows reaching seq `$2`.
pub const EVENTS_FROM: &str = concat!(
    "SELECT ",
    event_columns!(),
    " FROM events WHERE session_id = $1 AND last_seq >= $2 ORDER BY seq"
);
/// The packed row straddling seq `$2`.
pub const EVENTS_STRADDLING: &str = concat!(
    "SELECT ",
    event_columns!(),
    " FROM events WHERE session_id = $1 AND seq < $2 AND last_seq >= $2 ORDER BY seq"
);
/// The event rows overlapping seqs `$2..=$3`.
pub const EVENTS_RANGE: &str = concat!(
    "SELECT ",
    event_columns!(),
    " FROM events WHERE session_id = $1 AND last_seq >= $2 AND seq <= $3 ORDER BY seq"
);
/// Inserts a batch of event rows.
pub const INSERT_EVENTS: &str = "INSERT INTO events (session_id, seq, last_seq, type, time, \
    packed, line_text, line_zstd, surface_op, source_event_seqs, ignorable) \
    SELECT $1, * FROM unnest($2::bigint[], $3::bigint[], $4::text[], $5::bigint[], \
    $6::boolean[], $7::text[], $8::bytea[], $9::text[], $10::text[], $11::boolean[])";
/// Inserts a new session row, leased at epoch 1.
pub const INSERT_SESSION: &str = "INSERT INTO sessions (id, version, created_at, cwd, \
    parent_session, seed_length, origin, delegation_depth, agent_preset, header_json, next_seq, \
    last_batch_seq, lease_epoch, lease_holder, lease_expires_at) \
    VALUES ($1, 0, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 1, $12::text::uuid, \
    now() + $13::bigint * interval '1 millisecond') \
    ON CONFLICT (id) DO NOTHING RETURNING lease_epoch";
/// Moves the tail, bumps the revision and renews the lease after a write.
pub const UPDATE_AFTER_WRITE: &str = "UPDATE sessions SET next_seq = $2, last_batch_seq = $3, \
    revision = revision + 1, lease_epoch = $4, lease_holder = $5::text::uuid, \
    lease_expires_at = now() + $6::bigint * interval '1 millisecond' WHERE id = $1";
/// Cuts a session's log from seq `$2` (repair).
pub const DELETE_FROM: &str = "DELETE FROM events WHERE session_id = $1 AND seq >= $2";
/// Copies the whole rows of a fork's seed from parent `$1` to child `$2`.
pub const FORK_COPY: &str = "INSERT INTO events (session_id, seq, last_seq, type, time, packed, \
    line_text, line_zstd, surface_op, source_event_seqs, ignorable) \
    SELECT $2, seq, last_seq, type, time, packed, line_text, line_zstd, surface_op, \
    source_event_seqs, ignorable FROM events WHERE session_id = $1 AND last_seq < $3";
/// Gives a lease up, if it is still this holder's at the held epoch.
pub const RELEASE_LEASE: &str = "UPDATE sessions SET lease_holder = NULL, \
    lease_expires_at = NULL WHERE id = $1 AND lease_epoch = $2 AND lease_holder = $3::text::uuid";
/// The session's advisory lock (optional: see [`crate::PostgresOptions::advisory_locks`]).
pub const SESSION_ADVISORY_LOCK: &str = "SELECT pg_advisory_xact_lock($1, hashtext($2))";

/// Every statement on `sessions` and `events`, with its name and key.
pub const STATEMENTS: &[(&str, &str, Key)] = &[
    ("SESSION_ROW", SESSION_ROW, Key::Session("$1")),
    (
        "SESSION_ROW_FOR_UPDATE",
        SESSION_ROW_FOR_UPDATE,
        Key::Session("$1"),
    ),
    (
        "SESSION_ROW_FOR_SHARE",
        SESSION_ROW_FOR_SHARE,
        Key::Session("$1"),
    ),
    ("LIST_PAGE", LIST_PAGE, Key::Scan),
    ("LIST_ALL", LIST_ALL, Key::Scan),
    ("EVENTS_ALL", EVENTS_ALL, Key::Session("$1")),
    ("EVENTS_FROM", EVENTS_FROM, Key::Session("$1")),
    ("EVENTS_STRADDLING", EVENTS_STRADDLING, Key::Session("$1")),
    ("EVENTS_RANGE", EVENTS_RANGE, Key::Session("$1")),
    ("INSERT_EVENTS", INSERT_EVENTS, Key::Session("$1")),
    ("INSERT_SESSION", INSERT_SESSION, Key::Session("$1")),
    ("UPDATE_AFTER_WRITE", UPDATE_AFTER_WRITE, Key::Session("$1")),
    ("DELETE_FROM", DELETE_FROM, Key::Session("$1")),
    ("FORK_COPY", FORK_COPY, Key::TwoSessions("$1", "$2")),
    ("RELEASE_LEASE", RELEASE_LEASE, Key::Session("$1")),
];

#[cfg(test)]
mod tests {
    use super::{Key, STATEMENTS};

    /// The `WHERE` clause of a statement (everything after the last ` WHERE `).
    fn where_clause(sql: &str) -> Option<&str> {
        sql.rfind(" WHERE ").map(|at| &sql[at + 7..])
    }

    /// Whether `clause` binds `column = param` as a top-level conjunct (not under an `OR`).
    fn binds(clause: &str, column: &str, param: &str) -> bool {
        let clause = [" ORDER BY ", " FOR UPDATE", " FOR SHARE"]
            .iter()
            .fold(clause, |c, tail| c.split(tail).next().unwrap_or(c));
        !clause.contains(" OR ")
            && clause
                .split(" AND ")
                .any(|c| c.trim() == format!("{column} = {param}"))
    }

    #[test]
    fn every_statement_on_sessions_and_events_is_keyed_by_session_id() {
        let mut seen = Vec::new();
        for &(name, sql, key) in STATEMENTS {
            assert!(!seen.contains(&name), "{name} is listed twice");
            seen.push(name);
            let column = if sql.contains(" events ") || sql.contains("INTO events") {
                "session_id"
            } else {
                "id"
            };
            match key {
                Key::Session(param) if sql.starts_with("INSERT") => {
                    let values = sql
                        .split(" VALUES (")
                        .nth(1)
                        .or_else(|| sql.split(" SELECT ").nth(1));
                    let first = values.and_then(|v| v.split([',', ' ']).next());
                    assert_eq!(
                        first,
                        Some(param),
                        "{name}: the key must be the first value"
                    );
                    assert!(
                        sql.contains(&format!("({column},"))
                            || sql.contains(&format!("({column} ,")),
                        "{name}: the first column must be {column}"
                    );
                }
                Key::Session(param) => {
                    let clause = where_clause(sql).unwrap_or_else(|| panic!("{name}: no WHERE"));
                    assert!(
                        binds(clause, column, param),
                        "{name}: not keyed by {column} = {param}: {clause}"
                    );
                }
                Key::TwoSessions(from, to) => {
                    let clause = where_clause(sql).unwrap_or_else(|| panic!("{name}: no WHERE"));
                    assert!(
                        binds(clause, "session_id", from),
                        "{name}: source not keyed"
                    );
                    assert!(
                        sql.contains(&format!("SELECT {to},")),
                        "{name}: target not keyed"
                    );
                }
                Key::Scan => {
                    assert!(sql.starts_with("SELECT "), "{name}: a scan must be a read");
                    assert!(!sql.contains(" FOR "), "{name}: a scan must not lock rows");
                }
            }
        }
    }

    #[test]
    fn the_key_check_catches_an_unkeyed_statement() {
        assert!(!binds("id = $1 OR true", "id", "$1"));
        assert!(!binds("seq >= $2", "session_id", "$1"));
        assert!(binds(
            "session_id = $1 AND seq >= $2 ORDER BY seq",
            "session_id",
            "$1"
        ));
    }

    /// The crate's sources hold no SQL on these tables outside this module and the schema.
    #[test]
    fn no_statement_on_the_tables_lives_outside_this_module() {
        let src = concat!(env!("CARGO_MANIFEST_DIR"), "/src");
        let mut stack = vec![std::path::PathBuf::from(src)];
        while let Some(dir) = stack.pop() {
            for entry in
                std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            {
                let path = entry.map(|e| e.path()).unwrap_or_default();
                if path.is_dir() {
                    stack.push(path);
                    continue;
                }
                let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
                if name == "sql.rs"
                    || name == "schema.rs"
                    || path.extension().is_none_or(|e| e != "rs")
                {
                    continue;
                }
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                for needle in [
                    "FROM sessions",
                    "FROM events",
                    "INTO sessions",
                    "INTO events",
                    "UPDATE sessions",
                    "DELETE FROM",
                ] {
                    assert!(
                        !text.contains(needle),
                        "{}: holds SQL ({needle}) outside sql.rs",
                        path.display()
                    );
                }
            }
        }
    }
}
