//! A generator of large, realistic sessions in the reference's on-disk format.
//!
//! [`generate`] simulates a coding agent (turns of steps; streamed reasoning, text and
//! tool-call deltas; tool calls and results; request-header changes; compactions) and builds
//! the session through [`Session::append`](session_surface::Session::append) with a clock
//! that follows the simulated time, so every event is validated. Durable batches are cut the
//! way the reference's live writer cuts them ([`BatchMode::WriteBehind`]: a 200 ms window
//! from the first pending event, plus checkpoint flushes before each step and model stream
//! and after each tool call and turn end) or one per turn ([`BatchMode::Turn`], split before
//! 1 MiB), and each batch is written with
//! [`JsonlBackend::append_batch`](session_persist::Backend::append_batch), so the files are
//! exactly what our backend writes (header line, packed chunk rows, one zstd frame per batch).
//!
//! The shape (event mix, sizes, batch counts) matches `gen_session.py`; the random stream is
//! our own, so the bytes differ. The same options give byte-identical files.

mod model;
mod rng;
mod text;
mod words;

use std::collections::BTreeMap;
use std::fmt;
use std::fs::OpenOptions;
use std::io::Write as _;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use session_core::chunk_rows::write_batch_lines;
use session_core::json::Value;
use session_core::{Event, SessionHeader};
use session_persist::Backend;
use session_persist::jsonl::fs::{DirEntry, Fs, FsFile, RealFs, Stat};
use session_persist::jsonl::{Compression, JsonlBackend, JsonlConfig, ZSTD_LEVEL, to_header_line};
use session_repair::interrupted_turn_closers;
use session_surface::Draft;

use self::model::{Model, OpenCall, Pending, Tuning, num};

/// The write-behind window of the reference's live writer.
pub const WINDOW_MS: i64 = 200;
/// The plaintext budget of one batch in [`BatchMode::Turn`].
pub const TURN_BATCH_BYTES: usize = 1 << 20;

/// How events are grouped into durable batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BatchMode {
    /// The reference's live writer: a 200 ms window from the first pending event, plus the
    /// checkpoint flushes (before each step and model stream, after each tool call and turn
    /// end). Many small batches.
    #[default]
    WriteBehind,
    /// One batch per turn, split before 1 MiB of plaintext.
    Turn,
}

impl BatchMode {
    /// The command-line spelling: `writebehind` or `turn`.
    pub fn as_str(self) -> &'static str {
        match self {
            BatchMode::WriteBehind => "writebehind",
            BatchMode::Turn => "turn",
        }
    }
}

/// Which encodings to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Encodings {
    /// `session.jsonl.zstd` under `out`.
    #[default]
    Zstd,
    /// `session.jsonl` under `out`.
    None,
    /// Both, under `out/none` and `out/zstd` (a root holds one encoding).
    Both,
}

impl Encodings {
    /// The command-line spelling: `zstd`, `none` or `both`.
    pub fn as_str(self) -> &'static str {
        match self {
            Encodings::Zstd => "zstd",
            Encodings::None => "none",
            Encodings::Both => "both",
        }
    }
}

/// What to generate.
#[derive(Debug, Clone)]
pub struct GenOptions {
    /// Approximate number of events (the last turn overshoots a little).
    pub events: u64,
    /// The seed; equal options give byte-identical files.
    pub seed: u64,
    /// How events are grouped into durable batches.
    pub batch: BatchMode,
    /// Which encodings to write.
    pub compression: Encodings,
    /// Leave the last turn open with a started tool call, an unstarted one and a torn final
    /// record (a partial line, or a truncated zstd frame).
    pub interrupted: bool,
    /// The output root.
    pub out: PathBuf,
    /// Whether every batch is fsynced as in live use. Off by default: a generated file needs
    /// no durability, and one fsync per batch costs minutes at full size.
    pub fsync: bool,
    /// Where to write the manifest (default `<out>/gen-manifest.json`); `None` writes it
    /// there.
    pub manifest: Option<PathBuf>,
    /// Print progress to stderr every 50 turns.
    pub progress: bool,
}

