//! Kill tests: a writer process appends turns (streamed chunks, tool calls) through a
//! `SessionStore` wired to `Persistence` over a `JsonlBackend`, records every acknowledged
//! flush in a side file, and is killed with SIGKILL at a random moment. The parent then checks
//! that every acknowledged event survived, that the stored log is a prefix of what the writer
//! meant to write, that `load` balances it, and that a later writer can append.
//!
//! `SESSION_CRASH_TRIALS` sets the number of trials (default 8), cycling over raw / zstd and
//! packed / unpacked chunk rows.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

mod coord;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use coord::{NOW, meta_value, step_end, step_start, store, turn_end, turn_start, user, v};
use session_core::Event;
use session_persist::{
    Backend, Compression, JsonlBackend, JsonlConfig, Persistence, PersistenceOptions,
};
use session_store::{PrepareOptions, SharedSession};
use session_surface::Draft;

const ROLE: &str = "SESSION_RELIABILITY_KILL_WRITER";
const ID: &str = "crash";
/// Turns the writer produces at most (it is normally killed long before).
const MAX_TURNS: u64 = 2_000;

/// The drafts of turn `turn`: a step with streamed chunks, an assistant message announcing a
/// tool call, the call and its result, a second step with the answer. `first` is the seq of the turn's first event.
fn turn_drafts(turn: u64, first: u64) -> Vec<Draft> {
    let chunks = 1 + turn % 5;
    let mut out = vec![
        turn_start(turn),
        user(&format!("u{turn}"), &format!("question {turn}")),
        step_start(turn, 1),
    ];
    for i in 0..chunks {
        out.push(Draft::new(
            "assistant/chunk",
            v(&format!(
                r#"{{"turn":{turn},"step":1,"chunk":{{"type":"text-delta","index":0,"text":"part {i} of turn {turn} "}}}}"#
            )),
        ));
    }
    out.push(
        Draft::new(
            "assistant/message",
            v(&format!(
                r#"{{"turn":{turn},"step":1,"message":{{"id":"m{turn}","role":"assistant","content":[{{"type":"tool-call","id":"c{turn}","name":"grep","arguments":{{"q":"x{turn}"}}}}],"source":{{"kind":"model","provider":"p","model":"m"}}}}}}"#
            )),
        )
        .append_op(),
    );
    let call_seq = first + out.len() as u64;
    out.push(Draft::new(
        "tool/call",
        v(&format!(
            r#"{{"turn":{turn},"step":1,"callId":"c{turn}","name":"grep","arguments":"{{}}"}}"#
        )),
    ));
    out.push(
        Draft::new(
            "tool/result",
            v(&format!(
                r#"{{"turn":{turn},"step":1,"message":{{"source":{{"kind":"tool","callId":"c{turn}"}},"content":[{{"type":"tool-result","toolCallId":"c{turn}","content":[{{"type":"text","text":"out {turn}"}}],"isError":false}}],"role":"user","id":"r{turn}"}}}}"#
            )),
        )
        .append_op()
        .sources(&[call_seq]),
    );
    out.push(step_end(turn, 1));
    out.push(step_start(turn, 2));
    out.push(coord::assistant(turn, 2, &format!("a{turn}"), "done"));
    out.push(step_end(turn, 2));
    out.push(turn_end(turn));
    out
}

/// Appends turn `turn` to `session`; returns the number of events appended.
fn append_turn(session: &SharedSession, turn: u64) -> u64 {
    let first = session.events().len() as u64;
    let drafts = turn_drafts(turn, first);
    let n = drafts.len() as u64;
    for d in drafts {
        session.append(d).unwrap();
    }
    n
}

/// What the writer intends to write: the same drafts through a store without persistence.
fn intended(min_len: usize) -> Vec<Event> {
    let store = store();
    let (session, _detach) = create(&store);
    let mut turn = 1;
    while session.events().len() < min_len {
        append_turn(&session, turn);
        turn += 1;
    }
    session.events().iter().cloned().collect()
}

fn create(store: &session_store::SessionStore) -> (SharedSession, session_store::Detach) {
    store
        .create(
            Some(ID),
            PrepareOptions {
                meta: Some(meta_value(Some("/proj"))),
                ..PrepareOptions::default()
            },
        )
        .unwrap()
}

#[derive(Debug, Clone, Copy)]
struct Variant {
    compression: Compression,
    pack: bool,
}

