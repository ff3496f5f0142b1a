//! Finding sessions (an id under a root or in a database, a session directory or a session
//! file) and opening the store they live in: a JSONL root or a `SQLite` database, one variant
//! each of [`StoreAt`] and [`Backing`].

use std::future::Future;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use session_core::clock::system_clock;
use session_core::json::Value;
use session_persist::jsonl::MAX_RECORD_BYTES;
use session_persist::jsonl::layout::{LOGICAL_FILE_NAME, encode_segment, log_path};
use session_persist::{
    Backend, Compression, JsonlBackend, JsonlConfig, Persistence, PersistenceOptions,
};
use session_persist_postgres::{PostgresBackend, PostgresOptions};
use session_persist_sqlite::{SqliteBackend, SqliteConfig};
use session_store::SessionStore;

use crate::args::Global;
use crate::error::{Error, Location, Result};

/// The zstd file name.
pub(crate) const ZSTD_FILE_NAME: &str = "session.jsonl.zstd";

/// The environment variable that, set to `1`, accepts group- or world-writable JSONL root, project
/// and session directories (like `--allow-permissive-dirs`).
pub(crate) const ALLOW_PERMISSIVE_DIRS_ENV: &str = "SESSIONCTL_ALLOW_PERMISSIVE_DIRS";

/// Whether `--allow-permissive-dirs` was given.
static ALLOW_PERMISSIVE_DIRS: AtomicBool = AtomicBool::new(false);

/// Records `--allow-permissive-dirs` for every store this process opens.
pub(crate) fn set_allow_permissive_dirs(allow: bool) {
    ALLOW_PERMISSIVE_DIRS.store(allow, Ordering::Relaxed);
}

/// Whether JSONL stores accept group- or world-writable root, project and session directories: the
/// flag, or the environment variable set to `1`.
fn permissive_dirs_allowed() -> bool {
    ALLOW_PERMISSIVE_DIRS.load(Ordering::Relaxed)
        || std::env::var_os(ALLOW_PERMISSIVE_DIRS_ENV).is_some_and(|v| v == "1")
}

/// Where a store lives: the kinds of store `--store SPEC` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StoreAt {
    /// A JSONL root and its encoding (`jsonl:DIR`, `--root DIR`).
    Jsonl {
        /// The root directory.
        root: PathBuf,
        /// The root's encoding.
        compression: Compression,
    },
    /// One `SQLite` database file holding every session (`sqlite:PATH`).
    Sqlite {
        /// The database file.
        path: PathBuf,
    },
    /// A `PostgreSQL` database (`postgres://…`).
    Postgres {
        /// The connection URL as given (it may hold a password: show [`StoreAt::spec`]).
        url: String,
        /// `--take-over`: writes take a live lease of another writer over
        /// ([`PostgresOptions::take_over`]).
        take_over: bool,
    },
}

/// `url` with any password replaced by `***` (in the user info and in a `password=` query
/// parameter).
fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
        return url.to_owned();
    };
    let (scheme, rest) = url.split_at(scheme_end);
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let authority = match authority.rfind('@') {
        Some(at) => {
            let (info, host) = authority.split_at(at);
            match info.split_once(':') {
                Some((user, _)) => format!("{user}:***{host}"),
                None => authority.to_owned(),
            }
        }
        None => authority.to_owned(),
    };
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let query: Vec<String> = query
                .split('&')
                .map(|kv| match kv.split_once('=') {
                    Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                    _ => kv.to_owned(),
                })
                .collect();
            format!("{path}?{}", query.join("&"))
        }
        None => tail.to_owned(),
    };
    format!("{scheme}{authority}{tail}")
}

impl StoreAt {
    /// The store spec as `--store` takes it (`jsonl:/abs/root`, `sqlite:/abs/db`,
    /// `postgres://user:***@host/db`: passwords are never shown).
    pub(crate) fn spec(&self) -> String {
        match self {
            StoreAt::Jsonl { root, .. } => format!("jsonl:{}", root.display()),
            StoreAt::Sqlite { path } => format!("sqlite:{}", path.display()),
            StoreAt::Postgres { url, .. } => redact_url(url),
        }
    }

