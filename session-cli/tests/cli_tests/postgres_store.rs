//! `--store postgres://…` end to end on the built binary: corpus sessions converted JSONL →
//! `PostgreSQL` → JSONL keep every event byte for byte, and the read commands answer as on the
//! JSONL log. Each test works in a schema of its own (`options=-csearch_path=…` in the URL),
//! dropped at the end.
//!
//! The server is `SESSION_PG_CLI_URL` (a `postgres://` URL), by default
//! `postgres://postgres@127.0.0.1:5432/test`. When it is not reachable the tests say so on
//! standard error and pass, unless `SESSION_PG_REQUIRED=1`.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

use std::path::PathBuf;
use std::time::Duration;

use crate::common::stores::{Schema, event_lines, header_id};
use crate::common::{Temp, corpus, run};
use serde_json::Value;

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

/// Every sample imported into `PostgreSQL` reads back the same model views as the same
/// import into a JSONL root.
#[test]
fn imported_samples_read_back_the_same_from_postgres() {
    use session_import::Format;
    if conformance::import_samples::require().is_none() {
        return;
    }
    for format in [Format::Codex, Format::ClaudeCode] {
        let Some(schema) = Schema::create(&format!("imported_samples_pg_{}", format.as_str()))
        else {
            return;
        };
        let store = schema.store();
        let t = crate::common::Temp::new("pg-import");
        let root = t.path().join("root").display().to_string();
        let pg = crate::import::import_all(&["--store", &store], format).unwrap();
        let js = crate::import::import_all(&["--root", &root], format).unwrap();
        assert_eq!(pg.len(), js.len(), "{format:?}");
        assert_eq!(
            pg, js,
            "{format:?}: PostgreSQL and JSONL read back the same views"
        );
    }
}

/// A killed `sessionctl append` leaves its lease live: another `append` and a `repair` of the
/// session are refused (exit 1, `leased by another writer`, kind `locked`) until
/// `--take-over`, which appends.
#[test]
fn take_over_after_a_killed_append() {
    use std::io::Write as _;
    use std::process::{Command, Stdio};
    let Some(schema) = Schema::create("take_over_after_a_killed_append") else {
        return;
    };
    let store = format!("{}&lease_ttl_ms=60000", schema.store());
    let mut holder = Command::new(crate::common::BIN)
        .args([
            "--store", &store, "append", "held", "--create", "--cwd", "/w",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = holder.stdin.take().unwrap();
    writeln!(stdin, r#"{{"type":"turn/start","data":{{"turn":1}}}}"#).unwrap();
    writeln!(stdin, r#"{{"flush":true}}"#).unwrap();
    stdin.flush().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !run(&["--store", &store, "list"]).stdout.contains("held") {
        assert!(
            std::time::Instant::now() < deadline,
            "the holder never flushed"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    holder.kill().unwrap();
    holder.wait().unwrap();
    drop(stdin);
    let turn = "{\"type\":\"turn/start\",\"data\":{\"turn\":2}}\n";
    let refused = crate::common::run_in(&["--store", &store, "append", "held"], Some(turn));
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("leased by another writer (epoch 1"),
        "{}",
        refused.stderr
    );
    // The open turn needs closers, so the repair has something to commit.
    let repair = run(&["--store", &store, "--json", "repair", "held"]);
    assert_eq!(repair.code, 1, "{}", repair.stdout);
    assert!(repair.stderr.contains("\"locked\""), "{}", repair.stderr);
    crate::common::run_in(
        &["--store", &store, "--take-over", "append", "held"],
        Some(turn),
    )
    .ok();
    let listed = run(&["--store", &store, "--json", "list"]).ok();
    assert!(listed.stdout.contains("held"), "{}", listed.stdout);
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

/// Reads never write: on an empty schema, `list`, `inspect`, `messages`, `transcript`, `header`
/// and `stats` answer as an empty store does and create no table; the first write creates the
/// schema.
#[test]
fn reads_on_an_empty_schema_create_no_tables() {
    let Some(schema) = Schema::create("reads_create_no_tables") else {
        return;
    };
    let store = schema.store();
    let listed = run(&["--store", &store, "list", "--json"]).ok().json();
    assert_eq!(listed["sessions"], serde_json::json!([]), "{listed}");
    assert_eq!(schema.tables(), 0, "list created tables");
    for cmd in ["inspect", "messages", "transcript", "header", "stats"] {
        let r = run(&["--store", &store, cmd, "nope", "--json"]);
        assert_eq!(r.code, 1, "{cmd}: {}", r.stdout);
        assert_eq!(r.json_error()["kind"], "not_found", "{cmd}: {}", r.stderr);
        assert_eq!(schema.tables(), 0, "{cmd} created tables");
    }
    let root = Temp::new("postgres-empty-schema");
    run(&["--root", root.str(), "demo"]).ok();
    run(&["--root", root.str(), "convert", "demo", &store]).ok();
    assert!(schema.tables() > 0, "the first write creates the schema");
    let inspect = run(&["--store", &store, "inspect", "demo", "--json"])
        .ok()
        .json();
    assert_eq!(inspect["id"], "demo");
}
