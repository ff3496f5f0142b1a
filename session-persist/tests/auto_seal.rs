//! Auto-seal: a retired Zstandard session is sealed in the background, under the writer's
//! lock, crash-safely (real processes killed at every step of the seal and at random moments).
//!
//! `SESSION_SEAL_KILL_TRIALS` sets the number of random-timing kill rounds (default 8).
#![allow(clippy::case_sensitive_file_extension_comparisons)]
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

mod common;

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{TempDir, copy_tree, ev, meta, rt, texts, turn};
use session_core::{Event, SessionHeader};
use session_persist::jsonl::scan_zstd_frames;
use session_persist::{
    Backend, Compression, Error, JsonlBackend, JsonlConfig, SEAL_PAUSE_ENV, SealPolicy, SealStep,
};

/// A title event, then `turns` five-event turns.
fn session_events(turns: u64) -> Vec<Event> {
    let mut events = vec![ev("session/title", 0, r#"{"title":"t"}"#)];
    for n in 1..=turns {
        events.extend(turn(n, 1 + (n - 1) * 5));
    }
    events
}

fn backend(root: &Path, policy: SealPolicy) -> JsonlBackend {
    JsonlBackend::open(JsonlConfig::new(root).seal_policy(policy)).unwrap()
}

/// Appends `events` in batches of `batch` events, as a write-behind writer would.
fn write_batches(
    rt: &tokio::runtime::Runtime,
    b: &JsonlBackend,
    m: &SessionHeader,
    events: &[Event],
    batch: usize,
    materialized: bool,
) {
    for (i, chunk) in events.chunks(batch).enumerate() {
        rt.block_on(b.append_batch(m, chunk, materialized || i > 0))
            .unwrap();
    }
}

fn frames(path: &Path) -> usize {
    scan_zstd_frames(&std::fs::read(path).unwrap(), None)
        .unwrap()
        .frames
        .len()
}

fn temp_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect()
}

fn loaded(b: &JsonlBackend, id: &str) -> Vec<String> {
    let stored = rt().block_on(b.load_stored(id)).unwrap().unwrap();
    assert!(stored.torn.is_none(), "the log has a torn tail");
    texts(&stored.events)
}

#[test]
fn auto_seal_at_release_equals_an_explicit_seal() {
    let rt = rt();
    let events = session_events(30);
    let m = meta("s");

    let auto_dir = TempDir::new("autoseal-auto");
    let auto = backend(&auto_dir.root(), SealPolicy::default());
    write_batches(&rt, &auto, &m, &events, 2, false);
    let auto_path = auto.log_path(&m).unwrap();
    let frames_before = frames(&auto_path);
    assert_eq!(frames_before, 1 + events.len().div_ceil(2));
    rt.block_on(auto.release("s")).unwrap();
    let outcomes = rt.block_on(auto.settle_auto_seals());
    assert_eq!(outcomes.len(), 1);
    assert_eq!(outcomes[0].id, "s");
    let report = outcomes[0].result.as_ref().unwrap();
    assert!(report.rewritten);
    assert_eq!(report.frames_before, frames_before);
    assert_eq!(report.frames_after, 1 + 1 + 30);

    let explicit_dir = TempDir::new("autoseal-explicit");
    let explicit = backend(&explicit_dir.root(), SealPolicy::Never);
    write_batches(&rt, &explicit, &m, &events, 2, false);
    rt.block_on(explicit.release("s")).unwrap();
    assert!(rt.block_on(explicit.settle_auto_seals()).is_empty());
    let explicit_path = explicit.log_path(&m).unwrap();
    assert_eq!(
        frames(&explicit_path),
        frames_before,
        "Never sealed the log"
    );
    let sealed = rt.block_on(explicit.seal("s")).unwrap();
    assert_eq!(sealed, *report);

    assert_eq!(
        std::fs::read(&auto_path).unwrap(),
        std::fs::read(&explicit_path).unwrap(),
        "auto-seal and seal wrote different bytes"
    );
    assert_eq!(
        loaded(&backend(&auto_dir.root(), SealPolicy::Never), "s"),
        texts(&events)
    );
    assert!(temp_files(auto_path.parent().unwrap()).is_empty());
}

#[test]
fn the_policy_decides_which_logs_are_sealed() {
    let rt = rt();
    let events = session_events(30);
    let m = meta("s");
    let case = |tag: &str, policy: SealPolicy, batch: usize| {
        let dir = TempDir::new(tag);
        let b = backend(&dir.root(), policy);
        write_batches(&rt, &b, &m, &events, batch, false);
        let path = b.log_path(&m).unwrap();
        let before = std::fs::read(&path).unwrap();
        rt.block_on(b.release("s")).unwrap();
        let outcomes = rt.block_on(b.settle_auto_seals());
        let rewritten = std::fs::read(&path).unwrap() != before;
        let reported: Vec<bool> = outcomes
            .iter()
            .map(|o| o.result.as_ref().unwrap().rewritten)
            .collect();
        assert_eq!(loaded(&b, "s"), texts(&events), "{tag}");
        (rewritten, reported)
    };
    // Off.
    assert_eq!(
        case("autoseal-never", SealPolicy::Never, 1),
        (false, vec![])
    );
    // Fewer batches than the minimum: no job at all (151 events in batches of 3 is 51 < 64).
    assert_eq!(
        case("autoseal-few", SealPolicy::default(), 3),
        (false, vec![])
    );
    // Enough batches, frames too large on average: the job leaves the log as it is.
    let tiny = SealPolicy::OnRetire {
        max_average_frame_bytes: 16,
        min_frames: 4,
    };
    assert_eq!(case("autoseal-large", tiny, 1), (false, vec![false]));
    // Enough batches of small frames.
    assert_eq!(
        case("autoseal-small", SealPolicy::default(), 1),
        (true, vec![true])
    );
    // A plain log has no frames: never sealed.
    let dir = TempDir::new("autoseal-plain");
    let b =
        JsonlBackend::open(JsonlConfig::new(dir.root()).compression(Compression::None)).unwrap();
    write_batches(&rt, &b, &m, &events, 1, false);
    rt.block_on(b.release("s")).unwrap();
    assert!(rt.block_on(b.settle_auto_seals()).is_empty());
}

#[test]
fn a_session_with_an_open_turn_is_left_as_it_is() {
    let rt = rt();
    let mut events = session_events(20);
    let open = turn(21, events.len() as u64);
    events.extend_from_slice(&open[..2]);
    let m = meta("s");
    let dir = TempDir::new("autoseal-open-turn");
    let b = backend(&dir.root(), SealPolicy::default());
    write_batches(&rt, &b, &m, &events, 1, false);
    let path = b.log_path(&m).unwrap();
    let before = std::fs::read(&path).unwrap();
    rt.block_on(b.release("s")).unwrap();
    let outcomes = rt.block_on(b.settle_auto_seals());
    assert_eq!(outcomes.len(), 1);
    assert!(
        matches!(outcomes[0].result, Err(Error::SealRefused { .. })),
        "{:?}",
        outcomes[0].result
    );
    assert_eq!(std::fs::read(&path).unwrap(), before);
    assert!(temp_files(path.parent().unwrap()).is_empty());
}

/// A writer re-opening the session while the background seal runs waits for it, and opens the
/// sealed log with the revision it loaded before the seal; its appends follow the sealed turns.
#[test]
fn reopening_during_the_seal_waits_for_it_and_appends_after_it() {
    let rt = rt();
    let events = session_events(200);
    let m = meta("s");
    let dir = TempDir::new("autoseal-reopen");
    let b = backend(&dir.root(), SealPolicy::default());
    write_batches(&rt, &b, &m, &events, 1, false);
    let path = b.log_path(&m).unwrap();
    let frames_before = frames(&path);
    // The revision a new lifecycle loads the session from, before the seal.
    let loaded_rev = rt.block_on(b.read_stored_revision("s")).unwrap().unwrap();
    rt.block_on(b.release("s")).unwrap();
    // At once: the seal is (most likely) still running; either way acquire must succeed.
    rt.block_on(b.acquire(&m, Some(&loaded_rev))).unwrap();
    assert_eq!(frames(&path), 2 + 200, "the seal did not finish first");
    assert!(frames(&path) < frames_before);
    let more = turn(201, events.len() as u64);
    rt.block_on(b.append_batch(&m, &more, true)).unwrap();
    let mut all = events.clone();
    all.extend(more);
    assert_eq!(
        loaded(&backend(&dir.root(), SealPolicy::Never), "s"),
        texts(&all)
    );
    // A writer whose session was loaded from an older revision is still refused.
    rt.block_on(b.release("s")).unwrap();
    let _ = rt.block_on(b.settle_auto_seals());
    let err = rt.block_on(b.acquire(&m, Some(&loaded_rev))).unwrap_err();
    assert!(matches!(err, Error::StaleWriter { .. }), "{err:?}");
}

/// Another instance (as another process would) is refused while the seal holds the lock, and
/// opens the sealed log once it is done.
#[test]
fn another_instance_is_refused_while_the_seal_holds_the_lock() {
    let rt = rt();
    let events = session_events(200);
    let m = meta("s");
    let dir = TempDir::new("autoseal-other");
    let b = backend(&dir.root(), SealPolicy::default());
    write_batches(&rt, &b, &m, &events, 1, false);
    rt.block_on(b.release("s")).unwrap();
    let other = backend(&dir.root(), SealPolicy::Never);
    // Whatever it finds, the other instance never sees a mix.
    assert_eq!(loaded(&other, "s"), texts(&events));
    let _ = rt.block_on(b.settle_auto_seals());
    let rev = rt
        .block_on(other.read_stored_revision("s"))
        .unwrap()
        .unwrap();
    rt.block_on(other.acquire(&m, Some(&rev))).unwrap();
    assert_eq!(frames(&other.log_path(&m).unwrap()), 2 + 200);
}

// ---- Kill tests: a real process killed during the auto-seal ----

const ROLE: &str = "SESSION_AUTO_SEAL_KILL_CHILD";
const TURNS: u64 = 300;

/// The events of the template log plus the child's final turn.
fn all_events() -> Vec<Event> {
    let mut events = session_events(TURNS);
    events.extend(turn(TURNS + 1, events.len() as u64));
    events
}

/// Writes, under `dir`, a root holding session "k" written in batches of two events (many
/// small frames).
fn template(dir: &Path) -> PathBuf {
    let root = dir.join("template");
    let rt = rt();
    let b = backend(&root, SealPolicy::Never);
    write_batches(&rt, &b, &meta("k"), &session_events(TURNS), 2, false);
    rt.block_on(b.close()).unwrap();
    root
}

/// Writes a marker line to standard output (the parent reads it from a pipe).
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").unwrap();
    out.flush().unwrap();
}