    /// The store's directory or file (`None` for a database server).
    pub(crate) fn path(&self) -> Option<&Path> {
        match self {
            StoreAt::Jsonl { root, .. } => Some(root),
            StoreAt::Sqlite { path } => Some(path),
            StoreAt::Postgres { .. } => None,
        }
    }

    /// The encoding of a JSONL store.
    pub(crate) fn compression(&self) -> Option<Compression> {
        match self {
            StoreAt::Jsonl { compression, .. } => Some(*compression),
            StoreAt::Sqlite { .. } | StoreAt::Postgres { .. } => None,
        }
    }

    /// The encoding name shown in reports: `zstd`, `none`, `sqlite` or `postgres`.
    pub(crate) fn encoding(&self) -> &'static str {
        match self {
            StoreAt::Jsonl { compression, .. } => compression.as_str(),
            StoreAt::Sqlite { .. } => "sqlite",
            StoreAt::Postgres { .. } => "postgres",
        }
    }

    /// Whether this is a zstd JSONL root.
    pub(crate) fn is_zstd(&self) -> bool {
        self.compression() == Some(Compression::Zstd)
    }

    /// The global option that names this store on a command line (for hints).
    pub(crate) fn option(&self) -> String {
        match self {
            StoreAt::Jsonl { root, .. } => format!("--root {}", root.display()),
            StoreAt::Sqlite { .. } | StoreAt::Postgres { .. } => {
                format!("--store {}", self.spec())
            }
        }
    }

    /// Whether the same store: the same JSONL root (whatever the encoding) or database.
    pub(crate) fn same_place(&self, other: &StoreAt) -> bool {
        let abs = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
        match (self, other) {
            (StoreAt::Jsonl { root: a, .. }, StoreAt::Jsonl { root: b, .. })
            | (StoreAt::Sqlite { path: a }, StoreAt::Sqlite { path: b }) => abs(a) == abs(b),
            (StoreAt::Postgres { url: a, .. }, StoreAt::Postgres { url: b, .. }) => a == b,
            _ => false,
        }
    }
}

/// A session named on the command line.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    /// The store it lives in.
    pub(crate) at: StoreAt,
    /// The session id.
    pub(crate) id: String,
    /// The session's log file, when it exists (JSONL stores).
    pub(crate) file: Option<PathBuf>,
    /// Whether `file` is outside its layout path and read in place (read-only); the store's
    /// root is then the file's directory.
    pub(crate) outside: bool,
}

impl Target {
    /// A JSONL target.
    fn jsonl(
        root: PathBuf,
        compression: Compression,
        id: String,
        file: Option<PathBuf>,
        outside: bool,
    ) -> Target {
        Target {
            at: StoreAt::Jsonl { root, compression },
            id,
            file,
            outside,
        }
    }
}

/// The log file name of an encoding.
pub(crate) fn file_name(compression: Compression) -> &'static str {
    match compression {
        Compression::None => LOGICAL_FILE_NAME,
        Compression::Zstd => ZSTD_FILE_NAME,
    }
}

/// The encoding a log file name stands for.
pub(crate) fn compression_of(name: &str) -> Option<Compression> {
    match name {
        LOGICAL_FILE_NAME => Some(Compression::None),
        ZSTD_FILE_NAME => Some(Compression::Zstd),
        _ => None,
    }
}

/// The inverse of `encodeSegment`; `None` when `s` is not an encoded segment.
pub(crate) fn decode_segment(s: &str) -> Option<String> {
    let mut units: Vec<u16> = Vec::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '~' {
            let hex: String = chars.by_ref().take(4).collect();
            if hex.len() != 4 {
                return None;
            }
            units.push(u16::from_str_radix(&hex, 16).ok()?);
        } else if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
            units.push(c as u16);
        } else {
            return None;
        }
    }
    String::from_utf16(&units).ok().filter(|d| !d.is_empty())
}

