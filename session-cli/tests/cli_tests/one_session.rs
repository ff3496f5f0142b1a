//! A command on one session of a large JSONL root opens only that session's files: problems of
//! other sessions (an artifact of the other encoding, a garbage log, a stray flat-file log in a
//! project directory) do not affect it, while its own still refuse it, and `list` still checks
//! every entry.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

use std::path::{Path, PathBuf};

use crate::common::{Temp, run};

const BODY: &str = concat!(
    r#"{"type":"turn/start","seq":0,"time":0,"data":{"turn":1}}"#,
    "\n",
    r#"{"type":"turn/end","seq":1,"time":0,"data":{"turn":1,"reason":{"kind":"completed"}}}"#,
    "\n",
);

/// A plain log of session `s<i>` in project `/p<i % 5>`.
fn plant(root: &Path, i: usize) -> PathBuf {
    let p = i % 5;
    let path = root
        .join(format!("--p{p}--"))
        .join(format!("s{i}"))
        .join("session.jsonl");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let header = format!(
        r#"{{"type":"session","version":0,"id":"s{i}","createdAt":1000,"cwd":"/p{p}","delegationDepth":0}}"#
    );
    std::fs::write(&path, format!("{header}\n{BODY}")).unwrap();
    path
}

/// A root of 500 plain sessions.
fn many(temp: &Temp) -> (PathBuf, Vec<PathBuf>) {
    let root = temp.path().join("root");
    let logs = (0..500).map(|i| plant(&root, i)).collect();
    (root, logs)
}

fn sessionctl(root: &Path, args: &[&str]) -> crate::common::Run {
    let root = root.to_str().unwrap();
    run(&[&["--root", root, "--compression", "none"][..], args].concat())
}

#[test]
fn problems_of_other_sessions_do_not_affect_a_command_on_one() {
    let temp = Temp::new("one-others");
    let (root, logs) = many(&temp);
    // Another session holds a file of the other encoding, another one is garbage, and a
    // project directory holds a stray flat-file log.
    let foreign = logs[7].with_file_name("session.jsonl.zstd");
    std::fs::write(&foreign, b"not zstd").unwrap();
    std::fs::write(&logs[9], b"{garbage\n").unwrap();
    let stray = root.join("--p1--").join("stray.jsonl");
    std::fs::write(&stray, b"{}\n").unwrap();
    for args in [
        &["inspect", "s42", "--json"][..],
        &["messages", "s42", "--json"],
        &["transcript", "s42", "--json"],
        &["stats", "s42", "--json"],
        &["header", "s42", "--json"],
        &["repair", "s42", "--dry-run", "--json"],
    ] {
        let r = sessionctl(&root, args);
        assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
    }
    let inspect = sessionctl(&root, &["inspect", "s42", "--json"]).ok().json();
    assert_eq!(inspect["id"], "s42");
    assert_eq!(inspect["storedEventCount"], 2, "{inspect}");
    // Listing reads every entry, and still refuses the root.
    let list = sessionctl(&root, &["list", "--json"]);
    assert_eq!(list.code, 1, "{}", list.stdout);
    let message = list.json_error()["message"].as_str().unwrap().to_owned();
    assert!(
        message.contains(&foreign.display().to_string())
            || message.contains(&stray.display().to_string()),
        "{message}"
    );
}

#[test]
fn the_session_s_own_problems_still_refuse_it() {
    let temp = Temp::new("one-own");
    let (root, logs) = many(&temp);
    // The other encoding beside the session's own log.
    let foreign = logs[42].with_file_name("session.jsonl.zstd");
    std::fs::write(&foreign, b"not zstd").unwrap();
    let r = sessionctl(&root, &["inspect", "s42", "--json"]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert_eq!(
        r.json_error()["message"],
        format!(
            "session artifact \"{}\" uses .jsonl.zstd, but this backend is configured for \
             compression \"none\"; use a separate root or select the matching compression mode",
            foreign.display()
        )
    );
    std::fs::remove_file(&foreign).unwrap();
    // A flat-file log of the id in a project directory.
    let flat = root.join("--p3--").join("s42.jsonl");
    std::fs::write(&flat, b"{}\n").unwrap();
    let r = sessionctl(&root, &["inspect", "s42", "--json"]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert_eq!(r.json_error()["kind"], "format_unsupported");
    std::fs::remove_file(&flat).unwrap();
    // A stale temporary file of an interrupted publication of this session is swept; that of
    // another session is not touched.
    let own_tmp = logs[42].with_file_name("session.jsonl.0123456789ab.tmp");
    let other_tmp = logs[43].with_file_name("session.jsonl.0123456789ab.tmp");
    std::fs::write(&own_tmp, b"partial").unwrap();
    std::fs::write(&other_tmp, b"partial").unwrap();
    sessionctl(&root, &["inspect", "s42"]).ok();
    assert!(
        !own_tmp.exists(),
        "the session's stale temporary file is removed"
    );
    assert!(
        other_tmp.exists(),
        "another session's directory is not read"
    );
}

#[test]
fn inspect_names_the_forks_only_with_children() {
    let temp = Temp::new("one-children");
    let (root, _) = many(&temp);
    sessionctl(&root, &["fork", "s42", "--id", "s42-child"]).ok();
    let plain = sessionctl(&root, &["inspect", "s42", "--json"]).ok().json();
    assert_eq!(plain["lineage"]["children"], serde_json::Value::Null);
    let with = sessionctl(&root, &["inspect", "s42", "--children", "--json"])
        .ok()
        .json();
    assert_eq!(
        with["lineage"]["children"],
        serde_json::json!(["s42-child"])
    );
    let human = sessionctl(&root, &["inspect", "s42", "--children"]).ok();
    assert!(
        human.stdout.contains("forks: s42-child"),
        "{}",
        human.stdout
    );
}
