//! The file-system seam of the JSONL backend.
//!
//! Every file-system call of [`JsonlBackend`](super::JsonlBackend) goes through [`Fs`] and
//! [`FsFile`], so tests can inject faults (ENOSPC or EIO on any call, short writes, files that
//! vanish between calls). [`RealFs`] is the implementation over `std::fs`.

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The parts of `stat` the backend uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// Device id.
    pub dev: u64,
    /// Inode number.
    pub ino: u64,
    /// Size in bytes.
    pub size: u64,
    /// Modification time, nanoseconds since the Unix epoch.
    pub mtime_ns: i128,
    /// Status-change time, nanoseconds since the Unix epoch.
    pub ctime_ns: i128,
    /// Whether this is a directory.
    pub is_dir: bool,
}

impl Stat {
    /// Builds a `Stat` from `std` metadata.
    pub fn from_metadata(m: &fs::Metadata) -> Stat {
        Stat {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
            ctime_ns: i128::from(m.ctime()) * 1_000_000_000 + i128::from(m.ctime_nsec()),
            is_dir: m.is_dir(),
        }
    }

    /// The JSONL revision text: `dev:ino:size:mtimeNs:ctimeNs` in decimal.
    pub fn revision_text(&self) -> String {
        format!(
            "{}:{}:{}:{}:{}",
            self.dev, self.ino, self.size, self.mtime_ns, self.ctime_ns
        )
    }

    /// Whether both describe the same file (device and inode).
    pub fn same_file(&self, other: &Stat) -> bool {
        self.dev == other.dev && self.ino == other.ino
    }
}

/// One directory entry, typed from the entry itself (symbolic links are neither files nor
/// directories here).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// The entry name.
    pub name: OsString,
    /// Whether the entry is a directory (not a link to one).
    pub is_dir: bool,
    /// Whether the entry is a regular file (not a link to one).
    pub is_file: bool,
}

/// An open file.
pub trait FsFile: Send {
    /// Reads into `buf`; 0 at end of file.
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize>;
    /// Writes some of `buf` (possibly fewer bytes than given).
    fn write(&mut self, buf: &[u8]) -> io::Result<usize>;
    /// `fsync`.
    fn sync(&mut self) -> io::Result<()>;
    /// `ftruncate`.
    fn set_len(&mut self, len: u64) -> io::Result<()>;
    /// `fstat`.
    fn stat(&self) -> io::Result<Stat>;
    /// Takes an exclusive advisory lock without waiting: `Ok(false)` when another open file
    /// description holds it. The lock lives as long as the handle.
    fn try_lock(&self) -> io::Result<bool>;
}

/// The file-system calls of the JSONL backend.
pub trait Fs: Send + Sync {
    /// The entries of a directory (`scandir`).
    fn read_dir(&self, path: &Path) -> io::Result<Vec<DirEntry>>;
    /// `stat`, following symbolic links.
    fn stat(&self, path: &Path) -> io::Result<Stat>;
    /// Opens an existing file for reading.
    fn open_read(&self, path: &Path) -> io::Result<Box<dyn FsFile>>;
    /// Opens an existing file for appending (never creates it).
    fn open_append(&self, path: &Path) -> io::Result<Box<dyn FsFile>>;
    /// Creates a new file for appending with `mode`; fails if it exists.
    fn create_new(&self, path: &Path, mode: u32) -> io::Result<Box<dyn FsFile>>;
    /// Creates one directory with `mode`.
    fn create_dir(&self, path: &Path, mode: u32) -> io::Result<()>;
    /// Opens a directory and `fsync`s it.
    fn sync_dir(&self, path: &Path) -> io::Result<()>;
    /// Creates a hard link `to` for `from`; fails if `to` exists.
    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Removes a file.
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// `realpath`.
    fn canonicalize(&self, path: &Path) -> io::Result<PathBuf>;
    /// Renames `from` to `to`, atomically replacing `to` (`rename(2)`). The default goes to the
    /// real file system.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }
    /// The permission bits (`st_mode & 0o7777`) of `path`, links followed. The default goes to
    /// the real file system.
    fn mode(&self, path: &Path) -> io::Result<u32> {
        Ok(fs::metadata(path)?.mode() & 0o7777)
    }
}

/// [`Fs`] over the real file system.
#[derive(Debug, Clone, Copy, Default)]
pub struct RealFs;

struct RealFile(File);

impl FsFile for RealFile {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf)
    }

    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }

    fn sync(&mut self) -> io::Result<()> {
        self.0.sync_all()
    }

    fn set_len(&mut self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }

    fn stat(&self) -> io::Result<Stat> {
        Ok(Stat::from_metadata(&self.0.metadata()?))
    }

    #[allow(clippy::incompatible_msrv)]
    fn try_lock(&self) -> io::Result<bool> {
        match self.0.try_lock() {
            Ok(()) => Ok(true),
            Err(fs::TryLockError::WouldBlock) => Ok(false),
            Err(fs::TryLockError::Error(e)) => Err(e),
        }
    }
}

impl Fs for RealFs {
    fn read_dir(&self, path: &Path) -> io::Result<Vec<DirEntry>> {
        let mut out = Vec::new();
        for entry in fs::read_dir(path)? {
            let entry = entry?;
            let ty = entry.file_type()?;
            out.push(DirEntry {
                name: entry.file_name(),
                is_dir: ty.is_dir(),
                is_file: ty.is_file(),
            });
        }
        Ok(out)
    }

    fn stat(&self, path: &Path) -> io::Result<Stat> {
        Ok(Stat::from_metadata(&fs::metadata(path)?))
    }

    fn open_read(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        Ok(Box::new(RealFile(File::open(path)?)))
    }

    fn open_append(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        let f = OpenOptions::new().read(true).append(true).open(path)?;
        Ok(Box::new(RealFile(f)))
    }

    fn create_new(&self, path: &Path, mode: u32) -> io::Result<Box<dyn FsFile>> {
        let f = OpenOptions::new()
            .read(true)
            .append(true)
            .create_new(true)
            .mode(mode)
            .open(path)?;
        Ok(Box::new(RealFile(f)))
    }

    fn create_dir(&self, path: &Path, mode: u32) -> io::Result<()> {
        fs::DirBuilder::new().mode(mode).create(path)
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        File::open(path)?.sync_all()
    }

    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::hard_link(from, to)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)
    }

    fn canonicalize(&self, path: &Path) -> io::Result<PathBuf> {
        fs::canonicalize(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }
}

/// Reads a whole open file.
pub(crate) fn read_to_end(file: &mut dyn FsFile) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match file.read(&mut buf) {
            Ok(0) => return Ok(out),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Writes all of `bytes`, continuing after short writes.
pub(crate) fn write_all(file: &mut dyn FsFile, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        match file.write(bytes) {
            Ok(0) => return Err(io::Error::from(io::ErrorKind::WriteZero)),
            Ok(n) => bytes = &bytes[n.min(bytes.len())..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
