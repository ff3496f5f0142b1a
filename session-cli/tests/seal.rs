//! `seal`: a closed zstd log is rewritten into one frame per turn; open turns and plain logs
//! are handled as documented.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

mod common;

use std::fmt::Write as _;

use common::{Temp, run, run_in};

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

    // Human output; sealing again keeps the frame count.
    let r = run(&["--root", root.str(), "--no-color", "seal", "notes"]).ok();
    assert!(
        r.stdout.starts_with("sealed notes: 3 frames → 3 frames, "),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("x smaller)"), "{}", r.stdout);
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
