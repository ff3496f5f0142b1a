//! One writer per session through `sessionctl append`, with real processes: two `append`
//! processes race for one session, round after round, in both encodings.
//!
//! * **create**: both run `append s --create` with their drafts ready; exactly one writes the
//!   session, the other is refused (when it opens, if the winner published first, or at
//!   publication) and exits 1.
//! * **resume**: the log ends in a closed turn (resuming writes a `session/end-seed` at open);
//!   both resume with their standard input held open. The second is refused when it opens,
//!   while the first still waits for input, and exits 1 with `locked by another writer`; only
//!   then does the first get its drafts.
//! * **stale resume**: the same, on a log that already ends in a `session/end-seed` (after an
//!   earlier resume, as after a fork), where opening writes nothing.
//!
//! After every round the log file is decoded directly: every seq from 0 appears exactly once
//! (no duplicate, no gap) and the events after the seed are exactly the winner's.
//! `SESSION_WRITER_ROUNDS` overrides the number of rounds (default 200).
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{BIN, Temp, run_in, unzstd};
use serde_json::Value;

fn rounds() -> usize {
    std::env::var("SESSION_WRITER_ROUNDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(200)
}

/// The drafts of writer `name`: one closed turn whose user message id is `name`.
fn drafts(name: &str) -> String {
    format!(
        "{{\"type\":\"turn/start\",\"data\":{{\"turn\":2}}}}\n\
         {{\"type\":\"user/message\",\"data\":{{\"id\":\"{name}\",\"role\":\"user\",\"content\":[{{\"type\":\"text\",\"text\":\"{name}\"}}],\"source\":{{\"kind\":\"user\"}}}},\"surfaceOp\":\"append\"}}\n\
         {{\"type\":\"turn/end\",\"data\":{{\"turn\":2,\"reason\":{{\"kind\":\"completed\"}}}}}}\n"
    )
}

fn base_args<'a>(root: &'a str, compression: &'a str) -> Vec<&'a str> {
    vec!["--root", root, "--compression", compression, "append", "s"]
}

fn log_path(root: &Path, compression: &str) -> PathBuf {
    let name = if compression == "zstd" {
        "session.jsonl.zstd"
    } else {
        "session.jsonl"
    };
    root.join("--w--/s").join(name)
}

/// The records of the log, decoded from the file itself; asserts that every seq from 0
/// appears exactly once.
fn records(root: &Path, compression: &str) -> Vec<Value> {
    let path = log_path(root, compression);
    let bytes = if compression == "zstd" {
        unzstd(&path)
    } else {
        std::fs::read(&path).unwrap()
    };
    let text = String::from_utf8(bytes).unwrap();
    let records: Vec<Value> = text
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let seqs: Vec<u64> = records.iter().map(|r| r["seq"].as_u64().unwrap()).collect();
    let expected: Vec<u64> = (0..seqs.len() as u64).collect();
    assert_eq!(
        seqs,
        expected,
        "duplicate or missing seqs in {}",
        path.display()
    );
    records
}

fn user_ids(records: &[Value]) -> Vec<String> {
    records
        .iter()
        .filter(|r| r["type"] == "user/message")
        .map(|r| r["data"]["id"].as_str().unwrap().to_owned())
        .collect()
}

fn copy_tree(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for entry in std::fs::read_dir(src).unwrap() {
        let entry = entry.unwrap();
        let to = dst.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &to);
        } else {
            std::fs::copy(entry.path(), &to).unwrap();
        }
    }
}

/// A running `sessionctl append`.
struct Writer {
    child: Child,
}

