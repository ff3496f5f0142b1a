//! The session generator: cross-checked against `gen_session.py` on counts and sizes, and its
//! output restored through the JSONL backend and `Session::from_restore_events`.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use session_bench::generator::{BatchMode, Encodings, GenOptions, Manifest, generate};
use session_core::json::Value;
use session_core::{Event, Events, FixedClock, SharedClock};
use session_persist::Backend;
use session_persist::jsonl::{Compression, JsonlBackend, JsonlConfig};
use session_repair::interrupted_turn_closers;
use session_surface::Session;

const PYTHON_GENERATOR: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../shared/tools/gen_session.py"
);

/// Events per generator run in the cross-check: large enough for per-event ratios to settle
/// (about 110 steps and 12,000 write-behind batches), small enough for a debug build.
const CROSS_CHECK_EVENTS: u64 = 50_000;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("session-bench-gen-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

fn clock() -> SharedClock {
    Arc::new(FixedClock::new(1_800_000_000_000))
}

/// The manifest fields of `gen_session.py` that both generators write.
#[derive(Debug)]
struct Fields {
    events: f64,
    turns: f64,
    steps: f64,
    compactions: f64,
    storage_records: f64,
    durable_batches: f64,
    plaintext_bytes: f64,
    deltas: f64,
}

fn fields_of_json(v: &Value) -> Fields {
    let n = |k: &str| {
        v.get(k)
            .and_then(Value::as_f64)
            .unwrap_or_else(|| panic!("manifest field {k} missing"))
    };
    let deltas = v
        .get("chunkDeltasByKind")
        .and_then(Value::as_object)
        .map_or(0.0, |o| o.iter().filter_map(|(_, x)| x.as_f64()).sum());
    Fields {
        events: n("events"),
        turns: n("turns"),
        steps: n("steps"),
        compactions: n("compactions"),
        storage_records: n("storageRecords"),
        durable_batches: n("durableBatches"),
        plaintext_bytes: n("plaintextBytes"),
        deltas,
    }
}

fn fields_of(m: &Manifest) -> Fields {
    Fields {
        events: m.events as f64,
        turns: m.turns as f64,
        steps: m.steps as f64,
        compactions: m.compactions as f64,
        storage_records: m.storage_records as f64,
        durable_batches: m.durable_batches as f64,
        plaintext_bytes: m.plaintext_bytes as f64,
        deltas: m.chunk_deltas_by_kind.values().sum::<u64>() as f64,
    }
}

/// Relative difference `|a - b| / max(a, b)`.
fn rel(a: f64, b: f64) -> f64 {
    let m = a.max(b);
    if m == 0.0 { 0.0 } else { (a - b).abs() / m }
}

fn check(failures: &mut Vec<String>, mode: &str, what: &str, ours: f64, py: f64, tol: f64) {
    let d = rel(ours, py);
    println!(
        "{mode:12} {what:28} ours {ours:>14.3}  python {py:>14.3}  diff {:>5.1}% (tolerance {:.0}%)",
        d * 100.0,
        tol * 100.0
    );
    if d > tol {
        failures.push(format!(
            "{mode}: {what}: ours {ours} vs python {py} ({:.1}% > {:.0}%)",
            d * 100.0,
            tol * 100.0
        ));
    }
}

fn python_available() -> Option<String> {
    if !Path::new(PYTHON_GENERATOR).is_file() {
        return Some(format!("{PYTHON_GENERATOR} not found"));
    }
    match Command::new("python3").arg("--version").output() {
        Ok(o) if o.status.success() => None,
        _ => Some("python3 not runnable".to_owned()),
    }
}

fn run_python(out: &Path, batch: &str) -> Value {
    let status = Command::new("python3")
        .arg(PYTHON_GENERATOR)
        .args(["--out"])
        .arg(out)
        .args(["--events", &CROSS_CHECK_EVENTS.to_string()])
        .args([
            "--seed",
            "1",
            "--compression",
            "none",
            "--batch",
            batch,
            "--quiet",
        ])
        .status()
        .expect("run gen_session.py");
    assert!(status.success(), "gen_session.py failed: {status}");
    let text = std::fs::read_to_string(out.join("gen-manifest.json")).expect("python manifest");
    Value::parse(&text).expect("python manifest is JSON")
}

/// Our generator and `gen_session.py` agree on counts and sizes at the same size and seed.
///
/// The two random streams differ, so the check is statistical. Tolerances come from runs at
/// 50,000 events, ours with seeds 1–4 against the Python's seed 1 (largest difference seen in
/// brackets):
/// - events: both stop at the first turn end past the target, the last turn capped at
///   `remaining / 330` steps, so the overshoot differs by a few thousand events: 8 % (6.4 %).
/// - per-event ratios measure the shape: streamed deltas 3 % (0.3 %), write-behind batches 5 %
///   (0.8 %), write-behind storage records 5 % (1.3 %), plaintext bytes 10 % (4.1 %), steps
///   12 % (7.3 %; steps are long-tailed, so about 110 of them vary by several percent). Turn
///   storage records follow the step count: 12 %.
/// - turns: about 10 turns at this size with exponentially distributed steps per turn (mean
///   11), so the count is sampling noise (8 vs 13 measured); only a factor-of-2 band is
///   checked. At full size (1.3 M events) turns agree within 5 % (`BENCHMARKS.md`,
///   "Generator cross-check").
/// - compactions: none at this size in either (the threshold is 3 M surface characters);
///   within one.
/// - turn batches: one per turn unless a turn passes 1 MiB, so batches per turn in [1, 1.5].
#[test]
fn counts_and_sizes_match_the_python_generator() {
    if let Some(why) = python_available() {
        // A cross-check that cannot run fails, unless skipping is asked for explicitly.
        const ALLOW_SKIP: &str = "SESSION_TEST_ALLOW_NO_PYTHON";
        assert!(
            std::env::var(ALLOW_SKIP).as_deref() == Ok("1"),
            "generator cross-check cannot run: {why}; set {ALLOW_SKIP}=1 to skip it"
        );
        return;
    }
    let root = scratch("cross");
    let mut failures = Vec::new();
    for (mode, batch) in [
        ("writebehind", BatchMode::WriteBehind),
        ("turn", BatchMode::Turn),
    ] {
        let py = fields_of_json(&run_python(&root.join(format!("py-{mode}")), mode));
        let mut opts = GenOptions::new(CROSS_CHECK_EVENTS, root.join(format!("rs-{mode}")));
        opts.batch = batch;
        opts.compression = Encodings::None;
        let ours = fields_of(&generate(&opts).expect("generate"));

        check(&mut failures, mode, "events", ours.events, py.events, 0.08);
        let per_event = |f: &Fields, x: f64| x / f.events;
        check(
            &mut failures,
            mode,
            "plaintext bytes / event",
            per_event(&ours, ours.plaintext_bytes),
            per_event(&py, py.plaintext_bytes),
            0.10,
        );
        check(
            &mut failures,
            mode,
            "storage records / event",
            per_event(&ours, ours.storage_records),
            per_event(&py, py.storage_records),
            if batch == BatchMode::WriteBehind {
                0.05
            } else {
                0.12
            },
        );
        check(
            &mut failures,
            mode,
            "chunk deltas / event",
            per_event(&ours, ours.deltas),
            per_event(&py, py.deltas),
            0.03,
        );
        check(
            &mut failures,
            mode,
            "steps / event",
            per_event(&ours, ours.steps),
            per_event(&py, py.steps),
            0.12,
        );
        if batch == BatchMode::WriteBehind {
            check(
                &mut failures,
                mode,
                "durable batches / event",
                per_event(&ours, ours.durable_batches),
                per_event(&py, py.durable_batches),
                0.05,
            );
        } else {
            for (who, f) in [("ours", &ours), ("python", &py)] {
                let per_turn = f.durable_batches / f.turns;
                println!("{mode:12} {who} batches per turn {per_turn:.2}");
                if !(1.0..=1.5).contains(&per_turn) {
                    failures.push(format!("{mode}: {who}: {per_turn} batches per turn"));
                }
            }
        }
        check(&mut failures, mode, "turns", ours.turns, py.turns, 0.5);
        if (ours.compactions - py.compactions).abs() > 1.0 {
            failures.push(format!(
                "{mode}: compactions {} vs {}",
                ours.compactions, py.compactions
            ));
        }
    }
    let _ = std::fs::remove_dir_all(&root);
    assert!(
        failures.is_empty(),
        "generator disagrees with gen_session.py:\n{}",
        failures.join("\n")
    );
}

fn count_types(events: &[Event]) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for e in events {
        *out.entry(e.event_type().to_owned()).or_insert(0) += 1;
    }
    out
}

