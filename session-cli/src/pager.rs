//! The pager long human output goes through when stdout is a terminal, as git does:
//! `$PAGER` (run by `sh -c`), default `less -FRX` (quit when it fits on one screen, keep
//! colour, leave the text on the screen). An empty `PAGER`, `--no-pager`, `--json`, or a
//! stdout that is not a terminal means no pager; a pager that cannot start means none too.

use std::process::{Child, ChildStdin, Command, Stdio};

/// The default pager command.
pub(crate) const DEFAULT: &str = "less -FRX";

/// The commands whose human output is paged.
pub(crate) const PAGED: &[&str] = &["transcript", "messages", "inspect"];

/// The pager command to run: `$PAGER`, else [`DEFAULT`]; `None` when `PAGER` is set empty.
pub(crate) fn command() -> Option<String> {
    match std::env::var("PAGER") {
        Ok(p) if p.trim().is_empty() => None,
        Ok(p) => Some(p),
        Err(_) => Some(DEFAULT.to_owned()),
    }
}

/// Starts the pager with its stdin piped; `None` when none is configured or it cannot start.
pub(crate) fn spawn() -> Option<(Child, ChildStdin)> {
    let line = command()?;
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(&line)
        .stdin(Stdio::piped())
        .spawn()
        .ok()?;
    let stdin = child.stdin.take()?;
    Some((child, stdin))
}
