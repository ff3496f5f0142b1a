//! Path security for file databases: the parent directory and the database file must belong
//! to the current user and be private to them, and neither may be a symbolic link.

use std::fs::{self, DirBuilder, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};

use crate::error::{Error, Result};

/// Resolves `path` to an absolute, lexically normalized path (`path.resolve`): relative paths
/// are taken from the current directory, `.` components are dropped and `..` removes the
/// previous component. Refuses a path containing a NUL byte.
pub fn resolve(path: &str) -> Result<PathBuf> {
    if path.contains('\0') {
        return Err(Error::PathHasNul {
            path: path.to_owned(),
        });
    }
    let given = Path::new(path);
    let joined = if given.is_absolute() {
        given.to_path_buf()
    } else {
        let cwd = std::env::current_dir().map_err(|e| Error::io("uv_cwd", ".", e))?;
        cwd.join(given)
    };
    let mut out = PathBuf::from("/");
    for component in joined.components() {
        match component {
            Component::Normal(part) => out.push(part),
            Component::ParentDir => {
                out.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    Ok(out)
}

fn current_uid() -> u32 {
    rustix::process::getuid().as_raw()
}

/// Creates the parent directory (recursively, mode 0700) and checks it and any existing
/// database file (service initialization; nothing is opened). Returns the directories whose
/// entries changed (the parent of every directory created, outermost first): they must be
/// fsynced before anything stored under them is acknowledged.
pub fn prepare(path: &Path) -> Result<Vec<PathBuf>> {
    let parent = parent_of(path);
    let changed = create_dir_all(&parent)?;
    validate_parent(&parent)?;
    match validate_file(path) {
        Err(Error::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => Ok(changed),
        Err(e) => Err(e),
        Ok(()) => Ok(changed),
    }
}

/// `mkdir -p` with mode 0700 that reports the parents of the directories it created.
fn create_dir_all(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut missing = Vec::new();
    let mut at = Some(dir);
    while let Some(p) = at {
        match fs::metadata(p) {
            Ok(_) => break,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                missing.push(p.to_path_buf());
                at = p.parent();
            }
            Err(e) => return Err(Error::io("mkdir", dir, e)),
        }
    }
    let mut changed = Vec::new();
    for p in missing.iter().rev() {
        match DirBuilder::new().mode(0o700).create(p) {
            Ok(()) => changed.push(parent_of(p)),
            // Created concurrently: someone else's entry, synced by its creator.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && p.is_dir() => {}
            Err(e) => return Err(Error::io("mkdir", dir, e)),
        }
    }
    Ok(changed)
}

/// `fsync` of a directory, as a new database's directory entries need it (`SQLite` syncs the
/// directory of the journal and WAL files it creates, but not of the database file).
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    fs::File::open(dir)?.sync_all()
}

fn parent_of(path: &Path) -> PathBuf {
    path.parent()
        .map_or_else(|| PathBuf::from("/"), Path::to_path_buf)
}

/// The parent must be a real directory (not a symlink), owned by the current user and not
/// group- or world-writable.
pub fn validate_parent(parent: &Path) -> Result<()> {
    let meta = fs::symlink_metadata(parent).map_err(|e| Error::io("lstat", parent, e))?;
    if meta.file_type().is_symlink() || !meta.is_dir() {
        return Err(Error::ParentNotDirectory {
            path: parent.to_path_buf(),
        });
    }
    if meta.uid() != current_uid() || meta.mode() & 0o022 != 0 {
        return Err(Error::ParentNotPrivate {
            path: parent.to_path_buf(),
        });
    }
    Ok(())
}

/// The database must be a regular file (not a symlink), owned by the current user and
/// accessible by nobody else.
pub fn validate_file(path: &Path) -> Result<()> {
    let meta = fs::symlink_metadata(path).map_err(|e| Error::io("lstat", path, e))?;
    if meta.file_type().is_symlink() || !meta.is_file() {
        return Err(Error::NotRegularFile {
            path: path.to_path_buf(),
        });
    }
    if meta.uid() != current_uid() || meta.mode() & 0o077 != 0 {
        return Err(Error::FileNotPrivate {
            path: path.to_path_buf(),
        });
    }
    Ok(())
}

/// Creates the database file with mode 0600 unless it exists (`open(wx, 0o600)`), then
/// re-validates it. Returns whether this call created it.
pub fn create_file(path: &Path) -> Result<bool> {
    let created = match OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(_) => true,
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => false,
        Err(e) => return Err(Error::io("open", path, e)),
    };
    validate_file(path)?;
    Ok(created)
}

/// The store identity of a file database, `file:<dev>:<ino>:<birthtimeNs>`, from the file's
/// metadata. The birth time is what the platform reports (`statx` on Linux); where it is
/// unavailable it is 0, as Node reports it.
pub fn file_identity(path: &Path) -> Result<String> {
    let meta = fs::metadata(path).map_err(|e| Error::io("stat", path, e))?;
    let birth = meta
        .created()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    Ok(format!("file:{}:{}:{birth}", meta.dev(), meta.ino()))
}