/// The session directories of `root`: `root/<project>/<session>/`.
fn session_dirs(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(projects) = std::fs::read_dir(root) else {
        return out;
    };
    for project in projects.flatten() {
        if !project.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let Ok(sessions) = std::fs::read_dir(project.path()) else {
            continue;
        };
        for session in sessions.flatten() {
            if session.file_type().is_ok_and(|t| t.is_dir()) {
                out.push(session.path());
            }
        }
    }
    out
}

/// The encoding of the logs found under `root`: `none` if only plain logs are there, else
/// zstd (also for an empty or missing root).
pub(crate) fn detect_root_compression(root: &Path) -> Compression {
    let mut plain = false;
    for dir in session_dirs(root) {
        if dir.join(ZSTD_FILE_NAME).is_file() {
            return Compression::Zstd;
        }
        plain |= dir.join(LOGICAL_FILE_NAME).is_file();
    }
    if plain {
        Compression::None
    } else {
        Compression::Zstd
    }
}

/// The log files of session `id` under `root` (any project directory), with their encoding.
pub(crate) fn find_files(root: &Path, id: &str) -> Vec<(PathBuf, Compression)> {
    let Ok(segment) = encode_segment(id) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let Ok(projects) = std::fs::read_dir(root) else {
        return out;
    };
    let mut projects: Vec<PathBuf> = projects.flatten().map(|e| e.path()).collect();
    projects.sort();
    for project in projects {
        let dir = project.join(&segment);
        for c in [Compression::Zstd, Compression::None] {
            let file = dir.join(file_name(c));
            if file.is_file() {
                out.push((file, c));
            }
        }
    }
    out
}

/// Resolves a SESSION operand: a session file, a session directory, or an id under the root.
pub(crate) fn resolve(arg: &str, global: &Global, read_only: bool) -> Result<Target> {
    if let Some(at) = global.database() {
        if arg.is_empty() {
            return Err(Error::usage("SESSION must not be empty"));
        }
        return Ok(Target {
            at,
            id: arg.to_owned(),
            file: None,
            outside: false,
        });
    }
    let path = Path::new(arg);
    if path.is_file() {
        return from_file(path, read_only);
    }
    if path.is_dir() {
        let found: Vec<(PathBuf, Compression)> = [Compression::Zstd, Compression::None]
            .into_iter()
            .map(|c| (path.join(file_name(c)), c))
            .filter(|(f, _)| f.is_file())
            .collect();
        match found.as_slice() {
            [(file, _)] => return from_file(file, read_only),
            [_, _] => {
                let c = global.compression.unwrap_or_default();
                return from_file(&path.join(file_name(c)), read_only);
            }
            _ => {}
        }
    }
    if arg.is_empty() {
        return Err(Error::usage("SESSION must not be empty"));
    }
    let root = global.root();
    if arg.contains('/') && !path.exists() && find_files(&root, arg).is_empty() {
        return Err(Error::failed_at(
            format!("no session file or directory at {arg}"),
            Some(format!(
                "pass an existing session.jsonl / session.jsonl.zstd file, a session directory, or a session id stored under {}",
                root.display()
            )),
            Location {
                file: Some(path.to_path_buf()),
                ..Location::default()
            },
        ));
    }
    let files = find_files(&root, arg);
    let compression = match global.compression {
        Some(c) => c,
        None => match files.as_slice() {
            [(_, c)] => *c,
            _ => detect_root_compression(&root),
        },
    };
    let file = files
        .iter()
        .find(|(_, c)| *c == compression)
        .or(files.first())
        .map(|(f, _)| f.clone());
    Ok(Target::jsonl(
        root,
        compression,
        arg.to_owned(),
        file,
        false,
    ))
}

/// Where a session file belongs: its header's id, and whether it sits at
/// `<root>/<project>/<id>/<file>` with the root three levels up.
pub(crate) struct Placement {
    /// The header id.
    pub(crate) id: String,
    /// The root three levels up, when the file is at its layout path there.
    pub(crate) root: Option<PathBuf>,
}

