//! The golden-corpus runner: checks a directory laid out like the reference's corpus.
//!
//! Layout (see the corpus README): `logs/<name>/{session.jsonl, session.jsonl.zstd,
//! expected.json, forks.json?, crash-NN/}` and `negative/<case>/{root/, after-load/?,
//! expected.json}`. Every check compares our results with what the reference produced, by JSON
//! text, so key order and number spelling count.

mod doc;
mod forks;
mod logs;
mod persist;

use std::fmt;
use std::path::{Path, PathBuf};

pub use logs::Check;

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
    /// The directory has neither `logs/` nor `negative/`.
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
                "{}: not a corpus directory (expected logs/ or negative/)",
                path.display()
            ),
        }
    }
}

impl std::error::Error for LayoutError {}

/// One failed check.
#[derive(Debug, Clone)]
pub struct Failure {
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

/// The outcome of a corpus run.
#[derive(Debug, Default)]
pub struct Report {
    /// Number of checks that passed.
    pub passed: usize,
    /// Every failed check.
    pub failures: Vec<Failure>,
}

impl Report {
    pub(crate) fn record(&mut self, case: &str, check: &str, outcome: Result<(), String>) {
        match outcome {
            Ok(()) => self.passed += 1,
            Err(detail) => self.failures.push(Failure {
                case: case.to_owned(),
                check: check.to_owned(),
                detail,
            }),
        }
    }

    /// The closing line: `N passed, M failed`.
    pub fn summary(&self) -> String {
        format!("{} passed, {} failed", self.passed, self.failures.len())
    }
}

/// Which groups of checks to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Only cases whose name contains this text.
    pub filter: Option<String>,
    /// The checks to run (all by default).
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

/// Runs every selected check on the corpus at `dir`.
pub fn run(dir: &Path, options: &Options) -> Result<Report, LayoutError> {
    let logs_dir = dir.join("logs");
    let negative_dir = dir.join("negative");
    if !logs_dir.is_dir() && !negative_dir.is_dir() {
        return Err(LayoutError::NotACorpus(dir.to_path_buf()));
    }
    let mut report = Report::default();
    if logs_dir.is_dir() {
        for name in sorted_dirs(&logs_dir)? {
            if options
                .filter
                .as_ref()
                .is_some_and(|f| !name.contains(f.as_str()))
            {
                continue;
            }
            logs::check_log(&logs_dir.join(&name), &name, options, &mut report)?;
        }
    }
    if negative_dir.is_dir() && options.checks.contains(&Check::Negative) {
        for name in sorted_dirs(&negative_dir)? {
            if options
                .filter
                .as_ref()
                .is_some_and(|f| !name.contains(f.as_str()))
            {
                continue;
            }
            persist::check_negative(
                &format!("negative/{name}"),
                &negative_dir.join(&name),
                &mut report,
            )?;
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
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        if entry.file_type().map_err(io)?.is_dir() {
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    names.sort();
    Ok(names)
}
