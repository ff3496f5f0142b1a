//! `sessionctl list` end to end: one newer, older or damaged session never fails the listing
//! (it is a row with its error), and a stray flat-file log refuses the root.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

use std::path::{Path, PathBuf};

use crate::common::{Temp, run};

const BODY: &str = concat!(
    r#"{"type":"turn/start","seq":0,"time":0,"data":{"turn":1}}"#,
    "\n",
    r#"{"type":"turn/end","seq":1,"time":0,"data":{"turn":1,"reason":{"kind":"completed"}}}"#,
    "\n",
);

fn header(id: &str, version: &str) -> String {
    format!(
        r#"{{"type":"session","version":{version},"id":"{id}","createdAt":1000,"cwd":"/w","delegationDepth":0}}"#
    )
}

/// A plain log of session `id` whose first line is `first`.
fn plant(root: &Path, id: &str, first: &str) -> PathBuf {
    let path = root.join("--w--").join(id).join("session.jsonl");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, format!("{first}\n{BODY}")).unwrap();
    path
}

#[test]
fn list_shows_newer_older_and_damaged_sessions_as_rows_with_their_error() {
    let temp = Temp::new("list-rows");
    let root = temp.path().join("root");
    plant(&root, "good", &header("good", "0"));
    plant(&root, "newer", &header("newer", "1"));
    plant(&root, "older", &header("older", "-1"));
    let garbage = plant(&root, "garbage", "{not json");
    let root_s = root.to_str().unwrap();
    let args = ["--root", root_s, "--compression", "none", "list", "--count"];

    let listed = run(&[&args[..], &["--json"]].concat()).ok().json();
    let sessions = listed["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 4, "{listed}");
    let row = |id: &str| {
        sessions
            .iter()
            .find(|s| s["id"] == id)
            .unwrap_or_else(|| panic!("{id} in {listed}"))
    };
    assert_eq!(row("good")["events"], 2);
    assert!(row("good")["error"].is_null());
    for (id, text) in [
        (
            "newer",
            "uses log format v1, but this harness reads only v0",
        ),
        ("older", "uses log format v-1, older than the supported v0"),
    ] {
        let r = row(id);
        assert!(r["events"].is_null(), "{r}");
        assert!(r["error"].as_str().unwrap().contains(text), "{r}");
        assert!(
            r["file"].as_str().unwrap().ends_with("session.jsonl"),
            "{r}"
        );
    }
    // The damaged header comes last, named by its file.
    let last = sessions.last().unwrap();
    assert!(last["id"].is_null(), "{last}");
    assert_eq!(last["file"], garbage.to_str().unwrap());
    assert_eq!(
        last["error"],
        "corrupt session log: header line is not valid JSON"
    );
    assert_eq!(last["cause"], "unexpected character 'n' at byte 1");
    assert!(row("good")["cause"].is_null());

    // The table shows every readable header, and the damaged file with its whole error.
    let human = run(&args).ok();
    for id in ["good", "newer", "older"] {
        assert!(human.stdout.contains(id), "{}", human.stdout);
    }
    assert!(
        human.stdout.contains(&format!(
            "error: {}: corrupt session log: header line is not valid JSON\n  cause: unexpected \
             character 'n' at byte 1\n",
            garbage.display()
        )),
        "{}",
        human.stdout
    );
}

#[test]
fn a_stray_flat_file_log_fails_list_and_every_command_naming_the_file() {
    let temp = Temp::new("list-flat");
    let root = temp.path().join("root");
    plant(&root, "good", &header("good", "0"));
    let stray = root.join("stray.jsonl");
    std::fs::write(&stray, format!("{}\n", header("stray", "0"))).unwrap();
    let root_s = root.to_str().unwrap();
    let want = format!(
        "session artifact \"{}\" uses the unsupported flat-file layout; use a separate root or \
         move it into a project/session directory before loading",
        stray.display()
    );
    for cmd in [&["list", "--json"][..], &["messages", "good", "--json"][..]] {
        let r = run(&[&["--root", root_s, "--compression", "none"][..], cmd].concat());
        assert_eq!(r.code, 1, "{cmd:?}: {}", r.stderr);
        let err = r.json_error();
        assert_eq!(err["message"], want.as_str(), "{cmd:?}");
        assert_eq!(err["kind"], "format_unsupported", "{cmd:?}");
        assert!(
            err["hint"]
                .as_str()
                .unwrap()
                .contains(&format!("the stray log {}", stray.display())),
            "{err}"
        );
    }
}

#[test]
fn a_copy_at_another_path_fails_list_as_in_the_reference() {
    let temp = Temp::new("list-dup");
    let root = temp.path().join("root");
    let first = plant(&root, "s", &header("s", "0"));
    let copy = root.join("--v--").join("s").join("session.jsonl");
    std::fs::create_dir_all(copy.parent().unwrap()).unwrap();
    std::fs::copy(&first, &copy).unwrap();
    let r = run(&[
        "--root",
        root.to_str().unwrap(),
        "--compression",
        "none",
        "list",
        "--json",
    ]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    // The copy's header names the first path: a layout error, as the reference reports it.
    assert_eq!(
        r.json_error()["message"],
        format!(
            "corrupt session log \"{}\": header id \"s\" and cwd identify \"{}\"",
            copy.display(),
            first.display()
        )
    );
}

/// `list` reads only the headers: a log damaged after its header lists cleanly, with no
/// event count; `--count` reads every log, counts its events and reports the damage.
#[test]
fn list_reads_headers_and_count_reads_every_log() {
    let temp = Temp::new("list-count");
    let root = temp.path().join("root");
    plant(&root, "good", &header("good", "0"));
    let damaged = plant(&root, "damaged", &header("damaged", "0"));
    let text = std::fs::read_to_string(&damaged).unwrap();
    let broken = text.replacen(r#"{"type":"turn/start""#, "{garbage", 1);
    std::fs::write(&damaged, broken).unwrap();
    let root_s = root.to_str().unwrap();
    let fast = run(&["--root", root_s, "list", "--json"]).ok().json();
    assert_eq!(fast["counted"], false);
    for s in fast["sessions"].as_array().unwrap() {
        assert!(s["events"].is_null(), "{s}");
        assert!(s["error"].is_null(), "{s}");
    }
    let human = run(&["--root", root_s, "list"]).ok();
    assert!(!human.stdout.contains("events"), "{}", human.stdout);
    assert!(human.stdout.contains("damaged"), "{}", human.stdout);
    let counted = run(&["--root", root_s, "list", "--count", "--json"])
        .ok()
        .json();
    assert_eq!(counted["counted"], true);
    let row = |id: &str| {
        counted["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == id)
            .unwrap()
            .clone()
    };
    assert_eq!(row("good")["events"], 2);
    assert!(row("damaged")["error"].is_string(), "{counted}");
    let human = run(&["--root", root_s, "list", "--count"]).ok();
    assert!(human.stdout.contains("events"), "{}", human.stdout);
}
