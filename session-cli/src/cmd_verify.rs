//! `verify`: the conformance invariants over session files or whole directories.

use std::path::{Path, PathBuf};

use session_check::{Check, StoredLogChecks, check_stored_log};
use session_core::json::Value;
use session_persist::DetailedInspection;

use crate::args::Invocation;
use crate::error::{Error, Location, Result};
use crate::json::{num, obj, opt_num, opt_str};
use crate::output::{Out, plural, truncate};
use crate::progress::with_spinner;
use crate::store::{Store, StoreAt, compression_of, placement};

/// One check's outcome.
struct Outcome {
    name: &'static str,
    violation: Option<String>,
}

/// The result for one file.
struct FileResult {
    file: PathBuf,
    id: Option<String>,
    events: Option<usize>,
    error: Option<Error>,
    checks: Vec<Outcome>,
}

impl FileResult {
    fn ok(&self) -> bool {
        self.error.is_none() && self.checks.iter().all(|c| c.violation.is_none())
    }
}

/// Collects the session logs named by `path` (a file, or every log below a directory).
fn collect(path: &Path, into: &mut Vec<PathBuf>) -> Result<()> {
    if path.is_file() {
        into.push(path.to_path_buf());
        return Ok(());
    }
    if !path.is_dir() {
        return Err(Error::failed_at(
            format!("{} does not exist", path.display()),
            Some(
                "pass session.jsonl / session.jsonl.zstd files or directories holding them".into(),
            ),
            Location {
                file: Some(path.to_path_buf()),
                ..Location::default()
            },
        ));
    }
    let mut stack = vec![path.to_path_buf()];
    let mut found = Vec::new();
    while let Some(dir) = stack.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|e| Error::io("read", &dir, &e))?;
        for entry in entries.flatten() {
            let p = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                stack.push(p);
            } else if kind.is_file()
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .and_then(compression_of)
                    .is_some()
            {
                found.push(p);
            }
        }
    }
    if found.is_empty() {
        return Err(Error::failed_at(
            format!(
                "no session.jsonl or session.jsonl.zstd below {}",
                path.display()
            ),
            None,
            Location {
                file: Some(path.to_path_buf()),
                ..Location::default()
            },
        ));
    }
    found.sort();
    into.extend(found);
    Ok(())
}

fn outcome(name: &'static str, check: Check) -> Outcome {
    Outcome {
        name,
        violation: check.err().map(|v| v.detail),
    }
}

fn verify_file(file: &Path, strict: bool) -> FileResult {
    let mut result = FileResult {
        file: file.to_path_buf(),
        id: None,
        events: None,
        error: None,
        checks: Vec::new(),
    };
    let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let Some(compression) = compression_of(name) else {
        result.error = Some(Error::failed(
            format!("{} is not a session log", file.display()),
            None,
        ));
        return result;
    };
    // A file outside its layout path is read in place (`root` is then `None`).
    let located = placement(file, compression).map(|place| (place.root, place.id));
    let (root, id) = match located {
        Ok(l) => l,
        Err(e) => {
            result.error = Some(e);
            return result;
        }
    };
    result.id = Some(id.clone());
    let run = || -> Result<(Vec<Outcome>, usize)> {
        let store = match &root {
            Some(root) => Store::open(&StoreAt::Jsonl {
                root: root.clone(),
                compression,
            })?,
            None => Store::open_file(file, compression)?,
        };
        // Only the inspection's events and header are kept: the surface, messages and
        // transcript it also derived are dropped here, not held through the checks.
        let DetailedInspection {
            inspection, stored, ..
        } = store
            .block_on(store.persistence.inspect_detailed(&id, None))
            .map_err(|e| store.err(e, Some(file)))?;
        store.close()?;
        let n = inspection.events.len();
        let how = StoredLogChecks {
            compression,
            strict,
        };
        let header = inspection.meta.to_value();
        // The checks run on a thread started after the read's threads have ended: glibc's
        // allocator gives a new thread the arena a finished one left, with the memory the
        // read's derived state (dropped above) freed there, which the main thread's arena
        // cannot reuse (36 MiB less peak RSS on the 1.3M-event benchmark log). The blocking
        // thread the read ran on (`Store::on_read_thread`, as `fork` and `uncompact` build) does
        // less well here: the store stays open through the checks, and `verify` of that log
        // peaked at 162 MiB there against 151 MiB on its own thread (two runs each).
        let checks = std::thread::scope(|s| {
            s.spawn(|| check_stored_log(&id, &inspection.events, header, stored, how))
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        })
        .into_iter()
        .map(|(name, check)| outcome(name, check))
        .collect();
        Ok((checks, n))
    };
    match run() {
        Ok((checks, n)) => {
            result.checks = checks;
            result.events = Some(n);
        }
        Err(e) => result.error = Some(e),
    }
    result
}

