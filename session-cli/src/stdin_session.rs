//! `-` as SESSION: a session file read from standard input (`zstd -dc f | sessionctl
//! messages -`). The bytes are streamed into a private temporary directory (mode 0700) as
//! `session.jsonl` or, when they start with the Zstandard magic, `session.jsonl.zstd`, and
//! the command reads that file in place; the directory is removed when the command ends.

use std::io::{self, Read, Write};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The commands that read a SESSION without writing to it, and so accept `-`.
pub(crate) const READERS: &[&str] = &[
    "inspect",
    "messages",
    "transcript",
    "header",
    "stats",
    "convert",
    "verify",
];

const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// The spooled copy of stdin; its directory is removed on drop.
pub(crate) struct Spooled {
    dir: PathBuf,
    /// The session file.
    pub(crate) file: PathBuf,
}

impl Drop for Spooled {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Streams `input` into a new private directory and returns the file.
pub(crate) fn spool(mut input: impl Read) -> Result<Spooled> {
    let dir = std::env::temp_dir().join(format!("sessionctl-stdin-{}", uuid::Uuid::new_v4()));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .map_err(|e| Error::io("create", &dir, &e))?;
    let mut head = [0u8; 4];
    let mut got = 0;
    while got < head.len() {
        match input.read(&mut head[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::io("read", Path::new("<stdin>"), &e)),
        }
    }
    let name = if got == 4 && head == ZSTD_MAGIC {
        "session.jsonl.zstd"
    } else {
        "session.jsonl"
    };
    let spooled = Spooled {
        file: dir.join(name),
        dir,
    };
    let file = &spooled.file;
    let mut w = io::BufWriter::new(
        std::fs::File::create_new(file).map_err(|e| Error::io("create", file, &e))?,
    );
    w.write_all(&head[..got])
        .and_then(|()| io::copy(&mut input, &mut w).map(drop))
        .and_then(|()| w.flush())
        .map_err(|e| Error::io("write", file, &e))?;
    if got == 0 {
        return Err(Error::failed(
            "standard input is empty: `-` reads a session file from it",
            Some("pipe a session.jsonl or session.jsonl.zstd into sessionctl".into()),
        ));
    }
    Ok(spooled)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_follows_the_magic_and_the_directory_goes() {
        let plain = spool(&b"{\"type\":\"session\"}\n"[..]).unwrap();
        assert!(plain.file.ends_with("session.jsonl"));
        let dir = plain.file.parent().unwrap().to_path_buf();
        drop(plain);
        assert!(!dir.exists());
        let z = spool(&[0x28, 0xb5, 0x2f, 0xfd, 0, 1][..]).unwrap();
        assert!(z.file.ends_with("session.jsonl.zstd"));
        assert_eq!(std::fs::read(&z.file).unwrap().len(), 6);
        assert!(spool(&b""[..]).is_err());
    }
}
