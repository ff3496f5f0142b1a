//! The kind and source chain of representative `PostgreSQL` backend errors, as the backend
//! contract reports them ([`session_persist::Error`]): the driver's error stays typed, reachable
//! through `source()` and downcastable to [`tokio_postgres::Error`]. The cases needing a server
//! run against `SESSION_PG_URL` (default 127.0.0.1:5432) and skip loudly without one, unless
//! `SESSION_PG_REQUIRED=1`.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

mod common;

use std::error::Error as _;

use common::{LeasePair, TestSchema, server_available};
use session_core::json::Value;
use session_core::{Event, SessionHeader};
use session_persist::{Backend, ErrorKind};
use session_persist_postgres::{PostgresBackend, PostgresOptions};

fn meta(id: &str) -> SessionHeader {
    let mut m = SessionHeader::new(id, 1_000);
    m.cwd = Some("/kinds".into());
    m
}

/// `len` scalar events from `first`.
fn batch(first: u64, len: u64) -> Vec<Event> {
    (first..first + len)
        .map(|seq| {
            let data = Value::parse(&format!(r#"{{"turn":1,"note":"n{seq}"}}"#)).unwrap();
            Event::appended("note/marker", seq, 1_000 + seq as i64, data, None, None)
        })
        .collect()
}

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

/// Needs no server: nothing listens on port 1.
#[tokio::test]
async fn a_refused_connection_keeps_the_driver_error_as_source() {
    let refused = PostgresBackend::connect(
        "postgresql://postgres@127.0.0.1:1/postgres?connect_timeout=5",
        PostgresOptions::default(),
    )
    .await;
    let Err(err) = refused else {
        panic!("connecting to port 1 succeeded");
    };
    let text = err.to_string();
    let err = session_persist::Error::from(err);
    assert_eq!(
        err.to_string(),
        text,
        "the text is unchanged by the conversion"
    );
    assert_eq!(err.kind(), ErrorKind::Backend, "{err}");
    let backend_error = err
        .source()
        .and_then(|s| s.downcast_ref::<session_persist_postgres::Error>())
        .expect("the backend's error is the source");
    assert!(backend_error.is_connection_loss(), "{backend_error:?}");
    assert!(
        in_chain::<tokio_postgres::Error>(&err).is_some(),
        "tokio_postgres::Error in the chain of {err:?}"
    );
    assert!(in_chain::<tokio_postgres::Error>(&err.clone()).is_some());
}

#[tokio::test]
async fn a_held_lease_is_locked_and_a_lost_one_lease_lost() {
    if !server_available("a_held_lease_is_locked_and_a_lost_one_lease_lost") {
        return;
    }
    let schema = TestSchema::new();
    let pair = LeasePair::new(&schema).await;
    let (a, b) = (&pair.short, &pair.long);
    let m = meta("lease");
    a.append_batch(&m, &batch(0, 2), false).await.unwrap();
    let held = b.append_batch(&m, &batch(2, 1), true).await.unwrap_err();
    assert_eq!(held.kind(), ErrorKind::Locked, "{held}");
    pair.expire().await;
    b.append_batch(&m, &batch(2, 1), true).await.unwrap();
    let lost = a.append_batch(&m, &batch(3, 1), true).await.unwrap_err();
    assert_eq!(lost.kind(), ErrorKind::LeaseLost, "{lost}");
    assert!(
        lost.source()
            .and_then(|s| s.downcast_ref::<session_persist_postgres::Error>())
            .is_some_and(|e| matches!(e, session_persist_postgres::Error::LeaseLost { .. })),
        "{lost:?}"
    );
}

#[tokio::test]
async fn a_server_error_is_a_typed_database_error_in_the_chain() {
    if !server_available("a_server_error_is_a_typed_database_error_in_the_chain") {
        return;
    }
    let schema = TestSchema::new();
    let backend = schema.backend().await;
    let m = meta("gone");
    backend.append_batch(&m, &batch(0, 2), false).await.unwrap();
    schema
        .client()
        .await
        .batch_execute("DROP TABLE events CASCADE")
        .await
        .unwrap();
    let err = backend.load_stored("gone").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Backend, "{err}");
    let driver = in_chain::<tokio_postgres::Error>(&err).expect("tokio_postgres::Error");
    let db = driver.as_db_error().expect("a server error");
    assert_eq!(
        db.code(),
        &tokio_postgres::error::SqlState::UNDEFINED_TABLE,
        "{db:?}"
    );
}

/// A pool of one whose connection is held (an append blocked on a row lock another client
/// holds): a second operation fails with `PoolTimeout` (kind backend) once the pool timeout has
/// passed and well before any other bound, naming the timeout and the pool size; once the
/// lock is released the held append finishes and the next operation is served.
#[tokio::test]
async fn a_held_pool_times_out_naming_the_timeout_then_serves_again() {
    const TIMEOUT: std::time::Duration = std::time::Duration::from_millis(400);
    if !server_available("a_held_pool_times_out_naming_the_timeout_then_serves_again") {
        return;
    }
    let schema = TestSchema::new();
    let backend = schema
        .backend_with(schema.options().pool_size(1).pool_timeout(TIMEOUT))
        .await;
    let m = meta("pool");
    backend.append_batch(&m, &batch(0, 2), false).await.unwrap();

    // Another client locks the session row; the next append waits on it, holding the pool's
    // only connection.
    let locker = schema.client().await;
    locker.batch_execute("BEGIN").await.unwrap();
    locker
        .execute(
            "SELECT 1 FROM sessions WHERE id = $1 FOR UPDATE",
            &[&"pool"],
        )
        .await
        .unwrap();
    let holder = {
        let backend = backend.clone();
        let m = m.clone();
        tokio::spawn(async move { backend.append_batch(&m, &batch(2, 1), true).await })
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let blocked: i64 = locker
            .query_one(
                "SELECT count(*) FROM pg_stat_activity \
                 WHERE pg_backend_pid() = ANY(pg_blocking_pids(pid))",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        if blocked > 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the append never waited on the row lock"
        );
        assert!(
            !holder.is_finished(),
            "the append did not wait on the row lock"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }

    // Listing takes no row lock: only the pool can make it wait.
    let started = std::time::Instant::now();
    let err = backend.list().await.unwrap_err();
    let waited = started.elapsed();
    assert!(
        waited >= TIMEOUT,
        "failed after {waited:?}, before the timeout"
    );
    assert!(
        waited < TIMEOUT + std::time::Duration::from_secs(5),
        "failed only after {waited:?}"
    );
    assert_eq!(err.kind(), ErrorKind::Backend, "{err}");
    let typed = err
        .source()
        .and_then(|s| s.downcast_ref::<session_persist_postgres::Error>())
        .expect("the backend's error is the source");
    assert!(
        matches!(
            typed,
            session_persist_postgres::Error::PoolTimeout { ms: 400, size: 1 }
        ),
        "{typed:?}"
    );
    let text = err.to_string();
    assert!(
        text.contains("400 ms") && text.contains("all 1 pooled"),
        "the message names the timeout and the pool size: {text}"
    );
    assert!(!holder.is_finished(), "the held append finished early");

    locker.batch_execute("COMMIT").await.unwrap();
    holder.await.unwrap().unwrap();
    let loaded = backend
        .load_stored("pool")
        .await
        .unwrap()
        .expect("the session");
    assert_eq!(loaded.events.len(), 3, "the held append committed");
    backend.list().await.unwrap();
}
