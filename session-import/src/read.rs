//! Reading a source file as lines: plain `.jsonl`, or `.jsonl.zst` through a bounded zstd
//! decoder. Memory is bounded per line ([`MAX_LINE_BYTES`]) and, for zstd, by the decoder's
//! window ([`MAX_WINDOW_LOG`]) and the plaintext total ([`MAX_PLAIN_BYTES`]).

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use crate::error::{ImportError, ImportErrorKind};

/// The longest line read (64 MiB); a longer one is cut and reported.
pub const MAX_LINE_BYTES: usize = 64 << 20;

/// The largest zstd window accepted (2^27 = 128 MiB, zstd's default limit for streams).
pub const MAX_WINDOW_LOG: u32 = 27;

/// The most plaintext read from one file (4 GiB).
pub const MAX_PLAIN_BYTES: u64 = 4 << 30;

/// One line of a source file.
#[derive(Debug)]
pub(crate) struct Line {
    /// 1-based line number.
    pub(crate) number: u64,
    /// Byte offset of the line's first byte.
    pub(crate) offset: u64,
    /// The line, without its line ending; `None` when it was longer than the bound.
    pub(crate) text: Option<String>,
    /// Its length in bytes.
    pub(crate) bytes: u64,
    /// Set when the bytes are not UTF-8.
    pub(crate) not_utf8: bool,
}

/// Lines of a file, read with bounded memory.
pub(crate) struct Lines {
    reader: Box<dyn BufRead>,
    file: std::path::PathBuf,
    number: u64,
    offset: u64,
    buf: Vec<u8>,
}

/// Opens `path`; a name ending in `.zst` is decompressed.
pub(crate) fn open(path: &Path) -> Result<Lines, ImportError> {
    let file = File::open(path).map_err(|e| {
        ImportError::new(ImportErrorKind::Io, path, format!("cannot open: {e}")).with_source(e)
    })?;
    let zst = path.extension().is_some_and(|e| e == "zst");
    let reader: Box<dyn BufRead> = if zst {
        let mut decoder = zstd::stream::read::Decoder::new(file).map_err(|e| {
            ImportError::new(ImportErrorKind::Decompress, path, format!("zstd: {e}")).with_source(e)
        })?;
        decoder.window_log_max(MAX_WINDOW_LOG).map_err(|e| {
            ImportError::new(ImportErrorKind::Decompress, path, format!("zstd: {e}")).with_source(e)
        })?;
        Box::new(BufReader::with_capacity(
            1 << 16,
            decoder.take(MAX_PLAIN_BYTES),
        ))
    } else {
        Box::new(BufReader::with_capacity(
            1 << 16,
            file.take(MAX_PLAIN_BYTES),
        ))
    };
    Ok(from_reader(reader, path))
}

/// Lines of any reader (`path` names it in errors).
pub(crate) fn from_reader(reader: Box<dyn BufRead>, path: &Path) -> Lines {
    Lines {
        reader,
        file: path.to_path_buf(),
        number: 0,
        offset: 0,
        buf: Vec::new(),
    }
}

impl Lines {
    /// The next line; `Ok(None)` at the end.
    pub(crate) fn next_line(&mut self) -> Result<Option<Line>, ImportError> {
        self.buf.clear();
        let start = self.offset;
        let mut total: u64 = 0;
        let mut over = false;
        let mut ended = false;
        loop {
            let chunk = match self.reader.fill_buf() {
                Ok(c) => c,
                Err(e) => {
                    let e = std::io::Error::new(e.kind(), e.to_string());
                    return Err(read_error(&self.file, self.number, &e, start));
                }
            };
            if chunk.is_empty() {
                break;
            }
            let (take, newline) = match memchr::memchr(b'\n', chunk) {
                Some(i) => (i + 1, true),
                None => (chunk.len(), false),
            };
            let body = if newline {
                &chunk[..take - 1]
            } else {
                &chunk[..take]
            };
            total += body.len() as u64;
            if !over {
                if self.buf.len() + body.len() > MAX_LINE_BYTES {
                    over = true;
                    self.buf.clear();
                } else {
                    self.buf.extend_from_slice(body);
                }
            }
            self.reader.consume(take);
            self.offset += take as u64;
            if newline {
                ended = true;
                break;
            }
        }
        if !ended && total == 0 && self.offset == start {
            return Ok(None);
        }
        self.number += 1;
        if self.buf.last() == Some(&b'\r') {
            self.buf.pop();
        }
        if over {
            return Ok(Some(Line {
                number: self.number,
                offset: start,
                text: None,
                bytes: total,
                not_utf8: false,
            }));
        }
        let bytes = total;
        match String::from_utf8(std::mem::take(&mut self.buf)) {
            Ok(text) => Ok(Some(Line {
                number: self.number,
                offset: start,
                text: Some(text),
                bytes,
                not_utf8: false,
            })),
            Err(_) => Ok(Some(Line {
                number: self.number,
                offset: start,
                text: None,
                bytes,
                not_utf8: true,
            })),
        }
    }
}

fn read_error(file: &Path, number: u64, e: &std::io::Error, start: u64) -> ImportError {
    let kind = if file.extension().is_some_and(|x| x == "zst") {
        ImportErrorKind::Decompress
    } else {
        ImportErrorKind::Io
    };
    ImportError::new(kind, file, format!("read failed: {e}"))
        .at(number + 1, start)
        .with_source(std::io::Error::new(e.kind(), e.to_string()))
}