/// Reads a file's header and checks whether it is at its layout path.
pub(crate) fn placement(file: &Path, compression: Compression) -> Result<Placement> {
    let header = read_header(file, compression)?;
    let Some(id) = header_id(&header) else {
        return Err(Error::failed_at(
            format!("the header of {} has no string id", file.display()),
            Some("the first line must be the session header record".into()),
            Location {
                file: Some(file.to_path_buf()),
                line: Some(1),
                ..Location::default()
            },
        ));
    };
    let cwd = header.get("cwd").and_then(Value::as_str).map(str::to_owned);
    let absolute = std::path::absolute(file).map_err(|e| Error::io("resolve", file, &e))?;
    let root = absolute
        .parent()
        .and_then(Path::parent)
        .and_then(Path::parent)
        .filter(|root| {
            log_path(root, cwd.as_deref(), &id, compression).is_ok_and(|p| p == absolute)
        })
        .map(Path::to_path_buf);
    Ok(Placement { id, root })
}

/// A target for a session file: the root is three levels up and the encoding follows the
/// name. A file elsewhere is read in place by read-only commands (nothing is staged, linked or
/// copied: the store opens on the file itself).
fn from_file(file: &Path, read_only: bool) -> Result<Target> {
    let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let Some(compression) = compression_of(name) else {
        return Err(Error::failed_at(
            format!("{} is not a session log", file.display()),
            Some("a session log is named session.jsonl (plain) or session.jsonl.zstd".into()),
            Location {
                file: Some(file.to_path_buf()),
                ..Location::default()
            },
        ));
    };
    let absolute = std::path::absolute(file).map_err(|e| Error::io("resolve", file, &e))?;
    let dir = absolute.parent();
    let root = dir.and_then(Path::parent).and_then(Path::parent);
    let in_layout = |root: &Path| {
        Target::jsonl(
            root.to_path_buf(),
            compression,
            dir.and_then(Path::file_name)
                .and_then(|n| n.to_str())
                .and_then(decode_segment)
                .unwrap_or_default(),
            Some(absolute.clone()),
            false,
        )
    };
    let place = match placement(&absolute, compression) {
        Ok(p) => p,
        // An unreadable header: let the store report it where the file is. When the session
        // directory also holds the other encoding's log, the root's store would refuse that
        // sibling instead (as looking the id up does, in the reference's words), so the file
        // is read in place, where the store names it and its cause; a write command gets the
        // header's error.
        Err(e) => {
            let sibling = absolute.with_file_name(file_name(compression.opposite()));
            if !sibling.exists() {
                return root.map(in_layout).ok_or(e);
            }
            if !read_only {
                return Err(e);
            }
            let id = root.map(in_layout).map(|t| t.id).unwrap_or_default();
            let dir = dir.map_or_else(|| absolute.clone(), Path::to_path_buf);
            return Ok(Target::jsonl(dir, compression, id, Some(absolute), true));
        }
    };
    if let Some(root) = &place.root {
        return Ok(Target::jsonl(
            root.clone(),
            compression,
            place.id,
            Some(absolute),
            false,
        ));
    }
    if !read_only {
        return Err(Error::failed_at(
            format!(
                "{} is not at its layout path <root>/<project>/<session>/{name}, so it cannot be changed in place",
                file.display()
            ),
            Some("move it into a store root (see docs/format.md), or use a read command (inspect, messages, …), which reads it where it is".into()),
            Location {
                file: Some(absolute),
                ..Location::default()
            },
        ));
    }
    let dir = dir.map_or_else(|| absolute.clone(), Path::to_path_buf);
    Ok(Target::jsonl(
        dir,
        compression,
        place.id,
        Some(absolute),
        true,
    ))
}

/// The `id` of a header record.
pub(crate) fn header_id(header: &Value) -> Option<String> {
    header.get("id").and_then(Value::as_str).map(str::to_owned)
}

