//! `demo`: a real writer process dies mid-turn; the repair, surface, transcript and fork that
//! follow; re-running is safe; every read command works on the result.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

use crate::common::{Temp, run};

fn seq_of(events_json: &serde_json::Value, pred: impl Fn(&serde_json::Value) -> bool) -> u64 {
    events_json
        .as_array()
        .unwrap()
        .iter()
        .find(|t| pred(t))
        .and_then(|t| t["start"].as_u64())
        .unwrap()
}

// persistence §7.14 #2 (intent): a writer killed with SIGKILL after its tool checkpoint loads
// with `assistant/message`, `tool/call` and a synthetic `TOOL_OUTCOME_UNKNOWN` result ("Do not
// retry blindly."); the second requested call gets `TOOL_NOT_STARTED`.
#[test]
fn demo_crashes_repairs_and_forks() {
    let root = Temp::new("demo");
    let r = run(&["--root", root.str(), "demo"]).ok();
    for needle in [
        "killed by SIGKILL",
        "TOOL_OUTCOME_UNKNOWN",
        "TOOL_NOT_STARTED",
        "turn 3, interrupted",
        "compaction of",
        "refused [OPEN_TURN]",
        "demo-fork: parentSession demo",
        "inspecting it again finds nothing left to repair",
    ] {
        assert!(
            r.stdout.contains(needle),
            "missing {needle:?} in:\n{}",
            r.stdout
        );
    }
    assert!(!r.stdout.contains('\x1b'), "no colour off a terminal");

    // Re-running is safe: the previous demo sessions are replaced.
    let again = run(&["--root", root.str(), "demo"]).ok();
    assert!(
        again
            .stdout
            .contains("the previous demo sessions were removed")
    );
    assert_eq!(
        again
            .stdout
            .lines()
            .filter(|l| !l.starts_with("root "))
            .collect::<Vec<_>>(),
        r.stdout
            .lines()
            .filter(|l| !l.starts_with("root "))
            .collect::<Vec<_>>(),
        "the demo is deterministic"
    );

    let listed = run(&["--root", root.str(), "list", "--json"]).ok().json();
    let sessions = listed["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 3);
    assert_eq!(sessions[0]["id"], "demo");
    assert_eq!(sessions[1]["id"], "demo-crashed");
    assert_eq!(sessions[2]["id"], "demo-fork");
    assert_eq!(sessions[2]["parentSession"], "demo");
    assert_eq!(listed["compression"], "zstd");

    // `demo-crashed` is left as the crash left it: the tour's `repair` has work to do.
    let crashed = run(&["--root", root.str(), "inspect", "demo-crashed", "--json"])
        .ok()
        .json();
    assert_eq!(
        crashed["closers"].as_array().map(Vec::len),
        Some(4),
        "{crashed}"
    );
    let repaired = run(&["--root", root.str(), "repair", "demo-crashed"]).ok();
    assert!(
        repaired.stdout.contains("appended 4 closers"),
        "{}",
        repaired.stdout
    );

    let inspect = run(&[
        "--root",
        root.str(),
        "inspect",
        "demo",
        "--children",
        "--json",
    ])
    .ok()
    .json();
    assert_eq!(
        inspect["closers"],
        serde_json::json!([]),
        "load repaired it"
    );
    let turns = inspect["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 3);
    assert_eq!(turns[2]["reason"], "interrupted");
    assert_eq!(inspect["compactions"].as_array().unwrap().len(), 1);
    assert_eq!(
        inspect["lineage"]["children"],
        serde_json::json!(["demo-fork"])
    );
    let codes: Vec<&str> = inspect["countsByType"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert!(codes.contains(&"compaction/start"), "{codes:?}");

    // The request header changed in turn 2.
    let turn2 = seq_of(&inspect["turns"], |t| t["turn"] == 2);
    let before = run(&[
        "--root",
        root.str(),
        "header",
        "demo",
        "--json",
        "--at",
        &turn2.to_string(),
    ])
    .ok()
    .json();
    assert_eq!(before["header"]["config"]["model"], "scripted-small");
    assert_eq!(before["reason"], "initial");
    let after = run(&["--root", root.str(), "header", "demo", "--json"])
        .ok()
        .json();
    assert_eq!(after["header"]["config"]["model"], "scripted-large");
    assert_eq!(after["reason"], "change");
    assert_eq!(after["context"]["contextWindow"], 128_000);

    // The transcript keeps the compacted originals; the surface does not.
    let transcript = run(&["--root", root.str(), "transcript", "demo", "--json"])
        .ok()
        .json();
    let entries = transcript["entries"].as_array().unwrap();
    assert!(entries.iter().any(|e| e["kind"] == "replacement"));
    assert!(entries.iter().any(|e| e["shadowedBy"].is_u64()));
    let messages = run(&["--root", root.str(), "messages", "demo", "--json"])
        .ok()
        .json();
    assert!(messages["count"].as_u64().unwrap() < entries.len() as u64);
    let last_two: Vec<&str> = messages["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .take(2)
        .map(|m| {
            m["message"]["content"][0]["content"][0]["text"]
                .as_str()
                .unwrap_or("")
        })
        .collect();
    assert!(last_two[1].contains("Do not retry blindly"), "{last_two:?}");
    assert!(
        last_two[0].contains("before the Harness recorded it as started"),
        "{last_two:?}"
    );

    // Nothing is left to repair, and a fork inside turn 3 is refused with a way out.
    let repair = run(&["--root", root.str(), "repair", "demo", "--json"])
        .ok()
        .json();
    assert_eq!(repair["needed"], false);
    let turn3 = seq_of(&inspect["turns"], |t| t["turn"] == 3);
    let inside = (turn3 + 2).to_string();
    let refused = run(&[
        "--root",
        root.str(),
        "fork",
        "demo",
        "--at",
        &inside,
        "--json",
    ]);
    assert_eq!(refused.code, 1);
    let err = refused.json_error();
    assert_eq!(err["code"], "OPEN_TURN");
    assert_eq!(err["name"], "SessionForkError");
    assert!(
        err["hint"]
            .as_str()
            .unwrap()
            .contains(&format!("--at {}", turn3 - 1)),
        "{err}"
    );
    let human = run(&["--root", root.str(), "fork", "demo", "--at", &inside]);
    assert!(human.stderr.contains("[OPEN_TURN]"), "{}", human.stderr);

    // A second fork gets a minted id.
    let at = (turn3 - 1).to_string();
    let forked = run(&["--root", root.str(), "fork", "demo", "--at", &at, "--json"])
        .ok()
        .json();
    assert_eq!(forked["child"]["id"], "demo-fork-1");
    assert_eq!(forked["child"]["seedLength"], turn3);

    let stats = run(&["--root", root.str(), "stats", "demo", "--json"])
        .ok()
        .json();
    assert!(
        stats["frames"].as_u64().unwrap() > 3,
        "one frame per flushed batch"
    );
    assert!(stats["compressionRatio"].as_f64().unwrap() > 1.0);

    let verified = run(&["verify", "--strict", root.str()]).ok();
    assert!(
        verified.stdout.contains("4 passed, 0 failed"),
        "{}",
        verified.stdout
    );
}

#[test]
fn demo_in_a_plain_root() {
    let root = Temp::new("demo-plain");
    let r = run(&["--root", root.str(), "--compression", "none", "demo"]).ok();
    assert!(r.stdout.contains("TOOL_OUTCOME_UNKNOWN"));
    assert!(
        root.path()
            .join("--demo-project--/demo/session.jsonl")
            .is_file()
    );
    // The encoding of an existing root is detected.
    let listed = run(&["--root", root.str(), "list", "--json"]).ok().json();
    assert_eq!(listed["compression"], "none");
    // convert it to zstd elsewhere and back
    let z = Temp::new("demo-zstd");
    let converted = run(&["--root", root.str(), "convert", "demo", z.str(), "--json"])
        .ok()
        .json();
    assert_eq!(converted["verified"], true);
    assert_eq!(converted["to"]["compression"], "zstd");
    let a = run(&["--root", root.str(), "messages", "demo", "--json"])
        .ok()
        .json();
    let b = run(&["--root", z.str(), "messages", "demo", "--json"])
        .ok()
        .json();
    assert_eq!(a["messages"], b["messages"]);
}
