//! The command line: global options, commands, their operands and options.
//!
//! Declared with clap's derive API: one struct per command ([`Command`]), the global options
//! in [`GlobalArgs`]. Clap owns help, suggestions, completions and man pages; this module
//! then checks what the documented usage errors need (operand counts, `--json` on a
//! command without JSON output, store specs) so their texts and exit code 2 stay as
//! `docs/cli.md` states.

// Doc comments on the clap structs are the help text people read: plain words, no Markdown.
#![allow(clippy::doc_markdown)]

use std::collections::HashMap;
use std::io::IsTerminal;
use std::path::PathBuf;

use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};

use session_persist::Compression;

use crate::error::{Error, Result};
use crate::store::StoreAt;

/// The default store root, relative to the working directory.
pub(crate) const DEFAULT_ROOT: &str = "./sessions";

/// A store named by `--store SPEC` that is not a JSONL root (`jsonl:DIR` is `--root DIR`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Database {
    /// `sqlite:PATH`: one database file holding every session.
    Sqlite(PathBuf),
    /// `postgres://…` / `postgresql://…`: a `PostgreSQL` connection URL.
    Postgres(String),
}

/// What `--store SPEC` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StoreSpec {
    /// `jsonl:DIR`.
    Jsonl(PathBuf),
    /// A database.
    Database(Database),
}

/// The message for a `--store` value that names no store kind.
const STORE_FORMS: &str = "jsonl:DIR, sqlite:PATH or postgres://…";

/// Parses a store spec (`--store`, or a `convert` DEST): `jsonl:DIR`, `sqlite:PATH`,
/// `postgres://…`; `None` when `text` has none of these prefixes.
pub(crate) fn parse_store_spec(option: &str, text: &str) -> Option<Result<StoreSpec>> {
    let nonempty = |kind: &str, rest: &str| {
        if rest.is_empty() {
            Err(Error::usage(format!(
                "{option} {kind}: needs a path after the colon; expected {STORE_FORMS}"
            )))
        } else {
            Ok(PathBuf::from(rest))
        }
    };
    if let Some(rest) = text.strip_prefix("jsonl:") {
        return Some(nonempty("jsonl", rest).map(StoreSpec::Jsonl));
    }
    if let Some(rest) = text.strip_prefix("sqlite:") {
        return Some(nonempty("sqlite", rest).map(|p| StoreSpec::Database(Database::Sqlite(p))));
    }
    if text.starts_with("postgres://") || text.starts_with("postgresql://") {
        return Some(Ok(StoreSpec::Database(Database::Postgres(text.to_owned()))));
    }
    None
}

/// Options that apply to every command.
#[derive(Debug, Clone, Default)]
#[allow(clippy::struct_excessive_bools)] // one bool per documented flag
pub(crate) struct Global {
    /// `--root DIR` (or `--store jsonl:DIR`).
    pub(crate) root: Option<PathBuf>,
    /// `--store SPEC` naming a database.
    pub(crate) database: Option<Database>,
    /// `--compression zstd|none`, when given.
    pub(crate) compression: Option<Compression>,
    /// `--json`.
    pub(crate) json: bool,
    /// `--color` (`--no-color` is `--color never`).
    pub(crate) color: ColorWhen,
    /// `--allow-permissive-dirs`.
    pub(crate) allow_permissive_dirs: bool,
    /// `--no-pager`.
    pub(crate) no_pager: bool,
    /// `--take-over`: a `PostgreSQL` write takes a live lease over (see `docs/cli.md`).
    pub(crate) take_over: bool,
}

impl Global {
    /// The database `--store` names, made absolute (`None`: the store is a JSONL root).
    pub(crate) fn database(&self) -> Option<StoreAt> {
        self.database.as_ref().map(|d| match d {
            Database::Sqlite(path) => StoreAt::Sqlite {
                path: std::path::absolute(path).unwrap_or_else(|_| path.clone()),
            },
            Database::Postgres(url) => StoreAt::Postgres {
                url: url.clone(),
                take_over: self.take_over,
            },
        })
    }

    /// The store the global options name: the database, or the JSONL root with its encoding
    /// (`--compression`, else the encoding found under it).
    pub(crate) fn store(&self) -> StoreAt {
        self.database().unwrap_or_else(|| {
            let root = self.root();
            let compression = self
                .compression
                .unwrap_or_else(|| crate::store::detect_root_compression(&root));
            StoreAt::Jsonl { root, compression }
        })
    }

