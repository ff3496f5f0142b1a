//! The golden-corpus runner: checks a directory laid out like the reference's corpus.
//!
//! Layout (see the corpus README): `index.json`, `logs/<name>/{session.jsonl,
//! session.jsonl.zstd, expected.json, forks.json?, crash-NN/}` and `negative/<case>/{root/,
//! after-load/?, expected.json}`. The run is driven by `index.json`: every log, crash variant,
//! fork file and negative case it lists must be on disk, and nothing else may be (see
//! [`Index`]). Every check compares our results with what the reference produced, by JSON text,
//! so key order and number spelling count.
//!
//! A difference that the project keeps on purpose is a *known divergence*
//! ([`KNOWN_DIVERGENCES`]): it is counted apart from passes and failures, and only when the
//! difference is exactly the listed one. Any other difference is a failure.

mod divergence;
mod doc;
mod forks;
mod index;
mod logs;
mod negative;
mod outcome;
mod persist;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use session_core::json::Value;

pub use divergence::{KNOWN_DIVERGENCES, KnownDivergence, Rule, listed};
pub use index::{Corpus, CrashEntry, Index, LogEntry, NegativeEntry};
pub use logs::Check;
pub use negative::{PortFiles, port_result};

/// The environment variable naming the corpus directory.
pub const CORPUS_ENV: &str = "SESSION_CORPUS";

/// The environment variable that lets a test pass without the corpus (`1`). Without it, a test
/// that cannot find the corpus fails.
pub const CORPUS_OPTIONAL_ENV: &str = "SESSION_CORPUS_OPTIONAL";

/// Where the corpus is: `$SESSION_CORPUS` when set, else `../shared/corpus` beside the
/// workspace. The directory is not checked; see [`require`].
pub fn locate() -> PathBuf {
    shared_dir(CORPUS_ENV, "corpus")
}

/// A directory of the workplace's shared data: `$<env>` when set, else `../shared/<name>`
/// beside the workspace.
pub(crate) fn shared_dir(env: &str, name: &str) -> PathBuf {
    std::env::var_os(env).map_or_else(
        || {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../shared")
                .join(name)
        },
        PathBuf::from,
    )
}

/// The corpus directory for a test: [`locate`] when it holds an `index.json`.
///
/// # Panics
///
/// When the corpus is not there, unless `SESSION_CORPUS_OPTIONAL=1` is set; then the skip is
/// announced ([`crate::skip`]: `SKIPPED: …` on the process's standard error, which the test
/// harness does not capture) and `None` returned.
pub fn require() -> Option<PathBuf> {
    let dir = locate();
    crate::skip::unless_allowed(
        CORPUS_OPTIONAL_ENV,
        format_args!(
            "golden corpus not found at {} (set {CORPUS_ENV} to its directory)",
            dir.display()
        ),
        || dir.join("index.json").is_file(),
    )
    .then_some(dir)
}

/// Why a directory is not laid out like the corpus.
#[derive(Debug)]
#[non_exhaustive]
pub enum LayoutError {
    /// A file or directory could not be read.
    Io {
        /// The path.
        path: PathBuf,
        /// The operating system's message.
        message: String,
    },
    /// A JSON document could not be parsed.
    Json {
        /// The path.
        path: PathBuf,
        /// The parser's message.
        message: String,
    },
    /// A required key is missing from a document.
    Missing {
        /// The document.
        path: PathBuf,
        /// The missing key path.
        key: String,
    },
    /// The directory has no `index.json`.
    NotACorpus(PathBuf),
}

impl fmt::Display for LayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LayoutError::Io { path, message } => write!(f, "{}: {message}", path.display()),
            LayoutError::Json { path, message } => {
                write!(f, "{}: invalid JSON: {message}", path.display())
            }
            LayoutError::Missing { path, key } => {
                write!(f, "{}: missing {key}", path.display())
            }
            LayoutError::NotACorpus(path) => write!(
                f,
                "{}: not a corpus directory (no index.json)",
                path.display()
            ),
        }
    }
}

