//! `-` as SESSION reads a session file from stdin, plain or zstd, and leaves nothing behind.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

use std::io::Write;
use std::process::{Command, Stdio};

use crate::common::{BIN, Temp, run, unzstd};

fn with_stdin(args: &[&str], input: &[u8]) -> (i32, String, String) {
    let mut child = Command::new(BIN)
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pipe = child.stdin.take().unwrap();
    let input = input.to_vec();
    let feeder = std::thread::spawn(move || {
        let _ = pipe.write_all(&input);
    });
    let out = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn stdin_dirs() -> usize {
    std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("sessionctl-stdin-")
        })
        .count()
}

#[test]
fn a_dash_reads_the_session_file_from_stdin() {
    let before = stdin_dirs();
    let root = Temp::new("stdin");
    run(&["--root", root.str(), "demo"]).ok();
    let file = root.path().join("--demo-project--/demo/session.jsonl.zstd");
    let by_path = run(&["messages", file.to_str().unwrap(), "--json"]).ok();
    let zstd = std::fs::read(&file).unwrap();
    let plain = unzstd(&file);
    for input in [&zstd, &plain] {
        let (code, stdout, stderr) = with_stdin(&["messages", "-", "--json"], input);
        assert_eq!(code, 0, "{stderr}");
        let a: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        let b: serde_json::Value = serde_json::from_str(&by_path.stdout).unwrap();
        assert_eq!(a["messages"], b["messages"]);
        for cmd in ["transcript", "header", "stats", "inspect", "verify"] {
            let (code, _, stderr) = with_stdin(&[cmd, "-"], input);
            assert_eq!(code, 0, "{cmd}: {stderr}");
        }
    }
    let (code, _, stderr) = with_stdin(&["messages", "-"], b"");
    assert_eq!(code, 1);
    assert!(stderr.contains("standard input is empty"), "{stderr}");
    let (code, _, stderr) = with_stdin(&["inspect", "-"], b"not a log\n");
    assert_eq!(code, 1, "{stderr}");
    // writers do not take `-` from stdin as a file
    let (code, _, _) = with_stdin(&["--root", root.str(), "fork", "-"], &zstd);
    assert_eq!(code, 1);
    // The spooled copies are removed when the command ends, also when it failed (the one
    // test of this binary: no other spools concurrently).
    assert_eq!(stdin_dirs(), before);
}
