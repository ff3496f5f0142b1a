//! A large session: `messages` and `inspect` start printing promptly, and their memory is
//! bounded by the session itself (output is streamed, never built as one string).
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{BIN, Temp};

const ID: &str = "large";
const TURNS: usize = 500;
const TEXT_BYTES: usize = 12_000;

/// Peak resident memory (`VmHWM`, kB) of a process, sampled until it exits.
fn peak_kb(pid: u32) -> u64 {
    let path = format!("/proc/{pid}/status");
    let mut peak = 0;
    while let Ok(status) = std::fs::read_to_string(&path) {
        let Some(line) = status.lines().find(|l| l.starts_with("VmHWM:")) else {
            break;
        };
        let kb: u64 = line
            .split_whitespace()
            .nth(1)
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        peak = peak.max(kb);
        std::thread::sleep(Duration::from_millis(2));
    }
    peak
}

struct Measured {
    first_line: Duration,
    total: Duration,
    output_bytes: usize,
    peak_kb: u64,
}

fn measure(root: &Path, args: &[&str]) -> Measured {
    let start = Instant::now();
    let mut child = Command::new(BIN)
        .arg("--root")
        .arg(root)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let sampler = std::thread::spawn(move || peak_kb(pid));
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    let first_line = start.elapsed();
    let mut rest = Vec::new();
    out.read_to_end(&mut rest).unwrap();
    let status = child.wait().unwrap();
    let total = start.elapsed();
    assert!(status.success(), "{args:?} failed");
    Measured {
        first_line,
        total,
        output_bytes: first.len() + rest.len(),
        peak_kb: sampler.join().unwrap(),
    }
}

#[test]
fn large_sessions_stream_with_bounded_memory() {
    let root = Temp::new("large");
    let file_bytes = crate::common::write_large(root.path(), ID, TURNS, TEXT_BYTES);
    assert!(file_bytes > 10_000_000);

    // Baseline: the same load with a tiny output.
    let header = measure(root.path(), &["header", ID, "--json"]);
    assert!(header.output_bytes < 1_000);

    let messages = measure(root.path(), &["messages", ID, "--json"]);
    assert!(
        messages.output_bytes as u64 > file_bytes / 2,
        "the output is as large as the messages ({} bytes)",
        messages.output_bytes
    );
    // Streamed: no copy of the whole output is ever held (it alone is > 10 MB).
    let slack_kb = 6 * 1024;
    assert!(
        messages.peak_kb < header.peak_kb + slack_kb,
        "messages peaked at {} kB, the load alone at {} kB",
        messages.peak_kb,
        header.peak_kb
    );
    // Promptly: output starts as soon as the session is loaded, long before it ends.
    assert!(
        messages.first_line < header.total + Duration::from_secs(2),
        "first line after {:?}; a bare load takes {:?}",
        messages.first_line,
        header.total
    );
    assert!(messages.first_line < messages.total);

    let human = measure(root.path(), &["messages", ID, "--full"]);
    assert!(human.output_bytes as u64 > file_bytes / 2);
    assert!(
        human.peak_kb < header.peak_kb + slack_kb,
        "human messages peaked at {} kB, the load alone at {} kB",
        human.peak_kb,
        header.peak_kb
    );

    let inspect = measure(root.path(), &["inspect", ID]);
    assert!(inspect.first_line < header.total + Duration::from_secs(2));
    // Only one copy of the session at a time (the raw scan is dropped before the validated
    // view is built).
    assert!(
        inspect.peak_kb < header.peak_kb + slack_kb,
        "inspect peaked at {} kB, the load alone at {} kB",
        inspect.peak_kb,
        header.peak_kb
    );
    // The memory is bounded by the session: a few times the file, not more.
    assert!(
        header.peak_kb * 1024 < file_bytes * 8,
        "a load of {file_bytes} bytes peaked at {} kB",
        header.peak_kb
    );
}

// `convert` holds one copy of the session at a time: the copy is streamed back a batch at a
// time against the source's events, and both logical texts are streamed, never held.
#[test]
fn convert_holds_one_copy_of_the_session_at_a_time() {
    let root = Temp::new("large-convert");
    let file_bytes = crate::common::write_large(root.path(), ID, TURNS, TEXT_BYTES);
    let header = measure(root.path(), &["header", ID, "--json"]);
    let dest = root.path().join("dest");
    let dest = dest.to_str().unwrap();
    let convert = measure(
        root.path(),
        &["--compression", "none", "convert", ID, dest, "--json"],
    );
    assert!(file_bytes > 10_000_000);
    // A load, the copy's read-back and a few buffers; holding a second copy of the events or
    // a logical text beside them exceeds this bound.
    assert!(
        convert.peak_kb < header.peak_kb * 3,
        "convert peaked at {} kB, a load alone at {} kB",
        convert.peak_kb,
        header.peak_kb
    );
}
