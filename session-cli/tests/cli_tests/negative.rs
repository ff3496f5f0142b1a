//! Corrupt files, bad paths and usage errors: the documented errors and exit codes.
//! Every case of the corpus's `negative/` directory is run through `inspect`, `repair` and
//! (for layout cases) `list`, and compared with the reference's exact error texts.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

use std::path::Path;

use crate::common::{Temp, corpus, corpus_index, parallel, read_json, run};
use serde_json::Value;

fn copy_tree(src: &Path, dest: &Path) {
    std::fs::create_dir_all(dest).unwrap();
    if !src.exists() {
        return; // an empty root: git keeps no empty directory
    }
    for e in std::fs::read_dir(src).unwrap().flatten() {
        let p = e.path();
        let d = dest.join(e.file_name());
        if p.is_dir() {
            copy_tree(&p, &d);
        } else {
            std::fs::copy(&p, &d).unwrap();
        }
    }
}

/// Every negative case of the corpus index (none when the corpus is absent and skipping is
/// allowed).
fn cases() -> Vec<String> {
    corpus_index()
        .map(|c| c.index.negative.iter().map(|n| n.case.clone()).collect())
        .unwrap_or_default()
}

/// What `op` must give on the case: the reference's result, or, where the corpus lists a known
/// divergence for it, the library's (which the golden runner checks against the listed rule).
fn reference(name: &str, dir: &Path, results: &Value, op: &str) -> Value {
    let case = format!("negative/{name}");
    if conformance::corpus::listed(&case, &format!("results.{op}")).is_some() {
        let (outcome, _) = conformance::corpus::port_result(dir, op).unwrap();
        // The fields the command line reports (the events may hold numbers serde_json
        // cannot read, such as 1e400).
        let field = |v: Option<&session_core::json::Value>| {
            v.map_or(Value::Null, |v| serde_json::from_str(&v.to_json()).unwrap())
        };
        let error = outcome.get("error");
        serde_json::json!({
            "ok": field(outcome.get("ok")),
            "eventCount": field(outcome.get("eventCount")),
            "error": {
                "name": field(error.and_then(|e| e.get("name"))),
                "message": field(error.and_then(|e| e.get("message"))),
            },
        })
    } else {
        results[op].clone()
    }
}

/// Compares a failed run with an expected `{ok:false, error}` result.
fn assert_error(run: &crate::common::Run, expected: &Value, root: &str, ctx: &str) {
    assert_eq!(run.code, 1, "{ctx}: exit code; stderr {}", run.stderr);
    assert!(run.stdout.is_empty(), "{ctx}: nothing on stdout");
    let err = run.json_error();
    let message = expected["error"]["message"]
        .as_str()
        .unwrap()
        .replace("<root>", root);
    assert_eq!(err["message"], message, "{ctx}: message");
    assert_eq!(err["name"], expected["error"]["name"], "{ctx}: name");
    assert_eq!(err["exitCode"], 1, "{ctx}");
    assert!(
        err["hint"].as_str().is_some_and(|h| !h.is_empty()),
        "{ctx}: a hint"
    );
    // Every error about a stored session names its file; a session that is not there has none.
    if !message.ends_with(" not found") {
        assert!(err["file"].as_str().is_some(), "{ctx}: the file is named");
    }
}

/// A hint about damaged or refused stored data names the place it tells to act on: the line
/// (and in a plain file its byte), else the byte of the damaged Zstandard frame, else the seq.
fn assert_hint_names_position(err: &Value, name: &str) {
    if !matches!(err["kind"].as_str(), Some("corrupt" | "format_unsupported")) {
        return;
    }
    let hint = err["hint"].as_str().unwrap();
    let in_text = err["inPlaintext"] == true;
    if let Some(line) = err["line"].as_u64() {
        assert!(hint.contains(&format!("line {line}")), "{name}: {hint}");
        if let (Some(offset), false) = (err["offset"].as_u64(), in_text) {
            assert!(hint.contains(&format!("(byte {offset})")), "{name}: {hint}");
        }
    } else if let (Some(offset), false) = (err["offset"].as_u64(), in_text) {
        assert!(hint.contains(&format!("byte {offset}")), "{name}: {hint}");
    } else if let Some(seq) = err["seq"].as_u64() {
        assert!(hint.contains(&format!("seq {seq}")), "{name}: {hint}");
    }
}

