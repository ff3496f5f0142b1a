//! The kind, position and source chain of representative errors of the JSONL backend
//! ([`session_persist::ErrorKind`], [`session_persist::Position`]), and that a cloned error
//! keeps all three.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

mod common;

use std::error::Error as _;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use common::{TempDir, ev, rt};
use session_core::{Event, SessionHeader};
use session_persist::{
    Backend, Compression, Error, ErrorKind, JsonlBackend, JsonlConfig, Position, io_code,
};

fn open(root: &Path) -> session_persist::Result<JsonlBackend> {
    JsonlBackend::open(JsonlConfig::new(root).compression(Compression::None))
}

fn meta() -> SessionHeader {
    let mut m = SessionHeader::new("s", 1_000);
    m.cwd = Some("/w".into());
    m
}

fn turn_one() -> Vec<Event> {
    vec![
        ev("turn/start", 0, r#"{"turn":1}"#),
        ev("step/start", 1, r#"{"turn":1,"step":1}"#),
        ev("user/message", 2, r#"{"text":"hi"}"#),
        ev("assistant/message", 3, r#"{"text":"hello"}"#),
        ev("step/end", 4, r#"{"turn":1,"step":1}"#),
        ev("turn/end", 5, r#"{"turn":1,"reason":{"kind":"completed"}}"#),
    ]
}

/// A stored session `s` with one closed turn; returns the backend and the log's path.
fn stored(root: &Path) -> (JsonlBackend, std::path::PathBuf) {
    let backend = open(root).unwrap();
    rt().block_on(backend.append_batch(&meta(), &turn_one(), false))
        .unwrap();
    let path = backend.log_path(&meta()).unwrap();
    (backend, path)
}

#[test]
fn a_damaged_committed_line_is_corrupt_at_its_file_line() {
    let tmp = TempDir::new("kind-corrupt");
    let (backend, path) = stored(&tmp.root());
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines[2] = "{not json";
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let err = rt().block_on(backend.load_stored("s")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "corrupt session log: unparsable committed event at line 2"
    );
    assert_eq!(err.kind(), ErrorKind::Corrupt);
    let at = err.position().expect("a position");
    // The reference counts lines after the header; the position counts file lines.
    assert_eq!(at.line, Some(3), "{at:?}");
    assert_eq!(at.seq, None);
}

#[test]
fn a_second_writer_is_locked_and_a_closed_backend_is_closed() {
    let tmp = TempDir::new("kind-locked");
    let (first, path) = stored(&tmp.root());
    let second = open(&tmp.root()).unwrap();
    let closers = [
        ev("turn/start", 6, r#"{"turn":2}"#),
        ev("turn/end", 7, r#"{"turn":2,"reason":{"kind":"completed"}}"#),
    ];
    let err = rt()
        .block_on(second.append_batch(&meta(), &closers, true))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Locked, "{err}");
    assert_eq!(err.position(), Some(Position::at_path(&path)));
    rt().block_on(first.close()).unwrap();
    let err = rt().block_on(first.load_stored("s")).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Closed, "{err}");
}

#[test]
fn a_second_first_publication_already_exists() {
    let tmp = TempDir::new("kind-exists");
    let (backend, _) = stored(&tmp.root());
    let err = rt()
        .block_on(backend.append_batch(&meta(), &turn_one(), false))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::AlreadyExists, "{err}");
}

#[test]
fn a_flat_file_layout_is_an_unsupported_format_naming_the_file() {
    let tmp = TempDir::new("kind-flat");
    let flat = tmp.root().join("--w--").join("s.jsonl");
    std::fs::create_dir_all(flat.parent().unwrap()).unwrap();
    std::fs::write(&flat, "{}\n").unwrap();
    let backend = open(&tmp.root()).unwrap();
    let err = rt().block_on(backend.load_stored("s")).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::FormatUnsupported, "{err}");
    assert_eq!(err.position(), Some(Position::at_path(&flat)));
}

#[test]
fn a_permissive_root_is_invalid() {
    let tmp = TempDir::new("kind-permissive");
    std::fs::create_dir_all(tmp.root()).unwrap();
    std::fs::set_permissions(tmp.root(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let err = open(&tmp.root())
        .and_then(|b| rt().block_on(b.list()).map(drop))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Invalid, "{err}");
    assert_eq!(err.position(), Some(Position::at_path(tmp.root())));
}

#[test]
fn an_io_failure_keeps_its_io_error_as_source_through_clones() {
    let tmp = TempDir::new("kind-io");
    std::fs::write(tmp.root(), "x").unwrap();
    let err = open(&tmp.root()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Io, "{err}");
    let clone = err.clone();
    for e in [&err, &clone] {
        assert_eq!(e.kind(), ErrorKind::Io);
        assert_eq!(e.to_string(), err.to_string());
        assert_eq!(e.code(), Some("ENOTDIR"));
        let source = e
            .source()
            .and_then(|s| s.downcast_ref::<io::Error>())
            .expect("the io::Error is the source");
        assert_eq!(io_code(source), Some("ENOTDIR"));
        assert_eq!(source.kind(), io::ErrorKind::NotADirectory);
    }
    assert!(matches!(clone, Error::Io { .. }));
}
