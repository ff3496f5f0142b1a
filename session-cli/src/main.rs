//! `sessionctl` owns the command line of the session layer: it inspects, repairs, forks,
//! converts and verifies stored agent sessions, appends to them, and runs a demo.
//!
//! Primary pieces: the argument parser (`args`, clap derive), session resolution and the
//! store (`store`: a JSONL root or a `SQLite` database named by `--store`; an id, a session
//! directory or a session file), the inspect report (`report`), one module per command group,
//! and the crate's `Error`, which carries the file, line, byte offset or seq of a failure and
//! a hint on what to do.
//!
//! # Key design decision
//!
//! Every command goes through the same persistence service an agent harness uses
//! (`session_persist::Persistence` over the store's backend, JSONL or `SQLite`, one variant of
//! `store::Backing` each): read commands use its `inspect` (never writes), `repair` its
//! `load`, `append` and `fork` its write-behind path with flush barriers. Output is streamed
//! line by line, so large sessions print promptly and memory is bounded by the session itself.
//!
//! # Example
//!
//! ```text
//! $ sessionctl demo
//! $ sessionctl list
//! $ sessionctl inspect demo --json
//! $ printf '%s\n' '{"type":"turn/start","data":{"turn":1}}' '{"flush":true}' \
//!     | sessionctl append notes --create --cwd /work/notes
//! {"flushed":0}
//! ```
//!
//! Exit codes: 0 success, 1 failure or violation, 2 usage error. See `docs/cli.md`.

mod append_failure;
mod args;
mod cmd_compaction;
mod cmd_completions;
mod cmd_convert;
mod cmd_import;
mod cmd_man;
mod cmd_read;
mod cmd_serve;
mod cmd_verify;
mod cmd_view;
mod cmd_write;
mod demo;
mod error;
mod json;
mod output;
mod pager;
mod progress;
mod render;
mod report;
mod stdin_session;
mod store;

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use args::ColorWhen;
use args::{Invocation, Parsed};
use error::{Error, Result};
use output::{Out, Style};

fn run(inv: &Invocation, out: &mut Out) -> Result<()> {
    match inv.command {
        "demo" => demo::demo(inv, out),
        "__demo-writer" => demo::writer(inv),
        "append" => cmd_write::append(inv, out),
        "list" => cmd_read::list(inv, out),
        "inspect" => cmd_read::inspect(inv, out),
        "repair" => cmd_read::repair(inv, out),
        "messages" => cmd_read::messages(inv, out),
        "transcript" => cmd_read::transcript(inv, out),
        "header" => cmd_read::header(inv, out),
        "fork" => cmd_write::fork(inv, out),
        "convert" => cmd_convert::convert(inv, out),
        "seal" => cmd_write::seal(inv, out),
        "verify" => cmd_verify::verify(inv, out),
        "stats" => cmd_read::stats(inv, out),
        "serve" => cmd_serve::serve(
            &cmd_serve::ServeArgs {
                bind: inv.value("--bind").map(str::to_owned),
                open: inv.flag("--open"),
                allow_remote: inv.flag("--allow-remote"),
            },
            &inv.global,
            out,
        ),
        "view" => cmd_view::view(
            &cmd_view::ViewArgs {
                session: inv.operand(0).to_owned(),
                output: inv.value("-o").map(std::path::PathBuf::from),
                redact: !inv.flag("--no-redact"),
            },
            &inv.global,
            out,
        ),
        "compactions" => {
            let args = cmd_compaction::CompactionsArgs::from_invocation(inv);
            cmd_compaction::compactions(&inv.global, &args, out)
        }
        "diff" => {
            let args = cmd_compaction::DiffArgs::from_invocation(inv)?;
            cmd_compaction::diff(&inv.global, &args, out)
        }
        "uncompact" => {
            let args = cmd_compaction::UncompactArgs::from_invocation(inv)?;
            cmd_compaction::uncompact(&inv.global, &args, out)
        }
        "import" => cmd_import::import(
            &cmd_import::ImportArgs::from_operands(&inv.operands, inv.value("--id"))?,
            &inv.global,
            out,
        ),
        other => Err(Error::usage(format!("unknown command \"{other}\""))),
    }
}

/// Replaces a `-` operand of a reading command by a spooled copy of stdin.
fn spool_stdin(inv: &mut Invocation) -> Result<Option<stdin_session::Spooled>> {
    if !stdin_session::READERS.contains(&inv.command) {
        return Ok(None);
    }
    // `convert - DEST`: only the source; `verify`: any operand.
    let last = if inv.command == "verify" {
        inv.operands.len()
    } else {
        1
    };
    let Some(i) = inv.operands[..last.min(inv.operands.len())]
        .iter()
        .position(|o| o == "-")
    else {
        return Ok(None);
    };
    let spooled = stdin_session::spool(std::io::stdin().lock())?;
    inv.operands[i] = spooled.file.to_string_lossy().into_owned();
    Ok(Some(spooled))
}

fn report_error(e: &Error, json: bool, color: ColorWhen) {
    let mut err = std::io::stderr().lock();
    if json {
        let _ = writeln!(err, "{}", e.to_json().to_json());
    } else {
        let colour = color.allows(std::io::stderr().is_terminal());
        let style = Style::new(colour);
        let text = e.render(&|s| style.red(s));
        let _ = write!(err, "{}", output::sanitize_line(&text, colour));
    }
}

fn main() -> ExitCode {
    let mut argv = Vec::new();
    for a in std::env::args_os().skip(1) {
        match a.into_string() {
            Ok(s) => argv.push(s),
            Err(bad) => {
                report_error(
                    &Error::usage(format!(
                        "argument \"{}\" is not valid UTF-8",
                        bad.to_string_lossy()
                    )),
                    false,
                    ColorWhen::Auto,
                );
                return ExitCode::from(2);
            }
        }
    }
    let json_requested = argv.iter().any(|a| a == "--json");
    let color = ColorWhen::scan(&argv);
    let done = |result: Result<()>| match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            report_error(&e, json_requested, color);
            ExitCode::from(e.exit_code())
        }
    };
    let inv = match args::parse(argv) {
        Ok(Parsed::Print(text)) => {
            let _ = std::io::stdout().lock().write_all(text.as_bytes());
            return ExitCode::SUCCESS;
        }
        Ok(Parsed::Completions(c)) => {
            return done(cmd_completions::completions(
                &c,
                &mut std::io::stdout().lock(),
            ));
        }
        Ok(Parsed::Man(m)) => return done(cmd_man::man(&m, &mut std::io::stdout().lock())),
        Ok(Parsed::Run(inv)) => inv,
        Err(e) => return done(Err(e)),
    };
    store::set_allow_permissive_dirs(inv.global.allow_permissive_dirs);
    let mut inv = inv;
    // `-`: a session file from stdin, spooled for the command and removed after it.
    let _spooled = match spool_stdin(&mut inv) {
        Ok(s) => s,
        Err(e) => return done(Err(e)),
    };
    let mut out = if pager::PAGED.contains(&inv.command) && !inv.global.json && !inv.global.no_pager
    {
        Out::paged(inv.global.color)
    } else {
        Out::stdout(inv.global.color)
    };
    let result = run(&inv, &mut out).and_then(|()| out.finish().map_err(Error::from));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Error::Output(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            let _ = out.finish();
            report_error(&e, inv.global.json, inv.global.color);
            ExitCode::from(e.exit_code())
        }
    }
}
