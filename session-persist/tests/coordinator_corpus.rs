//! The golden corpus through the whole service: `inspect`, `load` and `readFrom` of every
//! reference log, crash variant and negative case (each on a fresh copy of the files) give the
//! reference's events, metadata, error names and exact messages, and `load` leaves the same
//! bytes the reference's repair left.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

#[path = "common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::{Doc, TempDir, copy_file, copy_tree, corpus, rootless, value_texts};
use session_core::json::Value;
use session_core::{FixedClock, SessionHeader};
use session_persist::{
    Compression, Error, JsonlBackend, JsonlConfig, Persistence, PersistenceOptions,
};
use session_store::SessionStore;
use session_surface::{derive_event_message, fold_surface};

const ENCODINGS: [(Compression, &str, &str); 2] = [
    (Compression::None, "jsonl", "session.jsonl"),
    (Compression::Zstd, "zstd", "session.jsonl.zstd"),
];

const OPS: [&str; 3] = ["inspect", "load", "readFrom"];

fn service(root: &Path, compression: Compression) -> Persistence {
    let backend = JsonlBackend::open(JsonlConfig::new(root).compression(compression)).unwrap();
    let store = SessionStore::new(Arc::new(FixedClock::new(1_767_225_600_000)));
    Persistence::new(Arc::new(backend), store, PersistenceOptions::default()).unwrap()
}

/// `(meta, events)` of one operation, or its error.
async fn run(p: &Persistence, op: &str, id: &str) -> Result<(SessionHeader, Vec<String>), Error> {
    match op {
        "inspect" => p.inspect(id, None).await.map(|i| {
            (
                i.meta,
                i.events.iter().map(session_core::Event::to_json).collect(),
            )
        }),
        "load" => p.load(id).await.map(|i| {
            (
                i.meta,
                i.events.iter().map(session_core::Event::to_json).collect(),
            )
        }),
        _ => p.read_from(id, 0, None).await.map(|r| {
            (
                r.meta,
                r.events.iter().map(session_core::Event::to_json).collect(),
            )
        }),
    }
}

/// Compares one outcome with the reference's `{ok, meta, eventCount, events}` or
/// `{ok:false, error}`.
fn check(
    doc: &Doc,
    key: &str,
    got: Result<(SessionHeader, Vec<String>), Error>,
    root: &Path,
    what: &str,
) {
    let expected = doc.req(key);
    if expected.get("ok").and_then(Value::as_bool) == Some(true) {
        let (meta, events) = got.unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(
            meta.to_value().to_json(),
            doc.req(&format!("{key}.meta")).to_json(),
            "{what}: meta"
        );
        let want = value_texts(&doc.events_at(&format!("{key}.events")));
        assert_eq!(
            events.len() as u64,
            doc.req(&format!("{key}.eventCount")).as_u64().unwrap(),
            "{what}"
        );
        assert_eq!(events, want, "{what}: events");
    } else {
        let err = match got {
            Ok((_, events)) => panic!("{what}: expected an error, got {} events", events.len()),
            Err(e) => e,
        };
        assert_eq!(
            err.name(),
            doc.str(&format!("{key}.error.name")),
            "{what}: {err}"
        );
        assert_eq!(
            rootless(&err.to_string(), root),
            doc.str(&format!("{key}.error.message")),
            "{what}"
        );
    }
}

