//! Directory layout and naming: `<root>/<projectKey(cwd)>/<encodeSegment(id)>/session.jsonl[.zstd]`.

use std::fmt::Write as _;
use std::path::{Component, Path, PathBuf};

use super::Compression;
use crate::error::{Error, Result};

/// The project directory of sessions without a cwd.
pub const NO_CWD_DIR: &str = "_no-cwd";

/// The logical transcript file name (also the raw file name).
pub const LOGICAL_FILE_NAME: &str = "session.jsonl";

/// The longest project slug kept before wrapping it as `--<slug>--`.
const PROJECT_SLUG_MAX: usize = 251;

fn is_safe(unit: u16) -> bool {
    matches!(unit, 0x30..=0x39 | 0x41..=0x5A | 0x61..=0x7A | 0x2E | 0x5F | 0x2D)
}

fn escape(unit: u16, out: &mut String) {
    let _ = write!(out, "~{unit:04X}");
}

/// `encodeSegment`: an injective encoding of a string as one path segment, over UTF-16 code
/// units. `[A-Za-z0-9._-]` stay literal, every other unit (including `~`) becomes `~XXXX`; `.`
/// and `..` are escaped whole.
pub fn encode_segment(s: &str) -> Result<String> {
    if s.is_empty() {
        return Err(Error::EmptySegment);
    }
    if s == "." {
        return Ok("~002E".to_owned());
    }
    if s == ".." {
        return Ok("~002E~002E".to_owned());
    }
    let mut out = String::with_capacity(s.len());
    for unit in s.encode_utf16() {
        if is_safe(unit) {
            out.push(char::from(unit as u8));
        } else {
            escape(unit, &mut out);
        }
    }
    Ok(out)
}

/// `projectKey`: a readable, lossy directory name for a cwd. Runs of `/`, `\` and `:` become one
/// `-`, unsafe UTF-16 units become `~XXXX`, leading `-` are stripped (an empty result becomes
/// `root`), and the slug is cut to 251 characters and wrapped as `--<slug>--`.
pub fn project_key(cwd: &str) -> Result<String> {
    if cwd.is_empty() {
        return Err(Error::EmptyProjectPath);
    }
    let mut slug = String::with_capacity(cwd.len());
    let mut in_separator_run = false;
    for unit in cwd.encode_utf16() {
        if matches!(unit, 0x2F | 0x5C | 0x3A) {
            if !in_separator_run {
                slug.push('-');
            }
            in_separator_run = true;
            continue;
        }
        in_separator_run = false;
        if is_safe(unit) {
            slug.push(char::from(unit as u8));
        } else {
            escape(unit, &mut slug);
        }
    }
    let trimmed = slug.trim_start_matches('-');
    let body = if trimmed.is_empty() { "root" } else { trimmed };
    // Every character of the slug is ASCII, so bytes are characters.
    let body = &body[..body.len().min(PROJECT_SLUG_MAX)];
    Ok(format!("--{body}--"))
}

/// `projectDir(root, cwd)`.
pub fn project_dir(root: &Path, cwd: Option<&str>) -> Result<PathBuf> {
    Ok(match cwd {
        None => root.join(NO_CWD_DIR),
        Some(c) => root.join(project_key(c)?),
    })
}

/// The transcript file name for an encoding: `session.jsonl` or `session.jsonl.zstd`.
pub fn file_name(compression: Compression) -> &'static str {
    match compression {
        Compression::None => "session.jsonl",
        Compression::Zstd => "session.jsonl.zstd",
    }
}

/// The suffix of an encoding: `.jsonl` or `.jsonl.zstd`.
pub(crate) fn suffix(compression: Compression) -> &'static str {
    match compression {
        Compression::None => ".jsonl",
        Compression::Zstd => ".jsonl.zstd",
    }
}

/// The transcript path of a session: `<projectDir>/<encodeSegment(id)>/<file name>`.
pub fn log_path(
    root: &Path,
    cwd: Option<&str>,
    id: &str,
    compression: Compression,
) -> Result<PathBuf> {
    Ok(project_dir(root, cwd)?
        .join(encode_segment(id)?)
        .join(file_name(compression)))
}

