//! Peak resident set of every `sessionctl` read command on one large generated session,
//! against the target `4 × plaintext + 64 MiB`.
//!
//! Run (after `cargo build --release -p session-cli`):
//! `cargo run --release -p session-bench --example read_rss -- [SESSIONCTL] [EVENTS]`
//! (default `target/release/sessionctl` and 880,000 events, about 64 MiB of plaintext). Each
//! command runs as its own process under `/usr/bin/time -f %M` (the peak resident set of that
//! process, in KiB), with its output discarded; the table goes to stdout.

#![allow(clippy::print_stdout)] // the report is the program's output
#![allow(clippy::cast_precision_loss)] // sizes are far below 2^52

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use session_bench::generator::{Encodings, GenOptions, generate};

/// Peak resident set of `sessionctl args…`, in KiB, and whether it succeeded.
fn peak_kib(sessionctl: &Path, args: &[&str]) -> (u64, bool) {
    let out = Command::new("/usr/bin/time")
        .arg("-f")
        .arg("%M")
        .arg(sessionctl)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .expect("run /usr/bin/time");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let kib = stderr
        .lines()
        .rev()
        .find_map(|l| l.trim().parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no peak in {stderr}"));
    (kib, out.status.success())
}

fn main() {
    let mut args = std::env::args().skip(1);
    let sessionctl = PathBuf::from(
        args.next()
            .unwrap_or_else(|| "target/release/sessionctl".to_owned()),
    );
    let events: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(880_000);
    assert!(
        sessionctl.is_file(),
        "{} does not exist: build it with `cargo build --release -p session-cli`",
        sessionctl.display()
    );
    let scratch = std::env::temp_dir().join(format!("read-rss-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    let root = scratch.join("root");
    let mut opts = GenOptions::new(events, &root);
    opts.compression = Encodings::Zstd;
    opts.manifest = Some(scratch.join("gen-manifest.json"));
    let manifest = generate(&opts).expect("generate the session");
    let file = manifest.paths["zstd"].clone();
    let plain = manifest.plaintext_bytes;
    let file_bytes = std::fs::metadata(&file).map_or(0, |m| m.len());
    let limit_kib = (4 * plain + (64 << 20)) / 1024;
    println!(
        "session {}: {} events, {:.1} MiB plaintext, {:.1} MiB zstd; target {:.0} MiB",
        manifest.session_id,
        manifest.events,
        plain as f64 / f64::from(1 << 20),
        file_bytes as f64 / f64::from(1 << 20),
        limit_kib as f64 / 1024.0
    );
    println!();
    println!("| command | peak RSS | target 4 × plaintext + 64 MiB | within |");
    println!("|---|---:|---:|---|");
    let r = root.to_str().expect("UTF-8 path");
    let id = manifest.session_id.as_str();
    let f = file.to_str().expect("UTF-8 path");
    let commands: [(&str, Vec<&str>); 10] = [
        ("inspect", vec!["--root", r, "inspect", id]),
        ("messages", vec!["--root", r, "messages", id]),
        ("transcript", vec!["--root", r, "transcript", id]),
        ("header", vec!["--root", r, "header", id]),
        ("stats", vec!["--root", r, "stats", id]),
        (
            "repair --dry-run",
            vec!["--root", r, "repair", id, "--dry-run"],
        ),
        ("verify", vec!["verify", f]),
        ("verify --strict", vec!["verify", f, "--strict"]),
        ("list", vec!["--root", r, "list"]),
        ("inspect (file outside a layout)", vec!["inspect", f]),
    ];
    let outside = scratch.join("outside");
    std::fs::create_dir_all(&outside).expect("mkdir");
    let copy = outside.join("session.jsonl.zstd");
    std::fs::copy(&file, &copy).expect("copy");
    for (name, mut args) in commands {
        let copy_str = copy.to_str().expect("UTF-8 path");
        if name.starts_with("inspect (") {
            args = vec!["inspect", copy_str];
        }
        let (kib, ok) = peak_kib(&sessionctl, &args);
        println!(
            "| `{name}` | {:.0} MiB{} | {:.0} MiB | {} |",
            kib as f64 / 1024.0,
            if ok { "" } else { " (failed)" },
            limit_kib as f64 / 1024.0,
            if kib <= limit_kib { "yes" } else { "**no**" }
        );
    }
    let _ = std::fs::remove_dir_all(&scratch);
}