impl GenOptions {
    /// Options with the defaults of `gen_session.py` (seed 1, write-behind, zstd).
    pub fn new(events: u64, out: impl Into<PathBuf>) -> GenOptions {
        GenOptions {
            events,
            seed: 1,
            batch: BatchMode::WriteBehind,
            compression: Encodings::Zstd,
            interrupted: false,
            out: out.into(),
            fsync: false,
            manifest: None,
            progress: false,
        }
    }
}

/// Counts and sizes of a generated session (the fields of `gen-manifest.json`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Manifest {
    /// The session id.
    pub session_id: String,
    /// The header's cwd.
    pub cwd: String,
    /// The header's `createdAt`.
    pub created_at: i64,
    /// The header line as written (without its newline).
    pub header_line: String,
    /// Log paths by encoding (`none`, `zstd`).
    pub paths: BTreeMap<String, PathBuf>,
    /// Logical events written durably.
    pub events: u64,
    /// Turns (the open one included).
    pub turns: u64,
    /// Steps.
    pub steps: u64,
    /// Compactions.
    pub compactions: u64,
    /// Events by type.
    pub events_by_type: BTreeMap<String, u64>,
    /// Streamed deltas by block kind (`reasoning`, `text`, `tool-call`).
    pub chunk_deltas_by_kind: BTreeMap<String, u64>,
    /// Storage records (lines after the header).
    pub storage_records: u64,
    /// Packed chunk rows by row type.
    pub packed_rows: BTreeMap<String, u64>,
    /// Deltas inside packed rows.
    pub packed_members: u64,
    /// Deltas written verbatim.
    pub verbatim_deltas: u64,
    /// Durable batches (zstd frames minus the header frame).
    pub durable_batches: u64,
    /// Plaintext bytes committed (header line included, torn tail excluded).
    pub plaintext_bytes: u64,
    /// Zstd frames committed (header frame included), when zstd was written.
    pub zstd_frames: Option<u64>,
    /// Zstd bytes committed, when zstd was written.
    pub zstd_bytes_committed: Option<u64>,
    /// File sizes by encoding, torn tail included.
    pub file_bytes: BTreeMap<String, u64>,
    /// Bytes of the complete torn record, when interrupted.
    pub torn_line_bytes: Option<u64>,
    /// Bytes of the complete zstd frame of the torn record, when interrupted with zstd.
    pub torn_frame_bytes: Option<u64>,
    /// The closers crash repair must synthesize, when interrupted.
    pub expected_closers: Vec<Event>,
    /// Wall time of the generation, seconds.
    pub generate_seconds: f64,
}

