//! One writer per session, with real processes: two writer processes race for one session,
//! round after round, through the library (`Persistence` over a `JsonlBackend`, in both
//! encodings). Each writer is this test binary re-executed with `REL_WRITERS_ROLE` set.
//!
//! A writer opens the session (creates it, or resumes it through `Persistence::prepare`),
//! prints `open`, waits for `go` on its standard input, writes one complete turn of its own,
//! flushes, disposes and prints `ok`; any failure prints `err <message>` and exits 3.
//!
//! * **create**: both writers create the same new session and are told to write at once; one
//!   publishes, the other is refused at publication and writes nothing.
//! * **resume**: the log ends in a closed turn, so resuming writes a `session/end-seed` at
//!   open; the second writer must be refused when it opens, while the first still holds the
//!   session (the test sends `go` only once both writers reported).
//! * **stale resume**: the log already ends in a `session/end-seed` (after an earlier resume,
//!   or a fork child), so opening writes nothing; the first writer holds the session without
//!   writing and the second must still be refused when it opens.
//!
//! After every round the stored log is read back: every seq from 0 appears exactly once (no
//! duplicate, no gap, no torn tail) and the events after the seed are exactly the winner's.
//! `SESSION_WRITER_ROUNDS` overrides the number of rounds (default 200).
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

mod common;
mod coord;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use common::{TempDir, copy_tree};
use coord::{complete_turn, meta_value, store};
use session_core::json::Value;
use session_core::{Event, SessionHeader};
use session_persist::{
    Backend, Compression, Error, JsonlBackend, JsonlConfig, Persistence, PersistenceOptions,
};
use session_store::PrepareOptions;

const ROLE: &str = "REL_WRITERS_ROLE";
/// What precedes every protocol line of a writer.
const MARK: &str = "@writer: ";
const ID: &str = "s";
const CWD: &str = "/proj";

fn rounds() -> usize {
    std::env::var("SESSION_WRITER_ROUNDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(200)
}

fn compression_of(name: &str) -> Compression {
    match name {
        "none" => Compression::None,
        _ => Compression::Zstd,
    }
}

fn backend(root: &Path, compression: Compression) -> Arc<JsonlBackend> {
    Arc::new(JsonlBackend::open(JsonlConfig::new(root).compression(compression)).unwrap())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

// ---- the writer process ----

/// The writer role: `<create|resume> <none|zstd> <root> <turn>`.
fn writer(spec: &str) {
    let parts: Vec<&str> = spec.splitn(4, ' ').collect();
    let [mode, compression, root, turn] = parts[..] else {
        panic!("bad role {spec}");
    };
    let turn: u64 = turn.parse().unwrap();
    let outcome = runtime().block_on(write_one_turn(
        mode,
        compression_of(compression),
        Path::new(root),
        turn,
    ));
    let mut out = std::io::stdout();
    match outcome {
        Ok(()) => {
            writeln!(out, "{MARK}ok").unwrap();
            out.flush().unwrap();
        }
        Err(message) => {
            writeln!(out, "{MARK}err {}", message.replace('\n', " ")).unwrap();
            out.flush().unwrap();
            std::process::exit(3);
        }
    }
}

async fn write_one_turn(
    mode: &str,
    compression: Compression,
    root: &Path,
    turn: u64,
) -> Result<(), String> {
    let text = |e: &dyn std::fmt::Display| e.to_string();
    let backend = JsonlBackend::open(JsonlConfig::new(root).compression(compression))
        .map_err(|e| text(&e))?;
    let sessions = store();
    let persistence = Persistence::new(
        Arc::new(backend),
        sessions.clone(),
        PersistenceOptions::default(),
    )
    .map_err(|e| text(&e))?;
    let mut _preparation = None;
    let mut _detach = None;
    let session = if mode == "create" {
        let (session, detach) = sessions
            .create(
                Some(ID),
                PrepareOptions {
                    meta: Some(meta_value(Some(CWD))),
                    ..PrepareOptions::default()
                },
            )
            .map_err(|e| text(&e))?;
        _detach = Some(detach);
        session
    } else {
        let preparation = persistence.prepare(ID, None).await.map_err(|e| text(&e))?;
        let session = preparation.session().clone();
        sessions.enter(&session).map_err(|e| text(&e))?;
        sessions.announce(&session).map_err(|e| text(&e))?;
        _preparation = Some(preparation);
        session
    };
    let mut out = std::io::stdout();
    writeln!(out, "{MARK}open").unwrap();
    out.flush().unwrap();
    let mut go = String::new();
    std::io::stdin().lock().read_line(&mut go).unwrap();
    assert_eq!(go.trim(), "go");
    complete_turn(&session, turn);
    sessions.flush(&session).await.map_err(|e| text(&e))?;
    persistence.dispose().await.map_err(|e| text(&e))
}

// ---- the race ----

/// A running writer process and the lines it printed.
struct Writer {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
}

impl Writer {
    fn spawn(test: &str, mode: &str, compression: &str, root: &Path, turn: u64) -> Writer {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", test, "--nocapture", "--test-threads", "1"])
            .env(
                ROLE,
                format!("{mode} {compression} {} {turn}", root.display()),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                // The harness prints its own text too, even on the same line.
                if let Some((_, said)) = line.split_once(MARK) {
                    let _ = tx.send(said.to_owned());
                }
            }
        });
        Writer {
            stdin: child.stdin.take(),
            child,
            lines,
        }
    }

    /// The writer's next protocol line (at most 60 s: a writer that hangs fails the round).
    fn next(&self) -> String {
        self.lines
            .recv_timeout(Duration::from_secs(60))
            .expect("the writer printed nothing within 60 s")
    }

    fn go(&mut self) {
        let mut stdin = self.stdin.take().unwrap();
        writeln!(stdin, "go").unwrap();
    }

    fn exit_code(&mut self) -> Option<i32> {
        drop(self.stdin.take());
        self.child.wait().unwrap().code()
    }
}