fn load(root: &Path, compression: Compression, id: &str) -> session_persist::StoredPrefix {
    let backend =
        JsonlBackend::open(JsonlConfig::new(root).compression(compression)).expect("open");
    rt().block_on(backend.load_stored(id))
        .expect("load_stored")
        .expect("session exists")
}

/// A generated session restores cleanly from both encodings with the manifest's counts.
#[test]
fn generated_session_restores_cleanly() {
    let root = scratch("restore");
    let mut opts = GenOptions::new(12_000, &root);
    opts.compression = Encodings::Both;
    let m = generate(&opts).expect("generate");
    assert!(m.events >= 12_000);
    assert_eq!(m.zstd_frames, Some(m.durable_batches + 1));
    assert!(
        m.packed_rows.values().sum::<u64>() > 0,
        "chunk runs are packed"
    );
    for (dir, compression) in [("none", Compression::None), ("zstd", Compression::Zstd)] {
        let prefix = load(&root.join(dir), compression, &m.session_id);
        assert!(prefix.torn.is_none(), "{dir}: no torn tail");
        assert!(
            prefix.invalid_envelope.is_none(),
            "{dir}: every envelope valid"
        );
        assert_eq!(
            prefix.events.len() as u64,
            m.events,
            "{dir}: every event stored"
        );
        assert_eq!(
            count_types(&prefix.events),
            m.events_by_type,
            "{dir}: event mix"
        );
        assert!(
            interrupted_turn_closers(prefix.events.iter()).is_empty(),
            "{dir}: all turns closed"
        );
        let file = m.file_bytes.get(dir).copied().expect("file size");
        if compression == Compression::None {
            assert_eq!(file, m.plaintext_bytes);
        } else {
            assert!(file < m.plaintext_bytes, "zstd compresses");
        }
        let session = Session::from_restore_events(
            m.session_id.as_str(),
            Events::from_vec(prefix.events),
            &prefix.header_value,
            clock(),
        )
        .expect("restore");
        // The restored log is the stored one plus the `session/end-seed` marker.
        assert_eq!(session.seq(), m.events + 1);
        assert_eq!(
            session.events().last().map(Event::event_type),
            Some("session/end-seed")
        );
        assert_eq!(session.header().cwd.as_deref(), Some(m.cwd.as_str()));
        assert!(session.request_header().is_some());
        assert!(session.derive_messages().len() as u64 >= 2 * m.turns);
    }
    let _ = std::fs::remove_dir_all(&root);
}

