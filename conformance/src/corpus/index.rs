//! `index.json`: the list of everything the corpus holds, and the check that the directory
//! holds exactly that.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use session_core::json::Value;

use super::doc::Doc;
use super::{Group, LayoutError, Options, Report, sorted_dirs};

/// One crash variant of a log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrashEntry {
    /// Its directory under the log, e.g. `crash-01`.
    pub dir: String,
    /// Its kind, e.g. `after-tool-call`.
    pub kind: String,
}

/// One log of the corpus.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogEntry {
    /// Its directory under `logs/`.
    pub name: String,
    /// Its crash variants.
    pub crash: Vec<CrashEntry>,
    /// How many fork cases its `forks.json` holds (0: no `forks.json`).
    pub fork_cases: usize,
}

/// One negative or edge case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NegativeEntry {
    /// Its directory under `negative/`.
    pub case: String,
}

/// The parsed `index.json` of a corpus.
#[derive(Debug, Clone)]
pub struct Index {
    /// Every log, in the index's order.
    pub logs: Vec<LogEntry>,
    /// Every negative case, in the index's order.
    pub negative: Vec<NegativeEntry>,
    /// The index's `counts` object, as stored.
    pub counts: Value,
}

fn str_of(v: &Value, key: &str, path: &Path, at: &str) -> Result<String, LayoutError> {
    v.get(key)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| LayoutError::Missing {
            path: path.to_path_buf(),
            key: format!("{at}.{key} (string)"),
        })
}

fn array_of<'a>(v: &'a Value, key: &str, path: &Path) -> Result<&'a [Value], LayoutError> {
    v.get(key)
        .and_then(Value::as_array)
        .map(session_core::json::Array::as_slice)
        .ok_or_else(|| LayoutError::Missing {
            path: path.to_path_buf(),
            key: format!("{key} (array)"),
        })
}

impl Index {
    /// Reads `<dir>/index.json`.
    pub fn open(dir: &Path) -> Result<Index, LayoutError> {
        let path = dir.join("index.json");
        if !path.is_file() {
            return Err(LayoutError::NotACorpus(dir.to_path_buf()));
        }
        let doc = Doc::open(&path)?;
        let mut logs = Vec::new();
        for (i, log) in array_of(&doc.root, "logs", &path)?.iter().enumerate() {
            let at = format!("logs[{i}]");
            let mut crash = Vec::new();
            if let Some(list) = log.get("crash").and_then(Value::as_array) {
                for (j, c) in list.iter().enumerate() {
                    let at = format!("{at}.crash[{j}]");
                    crash.push(CrashEntry {
                        dir: str_of(c, "dir", &path, &at)?,
                        kind: str_of(c, "kind", &path, &at)?,
                    });
                }
            }
            let fork_cases = log
                .get("forkCases")
                .and_then(Value::as_u64)
                .and_then(|n| usize::try_from(n).ok())
                .unwrap_or(0);
            logs.push(LogEntry {
                name: str_of(log, "name", &path, &at)?,
                crash,
                fork_cases,
            });
        }
        let mut negative = Vec::new();
        for (i, case) in array_of(&doc.root, "negative", &path)?.iter().enumerate() {
            negative.push(NegativeEntry {
                case: str_of(case, "case", &path, &format!("negative[{i}]"))?,
            });
        }
        Ok(Index {
            logs,
            negative,
            counts: doc.root.get("counts").cloned().unwrap_or_default(),
        })
    }

    /// The directory of every log whose name contains `filter` (all when `None`).
    pub fn log_dirs(&self, dir: &Path, filter: Option<&str>) -> Vec<PathBuf> {
        self.logs
            .iter()
            .filter(|l| filter.is_none_or(|f| l.name.contains(f)))
            .map(|l| dir.join("logs").join(&l.name))
            .collect()
    }

    /// The directory of every crash variant, of logs whose name contains `filter`.
    pub fn crash_dirs(&self, dir: &Path, filter: Option<&str>) -> Vec<PathBuf> {
        self.logs
            .iter()
            .filter(|l| filter.is_none_or(|f| l.name.contains(f)))
            .flat_map(|l| {
                l.crash
                    .iter()
                    .map(move |c| dir.join("logs").join(&l.name).join(&c.dir))
            })
            .collect()
    }

    /// The directory of every negative case whose name contains `filter`.
    pub fn negative_dirs(&self, dir: &Path, filter: Option<&str>) -> Vec<PathBuf> {
        self.negative
            .iter()
            .filter(|c| filter.is_none_or(|f| c.case.contains(f)))
            .map(|c| dir.join("negative").join(&c.case))
            .collect()
    }
}

