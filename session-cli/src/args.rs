//! The command line: global options, commands, their operands and options.
//!
//! Hand-written on purpose: the grammar is small and fixed, and owning it keeps the usage
//! errors (exit code 2) and the help text exactly as documented in `docs/cli.md`.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::PathBuf;

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
#[allow(clippy::struct_excessive_bools)] // one bool per command-line flag
pub(crate) struct Global {
    /// `--root DIR` (or `--store jsonl:DIR`).
    pub(crate) root: Option<PathBuf>,
    /// `--store SPEC` naming a database.
    pub(crate) database: Option<Database>,
    /// `--compression zstd|none`, when given.
    pub(crate) compression: Option<Compression>,
    /// `--json`.
    pub(crate) json: bool,
    /// `--no-color`.
    pub(crate) no_color: bool,
    /// `--allow-permissive-dirs`.
    pub(crate) allow_permissive_dirs: bool,
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

/// One command's grammar.
pub(crate) struct Spec {
    /// The command name.
    pub(crate) name: &'static str,
    /// The operands, for the usage line.
    pub(crate) operands: &'static str,
    /// One line on what it does.
    pub(crate) summary: &'static str,
    /// Minimum and maximum number of operands (`None`: unbounded).
    pub(crate) arity: (usize, Option<usize>),
    /// Options without a value.
    pub(crate) flags: &'static [&'static str],
    /// Options with a value.
    pub(crate) valued: &'static [&'static str],
    /// Whether the command takes `--json`.
    pub(crate) json: bool,
    /// Hidden from the help text.
    pub(crate) hidden: bool,
}

const fn spec(
    name: &'static str,
    operands: &'static str,
    summary: &'static str,
    arity: (usize, Option<usize>),
    flags: &'static [&'static str],
    valued: &'static [&'static str],
    json: bool,
) -> Spec {
    Spec {
        name,
        operands,
        summary,
        arity,
        flags,
        valued,
        json,
        hidden: false,
    }
}

/// Every command, in help order.
pub(crate) const COMMANDS: &[Spec] = &[
    spec(
        "demo",
        "",
        "run a scripted agent session with a real crash, then repair and fork it",
        (0, Some(0)),
        &[],
        &[],
        false,
    ),
    spec(
        "append",
        "SESSION [--create] [--cwd DIR]",
        "append event drafts read as JSON lines from stdin; {\"flush\":true} is a barrier",
        (1, Some(1)),
        &["--create"],
        &["--cwd"],
        false,
    ),
    spec(
        "list",
        "",
        "list the stored sessions: id, created, cwd, events, lineage",
        (0, Some(0)),
        &[],
        &[],
        true,
    ),
    spec(
        "inspect",
        "SESSION",
        "report on a session without changing it (torn tail, closers load would add)",
        (1, Some(1)),
        &[],
        &[],
        true,
    ),
    spec(
        "repair",
        "SESSION [--dry-run]",
        "print the inspect report, then commit the repair load performs",
        (1, Some(1)),
        &["--dry-run"],
        &[],
        true,
    ),
    spec(
        "messages",
        "SESSION [--at SEQ] [--full]",
        "the model-visible messages, optionally as of a seq",
        (1, Some(1)),
        &["--full"],
        &["--at"],
        true,
    ),
    spec(
        "transcript",
        "SESSION [--full]",
        "the human transcript: original appends, compactions as markers",
        (1, Some(1)),
        &["--full"],
        &[],
        true,
    ),
    spec(
        "header",
        "SESSION [--at SEQ]",
        "the folded request header, optionally as of a seq",
        (1, Some(1)),
        &[],
        &["--at"],
        true,
    ),
    spec(
        "fork",
        "SESSION [--at SEQ] [--id NEW]",
        "fork a stored session at a closed boundary into a new session",
        (1, Some(1)),
        &[],
        &["--at", "--id"],
        true,
    ),
    spec(
        "convert",
        "SESSION DEST [--to zstd|none]",
        "copy a session into another store (JSONL raw/zstd, SQLite), then verify it",
        (2, Some(2)),
        &[],
        &["--to"],
        true,
    ),
    spec(
        "seal",
        "SESSION",
        "rewrite a closed zstd log into one frame per turn (smaller, faster to load)",
        (1, Some(1)),
        &[],
        &[],
        true,
    ),
    spec(
        "verify",
        "PATH... [--strict]",
        "run the conformance invariants on session files or directories",
        (1, None),
        &["--strict"],
        &[],
        true,
    ),
    spec(
        "stats",
        "SESSION",
        "bytes on disk and in plaintext, per-type counts and bytes, compression ratio",
        (1, Some(1)),
        &[],
        &[],
        true,
    ),
    spec(
        "serve",
        "[--bind ADDR:PORT] [--open] [--allow-remote]",
        "serve a read-only web view of the store's sessions (loopback only by default)",
        (0, Some(0)),
        &["--open", "--allow-remote"],
        &["--bind"],
        false,
    ),
    spec(
        "view",
        "SESSION -o FILE.html [--no-redact]",
        "write one self-contained HTML page of a session, secrets masked",
        (1, Some(1)),
        &["--no-redact"],
        &["-o"],
        false,
    ),
    spec(
        "compactions",
        "SESSION",
        "every compaction: what it replaced, the view's size before and after, what covers it",
        (1, Some(1)),
        &[],
        &[],
        true,
    ),
    spec(
        "diff",
        "SESSION --from SEQ --to SEQ",
        "how the model's view changed between two seqs: messages that left and entered it",
        (1, Some(1)),
        &[],
        &["--from", "--to"],
        true,
    ),
    spec(
        "uncompact",
        "SESSION (--compaction SEQ | --all) --id CHILD",
        "a child session whose view is the parent's with a compaction (or all) undone",
        (1, Some(1)),
        &["--all"],
        &["--compaction", "--id"],
        true,
    ),
    spec(
        "import",
        "codex|claude-code FILE... [--id ID]",
        "import Codex rollouts or Claude Code transcripts as sessions (with their subagents)",
        (2, None),
        &[],
        &["--id"],
        true,
    ),
    spec(
        "help",
        "[COMMAND]",
        "show help for sessionctl or one command",
        (0, Some(1)),
        &[],
        &[],
        false,
    ),
    Spec {
        name: "__demo-writer",
        operands: "SESSION",
        summary: "the demo's writing process (internal)",
        arity: (1, Some(1)),
        flags: &[],
        valued: &[],
        json: false,
        hidden: true,
    },
];

