//! Reading a source file into records, and what an import returns.

use std::path::{Path, PathBuf};

use session_core::vocab::{Attachment, ContentBlock, ImageBlock};
use session_surface::Session;

use crate::build::{Builder, derived_id};
use crate::error::{ImportError, ImportErrorKind};
use crate::read;
use crate::report::{CutLine, ImportReport};

/// The source formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Codex CLI rollouts.
    Codex,
    /// Claude Code session transcripts.
    ClaudeCode,
}

impl Format {
    /// `codex` or `claude-code`.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Codex => "codex",
            Format::ClaudeCode => "claude-code",
        }
    }

    /// The format named `name` (`codex`, `claude-code`).
    pub fn from_name(name: &str) -> Option<Format> {
        match name {
            "codex" => Some(Format::Codex),
            "claude-code" => Some(Format::ClaudeCode),
            _ => None,
        }
    }
}

/// Options of an import.
#[derive(Debug, Clone, Default)]
pub struct ImportOptions {
    /// The id of the (first) session, instead of the one derived from the source. Further
    /// sessions of the same file and child sessions get `<id>-<n>` / `<id>-agent-<agent>`.
    pub id: Option<String>,
}

/// One imported session and its report.
#[derive(Debug)]
pub struct Imported {
    /// The session, built through `Session::append`.
    pub session: Session,
    /// What was mapped, kept, closed, refused and cut.
    pub report: ImportReport,
}

impl Imported {
    pub(crate) fn finish(b: Builder, _source: &Source) -> Imported {
        let (session, report) = b.finish();
        Imported { session, report }
    }
}

/// A source file being read.
#[derive(Debug, Clone)]
pub(crate) struct Source {
    pub(crate) path: PathBuf,
    /// The file name, for provenance.
    pub(crate) name: String,
    /// A digest of the file's name and size, for ids of sources that name none.
    pub(crate) digest: String,
    /// Whether `path` is a file on disk, so that files beside it (Claude Code subagent
    /// transcripts) are looked for; not for [`import_reader`].
    pub(crate) on_disk: bool,
}

/// One line: its record when it parsed as a JSON object, or what was cut.
#[derive(Debug)]
pub(crate) struct SourceLine {
    pub(crate) number: u64,
    pub(crate) offset: u64,
    pub(crate) text: String,
    pub(crate) record: Option<serde_json::Value>,
    pub(crate) cut: Option<CutLine>,
}

/// Reads every line of `path`. Blank lines are skipped; a line that is not a JSON object is
/// returned with its [`CutLine`].
pub(crate) fn read_lines(path: &Path) -> Result<(Source, Vec<SourceLine>), ImportError> {
    let lines = read::open(path)?;
    collect_lines(lines, path, true)
}

/// Reads every line of `lines` (read from `path`; `on_disk` says whether `path` is a file).
fn collect_lines(
    mut lines: read::Lines,
    path: &Path,
    on_disk: bool,
) -> Result<(Source, Vec<SourceLine>), ImportError> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut out = Vec::new();
    let mut total = 0u64;
    while let Some(line) = lines.next_line()? {
        total += line.bytes + 1;
        let cut = |message: String| CutLine {
            error: ImportError::new(ImportErrorKind::Malformed, path, message)
                .at(line.number, line.offset),
            bytes: line.bytes,
        };
        let Some(text) = line.text else {
            let why = if line.not_utf8 {
                "the line is not UTF-8".to_owned()
            } else {
                format!("the line is longer than {} bytes", read::MAX_LINE_BYTES)
            };
            out.push(SourceLine {
                number: line.number,
                offset: line.offset,
                text: String::new(),
                record: None,
                cut: Some(cut(why)),
            });
            continue;
        };
        if text.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<serde_json::Value>(&text) {
            Ok(v) if v.is_object() => out.push(SourceLine {
                number: line.number,
                offset: line.offset,
                text,
                record: Some(v),
                cut: None,
            }),
            Ok(_) => out.push(SourceLine {
                number: line.number,
                offset: line.offset,
                text: String::new(),
                record: None,
                cut: Some(cut("the line is JSON but not an object".into())),
            }),
            Err(e) => out.push(SourceLine {
                number: line.number,
                offset: line.offset,
                text: String::new(),
                record: None,
                cut: Some(cut(format!("the line is not valid JSON: {e}"))),
            }),
        }
    }
    let digest = derived_id(&[&name, &total.to_string()]);
    Ok((
        Source {
            path: path.to_path_buf(),
            name,
            digest,
            on_disk,
        },
        out,
    ))
}

