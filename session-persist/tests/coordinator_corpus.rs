//! The golden corpus through the whole service: `inspect`, `load` and `readFrom` of every
//! reference log, crash variant and negative case (each on a fresh copy of the files) give the
//! reference's events, metadata, errors and exact messages, and `load` leaves the same bytes the
//! reference's repair left. The checks are the golden runner's (`conformance::corpus`), run
//! here with the persistence and negative filters; differences listed as known divergences do
//! not fail.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

#[path = "common/mod.rs"]
mod common;

use std::path::Path;
use std::sync::Arc;

use common::{Doc, TempDir, copy_file};
use conformance::corpus::{self, Check, Corpus, Options};
use session_core::FixedClock;
use session_persist::{Compression, JsonlBackend, JsonlConfig, Persistence, PersistenceOptions};
use session_store::SessionStore;
use session_surface::{derive_event_message, fold_surface};

const ENCODINGS: [(Compression, &str, &str); 2] = [
    (Compression::None, "jsonl", "session.jsonl"),
    (Compression::Zstd, "zstd", "session.jsonl.zstd"),
];

fn service(root: &Path, compression: Compression) -> Persistence {
    let backend = JsonlBackend::open(JsonlConfig::new(root).compression(compression)).unwrap();
    let store = SessionStore::new(Arc::new(FixedClock::new(1_767_225_600_000)));
    Persistence::new(Arc::new(backend), store, PersistenceOptions::default()).unwrap()
}

/// Runs the golden runner with `checks` and fails with every failure it reports.
fn run_golden(checks: &[Check]) {
    let Some(dir) = corpus::require() else {
        return;
    };
    let report = corpus::run(&dir, &Options::only(checks)).unwrap();
    let failures: Vec<String> = report.failures.iter().map(ToString::to_string).collect();
    assert!(
        failures.is_empty(),
        "{}\n{}",
        failures.join("\n"),
        report.summary()
    );
    assert!(report.passed > 0, "{}", report.summary());
}

/// Every log in both encodings, the writer's bytes and every crash variant, including the bytes
/// `load` leaves and a second `load`.
#[test]
fn corpus_logs_and_crash_variants_through_the_service() {
    run_golden(&[Check::Persistence]);
}

/// Every negative case: each operation's outcome and every file under its root afterwards.
#[test]
fn corpus_negative_cases_through_the_service() {
    run_golden(&[Check::Negative]);
}

/// `inspect_detailed` carries the surface, messages and transcript of the session it built:
/// they must be what folding its events (closers included) gives.
async fn check_detailed_derivations(p: &Persistence, id: &str, what: &str) -> usize {
    let detailed = p.inspect_detailed(id, None).await.unwrap();
    let events = &detailed.inspection.events;
    let fold = fold_surface(events.iter()).unwrap();
    assert_eq!(detailed.surface.to_vec(), fold.nodes, "{what}: surface");
    let messages = fold
        .nodes
        .iter()
        .filter_map(|n| events.get(usize::try_from(*n).unwrap()))
        .filter(|e| derive_event_message(e).is_some())
        .count();
    assert_eq!(detailed.messages.len(), messages, "{what}: messages");
    let replacements = detailed.transcript.replacements();
    assert_eq!(replacements, fold.replacements, "{what}: replacements");
    fold.replacements.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn detailed_inspections_carry_the_folded_surface() {
    let Some(corpus) = Corpus::require() else {
        return;
    };
    let (mut checked, mut replaced) = (0, 0);
    for log in &corpus.index.logs {
        let dir = corpus.dir.join("logs").join(&log.name);
        let doc = Doc::open(&dir.join("expected.json"));
        let id = doc.str("sessionId");
        // The log itself, then its crash variants (open turns: the closers count too).
        let mut cases = vec![(dir.clone(), None)];
        cases.extend(log.crash.iter().map(|crash| {
            let crash = dir.join(&crash.dir);
            let crash_doc = Doc::open(&crash.join("expected.json"));
            (crash, Some(crash_doc))
        }));
        for (case, crash_doc) in cases {
            for (compression, key, file) in ENCODINGS {
                let rel = match &crash_doc {
                    None => doc.str(&format!("writer.relativePath.{key}")),
                    Some(crash_doc) => crash_doc.str(&format!("{key}.relativePath")),
                };
                let tmp = TempDir::new("coord-detailed");
                let root = tmp.root();
                copy_file(&case.join(file), &root.join(&rel));
                let p = service(&root, compression);
                let what = format!("{} {key}", case.display());
                replaced += check_detailed_derivations(&p, &id, &what).await;
                p.dispose().await.unwrap();
                checked += 1;
            }
        }
    }
    // 102 logs and their crash variants, in both encodings.
    assert!(checked >= 500, "{checked}");
    assert!(replaced > 0, "the corpus has compactions");
}