/// `verify`.
pub(crate) fn verify(inv: &Invocation, out: &mut Out) -> Result<()> {
    if inv.global.database.is_some() {
        return Err(Error::usage(
            "`verify` checks session files (PATH...), not a database; `sessionctl convert SESSION DIR` copies a session into a JSONL root to verify it",
        ));
    }
    let strict = inv.flag("--strict");
    let mut files = Vec::new();
    for p in &inv.operands {
        collect(Path::new(p), &mut files)?;
    }
    let total = files.len();
    let results: Vec<FileResult> =
        with_spinner(format!("verifying {}", plural(total as u64, "log")), || {
            files.iter().map(|f| verify_file(f, strict)).collect()
        });
    let failed = results.iter().filter(|r| !r.ok()).count();
    if inv.global.json {
        let files = Value::array(results.iter().map(|r| {
            obj([
                ("file", Value::from(r.file.display().to_string())),
                ("id", opt_str(r.id.clone())),
                ("events", opt_num(r.events.map(|n| n as u64))),
                ("ok", Value::from(r.ok())),
                (
                    "error",
                    r.error.as_ref().map_or(Value::Null, |e| {
                        e.to_json().get("error").cloned().unwrap_or_default()
                    }),
                ),
                (
                    "checks",
                    Value::array(r.checks.iter().map(|c| {
                        obj([
                            ("name", Value::from(c.name)),
                            ("ok", Value::from(c.violation.is_none())),
                            ("violation", opt_str(c.violation.clone())),
                        ])
                    })),
                ),
            ])
        }));
        let doc = obj([
            ("schema", Value::from("sessionctl.verify/1")),
            ("strict", Value::from(strict)),
            ("files", files),
            ("checked", num(total as u64)),
            ("failed", num(failed as u64)),
        ]);
        out.line(&doc.to_json())?;
    } else {
        let s = out.style;
        for r in &results {
            let label = format!(
                "{}{}",
                r.file.display(),
                r.id.as_ref().map(|i| format!(" ({i})")).unwrap_or_default()
            );
            if r.ok() {
                out.line(&format!(
                    "{} {label}: {}, {}",
                    s.green("ok  "),
                    plural(r.checks.len() as u64, "check"),
                    plural(r.events.unwrap_or(0) as u64, "event")
                ))?;
                continue;
            }
            out.line(&format!("{} {label}", s.red("FAIL")))?;
            if let Some(e) = &r.error {
                out.line(&format!("      cannot read: {e}"))?;
                let loc = e.location();
                if loc.line.is_some() || loc.offset.is_some() || loc.seq.is_some() {
                    let mut parts = Vec::new();
                    if let Some(l) = loc.line {
                        parts.push(format!("line {l}"));
                    }
                    if let Some(o) = loc.offset {
                        parts.push(format!("byte {o}"));
                    }
                    if let Some(q) = loc.seq {
                        parts.push(format!("seq {q}"));
                    }
                    out.line(&format!("      where: {}", parts.join(", ")))?;
                }
            }
            for c in &r.checks {
                if let Some(v) = &c.violation {
                    out.line(&format!(
                        "      {} {}: {}",
                        s.red("violated"),
                        c.name,
                        truncate(v, out.width.saturating_sub(20).max(40))
                    ))?;
                }
            }
        }
        out.line("")?;
        let summary = format!("{} passed, {failed} failed", total - failed);
        out.line(&if failed == 0 {
            s.green(&summary)
        } else {
            s.red(&summary)
        })?;
    }
    if failed > 0 {
        let unreadable = results.iter().filter(|r| r.error.is_some()).count();
        return Err(Error::Violations {
            violated: failed - unreadable,
            unreadable,
        });
    }
    Ok(())
}