impl Manifest {
    /// The manifest as a JSON value, with the key names of `gen_session.py`.
    pub fn to_value(&self, opts: &GenOptions) -> Value {
        fn counts<'a>(m: impl IntoIterator<Item = (&'a String, &'a u64)>) -> Value {
            Value::object(m.into_iter().map(|(k, v)| (k.as_str(), num(*v))))
        }
        let mut by_type: Vec<(&String, &u64)> = self.events_by_type.iter().collect();
        by_type.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let path_str = |p: &PathBuf| Value::from(p.to_string_lossy().into_owned());
        let mut fields: Vec<(&str, Value)> = vec![
            ("generator", Value::from("session-bench gen_session")),
            ("generatorVersion", Value::from(1u8)),
            (
                "args",
                Value::object([
                    ("events", num(opts.events)),
                    ("seed", Value::from(opts.seed.to_string())),
                    ("out", path_str(&opts.out)),
                    ("compression", Value::from(opts.compression.as_str())),
                    ("pack_chunks", Value::from("yes")),
                    ("batch", Value::from(opts.batch.as_str())),
                    ("interrupted", Value::from(opts.interrupted)),
                    ("fsync", Value::from(opts.fsync)),
                ]),
            ),
            ("sessionId", Value::from(self.session_id.as_str())),
            ("cwd", Value::from(self.cwd.as_str())),
            ("createdAt", num(self.created_at)),
            (
                "header",
                Value::parse(&self.header_line)
                    .unwrap_or_else(|_| Value::from(self.header_line.as_str())),
            ),
            (
                "paths",
                Value::object(self.paths.iter().map(|(k, p)| (k.as_str(), path_str(p)))),
            ),
            ("events", num(self.events)),
            ("turns", num(self.turns)),
            ("steps", num(self.steps)),
            ("compactions", num(self.compactions)),
            ("eventsByType", counts(by_type)),
            ("chunkDeltasByKind", counts(&self.chunk_deltas_by_kind)),
            ("storageRecords", num(self.storage_records)),
            ("packedRows", counts(&self.packed_rows)),
            ("packedMembers", num(self.packed_members)),
            ("verbatimDeltas", num(self.verbatim_deltas)),
            ("durableBatches", num(self.durable_batches)),
            ("plaintextBytes", num(self.plaintext_bytes)),
        ];
        if let (Some(f), Some(b)) = (self.zstd_frames, self.zstd_bytes_committed) {
            fields.push(("zstdFrames", num(f)));
            fields.push(("zstdBytesCommitted", num(b)));
        }
        if let Some(n) = self.torn_line_bytes {
            fields.push((
                "tornTail",
                Value::object([
                    ("lineBytes", num(n)),
                    ("keptFraction", Value::from("3/5")),
                    (
                        "zstdFrameBytes",
                        self.torn_frame_bytes.map_or(Value::Null, num),
                    ),
                    ("committedPlaintextBytes", num(self.plaintext_bytes)),
                    (
                        "committedZstdBytes",
                        self.zstd_bytes_committed.map_or(Value::Null, num),
                    ),
                ]),
            ));
            fields.push((
                "expectedClosers",
                Value::array(self.expected_closers.iter().map(Event::to_value)),
            ));
        }
        fields.push(("fileBytes", counts(&self.file_bytes)));
        fields.push((
            "generateSeconds",
            Value::parse(&format!("{:.1}", self.generate_seconds))
                .unwrap_or_else(|_| Value::from(0u8)),
        ));
        Value::object(fields)
    }
}

/// A generation failure, naming where.
#[derive(Debug)]
pub enum Error {
    /// An event the model built was refused by the session (a generator bug).
    Session(session_surface::Error),
    /// The backend refused a batch.
    Persist(session_persist::Error),
    /// A file-system call on `path` failed.
    Io {
        /// What was being done.
        op: &'static str,
        /// The path.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The async runtime could not start.
    Runtime(std::io::Error),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Session(e) => write!(f, "generated event refused: {e}"),
            Error::Persist(e) => write!(f, "backend: {e}"),
            Error::Io { op, path, source } => write!(f, "{op} '{}': {source}", path.display()),
            Error::Runtime(e) => write!(f, "runtime: {e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Session(e) => Some(e),
            Error::Persist(e) => Some(e),
            Error::Io { source, .. } | Error::Runtime(source) => Some(source),
        }
    }
}

impl From<session_surface::Error> for Error {
    fn from(e: session_surface::Error) -> Error {
        Error::Session(e)
    }
}

impl From<session_persist::Error> for Error {
    fn from(e: session_persist::Error) -> Error {
        Error::Persist(e)
    }
}

fn io_err<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> Error + 'a {
    move |source| Error::Io {
        op,
        path: path.to_path_buf(),
        source,
    }
}

// -- file system without fsync ------------------------------------------------------------

/// The real file system with `fsync` turned into a no-op (generated files need no
/// durability).
struct NoSyncFs(RealFs);

struct NoSyncFile(Box<dyn FsFile>);