fn check_case(name: &str) {
    let dir = corpus().join("negative").join(name);
    let expected = read_json(&dir.join("expected.json"));
    let compression = expected["backend"]["compression"].as_str().unwrap();
    let id = expected["sessionId"].as_str().unwrap();
    let temp = Temp::new("negative");
    copy_tree(&dir.join("root"), temp.path());
    let root = temp.str();
    let base = ["--root", root, "--compression", compression];
    let cmd = |extra: &[&str]| {
        let mut a: Vec<&str> = base.to_vec();
        a.extend_from_slice(extra);
        run(&a)
    };
    let results = &expected["results"];

    // inspect
    let inspect = cmd(&["inspect", id, "--json"]);
    let want = reference(name, &dir, results, "inspect");
    if want["ok"] == true {
        let got = inspect.ok().json();
        assert_eq!(got["eventCount"], want["eventCount"], "{name}: inspect");
    } else {
        assert_error(&inspect, &want, root, &format!("{name}: inspect"));
        // The human form names where and what to do.
        let human = cmd(&["inspect", id]);
        assert_eq!(human.code, 1, "{name}");
        assert!(
            human.stderr.starts_with("sessionctl: error: "),
            "{name}: {}",
            human.stderr
        );
        // A session that is not there has no file to point at.
        let missing = want["error"]["message"]
            .as_str()
            .is_some_and(|m| m.ends_with(" not found"));
        assert!(
            missing || human.stderr.contains("  where: "),
            "{name}: {}",
            human.stderr
        );
        assert!(
            human.stderr.contains("  hint: "),
            "{name}: {}",
            human.stderr
        );
        let err = inspect.json_error();
        let message = err["message"].as_str().unwrap();
        if let Some(rest) =
            message.strip_prefix("corrupt session log: unparsable committed event at line ")
        {
            let line: u64 = rest.parse().unwrap();
            assert_eq!(err["line"].as_u64(), Some(line + 1), "{name}: file line");
            assert!(
                err["offset"].as_u64().is_some(),
                "{name}: byte offset of the line"
            );
        }
        if message.contains(" at byte ") {
            assert!(err["offset"].as_u64().is_some(), "{name}: byte offset");
        }
        if message.contains("(seq ") || message.contains(" at seq ") {
            assert!(err["seq"].as_u64().is_some(), "{name}: seq");
        }
        assert_hint_names_position(&err, name);
    }

    // repair (load semantics)
    let repair = cmd(&["repair", id, "--json"]);
    let want = reference(name, &dir, results, "load");
    if want["ok"] == true {
        let got = repair.ok().json();
        assert_eq!(got["eventCount"], want["eventCount"], "{name}: repair");
    } else {
        assert_error(&repair, &want, root, &format!("{name}: repair"));
    }
    let port_files = conformance::corpus::listed(&format!("negative/{name}"), "results.load.files")
        .map(|_| conformance::corpus::port_result(&dir, "load").unwrap().1);
    for (rel, info) in expected["fileAfterLoad"].as_object().unwrap() {
        let now = std::fs::read(temp.path().join(rel))
            .unwrap_or_else(|e| panic!("{name}: {rel} after repair: {e}"));
        if let Some(files) = &port_files {
            // A listed divergence: the file as the library's load leaves it.
            let (_, want) = files.iter().find(|(r, _)| r == rel).unwrap();
            assert!(
                now == *want,
                "{name}: {rel} after repair (as the library leaves it)"
            );
            continue;
        }
        let want = if info["changed"] == true {
            std::fs::read(dir.join("after-load").join(rel)).unwrap()
        } else {
            std::fs::read(dir.join("root").join(rel)).unwrap()
        };
        if compression == "zstd" && info["changed"] == true {
            assert_eq!(
                zstd::stream::decode_all(now.as_slice()).unwrap(),
                zstd::stream::decode_all(want.as_slice()).unwrap(),
                "{name}: {rel} after repair"
            );
        } else {
            assert_eq!(now, want, "{name}: {rel} after repair");
        }
    }

    // list, for the layout cases
    if let Some(list) = results.get("list") {
        let listed = cmd(&["list", "--json"]);
        if list["ok"] == true {
            listed.ok();
        } else {
            assert_eq!(listed.code, 1, "{name}: list");
            let err = listed.json_error();
            let message = list["error"]["message"]
                .as_str()
                .unwrap()
                .replace("<root>", root);
            assert_eq!(err["message"], message, "{name}: list");
        }
    }
}

#[test]
fn every_negative_case_gives_the_reference_outcome() {
    parallel(&cases(), 3, |name| check_case(name));
}