/// `--interrupted`: the last turn is open with a started and an unstarted tool call and a
/// torn final record; restore truncates the tail and synthesizes the closers the manifest
/// lists (persistence.md: a torn tail after the last `turn/end` is not corruption).
#[test]
fn interrupted_session_yields_closers() {
    let root = scratch("interrupted");
    let mut opts = GenOptions::new(8_000, &root);
    opts.compression = Encodings::Both;
    opts.interrupted = true;
    let m = generate(&opts).expect("generate");
    let kinds: Vec<&str> = m.expected_closers.iter().map(Event::event_type).collect();
    assert_eq!(
        kinds,
        ["tool/result", "tool/result", "step/end", "turn/end"]
    );
    let codes: Vec<String> = m.expected_closers[..2]
        .iter()
        .map(|e| {
            e.data()
                .get("error")
                .and_then(|x| x.get("code"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        })
        .collect();
    assert_eq!(codes, ["TOOL_OUTCOME_UNKNOWN", "TOOL_NOT_STARTED"]);
    assert!(m.torn_line_bytes.is_some_and(|n| n > 10_000));
    for (dir, compression) in [("none", Compression::None), ("zstd", Compression::Zstd)] {
        let prefix = load(&root.join(dir), compression, &m.session_id);
        assert!(
            prefix.torn.is_some(),
            "{dir}: the torn final record is reported"
        );
        assert_eq!(
            prefix.events.len() as u64,
            m.events,
            "{dir}: the committed prefix"
        );
        assert!(
            m.file_bytes[dir]
                > if dir == "none" {
                    m.plaintext_bytes
                } else {
                    m.zstd_bytes_committed.unwrap_or(0)
                }
        );
        let closers = interrupted_turn_closers(prefix.events.iter());
        let got: Vec<String> = closers.iter().map(Event::to_json).collect();
        let want: Vec<String> = m.expected_closers.iter().map(Event::to_json).collect();
        assert_eq!(got, want, "{dir}: closers");
        let mut balanced = prefix.events;
        balanced.extend(closers);
        let session = Session::from_restore_events(
            m.session_id.as_str(),
            Events::from_vec(balanced),
            &prefix.header_value,
            clock(),
        )
        .expect("restore with closers");
        // Stored events, four closers, and the `session/end-seed` marker.
        assert_eq!(session.seq(), m.events + 5);
        assert!(interrupted_turn_closers(session.events().iter()).is_empty());
    }
    let _ = std::fs::remove_dir_all(&root);
}

/// The same options give byte-identical files; another seed gives another session.
#[test]
fn generation_is_deterministic() {
    let root = scratch("determinism");
    let run = |name: &str, seed: u64| {
        let mut opts = GenOptions::new(3_000, root.join(name));
        opts.seed = seed;
        opts.batch = BatchMode::Turn;
        let m = generate(&opts).expect("generate");
        let path = m.paths.get("zstd").expect("zstd path").clone();
        (m, std::fs::read(path).expect("read log"))
    };
    let (a, bytes_a) = run("a", 5);
    let (b, bytes_b) = run("b", 5);
    let (c, bytes_c) = run("c", 6);
    assert_eq!(a.session_id, b.session_id);
    assert!(bytes_a == bytes_b, "same seed, same bytes");
    assert_ne!(a.session_id, c.session_id);
    assert!(bytes_a != bytes_c);
    let _ = std::fs::remove_dir_all(&root);
}