    /// The store root (`--root`, default `./sessions`), made absolute.
    pub(crate) fn root(&self) -> PathBuf {
        let root = self
            .root
            .clone()
            .unwrap_or_else(|| PathBuf::from(DEFAULT_ROOT));
        std::path::absolute(&root).unwrap_or(root)
    }
}

/// A parsed command line.
#[derive(Debug)]
pub(crate) struct Invocation {
    /// Global options.
    pub(crate) global: Global,
    /// The command name, as typed (`inspect`, `__demo-writer`, …).
    pub(crate) command: &'static str,
    /// Operands, in order.
    pub(crate) operands: Vec<String>,
    /// Flags given.
    pub(crate) flags: Vec<&'static str>,
    /// Valued options given (the last occurrence wins).
    pub(crate) values: HashMap<&'static str, String>,
}

impl Invocation {
    /// Whether flag `name` was given.
    pub(crate) fn flag(&self, name: &str) -> bool {
        self.flags.contains(&name)
    }

    /// The value of option `name`.
    pub(crate) fn value(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    /// Operand `i` (present by arity).
    pub(crate) fn operand(&self, i: usize) -> &str {
        self.operands.get(i).map_or("", String::as_str)
    }

    /// `--at SEQ` as a seq.
    pub(crate) fn seq_option(&self, name: &str) -> Result<Option<u64>> {
        self.value(name).map(|v| parse_seq(name, v)).transpose()
    }
}

/// Parses a non-negative integer option value.
pub(crate) fn parse_seq(option: &str, text: &str) -> Result<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Error::usage(format!(
            "{option} expects a seq (a non-negative integer), got \"{text}\""
        )));
    }
    text.parse::<u64>()
        .ok()
        .filter(|n| *n <= 9_007_199_254_740_991)
        .ok_or_else(|| Error::usage(format!("{option} value {text} is too large")))
}

/// When to use colour (`--color`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub(crate) enum ColorWhen {
    /// On a terminal, unless `NO_COLOR` is set; `CLICOLOR_FORCE` forces it on.
    #[default]
    Auto,
    /// Always, even when piped.
    Always,
    /// Never.
    Never,
}

impl ColorWhen {
    /// Whether a stream gets colour: `never` and `always` decide; `auto` gives none when
    /// `NO_COLOR` is set and non-empty, colour when `CLICOLOR_FORCE` is set to anything
    /// but `0`, else colour exactly when the stream is a terminal.
    pub(crate) fn allows(self, is_terminal: bool) -> bool {
        let set = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        match self {
            ColorWhen::Never => false,
            ColorWhen::Always => true,
            ColorWhen::Auto if set("NO_COLOR").is_some() => false,
            ColorWhen::Auto if set("CLICOLOR_FORCE").is_some_and(|v| v != "0") => true,
            ColorWhen::Auto => is_terminal,
        }
    }

    /// Scans raw arguments for `--color WHEN`, `--color=WHEN` and `--no-color`, so that even
    /// a usage error is coloured as asked (the last one wins).
    pub(crate) fn scan(args: &[String]) -> ColorWhen {
        let mut when = ColorWhen::Auto;
        let mut it = args.iter().take_while(|a| *a != "--");
        while let Some(a) = it.next() {
            let value = match a.as_str() {
                "--no-color" => Some("never"),
                "--color" => it.next().map(String::as_str),
                other => other.strip_prefix("--color="),
            };
            if let Some(v) = value.and_then(|v| ColorWhen::from_str(v, false).ok()) {
                when = v;
            }
        }
        when
    }
}

const EXAMPLES: &str = "\
Examples:
  sessionctl demo
  sessionctl list
  sessionctl inspect demo --json
  zstd -dc session.jsonl.zstd | sessionctl messages -

