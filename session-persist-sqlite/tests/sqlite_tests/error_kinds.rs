//! The kind and source chain of representative `SQLite` backend errors, as the backend contract
//! reports them ([`session_persist::Error`]): `SQLite`'s own error stays typed, reachable through
//! `source()` and downcastable to [`rusqlite::Error`].
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

use std::error::Error as _;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use crate::common::*;
use session_persist::{Backend, ErrorKind, Position};
use session_persist_sqlite::rusqlite::{self, ErrorCode};
use session_persist_sqlite::{SqliteBackend, SqliteConfig};

/// The first link of `err`'s source chain that is a `T`.
fn in_chain<'a, T: std::error::Error + 'static>(
    err: &'a (dyn std::error::Error + 'static),
) -> Option<&'a T> {
    let mut at = Some(err);
    while let Some(e) = at {
        if let Some(found) = e.downcast_ref::<T>() {
            return Some(found);
        }
        at = e.source();
    }
    None
}

#[tokio::test]
async fn a_file_that_is_not_a_database_is_corrupt_with_the_sqlite_error_as_source() {
    let dir = TempDir::new("kind-notadb");
    std::fs::write(dir.db(), vec![b'x'; 4096]).unwrap();
    std::fs::set_permissions(dir.db(), std::fs::Permissions::from_mode(0o600)).unwrap();
    let backend = backend_at(&dir.db());
    let err = backend.load_stored("s").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corrupt, "{err}");
    assert_eq!(err.to_string(), "file is not a database");
    // The chain: session_persist::Error -> session_persist_sqlite::Error -> rusqlite::Error.
    let backend_error = err
        .source()
        .and_then(|s| s.downcast_ref::<session_persist_sqlite::Error>())
        .expect("the backend's error is the source");
    assert_eq!(backend_error.kind(), ErrorKind::Corrupt);
    let driver = in_chain::<rusqlite::Error>(&err).expect("rusqlite::Error in the chain");
    assert_eq!(driver.sqlite_error_code(), Some(ErrorCode::NotADatabase));
    // A clone shares the same typed chain.
    let clone = err.clone();
    assert!(in_chain::<rusqlite::Error>(&clone).is_some());
    assert_eq!(clone.to_string(), err.to_string());
}

#[tokio::test]
async fn a_database_held_by_another_connection_is_locked() {
    let dir = TempDir::new("kind-busy");
    let backend =
        SqliteBackend::new(SqliteConfig::new(dir.db().to_str().unwrap()).busy_timeout_ms(20))
            .unwrap();
    let m = meta("s");
    backend
        .append_batch(&m, &[turn_start(0, 1)], false)
        .await
        .unwrap();
    let holder = raw(&dir.db());
    holder.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let err = tokio::time::timeout(
        Duration::from_secs(30),
        backend.append_batch(&m, &[turn_end(1, 1)], true),
    )
    .await
    .expect("the busy timeout bounds the wait")
    .unwrap_err();
    holder.execute_batch("ROLLBACK").unwrap();
    assert_eq!(err.kind(), ErrorKind::Locked, "{err}");
    let driver = in_chain::<rusqlite::Error>(&err).expect("rusqlite::Error in the chain");
    assert_eq!(driver.sqlite_error_code(), Some(ErrorCode::DatabaseBusy));
}

#[tokio::test]
async fn a_symlinked_database_is_invalid_and_names_the_file() {
    let dir = TempDir::new("kind-symlink");
    let target = dir.path().join("elsewhere.db");
    std::fs::write(&target, b"").unwrap();
    std::os::unix::fs::symlink(&target, dir.db()).unwrap();
    let err = match SqliteBackend::new(SqliteConfig::new(dir.db().to_str().unwrap())) {
        Err(e) => session_persist::Error::from(e),
        Ok(backend) => backend.load_stored("s").await.unwrap_err(),
    };
    assert_eq!(err.kind(), ErrorKind::Invalid, "{err}");
    assert_eq!(err.position(), Some(Position::at_path(dir.db())));
}

#[tokio::test]
async fn a_closed_backend_is_closed() {
    let backend = memory();
    backend.close().await.unwrap();
    let err = backend.load_stored("s").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Closed, "{err}");
}