/// `path.resolve(root)`: absolute and lexically normalized (`.` and `..` removed, symbolic links
/// untouched).
pub fn resolve_root(root: &Path) -> std::io::Result<PathBuf> {
    let absolute = if root.is_absolute() {
        root.to_path_buf()
    } else {
        std::env::current_dir()?.join(root)
    };
    let mut out = PathBuf::new();
    for c in absolute.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    // persistence §7.6 #1
    #[test]
    fn encode_segment_examples() {
        assert_eq!(encode_segment("..").unwrap(), "~002E~002E");
        assert_eq!(encode_segment(".").unwrap(), "~002E");
        assert_eq!(encode_segment("a/b").unwrap(), "a~002Fb");
        assert_eq!(
            encode_segment("/etc/passwd").unwrap(),
            "~002Fetc~002Fpasswd"
        );
        assert_eq!(encode_segment("a\0b").unwrap(), "a~0000b");
        assert_eq!(
            encode_segment("Az09._-").unwrap(),
            "Az09._-",
            "safe characters stay literal"
        );
        assert_eq!(encode_segment("~").unwrap(), "~007E");
        assert_eq!(encode_segment("a.b").unwrap(), "a.b");
        assert_eq!(encode_segment("...").unwrap(), "...");
    }

    // persistence §7.6 #2 (lone surrogates cannot occur in a Rust string; their code units are
    // still escaped distinctly, as a non-BMP character shows)
    #[test]
    fn encode_segment_is_injective() {
        assert_eq!(encode_segment("\u{1F600}").unwrap(), "~D83D~DE00");
        assert_ne!(
            encode_segment("\u{1F600}").unwrap(),
            encode_segment("\u{1F601}").unwrap()
        );
        assert_ne!(
            encode_segment("~002F").unwrap(),
            encode_segment("/").unwrap()
        );
        assert_eq!(encode_segment("~002F").unwrap(), "~007E002F");
        let samples = [
            "a", "A", "~", "~007E", "/", ".", "..", "...", "a b", "ä", "a\u{0}",
        ];
        let mut seen = std::collections::HashSet::new();
        for s in samples {
            assert!(seen.insert(encode_segment(s).unwrap()), "{s:?} collides");
        }
    }

    // persistence §7.6 #3
    #[test]
    fn encode_segment_rejects_empty() {
        let e = encode_segment("").unwrap_err();
        assert!(e.to_string().contains("empty"));
        assert_eq!(e.to_string(), "cannot encode an empty path segment");
    }

    // persistence §7.6 #4
    #[test]
    fn project_key_examples_and_bound() {
        assert_eq!(
            project_key("/Users/qyj/work/deepseek-harness").unwrap(),
            "--Users-qyj-work-deepseek-harness--"
        );
        assert_eq!(project_key("C:\\work\\agent").unwrap(), "--C-work-agent--");
        assert_eq!(project_key("/").unwrap(), "--root--");
        assert_eq!(
            project_key("/开发/~agent").unwrap(),
            "--~5F00~53D1-~007Eagent--"
        );
        assert_eq!(
            project_key("/a/b-c").unwrap(),
            project_key("/a-b/c").unwrap()
        );
        assert_eq!(project_key("//a::b\\\\c").unwrap(), "--a-b-c--");
        let long = format!("/{}", "x".repeat(400));
        let key = project_key(&long).unwrap();
        assert_eq!(key.len(), 255);
        assert!(key.starts_with("--x") && key.ends_with("x--"));
        let wide = format!("/{}", "开".repeat(100));
        assert_eq!(project_key(&wide).unwrap().len(), 255);
        assert_eq!(
            project_key("").unwrap_err().to_string(),
            "cannot encode an empty project path"
        );
    }

    #[test]
    fn paths_follow_the_layout() {
        let root = Path::new("/r");
        assert_eq!(
            log_path(root, Some("/w"), "s", Compression::Zstd).unwrap(),
            Path::new("/r/--w--/s/session.jsonl.zstd")
        );
        // persistence §7.6 #35: a traversal id stays one segment under the root.
        assert_eq!(
            log_path(root, None, "../../etc/pwn", Compression::None).unwrap(),
            Path::new("/r/_no-cwd/..~002F..~002Fetc~002Fpwn/session.jsonl")
        );
    }

    // persistence §7.6 #5
    #[test]
    fn relative_root_is_resolved() {
        let r = resolve_root(Path::new("some/./dir/../root")).unwrap();
        assert!(r.is_absolute());
        assert!(r.ends_with("some/root"));
        assert_eq!(
            resolve_root(Path::new("/a/b/../c/.")).unwrap(),
            Path::new("/a/c")
        );
    }
}
