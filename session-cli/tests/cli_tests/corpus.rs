//! Every command on every log of the golden corpus (both encodings), checked against the
//! reference's `expected.json`; crash variants: `inspect` shows the closers, `repair` commits
//! them and leaves exactly the file the reference's `load()` leaves.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::common::{
    Temp, corpus, corpus_index, events_of, parallel, place, read_json, run, unzstd,
};
use serde_json::Value;

/// Every log of the corpus index (none when the corpus is absent and skipping is allowed).
fn log_names() -> Vec<String> {
    corpus_index()
        .map(|c| c.index.logs.iter().map(|l| l.name.clone()).collect())
        .unwrap_or_default()
}

const ENCODINGS: [(&str, &str, &str); 2] = [
    ("jsonl", "session.jsonl", "none"),
    ("zstd", "session.jsonl.zstd", "zstd"),
];

/// Copies a log into a fresh root at its `writer.relativePath`.
fn stage(dir: &Path, expected: &Value, key: &str, file: &str) -> (Temp, PathBuf) {
    let root = Temp::new("corpus");
    let rel = expected["writer"]["relativePath"][key].as_str().unwrap();
    let placed = place(&dir.join(file), root.path(), rel);
    (root, placed)
}

fn type_counts(events: &[Value]) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for e in events {
        *m.entry(e["type"].as_str().unwrap().to_owned()).or_insert(0) += 1;
    }
    m
}

