//! Colour only on a terminal, and never with `NO_COLOR` or `--no-color`; nothing but the
//! output itself when stdout and stderr are not terminals. The terminal is a pseudo-terminal
//! made by util-linux `script`.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

use std::process::Command;

use crate::common::{BIN, Temp, run};

/// Runs `sessionctl args` on a pseudo-terminal; returns what the terminal showed.
fn on_terminal(args: &[&str], no_color: Option<&str>) -> String {
    let mut line = String::from(BIN);
    for a in args {
        line.push_str(" '");
        line.push_str(a);
        line.push('\'');
    }
    let mut cmd = Command::new("script");
    // `cat` as the pager: what reaches the terminal, without waiting for keys.
    cmd.args(["-qec", &line, "/dev/null"])
        .env_remove("NO_COLOR")
        .env("PAGER", "cat");
    if let Some(v) = no_color {
        cmd.env("NO_COLOR", v);
    }
    let out = cmd
        .output()
        .expect("util-linux `script` runs a pseudo-terminal");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn colour_only_on_a_terminal() {
    if Command::new("script").arg("--version").output().is_err() {
        // Without a pseudo-terminal the test cannot run, and that fails unless asked for.
        const ALLOW_SKIP: &str = "SESSION_TEST_ALLOW_NO_SCRIPT";
        assert!(
            std::env::var(ALLOW_SKIP).as_deref() == Ok("1"),
            "util-linux `script` is not installed; set {ALLOW_SKIP}=1 to skip colour_only_on_a_terminal"
        );
        return;
    }
    let root = Temp::new("tty");
    run(&["--root", root.str(), "demo"]).ok();
    let args = ["--root", root.str(), "inspect", "demo"];
    let shown = on_terminal(&args, None);
    assert!(
        shown.contains("\x1b[1m"),
        "bold headings on a terminal: {shown}"
    );
    assert!(shown.contains("closers load would add"));
    assert!(!on_terminal(&args, Some("1")).contains('\x1b'), "NO_COLOR");
    let mut flagged = args.to_vec();
    flagged.push("--no-color");
    assert!(!on_terminal(&flagged, None).contains('\x1b'), "--no-color");
    // An empty NO_COLOR does not disable colour.
    assert!(on_terminal(&args, Some("")).contains('\x1b'));

    // Errors on a terminal are coloured too, and plain in a pipe.
    let shown = on_terminal(&["--root", root.str(), "inspect", "missing"], None);
    assert!(shown.contains("\x1b[31merror:"), "{shown}");
    let piped = run(&["--root", root.str(), "inspect", "missing"]);
    assert_eq!(piped.code, 1);
    assert!(
        piped
            .stderr
            .starts_with("sessionctl: error: session \"missing\" not found")
    );

    // Off a terminal: no colour, and nothing on stderr (no progress indication).
    let piped = run(&args).ok();
    assert!(!piped.stdout.contains('\x1b'));
    assert!(piped.stderr.is_empty(), "{}", piped.stderr);
}