/// Builds the seed root of a mode: nothing (create), one closed turn (resume), or one closed
/// turn and a resume that wrote its `session/end-seed` (stale resume).
fn seed_root(root: &Path, mode: &str, compression: Compression) {
    if mode == "create" {
        return;
    }
    let rt = runtime();
    rt.block_on(async {
        let sessions = store();
        let p = Persistence::new(
            backend(root, compression),
            sessions.clone(),
            PersistenceOptions::default(),
        )
        .unwrap();
        let (session, detach) = sessions
            .create(
                Some(ID),
                PrepareOptions {
                    meta: Some(meta_value(Some(CWD))),
                    ..PrepareOptions::default()
                },
            )
            .unwrap();
        complete_turn(&session, 1);
        sessions.flush(&session).await.unwrap();
        detach.detach();
        p.dispose().await.unwrap();
        if mode == "stale" {
            let sessions = store();
            let p = Persistence::new(
                backend(root, compression),
                sessions.clone(),
                PersistenceOptions::default(),
            )
            .unwrap();
            let preparation = p.prepare(ID, None).await.unwrap();
            let session = preparation.session().clone();
            sessions.enter(&session).unwrap();
            sessions.announce(&session).unwrap();
            sessions.flush(&session).await.unwrap();
            p.dispose().await.unwrap();
        }
    });
    let stored = stored_events(root, compression);
    let last = stored.last().unwrap().event_type().to_owned();
    let expected = if mode == "stale" {
        "session/end-seed"
    } else {
        "turn/end"
    };
    assert_eq!(last, expected, "the seed log of {mode}");
}

