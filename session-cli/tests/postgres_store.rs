//! `--store postgres://…` end to end on the built binary: corpus sessions converted JSONL →
//! `PostgreSQL` → JSONL keep every event byte for byte, and the read commands answer as on the
//! JSONL log. Each test works in a schema of its own (`options=-csearch_path=…` in the URL),
//! dropped at the end.
//!
//! The server is `SESSION_PG_CLI_URL` (a `postgres://` URL), by default
//! `postgres://postgres@127.0.0.1:5432/test`. When it is not reachable the tests say so on
//! standard error and pass, unless `SESSION_PG_REQUIRED=1`.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

mod common;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use common::{Temp, corpus, run};
use serde_json::Value;
use session_core::json::Value as JsonValue;
use session_persist_postgres::tokio_postgres::{self, NoTls};
use session_persist_sqlite::codec::{Decoded, decode_storage_record};

const DEFAULT_CLI_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

fn server_url() -> String {
    std::env::var("SESSION_PG_CLI_URL").unwrap_or_else(|_| DEFAULT_CLI_URL.to_owned())
}

/// Runs one SQL statement batch on the server; `Err` when it cannot be reached.
fn execute(sql: &str) -> Result<(), String> {
    let url = server_url();
    let sql = sql.to_owned();
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
        client.batch_execute(&sql).await.map_err(|e| format!("{e}"))
    })
}

/// A schema of its own on the server, dropped when the value is.
struct Schema(String);

impl Schema {
    /// `None` (after the loud skip line) when the server is not reachable.
    fn create(test: &str) -> Option<Schema> {
        static N: AtomicU64 = AtomicU64::new(0);
        let name = format!(
            "sessionctl_{}_{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        match execute(&format!("CREATE SCHEMA {name}")) {
            Ok(()) => Some(Schema(name)),
            Err(cause) => {
                let line = format!("SKIPPED: PostgreSQL not reachable ({cause}) [{test}]");
                assert!(
                    std::env::var("SESSION_PG_REQUIRED").ok().as_deref() != Some("1"),
                    "SESSION_PG_REQUIRED=1 but {line}"
                );
                // Written to the process's stderr directly: the test harness captures
                // `eprintln!`.
                let _ =
                    std::io::Write::write_fmt(&mut std::io::stderr(), format_args!("\n{line}\n"));
                None
            }
        }
    }

    /// The store spec for this schema.
    fn store(&self) -> String {
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

fn header_id(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap();
    let header: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    header["id"].as_str().unwrap().to_owned()
}

/// The events of a plain JSONL log as JSON lines, packed chunk rows expanded.
fn event_lines(log: &Path) -> Vec<String> {
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

fn without_storage(mut doc: Value) -> Value {
    if let Some(o) = doc.as_object_mut() {
        for key in ["file", "compression", "store", "fileBytes", "inLayout"] {
            o.remove(key);
        }
    }
    doc
}

/// Corpus logs converted JSONL → `PostgreSQL` → JSONL keep every event byte for byte; the
/// read commands on the database answer as on the log; the crash closers of a repaired log
/// keep their key order too (the database stores the event text).
#[test]
fn jsonl_to_postgres_to_jsonl_keeps_every_event_byte_for_byte() {
    let Some(schema) = Schema::create("jsonl_to_postgres_to_jsonl") else {
        return;
    };
    let store = schema.store();
    let logs = corpus().join("logs");
    let mut cases: Vec<PathBuf> = [
        "acp.bash-tool-turn__session",
        "acp.advanced-toolchain__session",
        "acp.background-job-admission__session",
    ]
    .iter()
    .map(|n| logs.join(n).join("session.jsonl"))
    .collect();
    let dir = Temp::new("postgres");
    let repaired = dir.path().join("repaired").join("session.jsonl");
    std::fs::create_dir_all(repaired.parent().unwrap()).unwrap();
    std::fs::copy(
        logs.join("acp.agent-instructions__session")
            .join("crash-04")
            .join("after-load.session.jsonl"),
        &repaired,
    )
    .unwrap();
    let repaired_id = header_id(&repaired);
    for log in &cases {
        assert_ne!(header_id(log), repaired_id);
    }
    cases.push(repaired);
    for (k, log) in cases.iter().enumerate() {
        let id = header_id(log);
        let to_db = run(&["convert", log.to_str().unwrap(), &store, "--json"])
            .ok()
            .json();
        assert_eq!(to_db["verified"], true, "{}", log.display());
        assert_eq!(to_db["eventsIdentical"], true, "{}", log.display());
        assert_eq!(to_db["to"]["compression"], "postgres");
        let back = dir.path().join(format!("back-{k}"));
        let to_jsonl = run(&[
            "--store",
            &store,
            "convert",
            &id,
            back.to_str().unwrap(),
            "--to",
            "none",
            "--json",
        ])
        .ok()
        .json();
        assert_eq!(to_jsonl["verified"], true);
        let back_file = PathBuf::from(to_jsonl["to"]["file"].as_str().unwrap());
        assert_eq!(
            event_lines(&back_file),
            event_lines(log),
            "{}",
            log.display()
        );

        for args in [
            &["inspect"][..],
            &["messages"],
            &["transcript"],
            &["header"],
        ] {
            let a = run(&[args[0], log.to_str().unwrap(), "--json"]).ok().json();
            let b = run(&["--store", &store, args[0], &id, "--json"])
                .ok()
                .json();
            assert_eq!(
                without_storage(a),
                without_storage(b),
                "{}: {args:?}",
                log.display()
            );
        }
    }
    let listed = run(&["--store", &store, "list", "--json"]).ok().json();
    assert_eq!(listed["sessions"].as_array().unwrap().len(), cases.len());
    assert_eq!(listed["compression"], Value::Null);
    let again = run(&["convert", cases[0].to_str().unwrap(), &store]);
    assert_eq!(again.code, 1);
    assert!(again.stderr.contains("already exists"), "{}", again.stderr);
}

/// `stats` on a `PostgreSQL` store prints "n/a" for the sizes the server does not report,
/// not "0 B" and "0.00x".
#[test]
fn postgres_stats_print_na_for_unknown_sizes() {
    let Some(schema) = Schema::create("postgres_stats_na") else {
        return;
    };
    let store = schema.store();
    let root = Temp::new("postgres-stats");
    run(&["--root", root.str(), "demo"]).ok();
    run(&["--root", root.str(), "convert", "demo", &store]).ok();
    let r = run(&["--store", &store, "stats", "demo"]).ok();
    assert!(r.stdout.contains("n/a"), "{}", r.stdout);
    assert!(!r.stdout.contains("0.00x"), "{}", r.stdout);
    assert!(!r.stdout.contains("0 B"), "{}", r.stdout);
}
