//! Every `negative/<case>/`: the outcome of each operation on a fresh copy of `root/`, and what
//! every file under it holds afterwards (unchanged, unless `after-load/` gives the file as the
//! reference's `load` left it).

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::Path;

use session_core::SessionHeader;
use session_core::json::Value;
use session_persist::Compression;

use super::doc::{Doc, diff};
use super::outcome::{compare, expected_outcome, rootless};
use super::persist::{OPS, TempRoot, copy_tree, files_under, read, run_op, runtime, service};
use super::{Group, LayoutError, Mismatch, Report};

/// A file as the file checks compare it: its length and a hash of its bytes, and its text
/// (a Zstandard file's decompressed frames; `null` when that is not UTF-8), which the
/// known-divergence rules read.
fn digest(bytes: &[u8]) -> Value {
    let mut h = DefaultHasher::new();
    bytes.hash(&mut h);
    let plain = if bytes.starts_with(&[0x28, 0xB5, 0x2F, 0xFD]) {
        zstd::stream::decode_all(bytes).ok()
    } else {
        Some(bytes.to_vec())
    };
    let text = plain
        .and_then(|p| String::from_utf8(p).ok())
        .map_or(Value::Null, Value::from);
    Value::object([
        (
            "bytes",
            Value::from(format!("{} bytes, hash {:016x}", bytes.len(), h.finish())),
        ),
        ("text", text),
    ])
}

/// What every file under the case's `root/` must hold after `op`: `after-load/`'s copy for
/// `load` where there is one, else the file as it was.
fn expected_files(dir: &Path, op: &str) -> Result<Value, String> {
    let root = dir.join("root");
    let after = dir.join("after-load");
    let mut entries: Vec<(String, Value)> = Vec::new();
    for file in files_under(&root) {
        let rel = file.strip_prefix(&root).map_err(|e| e.to_string())?;
        let changed = after.join(rel);
        let source = if op == "load" && changed.is_file() {
            changed
        } else {
            file.clone()
        };
        entries.push((rel.display().to_string(), digest(&read(&source)?)));
    }
    if op == "load" {
        for file in files_under(&after) {
            let rel = file.strip_prefix(&after).map_err(|e| e.to_string())?;
            if !root.join(rel).is_file() {
                entries.push((rel.display().to_string(), digest(&read(&file)?)));
            }
        }
    }
    Ok(Value::object(entries))
}

/// What the files listed in `want` hold under `tmp`.
fn actual_files(tmp: &Path, want: &Value) -> Value {
    let entries = want.as_object().map(|o| {
        o.keys()
            .map(|rel| {
                let got = std::fs::read(tmp.join(rel))
                    .map_or_else(|e| Value::from(format!("unreadable: {e}")), |b| digest(&b));
                (rel.to_owned(), got)
            })
            .collect::<Vec<_>>()
    });
    Value::object(entries.unwrap_or_default())
}

/// The normalised expectation of `check` (`results.<op>` or `results.<op>.files`) of the case
/// at `dir`, as the negative checks compare it.
pub(crate) fn negative_expected(dir: &Path, check: &str) -> Option<Value> {
    if let Some(op) = check
        .strip_prefix("results.")
        .and_then(|c| c.strip_suffix(".files"))
    {
        return expected_files(dir, op).ok();
    }
    let doc = Doc::open(&dir.join("expected.json")).ok()?;
    expected_outcome(&doc, check).ok()
}

fn compression_of(doc: &Doc) -> Result<Compression, LayoutError> {
    Ok(match doc.req("backend.compression")?.as_str() {
        Some("zstd") => Compression::Zstd,
        _ => Compression::None,
    })
}