/// The stored events of the round's session, checked: readable, not torn, and every seq from
/// 0 exactly once in the logical text (a duplicate a reader would cut as torn is counted too).
fn stored_events(root: &Path, compression: Compression) -> Vec<Event> {
    let rt = runtime();
    let b = backend(root, compression);
    let stored = rt.block_on(b.load_stored(ID)).unwrap().unwrap();
    assert!(stored.torn.is_none(), "a torn tail: {:?}", stored.torn);
    let raw = rt.block_on(b.read_raw(ID)).unwrap().unwrap();
    let mut seqs = Vec::new();
    for line in raw.content.lines().skip(1) {
        let value = Value::parse(line).unwrap();
        // Packed chunk rows carry several seqs; the writers here write none.
        seqs.push(value.get("seq").and_then(Value::as_u64).unwrap());
    }
    let expected: Vec<u64> = (0..seqs.len() as u64).collect();
    assert_eq!(seqs, expected, "duplicate or missing seqs in the log");
    assert_eq!(stored.events.len(), seqs.len());
    stored.events
}

fn user_ids(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e.event_type() == "user/message")
        .map(|e| e.data().get("id").unwrap().as_str().unwrap().to_owned())
        .collect()
}

/// Whether `message` is one of the typed refusals a losing writer may get. A losing creator
/// is refused wherever the race finds the winner: at publication (the link never overwrites),
/// or, when the winner published first, when its initialization finds the winner's log.
fn is_refusal(mode: &str, message: &str) -> bool {
    let locked = message.contains("session \"s\" is locked by another writer");
    match mode {
        "create" => {
            locked
                || message.contains(
                    "refusing to materialize \"s\": a log already exists on disk (load/resume it instead)",
                )
                || message.contains(
                    "session \"s\" already has a persisted log on disk; load/resume it instead of creating",
                )
                || message.contains(
                    "session \"s\" already has a persisted log on disk that does not match this live session (id collision)",
                )
        }
        _ => locked,
    }
}

/// The check after every round: the stored log reads back whole (see [`stored_events`]), the
/// seed is intact, and exactly one turn of the winner (whose turn number is `turn`) follows it,
/// after the `session/end-seed` a resume writes.
fn check_round(
    round: usize,
    root: &Path,
    compression: Compression,
    mode: &str,
    seed: &[Event],
    turn: u64,
) {
    let events = stored_events(root, compression);
    assert_eq!(
        &events[..seed.len()],
        seed,
        "round {round}: the seed is intact"
    );
    let mut expected = user_ids(seed);
    expected.push(format!("u{turn}"));
    assert_eq!(
        user_ids(&events),
        expected,
        "round {round}: exactly one writer's events"
    );
    let added = events.len() - seed.len();
    let end_seed = usize::from(mode == "resume");
    assert_eq!(added, 6 + end_seed, "round {round}: one turn of the winner");
}

/// Races two writers over `rounds()` fresh copies of the mode's seed root.
fn race(test: &str, mode: &str, compression_name: &str) {
    let compression = compression_of(compression_name);
    let tmp = TempDir::new(&format!("writers-{mode}-{compression_name}"));
    let template = tmp.path().join("template");
    seed_root(&template, mode, compression);
    let seed = if mode == "create" {
        Vec::new()
    } else {
        stored_events(&template, compression)
    };
    let mut wins = [0usize; 2];
    for round in 0..rounds() {
        let root = tmp.path().join(format!("round-{round}"));
        if mode == "create" {
            std::fs::create_dir_all(&root).unwrap();
        } else {
            copy_tree(&template, &root);
        }
        let turns = [10u64, 20];
        let mut writers = turns.map(|t| Writer::spawn(test, mode, compression_name, &root, t));
        let winner = if mode == "create" {
            // Nothing to lock before publication: both open, both are told to write.
            for w in &writers {
                assert_eq!(w.next(), "open", "round {round}");
            }
            for w in &mut writers {
                w.go();
            }
            let finals = writers.each_ref().map(Writer::next);
            let winners: Vec<usize> = (0..2).filter(|&i| finals[i] == "ok").collect();
            assert_eq!(winners.len(), 1, "round {round}: {finals:?}");
            let winner = winners[0];
            let loser = &finals[1 - winner];
            assert!(is_refusal(mode, loser), "round {round}: {loser}");
            winner
        } else {
            // The second writer is refused when it opens, while the first holds the session.
            let firsts = writers.each_ref().map(Writer::next);
            let opened: Vec<usize> = (0..2).filter(|&i| firsts[i] == "open").collect();
            assert_eq!(opened.len(), 1, "round {round}: both opened: {firsts:?}");
            let winner = opened[0];
            let loser = &firsts[1 - winner];
            assert!(is_refusal(mode, loser), "round {round}: {loser}");
            writers[winner].go();
            assert_eq!(writers[winner].next(), "ok", "round {round}");
            winner
        };
        check_round(round, &root, compression, mode, &seed, turns[winner]);
        assert_eq!(writers[winner].exit_code(), Some(0), "round {round}");
        assert_eq!(writers[1 - winner].exit_code(), Some(3), "round {round}");
        wins[winner] += 1;
        std::fs::remove_dir_all(&root).unwrap();
    }
    eprintln!(
        "{mode}/{compression_name}: {} rounds, wins {wins:?}",
        rounds()
    );
}