/// The child: opens "k" for writing, appends the last turn in two batches, releases it (the
/// auto-seal starts), writes `released` to standard output, then waits for the seal.
fn child(root: &Path) {
    let rt = rt();
    let b = backend(
        root,
        SealPolicy::OnRetire {
            max_average_frame_bytes: 4096,
            min_frames: 2,
        },
    );
    let m = meta("k");
    let rev = rt.block_on(b.read_stored_revision("k")).unwrap().unwrap();
    rt.block_on(b.acquire(&m, Some(&rev))).unwrap();
    let last = turn(TURNS + 1, 1 + TURNS * 5);
    write_batches(&rt, &b, &m, &last, 3, true);
    rt.block_on(b.release("k")).unwrap();
    say("released");
    let started = Instant::now();
    let outcomes = rt.block_on(b.settle_auto_seals());
    assert!(outcomes[0].result.as_ref().unwrap().rewritten);
    say(&format!(
        "sealed after {} us",
        started.elapsed().as_micros()
    ));
}

/// Runs a child on a copy of the template; kills it (SIGKILL) when it has written `pause`'s
/// marker to standard error (or, without one, `delay` after it printed `released`). Returns
/// the root and whether the child had finished the seal.
fn kill_child(
    template: &Path,
    dir: &Path,
    pause: Option<SealStep>,
    delay: Duration,
) -> (PathBuf, bool) {
    let root = dir.join("root");
    copy_tree(template, &root);
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "a_seal_killed_at_any_step_leaves_the_acknowledged_events",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(ROLE, &root)
    .env_remove(SEAL_PAUSE_ENV)
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped());
    if let Some(step) = pause {
        cmd.env(SEAL_PAUSE_ENV, step.as_str());
    }
    let mut child = cmd.spawn().unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let tx2 = tx.clone();
    std::thread::spawn(move || {
        for line in stdout.lines().map_while(std::result::Result::ok) {
            let _ = tx.send(line);
        }
    });
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(std::result::Result::ok) {
            let _ = tx2.send(line);
        }
    });
    let wanted = pause.map_or_else(
        || "released".to_owned(),
        |s| format!("seal paused at {}", s.as_str()),
    );
    let started = Instant::now();
    let mut finished = false;
    let mut lines = Vec::new();
    loop {
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| {
                let _ = child.kill();
                panic!("the child never wrote {wanted:?}");
            });
        let found = line.contains(&wanted);
        lines.push(line);
        if found {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(60));
    }
    // A paused seal runs in the background: the release has returned (or returns) anyway.
    if pause.is_some() {
        while !lines.iter().any(|l| l.ends_with("released")) {
            let Ok(line) = rx.recv_timeout(Duration::from_secs(10)) else {
                let _ = child.kill();
                panic!("the release waited for the paused seal: {lines:?}");
            };
            lines.push(line);
        }
    }
    std::thread::sleep(delay);
    while let Ok(line) = rx.try_recv() {
        finished |= line.contains("sealed after");
        lines.push(line);
    }
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert!(
        finished || !status.success(),
        "the child was not killed: {lines:?}"
    );
    (root, finished)
}

