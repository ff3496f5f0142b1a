//! Golden-corpus tests at backend level: every reference-written log, crash variant and
//! negative case of `shared/corpus`, in both encodings.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::{
    Doc, TempDir, copy_file, copy_tree, corpus, header, rootless, rt, texts, to_events, value_texts,
};
use session_core::json::Value;
use session_persist::jsonl::scan_zstd_frames;
use session_persist::{Backend, Compression, JsonlBackend, JsonlConfig, TornMarker};

const ENCODINGS: [(Compression, &str, &str); 2] = [
    (Compression::None, "jsonl", "session.jsonl"),
    (Compression::Zstd, "zstd", "session.jsonl.zstd"),
];

/// Every log of the corpus index with its crash variants (`None`: the corpus is absent and
/// skipping is allowed).
fn log_dirs() -> Option<Vec<(PathBuf, Vec<PathBuf>)>> {
    let corpus = corpus()?;
    Some(
        corpus
            .index
            .logs
            .iter()
            .map(|l| {
                let dir = corpus.dir.join("logs").join(&l.name);
                let crashes = l.crash.iter().map(|c| dir.join(&c.dir)).collect();
                (dir, crashes)
            })
            .collect(),
    )
}

/// The events as physically stored: `storedEvents` when the reference upgraded legacy shapes on
/// load, else `events`.
fn stored_events(doc: &Doc) -> Vec<Value> {
    if doc.at("storedEvents").is_some() {
        doc.events_at("storedEvents")
    } else {
        doc.events_at("events")
    }
}

/// Every file below `root` (relative path to contents), for checking that reads change
/// nothing.
fn tree_files(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let rel = path.strip_prefix(root).unwrap().to_path_buf();
                out.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    out
}

/// Per-frame `(start, end, plaintext)` of a Zstandard file.
fn frames(buf: &[u8]) -> Vec<(usize, usize, Vec<u8>)> {
    let scan = scan_zstd_frames(buf, None).unwrap();
    assert_eq!(scan.torn_start, None);
    scan.frames
        .iter()
        .map(|f| {
            let plain = zstd::stream::decode_all(&buf[f.start..f.end]).unwrap();
            (f.start, f.end, plain)
        })
        .collect()
}

/// `load_stored` of every corpus log (a copy at its layout path) returns exactly the stored
/// events, for both encodings.
#[test]
fn corpus_logs_load_exactly() {
    let rt = rt();
    let Some(logs) = log_dirs() else { return };
    for (dir, _) in logs {
        let doc = Doc::open(&dir.join("expected.json"));
        let id = doc.str("sessionId");
        let expected = value_texts(&stored_events(&doc));
        for (compression, key, file) in ENCODINGS {
            let tmp = TempDir::new("load");
            let root = tmp.root();
            let rel = doc.str(&format!("writer.relativePath.{key}"));
            copy_file(&dir.join(file), &root.join(&rel));
            let backend =
                JsonlBackend::open(JsonlConfig::new(&root).compression(compression)).unwrap();
            let stored = rt
                .block_on(backend.load_stored(&id))
                .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
                .unwrap();
            assert_eq!(texts(&stored.events), expected, "{} ({key})", dir.display());
            assert!(stored.torn.is_none());
            assert!(stored.invalid_envelope.is_none());
            assert_eq!(
                stored.header_value.to_json(),
                doc.req("header").to_json(),
                "{}",
                dir.display()
            );
            let revision = rt.block_on(backend.read_stored_revision(&id)).unwrap();
            assert_eq!(revision, Some(stored.revision.clone()));
            let listed = rt.block_on(backend.list()).unwrap();
            assert_eq!(listed.len(), 1);
            assert_eq!(&*listed[0].id, id);
        }
    }
}

