//! Where the import samples are, for tests and benches: `$SESSION_IMPORT_SAMPLES`, else
//! `../shared/import-samples` beside the workspace. The samples are read in place.

use std::path::{Path, PathBuf};

/// The environment variable naming the samples directory.
pub const SAMPLES_ENV: &str = "SESSION_IMPORT_SAMPLES";

/// The environment variable that lets a test pass without the samples (`1`).
pub const SAMPLES_OPTIONAL_ENV: &str = "SESSION_IMPORT_SAMPLES_OPTIONAL";

/// [`SAMPLES_ENV`] when set, else `../shared/import-samples` beside the workspace.
pub fn locate() -> PathBuf {
    std::env::var_os(SAMPLES_ENV).map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/import-samples"),
        PathBuf::from,
    )
}

/// The samples directory for a test: [`locate`] when it holds `codex/` and `claude-code/`.
///
/// # Panics
///
/// When the samples are not there, unless `SESSION_IMPORT_SAMPLES_OPTIONAL=1`; then it
/// writes `SKIPPED: …` to the process's standard error directly and returns `None`.
pub fn require() -> Option<PathBuf> {
    let dir = locate();
    if dir.join("codex").is_dir() && dir.join("claude-code").is_dir() {
        return Some(dir);
    }
    let optional = std::env::var_os(SAMPLES_OPTIONAL_ENV).is_some_and(|v| v == "1");
    assert!(
        optional,
        "import samples not found at {} (set {SAMPLES_ENV} to their directory, or \
         {SAMPLES_OPTIONAL_ENV}=1 to skip tests that need them)",
        dir.display()
    );
    let _ = std::io::Write::write_fmt(
        &mut std::io::stderr(),
        format_args!(
            "\nSKIPPED: import samples not found at {} ({SAMPLES_OPTIONAL_ENV}=1)\n",
            dir.display()
        ),
    );
    None
}

/// Every session file of `format` under the samples directory `dir`, in path order:
/// `*.jsonl` and `*.jsonl.zst` under `codex/` or `claude-code/`.
#[allow(clippy::case_sensitive_file_extension_comparisons)]
pub fn files(dir: &Path, format: crate::Format) -> Vec<PathBuf> {
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
