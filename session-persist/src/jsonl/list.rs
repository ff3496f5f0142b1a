//! Header-only listing of every session under the root.
//!
//! Listing reads only each log's header: plain logs in 8 KiB chunks up to the first newline,
//! Zstandard logs in 8 KiB chunks until one complete frame is present. Logs without a complete,
//! valid header are skipped (they cannot have been published by a writer); layout and identity
//! violations are errors.

use std::collections::HashSet;
use std::io;
use std::path::{Path, PathBuf};

use super::Compression;
use super::Inner;
use super::frames::{FrameDecoder, scan_zstd_frames};
use super::header_line::{ParsedHeader, parse_lenient, version_refusal};
use super::layout::{file_name, suffix};
use crate::backend::Location;
use crate::error::{Error, Result};

/// Header read chunk size.
const HEADER_CHUNK: usize = 8192;

impl Inner {
    /// Reads the first bytes of a log until `done` says how many form the header; `None` at
    /// end of file first or when the file is gone.
    fn read_header_bytes(
        &self,
        path: &Path,
        mut done: impl FnMut(&[u8]) -> Result<Option<Vec<u8>>>,
    ) -> Result<Option<Vec<u8>>> {
        let mut file = match self.fs.open_read(path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io("open", path, e)),
        };
        let mut buf = Vec::new();
        let mut chunk = vec![0u8; HEADER_CHUNK];
        loop {
            let n = match file.read(&mut chunk) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Error::io("read", path, e)),
            };
            if n == 0 {
                return Ok(None);
            }
            buf.extend_from_slice(&chunk[..n]);
            if let Some(header) = done(&buf)? {
                return Ok(Some(header));
            }
        }
    }

    /// The header line (without its newline) of a log, when it has a complete one.
    pub(crate) fn read_header_line(
        &self,
        path: &Path,
        decoder: &mut FrameDecoder,
    ) -> Result<Option<Vec<u8>>> {
        match self.compression {
            Compression::None => self.read_header_bytes(path, |buf| {
                Ok(buf
                    .iter()
                    .position(|&b| b == b'\n')
                    .map(|nl| buf[..nl].to_vec()))
            }),
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

    /// Every listed session: its header and log path.
    pub(crate) fn list_entries(&self) -> Result<Vec<(ParsedHeader, PathBuf)>> {
        self.preflight()?;
        let own = file_name(self.compression);
        let opposite = file_name(self.compression.opposite());
        let mut seen: HashSet<String> = HashSet::new();
        let mut out = Vec::new();
        let mut decoder = FrameDecoder::new();
        for project in self.project_dirs()? {
            for entry in self.dir_entries(&project)? {
                let here = project.join(&entry.name);
                if entry.is_file {
                    let name = entry.name.to_string_lossy();
                    if name.ends_with(suffix(Compression::None))
                        || name.ends_with(suffix(Compression::Zstd))
                    {
                        return Err(Error::FlatLayout { path: here });
                    }
                    continue;
                }
                if !entry.is_dir {
                    continue;
                }
                let other = here.join(opposite);
                if self.exists(&other)? {
                    return Err(self.mismatch(other));
                }
                let path = here.join(own);
                let Some(line) = self.read_header_line(&path, &mut decoder)? else {
                    continue;
                };
                let Some(header) = parse_lenient(&String::from_utf8_lossy(&line))? else {
                    continue;
                };
                if let Some(refusal) = version_refusal(&header.value) {
                    return Err(refusal.with_location(Location::jsonl(&path)));
                }
                self.assert_identity(&path, None, &header)?;
                if !seen.insert(header.meta.id.to_string()) {
                    return Err(Error::DuplicateId {
                        id: header.meta.id.to_string(),
                    });
                }
                out.push((header, path));
            }
        }
        Ok(out)
    }
}
