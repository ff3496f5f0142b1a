//! `golden`: checks a directory laid out like the reference's golden corpus.
//!
//! Usage: `golden [--only CHECK[,CHECK…]] [--filter TEXT] [--known] <DIR>`
//!
//! The run is driven by `DIR/index.json`. Prints one line per failure (`FAIL …`), with
//! `--known` one line per known divergence (`KNOWN …`), then one line of counts per group, and
//! ends with `N passed, M failed, K known divergences` alone on a line. Known divergences are
//! the listed, deliberate differences (`conformance::corpus::KNOWN_DIVERGENCES`); a difference
//! that is not listed exactly is a failure.
//!
//! Exit status: 0 when nothing failed (known divergences do not fail the run), 1 on any failure,
//! 2 on a usage or layout error.

#![allow(clippy::print_stdout)]

use std::path::PathBuf;
use std::process::ExitCode;

use conformance::corpus::{self, Check, Options};

fn usage(msg: &str) -> ExitCode {
    eprintln!("golden: {msg}");
    eprintln!("usage: golden [--only CHECK[,CHECK...]] [--filter TEXT] [--known] <DIR>");
    let names: Vec<&str> = Check::ALL.iter().map(|c| c.name()).collect();
    eprintln!("checks: {}", names.join(", "));
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let mut options = Options::default();
    let mut dir: Option<PathBuf> = None;
    let mut show_known = false;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--only" => {
                let Some(list) = args.next() else {
                    return usage("--only needs a list of checks");
                };
                let mut checks = Vec::new();
                for name in list.split(',') {
                    match Check::from_name(name) {
                        Some(c) => checks.push(c),
                        None => return usage(&format!("unknown check {name:?}")),
                    }
                }
                options.checks = checks;
            }
            "--filter" => {
                let Some(text) = args.next() else {
                    return usage("--filter needs a text");
                };
                options.filter = Some(text);
            }
            "--known" => show_known = true,
            "-h" | "--help" => return usage("help"),
            _ if dir.is_none() => dir = Some(PathBuf::from(arg)),
            _ => return usage(&format!("unexpected argument {arg:?}")),
        }
    }
    let Some(dir) = dir else {
        return usage("missing corpus directory");
    };
    match corpus::run(&dir, &options) {
        Ok(report) => {
            for failure in &report.failures {
                println!("{failure}");
            }
            if show_known {
                for known in &report.divergences {
                    println!("{known}");
                }
            }
            for line in report.group_lines() {
                println!("{line}");
            }
            println!("{}", report.summary());
            if report.failures.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(e) => {
            eprintln!("golden: layout error: {e}");
            ExitCode::from(2)
        }
    }
}