fn check_log(index: usize, name: &str) {
    // The path forms, `--at` and the human output run on every third log (plain encoding)
    // to keep the run short; the JSON checks run on every log in both encodings.
    let extras = index.is_multiple_of(3);
    let dir = corpus().join("logs").join(name);
    let expected = read_json(&dir.join("expected.json"));
    let id = expected["sessionId"].as_str().unwrap();
    let events = events_of(&expected, &expected["events"]);
    let session = &expected["session"];
    for (key, file, compression) in ENCODINGS {
        let (root, placed) = stage(&dir, &expected, key, file);
        let ctx = format!("{name} ({key})");
        let base = ["--root", root.str(), "--compression", compression];
        let with = |extra: &[&str]| {
            let mut a: Vec<&str> = base.to_vec();
            a.extend_from_slice(extra);
            run(&a).ok()
        };

        // inspect
        let inspect = with(&["inspect", id, "--json"]).json();
        assert_eq!(inspect["schema"], "sessionctl.inspect/1", "{ctx}");
        let persisted = &expected["persistence"][key]["inspect"];
        assert_eq!(
            inspect["eventCount"], persisted["eventCount"],
            "{ctx}: eventCount"
        );
        assert_eq!(
            inspect["storedEventCount"].as_u64(),
            Some(events.len() as u64),
            "{ctx}"
        );
        assert_eq!(inspect["header"], expected["header"], "{ctx}: header");
        assert_eq!(inspect["closers"], serde_json::json!([]), "{ctx}: closers");
        assert_eq!(inspect["tornTail"], Value::Null, "{ctx}: torn tail");
        let counts: BTreeMap<String, u64> = inspect["countsByType"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
            .collect();
        assert_eq!(counts, type_counts(&events), "{ctx}: counts by type");
        let turns: Vec<Value> = inspect["turns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| serde_json::json!({"start": t["start"], "end": t["end"], "turn": t["turn"]}))
            .collect();
        assert_eq!(Value::Array(turns), expected["turns"], "{ctx}: turns");
        assert_eq!(
            inspect["surface"]["nodes"].as_u64(),
            session["surfaceNodes"].as_array().map(|n| n.len() as u64),
            "{ctx}: surface nodes"
        );
        assert_eq!(
            inspect["surface"]["replaceGeneration"], session["replaceGeneration"],
            "{ctx}"
        );
        let replacements = session["surfaceReplacements"].as_array().unwrap();
        let compactions = inspect["compactions"].as_array().unwrap();
        assert_eq!(compactions.len(), replacements.len(), "{ctx}: compactions");
        for (c, r) in compactions.iter().zip(replacements) {
            assert_eq!(c["seq"], r["seq"], "{ctx}");
            assert_eq!(c["shadowedSeqs"], r["shadowedSeqs"], "{ctx}");
        }
        assert_eq!(
            inspect["lineage"]["parentSession"],
            expected["header"]
                .get("parentSession")
                .cloned()
                .unwrap_or(Value::Null),
            "{ctx}: lineage"
        );

        // messages: exactly the reference's derived messages
        let messages = with(&["messages", id, "--json"]).json();
        let derived = session["deriveMessages"]["value"].as_array().unwrap();
        let got: Vec<Value> = messages["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["message"].clone())
            .collect();
        assert_eq!(&got, derived, "{ctx}: derived messages");
        assert_eq!(
            messages["count"].as_u64(),
            Some(derived.len() as u64),
            "{ctx}"
        );

        // messages as of a seq: the first turn's end (a prefix rebuild)
        let first_end = expected["turns"][0]["end"].as_u64();
        if let Some(end) = first_end.filter(|_| extras && key == "jsonl") {
            let at = end.to_string();
            let prefix = with(&["messages", id, "--json", "--at", &at]).json();
            let n = prefix["count"].as_u64().unwrap();
            assert!(
                n <= derived.len() as u64,
                "{ctx}: prefix has at most all messages"
            );
            for m in prefix["messages"].as_array().unwrap() {
                assert!(
                    m["seq"].as_u64().unwrap() <= end,
                    "{ctx}: message after --at"
                );
            }
        }

        // header: the folded request header and context
        let header = with(&["header", id, "--json"]).json();
        assert_eq!(
            header["header"], session["requestHeader"]["value"],
            "{ctx}: request header"
        );
        assert_eq!(
            header["context"], session["requestContext"]["value"],
            "{ctx}: request context"
        );

        // transcript: one entry per surface event, replacements marked
        let transcript = with(&["transcript", id, "--json"]).json();
        let entries = transcript["entries"].as_array().unwrap();
        let surface_events: Vec<&Value> = events
            .iter()
            .filter(|e| e.get("surfaceOp").is_some())
            .collect();
        assert_eq!(
            entries.len(),
            surface_events.len(),
            "{ctx}: transcript entries"
        );
        for (entry, event) in entries.iter().zip(&surface_events) {
            assert_eq!(entry["seq"], event["seq"], "{ctx}");
            let kind = if event["surfaceOp"] == "append" {
                "message"
            } else {
                "replacement"
            };
            assert_eq!(entry["kind"], kind, "{ctx}");
        }

        // stats
        let stats = with(&["stats", id, "--json"]).json();
        assert_eq!(
            stats["events"].as_u64(),
            Some(events.len() as u64),
            "{ctx}: stats events"
        );
        assert_eq!(
            stats["fileBytes"], expected["writer"][key]["bytes"],
            "{ctx}: bytes on disk"
        );
        assert_eq!(
            stats["plaintextBytes"], expected["writer"]["jsonl"]["bytes"],
            "{ctx}: plaintext bytes"
        );
        let by_type: u64 = stats["byType"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["count"].as_u64().unwrap())
            .sum();
        assert_eq!(by_type, events.len() as u64, "{ctx}");
        if key == "zstd" {
            assert_eq!(
                stats["frames"].as_u64(),
                expected["writer"]["zstd"]["frames"]
                    .as_array()
                    .map(|f| f.len() as u64),
                "{ctx}: frames"
            );
        }

        // nothing changed the file
        let after = std::fs::read(&placed).unwrap();
        assert_eq!(
            after,
            std::fs::read(dir.join(file)).unwrap(),
            "{ctx}: read commands never write"
        );
        if !extras || key != "jsonl" {
            continue;
        }

        // the same through a file path and a session directory
        let by_file = run(&["inspect", placed.to_str().unwrap(), "--json"])
            .ok()
            .json();
        assert_eq!(
            by_file["eventCount"], persisted["eventCount"],
            "{ctx}: by file"
        );
        let dir_arg = placed.parent().unwrap().to_str().unwrap();
        let by_dir = run(&["messages", dir_arg, "--json"]).ok().json();
        assert_eq!(by_dir["count"], messages["count"], "{ctx}: by directory");

        // human output works and is plain (not a terminal)
        let human = with(&["inspect", id]);
        assert!(human.stdout.contains(id), "{ctx}");
        assert!(
            !human.stdout.contains('\x1b'),
            "{ctx}: no colour off a terminal"
        );
    }
}

#[test]
fn every_read_command_on_every_log_in_both_encodings() {
    let names: Vec<(usize, String)> = log_names().into_iter().enumerate().collect();
    parallel(&names, 3, |(i, name)| check_log(*i, name));
}

fn check_fork_and_convert(name: &str) {
    let dir = corpus().join("logs").join(name);
    let expected = read_json(&dir.join("expected.json"));
    let id = expected["sessionId"].as_str().unwrap();
    let event_count = expected["eventCount"].as_u64().unwrap();
    let (root, _) = stage(&dir, &expected, "jsonl", "session.jsonl");
    let base = ["--root", root.str(), "--compression", "none"];
    let cmd = |extra: &[&str]| {
        let mut a: Vec<&str> = base.to_vec();
        a.extend_from_slice(extra);
        run(&a)
    };

    // convert raw -> zstd into another root: the reference's zstd frames, byte for byte in
    // plaintext.
    let dest = Temp::new("convert");
    let converted = cmd(&["convert", id, dest.str(), "--json"]).ok().json();
    assert_eq!(converted["verified"], true, "{name}");
    assert_eq!(converted["logicalTextIdentical"], true, "{name}");
    assert_eq!(converted["events"].as_u64(), Some(event_count), "{name}");
    let rel = expected["writer"]["relativePath"]["zstd"].as_str().unwrap();
    let written = dest.path().join(rel);
    assert_eq!(
        unzstd(&written),
        unzstd(&dir.join("session.jsonl.zstd")),
        "{name}: converted plaintext"
    );
    let frames = run(&["--root", dest.str(), "stats", id, "--json"])
        .ok()
        .json();
    assert_eq!(
        frames["frames"].as_u64(),
        expected["writer"]["zstd"]["frames"]
            .as_array()
            .map(|f| f.len() as u64),
        "{name}: one frame per batch"
    );
    // and back: zstd -> raw reproduces the plain file exactly
    let back = Temp::new("convert-back");
    run(&["--root", dest.str(), "convert", id, back.str()]).ok();
    assert_eq!(
        std::fs::read(
            back.path().join(
                expected["writer"]["relativePath"]["jsonl"]
                    .as_str()
                    .unwrap()
            )
        )
        .unwrap(),
        std::fs::read(dir.join("session.jsonl")).unwrap(),
        "{name}: round trip to raw"
    );

    // fork: the reference's fork cases that apply to a stored log
    let forks_path = dir.join("forks.json");
    if !forks_path.is_file() {
        return;
    }
    let forks = read_json(&forks_path);
    let (mut accepted, mut refused) = (0, 0);
    for case in forks["cases"].as_array().unwrap() {
        let Some(b) = case["boundary"].as_u64() else {
            continue;
        };
        if b >= event_count || case["childSessionId"] == id {
            continue;
        }
        // One accepted and one refused case per log keep the run short.
        let counter = if case["result"]["ok"] == true {
            &mut accepted
        } else {
            &mut refused
        };
        if *counter >= 1 {
            continue;
        }
        *counter += 1;
        let child = case["childSessionId"].as_str().unwrap();
        let at = b.to_string();
        let r = cmd(&["fork", id, "--at", &at, "--id", child, "--json"]);
        let result = &case["result"];
        if result["ok"] == true {
            let got = r.ok().json();
            assert_eq!(
                got["child"]["seedLength"], result["header"]["seedLength"],
                "{name}: {child}"
            );
            assert_eq!(got["child"]["events"], result["seq"], "{name}: {child}");
            assert_eq!(got["child"]["header"]["parentSession"], id, "{name}");
        } else {
            assert_eq!(r.code, 1, "{name}: {child}: {}", r.stderr);
            let err = r.json_error();
            assert_eq!(err["name"], result["error"]["name"], "{name}: {child}");
            assert_eq!(err["code"], result["error"]["code"], "{name}: {child}");
            assert_eq!(
                err["message"], result["error"]["message"],
                "{name}: {child}"
            );
        }
    }
    let listed = cmd(&["list", "--count", "--json"]).ok().json();
    let sessions = listed["sessions"].as_array().unwrap();
    let parent = sessions.iter().find(|s| s["id"] == id).unwrap();
    assert_eq!(
        parent["events"].as_u64(),
        Some(event_count),
        "{name}: list events"
    );
    for s in sessions.iter().filter(|s| s["id"] != id) {
        assert_eq!(s["parentSession"], id, "{name}: list lineage");
        assert!(
            s["events"].as_u64().is_some(),
            "{name}: the fork child is stored"
        );
    }
}

#[test]
fn fork_convert_and_list_on_every_log() {
    parallel(&log_names(), 3, |name| check_fork_and_convert(name));
}

/// Every crash variant of the corpus index.
fn crash_dirs() -> Vec<PathBuf> {
    corpus_index()
        .map(|c| c.crash_variants())
        .unwrap_or_default()
}

fn check_crash(dir: &Path) {
    let expected = read_json(&dir.join("expected.json"));
    for (key, file, compression) in ENCODINGS {
        let ctx = format!("{} ({key})", dir.display());
        let e = &expected[key];
        let root = Temp::new("crash");
        let placed = place(
            &dir.join(file),
            root.path(),
            e["relativePath"].as_str().unwrap(),
        );
        let id = e["inspect"]["meta"]["id"].as_str().unwrap();
        let base = ["--root", root.str(), "--compression", compression];
        let cmd = |extra: &[&str]| {
            let mut a: Vec<&str> = base.to_vec();
            a.extend_from_slice(extra);
            run(&a)
        };
        let inspect_events = events_of(&expected, &e["inspect"]["events"]);
        let stored = events_of(&expected, &e["readFrom"]["events"]);
        let report = cmd(&["inspect", id, "--json"]).ok().json();
        assert_eq!(report["eventCount"], e["inspect"]["eventCount"], "{ctx}");
        assert_eq!(
            report["storedEventCount"].as_u64(),
            Some(stored.len() as u64),
            "{ctx}"
        );
        let closers = report["closers"].as_array().unwrap();
        assert_eq!(
            closers.as_slice(),
            &inspect_events[stored.len()..],
            "{ctx}: closers"
        );
        // A repair that truncates below the file's length cut a torn tail.
        let torn = e["afterLoad"]["truncatedTo"]
            .as_u64()
            .is_some_and(|t| Some(t) != e["file"]["bytes"].as_u64());
        assert_eq!(!report["tornTail"].is_null(), torn, "{ctx}: torn tail");
        if torn {
            assert_eq!(
                report["tornTail"]["truncateTo"], e["afterLoad"]["truncatedTo"],
                "{ctx}"
            );
        }
        if !closers.is_empty() {
            assert!(!report["openTurn"].is_null(), "{ctx}: an open turn");
        }
        // inspect did not write
        assert_eq!(
            std::fs::read(&placed).unwrap(),
            std::fs::read(dir.join(file)).unwrap(),
            "{ctx}"
        );

        // a dry run does not write either (plain encoding, to keep the run short)
        if key == "jsonl" {
            let dry = cmd(&["repair", id, "--dry-run", "--json"]).ok().json();
            assert_eq!(dry["committed"], false, "{ctx}");
            assert_eq!(
                std::fs::read(&placed).unwrap(),
                std::fs::read(dir.join(file)).unwrap(),
                "{ctx}"
            );
        }

        // repair commits exactly what the reference's load() commits
        let repaired = cmd(&["repair", id, "--json"]).ok().json();
        let changed = e["afterLoad"]["changed"] == true;
        assert_eq!(repaired["committed"], changed, "{ctx}: committed");
        assert_eq!(
            repaired["eventCountAfter"].as_u64().is_some(),
            changed,
            "{ctx}"
        );
        let after_name = format!("after-load.{file}");
        let after = dir.join(&after_name);
        if changed {
            if key == "jsonl" {
                assert_eq!(
                    std::fs::read(&placed).unwrap(),
                    std::fs::read(&after).unwrap(),
                    "{ctx}: after repair"
                );
            } else {
                assert_eq!(
                    unzstd(&placed),
                    unzstd(&after),
                    "{ctx}: after repair (plaintext)"
                );
            }
        } else {
            assert_eq!(
                std::fs::read(&placed).unwrap(),
                std::fs::read(dir.join(file)).unwrap(),
                "{ctx}"
            );
        }
        if key != "jsonl" {
            continue;
        }
        let again = cmd(&["inspect", id, "--json"]).ok().json();
        assert_eq!(again["closers"], serde_json::json!([]), "{ctx}: repaired");
        assert_eq!(again["tornTail"], Value::Null, "{ctx}: repaired");
        assert_eq!(again["eventCount"], e["load"]["eventCount"], "{ctx}");
    }
}

#[test]
fn crash_variants_inspect_shows_closers_and_repair_commits_them() {
    parallel(&crash_dirs(), 3, |d| check_crash(d));
}

#[test]
fn verify_passes_on_corpus_logs_and_crash_variants() {
    if corpus_index().is_none() {
        return;
    }
    // Files anywhere (not at their layout path) are verified through a staged copy.
    let dir = corpus().join("logs/acp.bash-tool-turn__session");
    let r = run(&["verify", "--json", "--strict", dir.to_str().unwrap()])
        .ok()
        .json();
    let files = r["files"].as_array().unwrap();
    assert_eq!(
        files.len(),
        2 + 2 * 11,
        "both encodings of the log and its 11 crash variants"
    );
    assert_eq!(r["failed"], 0);
    for f in files {
        assert_eq!(f["ok"], true, "{f}");
        let names: Vec<&str> = f["checks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        for expected in [
            "seqs_contiguous",
            "surface_matches_fold",
            "incremental_derivation",
            "transcript_holds_appends",
            "replay_marker",
            "closers_balance",
            "persistence_round_trip",
            "turn_invariant",
        ] {
            assert!(names.contains(&expected), "{expected} missing: {names:?}");
        }
    }
    let human = run(&["verify", dir.join("session.jsonl").to_str().unwrap()]).ok();
    assert!(
        human.stdout.contains("1 passed, 0 failed"),
        "{}",
        human.stdout
    );
}