/// How a writer ended.
struct Ended {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Writer {
    fn spawn(args: &[&str]) -> Writer {
        let child = Command::new(BIN)
            .args(args)
            .env("NO_COLOR", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        Writer { child }
    }

    fn feed(&mut self, text: &str) {
        let mut stdin = self.child.stdin.take().unwrap();
        stdin.write_all(text.as_bytes()).unwrap();
    }

    fn exited(&mut self) -> bool {
        self.child.try_wait().unwrap().is_some()
    }

    fn end(mut self) -> Ended {
        drop(self.child.stdin.take());
        let status = self.child.wait().unwrap();
        let mut stdout = String::new();
        let mut stderr = String::new();
        self.child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut stdout)
            .unwrap();
        self.child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        Ended {
            code: status.code(),
            stdout,
            stderr,
        }
    }
}

/// Builds the mode's seed root with `sessionctl` itself.
fn seed_root(root: &Path, mode: &str, compression: &str) {
    std::fs::create_dir_all(root).unwrap();
    if mode == "create" {
        return;
    }
    let r = root.to_str().unwrap();
    let mut args = base_args(r, compression);
    args.extend(["--create", "--cwd", "/w"]);
    let turn = drafts("seed").replace("\"turn\":2", "\"turn\":1");
    let created = run_in(&args, Some(&turn)).ok();
    assert_eq!(created.stdout, "{\"flushed\":2}\n");
    if mode == "stale" {
        // A barrier alone publishes the resumed session: its `session/end-seed` is written.
        let resumed = run_in(&base_args(r, compression), Some("{\"flush\":true}\n")).ok();
        assert_eq!(resumed.stdout, "{\"flushed\":3}\n");
    }
}

fn is_refusal(mode: &str, stderr: &str) -> bool {
    let locked = stderr.contains("session \"s\" is locked by another writer");
    if mode != "create" {
        return locked;
    }
    locked
        || stderr.contains("session \"s\" already exists")
        || stderr.contains("refusing to materialize \"s\": a log already exists on disk")
        || stderr.contains("session \"s\" already has a persisted log on disk")
}

/// Waits (at most 30 s) until one of the writers exits; returns its index.
fn first_to_exit(writers: &mut [Writer; 2], round: usize) -> usize {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        for (i, w) in writers.iter_mut().enumerate() {
            if w.exited() {
                return i;
            }
        }
        assert!(
            Instant::now() < deadline,
            "round {round}: both writers opened the session and are waiting for input"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn race(mode: &str, compression: &str) {
    let tmp = Temp::new(&format!("writers-{mode}-{compression}"));
    let template = tmp.path().join("template");
    seed_root(&template, mode, compression);
    let seed = if mode == "create" {
        Vec::new()
    } else {
        records(&template, compression)
    };
    let names = ["A", "B"];
    let mut wins = [0usize; 2];
    for round in 0..rounds() {
        let root = tmp.path().join(format!("round-{round}"));
        copy_tree(&template, &root);
        let r = root.to_str().unwrap();
        let mut args = base_args(r, compression);
        if mode == "create" {
            args.extend(["--create", "--cwd", "/w"]);
        }
        let mut writers = [Writer::spawn(&args), Writer::spawn(&args)];
        let (winner, ended) = if mode == "create" {
            for (w, name) in writers.iter_mut().zip(names) {
                w.feed(&drafts(name));
            }
            let ended = writers.map(Writer::end);
            let winners: Vec<usize> = (0..2).filter(|&i| ended[i].code == Some(0)).collect();
            assert_eq!(
                winners.len(),
                1,
                "round {round}: {:?} / {:?}",
                ended[0].stderr,
                ended[1].stderr
            );
            (winners[0], ended)
        } else {
            let loser = first_to_exit(&mut writers, round);
            let winner = 1 - loser;
            writers[winner].feed(&drafts(names[winner]));
            let ended = writers.map(Writer::end);
            (winner, ended)
        };
        let loser = &ended[1 - winner];
        assert_eq!(loser.code, Some(1), "round {round}: {}", loser.stderr);
        assert!(
            is_refusal(mode, &loser.stderr),
            "round {round}: {}",
            loser.stderr
        );
        assert_eq!(
            loser.stdout, "",
            "round {round}: the loser acknowledged nothing"
        );
        wins[winner] += 1;

        let records = records(&root, compression);
        let last = records.len() - 1;
        assert_eq!(
            ended[winner].stdout,
            format!("{{\"flushed\":{last}}}\n"),
            "round {round}: {}",
            ended[winner].stderr
        );
        assert_eq!(&records[..seed.len()], &seed[..], "round {round}: the seed");
        let mut expected = user_ids(&seed);
        expected.push(names[winner].to_owned());
        assert_eq!(
            user_ids(&records),
            expected,
            "round {round}: exactly one writer's events"
        );
        let end_seed = usize::from(mode == "resume");
        assert_eq!(records.len() - seed.len(), 3 + end_seed, "round {round}");
        std::fs::remove_dir_all(&root).unwrap();
    }
    eprintln!("{mode}/{compression}: {} rounds, wins {wins:?}", rounds());
}

#[test]
fn two_appends_creating_one_plain_session_exactly_one_writes() {
    race("create", "none");
}

#[test]
fn two_appends_creating_one_zstd_session_exactly_one_writes() {
    race("create", "zstd");
}

#[test]
fn two_appends_resuming_one_plain_session_exactly_one_writes() {
    race("resume", "none");
}

#[test]
fn two_appends_resuming_one_zstd_session_exactly_one_writes() {
    race("resume", "zstd");
}

#[test]
fn a_stale_plain_append_is_refused_at_open() {
    race("stale", "none");
}

#[test]
fn a_stale_zstd_append_is_refused_at_open() {
    race("stale", "zstd");
}

/// The reproduction, timed as reported: writer B resumes a session whose log ends in a
/// `session/end-seed` and waits two seconds before its first draft; writer A starts half a
/// second later. A is refused when it opens (exit 1, nothing on stdout), B's turn is stored,
/// and the log has no duplicate seq.
#[test]
fn a_writer_waiting_before_its_first_write_keeps_the_session() {
    for compression in ["none", "zstd"] {
        let tmp = Temp::new(&format!("writers-repro-{compression}"));
        let root = tmp.path().join("root");
        seed_root(&root, "stale", compression);
        let r = root.to_str().unwrap();
        let mut b = Writer::spawn(&base_args(r, compression));
        std::thread::sleep(Duration::from_millis(500));
        let a = run_in(&base_args(r, compression), Some(&drafts("A")));
        assert_eq!(a.code, 1, "{}", a.stderr);
        assert!(
            a.stderr
                .contains("session \"s\" is locked by another writer"),
            "{}",
            a.stderr
        );
        assert_eq!(a.stdout, "");
        std::thread::sleep(Duration::from_millis(1500));
        b.feed(&drafts("B"));
        let b = b.end();
        assert_eq!(b.code, Some(0), "{}", b.stderr);
        assert_eq!(b.stdout, "{\"flushed\":6}\n");
        let records = records(&root, compression);
        assert_eq!(user_ids(&records), ["seed", "B"]);
    }
}