SESSION is a session id under the root, a session directory, or a session.jsonl /
session.jsonl.zstd file (its root is three levels up); with a database store (sqlite:,
postgres://), a session id in the database.

Exit codes: 0 success, 1 failure or violation, 2 usage error. See docs/cli.md.";

/// `sessionctl`: inspect, repair, fork and convert agent session logs.
#[derive(Debug, Parser)]
#[command(
    name = "sessionctl",
    version,
    about = "inspect, repair, fork and convert agent session logs",
    help_template = "{name}: {about-with-newline}\n{usage-heading} {usage}\n\n{all-args}{after-help}",
    override_usage = "sessionctl [--store SPEC | --root DIR] [--compression zstd|none] [--json] COMMAND ...",
    after_help = EXAMPLES,
    subcommand_required = false,
    disable_help_subcommand = false,
    max_term_width = 100
)]
pub(crate) struct Cli {
    #[command(flatten)]
    global: GlobalArgs,
    #[command(subcommand)]
    command: Option<Command>,
}

/// The options every command takes (before or after the command name).
#[derive(Debug, Args)]
#[command(next_help_heading = "Global options")]
#[allow(clippy::struct_excessive_bools)] // one bool per documented flag, as clap declares them
struct GlobalArgs {
    /// The store: jsonl:DIR, sqlite:PATH (one database file), postgres://USER@HOST/DB
    #[arg(long, global = true, value_name = "SPEC")]
    store: Option<String>,
    /// The JSONL store root, same as --store jsonl:DIR [default: ./sessions]
    #[arg(long, global = true, value_name = "DIR")]
    root: Option<String>,
    /// The root's encoding, zstd or none [default: the encoding found, else zstd]
    #[arg(long, global = true, value_name = "zstd|none")]
    compression: Option<String>,
    /// Machine-readable output (read commands, fork, convert, verify)
    #[arg(long, global = true)]
    json: bool,
    /// When to use colour (NO_COLOR and CLICOLOR_FORCE are honoured with auto)
    #[arg(long, global = true, value_enum, value_name = "WHEN", default_value_t = ColorWhen::Auto)]
    color: ColorWhen,
    /// No colour, same as --color never
    #[arg(long, global = true)]
    no_color: bool,
    /// Accept a group/world-writable JSONL root, project or session directory
    #[arg(long, global = true)]
    allow_permissive_dirs: bool,
    /// Do not page long output (transcript, messages, inspect) on a terminal
    #[arg(long, global = true)]
    no_pager: bool,
    /// PostgreSQL: take a session's live writer lease over (the holder is known to be dead)
    #[arg(long, global = true)]
    take_over: bool,
}

/// A session operand (optional to clap, so that its absence is reported in the documented
/// words).
#[derive(Debug, Args)]
struct SessionArg {
    /// A session id, session directory, session file, or `-` for a file read from stdin
    #[arg(value_name = "SESSION")]
    session: Option<String>,
}

/// `--at SEQ`.
#[derive(Debug, Args)]
struct AtArg {
    /// As of this seq (a non-negative integer)
    #[arg(long, value_name = "SEQ")]
    at: Option<String>,
}