fn variant(trial: u64) -> Variant {
    Variant {
        compression: if trial.is_multiple_of(2) {
            Compression::None
        } else {
            Compression::Zstd
        },
        pack: (trial / 2).is_multiple_of(2),
    }
}

fn backend(root: &Path, var: Variant) -> JsonlBackend {
    JsonlBackend::open(
        JsonlConfig::new(root)
            .compression(var.compression)
            .pack_chunks(var.pack),
    )
    .unwrap()
}

/// The writer role: runs until killed (or `MAX_TURNS`).
fn writer(root: &Path, trial: u64) {
    let var = variant(trial);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let backend = Arc::new(backend(root, var));
        let store = store();
        let persistence = Persistence::new(
            backend,
            store.clone(),
            PersistenceOptions {
                write_batch_max_delay_ms: 5,
                ..PersistenceOptions::default()
            },
        )
        .unwrap();
        let (session, _detach) = create(&store);
        std::fs::create_dir_all(root).unwrap();
        let mut acks = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(root.join("acked"))
            .unwrap();
        for turn in 1..=MAX_TURNS {
            append_turn(&session, turn);
            // Flush on a deterministic but irregular schedule; the batching window writes the
            // rest in the background.
            if !(turn * 7 + trial).is_multiple_of(3) {
                let admitted = session.events().len();
                store.flush(&session).await.unwrap();
                writeln!(acks, "{admitted:020}").unwrap();
                acks.sync_all().unwrap();
            }
            if turn.is_multiple_of(4) {
                tokio::task::yield_now().await;
            }
        }
        persistence.dispose().await.unwrap();
    });
}

/// The last complete acknowledgement line (0 when none).
fn acknowledged(root: &Path) -> usize {
    let text = std::fs::read_to_string(root.join("acked")).unwrap_or_default();
    text.split_inclusive('\n')
        .filter(|l| l.len() == 21 && l.ends_with('\n'))
        .filter_map(|l| l.trim_end().parse::<usize>().ok())
        .max()
        .unwrap_or(0)
}

