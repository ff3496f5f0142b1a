//! Long human output goes through a pager on a terminal (`$PAGER`, default `less -FRX`),
//! never when piped, with `--json`, or with `--no-pager`. The terminal is a pseudo-terminal
//! made by util-linux `script`, sized with `stty` so that `less -F` quits by itself.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

use std::process::Command;

use crate::common::{BIN, Temp, run, run_env};

/// Runs `sessionctl args` on a 200-row pseudo-terminal with `PAGER` as given (`None`:
/// unset); returns what the terminal showed.
fn on_terminal(args: &[&str], pager: Option<&str>) -> String {
    let mut line = String::from("stty rows 200 cols 120; ");
    line.push_str(BIN);
    for a in args {
        line.push_str(" '");
        line.push_str(a);
        line.push('\'');
    }
    let mut cmd = Command::new("script");
    cmd.args(["-qec", &line, "/dev/null"])
        .env("NO_COLOR", "1")
        .env_remove("LESS");
    match pager {
        Some(p) => cmd.env("PAGER", p),
        None => cmd.env_remove("PAGER"),
    };
    let out = cmd
        .output()
        .expect("util-linux `script` runs a pseudo-terminal");
    String::from_utf8_lossy(&out.stdout).replace('\r', "")
}

fn script_available() -> bool {
    conformance::skip::unless_allowed(
        "SESSION_TEST_ALLOW_NO_SCRIPT",
        "pager tests: util-linux `script` is not installed",
        || Command::new("script").arg("--version").output().is_ok(),
    )
}

#[test]
fn long_output_is_paged_only_on_a_terminal() {
    if !script_available() {
        return;
    }
    let root = Temp::new("pager");
    run(&["--root", root.str(), "demo"]).ok();
    let marker = "sed s/^/PAGED:/";
    for cmd in ["transcript", "messages", "inspect"] {
        let args = ["--root", root.str(), cmd, "demo"];
        let shown = on_terminal(&args, Some(marker));
        assert!(
            shown.lines().any(|l| l.starts_with("PAGED:")),
            "{cmd}: {shown}"
        );
        assert!(
            shown
                .lines()
                .filter(|l| !l.is_empty())
                .all(|l| l.starts_with("PAGED:")),
            "{cmd}: every line through the pager: {shown}"
        );
        let mut no_pager = args.to_vec();
        no_pager.push("--no-pager");
        let shown = on_terminal(&no_pager, Some(marker));
        assert!(!shown.contains("PAGED:"), "{cmd} --no-pager: {shown}");
        assert!(!shown.is_empty());
        let mut json = args.to_vec();
        json.push("--json");
        assert!(
            !on_terminal(&json, Some(marker)).contains("PAGED:"),
            "{cmd} --json"
        );
        // piped: never paged
        let piped = run_env(&args, None, &[("PAGER", marker)]).ok();
        assert!(!piped.stdout.contains("PAGED:"), "{cmd} piped");
    }
    // A command that is not long is not paged.
    let shown = on_terminal(&["--root", root.str(), "header", "demo"], Some(marker));
    assert!(!shown.contains("PAGED:"), "{shown}");
    // An empty PAGER means none.
    let shown = on_terminal(&["--root", root.str(), "transcript", "demo"], Some(""));
    assert!(shown.contains("demo"), "{shown}");
}

/// Without `PAGER`, `less -FRX` pages: output that fits on the screen is shown and `less`
/// quits by itself (`-F`), leaving the text on the screen (`-X`).
#[test]
fn the_default_pager_is_less_quitting_when_the_text_fits() {
    if !script_available() {
        return;
    }
    if Command::new("less").arg("--version").output().is_err() {
        const ALLOW_SKIP: &str = "SESSION_TEST_ALLOW_NO_LESS";
        assert!(
            std::env::var(ALLOW_SKIP).as_deref() == Ok("1"),
            "`less` is not installed; set {ALLOW_SKIP}=1 to skip the default-pager test"
        );
        return;
    }
    let root = Temp::new("pager-less");
    run(&["--root", root.str(), "demo"]).ok();
    let piped = run(&["--root", root.str(), "transcript", "demo"]).ok();
    let shown = on_terminal(&["--root", root.str(), "transcript", "demo"], None);
    let first = piped.stdout.lines().next().unwrap();
    assert!(shown.contains(first.trim()), "{shown}");
    let last = piped
        .stdout
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap();
    assert!(shown.contains(last.trim()), "{shown}");
}