/// The commands, in help order.
#[derive(Debug, Subcommand)]
enum Command {
    /// Run a scripted agent session with a real crash, then repair and fork it
    #[command(
        override_usage = "sessionctl [--root DIR] [--compression zstd|none] demo",
        after_help = "Example:\n  sessionctl --root /tmp/sessions demo"
    )]
    Demo,
    /// Append event drafts read as JSON lines from stdin; {"flush":true} is a barrier
    #[command(
        override_usage = "sessionctl [--store SPEC | --root DIR] [--compression zstd|none] append SESSION [--create] [--cwd DIR]",
        after_help = "Example:\n  printf '%s\\n' '{\"type\":\"turn/start\",\"data\":{\"turn\":1}}' '{\"flush\":true}' \\\n    | sessionctl append notes --create --cwd /work/notes"
    )]
    Append(AppendCmd),
    /// List the stored sessions: id, created, cwd, events, lineage
    #[command(
        override_usage = "sessionctl [--store SPEC | --root DIR] [--compression zstd|none] list [--count] [--json]",
        after_help = "Example:\n  sessionctl --root ./sessions list --count --json"
    )]
    List(ListCmd),
    /// Report on a session without changing it (torn tail, closers load would add)
    #[command(
        override_usage = "sessionctl [--store SPEC | --root DIR] [--compression zstd|none] inspect SESSION [--children] [--json]",
        after_help = "Example:\n  sessionctl inspect demo --children --json"
    )]
    Inspect(InspectCmd),
    /// Print the inspect report, then commit the repair load performs
    #[command(
        override_usage = "sessionctl [--store SPEC | --root DIR] [--compression zstd|none] repair SESSION [--dry-run] [--json]",
        after_help = "Example:\n  sessionctl repair demo --dry-run"
    )]
    Repair(RepairCmd),
    /// The model-visible messages, optionally as of a seq
    #[command(
        override_usage = "sessionctl [--store SPEC | --root DIR] [--compression zstd|none] messages SESSION [--at SEQ] [--full] [--json]",
        after_help = "Example:\n  sessionctl messages demo --at 40 --full"
    )]
    Messages(MessagesCmd),
    /// The human transcript: original appends, compactions as markers
    #[command(
        override_usage = "sessionctl [--store SPEC | --root DIR] [--compression zstd|none] transcript SESSION [--full] [--json]",
        after_help = "Example:\n  sessionctl transcript demo --full"
    )]
    Transcript(TranscriptCmd),
    /// The folded request header, optionally as of a seq
    #[command(
        override_usage = "sessionctl [--store SPEC | --root DIR] [--compression zstd|none] header SESSION [--at SEQ] [--json]",
        after_help = "Example:\n  sessionctl header demo --at 20"
    )]
    Header(HeaderCmd),
    /// Fork a stored session at a closed boundary into a new session
    #[command(
        override_usage = "sessionctl [--store SPEC | --root DIR] [--compression zstd|none] fork SESSION [--at SEQ] [--id NEW] [--json]",
        after_help = "Example:\n  sessionctl fork demo --at 40 --id demo-retry"
    )]
    Fork(ForkCmd),
    /// Copy a session into another store (JSONL raw/zstd, SQLite), then verify it
    #[command(
        override_usage = "sessionctl [--store SPEC | --root DIR] [--compression zstd|none] convert SESSION DEST [--to zstd|none] [--json]",
        after_help = "Example:\n  sessionctl convert demo sqlite:/tmp/sessions.db"
    )]
    Convert(ConvertCmd),
    /// Rewrite a closed zstd log into one frame per turn (smaller, faster to load)
    #[command(
        override_usage = "sessionctl [--store SPEC | --root DIR] [--compression zstd|none] seal SESSION [--json]",
        after_help = "Example:\n  sessionctl seal demo"
    )]
    Seal(SessionArg),
    /// Run the conformance invariants on session files or directories
    #[command(
        override_usage = "sessionctl verify PATH... [--strict] [--json]",
        after_help = "Example:\n  sessionctl verify ./sessions --strict"
    )]
    Verify(VerifyCmd),
    /// Bytes on disk and in plaintext, per-type counts and bytes, compression ratio
    #[command(
        override_usage = "sessionctl [--store SPEC | --root DIR] [--compression zstd|none] stats SESSION [--json]",
        after_help = "Example:\n  sessionctl stats demo --json"
    )]
    Stats(SessionArg),
    /// Every compaction: what it replaced, the view's size before and after, what covers it
    #[command(
        override_usage = "sessionctl [--store SPEC | --root DIR] [--compression zstd|none] compactions SESSION [--json]",
        after_help = "Example:\n  sessionctl compactions demo --json"
    )]
    Compactions(SessionArg),
    /// How the model's view changed between two seqs: messages that left and entered it
    #[command(
        override_usage = "sessionctl [--store SPEC | --root DIR] [--compression zstd|none] diff SESSION --from SEQ --to SEQ [--json]",
        after_help = "Example:\n  sessionctl diff demo --from 40 --to 62"
    )]
    Diff(DiffCmd),
    /// A child session whose view is the parent's with a compaction (or all) undone
    #[command(
        override_usage = "sessionctl [--store SPEC | --root DIR] [--compression zstd|none] uncompact SESSION (--compaction SEQ | --all) --id CHILD [--json]",
        after_help = "Examples:\n  sessionctl uncompact demo --compaction 57 --id demo-undone\n  sessionctl uncompact demo --all --id demo-full"
    )]
    Uncompact(UncompactCmd),
    /// Import Codex rollouts or Claude Code transcripts as sessions (with their subagents)
    #[command(
        override_usage = "sessionctl [--store SPEC | --root DIR] [--compression zstd|none] import codex|claude-code FILE... [--id ID] [--json]",
        after_help = "Examples:\n  sessionctl import codex ~/.codex/sessions/2026/11/30/rollout-*.jsonl\n  sessionctl import claude-code ~/.claude/projects/*/SESSION.jsonl --json"
    )]
    Import(ImportCmd),
    /// Serve a read-only web view of the store's sessions (loopback only by default)
    #[command(
        override_usage = "sessionctl [--store SPEC | --root DIR] serve [--bind ADDR:PORT] [--open] [--allow-remote]",
        after_help = "Example:\n  sessionctl --root ./sessions serve --bind 127.0.0.1:7878 --open"
    )]
    Serve(ServeCmd),
    /// Write one self-contained HTML page of a session, secrets masked
    #[command(
        override_usage = "sessionctl [--store SPEC | --root DIR] [--compression zstd|none] view SESSION -o FILE.html [--no-redact]",
        after_help = "Example:\n  sessionctl view demo -o demo.html"
    )]
    View(ViewCmd),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell)
    #[command(
        after_help = "Example:\n  sessionctl completions bash > ~/.local/share/bash-completion/completions/sessionctl"
    )]
    Completions(CompletionsCmd),
    /// Print the man page of sessionctl or of one command, or write them all into a directory
    #[command(
        after_help = "Examples:\n  sessionctl man | man -l -\n  sessionctl man --out-dir docs/man"
    )]
    Man(ManCmd),
    /// The demo's writing process (internal)
    #[command(name = "__demo-writer", hide = true)]
    DemoWriter(SessionArg),
}