impl FsFile for NoSyncFile {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.0.read(buf)
    }
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf)
    }
    fn sync(&mut self) -> std::io::Result<()> {
        Ok(())
    }
    fn set_len(&mut self, len: u64) -> std::io::Result<()> {
        self.0.set_len(len)
    }
    fn stat(&self) -> std::io::Result<Stat> {
        self.0.stat()
    }
    fn try_lock(&self) -> std::io::Result<bool> {
        self.0.try_lock()
    }
}

impl Fs for NoSyncFs {
    fn read_dir(&self, path: &Path) -> std::io::Result<Vec<DirEntry>> {
        self.0.read_dir(path)
    }
    fn stat(&self, path: &Path) -> std::io::Result<Stat> {
        self.0.stat(path)
    }
    fn open_read(&self, path: &Path) -> std::io::Result<Box<dyn FsFile>> {
        Ok(Box::new(NoSyncFile(self.0.open_read(path)?)))
    }
    fn open_append(&self, path: &Path) -> std::io::Result<Box<dyn FsFile>> {
        Ok(Box::new(NoSyncFile(self.0.open_append(path)?)))
    }
    fn create_new(&self, path: &Path, mode: u32) -> std::io::Result<Box<dyn FsFile>> {
        Ok(Box::new(NoSyncFile(self.0.create_new(path, mode)?)))
    }
    fn create_dir(&self, path: &Path, mode: u32) -> std::io::Result<()> {
        self.0.create_dir(path, mode)
    }
    fn sync_dir(&self, _path: &Path) -> std::io::Result<()> {
        Ok(())
    }
    fn hard_link(&self, from: &Path, to: &Path) -> std::io::Result<()> {
        self.0.hard_link(from, to)
    }
    fn remove_file(&self, path: &Path) -> std::io::Result<()> {
        self.0.remove_file(path)
    }
    fn canonicalize(&self, path: &Path) -> std::io::Result<PathBuf> {
        self.0.canonicalize(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> std::io::Result<()> {
        self.0.rename(from, to)
    }
}

// -- batches -----------------------------------------------------------------------------

/// The size `gen_session.py` estimates for an event when cutting turn batches: the delta text
/// plus a constant for chunk deltas, the JSON length otherwise (in characters).
fn estimate_size(event: &Event) -> usize {
    if event.event_type() == "assistant/chunk"
        && let Some(c) = event.data().get("chunk")
    {
        {
            match c.get("type").and_then(Value::as_str) {
                Some("text-delta" | "reasoning-delta") => {
                    return c
                        .get("text")
                        .and_then(Value::as_str)
                        .map_or(0, |s| s.chars().count())
                        + 14;
                }
                Some("tool-call-delta") => {
                    return c
                        .get("argumentsDelta")
                        .and_then(Value::as_str)
                        .map_or(0, |s| s.chars().count())
                        + 16;
                }
                _ => {}
            }
        }
    }
    event.to_json().chars().count()
}

/// Splits one turn's events into durable batches (index ranges).
fn cut_batches(events: &[Pending], mode: BatchMode) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    match mode {
        BatchMode::Turn => {
            let mut size = 0;
            for (i, p) in events.iter().enumerate() {
                let s = estimate_size(&p.event);
                if i > start && size + s > TURN_BATCH_BYTES {
                    out.push(start..i);
                    start = i;
                    size = 0;
                }
                size += s;
            }
        }
        BatchMode::WriteBehind => {
            let mut window_start = 0i64;
            for (i, p) in events.iter().enumerate() {
                if i > start && (p.flush_before || p.event.time() >= window_start + WINDOW_MS) {
                    out.push(start..i);
                    start = i;
                }
                if i == start {
                    window_start = p.event.time();
                }
                if p.flush_after {
                    out.push(start..i + 1);
                    start = i + 1;
                }
            }
        }
    }
    if start < events.len() {
        out.push(start..events.len());
    }
    out
}

/// One encoding being written.
struct Target {
    kind: &'static str,
    compression: Compression,
    backend: JsonlBackend,
    path: PathBuf,
}

/// Writes batches to every target and keeps the manifest's storage statistics.
struct Sink {
    rt: tokio::runtime::Runtime,
    targets: Vec<Target>,
    header: SessionHeader,
    materialized: bool,
    batches: u64,
    records: u64,
    plaintext: u64,
    packed_rows: BTreeMap<String, u64>,
    verbatim_deltas: u64,
    text: String,
}

const ROW_PREFIXES: [(&str, &str); 3] = [
    ("{\"type\":\"text-chunks\"", "text-chunks"),
    ("{\"type\":\"reasoning-chunks\"", "reasoning-chunks"),
    ("{\"type\":\"tool-call-chunks\"", "tool-call-chunks"),
];

impl Sink {
    fn open(opts: &GenOptions, header: SessionHeader) -> Result<Sink, Error> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(Error::Runtime)?;
        let roots: Vec<(&'static str, Compression, PathBuf)> = match opts.compression {
            Encodings::Zstd => vec![("zstd", Compression::Zstd, opts.out.clone())],
            Encodings::None => vec![("none", Compression::None, opts.out.clone())],
            Encodings::Both => vec![
                ("none", Compression::None, opts.out.join("none")),
                ("zstd", Compression::Zstd, opts.out.join("zstd")),
            ],
        };
        let mut targets = Vec::new();
        for (kind, compression, root) in roots {
            let config = JsonlConfig::new(&root).compression(compression);
            let backend = if opts.fsync {
                JsonlBackend::open(config)?
            } else {
                JsonlBackend::open_with_fs(config, Arc::new(NoSyncFs(RealFs)))?
            };
            let path = backend.log_path(&header)?;
            if path.exists() {
                std::fs::remove_file(&path).map_err(io_err("remove", &path))?;
            }
            targets.push(Target {
                kind,
                compression,
                backend,
                path,
            });
        }
        let mut header_line = to_header_line(&header);
        header_line.push('\n');
        Ok(Sink {
            rt,
            targets,
            header,
            materialized: false,
            batches: 0,
            records: 0,
            plaintext: header_line.len() as u64,
            packed_rows: BTreeMap::new(),
            verbatim_deltas: 0,
            text: String::new(),
        })
    }

