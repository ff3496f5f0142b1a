//! Where the import samples are, for tests and benches: `$SESSION_IMPORT_SAMPLES`, else
//! `../shared/import-samples` beside the workspace. The samples are read in place.

use std::path::{Path, PathBuf};

use session_import::Format;

/// The environment variable naming the samples directory.
pub const SAMPLES_ENV: &str = "SESSION_IMPORT_SAMPLES";

/// The environment variable that lets a test pass without the samples (`1`).
pub const SAMPLES_OPTIONAL_ENV: &str = "SESSION_IMPORT_SAMPLES_OPTIONAL";

/// [`SAMPLES_ENV`] when set, else `../shared/import-samples` beside the workspace.
pub fn locate() -> PathBuf {
    crate::corpus::shared_dir(SAMPLES_ENV, "import-samples")
}

/// The samples directory for a test: [`locate`] when it holds `codex/` and `claude-code/`.
///
/// # Panics
///
/// When the samples are not there, unless `SESSION_IMPORT_SAMPLES_OPTIONAL=1`; then the skip
/// is announced ([`crate::skip`]) and `None` returned.
pub fn require() -> Option<PathBuf> {
    let dir = locate();
    crate::skip::unless_allowed(
        SAMPLES_OPTIONAL_ENV,
        format_args!(
            "import samples not found at {} (set {SAMPLES_ENV} to their directory)",
            dir.display()
        ),
        || dir.join("codex").is_dir() && dir.join("claude-code").is_dir(),
    )
    .then_some(dir)
}

/// Every session file of `format` under the samples directory `dir`, in path order:
/// `*.jsonl` and `*.jsonl.zst` under `codex/` or `claude-code/`.
#[allow(clippy::case_sensitive_file_extension_comparisons)]
pub fn files(dir: &Path, format: Format) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.join(format.as_str())];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with(".jsonl") || n.ends_with(".jsonl.zst"))
            {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}
