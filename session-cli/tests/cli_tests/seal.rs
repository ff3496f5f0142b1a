//! `seal`: a closed zstd log is rewritten into one frame per turn; open turns and plain logs
//! are handled as documented.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

use std::fmt::Write as _;

use crate::common::{Temp, run, run_in};

/// `turns` turns, with a flush barrier after every event (one zstd frame per event).
fn drafts(turns: u64, close_last: bool) -> String {
    let mut out = String::new();
    for n in 1..=turns {
        writeln!(out, "{{\"type\":\"turn/start\",\"data\":{{\"turn\":{n}}}}}").unwrap();
        out.push_str("{\"flush\":true}\n");
        writeln!(
            out,
            "{{\"type\":\"user/message\",\"data\":{{\"id\":\"u{n}\",\"role\":\"user\",\"content\":[{{\"type\":\"text\",\"text\":\"hello {n}\"}}],\"source\":{{\"kind\":\"user\"}}}},\"surfaceOp\":\"append\"}}"
        )
        .unwrap();
        out.push_str("{\"flush\":true}\n");
        if n < turns || close_last {
            writeln!(
            out,
            "{{\"type\":\"turn/end\",\"data\":{{\"turn\":{n},\"reason\":{{\"kind\":\"completed\"}}}}}}"
        )
        .unwrap();
            out.push_str("{\"flush\":true}\n");
        }
    }
    out
}

fn create(root: &Temp, id: &str, text: &str, compression: &str) {
    run_in(
        &[
            "--root",
            root.str(),
            "--compression",
            compression,
            "append",
            id,
            "--create",
            "--cwd",
            "/work/notes",
        ],
        Some(text),
    )
    .ok();
}

fn transcript(root: &Temp, id: &str) -> String {
    run(&["--root", root.str(), "transcript", id, "--json"])
        .ok()
        .stdout
}

/// The one `session.jsonl.zstd` under `dir`.
fn zstd_log(dir: &std::path::Path) -> std::path::PathBuf {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.file_name().is_some_and(|n| n == "session.jsonl.zstd") {
                found.push(path);
            }
        }
    }
    assert_eq!(found.len(), 1, "{found:?}");
    found.pop().unwrap()
}

#[test]
fn seal_reports_and_keeps_the_session() {
    let root = Temp::new("seal");
    create(&root, "notes", &drafts(2, true), "zstd");
    let before = transcript(&root, "notes");
    let r = run(&["--root", root.str(), "seal", "notes", "--json"]).ok();
    let doc = r.json();
    assert_eq!(doc["schema"], "sessionctl.seal/1");
    assert_eq!(doc["id"], "notes");
    assert_eq!(doc["rewritten"], true);
    // Header frame plus one frame per event before; header plus one per turn after.
    assert_eq!(doc["before"]["frames"], 7);
    assert_eq!(doc["after"]["frames"], 3);
    let (b, a) = (
        doc["before"]["bytes"].as_u64().unwrap(),
        doc["after"]["bytes"].as_u64().unwrap(),
    );
    assert!(a < b, "{b} -> {a}");
    let ratio = doc["ratio"].as_f64().unwrap();
    #[allow(clippy::cast_precision_loss)]
    let expected = b as f64 / a as f64;
    assert!((ratio - expected).abs() < 0.001, "{ratio} vs {expected}");
    assert_eq!(transcript(&root, "notes"), before);

    // Sealing again is a no-op that says so, in both outputs, and leaves the file as it is.
    let file = zstd_log(root.path());
    let sealed = std::fs::read(&file).unwrap();
    let r = run(&["--root", root.str(), "--no-color", "seal", "notes"]).ok();
    assert!(
        r.stdout.starts_with("notes is already sealed: 3 frames, "),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("nothing to rewrite"), "{}", r.stdout);
    let doc = run(&["--root", root.str(), "seal", "notes", "--json"])
        .ok()
        .json();
    assert_eq!(doc["rewritten"], false);
    assert_eq!(doc["before"], doc["after"]);
    assert_eq!(doc["after"]["frames"], 3);
    assert_eq!(std::fs::read(&file).unwrap(), sealed);
    assert_eq!(transcript(&root, "notes"), before);
}

#[test]
fn seal_refuses_an_open_turn() {
    let root = Temp::new("seal-open");
    create(&root, "open", &drafts(2, false), "zstd");
    let r = run(&["--root", root.str(), "seal", "open", "--json"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    let err = r.json_error();
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("cannot seal session \"open\": turn 2 is open (seq 3)"),
        "{err}"
    );
}

#[test]
fn seal_of_a_plain_log_changes_nothing() {
    let root = Temp::new("seal-plain");
    create(&root, "plain", &drafts(1, true), "none");
    let file = root.path().join("--work-notes--/plain/session.jsonl");
    let before = std::fs::read(&file).unwrap();
    let r = run(&["--root", root.str(), "seal", "plain", "--json"]).ok();
    let doc = r.json();
    assert_eq!(doc["rewritten"], false);
    assert_eq!(doc["compression"], "none");
    assert_eq!(
        doc["before"]["bytes"].as_u64().unwrap(),
        before.len() as u64
    );
    assert_eq!(doc["after"]["frames"], 0);
    assert_eq!(std::fs::read(&file).unwrap(), before);
    let r = run(&["--root", root.str(), "seal", "plain"]).ok();
    assert!(r.stdout.contains("nothing to seal"), "{}", r.stdout);
}

#[test]
fn seal_usage() {
    let r = run(&["seal"]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("`seal` needs SESSION"), "{}", r.stderr);
}
