//! Helpers shared by the tests that use several stores: the `PostgreSQL` server and a schema
//! of its own per test, and the event lines of a plain JSONL log.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::Value;
use session_core::json::Value as JsonValue;
use session_persist_postgres::tokio_postgres::{self, NoTls};
use session_persist_sqlite::codec::{Decoded, decode_storage_record};

pub const DEFAULT_CLI_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

pub fn server_url() -> String {
    std::env::var("SESSION_PG_CLI_URL").unwrap_or_else(|_| DEFAULT_CLI_URL.to_owned())
}

/// Runs `f` with a client connected to the server; `Err` when it cannot be reached.
pub fn with_pg<T>(
    f: impl AsyncFnOnce(&tokio_postgres::Client) -> Result<T, tokio_postgres::Error>,
) -> Result<T, String> {
    let url = server_url();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let config: tokio_postgres::Config = url.parse().map_err(|e| format!("{e}"))?;
        let (client, connection) =
            tokio::time::timeout(Duration::from_secs(3), config.connect(NoTls))
                .await
                .map_err(|_| "connect timed out".to_owned())?
                .map_err(|e| format!("{e}"))?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        f(&client).await.map_err(|e| format!("{e}"))
    })
}

/// Runs one SQL statement batch on the server; `Err` when it cannot be reached.
pub fn execute(sql: &str) -> Result<(), String> {
    with_pg(async move |c| c.batch_execute(sql).await)
}

/// The first column of the first row of `sql` (a `bigint`).
pub fn query_i64(sql: &str) -> i64 {
    with_pg(async move |c| c.query_one(sql, &[]).await.map(|row| row.get(0))).unwrap()
}

/// A schema of its own on the server, dropped when the value is.
pub struct Schema(pub String);

impl Schema {
    /// `None` (after the loud skip line) when the server is not reachable.
    pub fn create(test: &str) -> Option<Schema> {
        static N: AtomicU64 = AtomicU64::new(0);
        let name = format!(
            "sessionctl_{}_{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        match execute(&format!("CREATE SCHEMA {name}")) {
            Ok(()) => Some(Schema(name)),
            Err(cause) => {
                conformance::skip::service_missing(
                    "SESSION_PG_REQUIRED",
                    format_args!("PostgreSQL not reachable ({cause}) [{test}]"),
                );
                None
            }
        }
    }

    /// How many tables the schema holds.
    pub fn tables(&self) -> i64 {
        query_i64(&format!(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = '{}'",
            self.0
        ))
    }

    /// The store spec for this schema.
    pub fn store(&self) -> String {
        let url = server_url();
        let sep = if url.contains('?') { '&' } else { '?' };
        format!("{url}{sep}options=-csearch_path%3D{}", self.0)
    }
}

impl Drop for Schema {
    fn drop(&mut self) {
        let _ = execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", self.0));
    }
}

pub fn header_id(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap();
    let header: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    header["id"].as_str().unwrap().to_owned()
}

/// The events of a plain JSONL log as JSON lines, packed chunk rows expanded.
pub fn event_lines(log: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(log).unwrap();
    let mut out = Vec::new();
    for line in text.lines().skip(1).filter(|l| !l.is_empty()) {
        match decode_storage_record(&JsonValue::parse(line).unwrap()).unwrap() {
            Decoded::Expanded(events) => {
                out.extend(events.iter().map(session_core::Event::to_json));
            }
            Decoded::Passthrough(v) => out.push(v.to_json()),
        }
    }
    out
}
