//! Persistence checks: `inspect` / `load` / `readFrom` through the service on every log (both
//! encodings), the writer's bytes and every crash variant (including the bytes `load` leaves).
//! Each operation runs on a fresh copy of the files in a temporary root.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use session_core::json::Value;
use session_core::{FixedClock, SessionHeader};
use session_persist::{
    Backend, Compression, JsonlBackend, JsonlConfig, Persistence, PersistenceOptions,
};
use session_store::SessionStore;

use super::doc::{Doc, diff, to_events};
use super::index::LogEntry;
use super::logs::CORPUS_CLOCK_MS;
use super::outcome::{Outcome, compare};
use super::{Group, LayoutError, Mismatch, Report};

pub(crate) const ENCODINGS: [(Compression, &str, &str); 2] = [
    (Compression::None, "jsonl", "session.jsonl"),
    (Compression::Zstd, "zstd", "session.jsonl.zstd"),
];

pub(crate) const OPS: [&str; 3] = ["inspect", "load", "readFrom"];

/// A temporary backend root, removed on drop.
pub(crate) struct TempRoot(pub(crate) PathBuf);

impl TempRoot {
    pub(crate) fn new() -> Result<TempRoot, String> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "golden-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        Ok(TempRoot(dir))
    }
}

impl Drop for TempRoot {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub(crate) fn copy_file(from: &Path, to: &Path) -> Result<(), String> {
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    }
    std::fs::copy(from, to).map_err(|e| format!("{}: {e}", from.display()))?;
    Ok(())
}

pub(crate) fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                out.extend(files_under(&path));
            } else {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

pub(crate) fn copy_tree(from: &Path, to: &Path) -> Result<(), String> {
    for file in files_under(from) {
        let rel = file.strip_prefix(from).map_err(|e| e.to_string())?;
        copy_file(&file, &to.join(rel))?;
    }
    Ok(())
}

pub(crate) fn read(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))
}

pub(crate) fn service(root: &Path, compression: Compression) -> Result<Persistence, String> {
    let backend = JsonlBackend::open(JsonlConfig::new(root).compression(compression))
        .map_err(|e| e.to_string())?;
    let store = SessionStore::new(Arc::new(FixedClock::new(CORPUS_CLOCK_MS)));
    Persistence::new(Arc::new(backend), store, PersistenceOptions::default())
        .map_err(|e| e.to_string())
}

pub(crate) async fn run_op(p: &Persistence, op: &str, id: &str) -> Outcome {
    match op {
        "inspect" => p
            .inspect(id, None)
            .await
            .map(|i| (i.meta, i.events.iter().cloned().collect())),
        "load" => p
            .load(id)
            .await
            .map(|i| (i.meta, i.events.iter().cloned().collect())),
        _ => p.read_from(id, 0, None).await.map(|r| (r.meta, r.events)),
    }
}

pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())
}

/// `persistence.{jsonl,zstd}.{inspect,load,readFrom}`, the writer's bytes and the crash
/// variants of one log.
pub(crate) fn check_log(
    case: &str,
    dir: &Path,
    log: &LogEntry,
    expected: &Doc,
    report: &mut Report,
) -> Result<(), LayoutError> {
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(e) => {
            report.record_str(Group::Persistence, case, "persistence.runtime", Err(e));
            return Ok(());
        }
    };
    let pack = expected.req("writer.packChunks")?.as_bool();
    report.record(
        Group::Persistence,
        case,
        "writer.packChunks",
        diff(
            &pack.map_or(Value::Null, Value::Bool),
            &Value::Bool(JsonlConfig::new(dir).pack_chunks),
        ),
    );
    let id = expected
        .req("sessionId")?
        .as_str()
        .unwrap_or_default()
        .to_owned();
    for (compression, key, file) in ENCODINGS {
        let rel = expected
            .req(&format!("writer.relativePath.{key}"))?
            .as_str()
            .unwrap_or_default()
            .to_owned();
        for op in OPS {
            let check = format!("persistence.{key}.{op}");
            let changes = expected
                .at(&format!("{check}.fileChanged"))
                .and_then(Value::as_bool)
                == Some(true);
            let outcome = rt.block_on(async {
                let tmp = TempRoot::new()?;
                let path = tmp.0.join(&rel);
                copy_file(&dir.join(file), &path)?;
                let before = read(&path)?;
                let p = service(&tmp.0, compression)?;
                let got = run_op(&p, op, &id).await;
                let _ = p.dispose().await;
                if key == "jsonl" && op == "load" {
                    top_level(case, expected, &got, report);
                }
                compare(expected, &check, &got, &tmp.0)?;
                if (read(&path)? != before) != changes {
                    return Err(Mismatch::from(if changes {
                        format!("the reference's {op} changed the file; ours did not")
                    } else {
                        format!("{op} changed the file")
                    }));
                }
                Ok(())
            });
            report.record(Group::Persistence, case, &check, outcome);
        }
        let outcome = rt.block_on(rewrite(dir, expected, compression, file, &rel));
        report.record_str(Group::Persistence, case, &format!("writer.{key}"), outcome);
    }
    for crash in &log.crash {
        check_crash(
            &rt,
            &format!("{case}/{}", crash.dir),
            &dir.join(&crash.dir),
            &id,
            report,
        )?;
    }
    Ok(())
}