/// A located corpus and its index: the one way tests find and enumerate the corpus.
#[derive(Debug, Clone)]
pub struct Corpus {
    /// The corpus directory.
    pub dir: PathBuf,
    /// Its `index.json`.
    pub index: Index,
}

impl Corpus {
    /// The corpus of [`super::require`], with its index read.
    ///
    /// # Panics
    ///
    /// When the corpus is absent (unless `SESSION_CORPUS_OPTIONAL=1`; then `None`), or its
    /// `index.json` cannot be read.
    pub fn require() -> Option<Corpus> {
        let dir = super::require()?;
        let index = Index::open(&dir).unwrap_or_else(|e| panic!("golden corpus: {e}"));
        Some(Corpus { dir, index })
    }

    /// The directory of every log, in index order.
    pub fn logs(&self) -> Vec<PathBuf> {
        self.index.log_dirs(&self.dir, None)
    }

    /// The directory of every crash variant, in index order.
    pub fn crash_variants(&self) -> Vec<PathBuf> {
        self.index.crash_dirs(&self.dir, None)
    }

    /// The directory of every negative case, in index order.
    pub fn negative_cases(&self) -> Vec<PathBuf> {
        self.index.negative_dirs(&self.dir, None)
    }
}

fn crash_dirs_on_disk(log: &Path) -> Result<Vec<String>, LayoutError> {
    Ok(sorted_dirs(log)?
        .into_iter()
        .filter(|n| n.starts_with("crash-"))
        .collect())
}

fn missing(report: &mut Report, case: &str, check: &str, ok: bool, what: &str) {
    report.record_str(
        Group::Index,
        case,
        check,
        if ok { Ok(()) } else { Err(what.to_owned()) },
    );
}

/// Compares the directory with the index: every listed log, crash variant, fork file and
/// negative case must be there with its files, and nothing unlisted may be.
pub(crate) fn check_layout(
    dir: &Path,
    index: &Index,
    options: &Options,
    report: &mut Report,
) -> Result<(), LayoutError> {
    let listed: BTreeSet<&str> = index.logs.iter().map(|l| l.name.as_str()).collect();
    for name in sorted_dirs(&dir.join("logs"))? {
        if options.selects(&name) && !listed.contains(name.as_str()) {
            missing(
                report,
                &format!("logs/{name}"),
                "index.listed",
                false,
                "a log directory that index.json does not list",
            );
        }
    }
    for log in index.logs.iter().filter(|l| options.selects(&l.name)) {
        let case = format!("logs/{}", log.name);
        let log_dir = dir.join("logs").join(&log.name);
        if !log_dir.is_dir() {
            missing(
                report,
                &case,
                "index.present",
                false,
                "listed in index.json but missing",
            );
            continue;
        }
        let files = ["expected.json", "session.jsonl", "session.jsonl.zstd"];
        let absent: Vec<&str> = files
            .into_iter()
            .filter(|f| !log_dir.join(f).is_file())
            .collect();
        missing(
            report,
            &case,
            "index.present",
            absent.is_empty(),
            &format!("listed in index.json but missing: {}", absent.join(", ")),
        );
        let forks = log_dir.join("forks.json");
        let fork_outcome = match (log.fork_cases, forks.is_file()) {
            (0, false) => Ok(()),
            (0, true) => Err("forks.json is present but index.json lists no fork cases".into()),
            (_, false) => Err(format!(
                "index.json lists {} fork cases but forks.json is missing",
                log.fork_cases
            )),
            (n, true) => {
                let doc = Doc::open(&forks)?;
                let got = doc.at("cases").and_then(Value::as_array).map(|a| a.len());
                if got == Some(n) {
                    Ok(())
                } else {
                    Err(format!(
                        "index.json lists {n} fork cases, forks.json holds {}",
                        got.map_or_else(|| "no cases array".to_owned(), |g| g.to_string())
                    ))
                }
            }
        };
        report.record_str(Group::Index, &case, "index.forks", fork_outcome);
        let want: BTreeSet<&str> = log.crash.iter().map(|c| c.dir.as_str()).collect();
        for found in crash_dirs_on_disk(&log_dir)? {
            if !want.contains(found.as_str()) {
                missing(
                    report,
                    &format!("{case}/{found}"),
                    "index.listed",
                    false,
                    "a crash variant that index.json does not list",
                );
            }
        }
        for crash in &log.crash {
            let crash_dir = log_dir.join(&crash.dir);
            let files = [
                "expected.json",
                "session.jsonl",
                "session.jsonl.zstd",
                "after-load.session.jsonl",
                "after-load.session.jsonl.zstd",
            ];
            let absent: Vec<&str> = files
                .into_iter()
                .filter(|f| !crash_dir.join(f).is_file())
                .collect();
            let mut outcome = if absent.is_empty() {
                Ok(())
            } else {
                Err(format!(
                    "listed in index.json but missing: {}",
                    absent.join(", ")
                ))
            };
            if outcome.is_ok() {
                let doc = Doc::open(&crash_dir.join("expected.json"))?;
                let kind = doc.at("kind").and_then(Value::as_str).unwrap_or_default();
                if kind != crash.kind {
                    outcome = Err(format!(
                        "index.json says kind {:?}, expected.json says {kind:?}",
                        crash.kind
                    ));
                }
            }
            report.record_str(
                Group::Index,
                &format!("{case}/{}", crash.dir),
                "index.present",
                outcome,
            );
        }
    }
    let listed: BTreeSet<&str> = index.negative.iter().map(|c| c.case.as_str()).collect();
    for name in sorted_dirs(&dir.join("negative"))? {
        if options.selects(&name) && !listed.contains(name.as_str()) {
            missing(
                report,
                &format!("negative/{name}"),
                "index.listed",
                false,
                "a negative case that index.json does not list",
            );
        }
    }
    for case in index.negative.iter().filter(|c| options.selects(&c.case)) {
        let case_dir = dir.join("negative").join(&case.case);
        let outcome = if case_dir.join("expected.json").is_file() {
            root_matches_listing(&case_dir)?
        } else {
            Err("listed in index.json but missing: expected.json".to_owned())
        };
        report.record_str(
            Group::Index,
            &format!("negative/{}", case.case),
            "index.present",
            outcome,
        );
    }
    if options.filter.is_none() {
        check_counts(index, report);
    }
    Ok(())
}

