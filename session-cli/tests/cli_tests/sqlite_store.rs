//! `--store sqlite:PATH` and `convert` between JSONL and `SQLite`, end to end on the built
//! binary over the golden corpus: a session converted JSONL → `SQLite` → JSONL keeps every event
//! byte for byte, and the read commands give the same answers on both stores.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::common::stores::{event_lines, header_id};
use crate::common::{Run, Temp, corpus, corpus_index, parallel, run, run_in};
use serde_json::Value;
use session_persist::Backend;
use session_persist_sqlite::{SqliteBackend, SqliteConfig};

/// Every corpus log (plain JSONL).
fn corpus_logs() -> Vec<PathBuf> {
    let Some(corpus) = corpus_index() else {
        return Vec::new();
    };
    corpus
        .logs()
        .into_iter()
        .map(|dir| dir.join("session.jsonl"))
        .collect()
}

/// The events a `SQLite` database holds for `id`, as JSON lines.
pub(crate) fn database_lines(db: &Path, id: &str) -> Vec<String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let backend = SqliteBackend::new(SqliteConfig::new(db.to_str().unwrap())).unwrap();
        let stored = backend.load_stored(id).await.unwrap().unwrap();
        assert!(stored.torn.is_none());
        backend.close().await.unwrap();
        stored
            .events
            .iter()
            .map(session_core::Event::to_json)
            .collect()
    })
}

fn sqlite(db: &Path) -> String {
    format!("sqlite:{}", db.display())
}

/// A private directory for databases (the backend refuses group/world-writable parents).
pub(crate) fn private_dir(tag: &str) -> Temp {
    let dir = Temp::new(tag);
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    dir
}

/// Every corpus log converted JSONL → `SQLite` → JSONL keeps every event byte for byte; the
/// database holds exactly those events; both conversions verify.
#[test]
fn jsonl_to_sqlite_to_jsonl_keeps_every_event_byte_for_byte() {
    let logs = corpus_logs();
    parallel(&logs, 2, |log| {
        let name = log.parent().unwrap().file_name().unwrap().to_string_lossy();
        let id = header_id(log);
        let dir = private_dir("round-trip");
        let db = dir.path().join("store").join("sessions.db");
        let to_db = run(&["convert", log.to_str().unwrap(), &sqlite(&db), "--json"])
            .ok()
            .json();
        assert_eq!(to_db["verified"], true, "{name}");
        assert_eq!(to_db["eventsIdentical"], true, "{name}");
        assert_eq!(to_db["to"]["compression"], "sqlite", "{name}");
        assert_eq!(to_db["logicalTextIdentical"], Value::Null, "{name}");
        let original = event_lines(log);
        assert_eq!(
            to_db["events"].as_u64(),
            Some(original.len() as u64),
            "{name}"
        );
        assert_eq!(
            database_lines(&db, &id),
            original,
            "{name}: database events"
        );

        let back = dir.path().join("back");
        let to_jsonl = run(&[
            "--store",
            &sqlite(&db),
            "convert",
            &id,
            &format!("jsonl:{}", back.display()),
            "--to",
            "none",
            "--json",
        ])
        .ok()
        .json();
        assert_eq!(to_jsonl["verified"], true, "{name}");
        assert_eq!(to_jsonl["eventsIdentical"], true, "{name}");
        assert_eq!(to_jsonl["to"]["compression"], "none", "{name}");
        let back_file = PathBuf::from(to_jsonl["to"]["file"].as_str().unwrap());
        assert!(
            back_file.starts_with(&back),
            "{name}: {}",
            back_file.display()
        );
        let round_trip = event_lines(&back_file);
        assert_eq!(round_trip.len(), original.len(), "{name}");
        for (i, (a, b)) in original.iter().zip(&round_trip).enumerate() {
            assert_eq!(
                a, b,
                "{name}: event {i} differs after JSONL → SQLite → JSONL"
            );
        }
    });
}

/// Strips the members that name where a session is stored.
fn without_storage(mut doc: Value) -> Value {
    if let Some(o) = doc.as_object_mut() {
        for key in ["file", "compression", "store", "fileBytes", "inLayout"] {
            o.remove(key);
        }
    }
    doc
}