/// The top-level `header` (the `SessionHeader` that `load` returns) and `eventCount` of a log,
/// against our `load` of its plain file.
fn top_level(case: &str, expected: &Doc, got: &Outcome, report: &mut Report) {
    let (header, count) = match got {
        Ok((meta, events)) => (
            Ok(meta.to_value()),
            Ok(session_core::event::seq_value(events.len() as u64)),
        ),
        Err(e) => (
            Err(format!("load failed: {e}")),
            Err(format!("load failed: {e}")),
        ),
    };
    for (key, actual) in [("header", header), ("eventCount", count)] {
        let outcome = match (expected.req(key), actual) {
            (Err(e), _) => Err(Mismatch::from(e.to_string())),
            (Ok(_), Err(e)) => Err(Mismatch::from(e)),
            (Ok(want), Ok(got)) => diff(want, &got),
        };
        report.record(Group::Persistence, case, key, outcome);
    }
}

/// Writes the log's events with the recorded batch plan and compares the bytes with the
/// reference's file (zstd: byte-identical with libzstd 1.5.x at level 3).
async fn rewrite(
    dir: &Path,
    expected: &Doc,
    compression: Compression,
    file: &str,
    rel: &str,
) -> Result<(), String> {
    let values = expected
        .event_list(
            expected
                .req("storedEvents")
                .or_else(|_| expected.req("events"))
                .map_err(|e| e.to_string())?,
        )
        .map_err(|e| e.to_string())?;
    let events = to_events(&values)?.to_vec();
    let header = expected.req("headerLine").map_err(|e| e.to_string())?;
    let id = header.get("id").and_then(Value::as_str).unwrap_or_default();
    let meta = SessionHeader::from_value(
        &header
            .as_object()
            .map(|o| Value::Object(o.without("type")))
            .unwrap_or_default(),
        id,
    )
    .map_err(|e| e.to_string())?;
    let batches: Vec<usize> = expected
        .req("writer.batches")
        .map_err(|e| e.to_string())?
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_u64)
                .map(|n| n as usize)
                .collect()
        })
        .unwrap_or_default();
    let pack = expected
        .req("writer.packChunks")
        .map_err(|e| e.to_string())?
        .as_bool()
        .unwrap_or(true);
    let tmp = TempRoot::new()?;
    let backend = JsonlBackend::open(
        JsonlConfig::new(&tmp.0)
            .compression(compression)
            .pack_chunks(pack),
    )
    .map_err(|e| e.to_string())?;
    let mut at = 0;
    for (i, n) in batches.iter().enumerate() {
        let end = (at + n).min(events.len());
        backend
            .append_batch(&meta, &events[at..end], i > 0)
            .await
            .map_err(|e| format!("batch {i}: {e}"))?;
        at = end;
    }
    let _ = backend.close().await;
    let ours = read(&tmp.0.join(rel))?;
    let theirs = read(&dir.join(file))?;
    if ours != theirs {
        let at = ours
            .iter()
            .zip(&theirs)
            .position(|(a, b)| a != b)
            .unwrap_or(ours.len().min(theirs.len()));
        return Err(format!(
            "bytes differ at offset {at} (ours {} bytes, reference {} bytes)",
            ours.len(),
            theirs.len()
        ));
    }
    Ok(())
}

fn check_crash(
    rt: &tokio::runtime::Runtime,
    case: &str,
    dir: &Path,
    id: &str,
    report: &mut Report,
) -> Result<(), LayoutError> {
    let doc = Doc::open(&dir.join("expected.json"))?;
    for (compression, key, file) in ENCODINGS {
        let rel = doc
            .req(&format!("{key}.relativePath"))?
            .as_str()
            .unwrap_or_default()
            .to_owned();
        for op in OPS {
            let outcome = rt.block_on(async {
                let tmp = TempRoot::new()?;
                let path = tmp.0.join(&rel);
                copy_file(&dir.join(file), &path)?;
                let original = read(&path)?;
                let p = service(&tmp.0, compression)?;
                let got = run_op(&p, op, id).await;
                let _ = p.dispose().await;
                compare(&doc, &format!("{key}.{op}"), &got, &tmp.0)?;
                let after = read(&path)?;
                if op != "load" {
                    return if after == original {
                        Ok(())
                    } else {
                        Err(Mismatch::from(format!("{op} changed the file")))
                    };
                }
                let want = read(&dir.join(format!("after-load.{file}")))?;
                if after != want {
                    return Err(Mismatch::from(format!(
                        "bytes after load differ ({} vs reference {})",
                        after.len(),
                        want.len()
                    )));
                }
                // A second load changes nothing and returns the same events.
                let p = service(&tmp.0, compression)?;
                let again = run_op(&p, "load", id).await;
                let _ = p.dispose().await;
                compare(&doc, &format!("{key}.load"), &again, &tmp.0)
                    .map_err(|m| Mismatch::from(format!("reload: {}", m.detail)))?;
                if read(&path)? != want {
                    return Err("a second load changed the file".into());
                }
                Ok(())
            });
            report.record(Group::Crash, case, &format!("{key}.{op}"), outcome);
        }
    }
    Ok(())
}