/// Reads the header record (the first line) of a log file without the store: only up to its
/// first newline, and at most [`MAX_RECORD_BYTES`] of it (a zstd header frame is decompressed
/// as a stream, so an expansion bomb costs no more than that).
pub(crate) fn read_header(file: &Path, compression: Compression) -> Result<Value> {
    let f = std::fs::File::open(file).map_err(|e| Error::io("open", file, &e))?;
    let mut line = Vec::new();
    let limit = MAX_RECORD_BYTES + 1;
    let read = match compression {
        Compression::None => BufReader::new(f.take(limit)).read_until(b'\n', &mut line),
        Compression::Zstd => zstd::stream::read::Decoder::new(f).and_then(|decoder| {
            BufReader::new(decoder.single_frame().take(limit)).read_until(b'\n', &mut line)
        }),
    };
    let location = || Location {
        file: Some(file.to_path_buf()),
        line: Some(1),
        ..Location::default()
    };
    read.map_err(|e| {
        Error::failed_at(
            format!("cannot read the header of {}: {e}", file.display()),
            Some("the file is not a readable session log".into()),
            location(),
        )
    })?;
    if line.len() as u64 >= limit {
        return Err(Error::failed_at(
            format!(
                "the header line of {} is longer than {MAX_RECORD_BYTES} bytes",
                file.display()
            ),
            Some("the first line must be the session header record".into()),
            location(),
        ));
    }
    if line.last() == Some(&b'\n') {
        line.pop();
    }
    let text = String::from_utf8_lossy(&line);
    Value::parse(text.trim_end()).map_err(|e| {
        Error::failed_at(
            format!(
                "the header line of {} is not valid JSON: {e}",
                file.display()
            ),
            Some("the first line must be the session header record".into()),
            location(),
        )
    })
}

/// A stored session found by [`Store::lookup`].
pub(crate) struct Stored {
    /// Its log file (JSONL stores).
    pub(crate) file: Option<PathBuf>,
}

/// The backend of an open store, by kind.
pub(crate) enum Backing {
    /// A JSONL root.
    Jsonl(Arc<JsonlBackend>),
    /// A `SQLite` database.
    Sqlite(Arc<SqliteBackend>),
    /// A `PostgreSQL` database.
    Postgres(Arc<PostgresBackend>),
}

impl Backing {
    /// Opens the backend of `at`, creating nothing before the first write (a file store
    /// creates its file, a `PostgreSQL` store its schema, when a command first writes).
    /// `scan_root`: a JSONL root is scanned whole ([`JsonlConfig::scan_root`]); off for a
    /// command on one session, which then opens only that session's files.
    fn open(
        at: &StoreAt,
        rt: &tokio::runtime::Runtime,
        scan_root: bool,
    ) -> std::result::Result<Backing, session_persist::Error> {
        Ok(match at {
            StoreAt::Jsonl { root, compression } => Backing::Jsonl(Arc::new(JsonlBackend::open(
                JsonlConfig::new(root)
                    .compression(*compression)
                    .allow_permissive_dirs(permissive_dirs_allowed())
                    .scan_root(scan_root),
            )?)),
            StoreAt::Sqlite { path } => {
                let config = SqliteConfig::new(path.to_string_lossy().into_owned());
                Backing::Sqlite(Arc::new(SqliteBackend::new(config)?))
            }
            StoreAt::Postgres { url, take_over } => Backing::Postgres(Arc::new(
                rt.block_on(PostgresBackend::connect(
                    url,
                    PostgresOptions::default()
                        .take_over(*take_over)
                        .create_schema(false),
                ))?,
            )),
        })
    }

    /// The backend behind the persistence contract.
    fn as_dyn(&self) -> Arc<dyn Backend> {
        match self {
            Backing::Jsonl(b) => b.clone(),
            Backing::Sqlite(b) => b.clone(),
            Backing::Postgres(b) => b.clone(),
        }
    }
}