fn log_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(corpus().join("logs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    dirs.sort();
    dirs
}

fn crash_dirs(log: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(log)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.is_dir()
                && p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("crash-")
        })
        .collect();
    dirs.sort();
    dirs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_logs_through_the_service() {
    let mut checked = 0;
    for dir in log_dirs() {
        let doc = Doc::open(&dir.join("expected.json"));
        let id = doc.str("sessionId");
        for (compression, key, file) in ENCODINGS {
            let rel = doc.str(&format!("writer.relativePath.{key}"));
            for op in OPS {
                let tmp = TempDir::new("coord-corpus");
                let root = tmp.root();
                copy_file(&dir.join(file), &root.join(&rel));
                let before = std::fs::read(root.join(&rel)).unwrap();
                let p = service(&root, compression);
                let got = run(&p, op, &id).await;
                let what = format!("{} {key} {op}", dir.display());
                check(&doc, &format!("persistence.{key}.{op}"), got, &root, &what);
                p.dispose().await.unwrap();
                assert_eq!(
                    std::fs::read(root.join(&rel)).unwrap(),
                    before,
                    "{what}: file unchanged"
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 600, "{checked}");
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
    let (mut checked, mut replaced) = (0, 0);
    for dir in log_dirs() {
        let doc = Doc::open(&dir.join("expected.json"));
        let id = doc.str("sessionId");
        // The log itself, then its crash variants (open turns: the closers count too).
        let mut cases = vec![(dir.clone(), None)];
        cases.extend(crash_dirs(&dir).into_iter().map(|crash| {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_crash_variants_through_the_service() {
    let mut checked = 0;
    for dir in log_dirs() {
        let id = Doc::open(&dir.join("expected.json")).str("sessionId");
        for crash in crash_dirs(&dir) {
            let doc = Doc::open(&crash.join("expected.json"));
            for (compression, key, file) in ENCODINGS {
                let rel = doc.str(&format!("{key}.relativePath"));
                for op in OPS {
                    let what = format!("{} {key} {op}", crash.display());
                    let tmp = TempDir::new("coord-crash");
                    let root = tmp.root();
                    let path = root.join(&rel);
                    copy_file(&crash.join(file), &path);
                    let original = std::fs::read(&path).unwrap();
                    let p = service(&root, compression);
                    let got = run(&p, op, &id).await;
                    check(&doc, &format!("{key}.{op}"), got, &root, &what);
                    p.dispose().await.unwrap();
                    let after = std::fs::read(&path).unwrap();
                    if op == "load" {
                        let expected =
                            std::fs::read(crash.join(format!("after-load.{file}"))).unwrap();
                        assert!(after == expected, "{what}: repaired bytes differ");
                        // Loading the repaired file again changes nothing.
                        let p = service(&root, compression);
                        let again = run(&p, "load", &id).await;
                        check(
                            &doc,
                            &format!("{key}.load"),
                            again,
                            &root,
                            &format!("{what} (reload)"),
                        );
                        p.dispose().await.unwrap();
                        assert!(
                            std::fs::read(&path).unwrap() == expected,
                            "{what}: reload changed the file"
                        );
                    } else {
                        assert!(after == original, "{what}: {op} must not change the file");
                    }
                    checked += 1;
                }
            }
        }
    }
    assert!(checked >= 1_100, "{checked}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_negative_cases_through_the_service() {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(corpus().join("negative"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 35);
    for dir in dirs {
        let case = dir.file_name().unwrap().to_string_lossy().into_owned();
        let doc = Doc::open(&dir.join("expected.json"));
        let id = doc.str("sessionId");
        let compression = match doc.str("backend.compression").as_str() {
            "zstd" => Compression::Zstd,
            _ => Compression::None,
        };
        for op in OPS {
            let tmp = TempDir::new(&case);
            let root = tmp.root();
            copy_tree(&dir.join("root"), &root);
            let p = service(&root, compression);
            let got = run(&p, op, &id).await;
            check(
                &doc,
                &format!("results.{op}"),
                got,
                &root,
                &format!("{case} {op}"),
            );
            p.dispose().await.unwrap();
            let after = dir.join("after-load");
            if op == "load" && after.exists() {
                for file in walk(&after) {
                    let rel = file.strip_prefix(&after).unwrap();
                    assert!(
                        std::fs::read(root.join(rel)).unwrap() == std::fs::read(&file).unwrap(),
                        "{case}: bytes after load"
                    );
                }
            }
        }
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}
