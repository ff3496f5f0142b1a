//! Progress for long phases, on standard error and only when it is a terminal (nothing at
//! all otherwise, and never on stdout), drawn by `indicatif`.
//!
//! A phase is labelled (`reading demo`, `verifying 4 logs`, …). While it runs, the bar
//! follows the session file the process has open, found in `/proc/self/fd`: a file being
//! read shows the bytes read against its size, with the rate and the time left; a file
//! being written shows the bytes written and the rate. Between files, or where the work is
//! not file I/O, a spinner shows the elapsed time. Following the open file means the
//! persistence layer needs no progress hooks, and the figures are the kernel's own file
//! positions.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How long a phase runs before its progress appears (`SESSIONCTL_PROGRESS_GRACE_MS`
/// overrides it, so that tests can see progress on small sessions).
const GRACE: Duration = Duration::from_millis(250);

/// How often the open file's position is sampled.
const TICK: Duration = Duration::from_millis(100);

fn grace() -> Duration {
    std::env::var("SESSIONCTL_PROGRESS_GRACE_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map_or(GRACE, Duration::from_millis)
}

/// A running progress display; dropping it stops it and clears its line.
pub(crate) struct Spinner {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl Spinner {
    /// Starts the display labelled `label` if standard error is a terminal.
    pub(crate) fn start(label: String) -> Spinner {
        let stop = Arc::new(AtomicBool::new(false));
        let handle = std::io::stderr().is_terminal().then(|| {
            let stop = stop.clone();
            std::thread::spawn(move || follow(&label, &stop))
        });
        Spinner { stop, handle }
    }
}

/// A session file the process has open, and where in it the process is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OpenFile {
    /// The file.
    pub(crate) path: PathBuf,
    /// The file's position (bytes read or written so far).
    pub(crate) pos: u64,
    /// Whether it is open for writing.
    pub(crate) writing: bool,
}

/// Whether `path` names a file whose progress is worth showing: a session log or a
/// database.
fn is_session_file(path: &Path) -> bool {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    name.starts_with("session.jsonl")
        || Path::new(name.as_ref())
            .extension()
            .is_some_and(|e| e == "db" || e == "sqlite")
}

/// The session files this process has open, from `/proc/self/fd` and `/proc/self/fdinfo`
/// (empty where `/proc` is not mounted).
pub(crate) fn open_session_files() -> Vec<OpenFile> {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in dir.flatten() {
        let Ok(target) = std::fs::read_link(entry.path()) else {
            continue;
        };
        if !is_session_file(&target) {
            continue;
        }
        let info_path = Path::new("/proc/self/fdinfo").join(entry.file_name());
        let Ok(info) = std::fs::read_to_string(info_path) else {
            continue;
        };
        let field = |name: &str| {
            info.lines()
                .find_map(|l| l.strip_prefix(name))
                .map(str::trim)
                .map(str::to_owned)
        };
        let pos = field("pos:")
            .and_then(|p| p.parse::<u64>().ok())
            .unwrap_or(0);
        let writing = field("flags:")
            .and_then(|f| u32::from_str_radix(&f, 8).ok())
            .is_some_and(|f| f & 0o3 != 0);
        found.push(OpenFile {
            path: target,
            pos,
            writing,
        });
    }
    found
}

fn follow(label: &str, stop: &AtomicBool) {
    let started = Instant::now();
    let grace = grace();
    let spinner = ProgressStyle::with_template("{spinner} {msg} {elapsed_precise}")
        .unwrap_or_else(|_| ProgressStyle::default_spinner());
    let reading = ProgressStyle::with_template(
        "{spinner} {msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} ETA {eta}",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar())
    .progress_chars("=> ");
    let writing = ProgressStyle::with_template("{spinner} {msg} {bytes} written, {bytes_per_sec}")
        .unwrap_or_else(|_| ProgressStyle::default_spinner());
    let mut bar: Option<ProgressBar> = None;
    let mut following: Option<(PathBuf, bool)> = None;
    while !stop.load(Ordering::Acquire) {
        std::thread::sleep(TICK);
        if started.elapsed() < grace {
            continue;
        }
        let bar = bar.get_or_insert_with(|| {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr())
                .with_style(spinner.clone())
                .with_message(label.to_owned())
                .with_elapsed(started.elapsed());
            bar.tick();
            bar
        });
        // Prefer a file being written (the output phase), else the one being read.
        let files = open_session_files();
        let file = files
            .iter()
            .find(|f| f.writing)
            .or_else(|| files.first())
            .cloned();
        match file {
            Some(f) => {
                let key = (f.path.clone(), f.writing);
                if following.as_ref() != Some(&key) {
                    bar.reset();
                    if f.writing {
                        bar.set_length(0);
                        bar.set_style(writing.clone());
                    } else {
                        let size = std::fs::metadata(&f.path).map_or(0, |m| m.len());
                        bar.set_length(size.max(1));
                        bar.set_style(reading.clone());
                    }
                    following = Some(key);
                }
                bar.set_position(f.pos);
            }
            None if following.is_some() => {
                following = None;
                bar.reset();
                bar.set_length(0);
                bar.set_style(spinner.clone());
            }
            None => bar.tick(),
        }
    }
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}

/// Runs `f` with progress labelled `label` on a terminal.
pub(crate) fn with_spinner<T>(label: impl Into<String>, f: impl FnOnce() -> T) -> T {
    // The label names a session: its control characters are shown, never sent.
    let spinner = Spinner::start(crate::output::escape_controls(&label.into()).into_owned());
    let result = f();
    drop(spinner);
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn an_open_session_file_is_found_with_its_position() {
        let dir = std::env::temp_dir().join(format!("sessionctl-progress-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("session.jsonl");
        std::fs::write(&path, vec![b'x'; 4096]).unwrap();
        let mut reader = std::fs::File::open(&path).unwrap();
        let mut buf = [0u8; 1000];
        reader.read_exact(&mut buf).unwrap();
        let found = open_session_files();
        let f = found
            .iter()
            .find(|f| f.path == path && !f.writing)
            .unwrap_or_else(|| panic!("{found:?}"));
        assert_eq!(f.pos, 1000);
        let out_path = dir.join("out.db");
        let mut writer = std::fs::File::create(&out_path).unwrap();
        writer.write_all(&[0u8; 300]).unwrap();
        let found = open_session_files();
        let w = found.iter().find(|f| f.path == out_path).unwrap();
        assert!(w.writing);
        assert_eq!(w.pos, 300);
        drop((reader, writer));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