/// Serializes the tests that check lock release inside this process against the tests that
/// start writer processes. A child between `fork` and `exec` holds a copy of every open file
/// descriptor of this process, so a `flock` released here stays held until that child has
/// exec'd (close-on-exec closes its copy then). The tests below expect a lock to be free the
/// moment it is released, which only holds while no process is being started.
static SPAWNING: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// Held by a test that starts processes (any number may run together).
fn spawning() -> std::sync::RwLockReadGuard<'static, ()> {
    SPAWNING
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Held by a test that expects a released lock to be free at once (runs alone among these).
fn exclusive() -> std::sync::RwLockWriteGuard<'static, ()> {
    SPAWNING
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

macro_rules! race_tests {
    ($($name:ident: $mode:literal, $compression:literal;)*) => {$(
        #[test]
        fn $name() {
            if let Ok(spec) = std::env::var(ROLE) {
                writer(&spec);
                return;
            }
            let _spawning = spawning();
            race(stringify!($name), $mode, $compression);
        }
    )*};
}

race_tests! {
    two_processes_creating_one_plain_session_exactly_one_writes: "create", "none";
    two_processes_creating_one_zstd_session_exactly_one_writes: "create", "zstd";
    two_processes_resuming_one_plain_session_exactly_one_writes: "resume", "none";
    two_processes_resuming_one_zstd_session_exactly_one_writes: "resume", "zstd";
    a_stale_plain_resume_is_refused_at_open: "stale", "none";
    a_stale_zstd_resume_is_refused_at_open: "stale", "zstd";
}

// ---- the tail check itself ----

/// A writer whose session was loaded from an older state of the log is stale: under the lock,
/// `acquire` compares the stored log with the revision the writer loaded, refuses with both
/// positions, writes nothing and keeps no lock; reloading and acquiring again succeeds.
#[test]
fn a_stale_writer_is_refused_with_both_positions_and_writes_nothing() {
    let _exclusive = exclusive();
    for (compression, name) in [(Compression::None, "none"), (Compression::Zstd, "zstd")] {
        let tmp = TempDir::new(&format!("stale-{name}"));
        let root = tmp.path().join("root");
        seed_root(&root, "resume", compression);
        let rt = runtime();
        let stale = backend(&root, compression);
        let loaded = rt.block_on(stale.load_stored(ID)).unwrap().unwrap();
        // Another writer (another backend instance) appends and lets go.
        let other = backend(&root, compression);
        rt.block_on(async {
            other
                .acquire(&loaded.meta, Some(&loaded.revision))
                .await
                .unwrap();
            let next = loaded.events.len() as u64;
            let closer = Event::parse(&format!(
                r#"{{"type":"todo/write","seq":{next},"time":1,"data":{{"todos":[]}}}}"#
            ))
            .unwrap();
            other
                .append_batch(&loaded.meta, &[closer], true)
                .await
                .unwrap();
            other.release(ID).await.unwrap();
        });
        let path = stale.log_path(&loaded.meta).unwrap();
        let before = std::fs::read(&path).unwrap();
        let err = rt
            .block_on(stale.acquire(&loaded.meta, Some(&loaded.revision)))
            .unwrap_err();
        let Error::StaleWriter {
            loaded_len,
            stored_len,
            ..
        } = &err
        else {
            panic!("{err}");
        };
        assert!(loaded_len.unwrap() < *stored_len, "{err}");
        let text = err.to_string();
        assert!(
            text.contains(&format!("ends at byte {}", loaded_len.unwrap()))
                && text.contains(&format!("the stored log ends at byte {stored_len}")),
            "{text}"
        );
        assert_eq!(std::fs::read(&path).unwrap(), before, "nothing written");
        // No lock was kept: a third instance can open the session.
        let third = backend(&root, compression);
        let current = rt.block_on(third.load_stored(ID)).unwrap().unwrap();
        rt.block_on(third.acquire(&current.meta, Some(&current.revision)))
            .unwrap();
        rt.block_on(third.release(ID)).unwrap();
        // Reloading makes the stale instance current again.
        let reloaded = rt.block_on(stale.load_stored(ID)).unwrap().unwrap();
        rt.block_on(stale.acquire(&reloaded.meta, Some(&reloaded.revision)))
            .unwrap();
    }
}