/// Runs a child on a copy of the template to the end; returns how long its seal took (µs).
fn run_child_to_the_end(template: &Path, dir: &Path) -> u64 {
    let root = dir.join("root");
    copy_tree(template, &root);
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_seal_killed_at_any_step_leaves_the_acknowledged_events",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROLE, &root)
        .env_remove(SEAL_PAUSE_ENV)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("sealed after "))
        .and_then(|l| l.trim_end_matches(" us").parse().ok())
        .unwrap_or_else(|| panic!("no timing in {text:?}"))
}

/// After a kill: a fresh instance removes the leftover temporary file, loads exactly the
/// acknowledged events from a log that is either the original (all frames) or the sealed one
/// (one per turn), and a new writer appends to it. Returns whether the log was sealed.
fn check_after_kill(root: &Path, what: &str) -> bool {
    let rt = rt();
    let m = meta("k");
    let fresh = backend(root, SealPolicy::Never);
    let path = fresh.log_path(&m).unwrap();
    assert!(
        temp_files(path.parent().unwrap()).is_empty(),
        "{what}: a temporary file survived the next open"
    );
    let expected = all_events();
    assert_eq!(
        loaded(&fresh, "k"),
        texts(&expected),
        "{what}: events differ"
    );
    let original = 1 + (TURNS as usize * 5 + 1).div_ceil(2) + 2;
    let sealed = 1 + 1 + TURNS as usize + 1;
    let n = frames(&path);
    assert!(
        n == original || n == sealed,
        "{what}: {n} frames, neither the original {original} nor the sealed {sealed}"
    );
    let rev = rt
        .block_on(fresh.read_stored_revision("k"))
        .unwrap()
        .unwrap();
    rt.block_on(fresh.acquire(&m, Some(&rev))).unwrap();
    let more = turn(TURNS + 2, expected.len() as u64);
    rt.block_on(fresh.append_batch(&m, &more, true)).unwrap();
    let mut all = expected;
    all.extend(more);
    assert_eq!(
        loaded(&backend(root, SealPolicy::Never), "k"),
        texts(&all),
        "{what}"
    );
    n == sealed
}

