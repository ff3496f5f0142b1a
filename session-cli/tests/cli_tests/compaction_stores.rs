//! An uncompacted child round-trips through every store: JSONL raw and zstd, `SQLite` and
//! `PostgreSQL`. On each, the parent is converted in, `uncompact` publishes the child through
//! that store's backend, and the child converted back to plain JSONL holds exactly the events
//! of the child written on plain JSONL (the closing provenance record's `time`, which is the
//! wall clock, aside), and the model reads the same messages.
//!
//! The `PostgreSQL` case says so on standard error and passes when the server is not reachable,
//! unless `SESSION_PG_REQUIRED=1`.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

use std::path::Path;

use crate::common::stores::{Schema, event_lines};
use crate::common::{Temp, corpus, read_json, run};
use serde_json::Value;

/// The corpus log with a compaction these tests use.
const LOG: &str = "acp.agent-instructions__session";

/// Event lines as JSON, the `time` of the last one (the provenance record) removed.
fn comparable(lines: &[String]) -> Vec<Value> {
    let mut values: Vec<Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let last = values.last_mut().unwrap();
    assert_eq!(last["type"], "uncompact/provenance", "{last}");
    last.as_object_mut().unwrap().remove("time");
    values
}

struct Parent {
    _dir: Temp,
    root: String,
    id: String,
    seq: u64,
}

fn stage_parent() -> Parent {
    let dir = Temp::new("uncompact-stores");
    let log = corpus().join("logs").join(LOG);
    let expected = read_json(&log.join("expected.json"));
    let rel = expected["writer"]["relativePath"]["jsonl"]
        .as_str()
        .unwrap();
    crate::common::place(&log.join("session.jsonl"), &dir.path().join("plain"), rel);
    let root = dir.path().join("plain").to_str().unwrap().to_owned();
    let id = expected["sessionId"].as_str().unwrap().to_owned();
    let list = run(&["--root", &root, "--json", "compactions", &id])
        .ok()
        .json();
    let seq = list["compactions"][0]["seq"].as_u64().unwrap();
    Parent {
        _dir: dir,
        root,
        id,
        seq,
    }
}

/// `uncompact` on store `store` (global options), returning the child's messages and its
/// events converted back to plain JSONL under `back`.
fn uncompact_on(store: &[&str], parent: &Parent, back: &Path) -> (Value, Vec<Value>) {
    let seq = parent.seq.to_string();
    let mut args: Vec<&str> = store.to_vec();
    args.extend([
        "--json",
        "uncompact",
        &parent.id,
        "--compaction",
        &seq,
        "--id",
        "child",
    ]);
    let out = run(&args).ok().json();
    assert_eq!(out["child"]["seedLength"].as_u64(), Some(parent.seq));
    let mut args: Vec<&str> = store.to_vec();
    args.extend(["--json", "messages", "child"]);
    let messages = run(&args).ok().json()["messages"].clone();
    let mut args: Vec<&str> = store.to_vec();
    let back_str = back.to_str().unwrap();
    args.extend(["--json", "convert", "child", back_str, "--to", "none"]);
    let converted = run(&args).ok().json();
    assert_eq!(converted["verified"], true, "{converted}");
    let file = converted["to"]["file"].as_str().unwrap().to_owned();
    (messages, comparable(&event_lines(Path::new(&file))))
}

/// The child on plain JSONL: its messages and events.
fn reference(parent: &Parent) -> (Value, Vec<Value>) {
    let seq = parent.seq.to_string();
    let out = run(&[
        "--root",
        &parent.root,
        "--json",
        "uncompact",
        &parent.id,
        "--compaction",
        &seq,
        "--id",
        "child",
    ])
    .ok()
    .json();
    let file = out["child"]["file"].as_str().unwrap().to_owned();
    let messages = run(&["--root", &parent.root, "--json", "messages", "child"])
        .ok()
        .json()["messages"]
        .clone();
    let verify = run(&["--root", &parent.root, "verify", "--strict", &file]).ok();
    assert!(verify.stdout.contains("1 passed"), "{}", verify.stdout);
    (messages, comparable(&event_lines(Path::new(&file))))
}

#[test]
fn the_child_round_trips_through_zstd_jsonl_and_sqlite() {
    let parent = stage_parent();
    let (messages, events) = reference(&parent);
    // The child reads the shadowed original where the parent reads the summary.
    let seqs: Vec<u64> = messages
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["seq"].as_u64().unwrap())
        .collect();
    assert!(!seqs.contains(&parent.seq), "{seqs:?}");

    let dir = Temp::new("uncompact-stores-dest");
    let zstd_root = dir.path().join("zstd");
    let zstd = zstd_root.to_str().unwrap();
    run(&[
        "--root",
        &parent.root,
        "convert",
        &parent.id,
        zstd,
        "--to",
        "zstd",
    ])
    .ok();
    let got = uncompact_on(&["--root", zstd], &parent, &dir.path().join("back-zstd"));
    assert_eq!(got, (messages.clone(), events.clone()), "zstd JSONL");

    let db = format!("sqlite:{}", dir.path().join("s.db").display());
    run(&["--root", &parent.root, "convert", &parent.id, &db]).ok();
    let got = uncompact_on(&["--store", &db], &parent, &dir.path().join("back-sqlite"));
    assert_eq!(got, (messages, events), "SQLite");
}

#[test]
fn the_child_round_trips_through_postgres() {
    let Some(schema) = Schema::create("uncompact_postgres") else {
        return;
    };
    let store = schema.store();
    let parent = stage_parent();
    let (messages, events) = reference(&parent);
    run(&["--root", &parent.root, "convert", &parent.id, &store]).ok();
    let dir = Temp::new("uncompact-stores-pg");
    let got = uncompact_on(&["--store", &store], &parent, &dir.path().join("back"));
    assert_eq!(got, (messages, events), "PostgreSQL");
}
