//! Persistence checks: `inspect` / `load` / `readFrom` through the service on every log (both
//! encodings), the writer's bytes, every crash variant (including the bytes `load` leaves) and
//! every negative case. Each operation runs on a fresh copy of the files in a temporary root.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use session_core::json::Value;
use session_core::{Event, FixedClock, SessionHeader};
use session_persist::{
    Backend, Compression, Error, JsonlBackend, JsonlConfig, Persistence, PersistenceOptions,
};
use session_store::SessionStore;

use super::doc::{Doc, clip, to_events};
use super::logs::CORPUS_CLOCK_MS;
use super::{LayoutError, Report};

const ENCODINGS: [(Compression, &str, &str); 2] = [
    (Compression::None, "jsonl", "session.jsonl"),
    (Compression::Zstd, "zstd", "session.jsonl.zstd"),
];

const OPS: [&str; 3] = ["inspect", "load", "readFrom"];

/// A temporary backend root, removed on drop.
struct TempRoot(PathBuf);

impl TempRoot {
    fn new() -> Result<TempRoot, String> {
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

fn copy_file(from: &Path, to: &Path) -> Result<(), String> {
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    }
    std::fs::copy(from, to).map_err(|e| format!("{}: {e}", from.display()))?;
    Ok(())
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
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

fn copy_tree(from: &Path, to: &Path) -> Result<(), String> {
    for file in files_under(from) {
        let rel = file.strip_prefix(from).map_err(|e| e.to_string())?;
        copy_file(&file, &to.join(rel))?;
    }
    Ok(())
}

fn read(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))
}

fn service(root: &Path, compression: Compression) -> Result<Persistence, String> {
    let backend = JsonlBackend::open(JsonlConfig::new(root).compression(compression))
        .map_err(|e| e.to_string())?;
    let store = SessionStore::new(Arc::new(FixedClock::new(CORPUS_CLOCK_MS)));
    Persistence::new(Arc::new(backend), store, PersistenceOptions::default())
        .map_err(|e| e.to_string())
}

type Outcome = Result<(SessionHeader, Vec<Event>), Error>;

async fn run_op(p: &Persistence, op: &str, id: &str) -> Outcome {
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

/// Compares an outcome with `{ok, meta, eventCount, events}` or `{ok:false, error}`.
fn compare(doc: &Doc, key: &str, got: Outcome, root: &Path) -> Result<(), String> {
    let expected = doc.req(key).map_err(|e| e.to_string())?;
    let want_ok = expected.get("ok").and_then(Value::as_bool) == Some(true);
    match got {
        Ok((meta, events)) => {
            if !want_ok {
                return Err(format!(
                    "expected error {}, got {} events",
                    expected
                        .get("error")
                        .and_then(|e| e.get("message"))
                        .map(Value::to_json)
                        .unwrap_or_default(),
                    events.len()
                ));
            }
            let want_meta = expected.get("meta").cloned().unwrap_or_default();
            if meta.to_value() != want_meta {
                return Err(format!(
                    "meta: expected {} got {}",
                    want_meta.to_json(),
                    meta.to_value().to_json()
                ));
            }
            let want = doc
                .event_list(expected.get("events").unwrap_or(&Value::Null))
                .map_err(|e| e.to_string())?;
            if want.len() != events.len() {
                return Err(format!(
                    "expected {} events, got {}",
                    want.len(),
                    events.len()
                ));
            }
            for (i, (w, g)) in want.iter().zip(&events).enumerate() {
                let (w, g) = (w.to_json(), g.to_json());
                if w != g {
                    return Err(format!("event {i}: {}", super::doc::text_diff(&w, &g)));
                }
            }
            Ok(())
        }
        Err(err) => {
            if want_ok {
                return Err(format!(
                    "expected success, got {}",
                    clip(&err.to_string(), 200)
                ));
            }
            let name = expected
                .get("error")
                .and_then(|e| e.get("name"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            let message = expected
                .get("error")
                .and_then(|e| e.get("message"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            let got_message = err
                .to_string()
                .replace(&root.display().to_string(), "<root>");
            if err.name() != name || got_message != message {
                return Err(format!(
                    "expected {name}: {message:?}, got {}: {got_message:?}",
                    err.name()
                ));
            }
            Ok(())
        }
    }
}

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())
}

/// `persistence.{jsonl,zstd}.{inspect,load,readFrom}` and the writer's bytes of one log.
pub(crate) fn check_log(
    case: &str,
    dir: &Path,
    expected: &Doc,
    report: &mut Report,
) -> Result<(), LayoutError> {
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(e) => {
            report.record(case, "persistence.runtime", Err(e));
            return Ok(());
        }
    };
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
            let outcome = rt.block_on(async {
                let tmp = TempRoot::new()?;
                let path = tmp.0.join(&rel);
                copy_file(&dir.join(file), &path)?;
                let before = read(&path)?;
                let p = service(&tmp.0, compression)?;
                let got = run_op(&p, op, &id).await;
                let _ = p.dispose().await;
                compare(expected, &format!("persistence.{key}.{op}"), got, &tmp.0)?;
                if read(&path)? != before {
                    return Err(format!("{op} changed the file"));
                }
                Ok(())
            });
            report.record(case, &format!("persistence.{key}.{op}"), outcome);
        }
        let outcome = rt.block_on(rewrite(dir, expected, compression, file, &rel));
        report.record(case, &format!("writer.{key}"), outcome);
    }
    for crash in crash_dirs(dir) {
        let name = crash
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        check_crash(&rt, &format!("{case}/{name}"), &crash, &id, report)?;
    }
    Ok(())
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
    let tmp = TempRoot::new()?;
    let backend = JsonlBackend::open(JsonlConfig::new(&tmp.0).compression(compression))
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

fn crash_dirs(log: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(log)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.is_dir()
                        && p.file_name()
                            .is_some_and(|n| n.to_string_lossy().starts_with("crash-"))
                })
                .collect()
        })
        .unwrap_or_default();
    dirs.sort();
    dirs
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
                compare(&doc, &format!("{key}.{op}"), got, &tmp.0)?;
                let after = read(&path)?;
                if op != "load" {
                    return if after == original {
                        Ok(())
                    } else {
                        Err(format!("{op} changed the file"))
                    };
                }
                let want = read(&dir.join(format!("after-load.{file}")))?;
                if after != want {
                    return Err(format!(
                        "bytes after load differ ({} vs reference {})",
                        after.len(),
                        want.len()
                    ));
                }
                // A second load changes nothing and returns the same events.
                let p = service(&tmp.0, compression)?;
                let again = run_op(&p, "load", id).await;
                let _ = p.dispose().await;
                compare(&doc, &format!("{key}.load"), again, &tmp.0)
                    .map_err(|e| format!("reload: {e}"))?;
                if read(&path)? != want {
                    return Err("a second load changed the file".into());
                }
                Ok(())
            });
            report.record(case, &format!("{key}.{op}"), outcome);
        }
    }
    Ok(())
}