#[test]
fn a_seal_killed_at_any_step_leaves_the_acknowledged_events() {
    if let Some(root) = std::env::var_os(ROLE) {
        child(Path::new(&root));
        return;
    }
    let base = TempDir::new("autoseal-kill");
    let template = template(base.path());
    for step in SealStep::ALL {
        let dir = TempDir::new(&format!("autoseal-kill-{}", step.as_str()));
        let (root, finished) = kill_child(&template, dir.path(), Some(step), Duration::ZERO);
        assert!(!finished);
        let sealed = check_after_kill(&root, step.as_str());
        assert_eq!(
            sealed,
            step == SealStep::Renamed,
            "{}: the log is sealed only once renamed",
            step.as_str()
        );
    }
}

#[test]
fn a_seal_killed_at_a_random_moment_leaves_the_acknowledged_events() {
    let trials: u64 = std::env::var("SESSION_SEAL_KILL_TRIALS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(8);
    // Calibration: one child that is not killed, timing its seal.
    let base = TempDir::new("autoseal-random");
    let template = template(base.path());
    let calibration = TempDir::new("autoseal-random-calibration");
    let seal_us = run_child_to_the_end(&template, calibration.path());
    assert!(check_after_kill(
        &calibration.path().join("root"),
        "calibration"
    ));
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut outcomes = [0usize; 2];
    for trial in 0..trials {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        // From at once to 1.5 times the seal's duration after the release returned.
        let delay = Duration::from_micros(state % (seal_us * 3 / 2 + 1));
        let dir = TempDir::new(&format!("autoseal-random-{trial}"));
        let (root, _) = kill_child(&template, dir.path(), None, delay);
        let sealed = check_after_kill(&root, &format!("trial {trial} ({delay:?})"));
        outcomes[usize::from(sealed)] += 1;
    }
    let _ = writeln!(
        std::io::stderr(),
        "random kills over a {seal_us} us seal: {} original, {} sealed",
        outcomes[0],
        outcomes[1]
    );
}
