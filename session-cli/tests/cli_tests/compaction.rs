//! `sessionctl compactions`, `diff` and `uncompact` end to end, on every corpus log with a
//! compaction (plain and zstd) and on a generated session with three nested compactions
//! (`gen_session.py --compact-chars 40000`).
//!
//! For each compaction `k`, the child's messages must be the parent's current messages with
//! `k`'s replacing message put back as the messages it shadowed (read from `messages --at
//! k-1`), unless a later compaction covers `k` (then the view is unchanged); `--all` must
//! give every original message of the transcript. Every child passes `verify --strict`, the
//! read-only commands write nothing, and the parent's file is never modified.

#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{Temp, corpus, corpus_index, place, read_json, run};
use serde_json::Value;

fn messages(root: &str, id: &str, at: Option<u64>) -> Vec<(u64, Value)> {
    let mut args = vec!["--root", root, "--json", "messages", id];
    let at = at.map(|a| a.to_string());
    if let Some(a) = &at {
        args.extend(["--at", a]);
    }
    let doc = run(&args).ok().json();
    doc["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["seq"].as_u64().unwrap(), m["message"].clone()))
        .collect()
}

fn seq_list(v: &Value) -> Vec<u64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_u64().unwrap())
        .collect()
}

/// Every file under `root`, with its bytes.
fn snapshot(root: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let bytes = std::fs::read(&path).unwrap();
                out.push((path, bytes));
            }
        }
    }
    out.sort();
    out
}

