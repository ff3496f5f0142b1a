//! Header-only listing of every session under the root.
//!
//! Listing reads only each log's header: plain logs up to the first newline, Zstandard logs
//! until one complete frame is present, in reads that start at 8 KiB and double, and at most
//! one record's limit ([`MAX_RECORD_BYTES`]) of either. The header is read
//! leniently: a session whose header has another version is listed as stored (only opening it
//! refuses). A log without a complete, valid header, or whose header does not belong at its
//! path, is listed with its error; it never fails the listing of the other sessions.

use std::collections::HashSet;
use std::io;
use std::path::{Path, PathBuf};

use memchr::memchr;

use super::Compression;
use super::Inner;
use super::frames::{FrameDecoder, MAX_RECORD_BYTES, scan_zstd_frames};
use super::header_line::{ParsedHeader, parse_lenient, parse_strict};
use super::is_flat_log_name;
use super::layout::file_name;
use crate::backend::Location;
use crate::error::{Error, HeaderProblem, Result};

/// The first header read's size.
const HEADER_CHUNK: usize = 8192;

/// The most bytes read for one log's header: one record of [`MAX_RECORD_BYTES`], its newline,
/// and room for a Zstandard frame's headers around it (a frame of raw blocks adds 3 bytes a
/// 128 KiB block).
const MAX_HEADER_BYTES: usize = MAX_RECORD_BYTES as usize + (1 << 20);

impl Inner {
    /// Reads the first bytes of a log until `done` says how many form the header; `None` at
    /// end of file first. A log that cannot be opened (a missing one included) is an
    /// [`Error::Io`]. Each read asks for as much as is buffered (at least [`HEADER_CHUNK`]), so
    /// `done` runs a logarithmic number of times however long the first record is; more than
    /// [`MAX_HEADER_BYTES`] buffered without a header is [`Error::RecordTooLong`] at byte 0.
    fn read_header_bytes(
        &self,
        path: &Path,
        mut done: impl FnMut(&[u8]) -> Result<Option<Vec<u8>>>,
    ) -> Result<Option<Vec<u8>>> {
        let mut file = self
            .fs
            .open_read(path)
            .map_err(|e| Error::io("open", path, e))?;
        let mut buf = Vec::new();
        loop {
            if buf.len() > MAX_HEADER_BYTES {
                return Err(Error::RecordTooLong {
                    offset: 0,
                    limit: MAX_RECORD_BYTES,
                });
            }
            let old = buf.len();
            buf.resize((old + old.max(HEADER_CHUNK)).min(MAX_HEADER_BYTES + 1), 0);
            let n = loop {
                match file.read(&mut buf[old..]) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(Error::io("read", path, e)),
                }
            };
            buf.truncate(old + n);
            if n == 0 {
                return Ok(None);
            }
            if let Some(header) = done(&buf)? {
                return Ok(Some(header));
            }
        }
    }

    /// The header line (without its newline) of a log, when it has a complete one. The log
    /// must exist (a missing one is an I/O error).
    pub(crate) fn read_header_line(
        &self,
        path: &Path,
        decoder: &mut FrameDecoder,
    ) -> Result<Option<Vec<u8>>> {
        match self.compression {
            Compression::None => {
                // Where the search for the newline resumes: the bytes before were searched.
                let mut searched = 0;
                self.read_header_bytes(path, |buf| {
                    let found = memchr(b'\n', &buf[searched..]).map(|nl| searched + nl);
                    searched = buf.len();
                    Ok(found.map(|nl| buf[..nl].to_vec()))
                })
            }
            Compression::Zstd => self.read_header_bytes(path, |buf| {
                let scan = scan_zstd_frames(buf, Some(1))?;
                let Some(frame) = scan.frames.first() else {
                    return Ok(None);
                };
                let plain = decoder
                    .decode_frame_to_vec(&buf[frame.start..frame.end], frame.start)
                    .map_err(|e| match e {
                        Error::ZstdFrame { source, .. } => Error::ZstdHeaderFrame { source },
                        other => other,
                    })?;
                match plain.split_last() {
                    Some((b'\n', body)) if !body.contains(&b'\n') => Ok(Some(body.to_vec())),
                    _ => Err(Error::ZstdHeaderFrameLines),
                }
            }),
        }
    }

    /// Every session directory holding a log of this encoding: its log path and its header
    /// read leniently (any version), or why the header could not be read or does not belong
    /// at that path. Only problems of the root itself (a stray flat-file log, an artifact of
    /// the other encoding, an unreadable root or project directory, a group- or
    /// world-writable root, project or session directory) fail the whole listing.
    pub(crate) fn list_entries(&self) -> Result<Vec<(PathBuf, Result<ParsedHeader>)>> {
        self.preflight()?;
        let own = file_name(self.compression);
        let opposite = file_name(self.compression.opposite());
        let mut seen: HashSet<String> = HashSet::new();
        let mut duplicates: HashSet<String> = HashSet::new();
        let mut out = Vec::new();
        let mut decoder = FrameDecoder::new();
        for project in self.project_dirs()? {
            for entry in self.dir_entries(&project)? {
                let here = project.join(&entry.name);
                if entry.is_file && is_flat_log_name(&entry.name) {
                    return Err(Error::FlatLayout { path: here });
                }
                if !entry.is_dir {
                    continue;
                }
                self.check_private_dir(&here)?;
                let other = here.join(opposite);
                if self.exists(&other)? {
                    return Err(self.mismatch(other));
                }
                let path = here.join(own);
                let header = match self.listed_header(&path, &mut decoder) {
                    Ok(None) => continue,
                    Ok(Some(header)) => header,
                    Err(e) => {
                        out.push((path, Err(e)));
                        continue;
                    }
                };
                let header = self.assert_identity(&path, None, &header).map(|()| header);
                if let Ok(h) = &header
                    && !seen.insert(h.meta.id.to_string())
                {
                    duplicates.insert(h.meta.id.to_string());
                }
                out.push((path, header));
            }
        }
        // Every copy of a duplicated id is refused, as opening that id is.
        for (_, header) in &mut out {
            if let Ok(h) = header
                && duplicates.contains(&*h.meta.id)
            {
                *header = Err(Error::DuplicateId {
                    id: h.meta.id.to_string(),
                });
            }
        }
        Ok(out)
    }

    /// The header of one listed log: `None` when there is no log; an error naming the log when
    /// it has no complete, valid header record.
    fn listed_header(
        &self,
        path: &Path,
        decoder: &mut FrameDecoder,
    ) -> Result<Option<ParsedHeader>> {
        let zstd = self.compression == Compression::Zstd;
        let located = |e: Error| e.with_location(Location::jsonl(path));
        let line = match self.read_header_line(path, decoder) {
            // Removed since the directory was read, or never published: not a session.
            Err(Error::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
                return Ok(None);
            }
            other => other.map_err(located)?,
        };
        let Some(line) = line else {
            return Err(located(Error::EmptyLog { zstd }));
        };
        let text = String::from_utf8_lossy(&line);
        match parse_lenient(&text).map_err(located)? {
            Some(header) => Ok(Some(header)),
            // Why it is not a header, in the strict reader's words.
            None => Err(located(match parse_strict(&text) {
                Err(e) => e,
                Ok(_) => Error::NotSessionHeader {
                    problem: HeaderProblem("the record is not a session header"),
                },
            })),
        }
    }
}