/// Every operation of one negative case, its files afterwards, and `list` where recorded.
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
    let compression = compression_of(&doc)?;
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(e) => {
            report.record_str(Group::Negative, case, "runtime", Err(e));
            return Ok(());
        }
    };
    for op in OPS {
        let check = format!("results.{op}");
        let files_check = format!("{check}.files");
        let (outcome, files) = rt.block_on(async {
            let tmp = match TempRoot::new() {
                Ok(t) => t,
                Err(e) => return (Err(Mismatch::from(e.clone())), Err(Mismatch::from(e))),
            };
            if let Err(e) = copy_tree(&dir.join("root"), &tmp.0) {
                return (Err(Mismatch::from(e.clone())), Err(Mismatch::from(e)));
            }
            let outcome = match service(&tmp.0, compression) {
                Ok(p) => {
                    let got = run_op(&p, op, &id).await;
                    let _ = p.dispose().await;
                    compare(&doc, &check, &got, &tmp.0)
                }
                Err(e) => Err(Mismatch::from(e)),
            };
            let files = expected_files(dir, op)
                .map_err(Mismatch::from)
                .and_then(|want| diff(&want, &actual_files(&tmp.0, &want)))
                .map_err(|m| Mismatch {
                    detail: format!("files after {op}: {}", m.detail),
                    ..m
                });
            (outcome, files)
        });
        report.record(Group::Negative, case, &check, outcome);
        report.record(Group::Negative, case, &files_check, files);
    }
    if doc.at("results.list").is_some() {
        let outcome = rt.block_on(async {
            let tmp = TempRoot::new()?;
            copy_tree(&dir.join("root"), &tmp.0)?;
            let p = service(&tmp.0, compression)?;
            let got = p.list(None).await;
            let _ = p.dispose().await;
            check_list(&doc, got, &tmp.0)
        });
        report.record(Group::Negative, case, "results.list", outcome);
    }
    Ok(())
}

fn check_list(
    doc: &Doc,
    got: Result<Vec<SessionHeader>, session_persist::Error>,
    root: &Path,
) -> Result<(), Mismatch> {
    let want = doc.req("results.list").map_err(|e| e.to_string())?;
    let want_ok = want.get("ok").and_then(Value::as_bool) == Some(true);
    match got {
        Ok(headers) if want_ok => {
            let got = Value::array(headers.iter().map(SessionHeader::to_value));
            diff(&want.get("value").cloned().unwrap_or_default(), &got)
        }
        Ok(headers) => Err(format!("expected an error, got {} headers", headers.len()).into()),
        Err(e) if !want_ok => {
            let message = want
                .get("error")
                .and_then(|e| e.get("message"))
                .cloned()
                .unwrap_or_default();
            let name = want
                .get("error")
                .and_then(|e| e.get("name"))
                .cloned()
                .unwrap_or_default();
            diff(
                &Value::object([("name", name), ("message", message)]),
                &Value::object([
                    ("name", Value::from(e.name())),
                    ("message", Value::from(rootless(&e.to_string(), root))),
                ]),
            )
        }
        Err(e) => Err(format!("expected success, got {}", rootless(&e.to_string(), root)).into()),
    }
}

/// Every file under a root after an operation: its path relative to the root, and its bytes.
pub type PortFiles = Vec<(String, Vec<u8>)>;

/// What this port's persistence service gives for `op` (`inspect`, `load` or `readFrom`) on a
/// fresh copy of the negative case at `dir`: the outcome normalised as the runner compares it
/// (`{ok, meta, eventCount, events}` or `{ok: false, error: {name, message, code?}}`, paths
/// as `<root>/…`), and every file under the root afterwards (relative path, bytes).
///
/// Tests of other levels (the command line) compare themselves with this where the corpus's
/// expectation is a listed known divergence, which the runner checks this outcome against.
///
/// # Errors
///
/// When the case cannot be read or copied, or the runtime cannot start.
pub fn port_result(dir: &Path, op: &str) -> Result<(Value, PortFiles), String> {
    let doc = Doc::open(&dir.join("expected.json")).map_err(|e| e.to_string())?;
    let id = doc
        .req("sessionId")
        .map_err(|e| e.to_string())?
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let compression = compression_of(&doc).map_err(|e| e.to_string())?;
    let rt = runtime()?;
    rt.block_on(async {
        let tmp = TempRoot::new()?;
        copy_tree(&dir.join("root"), &tmp.0)?;
        let p = service(&tmp.0, compression)?;
        let got = run_op(&p, op, &id).await;
        let _ = p.dispose().await;
        let shape = Value::object([("ok", Value::Bool(false)), ("error", Value::empty_object())]);
        let outcome = super::outcome::actual_outcome(&got, &shape, &tmp.0);
        let mut files = Vec::new();
        for file in files_under(&tmp.0) {
            let rel = file.strip_prefix(&tmp.0).map_err(|e| e.to_string())?;
            files.push((rel.display().to_string(), read(&file)?));
        }
        Ok((outcome, files))
    })
}