#[test]
fn bad_paths_and_missing_sessions_fail_with_exit_1() {
    let temp = Temp::new("paths");
    // a path that does not exist
    let r = run(&["inspect", "/nonexistent/dir/session.jsonl", "--json"]);
    assert_eq!(r.code, 1);
    let err = r.json_error();
    assert_eq!(
        err["message"],
        "no session file or directory at /nonexistent/dir/session.jsonl"
    );
    assert_eq!(err["file"], "/nonexistent/dir/session.jsonl");
    // a root that does not exist
    let missing = temp.path().join("no-root");
    let r = run(&["--root", missing.to_str().unwrap(), "list", "--json"]);
    assert_eq!(r.code, 1);
    assert_eq!(
        r.json_error()["message"],
        format!("store root {} does not exist", missing.display())
    );
    // an unknown id in an existing root
    let r = run(&["--root", temp.str(), "messages", "nope", "--json"]);
    assert_eq!(r.code, 1);
    let err = r.json_error();
    assert_eq!(err["message"], "session \"nope\" not found");
    assert!(err["hint"].as_str().unwrap().contains("list"), "{err}");
    // a file that is not named like a session log
    let stray = temp.path().join("notes.txt");
    std::fs::write(&stray, "hello").unwrap();
    let r = run(&["inspect", stray.to_str().unwrap()]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("is not a session log"), "{}", r.stderr);
    // --at past the end of the log
    let dir = corpus().join("logs/acp.bash-tool-turn__session/session.jsonl");
    let r = run(&["messages", dir.to_str().unwrap(), "--at", "5000", "--json"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    let err = r.json_error();
    assert_eq!(
        err["message"],
        "seq 5000 does not exist in session \"e128dda9-ed11-4868-8266-0ef90d03c3d6\" (last seq 101)"
    );
    assert_eq!(err["seq"], 5000);
    // verify on something that is not there
    let r = run(&["verify", "/nonexistent/x"]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("does not exist"), "{}", r.stderr);
}

#[test]
fn verify_reports_a_corrupt_log_as_a_violation() {
    let bad = corpus().join("negative/garbage-line-before-turn-end/root");
    let r = run(&["verify", "--json", bad.to_str().unwrap()]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    let doc = r.json();
    assert_eq!(doc["failed"], 1);
    let f = &doc["files"][0];
    assert_eq!(f["ok"], false);
    assert_eq!(
        f["error"]["message"],
        "corrupt session log: unparsable committed event at line 34"
    );
    assert_eq!(f["error"]["line"], 35);
    let human = run(&["verify", bad.to_str().unwrap()]);
    assert_eq!(human.code, 1);
    assert!(human.stdout.contains("FAIL"), "{}", human.stdout);
    assert!(
        human.stdout.contains("0 passed, 1 failed"),
        "{}",
        human.stdout
    );
}

#[test]
fn usage_errors_exit_2() {
    for args in [
        vec!["frobnicate"],
        vec!["inspect"],
        vec!["inspect", "a", "b"],
        vec!["messages", "x", "--at", "abc"],
        vec!["messages", "x", "--at", "-1"],
        vec!["inspect", "x", "--bogus"],
        vec!["--compression", "lz4", "list"],
        vec!["demo", "--json"],
        vec!["fork", "x", "--at"],
        vec!["convert", "x"],
        vec!["verify"],
        vec!["append", "x", "--cwd", "/tmp"],
    ] {
        let r = run(&args);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        if args.contains(&"--json") {
            assert_eq!(r.json_error()["name"], "UsageError", "{args:?}");
        } else {
            assert!(
                r.stderr.starts_with("sessionctl: error: "),
                "{args:?}: {}",
                r.stderr
            );
        }
        assert!(r.stdout.is_empty(), "{args:?}");
    }
    let r = run(&["inspect", "--json"]);
    assert_eq!(r.code, 2);
    assert_eq!(r.json_error()["name"], "UsageError");
    assert_eq!(r.json_error()["exitCode"], 2);
}

#[test]
fn help_and_version_exit_0() {
    let r = run(&["help"]).ok();
    for cmd in [
        "demo",
        "append",
        "list",
        "inspect",
        "repair",
        "messages",
        "transcript",
        "header",
        "fork",
        "convert",
        "verify",
        "stats",
    ] {
        assert!(r.stdout.contains(&format!("  {cmd} ")), "{cmd} in help");
    }
    assert!(!r.stdout.contains("__demo-writer"));
    let r = run(&["--help"]).ok();
    assert!(r.stdout.starts_with("sessionctl:"));
    let r = run(&["help", "fork"]).ok();
    assert!(
        r.stdout.contains("sessionctl [--store SPEC | --root DIR]"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("fork SESSION [--at SEQ] [--id NEW] [--json]"),
        "{}",
        r.stdout
    );
    let r = run(&["inspect", "--help"]).ok();
    assert!(r.stdout.contains("inspect SESSION"), "{}", r.stdout);
    let r = run(&["--version"]).ok();
    assert!(r.stdout.starts_with("sessionctl "));
}

// A refused configuration's hint follows what the position names: a log of the other encoding
// than the root is opened with, or a directory other users can write.
#[test]
fn refused_configuration_hints_follow_the_named_path() {
    use std::os::unix::fs::PermissionsExt as _;
    let temp = Temp::new("refusals");
    crate::common::write_large(temp.path(), "plain", 1, 10);
    let r = run(&[
        "--root",
        temp.str(),
        "--compression",
        "zstd",
        "inspect",
        "plain",
        "--json",
    ]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    let err = r.json_error();
    assert_eq!(err["kind"], "invalid", "{err}");
    let hint = err["hint"].as_str().unwrap();
    assert!(
        hint.contains("opened as --compression zstd; pass --compression none"),
        "{hint}"
    );
    let project = temp.path().join("--big--");
    std::fs::set_permissions(&project, std::fs::Permissions::from_mode(0o777)).unwrap();
    let r = run(&[
        "--root",
        temp.str(),
        "--compression",
        "none",
        "inspect",
        "plain",
        "--json",
    ]);
    std::fs::set_permissions(&project, std::fs::Permissions::from_mode(0o700)).unwrap();
    assert_eq!(r.code, 1, "{}", r.stderr);
    let err = r.json_error();
    assert_eq!(err["kind"], "invalid", "{err}");
    assert!(
        err["hint"].as_str().unwrap().contains("chmod go-w"),
        "{err}"
    );
}