/// A parsed command line.
#[derive(Debug)]
pub(crate) struct Invocation {
    /// Global options.
    pub(crate) global: Global,
    /// The command name (a [`Spec::name`]).
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

/// What `main` should do.
#[derive(Debug)]
pub(crate) enum Parsed {
    /// Print this help text and exit 0.
    Help(String),
    /// Print the version and exit 0.
    Version,
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

/// Finds a command by name.
pub(crate) fn find(name: &str) -> Option<&'static Spec> {
    COMMANDS.iter().find(|s| s.name == name)
}

/// Parses the arguments after the program name.
pub(crate) fn parse(args: Vec<String>) -> Result<Parsed> {
    let mut global = Global::default();
    let mut command: Option<&'static Spec> = None;
    let mut operands = Vec::new();
    let mut flags = Vec::new();
    let mut values = HashMap::new();
    let mut help = false;
    let mut only_operands = false;
    let mut root_given = false;
    let mut root_from_store = false;
    let mut it = args.into_iter();
    while let Some(arg) = it.next() {
        let is_option = arg.starts_with('-') && arg.len() > 1;
        if only_operands || !is_option {
            if command.is_none() {
                command = Some(find(&arg).ok_or_else(|| {
                    Error::usage(format!(
                        "unknown command \"{arg}\"; run `sessionctl help` for the list"
                    ))
                })?);
            } else {
                operands.push(arg);
            }
            continue;
        }
        if arg == "--" {
            only_operands = true;
            continue;
        }
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) => (n.to_owned(), Some(v.to_owned())),
            None => (arg.clone(), None),
        };
        let mut take_value = |name: &str| -> Result<String> {
            match &inline {
                Some(v) => Ok(v.clone()),
                None => it
                    .next()
                    .ok_or_else(|| Error::usage(format!("{name} needs a value"))),
            }
        };
        match name.as_str() {
            "-h" | "--help" => help = true,
            "-V" | "--version" => return Ok(Parsed::Version),
            "--root" => {
                if root_from_store {
                    return Err(Error::usage(
                        "--store and --root both name the store; pass one of them",
                    ));
                }
                root_given = true;
                global.root = Some(PathBuf::from(take_value("--root")?));
            }
            "--store" => {
                let text = take_value("--store")?;
                let spec = parse_store_spec("--store", &text).unwrap_or_else(|| {
                    Err(Error::usage(format!(
                        "--store expects {STORE_FORMS}, got \"{text}\""
                    )))
                })?;
                if root_given {
                    return Err(Error::usage(
                        "--store and --root both name the store; pass one of them",
                    ));
                }
                root_from_store = true;
                match spec {
                    StoreSpec::Jsonl(dir) => {
                        global.root = Some(dir);
                        global.database = None;
                    }
                    StoreSpec::Database(d) => {
                        global.root = None;
                        global.database = Some(d);
                    }
                }
            }
            "--compression" => {
                global.compression = Some(parse_compression(&take_value("--compression")?)?);
            }
            "--json" => global.json = true,
            "--no-color" => global.no_color = true,
            "--allow-permissive-dirs" => global.allow_permissive_dirs = true,
            "--take-over" => global.take_over = true,
            other => {
                let Some(spec) = command else {
                    return Err(Error::usage(format!(
                        "unknown option {other} before the command; run `sessionctl help`"
                    )));
                };
                if let Some(flag) = spec.flags.iter().find(|f| **f == other) {
                    if inline.is_some() {
                        return Err(Error::usage(format!("{other} takes no value")));
                    }
                    flags.push(*flag);
                } else if let Some(opt) = spec.valued.iter().find(|f| **f == other) {
                    values.insert(*opt, take_value(opt)?);
                } else {
                    return Err(Error::usage(format!(
                        "unknown option {other} for `{}`; run `sessionctl help {}`",
                        spec.name, spec.name
                    )));
                }
            }
        }
    }
    let Some(spec) = command else {
        return Ok(Parsed::Help(help_text()));
    };
    if help {
        return Ok(Parsed::Help(command_help(spec)));
    }
    if spec.name == "help" {
        return match operands.first() {
            None => Ok(Parsed::Help(help_text())),
            Some(name) => match find(name) {
                Some(s) => Ok(Parsed::Help(command_help(s))),
                None => Err(Error::usage(format!("unknown command \"{name}\""))),
            },
        };
    }
    if global.database.is_some() && global.compression.is_some() {
        return Err(Error::usage(
            "--compression applies to JSONL stores only; a database store takes none",
        ));
    }
    if global.json && !spec.json {
        return Err(Error::usage(format!(
            "`{}` has no --json output; see `sessionctl help {}`",
            spec.name, spec.name
        )));
    }
    let (min, max) = spec.arity;
    if operands.len() < min {
        return Err(Error::usage(format!(
            "`{}` needs {}; usage: sessionctl {} {}",
            spec.name,
            missing_operand(spec.operands),
            spec.name,
            spec.operands
        )));
    }
    if let Some(max) = max
        && operands.len() > max
    {
        return Err(Error::usage(format!(
            "unexpected operand \"{}\" for `{}`; usage: sessionctl {} {}",
            operands[max], spec.name, spec.name, spec.operands
        )));
    }
    Ok(Parsed::Run(Invocation {
        global,
        command: spec.name,
        operands,
        flags,
        values,
    }))
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