impl std::error::Error for LayoutError {}

/// A group of checks, counted apart in the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Group {
    /// `index.json` against the directory: missing and extra cases.
    Index,
    /// `session.jsonl` re-encoding.
    Reencode,
    /// `expected.json` → `pure`.
    Pure,
    /// `expected.json` → `session` and `turns`.
    Session,
    /// `forks.json`.
    Forks,
    /// `persistence.*` and `writer.*` of every log.
    Persistence,
    /// `crash-NN/` variants.
    Crash,
    /// `negative/<case>/`.
    Negative,
}

impl Group {
    /// The group's name in the report.
    pub fn name(self) -> &'static str {
        match self {
            Group::Index => "index",
            Group::Reencode => "reencode",
            Group::Pure => "pure",
            Group::Session => "session",
            Group::Forks => "forks",
            Group::Persistence => "persistence",
            Group::Crash => "crash",
            Group::Negative => "negative",
        }
    }
}

/// How a check failed: a description, and the two values compared when there are any (the
/// known-divergence rules look at them).
#[derive(Debug, Clone, Default)]
pub struct Mismatch {
    /// A short description of the difference.
    pub detail: String,
    /// What the reference produced, normalised as the check compares it.
    pub expected: Option<Value>,
    /// What we produced, normalised the same way.
    pub actual: Option<Value>,
}

impl Mismatch {
    /// A mismatch between two compared values.
    pub fn values(detail: impl Into<String>, expected: Value, actual: Value) -> Mismatch {
        Mismatch {
            detail: detail.into(),
            expected: Some(expected),
            actual: Some(actual),
        }
    }
}

impl From<String> for Mismatch {
    fn from(detail: String) -> Mismatch {
        Mismatch {
            detail,
            ..Mismatch::default()
        }
    }
}

impl From<&str> for Mismatch {
    fn from(detail: &str) -> Mismatch {
        Mismatch::from(detail.to_owned())
    }
}

/// One failed check.
#[derive(Debug, Clone)]
pub struct Failure {
    /// The group of the check.
    pub group: Group,
    /// The case, e.g. `logs/acp.bash-tool-turn__session`.
    pub case: String,
    /// The check, e.g. `session.deriveMessages`.
    pub check: String,
    /// A short description of the difference.
    pub detail: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FAIL {} [{}]: {}", self.case, self.check, self.detail)
    }
}

/// A check whose difference is a listed known divergence.
#[derive(Debug, Clone)]
pub struct Divergence {
    /// The failure as it would have been reported.
    pub failure: Failure,
    /// The entry of [`KNOWN_DIVERGENCES`] it matched.
    pub known: &'static KnownDivergence,
}

impl fmt::Display for Divergence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "KNOWN {} [{}]: {} ({})",
            self.failure.case, self.failure.check, self.known.reason, self.failure.detail
        )
    }
}

/// Counts of one group.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Checks that passed.
    pub passed: usize,
    /// Checks that failed.
    pub failed: usize,
    /// Checks whose difference is a known divergence.
    pub diverged: usize,
}

/// The outcome of a corpus run.
#[derive(Debug)]
pub struct Report {
    dir: PathBuf,
    /// Number of checks that passed.
    pub passed: usize,
    /// Every failed check.
    pub failures: Vec<Failure>,
    /// Every check that differs exactly as a listed known divergence.
    pub divergences: Vec<Divergence>,
    /// Counts per group.
    pub groups: BTreeMap<Group, Counts>,
}

impl Report {
    fn new(dir: &Path) -> Report {
        Report {
            dir: dir.to_path_buf(),
            passed: 0,
            failures: Vec::new(),
            divergences: Vec::new(),
            groups: BTreeMap::new(),
        }
    }

