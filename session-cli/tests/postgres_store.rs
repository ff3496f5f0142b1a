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

use std::path::PathBuf;

use common::stores::{Schema, event_lines, header_id};
use common::{Temp, corpus, run};
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