/// Writing the stored events with the recorded batch plan reproduces `session.jsonl` byte for
/// byte and `session.jsonl.zstd` frame for frame (and byte for byte: the bundled libzstd is the
/// reference's 1.5.7).
#[test]
fn corpus_logs_rewrite_identically() {
    let rt = rt();
    let Some(logs) = log_dirs() else { return };
    for (dir, _) in logs {
        let doc = Doc::open(&dir.join("expected.json"));
        let id = doc.str("sessionId");
        let meta = header(&doc, &id);
        let events = to_events(&stored_events(&doc));
        let plan: Vec<usize> = doc
            .req("writer.batches")
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as usize)
            .collect();
        assert_eq!(plan.iter().sum::<usize>(), events.len());
        for (compression, key, file) in ENCODINGS {
            let tmp = TempDir::new("write");
            let root = tmp.root();
            let backend =
                JsonlBackend::open(JsonlConfig::new(&root).compression(compression)).unwrap();
            let mut at = 0;
            for (i, n) in plan.iter().enumerate() {
                rt.block_on(backend.append_batch(&meta, &events[at..at + n], i > 0))
                    .unwrap();
                at += n;
            }
            let rel = doc.str(&format!("writer.relativePath.{key}"));
            let written = std::fs::read(root.join(&rel)).unwrap();
            let reference = std::fs::read(dir.join(file)).unwrap();
            if compression == Compression::Zstd {
                assert_eq!(
                    frames(&written),
                    frames(&reference),
                    "{}: frame table",
                    dir.display()
                );
            }
            assert!(
                written == reference,
                "{} ({key}): bytes differ from the reference",
                dir.display()
            );
        }
    }
}

/// Every crash variant: `load_stored` gives the reference's committed prefix and the torn
/// marker its repair implies; `commit_repair` with the reference's closers leaves the file as
/// the reference's `load()` did.
#[test]
fn corpus_crash_variants_load_and_repair_identically() {
    let rt = rt();
    let mut variants = 0;
    let mut torn = 0;
    let mut salvaged = 0;
    let Some(logs) = log_dirs() else { return };
    for (dir, crashes) in logs {
        let log_doc = Doc::open(&dir.join("expected.json"));
        let id = log_doc.str("sessionId");
        for crash in crashes {
            let doc = Doc::open(&crash.join("expected.json"));
            for (compression, key, file) in ENCODINGS {
                variants += 1;
                let what = format!("{} ({key})", crash.display());
                let tmp = TempDir::new("crash");
                let root = tmp.root();
                let rel = doc.str(&format!("{key}.relativePath"));
                let path = root.join(&rel);
                copy_file(&crash.join(file), &path);
                let original = std::fs::read(&path).unwrap();
                let backend =
                    JsonlBackend::open(JsonlConfig::new(&root).compression(compression)).unwrap();
                let stored = rt.block_on(backend.load_stored(&id)).unwrap().unwrap();

                let read_from = value_texts(&doc.events_at(&format!("{key}.readFrom.events")));
                assert_eq!(texts(&stored.events), read_from, "{what}: stored prefix");

                let truncated_to = doc
                    .at(&format!("{key}.afterLoad.truncatedTo"))
                    .and_then(Value::as_u64)
                    .filter(|&t| t < original.len() as u64);
                let loaded = doc.events_at(&format!("{key}.load.events"));
                let closers = to_events(&loaded[read_from.len()..]);
                match (&stored.torn, truncated_to) {
                    (None, None) => {}
                    (
                        Some(TornMarker::Truncate {
                            truncate_to,
                            recovered,
                        }),
                        Some(t),
                    ) => {
                        assert_eq!(*truncate_to, t, "{what}: truncation point");
                        torn += 1;
                        salvaged += usize::from(!recovered.is_empty());
                        let first_torn = if compression == Compression::Zstd {
                            doc.at("tornBatch.firstSeq")
                                .and_then(Value::as_u64)
                                .map_or(read_from.len(), |s| s as usize)
                        } else {
                            read_from.len()
                        };
                        assert_eq!(
                            texts(recovered),
                            read_from[first_torn.min(read_from.len())..].to_vec(),
                            "{what}: recovered events"
                        );
                    }
                    (got, want) => panic!("{what}: marker {got:?}, expected cut {want:?}"),
                }

                rt.block_on(backend.commit_repair(&stored.meta, stored.torn.clone(), &closers))
                    .unwrap();
                let repaired = std::fs::read(&path).unwrap();
                let after = std::fs::read(crash.join(format!("after-load.{file}"))).unwrap();
                if compression == Compression::Zstd {
                    let cut = truncated_to.unwrap_or(original.len() as u64) as usize;
                    assert_eq!(&repaired[..cut], &original[..cut], "{what}: kept prefix");
                    let appended: Vec<Vec<u8>> = frames(&repaired)
                        .into_iter()
                        .filter(|(start, _, _)| *start >= cut)
                        .map(|(_, _, plain)| plain)
                        .collect();
                    let expected: Vec<Vec<u8>> = doc
                        .at(&format!("{key}.afterLoad.appendedFrames"))
                        .and_then(Value::as_array)
                        .map(|frames| {
                            frames
                                .iter()
                                .map(|f| {
                                    f.get("plaintext")
                                        .and_then(Value::as_str)
                                        .unwrap()
                                        .as_bytes()
                                        .to_vec()
                                })
                                .collect()
                        })
                        .unwrap_or_default();
                    assert_eq!(appended, expected, "{what}: appended frames");
                }
                assert!(repaired == after, "{what}: repaired bytes differ");

                // Reloading the repaired file gives the balanced log and changes nothing.
                let again = rt.block_on(backend.load_stored(&id)).unwrap().unwrap();
                assert!(again.torn.is_none(), "{what}");
                assert_eq!(
                    texts(&again.events),
                    value_texts(&loaded),
                    "{what}: reload after repair"
                );
                assert_eq!(std::fs::read(&path).unwrap(), repaired);
            }
        }
    }
    assert!(variants >= 2 * 190, "crash variants checked: {variants}");
    // The corpus exercises torn tails (none of its torn zstd frames has a whole record to
    // recover; `zstd.rs` covers recovery).
    assert!(torn >= 60, "torn variants: {torn}");
    eprintln!("{variants} crash variants, {torn} torn, {salvaged} with recovered records");
}