    pub(crate) fn record<M: Into<Mismatch>>(
        &mut self,
        group: Group,
        case: &str,
        check: &str,
        outcome: Result<(), M>,
    ) {
        let counts = self.groups.entry(group).or_default();
        let mismatch = match outcome {
            Ok(()) => {
                counts.passed += 1;
                self.passed += 1;
                return;
            }
            Err(m) => m.into(),
        };
        let failure = Failure {
            group,
            case: case.to_owned(),
            check: check.to_owned(),
            detail: mismatch.detail.clone(),
        };
        if let Some(known) = divergence::matching(&self.dir, case, check, &mismatch) {
            counts.diverged += 1;
            self.divergences.push(Divergence { failure, known });
        } else {
            counts.failed += 1;
            self.failures.push(failure);
        }
    }

    /// Records a check that passes or fails by a plain description.
    pub(crate) fn record_str(
        &mut self,
        group: Group,
        case: &str,
        check: &str,
        outcome: Result<(), String>,
    ) {
        self.record(group, case, check, outcome);
    }

    /// One line per group that ran: `<group>: N passed, M failed, K known divergences`.
    pub fn group_lines(&self) -> Vec<String> {
        self.groups
            .iter()
            .map(|(g, c)| {
                format!(
                    "{}: {} passed, {} failed, {} known divergences",
                    g.name(),
                    c.passed,
                    c.failed,
                    c.diverged
                )
            })
            .collect()
    }

    /// The closing line: `N passed, M failed, K known divergences`.
    pub fn summary(&self) -> String {
        format!(
            "{} passed, {} failed, {} known divergences",
            self.passed,
            self.failures.len(),
            self.divergences.len()
        )
    }
}

/// Which cases and checks to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Only cases whose name contains this text (logs: the log's name; negative cases: the
    /// case's name).
    pub filter: Option<String>,
    /// The checks to run (all by default). The index check runs with any selection.
    pub checks: Vec<Check>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            filter: None,
            checks: Check::ALL.to_vec(),
        }
    }
}

impl Options {
    /// Only the given checks, on every case.
    pub fn only(checks: &[Check]) -> Options {
        Options {
            filter: None,
            checks: checks.to_vec(),
        }
    }

    /// Only cases whose name contains `text`.
    #[must_use]
    pub fn filter(mut self, text: &str) -> Options {
        self.filter = Some(text.to_owned());
        self
    }

    fn selects(&self, name: &str) -> bool {
        self.filter
            .as_ref()
            .is_none_or(|f| name.contains(f.as_str()))
    }
}

/// Runs every selected check on the corpus at `dir`, driven by its `index.json`.
pub fn run(dir: &Path, options: &Options) -> Result<Report, LayoutError> {
    let index = Index::open(dir)?;
    let mut report = Report::new(dir);
    index::check_layout(dir, &index, options, &mut report)?;
    for log in index.logs.iter().filter(|l| options.selects(&l.name)) {
        let log_dir = dir.join("logs").join(&log.name);
        if !log_dir.join("expected.json").is_file() {
            continue; // reported by the index check
        }
        logs::check_log(&log_dir, log, options, &mut report)?;
    }
    if options.checks.contains(&Check::Negative) {
        for case in index.negative.iter().filter(|c| options.selects(&c.case)) {
            let case_dir = dir.join("negative").join(&case.case);
            if !case_dir.join("expected.json").is_file() {
                continue; // reported by the index check
            }
            negative::check_negative(&format!("negative/{}", case.case), &case_dir, &mut report)?;
        }
    }
    Ok(report)
}

pub(crate) fn sorted_dirs(dir: &Path) -> Result<Vec<String>, LayoutError> {
    let io = |e: std::io::Error| LayoutError::Io {
        path: dir.to_path_buf(),
        message: e.to_string(),
    };
    let mut names = Vec::new();
    if !dir.is_dir() {
        return Ok(names);
    }
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        if entry.file_type().map_err(io)?.is_dir() {
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    names.sort();
    Ok(names)
}