#[derive(Debug, Args)]
struct AppendCmd {
    #[command(flatten)]
    session: SessionArg,
    /// Create the session (with --cwd) when it does not exist
    #[arg(long)]
    create: bool,
    /// The working directory recorded in a created session's header
    #[arg(long, value_name = "DIR")]
    cwd: Option<String>,
}

#[derive(Debug, Args)]
struct ListCmd {
    /// Also count each session's events and report torn tails (reads every log: slow on
    /// large stores)
    #[arg(long)]
    count: bool,
}

#[derive(Debug, Args)]
struct InspectCmd {
    #[command(flatten)]
    session: SessionArg,
    /// Also name the stored sessions forked from this one (reads every session header of the
    /// store: slow on large stores)
    #[arg(long)]
    children: bool,
}

#[derive(Debug, Args)]
struct RepairCmd {
    #[command(flatten)]
    session: SessionArg,
    /// Print the report only; commit nothing
    #[arg(long)]
    dry_run: bool,
}

#[derive(Debug, Args)]
struct MessagesCmd {
    #[command(flatten)]
    session: SessionArg,
    #[command(flatten)]
    at: AtArg,
    /// Show whole message bodies instead of clipping them
    #[arg(long)]
    full: bool,
}

#[derive(Debug, Args)]
struct TranscriptCmd {
    #[command(flatten)]
    session: SessionArg,
    /// Show whole entries instead of clipping them
    #[arg(long)]
    full: bool,
}

#[derive(Debug, Args)]
struct HeaderCmd {
    #[command(flatten)]
    session: SessionArg,
    #[command(flatten)]
    at: AtArg,
}

#[derive(Debug, Args)]
struct ForkCmd {
    #[command(flatten)]
    session: SessionArg,
    /// The boundary seq to fork at (a closed turn's end) [default: the session's last boundary]
    #[arg(long, value_name = "SEQ")]
    at: Option<String>,
    /// The new session's id [default: a fresh UUID]
    #[arg(long, value_name = "NEW")]
    id: Option<String>,
}

#[derive(Debug, Args)]
struct ConvertCmd {
    #[command(flatten)]
    session: SessionArg,
    /// The destination: a JSONL root directory, jsonl:DIR, sqlite:PATH or postgres://…
    #[arg(value_name = "DEST")]
    dest: Option<String>,
    /// The destination's encoding for a JSONL root [default: the source's]
    #[arg(long, value_name = "zstd|none")]
    to: Option<String>,
}

#[derive(Debug, Args)]
struct VerifyCmd {
    /// Session files or directories (searched for session logs)
    #[arg(value_name = "PATH")]
    paths: Vec<String>,
    /// Also check the strict invariants (turn and step nesting of every event)
    #[arg(long)]
    strict: bool,
}

#[derive(Debug, Args)]
struct DiffCmd {
    #[command(flatten)]
    session: SessionArg,
    /// The earlier point: the model's view as of this seq
    #[arg(long, value_name = "SEQ")]
    from: Option<String>,
    /// The later point: the model's view as of this seq
    #[arg(long, value_name = "SEQ")]
    to: Option<String>,
}