/// The error for a file with no record to import.
pub(crate) fn empty(source: &Source, cut: Vec<CutLine>) -> ImportError {
    let what = if cut.is_empty() {
        "the file holds no record".to_owned()
    } else {
        format!(
            "the file holds no valid record ({} line(s) malformed)",
            cut.len()
        )
    };
    let e = ImportError::new(ImportErrorKind::Empty, &source.path, what);
    match cut.into_iter().next() {
        Some(first) => {
            let (l, o) = (
                first.error.line().unwrap_or(0),
                first.error.offset().unwrap_or(0),
            );
            e.at(l, o).with_source(first.error)
        }
        None => e,
    }
}

/// An error of the builder, placed in `source`.
pub(crate) fn relocate(e: ImportError, source: &Source) -> ImportError {
    ImportError::new(e.kind(), &source.path, e.message().to_owned()).with_source(e)
}

/// An image block for an image the source names by URL or carries inline. The bytes are not
/// carried (a data URL's decoded size is recorded); width and height are unknown (0).
pub(crate) fn image_block(url: &str) -> ContentBlock {
    let (media, bytes) = match url.strip_prefix("data:") {
        Some(rest) => {
            let (head, data) = rest.split_once(',').unwrap_or((rest, ""));
            let media = head.split(';').next().unwrap_or("");
            (media.to_owned(), base64_len(data))
        }
        None => (String::new(), 0),
    };
    image(&media, bytes, url)
}

/// An image block of media type `media` and `bytes` bytes, identified by `key`.
pub(crate) fn image(media: &str, bytes: u64, key: &str) -> ContentBlock {
    let media = match media {
        "image/png" | "image/jpeg" | "image/webp" | "image/gif" => media,
        _ => "image/png",
    };
    ContentBlock::Image(ImageBlock {
        attachment: Attachment {
            attachment_id: format!("import-image-{}", derived_id(&[key])),
            media_type: media.to_owned(),
            bytes,
            width: 0,
            height: 0,
            ..Attachment::default()
        },
        ..ImageBlock::default()
    })
}

/// The decoded length of base64 text.
pub(crate) fn base64_len(data: &str) -> u64 {
    let n = data.trim_end_matches('=').len() as u64;
    n * 3 / 4
}

/// Imports `path` in `format`: one or more sessions (Codex: one per thread in the file;
/// Claude Code: the session and a child session per sidechain or subagent transcript).
pub fn import_file(
    format: Format,
    path: &Path,
    options: &ImportOptions,
) -> Result<Vec<Imported>, ImportError> {
    let (source, lines) = read_lines(path)?;
    import_lines(format, &source, lines, options)
}

/// Imports the plain JSONL text `reader` yields, in `format`, as [`import_file`] imports a file:
/// `name` stands for the file in errors, reports and ids derived from the source (its file
/// name). Nothing is read from disk: zstd is not decompressed, and a Claude Code transcript's
/// subagent transcripts are not looked for (its inline sidechains still become child
/// sessions). The same bounds hold ([`MAX_LINE_BYTES`](crate::MAX_LINE_BYTES) per line,
/// [`MAX_PLAIN_BYTES`](crate::MAX_PLAIN_BYTES) in all).
///
/// ```
/// use std::path::Path;
/// use session_import::{Format, ImportOptions, import_reader};
///
/// let text = concat!(
///     r#"{"type":"user","sessionId":"s1","uuid":"u1","timestamp":"2026-01-02T03:04:05.000Z","message":{"role":"user","content":"hi"}}"#, "\n",
///     "not json\n",
/// );
/// let imported = import_reader(
///     Format::ClaudeCode,
///     text.as_bytes(),
///     Path::new("s1.jsonl"),
///     &ImportOptions::default(),
/// )?;
/// assert_eq!(imported[0].session.id().as_ref(), "claude-code-s1");
/// // The malformed line is cut and reported where it is.
/// assert_eq!(imported[0].report.cut[0].error.line(), Some(2));
/// # Ok::<(), session_import::ImportError>(())
/// ```
pub fn import_reader(
    format: Format,
    reader: impl std::io::BufRead + 'static,
    name: &Path,
    options: &ImportOptions,
) -> Result<Vec<Imported>, ImportError> {
    let reader = Box::new(reader.take(read::MAX_PLAIN_BYTES));
    let (source, lines) = collect_lines(read::from_reader(reader, name), name, false)?;
    import_lines(format, &source, lines, options)
}

fn import_lines(
    format: Format,
    source: &Source,
    lines: Vec<SourceLine>,
    options: &ImportOptions,
) -> Result<Vec<Imported>, ImportError> {
    match format {
        Format::Codex => crate::codex::import(source, lines, options.id.as_deref()),
        Format::ClaudeCode => crate::claude_code::import(source, lines, options.id.as_deref()),
    }
}