/// `inspect`, `messages`, `transcript` and `header` give the same documents on a `SQLite`
/// store as on the JSONL log it was converted from (storage members aside), for every third
/// corpus log; the human `messages` output is identical too.
#[test]
fn read_commands_on_sqlite_match_jsonl() {
    let logs: Vec<PathBuf> = corpus_logs().into_iter().step_by(3).collect();
    parallel(&logs, 2, |log| {
        let name = log.parent().unwrap().file_name().unwrap().to_string_lossy();
        let id = header_id(log);
        let dir = private_dir("read");
        let db = dir.path().join("sessions.db");
        run(&["convert", log.to_str().unwrap(), &sqlite(&db)]).ok();
        let store = sqlite(&db);
        let file = log.to_str().unwrap();
        let mid = (event_lines(log).len() / 2).to_string();
        for args in [
            &["inspect"][..],
            &["messages"],
            &["messages", "--at", &mid],
            &["header", "--at", &mid],
            &["transcript"],
            &["header"],
        ] {
            let on_jsonl: Vec<&str> = [args[0], file]
                .into_iter()
                .chain(args[1..].iter().copied())
                .chain(["--json"])
                .collect();
            let on_sqlite: Vec<&str> = ["--store", &store, args[0], &id]
                .into_iter()
                .chain(args[1..].iter().copied())
                .chain(["--json"])
                .collect();
            let a = run(&on_jsonl).ok().json();
            let b = run(&on_sqlite).ok().json();
            assert_eq!(
                without_storage(a),
                without_storage(b.clone()),
                "{name}: {args:?}"
            );
            if args[0] == "inspect" {
                assert_eq!(b["store"], Value::from(store.clone()), "{name}");
                assert_eq!(b["compression"], Value::Null, "{name}");
                assert_eq!(b["file"], Value::Null, "{name}");
            }
        }
        let a = run(&["messages", file, "--full"]).ok().stdout;
        let b = run(&["--store", &store, "messages", &id, "--full"])
            .ok()
            .stdout;
        assert_eq!(a, b, "{name}: human messages");
    });
}