    fn write(&mut self, events: &[Event]) -> Result<(), Error> {
        self.text.clear();
        write_batch_lines(events, true, &mut self.text);
        self.text.push('\n');
        self.plaintext += self.text.len() as u64;
        for line in self.text.lines() {
            self.records += 1;
            if let Some((_, name)) = ROW_PREFIXES.iter().find(|(p, _)| line.starts_with(p)) {
                *self.packed_rows.entry((*name).to_owned()).or_insert(0) += 1;
            } else if line.starts_with("{\"type\":\"assistant/chunk\"")
                && (line.contains("\"type\":\"text-delta\"")
                    || line.contains("\"type\":\"reasoning-delta\"")
                    || line.contains("\"type\":\"tool-call-delta\""))
            {
                self.verbatim_deltas += 1;
            }
        }
        for t in &self.targets {
            self.rt.block_on(
                t.backend
                    .append_batch(&self.header, events, self.materialized),
            )?;
        }
        self.materialized = true;
        self.batches += 1;
        Ok(())
    }

    fn close(&self) -> Result<(), Error> {
        for t in &self.targets {
            self.rt.block_on(t.backend.close())?;
        }
        Ok(())
    }
}

fn file_len(path: &Path) -> Result<u64, Error> {
    Ok(std::fs::metadata(path).map_err(io_err("stat", path))?.len())
}