/// Every `negative/<case>/`: the outcome of each operation, and the bytes `load` leaves.
pub(crate) fn check_negative(
    case: &str,
    dir: &Path,
    report: &mut Report,
) -> Result<(), LayoutError> {
    let doc = Doc::open(&dir.join("expected.json"))?;
    let id = doc
        .req("sessionId")?
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let compression = match doc.req("backend.compression")?.as_str() {
        Some("zstd") => Compression::Zstd,
        _ => Compression::None,
    };
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(e) => {
            report.record(case, "runtime", Err(e));
            return Ok(());
        }
    };
    for op in OPS {
        let outcome = rt.block_on(async {
            let tmp = TempRoot::new()?;
            copy_tree(&dir.join("root"), &tmp.0)?;
            let p = service(&tmp.0, compression)?;
            let got = run_op(&p, op, &id).await;
            let _ = p.dispose().await;
            compare(&doc, &format!("results.{op}"), got, &tmp.0)?;
            let after = dir.join("after-load");
            if op == "load" && after.is_dir() {
                for file in files_under(&after) {
                    let rel = file.strip_prefix(&after).map_err(|e| e.to_string())?;
                    if read(&tmp.0.join(rel))? != read(&file)? {
                        return Err(format!("bytes after load differ: {}", rel.display()));
                    }
                }
            }
            Ok(())
        });
        report.record(case, &format!("results.{op}"), outcome);
    }
    if let Some(want) = doc.at("results.list").cloned() {
        let outcome = rt.block_on(async {
            let tmp = TempRoot::new()?;
            copy_tree(&dir.join("root"), &tmp.0)?;
            let p = service(&tmp.0, compression)?;
            let got = p.list(None).await;
            let _ = p.dispose().await;
            let want_ok = want.get("ok").and_then(Value::as_bool) == Some(true);
            match got {
                Ok(headers) if want_ok => {
                    let got = Value::array(headers.iter().map(SessionHeader::to_value));
                    let want = want.get("value").cloned().unwrap_or_default();
                    super::doc::json_diff(&want, &got).map_or(Ok(()), Err)
                }
                Ok(headers) => Err(format!("expected an error, got {} headers", headers.len())),
                Err(e) if !want_ok => {
                    let message = want
                        .get("error")
                        .and_then(|e| e.get("message"))
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    let got = e
                        .to_string()
                        .replace(&tmp.0.display().to_string(), "<root>");
                    if got == message {
                        Ok(())
                    } else {
                        Err(format!("expected {message:?}, got {got:?}"))
                    }
                }
                Err(e) => Err(format!("expected success, got {e}")),
            }
        });
        report.record(case, "results.list", outcome);
    }
    Ok(())
}