/// No open turn or step, and every tool call an assistant message announced has a result
/// (a recorded `tool/call` may be missing: the closer then reports the call as not started).
fn balanced(events: &[Event]) -> bool {
    let count = |ty: &str| events.iter().filter(|e| e.event_type() == ty).count();
    let announced = events
        .iter()
        .filter(|e| e.event_type() == "assistant/message")
        .filter(|e| e.data().to_json().contains(r#""type":"tool-call""#))
        .count();
    count("turn/start") == count("turn/end")
        && count("step/start") == count("step/end")
        && count("tool/result") == announced
        && count("tool/call") <= announced
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn trial_root(trial: u64) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rel-kill-{}-{trial}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Serialises spawning writer processes with the in-process open / close / reopen cycles of
/// the other tests. Between `fork` and `exec` a child shares every open file description of
/// this process, including a log whose `flock` a test just released by closing it, so a reopen
/// racing a spawn would see the log as locked by another writer.
static SPAWN: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// One trial; returns (acknowledged, stored) event counts.
fn run_trial(trial: u64, rng: &mut Rng) -> (usize, usize) {
    let dir = trial_root(trial);
    let root = dir.join("root");
    let var = variant(trial);
    // `spawn` returns once the child has exec'd (and so dropped the inherited descriptors).
    let spawning = SPAWN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_killed_writer_loses_nothing_it_acknowledged",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROLE, format!("{trial}:{}", root.display()))
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    drop(spawning);
    // Wait for the first acknowledgement (or a short while), then kill at a random moment.
    let started = Instant::now();
    while acknowledged(&root) == 0 && started.elapsed() < Duration::from_secs(20) {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("writer exited early: {status}");
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    std::thread::sleep(Duration::from_millis(rng.next() % 150));
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert!(
        !status.success(),
        "trial {trial}: the writer was not killed"
    );

    let acked = acknowledged(&root);
    let rt = coord_rt();
    // What survived on disk, before any repair.
    let fresh = backend(&root, var);
    let stored = rt
        .block_on(fresh.load_stored(ID))
        .unwrap()
        .map(|s| s.events)
        .unwrap_or_default();
    rt.block_on(fresh.close()).unwrap();
    assert!(
        stored.len() >= acked,
        "trial {trial} {var:?}: {acked} events acknowledged, {} stored",
        stored.len()
    );
    let expected = intended(stored.len() + 1);
    for (i, e) in stored.iter().enumerate() {
        assert_eq!(e, &expected[i], "trial {trial} {var:?}: event {i} differs");
    }

    // `load` commits the repair and leaves a balanced log; a later writer appends after it.
    rt.block_on(async {
        let persistence = Persistence::new(
            Arc::new(backend(&root, var)),
            store(),
            PersistenceOptions::default(),
        )
        .unwrap();
        if stored.is_empty() {
            assert!(persistence.load(ID).await.is_err(), "nothing was published");
        } else {
            let loaded = persistence.load(ID).await.unwrap();
            let events: Vec<Event> = loaded.events.iter().cloned().collect();
            assert_eq!(&events[..stored.len()], &stored[..]);
            assert!(
                balanced(&events),
                "trial {trial} {var:?}: load left an open turn; {} stored, tail: {}",
                stored.len(),
                events[events.len().saturating_sub(16)..]
                    .iter()
                    .map(Event::to_json)
                    .collect::<Vec<_>>()
                    .join("\n")
            );
            let next = events.len() as u64;
            let more = vec![
                coord::ev(&format!(
                    r#"{{"type":"turn/start","seq":{next},"time":1,"data":{{"turn":{}}}}}"#,
                    MAX_TURNS + 1
                )),
                coord::ev(&format!(
                    r#"{{"type":"turn/end","seq":{},"time":1,"data":{{"turn":{},"reason":{{"kind":"completed"}}}}}}"#,
                    next + 1,
                    MAX_TURNS + 1
                )),
            ];
            persistence.append(ID, &more).await.unwrap();
            let reloaded = persistence.inspect(ID, None).await.unwrap();
            assert_eq!(reloaded.events.len() as u64, next + 2);
        }
        persistence.dispose().await.unwrap();
    });
    let _ = std::fs::remove_dir_all(&dir);
    (acked, stored.len())
}

fn coord_rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn a_killed_writer_loses_nothing_it_acknowledged() {
    if let Ok(spec) = std::env::var(ROLE) {
        let (trial, root) = spec.split_once(':').unwrap();
        writer(Path::new(root), trial.parse().unwrap());
        return;
    }
    let trials: u64 = std::env::var("SESSION_CRASH_TRIALS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(8);
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    eprintln!("kill trials: {trials}, seed {seed}");
    let mut rng = Rng(seed);
    let started = Instant::now();
    let mut torn_beyond_ack = 0;
    for trial in 0..trials {
        let (acked, stored) = run_trial(trial, &mut rng);
        if stored > acked {
            torn_beyond_ack += 1;
        }
    }
    eprintln!(
        "kill trials: {trials} passed in {:?} ({torn_beyond_ack} stored more than acknowledged)",
        started.elapsed()
    );
}

#[test]
fn the_generator_is_deterministic_and_valid() {
    let a = intended(200);
    let b = intended(200);
    assert_eq!(a, b);
    assert!(a.iter().all(|e| e.time() == NOW));
    assert!(balanced(&a));
}

/// The deterministic core of the kill test: a log cut after any event of a turn is balanced
/// by `load`, whatever was cut (chunks, a tool call without its result, a step).
#[test]
fn load_balances_a_log_cut_after_any_event() {
    let intended = intended(34);
    let rt = coord_rt();
    for trial in 0..4 {
        let var = variant(trial);
        for cut in 1..=intended.len() {
            let dir = trial_root(1_000 + trial * 1_000 + cut as u64);
            let root = dir.join("root");
            let _no_spawn = SPAWN
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            rt.block_on(async {
                let b = backend(&root, var);
                let mut meta = session_core::SessionHeader::new(ID, 1_000);
                meta.cwd = Some("/proj".into());
                b.append_batch(&meta, &intended[..cut], false)
                    .await
                    .unwrap();
                b.close().await.unwrap();
                let p = Persistence::new(
                    Arc::new(backend(&root, var)),
                    store(),
                    PersistenceOptions::default(),
                )
                .unwrap();
                let events: Vec<Event> = p.load(ID).await.unwrap().events.iter().cloned().collect();
                assert_eq!(&events[..cut], &intended[..cut]);
                assert!(
                    balanced(&events),
                    "{var:?} cut {cut}: {}",
                    events[cut.saturating_sub(4)..]
                        .iter()
                        .map(Event::to_json)
                        .collect::<Vec<_>>()
                        .join("\n")
                );
                p.dispose().await.unwrap();
            });
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}