/// A log repaired by the reference holds crash closers, whose envelope keys are written
/// `surfaceOp` before `sourceEventSeqs`; a database stores the envelope as columns and gives
/// every event back in the live-append order. The conversion verifies the content and says
/// that some events are not byte-identical; everything else is.
#[test]
fn crash_closers_come_back_from_sqlite_in_the_append_key_order() {
    let after_load = corpus()
        .join("logs")
        .join("acp.bash-tool-turn__session")
        .join("crash-05")
        .join("after-load.session.jsonl");
    let dir = private_dir("closers");
    let log = dir.path().join("copy").join("session.jsonl");
    std::fs::create_dir_all(log.parent().unwrap()).unwrap();
    std::fs::copy(&after_load, &log).unwrap();
    let id = header_id(&log);
    let db = dir.path().join("sessions.db");
    let to_db = run(&["convert", log.to_str().unwrap(), &sqlite(&db), "--json"])
        .ok()
        .json();
    assert_eq!(to_db["verified"], true);
    assert_eq!(to_db["eventsIdentical"], false);
    let original = event_lines(&log);
    let stored = database_lines(&db, &id);
    assert_eq!(stored.len(), original.len());
    let differing: Vec<usize> = (0..original.len())
        .filter(|i| original[*i] != stored[*i])
        .collect();
    assert!(!differing.is_empty());
    for i in differing {
        assert!(
            original[i].contains(r#""surfaceOp":"append","sourceEventSeqs""#),
            "event {i} differs but is not a closer: {}",
            original[i]
        );
        assert!(
            stored[i].contains(r#""sourceEventSeqs":"#)
                && stored[i].ends_with(r#","surfaceOp":"append"}"#),
            "event {i} is not in the append order: {}",
            stored[i]
        );
        let a: Value = serde_json::from_str(&original[i]).unwrap();
        let b: Value = serde_json::from_str(&stored[i]).unwrap();
        assert_eq!(a, b, "event {i} content");
    }
}

/// Every command on a `SQLite` store: `list`, `append --create`, `append`, `repair`, `fork`,
/// `stats` from the rows; `seal`, `verify` and `demo` refuse as usage errors; a missing
/// database is an error that names it and creates nothing.
#[test]
fn commands_on_a_sqlite_store() {
    let dir = private_dir("commands");
    let db = dir.path().join("sessions.db");
    let store = sqlite(&db);
    let on = |args: &[&str]| -> Run {
        let mut all = vec!["--store", store.as_str()];
        all.extend_from_slice(args);
        run(&all)
    };

    let missing = on(&["inspect", "nope", "--json"]);
    assert_eq!(missing.code, 1);
    assert!(
        missing.json_error()["message"]
            .as_str()
            .unwrap()
            .contains("does not exist"),
        "{}",
        missing.stderr
    );
    assert!(!db.exists(), "a read created the database");

    let drafts = [
        r#"{"type":"turn/start","data":{"turn":1}}"#,
        r#"{"type":"step/start","data":{"turn":1,"step":1}}"#,
        r#"{"flush":true}"#,
    ]
    .join("\n");
    let created = run_in(
        &[
            "--store",
            &store,
            "append",
            "notes",
            "--create",
            "--cwd",
            "/work/notes",
        ],
        Some(&drafts),
    )
    .ok();
    assert_eq!(
        created.stdout, "{\"flushed\":1}\n",
        "one line: the end of input repeats none"
    );
    assert!(db.is_file());
    let again = run_in(
        &["--store", &store, "append", "notes", "--create"],
        Some(""),
    );
    assert_eq!(again.code, 1);
    assert!(again.stderr.contains("already exists"), "{}", again.stderr);

    let unknown = on(&["inspect", "nope", "--json"]);
    assert_eq!(unknown.code, 1);
    let error = unknown.json_error();
    assert_eq!(error["message"], "session \"nope\" not found");
    assert_eq!(error["kind"], "not_found");
    assert_eq!(error["file"], Value::from(db.display().to_string()));
    assert!(
        error["hint"]
            .as_str()
            .unwrap()
            .contains(&format!("sessionctl --store {store} list")),
        "{error}"
    );

    let listed = on(&["list", "--count", "--json"]).ok().json();
    assert_eq!(listed["store"], Value::from(store.clone()));
    assert_eq!(listed["sessions"][0]["id"], "notes");
    assert_eq!(listed["sessions"][0]["events"], 2);
    assert_eq!(listed["sessions"][0]["file"], Value::Null);

    // The open turn: inspect shows the closers, repair commits them.
    let inspected = on(&["inspect", "notes", "--json"]).ok().json();
    assert_eq!(inspected["storedEventCount"], 2);
    assert_eq!(inspected["eventCount"], 4);
    let repaired = on(&["repair", "notes", "--json"]).ok().json();
    assert_eq!(repaired["committed"], true);
    assert_eq!(repaired["eventCountAfter"], 4);
    let inspected = on(&["inspect", "notes", "--json"]).ok().json();
    assert_eq!(inspected["storedEventCount"], 4);
    assert_eq!(inspected["closers"], Value::Array(vec![]));

    // Resume: the end-seed marker, then the new events.
    let resumed = run_in(
        &["--store", &store, "append", "notes"],
        Some(r#"{"type":"turn/start","data":{"turn":2}}"#),
    )
    .ok();
    assert_eq!(resumed.stdout, "{\"flushed\":5}\n");

    let forked = on(&["fork", "notes", "--at", "3", "--json"]).ok().json();
    assert_eq!(forked["child"]["id"], "notes-fork-1");
    assert_eq!(forked["child"]["seedLength"], 4);
    assert_eq!(forked["child"]["file"], Value::Null);
    let refused = on(&["fork", "notes", "--at", "3", "--id", "notes-fork-1"]);
    assert_eq!(refused.code, 1);
    assert!(refused.stderr.contains("SESSION_ALREADY_EXISTS"));
    let listed = on(&["list", "--json"]).ok().json();
    assert_eq!(listed["sessions"].as_array().unwrap().len(), 2);

    let stats = on(&["stats", "notes", "--json"]).ok().json();
    assert_eq!(stats["compression"], "sqlite");
    assert_eq!(stats["file"], Value::Null);
    assert_eq!(stats["events"], 6);
    assert_eq!(stats["rows"]["rows"], 6);
    assert_eq!(stats["records"], 6);
    assert!(stats["fileBytes"].as_u64().unwrap() > stats["rows"]["dataBytes"].as_u64().unwrap());
    assert_eq!(stats["frames"], Value::Null);

    for args in [&["seal", "notes"][..], &["verify", "x"], &["demo"]] {
        let refused = on(args);
        assert_eq!(refused.code, 2, "{args:?}: {}", refused.stderr);
    }
    for (args, message) in [
        (
            &["--store", &store, "--compression", "zstd", "list"][..],
            "--compression applies to JSONL stores only",
        ),
        (
            &["--store", &store, "--root", "x", "list"],
            "--store and --root both name the store",
        ),
        (&["--store", "mysql:x", "list"], "--store expects"),
        (&["--store", "sqlite:", "list"], "needs a path"),
    ] {
        let refused = run(args);
        assert_eq!(refused.code, 2, "{args:?}");
        assert!(
            refused.stderr.contains(message),
            "{args:?}: {}",
            refused.stderr
        );
    }
}

/// A `PostgreSQL` store that cannot be reached fails with exit 1, and its password is never
/// shown.
#[test]
fn an_unreachable_postgres_store_fails_without_showing_its_password() {
    let failed = run(&[
        "--store",
        "postgres://agent:s3cret-pw@127.0.0.1:1/sessions?password=s3cret-pw",
        "list",
        "--json",
    ]);
    assert_eq!(failed.code, 1, "{}", failed.stderr);
    assert!(!failed.stderr.contains("s3cret-pw"), "{}", failed.stderr);
    assert!(failed.stdout.is_empty());
    let usage = run(&[
        "--store",
        "postgres://127.0.0.1:1/db",
        "--compression",
        "none",
        "list",
    ]);
    assert_eq!(usage.code, 2);
}

/// `--store jsonl:DIR` is `--root DIR`.
#[test]
fn jsonl_store_spec_is_the_root_option() {
    let log = &corpus_logs()[0];
    let dir = Temp::new("jsonl-spec");
    let root = dir.path().join("root");
    run(&["convert", log.to_str().unwrap(), root.to_str().unwrap()]).ok();
    let by_root = run(&["--root", root.to_str().unwrap(), "list", "--json"])
        .ok()
        .json();
    let by_spec = run(&[
        "--store",
        &format!("jsonl:{}", root.display()),
        "list",
        "--json",
    ])
    .ok()
    .json();
    assert_eq!(by_root, by_spec);
    assert_eq!(by_root["sessions"].as_array().unwrap().len(), 1);
    assert_eq!(by_root["compression"], "zstd");
}
