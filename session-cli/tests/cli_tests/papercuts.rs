//! Small errors a new user hits: wrong or missing names in errors, plurals, wording, and
//! writes that create more than was asked for.

#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

use crate::common::{Temp, run};

fn demo_root() -> Temp {
    let root = Temp::new("papercut-demo");
    run(&["--root", root.str(), "demo"]).ok();
    root
}

/// A write to `sqlite:/missing/dir/x.db` creates at most the database's own directory: a
/// missing grandparent is refused, named, and not created.
#[test]
fn a_database_path_with_a_missing_grandparent_is_refused_and_not_created() {
    let root = demo_root();
    let base = Temp::new("papercut-db");
    let deep = base.path().join("missing/dir/x.db");
    let dest = format!("sqlite:{}", deep.display());
    let r = run(&["--root", root.str(), "convert", "demo", &dest]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!(
            "{} holding the database",
            base.path().join("missing").display()
        )),
        "{}",
        r.stderr
    );
    assert!(!base.path().join("missing").exists());
    // one missing level is created
    let shallow = base.path().join("one/x.db");
    let dest = format!("sqlite:{}", shallow.display());
    run(&["--root", root.str(), "convert", "demo", &dest]).ok();
    assert!(shallow.is_file());
}

/// `--store sqlite:<a directory>` says it is a directory, not that it does not exist.
#[test]
fn a_database_store_naming_a_directory_says_so() {
    let dir = Temp::new("papercut-dir");
    let spec = format!("sqlite:{}", dir.str());
    let r = run(&["--store", &spec, "list"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("is a directory, not a database file"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("does not exist"), "{}", r.stderr);
}

/// `convert` into a path whose way is blocked by a file names that file, not ENOTDIR.
#[test]
fn convert_into_a_file_names_the_file() {
    let root = demo_root();
    let base = Temp::new("papercut-notdir");
    let file = base.path().join("plain-file");
    std::fs::write(&file, "x").unwrap();
    for dest in [file.clone(), file.join("below")] {
        let r = run(&[
            "--root",
            root.str(),
            "convert",
            "demo",
            dest.to_str().unwrap(),
        ]);
        assert_eq!(r.code, 1, "{}", r.stderr);
        assert!(
            r.stderr.contains(&format!("{} is a file", file.display())),
            "{}",
            r.stderr
        );
        assert!(!r.stderr.contains("ENOTDIR"), "{}", r.stderr);
    }
    assert_eq!(std::fs::read(&file).unwrap(), b"x");
}

/// `verify` of files it cannot read says so, rather than "violated invariants".
#[test]
fn verify_of_unreadable_files_says_they_could_not_be_read() {
    let dir = Temp::new("papercut-verify");
    let file = dir.path().join("session.jsonl");
    std::fs::write(&file, "garbage\n").unwrap();
    let r = run(&["verify", file.to_str().unwrap()]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("1 session log could not be read"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("violated"), "{}", r.stderr);
}

/// Counts in human output agree with their nouns; a piped `verify` line is never clipped.
#[test]
fn counts_agree_with_their_nouns() {
    let root = demo_root();
    let dest = Temp::new("papercut-plural");
    let r = run(&["--root", root.str(), "convert", "demo", dest.str()]).ok();
    assert!(r.stdout.contains(" events in "), "{}", r.stdout);
    assert!(r.stdout.contains(" batches, "), "{}", r.stdout);
    let file = root.path().join("--demo-project--/demo/session.jsonl.zstd");
    let r = run(&["verify", file.to_str().unwrap()]).ok();
    assert!(r.stdout.contains(" checks, 81 events"), "{}", r.stdout);
    for bad in [" 1 events", " 1 batches", " 1 logs", " 1 checks"] {
        assert!(!r.stdout.contains(bad), "{}", r.stdout);
    }
}

/// A `PostgreSQL` connect failure names the server and the cause, never the password.
#[test]
fn a_postgres_connect_failure_names_the_server_and_the_cause() {
    let r = run(&["--store", "postgres://agent:s3cret@127.0.0.1:1/db", "list"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("127.0.0.1:1"), "{}", r.stderr);
    assert!(r.stderr.contains("refused"), "{}", r.stderr);
    assert!(!r.stderr.contains("s3cret"), "{}", r.stderr);
    let r = run(&[
        "--store",
        "postgres://agent@127.0.0.1:1/db",
        "list",
        "--json",
    ]);
    let err = r.json_error();
    let hint = err["hint"].as_str().unwrap().to_owned();
    assert!(hint.contains("server 127.0.0.1:1"), "{hint}");
    assert!(err["cause"].as_str().unwrap().contains("refused"), "{err}");
}

/// `sessionctl --compression none inspect` of the demo's crashed session, converted to a plain
/// log whose fifth line (seq 3) has its first `from` replaced by `to`.
fn inspect_with_line_5_edited(from: &str, to: &str) -> crate::common::Run {
    let root = demo_root();
    let plain = Temp::new("papercut-edited");
    run(&["--root", root.str(), "convert", "demo-crashed", plain.str()]).ok();
    let log = plain
        .path()
        .join("--demo-project--/demo-crashed/session.jsonl");
    let text = std::fs::read_to_string(&log).unwrap();
    let mut lines: Vec<String> = text.split_inclusive('\n').map(str::to_owned).collect();
    assert!(lines[4].contains(from), "{}", lines[4]);
    lines[4] = lines[4].replacen(from, to, 1);
    std::fs::write(&log, lines.concat()).unwrap();
    run(&[
        "--root",
        plain.str(),
        "--compression",
        "none",
        "inspect",
        "demo-crashed",
    ])
}

/// A committed line that cannot be decoded, or whose envelope is invalid, is named by the
/// reference's message, and the `cause:` line says what is wrong with it.
#[test]
fn a_bad_line_says_why_on_the_cause_line() {
    for (from, to, message, cause) in [
        (
            "{\"type\"",
            "{\"typ e",
            "unparsable committed event at line 4",
            "the line is not JSON: unexpected character 'r' at byte 9",
        ),
        (
            "{\"type\"",
            "{\"extra\":1,\"type\"",
            "seed event at index 3 has an invalid event envelope",
            "an envelope key is not one of type, seq, time, data, surfaceOp, sourceEventSeqs, \
             ignorable",
        ),
        (
            "\"time\":",
            "\"time\":\"x\",\"later\":",
            "seed event at index 3 has an invalid event envelope",
            "`time` is not a safe integer",
        ),
    ] {
        let r = inspect_with_line_5_edited(from, to);
        assert_eq!(r.code, 1, "{}", r.stderr);
        assert!(r.stderr.contains(&format!("{message}\n")), "{}", r.stderr);
        assert!(
            r.stderr.contains(&format!("  cause: {cause}\n")),
            "{}",
            r.stderr
        );
    }
}

/// A hint names a command that works on the same thing: for a torn file outside a store
/// layout, the file itself (repair refuses to write there), not an id of some other store.
#[test]
fn hints_name_a_command_for_the_same_session() {
    let root = demo_root();
    let plain = Temp::new("papercut-plain");
    run(&["--root", root.str(), "convert", "demo-crashed", plain.str()]).ok();
    let in_layout = plain
        .path()
        .join("--demo-project--/demo-crashed/session.jsonl");
    let outside_dir = Temp::new("papercut-outside");
    let outside = outside_dir.path().join("session.jsonl");
    std::fs::copy(&in_layout, &outside).unwrap();
    for f in [&in_layout, &outside] {
        let mut text = std::fs::read(f).unwrap();
        text.extend_from_slice(br#"{"type":"tur"#);
        std::fs::write(f, text).unwrap();
    }
    let dest = Temp::new("papercut-dest");
    let r = run(&["convert", outside.to_str().unwrap(), dest.str(), "--json"]);
    assert_eq!(r.code, 1);
    let hint = r.json_error()["hint"].as_str().unwrap().to_owned();
    assert!(
        hint.contains(&format!(
            "sessionctl repair {} --dry-run",
            outside.display()
        )),
        "{hint}"
    );
    // and the command it names works
    run(&["repair", outside.to_str().unwrap(), "--dry-run"]).ok();
    let r = run(&[
        "--root",
        plain.str(),
        "convert",
        "demo-crashed",
        dest.str(),
        "--json",
    ]);
    let hint = r.json_error()["hint"].as_str().unwrap().to_owned();
    let named = format!("sessionctl --root {} repair demo-crashed", plain.str());
    assert!(hint.contains(&named), "{hint}");
    run(&["--root", plain.str(), "repair", "demo-crashed"]).ok();
}

/// `inspect` of a garbage plain log whose session directory also holds the zstd log names the
/// plain file and why it cannot be read, not the sibling; looking the id up in a plain root
/// still refuses the sibling of the other encoding, as the reference does.
#[test]
fn a_garbage_file_with_a_sibling_of_the_other_encoding_is_named() {
    let root = demo_root();
    let zstd = root.path().join("--demo-project--/demo/session.jsonl.zstd");
    assert!(zstd.is_file());
    let plain = zstd.with_file_name("session.jsonl");
    std::fs::write(&plain, "{garbage\n").unwrap();
    let plain_s = plain.to_str().unwrap();
    for args in [
        &["inspect", plain_s, "--json"][..],
        &["messages", plain_s, "--json"],
    ] {
        let r = run(args);
        assert_eq!(r.code, 1, "{args:?}: {}", r.stdout);
        let err = r.json_error();
        assert_eq!(
            err["message"], "corrupt session log: header line is not valid JSON",
            "{args:?}: {err}"
        );
        assert_eq!(err["file"], plain_s, "{args:?}: {err}");
        assert_eq!(err["kind"], "corrupt", "{args:?}: {err}");
    }
    let human = run(&["inspect", plain_s]);
    assert!(
        !human.stderr.contains("session.jsonl.zstd"),
        "{}",
        human.stderr
    );
    // A write names the file too.
    let r = run(&["repair", plain_s, "--json"]);
    assert_eq!(r.code, 1);
    assert_eq!(r.json_error()["file"], plain_s, "{}", r.stderr);
    // By id in a plain root, the sibling is the reference's encoding error.
    let by_id = run(&[
        "--root",
        root.str(),
        "--compression",
        "none",
        "inspect",
        "demo",
        "--json",
    ]);
    assert_eq!(by_id.code, 1);
    let message = by_id.json_error()["message"].as_str().unwrap().to_owned();
    assert!(message.contains("uses .jsonl.zstd"), "{message}");
}