#[derive(Debug, Args)]
struct UncompactCmd {
    #[command(flatten)]
    session: SessionArg,
    /// The seq of the compaction (surface replace) to undo
    #[arg(long, value_name = "SEQ", conflicts_with = "all")]
    compaction: Option<String>,
    /// Undo every compaction: the never-compacted view
    #[arg(long)]
    all: bool,
    /// The child session's id
    #[arg(long, value_name = "CHILD")]
    id: Option<String>,
}

#[derive(Debug, Args)]
struct ImportCmd {
    /// The source format: codex or claude-code
    #[arg(value_name = "FORMAT")]
    format: Option<String>,
    /// Codex rollouts (.jsonl, .jsonl.zst) or Claude Code transcripts (.jsonl)
    #[arg(value_name = "FILE")]
    files: Vec<String>,
    /// The imported session's id instead of the one derived from the source (one FILE only)
    #[arg(long, value_name = "ID")]
    id: Option<String>,
}

#[derive(Debug, Args)]
struct ServeCmd {
    /// The address to listen on [default: 127.0.0.1:7878; port 0 picks a free one]
    #[arg(long, value_name = "ADDR:PORT")]
    bind: Option<String>,
    /// Open the page in a browser (xdg-open)
    #[arg(long)]
    open: bool,
    /// Accept a non-loopback address; every request then needs the printed token
    #[arg(long)]
    allow_remote: bool,
}

#[derive(Debug, Args)]
struct ViewCmd {
    #[command(flatten)]
    session: SessionArg,
    /// The HTML file to write
    #[arg(short = 'o', long = "output", value_name = "FILE.html")]
    output: Option<String>,
    /// Keep secret-looking strings instead of masking them
    #[arg(long)]
    no_redact: bool,
}

/// `completions SHELL`.
#[derive(Debug, Args)]
pub(crate) struct CompletionsCmd {
    /// The shell
    #[arg(value_enum, value_name = "SHELL")]
    pub(crate) shell: clap_complete::Shell,
}

/// `man [COMMAND] [--out-dir DIR]`.
#[derive(Debug, Args)]
pub(crate) struct ManCmd {
    /// The command whose page to print [default: sessionctl's own]
    #[arg(value_name = "COMMAND")]
    pub(crate) command: Option<String>,
    /// Write every page (sessionctl.1, sessionctl-COMMAND.1) into this directory
    #[arg(long, value_name = "DIR", conflicts_with = "command")]
    pub(crate) out_dir: Option<PathBuf>,
}

/// The clap command tree (for help, completions and man pages).
pub(crate) fn command() -> clap::Command {
    Cli::command()
}

/// What `main` should do.
#[derive(Debug)]
pub(crate) enum Parsed {
    /// Print this text on stdout and exit 0 (help, version).
    Print(String),
    /// Print a completion script.
    Completions(CompletionsCmd),
    /// Print or write man pages.
    Man(ManCmd),
    /// Run a command.
    Run(Invocation),
}

fn parse_compression(text: &str) -> Result<Compression> {
    match text {
        "zstd" => Ok(Compression::Zstd),
        "none" => Ok(Compression::None),
        other => Err(Error::usage(format!(
            "--compression expects zstd or none, got \"{other}\""
        ))),
    }
}

