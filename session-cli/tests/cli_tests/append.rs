//! `append`: drafts on stdin, write-behind, flush barriers acknowledged with the last durable
//! seq, invalid drafts rejected with their line number.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

use std::io::{BufRead, BufReader, Write};

use crate::common::{Temp, run, run_in};

const TURN_1: &str = r#"{"type":"turn/start","data":{"turn":1}}
{"type":"user/message","data":{"id":"u1","role":"user","content":[{"type":"text","text":"hello"}],"source":{"kind":"user"}},"surfaceOp":"append"}
{"flush":true}
{"type":"user/message","data":{"id":"u2","role":"user","content":[],"source":{"kind":"user"}}}
{"type":"assistant/message","data":{"turn":1,"step":1,"message":{"id":"a1","role":"assistant","content":[{"type":"text","text":"hi there"}],"source":{"kind":"model","provider":"p","model":"m"}}},"surfaceOp":"append","sourceEventSeqs":[1]}
this is not json

{"type":"turn/end","seq":9,"data":{"turn":1,"reason":{"kind":"completed"}}}
{"type":"turn/end","data":{"turn":1,"reason":{"kind":"completed"}}}
"#;

#[test]
fn append_creates_acknowledges_flushes_and_rejects_bad_lines() {
    let root = Temp::new("append");
    let r = run_in(
        &[
            "--root",
            root.str(),
            "append",
            "notes",
            "--create",
            "--cwd",
            "/work/notes",
        ],
        Some(TURN_1),
    );
    // Three lines were rejected: the exit code says so, the accepted events stay.
    assert_eq!(r.code, 1, "{}", r.stderr);
    let acks: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(
        acks,
        [r#"{"flushed":1}"#, r#"{"flushed":3}"#],
        "barrier, then end of input"
    );
    assert!(
        r.stderr.contains(
            "sessionctl: line 4: rejected: session event \"user/message\" is surface-eligible and requires a surfaceOp marker"
        ),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr
            .contains("sessionctl: line 6: rejected: not valid JSON"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("sessionctl: line 8: rejected: unknown key \"seq\" (seq and time are assigned by the session)"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("3 of 7 drafts were rejected"),
        "{}",
        r.stderr
    );

    let inspect = run(&["--root", root.str(), "inspect", "notes", "--json"])
        .ok()
        .json();
    assert_eq!(inspect["eventCount"], 4);
    assert_eq!(inspect["header"]["cwd"], "/work/notes");
    assert_eq!(inspect["closers"], serde_json::json!([]));
    assert_eq!(inspect["compression"], "zstd", "the default store is zstd");
    assert!(
        inspect["file"]
            .as_str()
            .unwrap()
            .ends_with("--work-notes--/notes/session.jsonl.zstd"),
        "{}",
        inspect["file"]
    );
    let messages = run(&["--root", root.str(), "messages", "notes", "--json"])
        .ok()
        .json();
    assert_eq!(messages["count"], 2);
    assert_eq!(
        messages["messages"][1]["message"]["content"][0]["text"],
        "hi there"
    );

    // Appending to the stored session resumes it: the restore marker comes first.
    let r = run_in(
        &["--root", root.str(), "append", "notes"],
        Some("{\"type\":\"turn/start\",\"data\":{\"turn\":2}}\n{\"type\":\"turn/end\",\"data\":{\"turn\":2,\"reason\":{\"kind\":\"completed\"}}}\n"),
    )
    .ok();
    assert_eq!(r.stdout, "{\"flushed\":6}\n");
    let inspect = run(&["--root", root.str(), "inspect", "notes", "--json"])
        .ok()
        .json();
    assert_eq!(inspect["eventCount"], 7);
    assert_eq!(inspect["countsByType"]["session/end-seed"], 1);

    // --create refuses an existing id.
    let r = run_in(
        &["--root", root.str(), "append", "notes", "--create"],
        Some(""),
    );
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("session \"notes\" already exists"),
        "{}",
        r.stderr
    );
}

#[test]
fn flush_acknowledgement_arrives_while_input_is_still_open() {
    let root = Temp::new("append-live");
    let (mut child, mut stdin) = crate::common::spawn_append(root.path(), "live");
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    writeln!(stdin, r#"{{"type":"turn/start","data":{{"turn":1}}}}"#).unwrap();
    writeln!(stdin, r#"{{"type":"todo/write","data":{{"todos":[]}}}}"#).unwrap();
    writeln!(stdin, r#"{{"flush":true}}"#).unwrap();
    stdin.flush().unwrap();
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line, "{\"flushed\":1}\n");
    // Durable now, while the writer is still running: read the file directly.
    let file = root.path().join("--w--/live/session.jsonl");
    let text = std::fs::read_to_string(&file).unwrap();
    assert_eq!(text.lines().count(), 3, "header and two events: {text}");
    assert!(
        child.try_wait().unwrap().is_none(),
        "the writer is still waiting for input"
    );
    // Another writer is refused while this one holds the session.
    let other = run_in(&["--root", root.str(), "append", "live"], Some(""));
    assert_eq!(other.code, 1, "{}", other.stderr);
    assert!(
        other.stderr.contains("locked by another writer"),
        "{}",
        other.stderr
    );
    writeln!(
        stdin,
        r#"{{"type":"turn/end","data":{{"turn":1,"reason":{{"kind":"completed"}}}}}}"#
    )
    .unwrap();
    drop(stdin);
    let mut rest = String::new();
    stdout.read_line(&mut rest).unwrap();
    assert_eq!(rest, "{\"flushed\":2}\n");
    assert!(child.wait().unwrap().success());
    let text = std::fs::read_to_string(&file).unwrap();
    assert_eq!(text.lines().count(), 4);
}

#[test]
fn an_empty_new_session_writes_nothing() {
    let root = Temp::new("append-empty");
    let r = run_in(
        &[
            "--root",
            root.str(),
            "append",
            "empty",
            "--create",
            "--cwd",
            "/w",
        ],
        Some("{\"flush\":true}\n"),
    )
    .ok();
    // one line for the barrier; the end of input repeats no acknowledgement
    assert_eq!(r.stdout, "{\"flushed\":null}\n");
    let listed = run(&["--root", root.str(), "list", "--json"]).ok().json();
    assert_eq!(
        listed["sessions"],
        serde_json::json!([]),
        "a log is written with its first batch"
    );
}

/// `append` writes behind between barriers: one draft, no flush barrier, standard input held
/// open, and the event is on disk within a second (the 200 ms batching window, not the end of
/// input, wrote it).
#[test]
fn an_unflushed_event_is_on_disk_within_a_second() {
    let root = Temp::new("append-behind");
    let (mut child, mut stdin) = crate::common::spawn_append(root.path(), "behind");
    writeln!(stdin, r#"{{"type":"turn/start","data":{{"turn":1}}}}"#).unwrap();
    stdin.flush().unwrap();
    let sent = std::time::Instant::now();
    let file = root.path().join("--w--/behind/session.jsonl");
    let on_disk = || {
        std::fs::read_to_string(&file)
            .is_ok_and(|t| t.lines().nth(1).is_some_and(|l| l.contains("turn/start")))
    };
    while !on_disk() {
        assert!(
            sent.elapsed() < std::time::Duration::from_secs(1),
            "the unflushed event is not on disk after 1 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(
        child.try_wait().unwrap().is_none(),
        "the writer is still waiting for input"
    );
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "{\"flushed\":0}\n");
}

#[test]
fn drafts_that_readers_refuse_are_rejected_and_ignorable_plugin_events_reload() {
    let root = Temp::new("append-rules");
    let input = r#"{"type":"turn/start","data":{"turn":1}}
{"type":"x-plugin/note","data":{"n":1}}
{"type":"x-plugin/note","data":{"n":1},"ignorable":true}
{"type":"x-plugin/note","data":{"n":1},"ignorable":false}
{"type":"text-chunks","data":{"note":1},"ignorable":true}
{"type":"turn/end","data":{"turn":1,"x":1,"reason":{"kind":"completed"}}}
{"type":"turn/end","data":{"turn":1,"reason":{"kind":"completed"}}}
"#;
    let r = run_in(
        &[
            "--root",
            root.str(),
            "append",
            "rules",
            "--create",
            "--cwd",
            "/work/rules",
        ],
        Some(input),
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert_eq!(r.stdout, "{\"flushed\":2}\n");
    for expected in [
        "sessionctl: line 2: rejected: session \"rules\" contains event type \"x-plugin/note\" (seq 1) unknown to this harness and not marked ignorable",
        "sessionctl: line 4: rejected: \"ignorable\" is either absent or true",
        "sessionctl: line 5: rejected: session \"rules\" event at seq 2 has type \"text-chunks\", a reserved packed-row storage tag",
        "sessionctl: line 6: rejected: session \"rules\" contains malformed pre-react-loop turn/end at seq 2",
        "4 of 7 drafts were rejected",
    ] {
        assert!(r.stderr.contains(expected), "{expected}\n{}", r.stderr);
    }
    // Everything acknowledged reads back, the ignorable plugin event included.
    let inspect = run(&["--root", root.str(), "inspect", "rules", "--json"])
        .ok()
        .json();
    assert_eq!(inspect["eventCount"], 3);
    assert_eq!(inspect["countsByType"]["x-plugin/note"], 1);
    run(&["--root", root.str(), "verify", root.str()]).ok();
}

/// A turn cannot span two `append` runs: resuming closes the open turn as interrupted, and a
/// later `turn/end` for it is refused (exit 1, naming the line), so a turn never has two
/// `turn/end` events.
#[test]
fn a_turn_end_with_no_open_turn_is_refused() {
    let root = Temp::new("append-span");
    let args = [
        "--root",
        root.str(),
        "--compression",
        "none",
        "append",
        "span",
    ];
    run_in(
        &[&args[..], &["--create", "--cwd", "/w"]].concat(),
        Some("{\"type\":\"turn/start\",\"data\":{\"turn\":1}}\n"),
    )
    .ok();
    let end = "{\"type\":\"turn/end\",\"data\":{\"turn\":1,\"reason\":{\"kind\":\"completed\"}}}\n";
    let r = run_in(&args, Some(end));
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("line 1: rejected: turn/end, but no turn is open"),
        "{}",
        r.stderr
    );
    let file = root.path().join("--w--/span/session.jsonl");
    let text = std::fs::read_to_string(file).unwrap();
    assert_eq!(text.matches("\"turn/end\"").count(), 1, "{text}");
    assert!(text.contains("interrupted"), "{text}");
    // a new turn is accepted, and its turn/end
    let next = "{\"type\":\"turn/start\",\"data\":{\"turn\":2}}\n{\"type\":\"turn/end\",\"data\":{\"turn\":2,\"reason\":{\"kind\":\"completed\"}}}\n";
    run_in(&args, Some(next)).ok();
}

/// Resuming with nothing to append (empty input, or only blank lines) writes nothing, not even
/// the `session/end-seed` marker, prints nothing and exits 0; a barrier alone publishes the
/// session and acknowledges it.
#[test]
fn an_empty_input_writes_nothing_to_a_resumed_session() {
    let root = Temp::new("append-nothing");
    let closed = concat!(
        r#"{"type":"turn/start","data":{"turn":1}}"#,
        "\n",
        r#"{"type":"turn/end","data":{"turn":1,"reason":{"kind":"completed"}}}"#,
        "\n",
    );
    let args = ["--root", root.str(), "append", "notes"];
    let created = run_in(
        &[&args[..], &["--create", "--cwd", "/w"]].concat(),
        Some(closed),
    )
    .ok();
    assert_eq!(created.stdout, "{\"flushed\":1}\n");
    let log = root.path().join("--w--/notes/session.jsonl.zstd");
    let before = std::fs::read(&log).unwrap();
    for input in ["", "\n  \n"] {
        let r = run_in(&args, Some(input)).ok();
        assert_eq!(r.stdout, "", "{input:?}");
        assert_eq!(
            std::fs::read(&log).unwrap(),
            before,
            "{input:?}: the log is unchanged"
        );
    }
    let r = run_in(&args, Some("{\"flush\":true}\n")).ok();
    assert_eq!(r.stdout, "{\"flushed\":2}\n");
    let inspect = run(&["--root", root.str(), "inspect", "notes", "--json"])
        .ok()
        .json();
    assert_eq!(inspect["countsByType"]["session/end-seed"], 1);
}