/// Refuses a database path that is a directory, or whose parent's parent is missing: a
/// write creates at most the database's own directory, never a chain of them (a mistyped
/// `sqlite:/nonexistent/dir/x.db` must not create `/nonexistent`).
pub(crate) fn check_database_path(path: &Path) -> Result<()> {
    let at = |p: &Path| Location {
        file: Some(p.to_path_buf()),
        ..Location::default()
    };
    if path.is_dir() {
        return Err(Error::failed_at(
            format!(
                "store database {} is a directory, not a database file",
                path.display()
            ),
            Some(
                "pass --store sqlite:PATH naming a database file, e.g. sqlite:DIR/sessions.db"
                    .into(),
            ),
            at(path),
        ));
    }
    let parent = path.parent().unwrap_or(Path::new("/"));
    let grandparent = parent.parent().unwrap_or(Path::new("/"));
    if !parent.exists() && !grandparent.is_dir() {
        return Err(Error::failed_at(
            format!(
                "the directory {} holding the database's directory does not exist",
                grandparent.display()
            ),
            Some(format!(
                "sessionctl creates at most the database's own directory ({}); create {} first or fix the path",
                parent.display(),
                grandparent.display()
            )),
            at(grandparent),
        ));
    }
    Ok(())
}

/// The single-threaded runtime a store runs on.
fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::failed(format!("cannot start the runtime: {e}"), None))
}

/// An open store: a runtime, its backend and the persistence service over it.
pub(crate) struct Store {
    rt: tokio::runtime::Runtime,
    /// The backend, by kind.
    pub(crate) backing: Backing,
    /// The backend.
    pub(crate) backend: Arc<dyn Backend>,
    /// The persistence service.
    pub(crate) persistence: Persistence,
    /// The session store the service persists.
    pub(crate) sessions: SessionStore,
    /// Where the store is.
    pub(crate) at: StoreAt,
}

impl Store {
    /// Opens the store at `at`.
    pub(crate) fn open(at: &StoreAt) -> Result<Store> {
        Store::open_with(at, system_clock())
    }

    /// Opens the store with a given clock for new sessions.
    pub(crate) fn open_with(at: &StoreAt, clock: session_core::SharedClock) -> Result<Store> {
        Store::open_scanning(at, clock, true)
    }

    /// Opens the store for a command on one session: a JSONL root is not scanned whole.
    fn open_for_one(at: &StoreAt) -> Result<Store> {
        Store::open_scanning(at, system_clock(), false)
    }

    /// Opens the store, scanning a JSONL root whole or not (see [`Backing::open`]).
    fn open_scanning(
        at: &StoreAt,
        clock: session_core::SharedClock,
        scan_root: bool,
    ) -> Result<Store> {
        if let StoreAt::Sqlite { path } = at
            && path.to_str().is_none()
        {
            return Err(Error::usage(format!(
                "the database path {} is not valid UTF-8",
                path.display()
            )));
        }
        if let StoreAt::Sqlite { path } = at {
            check_database_path(path)?;
        }
        let rt = runtime()?;
        let backing = Backing::open(at, &rt, scan_root).map_err(|error| Error::Persist {
            error: Box::new(error),
            file: None,
            store: at.clone(),
        })?;
        Store::with_backing(at, rt, backing, clock)
    }

    /// A store over an open backend.
    fn with_backing(
        at: &StoreAt,
        rt: tokio::runtime::Runtime,
        backing: Backing,
        clock: session_core::SharedClock,
    ) -> Result<Store> {
        let wrap = |error| Error::Persist {
            error: Box::new(error),
            file: None,
            store: at.clone(),
        };
        let backend = backing.as_dyn();
        let sessions = SessionStore::new(clock);
        let persistence = Persistence::new(
            backend.clone(),
            sessions.clone(),
            PersistenceOptions {
                runtime: Some(rt.handle().clone()),
                ..PersistenceOptions::default()
            },
        )
        .map_err(wrap)?;
        Ok(Store {
            rt,
            backing,
            backend,
            persistence,
            sessions,
            at: at.clone(),
        })
    }

