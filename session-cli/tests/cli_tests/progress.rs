//! Progress on a terminal: loading a file shows bytes read against its size with the rate
//! and the time left; writing phases show bytes written; nothing reaches stdout, and nothing
//! is shown when stderr is not a terminal. The terminal is a pseudo-terminal made by
//! util-linux `script`; stdout is redirected to a file so the terminal shows stderr only.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

use std::process::Command;

use crate::common::{BIN, Temp, run_env, write_large};

/// Runs `sessionctl args` with stderr on a pseudo-terminal and stdout into `stdout_file`;
/// returns what the terminal showed.
fn stderr_on_terminal(args: &[&str], stdout_file: &std::path::Path) -> String {
    let mut line = String::from("stty rows 50 cols 160; ");
    line.push_str(BIN);
    for a in args {
        line.push_str(" '");
        line.push_str(a);
        line.push('\'');
    }
    line.push_str(" > '");
    line.push_str(stdout_file.to_str().unwrap());
    line.push('\'');
    let out = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .env("NO_COLOR", "1")
        .env("SESSIONCTL_PROGRESS_GRACE_MS", "0")
        .output()
        .expect("util-linux `script` runs a pseudo-terminal");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn progress_shows_bytes_rate_and_eta_on_a_terminal_only() {
    if !conformance::skip::unless_allowed(
        "SESSION_TEST_ALLOW_NO_SCRIPT",
        "progress test: util-linux `script` is not installed",
        || Command::new("script").arg("--version").output().is_ok(),
    ) {
        return;
    }
    let root = Temp::new("progress");
    // about 48 MB: a debug build reads it for well over one sampling tick
    let size = write_large(root.path(), "big", 2_000, 12_000);
    let out = Temp::new("progress-out");
    let stdout_file = out.path().join("stdout");
    let shown = stderr_on_terminal(
        &["--root", root.str(), "header", "big", "--json"],
        &stdout_file,
    );
    assert!(shown.contains("reading big"), "{shown}");
    assert!(shown.contains("ETA"), "rate and ETA: {shown}");
    assert!(shown.contains("/s"), "rate: {shown}");
    let total = format!("{:.2} MiB", size as f64 / 1024.0 / 1024.0);
    assert!(shown.contains(&total), "the file's size {total}: {shown}");
    // stdout is exactly the JSON document, no progress in it
    let doc = std::fs::read_to_string(&stdout_file).unwrap();
    assert!(doc.starts_with('{') && doc.ends_with("}\n"), "{doc}");
    assert!(!doc.contains("reading"), "{doc}");

    // a writing phase shows bytes written
    let dest = Temp::new("progress-dest");
    let shown = stderr_on_terminal(
        &["--root", root.str(), "convert", "big", dest.str()],
        &stdout_file,
    );
    assert!(shown.contains("writing big into"), "{shown}");
    assert!(shown.contains("written"), "{shown}");

    // stats shows every read it makes: the log streamed once (its events and logical text
    // together), then the file
    let shown = stderr_on_terminal(&["--root", root.str(), "stats", "big"], &stdout_file);
    for label in ["reading big", "reading the file of big"] {
        assert!(shown.contains(label), "{label}: {shown}");
    }
    let doc = std::fs::read_to_string(&stdout_file).unwrap();
    assert!(!doc.contains("reading"), "{doc}");

    // seal shows its rewrite (on the zstd copy convert wrote)
    let shown = stderr_on_terminal(
        &["--root", dest.str(), "--compression", "zstd", "seal", "big"],
        &stdout_file,
    );
    assert!(shown.contains("sealing big"), "{shown}");

    // not a terminal: nothing on stderr
    let piped = run_env(
        &["--root", root.str(), "header", "big"],
        None,
        &[("SESSIONCTL_PROGRESS_GRACE_MS", "0")],
    )
    .ok();
    assert!(piped.stderr.is_empty(), "{}", piped.stderr);
    let piped = run_env(
        &["--root", root.str(), "stats", "big"],
        None,
        &[("SESSIONCTL_PROGRESS_GRACE_MS", "0")],
    )
    .ok();
    assert!(piped.stderr.is_empty(), "{}", piped.stderr);
}
