//! `append` after a failed flush: the process exits, so its message says what is on disk (read
//! back), which events are lost with the process, and which input to feed to which command next;
//! following that advice completes the session.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::common::{BIN, Temp, run, run_in};

#[test]
fn a_failed_first_publication_says_nothing_is_on_disk_and_to_run_the_same_command_again() {
    let root = Temp::new("append-fail-create");
    // The project directory's name is taken by a file: publication fails.
    std::fs::write(root.path().join("--w--"), b"").unwrap();
    let input = "{\"type\":\"turn/start\",\"data\":{\"turn\":1}}\n{\"flush\":true}\n";
    let args = [
        "--root",
        root.str(),
        "append",
        "notes",
        "--create",
        "--cwd",
        "/w",
    ];
    let r = run_in(&args, Some(input));
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stdout.is_empty(), "nothing acknowledged: {}", r.stdout);
    assert!(r.stderr.contains("flush failed: ENOTDIR: "), "{}", r.stderr);
    assert!(
        r.stderr.contains(
            "hint: on disk: nothing of \"notes\"; lost when this process exits: event 0 \
             (accepted in memory, never written); fix the cause, then run the same command again \
             with the same input"
        ),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("stay in memory"), "{}", r.stderr);
    // Following the advice works.
    std::fs::remove_file(root.path().join("--w--")).unwrap();
    let again = run_in(&args, Some(input));
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert_eq!(
        again.stdout, "{\"flushed\":0}\n",
        "the barrier; the end of input repeats no acknowledgement"
    );
}

/// A tmpfs mounted at a fresh directory, unmounted on drop.
struct SmallFs(PathBuf);

/// Set to `1` to let the tmpfs test pass without running where `mount` is not permitted.
const ALLOW_SKIP: &str = "SESSION_TEST_ALLOW_NO_MOUNT";

impl SmallFs {
    fn mount(tag: &str) -> Option<SmallFs> {
        let at =
            std::env::temp_dir().join(format!("sessionctl-tmpfs-{tag}-{}", std::process::id()));
        let _ = Command::new("umount").arg(&at).status();
        let _ = std::fs::remove_dir_all(&at);
        std::fs::create_dir_all(&at).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs"])
            .arg(&at)
            .output();
        if out.as_ref().is_ok_and(|o| o.status.success()) {
            return Some(SmallFs(at));
        }
        let _ = std::fs::remove_dir(&at);
        let why = match out {
            Ok(o) => String::from_utf8_lossy(&o.stderr).into_owned(),
            Err(e) => e.to_string(),
        };
        conformance::skip::unless_allowed(
            ALLOW_SKIP,
            format_args!("cannot mount a small tmpfs (needs root): {why}"),
            || false,
        );
        None
    }

    /// Fills the file system completely.
    fn fill(&self) -> PathBuf {
        let path = self.0.join("filler");
        let mut filler = std::fs::File::create(&path).unwrap();
        let chunk = vec![0u8; 4096];
        while filler.write_all(&chunk).is_ok() {}
        path
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// A `todo/write` draft with `size` hex digits that do not compress well.
fn todo(n: usize, size: usize) -> String {
    let mut x = 0x9e37_79b9_7f4a_7c15_u64 ^ n as u64;
    let text: String = (0..size)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from(b"0123456789abcdef"[(x & 15) as usize])
        })
        .collect();
    format!("{{\"type\":\"todo/write\",\"data\":{{\"n\":{n},\"todos\":[\"{text}\"]}}}}")
}

#[test]
fn a_later_flush_failing_names_what_is_on_disk_what_is_lost_and_the_input_to_feed_next() {
    let Some(small) = SmallFs::mount("append") else {
        return;
    };
    let root = small.0.join("root");
    let root_text = root.to_str().unwrap().to_owned();
    let mut child = Command::new(BIN)
        .args([
            "--root", &root_text, "append", "live", "--create", "--cwd", "/w",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    // Lines 1-3: two events and a barrier, acknowledged.
    writeln!(stdin, "{{\"type\":\"turn/start\",\"data\":{{\"turn\":1}}}}").unwrap();
    writeln!(stdin, "{}", todo(1, 10)).unwrap();
    writeln!(stdin, "{{\"flush\":true}}").unwrap();
    stdin.flush().unwrap();
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line, "{\"flushed\":1}\n");
    // The file system fills up; lines 4-5 are accepted in memory, the barrier on line 6 fails.
    let filler = small.fill();
    writeln!(stdin, "{}", todo(2, 64 * 1024)).unwrap();
    writeln!(stdin, "{}", todo(3, 64 * 1024)).unwrap();
    writeln!(stdin, "{{\"flush\":true}}").unwrap();
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(output.stdout.is_empty(), "no second acknowledgement");
    assert!(stderr.contains("flush failed: ENOSPC: "), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "hint: on disk: events 0..=1 of \"live\"; lost when this process exits: events 2..=3 \
             (accepted in memory, never written); fix the cause, then feed input lines 4 and \
             after to `sessionctl --root {root_text} append live` (without --create: the stored \
             events are kept and not sent again)"
        )),
        "{stderr}"
    );
    assert!(!stderr.contains("stay in memory"), "{stderr}");

    // Following the advice completes the session: nothing duplicated, nothing missing.
    std::fs::remove_file(filler).unwrap();
    let rest = format!(
        "{}\n{}\n{{\"flush\":true}}\n",
        todo(2, 64 * 1024),
        todo(3, 64 * 1024)
    );
    let r = run_in(&["--root", &root_text, "append", "live"], Some(&rest));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = run(&["--root", &root_text, "stats", "live", "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // turn/start, todo 1 (first process); the repair's turn/end, the resume marker, todos 2
    // and 3 (the second): each todo exactly once.
    let stats = r.json();
    let count = |ty: &str| {
        stats
            .get("byType")
            .and_then(|v| v.as_array())
            .unwrap()
            .iter()
            .find(|row| row.get("type").and_then(|t| t.as_str()) == Some(ty))
            .and_then(|row| row.get("count").and_then(serde_json::Value::as_u64))
    };
    assert_eq!(count("turn/start"), Some(1), "{stats:?}");
    assert_eq!(count("todo/write"), Some(3), "{stats:?}");
    assert_eq!(
        stats.get("events").and_then(serde_json::Value::as_u64),
        Some(6)
    );
}
