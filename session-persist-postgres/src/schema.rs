//! The schema and its migrations.
//!
//! Migrations are tracked in the `schema_migrations` table of the backend's schema (the first
//! entry of the connection's `search_path`). [`migrate`] applies the missing ones in one
//! transaction under `pg_advisory_xact_lock`, so concurrent backends starting on the same
//! schema apply each migration exactly once; a database that is newer than this build is
//! refused with [`crate::Error::SchemaTooNew`].

use tokio_postgres::Client;

use crate::error::{Error, Result};

/// The advisory-lock class of migrations (`pg_advisory_xact_lock(class, hashtext(schema))`).
pub const MIGRATION_LOCK_CLASS: i32 = 0x5350_0001;

/// The advisory-lock class of a session's first publication
/// (`pg_advisory_xact_lock(class, hashtext(id))`).
pub const SESSION_LOCK_CLASS: i32 = 0x5350_0002;

/// One migration: its version, name and SQL.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    /// The version (1, 2, ...).
    pub version: i32,
    /// A short name.
    pub name: &'static str,
    /// The statements.
    pub sql: &'static str,
}

/// Every migration this build knows, in order.
pub const MIGRATIONS: &[Migration] = &[Migration {
    version: 1,
    name: "sessions, events, store identity",
    sql: r"
CREATE TABLE store_identity (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    store_id uuid NOT NULL DEFAULT gen_random_uuid()
);
INSERT INTO store_identity DEFAULT VALUES;

CREATE TABLE sessions (
    id text PRIMARY KEY,
    version integer NOT NULL DEFAULT 0,
    created_at bigint NOT NULL,
    cwd text,
    parent_session text,
    seed_length bigint,
    origin text,
    delegation_depth bigint,
    agent_preset text,
    header_json text NOT NULL,
    incarnation uuid NOT NULL DEFAULT gen_random_uuid(),
    revision bigint NOT NULL DEFAULT 1,
    next_seq bigint NOT NULL,
    last_batch_seq bigint NOT NULL,
    lease_epoch bigint NOT NULL DEFAULT 1,
    lease_holder uuid,
    lease_expires_at timestamptz
);

CREATE TABLE events (
    session_id text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq bigint NOT NULL,
    last_seq bigint NOT NULL,
    type text NOT NULL,
    time bigint NOT NULL,
    packed boolean NOT NULL,
    line_text text,
    line_zstd bytea,
    surface_op text,
    source_event_seqs text,
    ignorable boolean NOT NULL DEFAULT false,
    PRIMARY KEY (session_id, seq),
    CHECK (last_seq >= seq),
    CHECK ((line_text IS NULL) <> (line_zstd IS NULL))
);

CREATE INDEX events_session_last_seq ON events (session_id, last_seq);
",
}];

/// The newest migration this build knows.
pub fn latest_version() -> i32 {
    MIGRATIONS.last().map_or(0, |m| m.version)
}

/// Quotes an identifier for SQL.
pub fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// The store id of the schema on the connection's `search_path` when it exists and is at
/// this build's version; `None` when it is missing or older (the first write migrates it). A
/// newer schema is refused with [`Error::SchemaTooNew`]. Only reads.
pub async fn probe(client: &mut Client) -> Result<Option<String>> {
    let pg = Error::pg;
    let present: bool = client
        .query_one(
            "SELECT to_regclass('schema_migrations') IS NOT NULL \
             AND to_regclass('store_identity') IS NOT NULL",
            &[],
        )
        .await
        .and_then(|row| row.try_get(0))
        .map_err(pg("connect"))?;
    if !present {
        return Ok(None);
    }
    let applied: Option<i32> = client
        .query_one("SELECT max(version) FROM schema_migrations", &[])
        .await
        .and_then(|row| row.try_get(0))
        .map_err(pg("connect"))?;
    let applied = applied.unwrap_or(0);
    if applied > latest_version() {
        return Err(Error::SchemaTooNew {
            found: applied,
            known: latest_version(),
        });
    }
    if applied < latest_version() {
        return Ok(None);
    }
    let store_id: Option<String> = client
        .query_opt("SELECT store_id::text FROM store_identity", &[])
        .await
        .and_then(|row| row.map(|r| r.try_get(0)).transpose())
        .map_err(pg("connect"))?;
    Ok(store_id)
}

/// Creates `schema` when given, then applies every missing migration in one transaction under
/// an advisory lock keyed by the schema (without it, when `advisory_lock` is false: two
/// backends migrating the same schema at once may then see one of them fail on a duplicate
/// key and roll back whole; retrying it finds the migrations applied). Returns the store id.
pub async fn migrate(
    client: &mut Client,
    schema: Option<&str>,
    advisory_lock: bool,
) -> Result<String> {
    let pg = Error::pg;
    let tx = client.transaction().await.map_err(pg("migrate"))?;
    if advisory_lock {
        tx.execute(
            "SELECT pg_advisory_xact_lock($1, hashtext(coalesce($2, current_schema(), '')))",
            &[&MIGRATION_LOCK_CLASS, &schema],
        )
        .await
        .map_err(pg("migrate"))?;
    }
    if let Some(schema) = schema {
        tx.batch_execute(&format!(
            "CREATE SCHEMA IF NOT EXISTS {}",
            quote_ident(schema)
        ))
        .await
        .map_err(pg("migrate"))?;
    }
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
            version integer PRIMARY KEY,
            name text NOT NULL,
            applied_at timestamptz NOT NULL DEFAULT now()
        )",
    )
    .await
    .map_err(pg("migrate"))?;
    let applied: Option<i32> = tx
        .query_one("SELECT max(version) FROM schema_migrations", &[])
        .await
        .and_then(|row| row.try_get(0))
        .map_err(pg("migrate"))?;
    let applied = applied.unwrap_or(0);
    if applied > latest_version() {
        return Err(Error::SchemaTooNew {
            found: applied,
            known: latest_version(),
        });
    }
    for migration in MIGRATIONS.iter().filter(|m| m.version > applied) {
        tx.batch_execute(migration.sql)
            .await
            .map_err(pg("migrate"))?;
        tx.execute(
            "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)",
            &[&migration.version, &migration.name],
        )
        .await
        .map_err(pg("migrate"))?;
    }
    let store_id: String = tx
        .query_one("SELECT store_id::text FROM store_identity", &[])
        .await
        .and_then(|row| row.try_get(0))
        .map_err(pg("migrate"))?;
    tx.commit().await.map_err(pg("migrate"))?;
    Ok(store_id)
}