/// `flock` locks belong to open file descriptions: a second backend instance in this very
/// process is refused when it opens a session the first holds (before any write), and a
/// second service over it cannot resume the session; after the first releases, it can.
#[test]
fn a_second_instance_in_this_process_is_refused_at_open() {
    let _exclusive = exclusive();
    for (compression, name) in [(Compression::None, "none"), (Compression::Zstd, "zstd")] {
        let tmp = TempDir::new(&format!("same-process-{name}"));
        let root = tmp.path().join("root");
        seed_root(&root, "stale", compression);
        let rt = runtime();
        rt.block_on(async {
            let sessions = store();
            let first = Persistence::new(
                backend(&root, compression),
                sessions.clone(),
                PersistenceOptions::default(),
            )
            .unwrap();
            let preparation = first.prepare(ID, None).await.unwrap();
            // The log ends in a `session/end-seed`: opening wrote nothing, yet it is held.
            let second_store = store();
            let second = Persistence::new(
                backend(&root, compression),
                second_store.clone(),
                PersistenceOptions::default(),
            )
            .unwrap();
            let err = second.prepare(ID, None).await.unwrap_err();
            assert_eq!(err.to_string(), "session \"s\" is locked by another writer");
            let direct = backend(&root, compression);
            let loaded = direct.load_stored(ID).await.unwrap().unwrap();
            let err = direct
                .acquire(&loaded.meta, Some(&loaded.revision))
                .await
                .unwrap_err();
            assert!(matches!(err, Error::Locked { .. }), "{err}");
            drop(preparation);
            first.dispose().await.unwrap();
            let again = second.prepare(ID, None).await.unwrap();
            drop(again);
            second.dispose().await.unwrap();
        });
    }
}