/// One command's operands and options, before the checks of [`parse`].
struct Raw {
    name: &'static str,
    usage: &'static str,
    json: bool,
    operands: Vec<Option<String>>,
    flags: Vec<(&'static str, bool)>,
    values: Vec<(&'static str, Option<String>)>,
}

impl Raw {
    fn new(name: &'static str, usage: &'static str, json: bool) -> Raw {
        Raw {
            name,
            usage,
            json,
            operands: Vec::new(),
            flags: Vec::new(),
            values: Vec::new(),
        }
    }

    fn operand(mut self, value: Option<String>) -> Raw {
        self.operands.push(value);
        self
    }

    fn flag(mut self, name: &'static str, set: bool) -> Raw {
        self.flags.push((name, set));
        self
    }

    fn value(mut self, name: &'static str, value: Option<String>) -> Raw {
        self.values.push((name, value));
        self
    }
}

fn raw(command: Command) -> std::result::Result<Raw, Box<Parsed>> {
    use Command as C;
    Ok(match command {
        C::Demo => Raw::new("demo", "", false),
        C::Append(a) => Raw::new("append", "SESSION [--create] [--cwd DIR]", false)
            .operand(a.session.session)
            .flag("--create", a.create)
            .value("--cwd", a.cwd),
        C::List(a) => Raw::new("list", "[--count]", true).flag("--count", a.count),
        C::Inspect(a) => Raw::new("inspect", "SESSION [--children]", true)
            .operand(a.session.session)
            .flag("--children", a.children),
        C::Repair(a) => Raw::new("repair", "SESSION [--dry-run]", true)
            .operand(a.session.session)
            .flag("--dry-run", a.dry_run),
        C::Messages(a) => Raw::new("messages", "SESSION [--at SEQ] [--full]", true)
            .operand(a.session.session)
            .flag("--full", a.full)
            .value("--at", a.at.at),
        C::Transcript(a) => Raw::new("transcript", "SESSION [--full]", true)
            .operand(a.session.session)
            .flag("--full", a.full),
        C::Header(a) => Raw::new("header", "SESSION [--at SEQ]", true)
            .operand(a.session.session)
            .value("--at", a.at.at),
        C::Fork(a) => Raw::new("fork", "SESSION [--at SEQ] [--id NEW]", true)
            .operand(a.session.session)
            .value("--at", a.at)
            .value("--id", a.id),
        C::Convert(a) => Raw::new("convert", "SESSION DEST [--to zstd|none]", true)
            .operand(a.session.session)
            .operand(a.dest)
            .value("--to", a.to),
        C::Seal(a) => Raw::new("seal", "SESSION", true).operand(a.session),
        C::Verify(a) => {
            let mut r = Raw::new("verify", "PATH... [--strict]", true).flag("--strict", a.strict);
            if a.paths.is_empty() {
                r = r.operand(None);
            }
            for p in a.paths {
                r = r.operand(Some(p));
            }
            r
        }
        C::Stats(a) => Raw::new("stats", "SESSION", true).operand(a.session),
        C::Compactions(a) => Raw::new("compactions", "SESSION", true).operand(a.session),
        C::Diff(a) => Raw::new("diff", "SESSION --from SEQ --to SEQ", true)
            .operand(a.session.session)
            .value("--from", a.from)
            .value("--to", a.to),
        C::Uncompact(a) => Raw::new(
            "uncompact",
            "SESSION (--compaction SEQ | --all) --id CHILD",
            true,
        )
        .operand(a.session.session)
        .flag("--all", a.all)
        .value("--compaction", a.compaction)
        .value("--id", a.id),
        C::Import(a) => {
            let mut r = Raw::new("import", "FORMAT FILE... [--id ID]", true)
                .operand(a.format)
                .value("--id", a.id);
            if a.files.is_empty() {
                r = r.operand(None);
            }
            for f in a.files {
                r = r.operand(Some(f));
            }
            r
        }
        C::Serve(a) => Raw::new(
            "serve",
            "[--bind ADDR:PORT] [--open] [--allow-remote]",
            false,
        )
        .flag("--open", a.open)
        .flag("--allow-remote", a.allow_remote)
        .value("--bind", a.bind),
        C::View(a) => Raw::new("view", "SESSION -o FILE.html [--no-redact]", false)
            .operand(a.session.session)
            .flag("--no-redact", a.no_redact)
            .value("-o", a.output),
        C::DemoWriter(a) => Raw::new("__demo-writer", "SESSION", false).operand(a.session),
        C::Completions(c) => return Err(Box::new(Parsed::Completions(c))),
        C::Man(m) => return Err(Box::new(Parsed::Man(m))),
    })
}

/// The global options, checked.
fn global(g: GlobalArgs) -> Result<Global> {
    let mut global = Global {
        json: g.json,
        color: if g.no_color {
            ColorWhen::Never
        } else {
            g.color
        },
        allow_permissive_dirs: g.allow_permissive_dirs,
        no_pager: g.no_pager,
        take_over: g.take_over,
        ..Global::default()
    };
    if let Some(text) = g.store {
        let spec = parse_store_spec("--store", &text).unwrap_or_else(|| {
            Err(Error::usage(format!(
                "--store expects {STORE_FORMS}, got \"{text}\""
            )))
        })?;
        if g.root.is_some() {
            return Err(Error::usage(
                "--store and --root both name the store; pass one of them",
            ));
        }
        match spec {
            StoreSpec::Jsonl(dir) => global.root = Some(dir),
            StoreSpec::Database(d) => global.database = Some(d),
        }
    } else if let Some(root) = g.root {
        global.root = Some(PathBuf::from(nonempty("--root", root)?));
    }
    if let Some(c) = g.compression {
        global.compression = Some(parse_compression(&c)?);
    }
    if global.database.is_some() && global.compression.is_some() {
        return Err(Error::usage(
            "--compression applies to JSONL stores only; a database store takes none",
        ));
    }
    Ok(global)
}

/// Refuses an empty operand or option value: `""` names no path, and taking it as the
/// working directory would write where nobody asked.
fn nonempty(what: &str, value: String) -> Result<String> {
    if value.is_empty() {
        Err(Error::usage(format!(
            "{what} is empty; name a session, path or value"
        )))
    } else {
        Ok(value)
    }
}

/// Parses the arguments after the program name. A usage error is an [`Error`] of exit
/// code 2 whose message is clap's (with its suggestion) or the documented text.
pub(crate) fn parse(args: Vec<String>) -> Result<Parsed> {
    let colour = ColorWhen::scan(&args).allows(std::io::stdout().is_terminal());
    let cmd = Cli::command().color(if colour {
        clap::ColorChoice::Always
    } else {
        clap::ColorChoice::Never
    });
    let matches = cmd.try_get_matches_from(std::iter::once("sessionctl".to_owned()).chain(args));
    let matches = match matches {
        Ok(m) => m,
        Err(e) => return clap_outcome(&e, colour),
    };
    let cli = <Cli as clap::FromArgMatches>::from_arg_matches(&matches)
        .map_err(|e| Error::usage(clap_message(&e)))?;
    let global = global(cli.global)?;
    let Some(command) = cli.command else {
        let help = Cli::command().render_help().to_string();
        return Ok(Parsed::Print(help));
    };
    let raw = match raw(command) {
        Ok(r) => r,
        Err(other) => return Ok(*other),
    };
    if global.json && !raw.json {
        return Err(Error::usage(format!(
            "`{}` has no --json output; see `sessionctl help {}`",
            raw.name, raw.name
        )));
    }
    let mut operands = Vec::new();
    for o in raw.operands {
        match o {
            Some(v) => operands.push(nonempty(&format!("the {} operand", raw.name), v)?),
            None => {
                return Err(Error::usage(format!(
                    "`{}` needs {}; usage: sessionctl {} {}",
                    raw.name,
                    missing_operand(raw.usage),
                    raw.name,
                    raw.usage
                )));
            }
        }
    }
    let flags = raw
        .flags
        .into_iter()
        .filter_map(|(n, set)| set.then_some(n))
        .collect();
    let mut values = HashMap::new();
    for (name, value) in raw.values {
        if let Some(v) = value {
            values.insert(name, nonempty(name, v)?);
        }
    }
    Ok(Parsed::Run(Invocation {
        global,
        command: raw.name,
        operands,
        flags,
        values,
    }))
}

/// Help and version go to stdout (exit 0); every other clap error is a usage error.
fn clap_outcome(e: &clap::Error, colour: bool) -> Result<Parsed> {
    use clap::error::ErrorKind as K;
    match e.kind() {
        K::DisplayHelp | K::DisplayVersion | K::DisplayHelpOnMissingArgumentOrSubcommand => {
            let text = e.render();
            Ok(Parsed::Print(if colour {
                text.ansi().to_string()
            } else {
                text.to_string()
            }))
        }
        _ => Err(Error::usage(clap_message(e))),
    }
}

/// Clap's error text without its `error: ` prefix (the CLI adds its own) and trailing
/// newline.
fn clap_message(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let text = text.strip_prefix("error: ").unwrap_or(&text);
    let text = text.trim_end();
    text.strip_suffix("For more information, try '--help'.")
        .unwrap_or(text)
        .trim_end()
        .to_owned()
}

fn missing_operand(operands: &str) -> String {
    let words: Vec<&str> = operands
        .split_whitespace()
        .filter(|w| !w.starts_with('['))
        .collect();
    if words.is_empty() {
        "an operand".to_owned()
    } else {
        words.join(" ")
    }
}
