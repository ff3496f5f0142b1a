//! `fork` and `convert` write in the batches a live loop writes (one per turn/start and
//! step/start), never the whole session as one frame.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

use std::path::PathBuf;

use crate::common::stores::event_lines;
use crate::common::{Temp, run};
use crate::sqlite_store::{database_lines, private_dir};

fn frames(root: &str, id: &str) -> u64 {
    let stats = run(&["--root", root, "stats", id, "--json"]).ok().json();
    stats["frames"].as_u64().unwrap()
}

#[test]
fn fork_and_convert_write_one_frame_per_live_batch() {
    let root = Temp::new("batches");
    run(&["--root", root.str(), "demo"]).ok();
    let forked = run(&[
        "--root",
        root.str(),
        "fork",
        "demo",
        "--at",
        "62",
        "--id",
        "child",
        "--json",
    ])
    .ok()
    .json();
    assert_eq!(forked["child"]["seedLength"], 63);
    let events = forked["child"]["events"].as_u64().unwrap();
    let messages = run(&["--root", root.str(), "messages", "child", "--json"]).ok();
    assert!(messages.stdout.contains("\"count\""), "{}", messages.stdout);
    // 2 turns with their steps before seq 62, plus the end-seed marker: several frames
    let child_frames = frames(root.str(), "child");
    assert!(
        child_frames >= 4,
        "{child_frames} frames for {events} events"
    );
    // and the child reads back as a fork of its parent
    let header = run(&["--root", root.str(), "inspect", "child", "--json"])
        .ok()
        .json();
    assert_eq!(header["header"]["parentSession"], "demo", "{header}");
    run(&["verify", "--strict", root.str()]).ok();

    let dest = Temp::new("batches-dest");
    run(&[
        "--root",
        root.str(),
        "convert",
        "demo",
        dest.str(),
        "--to",
        "zstd",
    ])
    .ok();
    assert!(frames(dest.str(), "demo") >= 8);
}

/// How many batches a live loop writes for these events (JSON lines): one, plus one more at
/// every `turn/start` and `step/start` after the first event.
fn live_batch_count(events: &[String]) -> u64 {
    1 + events
        .iter()
        .skip(1)
        .filter(|e| {
            e.starts_with(r#"{"type":"turn/start""#) || e.starts_with(r#"{"type":"step/start""#)
        })
        .count() as u64
}

/// `convert --json`, checked to verify; returns its document.
fn convert(args: &[&str]) -> serde_json::Value {
    let doc = run(&[args, &["--json"]].concat()).ok().json();
    assert_eq!(doc["verified"], true, "{doc}");
    doc
}

/// The events of the log `convert` wrote, as JSON lines.
fn written(doc: &serde_json::Value) -> Vec<String> {
    event_lines(&PathBuf::from(doc["to"]["file"].as_str().unwrap()))
}

/// A session of many batches, converted into a plain root, from there into a zstd root, back
/// into plain text and into a `SQLite` database, keeps the same events in the same order in
/// every store, and every copy is written one live batch per frame (never merged).
#[test]
fn convert_of_many_batches_keeps_every_event_in_every_store() {
    let root = Temp::new("many-batches");
    run(&["--root", root.str(), "demo"]).ok();
    let plain = Temp::new("many-batches-plain");
    let doc = convert(&[
        "--root",
        root.str(),
        "convert",
        "demo",
        plain.str(),
        "--to",
        "none",
    ]);
    let source = written(&doc);
    assert_eq!(doc["events"].as_u64(), Some(source.len() as u64));
    let batches = live_batch_count(&source);
    assert!(batches >= 8, "{batches} batches");
    assert_eq!(doc["batches"].as_u64(), Some(batches), "{doc}");

    let zstd = Temp::new("many-batches-zstd");
    let doc = convert(&[
        "--root",
        plain.str(),
        "convert",
        "demo",
        zstd.str(),
        "--to",
        "zstd",
    ]);
    assert_eq!(doc["eventsIdentical"], true, "{doc}");
    assert_eq!(doc["batches"].as_u64(), Some(batches), "{doc}");
    // the header frame, then one frame per live batch
    assert_eq!(frames(zstd.str(), "demo"), batches + 1);

    let back = Temp::new("many-batches-back");
    let doc = convert(&[
        "--root",
        zstd.str(),
        "convert",
        "demo",
        back.str(),
        "--to",
        "none",
    ]);
    assert_eq!(doc["eventsIdentical"], true, "{doc}");
    assert_eq!(written(&doc), source, "zstd → plain");

    let dir = private_dir("many-batches-db");
    let db = dir.path().join("sessions.db");
    let doc = convert(&[
        "--root",
        zstd.str(),
        "convert",
        "demo",
        &format!("sqlite:{}", db.display()),
    ]);
    assert_eq!(doc["batches"].as_u64(), Some(batches), "{doc}");
    let stored = database_lines(&db, "demo");
    assert_eq!(stored.len(), source.len());
    for (i, (a, b)) in source.iter().zip(&stored).enumerate() {
        // a database gives envelope keys back in the live-append order
        let (a, b) = (
            serde_json::from_str::<serde_json::Value>(a).unwrap(),
            serde_json::from_str::<serde_json::Value>(b).unwrap(),
        );
        assert_eq!(a, b, "event {i}");
    }
}

/// A fork writes its child one live batch per frame: the header frame, then as many frames
/// as the child's events make live batches.
#[test]
fn fork_writes_one_frame_per_live_batch_of_its_child() {
    let root = Temp::new("fork-frames");
    run(&["--root", root.str(), "demo"]).ok();
    run(&["--root", root.str(), "fork", "demo", "--id", "child"]).ok();
    let plain = Temp::new("fork-frames-plain");
    let doc = convert(&[
        "--root",
        root.str(),
        "convert",
        "child",
        plain.str(),
        "--to",
        "none",
    ]);
    let batches = live_batch_count(&written(&doc));
    assert!(batches >= 8, "{batches} batches");
    assert_eq!(frames(root.str(), "child"), batches + 1);
}
