//! The command line for people: help of every command, suggestions, `--color`, completions,
//! man pages (checked against `docs/man/`), and empty operands.

#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

use std::path::Path;

use crate::common::{Temp, run, run_env};

/// The visible commands, as `sessionctl help` lists them.
const COMMANDS: &[&str] = &[
    "demo",
    "append",
    "list",
    "inspect",
    "repair",
    "messages",
    "transcript",
    "header",
    "fork",
    "convert",
    "seal",
    "verify",
    "stats",
    "completions",
    "man",
];

/// Every command's `--help` and `sessionctl help COMMAND` print the same text: a usage
/// line, every option with a description, and an example.
#[test]
fn every_command_help_lists_options_with_descriptions_and_an_example() {
    for cmd in COMMANDS {
        let long = run(&[cmd, "--help"]).ok();
        let via_help = run(&["help", cmd]).ok();
        assert_eq!(long.stdout, via_help.stdout, "{cmd}");
        let text = &long.stdout;
        assert!(text.contains("Usage: sessionctl"), "{cmd}: {text}");
        assert!(text.contains("Example"), "{cmd}: no example: {text}");
        // every `--option` line is followed by a description line
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let t = line.trim_start();
            if t.starts_with("--") && line.starts_with("      --") {
                let next = lines.get(i + 1).map_or("", |l| l.trim());
                assert!(!next.is_empty(), "{cmd}: option {t} has no description");
            }
        }
        for global in ["--store", "--root", "--json", "--color", "--no-color"] {
            assert!(text.contains(global), "{cmd}: {global} missing");
        }
    }
    let fork = run(&["help", "fork"]).ok().stdout;
    for option in ["--at <SEQ>", "--id <NEW>"] {
        assert!(fork.contains(option), "{fork}");
    }
}

/// A mistyped command or option gets clap's suggestion, and is a usage error (exit 2).
#[test]
fn mistyped_commands_and_options_get_a_suggestion() {
    let r = run(&["inspct", "x"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.starts_with("sessionctl: error: "), "{}", r.stderr);
    assert!(r.stderr.contains("'inspect'"), "{}", r.stderr);
    let r = run(&["messages", "x", "--ful"]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("--full"), "{}", r.stderr);
    let r = run(&["inspct", "x", "--json"]);
    assert_eq!(r.code, 2);
    assert_eq!(r.json_error()["name"], "UsageError");
    assert!(r.stdout.is_empty());
}

const RED: &str = "\x1b[31m";

/// `--color` decides; with `auto`, `NO_COLOR` turns colour off and `CLICOLOR_FORCE` on even
/// when piped; `--no-color` is `--color never`.
#[test]
fn color_follows_the_option_then_no_color_and_clicolor_force() {
    let missing = ["inspect", "/nonexistent/session.jsonl"];
    let with = |extra: &[&str], env: &[(&str, &str)]| {
        let mut args: Vec<&str> = missing.to_vec();
        args.extend_from_slice(extra);
        let r = run_env(&args, None, env);
        assert_eq!(r.code, 1, "{}", r.stderr);
        r.stderr.contains(RED)
    };
    assert!(!with(&[], &[]), "piped: no colour");
    assert!(with(&["--color", "always"], &[]));
    assert!(with(&["--color=always"], &[("NO_COLOR", "1")]));
    assert!(!with(&["--color", "never"], &[("CLICOLOR_FORCE", "1")]));
    assert!(!with(&["--no-color"], &[("CLICOLOR_FORCE", "1")]));
    assert!(with(&[], &[("CLICOLOR_FORCE", "1")]));
    assert!(!with(&[], &[("CLICOLOR_FORCE", "0")]));
    assert!(!with(&[], &[("CLICOLOR_FORCE", "1"), ("NO_COLOR", "1")]));
    assert!(with(&["--color", "auto"], &[("CLICOLOR_FORCE", "1")]));
    let r = run(&["list", "--color", "sometimes"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("always"), "{}", r.stderr);
}

/// `completions bash|zsh|fish` print a script naming the commands and options.
#[test]
fn completions_name_the_commands_for_each_shell() {
    for shell in ["bash", "zsh", "fish"] {
        let r = run(&["completions", shell]).ok();
        for word in ["inspect", "convert", "completions", "root", "color"] {
            assert!(r.stdout.contains(word), "{shell}: {word}");
        }
    }
    assert!(
        run(&["completions", "bash"])
            .stdout
            .contains("complete -F _sessionctl")
    );
    let r = run(&["completions", "tcsh"]);
    assert_eq!(r.code, 2);
}

/// The man pages in `docs/man/` are what `sessionctl man --out-dir` writes now. When they
/// are stale the test fails; with `SESSIONCTL_UPDATE_MAN=1` it rewrites them first.
#[test]
fn man_pages_in_docs_are_current() {
    let fresh = Temp::new("man");
    run(&["man", "--out-dir", fresh.str()]).ok();
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/man");
    if std::env::var_os("SESSIONCTL_UPDATE_MAN").is_some_and(|v| v == "1") {
        let _ = std::fs::remove_dir_all(&docs);
        std::fs::create_dir_all(&docs).unwrap();
        for entry in std::fs::read_dir(fresh.path()).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), docs.join(entry.file_name())).unwrap();
        }
    }
    let names = |dir: &Path| {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .map(|d| {
                d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    };
    let want = names(fresh.path());
    assert!(want.contains(&"sessionctl.1".to_owned()), "{want:?}");
    assert!(
        want.contains(&"sessionctl-inspect.1".to_owned()),
        "{want:?}"
    );
    assert_eq!(
        names(&docs),
        want,
        "docs/man is stale: run SESSIONCTL_UPDATE_MAN=1 cargo test -p session-cli --test cli_tests man_pages"
    );
    for name in &want {
        let now = std::fs::read(fresh.path().join(name)).unwrap();
        let stored = std::fs::read(docs.join(name)).unwrap();
        assert!(
            now == stored,
            "docs/man/{name} is stale: run SESSIONCTL_UPDATE_MAN=1 cargo test -p session-cli --test cli_tests man_pages"
        );
    }
    let page = run(&["man"]).ok().stdout;
    assert!(
        page.starts_with(".ie") || page.contains(".TH sessionctl"),
        "{page}"
    );
    let page = run(&["man", "inspect"]).ok().stdout;
    assert!(page.contains("sessionctl\\-inspect"), "{page}");
    assert_eq!(run(&["man", "nope"]).code, 2);
}

/// An empty operand or option value is refused (exit 2) before anything is read or written:
/// `convert demo ""` must not write into the working directory.
#[test]
fn empty_operands_are_refused_everywhere() {
    let root = Temp::new("empty");
    let cwd = Temp::new("empty-cwd");
    for args in [
        vec!["convert", "demo", ""],
        vec!["convert", "", "x"],
        vec!["inspect", ""],
        vec!["fork", "demo", "--id", ""],
        vec!["verify", ""],
        vec!["append", "", "--create"],
        vec!["messages", "demo", "--at", ""],
    ] {
        let mut full = vec!["--root", root.str()];
        full.extend(args.iter());
        let out = std::process::Command::new(crate::common::BIN)
            .args(&full)
            .current_dir(cwd.path())
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("is empty"), "{args:?}: {stderr}");
        assert_eq!(
            std::fs::read_dir(cwd.path()).unwrap().count(),
            0,
            "{args:?}"
        );
    }
    let r = run(&["--root", "", "list"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
}
