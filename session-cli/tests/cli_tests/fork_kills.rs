//! `sessionctl fork` and `sessionctl convert` killed with SIGKILL at points spread over their
//! run: the child (the copy) is either absent or complete, never a prefix of the seed. In a
//! JSONL root, and in the database stores (`SQLite`; `PostgreSQL` when a server is reachable).
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::stores::Schema;
use crate::common::{BIN, Temp, run, run_in};

/// Turns in the parent: each is a batch of its own when copied, so a copy writes thousands.
const TURNS: usize = 3_000;

/// Kill trials per command.
fn trials() -> usize {
    std::env::var("SESSIONCTL_FORK_KILL_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12)
}

/// A parent of [`TURNS`] closed turns in `root`, as session "p"; returns its event count.
fn parent(root: &Path) -> u64 {
    let mut drafts = String::new();
    for turn in 1..=TURNS {
        write!(
            drafts,
            "{{\"type\":\"turn/start\",\"data\":{{\"turn\":{turn}}}}}\n\
             {{\"type\":\"user/message\",\"data\":{{\"id\":\"u{turn}\",\"role\":\"user\",\"content\":[{{\"type\":\"text\",\"text\":\"message {turn}\"}}],\"source\":{{\"kind\":\"user\"}}}},\"surfaceOp\":\"append\"}}\n\
             {{\"type\":\"turn/end\",\"data\":{{\"turn\":{turn},\"reason\":{{\"kind\":\"completed\"}}}}}}\n"
        )
        .unwrap();
    }
    drafts.push_str("{\"flush\":true}\n");
    let r = root.to_str().unwrap();
    run_in(
        &["--root", r, "append", "p", "--create", "--cwd", "/work/p"],
        Some(&drafts),
    )
    .ok();
    event_count(r, "p").unwrap()
}

/// The stored event count of `id` and that nothing would be repaired, or `None` when `id`
/// does not exist.
fn event_count(root: &str, id: &str) -> Option<u64> {
    stored_count(&["--root", root], id)
}

/// [`event_count`] in the store that `store` (`--root DIR` or `--store SPEC`) names.
fn stored_count(store: &[&str], id: &str) -> Option<u64> {
    let mut args = vec!["--json"];
    args.extend_from_slice(store);
    args.extend(["inspect", id]);
    let out = run(&args);
    if out.code != 0 {
        assert!(
            out.stderr.contains("not found"),
            "{id} exists but cannot be read: {}",
            out.stderr
        );
        return None;
    }
    let report = out.json();
    assert_eq!(report["closers"], serde_json::json!([]), "{report}");
    assert!(report["tornTail"].is_null(), "{report}");
    assert_eq!(report["eventCount"], report["storedEventCount"], "{report}");
    Some(report["storedEventCount"].as_u64().unwrap())
}

/// Runs `args` to completion and returns how long it took.
fn timed(args: &[&str]) -> Duration {
    let start = Instant::now();
    run(args).ok();
    start.elapsed()
}

/// Starts `args`, kills it with SIGKILL after `delay` (unless it exited first), and says
/// whether it was killed.
fn killed_after(args: &[&str], delay: Duration) -> bool {
    let mut child = Command::new(BIN)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(delay);
    let killed = child.try_wait().unwrap().is_none();
    let _ = child.kill();
    child.wait().unwrap();
    killed
}

/// Kills `command(i)` at delays spread over `full` (the time of an unkilled run) and checks
/// each outcome with `check(i)`; at least one trial must be killed before the end.
fn kill_trials(full: Duration, command: impl Fn(usize) -> Vec<String>, check: impl Fn(usize)) {
    let n = trials();
    let mut killed = 0;
    for i in 0..n {
        let delay = full.mul_f64((i as f64 + 0.5) / n as f64);
        let args = command(i);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        killed += usize::from(killed_after(&args, delay));
        check(i);
    }
    assert!(killed > 0, "every run ended before its kill ({full:?})");
}

#[test]
fn a_killed_fork_leaves_no_child_or_the_whole_child() {
    let base = Temp::new("fork-kills");
    let root = base.path().join("root");
    let seed = parent(&root);
    let r = root.to_str().unwrap().to_owned();
    let full = timed(&["--root", &r, "fork", "p", "--id", "whole"]);
    assert_eq!(event_count(&r, "whole"), Some(seed + 1));
    kill_trials(
        full,
        |i| {
            ["--root", &r, "fork", "p", "--id", &format!("kid{i}")]
                .map(str::to_owned)
                .to_vec()
        },
        |i| {
            let count = event_count(&r, &format!("kid{i}"));
            assert!(
                count.is_none() || count == Some(seed + 1),
                "kid{i}: {count:?} events of {}",
                seed + 1
            );
        },
    );
}

#[test]
fn a_killed_convert_leaves_no_copy_or_the_whole_copy() {
    let base = Temp::new("convert-kills");
    let root = base.path().join("root");
    let seed = parent(&root);
    let r = root.to_str().unwrap().to_owned();
    let dest = |name: &str| -> PathBuf { base.path().join(name) };
    let full = timed(&[
        "--root",
        &r,
        "convert",
        "p",
        &format!("jsonl:{}", dest("whole").display()),
    ]);
    assert_eq!(
        event_count(dest("whole").to_str().unwrap(), "p"),
        Some(seed)
    );
    kill_trials(
        full,
        |i| {
            [
                "--root".to_owned(),
                r.clone(),
                "convert".to_owned(),
                "p".to_owned(),
                format!("jsonl:{}", dest(&format!("copy{i}")).display()),
            ]
            .to_vec()
        },
        |i| {
            let copy = dest(&format!("copy{i}"));
            let count = if copy.exists() {
                event_count(copy.to_str().unwrap(), "p")
            } else {
                None
            };
            assert!(
                count.is_none() || count == Some(seed),
                "copy{i}: {count:?} events of {seed}"
            );
        },
    );
}

/// `fork` inside a database store (`store`: a `--store` spec holding the parent "p" of `seed`
/// events), killed at points spread over its run: each child is absent or whole.
fn fork_kills_in(store: &str, seed: u64) {
    let full = timed(&["--store", store, "fork", "p", "--id", "whole"]);
    assert_eq!(stored_count(&["--store", store], "whole"), Some(seed + 1));
    kill_trials(
        full,
        |i| {
            ["--store", store, "fork", "p", "--id", &format!("kid{i}")]
                .map(str::to_owned)
                .to_vec()
        },
        |i| {
            let count = stored_count(&["--store", store], &format!("kid{i}"));
            assert!(
                count.is_none() || count == Some(seed + 1),
                "{store}: kid{i}: {count:?} events of {}",
                seed + 1
            );
        },
    );
}

#[test]
fn a_killed_fork_in_sqlite_leaves_no_child_or_the_whole_child() {
    let base = Temp::new("fork-kills-sqlite");
    let root = base.path().join("root");
    let seed = parent(&root);
    let store = format!("sqlite:{}", base.path().join("db").join("s.db").display());
    let r = root.to_str().unwrap();
    run(&["--root", r, "convert", "p", &store]).ok();
    fork_kills_in(&store, seed);
}

#[test]
fn a_killed_fork_in_postgres_leaves_no_child_or_the_whole_child() {
    let Some(schema) =
        Schema::create("a_killed_fork_in_postgres_leaves_no_child_or_the_whole_child")
    else {
        return;
    };
    let base = Temp::new("fork-kills-postgres");
    let root = base.path().join("root");
    let seed = parent(&root);
    let store = schema.store();
    run(&["--root", root.to_str().unwrap(), "convert", "p", &store]).ok();
    fork_kills_in(&store, seed);
}