/// Cases whose reference failure comes from the coordinator's validation of a cleanly stored
/// log, not from the backend.
const COORDINATOR_LEVEL: [&str; 3] = [
    "legacy-request-header-delta",
    "unknown-event-type",
    "surface-invalid-source-seq",
];

/// Every negative and edge case: `load_stored` (and `list` where the case has a list result)
/// gives the reference's outcome and exact error text.
#[test]
fn corpus_negative_cases() {
    let rt = rt();
    let Some(corpus) = corpus() else { return };
    let dirs = corpus.negative_cases();
    assert!(!dirs.is_empty(), "the corpus index lists negative cases");
    for dir in dirs {
        let case = dir.file_name().unwrap().to_string_lossy().into_owned();
        let doc = Doc::open(&dir.join("expected.json"));
        let id = doc.str("sessionId");
        let compression = match doc.str("backend.compression").as_str() {
            "zstd" => Compression::Zstd,
            _ => Compression::None,
        };
        let tmp = TempDir::new(&case);
        let root = tmp.root();
        copy_tree(&dir.join("root"), &root);
        // What the files must hold at the end: as copied, except what a committed repair
        // rewrites.
        let mut expected_files = tree_files(&root);
        let backend = JsonlBackend::open(JsonlConfig::new(&root).compression(compression)).unwrap();
        let result = rt.block_on(backend.load_stored(&id));
        let read_from = doc.req("results.readFrom");
        if COORDINATOR_LEVEL.contains(&case.as_str()) {
            let stored = result.unwrap_or_else(|e| panic!("{case}: {e}")).unwrap();
            assert!(stored.torn.is_none(), "{case}");
            if read_from.get("ok").and_then(Value::as_bool) == Some(true) {
                assert_eq!(
                    texts(&stored.events),
                    value_texts(&doc.events_at("results.readFrom.events")),
                    "{case}"
                );
            }
        } else if read_from.get("ok").and_then(Value::as_bool) == Some(true) {
            let stored = result.unwrap_or_else(|e| panic!("{case}: {e}")).unwrap();
            assert_eq!(
                texts(&stored.events),
                value_texts(&doc.events_at("results.readFrom.events")),
                "{case}"
            );
            // The repair the reference's load committed, if any.
            let changes = doc.req("fileAfterLoad").as_object().unwrap();
            let changed: Vec<(&str, &Value)> = changes
                .iter()
                .filter(|(_, v)| v.get("changed").and_then(Value::as_bool) == Some(true))
                .collect();
            match (&stored.torn, changed.first()) {
                (None, None) => {}
                (Some(TornMarker::Truncate { truncate_to, .. }), Some((rel, change))) => {
                    assert_eq!(
                        Some(*truncate_to),
                        change.get("truncatedTo").and_then(Value::as_u64),
                        "{case}"
                    );
                    let closers =
                        to_events(&doc.events_at("results.load.events")[stored.events.len()..]);
                    rt.block_on(backend.commit_repair(&stored.meta, stored.torn.clone(), &closers))
                        .unwrap();
                    let after_load = std::fs::read(dir.join("after-load").join(rel)).unwrap();
                    assert!(
                        std::fs::read(root.join(rel)).unwrap() == after_load,
                        "{case}: repaired bytes"
                    );
                    expected_files.insert(PathBuf::from(rel), after_load);
                }
                (got, want) => panic!("{case}: marker {got:?} vs change {want:?}"),
            }
        } else {
            let want = read_from.get("error").unwrap();
            let err = match result {
                Ok(v) => panic!("{case}: expected an error, got {v:?}"),
                Err(e) => e,
            };
            assert_eq!(
                rootless(&err.to_string(), &root),
                want.get("message").and_then(Value::as_str).unwrap(),
                "{case}"
            );
            assert_eq!(
                err.name(),
                want.get("name").and_then(Value::as_str).unwrap(),
                "{case}"
            );
            if let Some(loc) = want.get("location") {
                let at = err.location().unwrap();
                assert_eq!(at.kind, "jsonl");
                assert_eq!(
                    rootless(&at.path.display().to_string(), &root),
                    loc.get("path").and_then(Value::as_str).unwrap()
                );
            }
            if let Some(cause) = want.get("cause") {
                let source =
                    std::error::Error::source(&err).unwrap_or_else(|| panic!("{case}: no cause"));
                assert_eq!(
                    source.to_string(),
                    cause.get("message").and_then(Value::as_str).unwrap(),
                    "{case}: cause"
                );
            }
        }
        if let Some(list) = doc.at("results.list") {
            let got = rt.block_on(backend.list());
            match list.get("error") {
                Some(want) => {
                    let err = got
                        .err()
                        .unwrap_or_else(|| panic!("{case}: list succeeded"));
                    assert_eq!(
                        rootless(&err.to_string(), &root),
                        want.get("message").and_then(Value::as_str).unwrap(),
                        "{case}: list"
                    );
                }
                None => {
                    got.unwrap();
                }
            }
        }
        // Nothing here may change a file except the repairs above.
        drop(backend);
        let files = tree_files(&root);
        assert!(
            files.keys().eq(expected_files.keys()),
            "{case}: files {:?} after the reads, {:?} expected",
            files.keys().collect::<Vec<_>>(),
            expected_files.keys().collect::<Vec<_>>()
        );
        for (rel, bytes) in &files {
            assert!(
                *bytes == expected_files[rel],
                "{case}: {} changed",
                rel.display()
            );
        }
    }
}