    /// Opens the store of a target: for a file outside its layout path, a read-only store on
    /// that file, read in place.
    pub(crate) fn for_target(target: &Target) -> Result<Store> {
        match (&target.file, target.outside, target.at.compression()) {
            (Some(file), true, Some(compression)) => Store::open_file(file, compression),
            _ => Store::open_for_one(&target.at),
        }
    }

    /// A read-only store on one log file, read in place.
    pub(crate) fn open_file(file: &Path, compression: Compression) -> Result<Store> {
        let dir = file.parent().unwrap_or(file).to_path_buf();
        let at = StoreAt::Jsonl {
            root: dir,
            compression,
        };
        let backend =
            JsonlBackend::open_file(file, compression).map_err(|error| Error::Persist {
                error: Box::new(error),
                file: Some(file.to_path_buf()),
                store: at.clone(),
            })?;
        Store::with_backing(
            &at,
            runtime()?,
            Backing::Jsonl(Arc::new(backend)),
            system_clock(),
        )
    }

    /// The JSONL backend, for a JSONL store.
    pub(crate) fn jsonl(&self) -> Option<&JsonlBackend> {
        match &self.backing {
            Backing::Jsonl(b) => Some(b),
            Backing::Sqlite(_) | Backing::Postgres(_) => None,
        }
    }

    /// The `SQLite` backend, for a `SQLite` store.
    pub(crate) fn sqlite(&self) -> Option<&SqliteBackend> {
        match &self.backing {
            Backing::Sqlite(b) => Some(b),
            Backing::Jsonl(_) | Backing::Postgres(_) => None,
        }
    }

    /// The log file of a stored session (JSONL stores).
    pub(crate) fn log_file(&self, meta: &session_core::SessionHeader) -> Option<PathBuf> {
        self.jsonl().and_then(|b| b.log_path(meta).ok())
    }

    /// Whether session `id` is stored (on a JSONL root: in either encoding), and in which
    /// file.
    pub(crate) fn lookup(&self, id: &str) -> Result<Option<Stored>> {
        match &self.at {
            StoreAt::Jsonl { root, .. } => Ok(find_files(root, id)
                .into_iter()
                .next()
                .map(|(f, _)| Stored { file: Some(f) })),
            StoreAt::Sqlite { .. } | StoreAt::Postgres { .. } => Ok(self
                .block_on(self.backend.read_stored_revision(id))
                .map_err(|e| self.err(e, None))?
                .map(|_| Stored { file: None })),
        }
    }

    /// Runs a future to completion on the store's runtime.
    pub(crate) fn block_on<F: Future>(&self, f: F) -> F::Output {
        self.rt.block_on(f)
    }

    /// Runs `build` on the runtime's blocking pool, the thread a read of the store ran on.
    /// For building a large value after a read: the read's derived state (surface, messages,
    /// transcript) was allocated there and is freed by then, and glibc's allocator gives that
    /// memory back to the same thread's allocations (it keeps an arena per thread), where the
    /// main thread would take fresh pages while that memory stays free beside them.
    pub(crate) fn on_read_thread<T, F>(&self, what: &str, build: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        self.rt
            .block_on(async move { tokio::task::spawn_blocking(build).await })
            .map_err(|e| Error::failed(format!("{what} failed: {e}"), None))
    }

    /// Wraps a persistence error with the file it concerns.
    pub(crate) fn err(&self, error: session_persist::Error, file: Option<&Path>) -> Error {
        Error::Persist {
            error: Box::new(error),
            file: file.map(Path::to_path_buf),
            store: self.at.clone(),
        }
    }

    /// Drains and closes the service and its backend (releasing writer locks).
    pub(crate) fn close(self) -> Result<()> {
        let Store {
            rt,
            persistence,
            at,
            ..
        } = self;
        rt.block_on(persistence.dispose())
            .map_err(|error| Error::Persist {
                error: Box::new(error),
                file: None,
                store: at,
            })
    }
}