/// Runs every check of the module docs on session `id` of `root`; returns the number of
/// compactions it has.
fn check_session(root: &Path, id: &str) -> usize {
    let r = root.to_str().unwrap();
    let before = snapshot(root);
    let doc = run(&["--root", r, "--json", "compactions", id]).ok().json();
    assert_eq!(doc["schema"], "sessionctl.compactions/1");
    let list = doc["compactions"].as_array().unwrap().clone();
    assert_eq!(doc["count"].as_u64().unwrap() as usize, list.len());
    assert!(!list.is_empty(), "{id} has no compaction");
    // The human form names every compaction.
    let text = run(&["--root", r, "compactions", id]).ok().stdout;
    for c in &list {
        assert!(text.contains(&format!("seq {} ·", c["seq"])), "{text}");
    }
    let current = messages(r, id, None);
    for c in &list {
        let k = c["seq"].as_u64().unwrap();
        let shadowed = seq_list(&c["shadowed"]);
        // diff across the replace: what left is what it shadowed, and it entered.
        let (from, to) = (k - 1, k);
        let diff = run(&[
            "--root",
            r,
            "--json",
            "diff",
            id,
            "--from",
            &from.to_string(),
            "--to",
            &to.to_string(),
        ])
        .ok()
        .json();
        let left: Vec<u64> = diff["left"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["seq"].as_u64().unwrap())
            .collect();
        let visible_before: Vec<u64> = messages(r, id, Some(from)).iter().map(|m| m.0).collect();
        let left_expected: Vec<u64> = shadowed
            .iter()
            .copied()
            .filter(|s| visible_before.contains(s))
            .collect();
        let left_with_message: Vec<u64> = left
            .iter()
            .copied()
            .filter(|s| visible_before.contains(s))
            .collect();
        assert_eq!(left_with_message, left_expected, "diff {from}..{to}");
        for l in diff["left"].as_array().unwrap() {
            assert_eq!(l["replacedBy"].as_u64(), Some(k));
        }
        let entered = diff["entered"].as_array().unwrap();
        assert_eq!(entered.len(), 1, "{diff}");
        assert_eq!(entered[0]["seq"].as_u64(), Some(k));
        assert_eq!(entered[0]["replaces"], c["shadowed"]);
        assert_eq!(
            diff["before"]["messages"].as_u64(),
            c["before"]["messages"].as_u64()
        );
        assert_eq!(
            diff["after"]["messages"].as_u64(),
            c["after"]["messages"].as_u64()
        );

        // uncompact k.
        let child = format!("undo-{k}");
        let out = run(&[
            "--root",
            r,
            "--json",
            "uncompact",
            id,
            "--compaction",
            &k.to_string(),
            "--id",
            &child,
        ])
        .ok()
        .json();
        assert_eq!(out["schema"], "sessionctl.uncompact/1");
        assert_eq!(out["undone"], serde_json::json!([k]));
        assert_eq!(out["child"]["seedLength"].as_u64(), Some(k));
        assert_eq!(out["child"]["header"]["parentSession"], id);
        let got = messages(r, &child, None);
        let expected: Vec<(u64, Value)> = if c["coveredBy"].is_null() {
            let originals = messages(r, id, Some(k - 1));
            let mut v = Vec::new();
            for (seq, m) in &current {
                if *seq == k {
                    v.extend(
                        originals
                            .iter()
                            .filter(|o| shadowed.contains(&o.0))
                            .cloned(),
                    );
                } else {
                    v.push((*seq, m.clone()));
                }
            }
            v
        } else {
            current.clone()
        };
        assert_eq!(got, expected, "messages of {child}");
        let left_over = run(&["--root", r, "--json", "compactions", &child])
            .ok()
            .json();
        assert_eq!(
            left_over["count"].as_u64().unwrap() as usize,
            list.len() - 1
        );
    }
    // --all: every original message, in log order.
    let all_id = "undo-all";
    run(&[
        "--root",
        r,
        "--json",
        "uncompact",
        id,
        "--all",
        "--id",
        all_id,
    ])
    .ok();
    let transcript = run(&["--root", r, "--json", "transcript", id]).ok().json();
    let originals: Vec<(u64, Value)> = transcript["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "message" && !e["message"].is_null())
        .map(|e| (e["seq"].as_u64().unwrap(), e["message"].clone()))
        .collect();
    assert_eq!(messages(r, all_id, None), originals);
    let none = run(&["--root", r, "--json", "compactions", all_id])
        .ok()
        .json();
    assert_eq!(none["count"], 0);
    // Every child verifies; the parent and every file it had are unchanged.
    let verify = run(&["--root", r, "verify", "--strict", r]).ok();
    assert!(verify.stdout.contains("0 failed"), "{}", verify.stdout);
    let after = snapshot(root);
    for (path, bytes) in &before {
        let now = after.iter().find(|(p, _)| p == path).map(|(_, b)| b);
        assert_eq!(now, Some(bytes), "{} changed", path.display());
    }
    list.len()
}

/// Corpus logs whose plain file holds a surface replace.
fn corpus_logs_with_compactions() -> Vec<String> {
    let Some(index) = corpus_index() else {
        return Vec::new();
    };
    let names: Vec<String> = index
        .index
        .logs
        .iter()
        .map(|l| l.name.clone())
        .filter(|name| {
            let path = corpus().join("logs").join(name).join("session.jsonl");
            std::fs::read_to_string(path).is_ok_and(|t| t.contains(r#""op":"replace""#))
        })
        .collect();
    assert!(!names.is_empty(), "the corpus has no log with a compaction");
    names
}

#[test]
fn corpus_logs_with_a_compaction() {
    for name in corpus_logs_with_compactions() {
        let dir = corpus().join("logs").join(&name);
        let expected = read_json(&dir.join("expected.json"));
        for (key, file) in [("jsonl", "session.jsonl"), ("zstd", "session.jsonl.zstd")] {
            let root = Temp::new("compaction-corpus");
            let rel = expected["writer"]["relativePath"][key].as_str().unwrap();
            place(&dir.join(file), root.path(), rel);
            let id = expected["sessionId"].as_str().unwrap().to_owned();
            assert!(check_session(root.path(), &id) >= 1, "{name} ({key})");
        }
    }
}

#[test]
fn a_generated_session_with_three_nested_compactions() {
    const ALLOW_SKIP: &str = "SESSION_TEST_ALLOW_NO_PYTHON";
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/tools/gen_session.py");
    let root = Temp::new("compaction-gen");
    let generated = Command::new("python3")
        .arg(&script)
        .args([
            "--events",
            "30000",
            "--seed",
            "1",
            "--compact-chars",
            "40000",
        ])
        .args(["--compression", "none", "--quiet", "--out"])
        .arg(root.path())
        .status();
    if !matches!(&generated, Ok(s) if s.success()) {
        let why = format!("python3 {} did not run: {generated:?}", script.display());
        conformance::skip::unless_allowed(ALLOW_SKIP, why, || false);
        return;
    }
    let _ = std::fs::remove_file(root.path().join("gen-manifest.json"));
    let listed = run(&["--root", root.str(), "--json", "list"]).ok().json();
    let id = listed["sessions"][0]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{listed}"))
        .to_owned();
    assert_eq!(check_session(root.path(), &id), 3);
    // The three compactions nest: each one's range starts at the previous summary.
    let doc = run(&["--root", root.str(), "--json", "compactions", &id])
        .ok()
        .json();
    let list = doc["compactions"].as_array().unwrap();
    assert_eq!(list[1]["range"]["start"], list[0]["seq"]);
    assert_eq!(list[0]["coveredBy"], list[1]["seq"]);
    assert_eq!(list[1]["coveredBy"], list[2]["seq"]);
    assert!(list[2]["coveredBy"].is_null());
}

#[test]
fn refusals_name_what_is_wrong() {
    let root = Temp::new("compaction-refusals");
    let r = root.str();
    let drafts = concat!(
        r#"{"type":"user/message","data":{"id":"m1","role":"user","content":[{"type":"text","text":"hello"}],"source":{"kind":"user"}},"surfaceOp":"append"}"#,
        "\n",
        r#"{"type":"user/message","data":{"id":"m2","role":"user","content":[{"type":"text","text":"summary"}],"source":{"kind":"user"}},"surfaceOp":{"op":"replace","start":0,"end":0},"sourceEventSeqs":[0]}"#,
        "\n",
        r#"{"flush":true}"#,
        "\n"
    );
    crate::common::run_in(
        &["--root", r, "append", "s", "--create", "--cwd", "/w"],
        Some(drafts),
    )
    .ok();
    let not_replace = run(&[
        "--root",
        r,
        "uncompact",
        "s",
        "--compaction",
        "0",
        "--id",
        "c",
    ]);
    assert_eq!(not_replace.code, 1, "{}", not_replace.stderr);
    assert!(
        not_replace
            .stderr
            .contains("seq 0 of session \"s\" is not a surface replace"),
        "{}",
        not_replace.stderr
    );
    let both = run(&[
        "--root",
        r,
        "uncompact",
        "s",
        "--compaction",
        "1",
        "--all",
        "--id",
        "c",
    ]);
    assert_eq!(both.code, 2, "{}", both.stderr);
    let no_id = run(&["--root", r, "uncompact", "s", "--all"]);
    assert_eq!(no_id.code, 2, "{}", no_id.stderr);
    let same = run(&["--root", r, "uncompact", "s", "--all", "--id", "s"]);
    assert_eq!(same.code, 1, "{}", same.stderr);
    assert!(same.stderr.contains("already exists"), "{}", same.stderr);
    let reversed = run(&["--root", r, "diff", "s", "--from", "1", "--to", "0"]);
    assert_eq!(reversed.code, 2, "{}", reversed.stderr);
    let missing = run(&["--root", r, "diff", "s", "--from", "0"]);
    assert_eq!(missing.code, 2, "{}", missing.stderr);
    let past = run(&["--root", r, "diff", "s", "--from", "0", "--to", "9"]);
    assert_eq!(past.code, 1, "{}", past.stderr);
    assert!(
        past.stderr.contains("seq 9 does not exist"),
        "{}",
        past.stderr
    );
    // A refused uncompact wrote nothing.
    let listed = run(&["--root", r, "--json", "list"]).ok().json();
    assert_eq!(listed["sessions"].as_array().unwrap().len(), 1, "{listed}");
}