/// The files under a negative case's `root/` are exactly those its `expected.json` lists under
/// `files`, with the listed sizes.
fn root_matches_listing(case_dir: &Path) -> Result<Result<(), String>, LayoutError> {
    let doc = Doc::open(&case_dir.join("expected.json"))?;
    let root = case_dir.join("root");
    let mut listed = BTreeSet::new();
    let mut problems = Vec::new();
    for f in doc
        .req("files")?
        .as_array()
        .map(session_core::json::Array::as_slice)
        .unwrap_or_default()
    {
        let Some(rel) = f.get("path").and_then(Value::as_str) else {
            problems.push("a files entry without a path".to_owned());
            continue;
        };
        listed.insert(PathBuf::from(rel));
        match (
            std::fs::metadata(root.join(rel)),
            f.get("bytes").and_then(Value::as_u64),
        ) {
            (Err(_), _) => problems.push(format!("root/{rel} is missing")),
            (Ok(m), Some(n)) if m.len() != n => {
                problems.push(format!("root/{rel} holds {} bytes, listed {n}", m.len()));
            }
            _ => {}
        }
    }
    for file in super::persist::files_under(&root) {
        if let Ok(rel) = file.strip_prefix(&root)
            && !listed.contains(rel)
        {
            problems.push(format!("root/{} is not listed", rel.display()));
        }
    }
    Ok(if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    })
}

/// `counts` of the index agrees with its own lists.
fn check_counts(index: &Index, report: &mut Report) {
    let crash: usize = index.logs.iter().map(|l| l.crash.len()).sum();
    let forks: usize = index.logs.iter().map(|l| l.fork_cases).sum();
    let fork_files = index.logs.iter().filter(|l| l.fork_cases > 0).count();
    let crash_logs = index.logs.iter().filter(|l| !l.crash.is_empty()).count();
    for (key, got) in [
        ("logs", index.logs.len()),
        ("crashVariants", crash),
        ("crashLogs", crash_logs),
        ("forkFiles", fork_files),
        ("forkCases", forks),
        ("negativeCases", index.negative.len()),
    ] {
        let want = index.counts.get(key).and_then(Value::as_u64);
        let outcome = match want {
            None => Ok(()),
            Some(w) if usize::try_from(w).ok() == Some(got) => Ok(()),
            Some(w) => Err(format!("counts.{key} is {w}, the lists hold {got}")),
        };
        report.record_str(
            Group::Index,
            "index.json",
            &format!("counts.{key}"),
            outcome,
        );
    }
}