/// The top-level help text.
pub(crate) fn help_text() -> String {
    let mut text = String::from(
        "sessionctl: inspect, repair, fork and convert agent session logs\n\n\
         usage: sessionctl [--store SPEC | --root DIR] [--compression zstd|none] [--json] COMMAND ...\n\n\
         commands:\n",
    );
    let width = COMMANDS
        .iter()
        .filter(|s| !s.hidden)
        .map(|s| s.name.len())
        .max()
        .unwrap_or(0);
    for s in COMMANDS.iter().filter(|s| !s.hidden) {
        let _ = writeln!(text, "  {:<width$}  {}", s.name, s.summary);
    }
    text.push_str(
        "\nglobal options:\n\
         \x20 --store SPEC               the store: jsonl:DIR, sqlite:PATH (one database file),\n\
         \x20                            postgres://USER@HOST/DB (a PostgreSQL database)\n\
         \x20 --root DIR                 the JSONL store root, same as --store jsonl:DIR (default ./sessions)\n\
         \x20 --compression zstd|none    the root's encoding (default: the encoding found, else zstd)\n\
         \x20 --json                     machine-readable output (read commands)\n\
         \x20 --no-color                 no colour even on a terminal (NO_COLOR is honoured too)\n\
         \x20 --allow-permissive-dirs    accept a group/world-writable JSONL root or project directory\n\
         \x20 --take-over                PostgreSQL: take a session's live writer lease over (the\n\
         \x20                            holder must be dead; it is fenced if it comes back)\n\
         \nSESSION is a session id under the root, a session directory, or a session.jsonl /\n\
         session.jsonl.zstd file (its root is three levels up); with a database store\n\
         (sqlite:, postgres://), a session id in the database.\n\
         \nexit codes: 0 success, 1 failure or violation, 2 usage error. See docs/cli.md.\n",
    );
    text
}

/// The help text of one command.
pub(crate) fn command_help(spec: &Spec) -> String {
    let json = if spec.json { " [--json]" } else { "" };
    format!(
        "usage: sessionctl [--store SPEC | --root DIR] [--compression zstd|none] {} {}{json}\n\n{}\n",
        spec.name, spec.operands, spec.summary
    )
}