/// One backend instance is one set of locks, yet two services sharing it are two writers: the
/// second cannot open a session the first opened (resumed, created and published, or
/// registered for creation and not yet published), until the first retires it.
#[test]
fn a_second_service_over_the_same_instance_is_refused_at_open() {
    let _exclusive = exclusive();
    for (compression, name) in [(Compression::None, "none"), (Compression::Zstd, "zstd")] {
        let tmp = TempDir::new(&format!("shared-instance-{name}"));
        let root = tmp.path().join("root");
        seed_root(&root, "stale", compression);
        let rt = runtime();
        rt.block_on(async {
            let shared: Arc<dyn Backend> = backend(&root, compression);
            let (first_store, second_store) = (store(), store());
            let first = Persistence::new(
                shared.clone(),
                first_store.clone(),
                PersistenceOptions::default(),
            )
            .unwrap();
            let second = Persistence::new(
                shared.clone(),
                second_store.clone(),
                PersistenceOptions::default(),
            )
            .unwrap();
            let preparation = first.prepare(ID, None).await.unwrap();
            let session = preparation.session().clone();
            first_store.enter(&session).unwrap();
            first_store.announce(&session).unwrap();
            let err = second.prepare(ID, None).await.unwrap_err();
            assert_eq!(err.to_string(), "session \"s\" is locked by another writer");
            // A session the first service creates is refused to the second once published.
            let (created, created_detach) = first_store
                .create(
                    Some("n"),
                    PrepareOptions {
                        meta: Some(meta_value(Some(CWD))),
                        ..PrepareOptions::default()
                    },
                )
                .unwrap();
            complete_turn(&created, 1);
            first_store.flush(&created).await.unwrap();
            let err = second.prepare("n", None).await.unwrap_err();
            assert_eq!(err.to_string(), "session \"n\" is locked by another writer");
            // A new session opened (registered for lazy creation) by the first, not yet
            // published: the second cannot open it either.
            let mut lazy = SessionHeader::new("lazy", 1);
            lazy.cwd = Some(CWD.into());
            first.create(&lazy).await.unwrap();
            let err = second.create(&lazy).await.unwrap_err();
            assert_eq!(
                err.to_string(),
                "session \"lazy\" is locked by another writer"
            );
            // Retiring the first service's session releases it.
            drop(preparation);
            assert!(first_store.detach(&session));
            created_detach.detach();
            for _ in 0..500 {
                if !first.retiring(ID) && !first.retiring("n") {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            assert!(
                !first.retiring(ID),
                "the first service's session never retired"
            );
            drop(second.prepare(ID, None).await.unwrap());
            drop(second.prepare("n", None).await.unwrap());
            second.dispose().await.unwrap();
            first.dispose().await.unwrap();
        });
    }
}

/// A second service adopting a live session of its store (hot reload) writes nothing when it
/// adopts and takes no lock then; at its first append it opens the session, checked against
/// the revision it read: refused while the first service holds the session, and refused as
/// stale (nothing written, no duplicate seq) once the first service wrote more and let go.
#[test]
fn a_hot_reload_adoption_opens_at_its_first_append_against_what_it_read() {
    let _exclusive = exclusive();
    for (compression, name) in [(Compression::None, "none"), (Compression::Zstd, "zstd")] {
        let tmp = TempDir::new(&format!("hot-reload-{name}"));
        let root = tmp.path().join("root");
        let rt = runtime();
        rt.block_on(async {
            let sessions = store();
            let first = Persistence::new(
                backend(&root, compression),
                sessions.clone(),
                PersistenceOptions::default(),
            )
            .unwrap();
            let (session, _detach) = sessions
                .create(
                    Some(ID),
                    PrepareOptions {
                        meta: Some(meta_value(Some(CWD))),
                        ..PrepareOptions::default()
                    },
                )
                .unwrap();
            complete_turn(&session, 1);
            sessions.flush(&session).await.unwrap();
            // The second service adopts the live session: it reads the log, writes nothing.
            let second = Persistence::new(
                backend(&root, compression),
                sessions.clone(),
                PersistenceOptions::default(),
            )
            .unwrap();
            sessions.flush(&session).await.unwrap();
            complete_turn(&session, 2);
            let err = second.flush(&session).await.unwrap_err();
            assert_eq!(err.to_string(), "session \"s\" is locked by another writer");
            first.flush(&session).await.unwrap();
            first.dispose().await.unwrap();
            // Read on a thread of its own: `stored_events` runs its own runtime.
            let count = || {
                let root = root.clone();
                std::thread::spawn(move || stored_events(&root, compression).len())
                    .join()
                    .unwrap()
            };
            assert_eq!(count(), 12);
            complete_turn(&session, 3);
            let err = second.flush(&session).await.unwrap_err();
            assert!(
                err.to_string()
                    .contains("changed since this writer loaded it"),
                "{err}"
            );
            assert_eq!(count(), 12, "nothing written");
            let _ = second.dispose().await;
        });
    }
}