/// One checksummed zstd frame of `data` (the backend's frame parameters).
fn zstd_frame(data: &[u8]) -> Result<Vec<u8>, Error> {
    let mut enc = zstd::stream::Encoder::new(Vec::new(), ZSTD_LEVEL).map_err(Error::Runtime)?;
    enc.include_checksum(true).map_err(Error::Runtime)?;
    enc.write_all(data).map_err(Error::Runtime)?;
    enc.finish().map_err(Error::Runtime)
}

/// Generates one session (see the [module documentation](self)) and writes its manifest.
pub fn generate(opts: &GenOptions) -> Result<Manifest, Error> {
    let t0 = Instant::now();
    let mut model = Model::new(opts.seed, Tuning::default())?;
    let header = model.session.header().clone();
    let mut sink = Sink::open(opts, header)?;
    let mut steps = 0u64;
    let mut open: Vec<OpenCall>;
    let target = opts.events as i64;
    loop {
        let remaining = target - model.session.seq() as i64;
        let interrupted_turn = opts.interrupted && remaining < 3000 && model.turn >= 1;
        // About 330 events per step: keep the overshoot of the last turn small.
        let max_steps = (remaining / 330).max(1) as u64;
        let (events, calls, n) = model.turn(interrupted_turn, max_steps)?;
        steps += n;
        open = calls;
        for range in cut_batches(&events, opts.batch) {
            let batch: Vec<Event> = events[range].iter().map(|p| p.event.clone()).collect();
            sink.write(&batch)?;
        }
        if opts.progress && model.turn % 50 == 0 {
            eprintln!(
                "turn {}: {} events, {:.1} MiB plaintext, {:.1} s",
                model.turn,
                model.session.seq(),
                sink.plaintext as f64 / f64::from(1u32 << 20),
                t0.elapsed().as_secs_f64()
            );
        }
        if interrupted_turn || (!opts.interrupted && model.session.seq() >= opts.events) {
            break;
        }
    }
    sink.close()?;

    let mut manifest = Manifest {
        session_id: model.session_id.clone(),
        cwd: model.cwd.clone(),
        created_at: model.created_at,
        header_line: to_header_line(model.session.header()),
        events: model.session.seq(),
        turns: model.turn,
        steps,
        compactions: model.compactions,
        events_by_type: model.counts.clone(),
        chunk_deltas_by_kind: model
            .deltas
            .iter()
            .map(|(k, v)| ((*k).to_owned(), *v))
            .collect(),
        storage_records: sink.records,
        packed_rows: sink.packed_rows.clone(),
        verbatim_deltas: sink.verbatim_deltas,
        durable_batches: sink.batches,
        plaintext_bytes: sink.plaintext,
        ..Manifest::default()
    };
    manifest.packed_members = model
        .deltas
        .values()
        .sum::<u64>()
        .saturating_sub(sink.verbatim_deltas);
    for t in &sink.targets {
        manifest.paths.insert(t.kind.to_owned(), t.path.clone());
        if t.compression == Compression::Zstd {
            manifest.zstd_frames = Some(sink.batches + 1);
            manifest.zstd_bytes_committed = Some(file_len(&t.path)?);
        }
    }

    if opts.interrupted {
        write_torn_tail(&mut model, &sink, &open, &mut manifest)?;
    }
    for t in &sink.targets {
        manifest
            .file_bytes
            .insert(t.kind.to_owned(), file_len(&t.path)?);
    }
    manifest.generate_seconds = t0.elapsed().as_secs_f64();
    let mpath = opts
        .manifest
        .clone()
        .unwrap_or_else(|| opts.out.join("gen-manifest.json"));
    if let Some(dir) = mpath.parent() {
        std::fs::create_dir_all(dir).map_err(io_err("mkdir", dir))?;
    }
    let mut text = manifest.to_value(opts).to_json();
    text.push('\n');
    std::fs::write(&mpath, text).map_err(io_err("write", &mpath))?;
    Ok(manifest)
}

/// The first `count` chunk payloads (the `chunk` member of every `assistant/chunk` event, in
/// order) of the session the generator builds from `seed`, built in memory (nothing is written):
/// reasoning, text and tool-call deltas of realistic sizes, with the usage and finish chunks
/// between steps. The write bench appends them as a realistic chunk stream.
///
/// # Errors
///
/// What building the session gives ([`Error`]).
pub fn chunk_stream(seed: u64, count: usize) -> Result<Vec<Value>, Error> {
    let mut model = Model::new(seed, Tuning::default())?;
    let mut out = Vec::with_capacity(count);
    while out.len() < count {
        let (events, _, _) = model.turn(false, 8)?;
        out.extend(
            events
                .iter()
                .filter(|p| p.event.event_type() == "assistant/chunk")
                .filter_map(|p| p.event.data().get("chunk").cloned())
                .take(count - out.len()),
        );
    }
    Ok(out)
}

/// Appends the torn final record (3/5 of a `tool/result` line, or of its zstd frame) after the
/// durable log, and lists the closers repair must synthesize.
fn write_torn_tail(
    model: &mut Model,
    sink: &Sink,
    open: &[OpenCall],
    manifest: &mut Manifest,
) -> Result<(), Error> {
    manifest.expected_closers = interrupted_turn_closers(model.session.events().iter());
    let Some(call) = open.first() else {
        return Ok(());
    };
    let krate = model.text.crates.first().cloned().unwrap_or_default();
    let output = model.text.cargo_output(&krate, 4000, false);
    let msg = model.tool_result_message(&call.call_id, Value::from(output), false);
    // The record is validated on a copy: it never becomes part of the durable log.
    let mut copy = model.session.clone();
    model.set_clock(model.now + 1500);
    let mut draft = Draft::new(
        "tool/result",
        Value::object([
            ("turn", num(model.turn)),
            ("step", num(call.step)),
            ("message", msg),
        ]),
    )
    .append_op();
    if let Some(seq) = call.call_seq {
        draft = draft.sources(&[seq]);
    }
    let event = copy.append(draft)?;
    let mut line = event.to_json();
    line.push('\n');
    manifest.torn_line_bytes = Some(line.len() as u64);
    for t in &sink.targets {
        let bytes = match t.compression {
            Compression::None => line.as_bytes().to_vec(),
            Compression::Zstd => {
                let frame = zstd_frame(line.as_bytes())?;
                manifest.torn_frame_bytes = Some(frame.len() as u64);
                frame
            }
        };
        let keep = &bytes[..bytes.len() * 3 / 5];
        let mut f = OpenOptions::new()
            .append(true)
            .open(&t.path)
            .map_err(io_err("open", &t.path))?;
        f.write_all(keep).map_err(io_err("write", &t.path))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::model::{Model, Tuning};
    use super::{BatchMode, cut_batches};

    #[test]
    fn write_behind_batches_respect_window_and_checkpoints() {
        let mut m = Model::new(7, Tuning::default()).expect("model");
        let (events, _, _) = m.turn(false, 3).expect("turn");
        let ranges = cut_batches(&events, BatchMode::WriteBehind);
        assert_eq!(ranges.first().map(|r| r.start), Some(0));
        assert_eq!(ranges.last().map(|r| r.end), Some(events.len()));
        for w in ranges.windows(2) {
            assert_eq!(w[0].end, w[1].start);
        }
        for r in &ranges {
            let first = events[r.start].event.time();
            for p in &events[r.clone()] {
                assert!(p.event.time() < first + super::WINDOW_MS);
            }
            for p in &events[r.start + 1..r.end] {
                assert!(!p.flush_before, "a checkpoint flush inside a batch");
            }
            for p in &events[r.start..r.end - 1] {
                assert!(!p.flush_after, "a checkpoint flush inside a batch");
            }
        }
        let turn = cut_batches(&events, BatchMode::Turn);
        assert_eq!(turn, vec![0..events.len()]);
    }
}
