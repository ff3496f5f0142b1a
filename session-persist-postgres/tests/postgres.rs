//! Behaviour specific to this backend: server-side fork, header pagination, seeking reads,
//! migrations, corruption reports and configuration refusals. Each test runs in a schema of
//! its own.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use common::{TestSchema, pg_url, server_available};
use conformance::backend_suite::fixtures::{
    SUITE_CWD, SUITE_TIME_MS, TURN_LEN, turn, turn_draft, turns,
};
use session_core::json::Value;
use session_core::{Event, FixedClock, SessionHeader};
use session_persist::{Backend, Persistence, PersistenceOptions};
use session_persist_postgres::schema::latest_version;
use session_persist_postgres::{Error, PostgresBackend, PostgresOptions};
use session_store::{ForkSource, PrepareOptions, SessionStore};

fn meta(id: &str) -> SessionHeader {
    let mut m = SessionHeader::new(id, SUITE_TIME_MS as u64);
    m.cwd = Some(SUITE_CWD.into());
    m
}

fn texts(events: &[Event]) -> Vec<String> {
    events.iter().map(Event::to_json).collect()
}

/// A service, its store and a live parent session holding `turns(3)`, flushed.
async fn parent(backend: &PostgresBackend) -> (Persistence, SessionStore) {
    let store = SessionStore::new(Arc::new(FixedClock::new(SUITE_TIME_MS)));
    store.set_warning_sink(Arc::new(|_: &str| {}));
    let dyn_backend: Arc<dyn Backend> = Arc::new(backend.clone());
    let service =
        Persistence::new(dyn_backend, store.clone(), PersistenceOptions::default()).unwrap();
    service.set_warning_sink(Arc::new(|_: &str| {}));
    let (session, detach) = store
        .create(
            Some("parent"),
            PrepareOptions {
                meta: Some(Value::object([("cwd", Value::from(SUITE_CWD))])),
                ..PrepareOptions::default()
            },
        )
        .unwrap();
    std::mem::forget(detach);
    for t in 1..=3 {
        let mut call_seq = 0;
        for phase in 0..TURN_LEN {
            let event = session.append(turn_draft(t, phase, call_seq)).unwrap();
            if phase == 7 {
                call_seq = event.seq();
            }
        }
    }
    store.flush(&session).await.unwrap();
    (service, store)
}

/// The server-side fork stores exactly the events a client-side fork stores: the child seed
/// is created inside the database, and the store's fork of the same child adopts it.
#[tokio::test]
async fn server_side_fork_matches_client_side_fork() {
    if !server_available("server_side_fork_matches_client_side_fork") {
        return;
    }
    let schema = TestSchema::new();
    let backend = schema.backend().await;
    let (service, store) = parent(&backend).await;
    let boundary = Value::from(21u32); // the end of turn 2
    let seed_length = 22;

    // Client side: the store forks, the service persists the seed through the client.
    let a = store
        .fork(ForkSource::Id("parent"), Some(&boundary), Some("child-a"))
        .unwrap();
    store.flush(&a).await.unwrap();

    // Server side: the seed is copied inside the database, then the store forks the same
    // child, and the service adopts the stored seed.
    let mut header = meta("child-b");
    header.parent_session = Some("parent".into());
    header.seed_length = Some(seed_length);
    backend
        .fork_stored("parent", &header, seed_length)
        .await
        .unwrap();
    let seeded = backend.load("child-b").await.unwrap().unwrap();
    let parent_events = backend.load("parent").await.unwrap().unwrap().events;
    assert_eq!(
        texts(&seeded.events),
        texts(&parent_events[..seed_length as usize])
    );
    let b = store
        .fork(ForkSource::Id("parent"), Some(&boundary), Some("child-b"))
        .unwrap();
    store.flush(&b).await.unwrap();

    let stored_a = backend.load("child-a").await.unwrap().unwrap();
    let stored_b = backend.load("child-b").await.unwrap().unwrap();
    assert!(
        stored_a.events.len() > seed_length as usize,
        "the seed marker is stored"
    );
    assert_eq!(texts(&stored_a.events), texts(&stored_b.events));
    assert_eq!(stored_a.meta.parent_session, stored_b.meta.parent_session);
    assert_eq!(stored_a.meta.seed_length, stored_b.meta.seed_length);
    assert_eq!(stored_a.meta.cwd, stored_b.meta.cwd);
    service.dispose().await.unwrap();
}

/// A seed boundary inside a packed row: the row is cut and re-packed, the child holds exactly
/// the parent's first events; refusals write nothing.
#[tokio::test]
async fn server_side_fork_cuts_a_straddling_packed_row() {
    if !server_available("server_side_fork_cuts_a_straddling_packed_row") {
        return;
    }
    let schema = TestSchema::new();
    let backend = schema.backend().await;
    let events = turns(2);
    backend.append(&meta("p"), &events, false).await.unwrap();
    let client = schema.client().await;
    let packed: i64 = client
        .query_one(
            "SELECT count(*) FROM events WHERE session_id = 'p' AND packed",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(packed, 2, "each turn's three deltas are one packed row");
    for seed in [1u64, 4, 5, 6, 15, 22] {
        let id = format!("c{seed}");
        let mut header = meta(&id);
        header.parent_session = Some("p".into());
        header.seed_length = Some(seed);
        backend.fork_stored("p", &header, seed).await.unwrap();
        let child = backend.load(&id).await.unwrap().unwrap();
        assert_eq!(
            texts(&child.events),
            texts(&events[..seed as usize]),
            "seed {seed}"
        );
        assert_eq!(child.meta, header);
    }
    let header = meta("c1");
    let again = backend.fork_stored("p", &header, 3).await;
    assert!(
        matches!(again, Err(Error::AlreadyMaterialized { .. })),
        "{again:?}"
    );
    let mut long = meta("long");
    long.seed_length = Some(23);
    assert!(matches!(
        backend.fork_stored("p", &long, 23).await,
        Err(Error::Fork { .. })
    ));
    assert!(matches!(
        backend.fork_stored("nope", &meta("x"), 1).await,
        Err(Error::Fork { .. })
    ));
    assert!(matches!(
        backend.fork_stored("p", &meta("empty"), 0).await,
        Err(Error::Fork { .. })
    ));
    assert!(backend.load("long").await.unwrap().is_none());
    assert!(backend.load("x").await.unwrap().is_none());
}

/// `list_page` pages through headers in id order.
// persistence.md §7.1 case 6 (only materialized sessions are listed) holds via the suite
#[tokio::test]
async fn list_page_paginates_headers_in_id_order() {
    if !server_available("list_page_paginates_headers_in_id_order") {
        return;
    }
    let schema = TestSchema::new();
    let backend = schema.backend().await;
    let mut ids: Vec<String> = (0..23).map(|i| format!("s-{:02}", (i * 7) % 23)).collect();
    for id in &ids {
        backend.append(&meta(id), &turn(0, 1), false).await.unwrap();
    }
    ids.sort();
    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = backend.list_page(after.as_deref(), 5).await.unwrap();
        assert!(page.len() <= 5);
        seen.extend(page.iter().map(|m| m.id.to_string()));
        if page.len() < 5 {
            break;
        }
        after = page.last().map(|m| m.id.to_string());
    }
    assert_eq!(seen, ids);
    assert_eq!(backend.list_page(Some("s-21"), 5).await.unwrap().len(), 1);
    assert!(backend.list_page(Some("z"), 5).await.unwrap().is_empty());
}

/// Seeking reads return exactly the suffix, including from inside a packed row.
// persistence.md §7.1 case 8, §7.10 case 2 (`readFrom` at every seq is exact)
#[tokio::test]
async fn load_from_reads_the_suffix_from_any_seq() {
    if !server_available("load_from_reads_the_suffix_from_any_seq") {
        return;
    }
    let schema = TestSchema::new();
    let backend = schema.backend().await;
    let events = turns(3);
    backend
        .append(&meta("seek"), &events[..20], false)
        .await
        .unwrap();
    backend
        .append(&meta("seek"), &events[20..], true)
        .await
        .unwrap();
    for from in 0..=events.len() as u64 + 2 {
        let suffix = backend.load_from("seek", from).await.unwrap().unwrap();
        let want = events.get(from as usize..).unwrap_or_default();
        assert_eq!(texts(&suffix.events), texts(want), "from {from}");
    }
    assert!(backend.load_from("none", 0).await.unwrap().is_none());
}

/// Paged reads: the pages of any size, from any seq, give exactly the stored events (packed
/// rows split across pages included), all from one revision; a missing row fails the page
/// that needs it.
#[tokio::test]
async fn load_page_reads_bounded_runs_of_the_log() {
    if !server_available("load_page_reads_bounded_runs_of_the_log") {
        return;
    }
    let schema = TestSchema::new();
    let backend = schema.backend().await;
    let events = turns(3);
    backend
        .append(&meta("page"), &events[..20], false)
        .await
        .unwrap();
    backend
        .append(&meta("page"), &events[20..], true)
        .await
        .unwrap();
    let revision = backend.read_revision("page").await.unwrap().unwrap();
    for max in [1, 2, 5, 19, 20, 21, 1_000] {
        let mut read = Vec::new();
        let mut from = 0u64;
        loop {
            let page = backend.load_page("page", from, max).await.unwrap().unwrap();
            assert_eq!(page.revision, revision);
            assert!(!page.torn);
            let n = page.events.len();
            assert!(n <= max);
            read.extend(page.events);
            if n < max {
                break;
            }
            from += n as u64;
        }
        assert_eq!(texts(&read), texts(&events), "pages of {max}");
    }
    for from in 0..=events.len() as u64 + 2 {
        let page = backend.load_page("page", from, 3).await.unwrap().unwrap();
        let want = events
            .get(from as usize..)
            .unwrap_or_default()
            .iter()
            .take(3)
            .cloned()
            .collect::<Vec<_>>();
        assert_eq!(texts(&page.events), texts(&want), "from {from}");
    }
    assert!(backend.load_page("none", 0, 3).await.unwrap().is_none());
    // A row deleted from the middle: the page over it fails, an earlier one reads.
    let client = schema.client().await;
    let last = events.len() as i64 - 1;
    let deleted = client
        .execute(
            "DELETE FROM events WHERE session_id = 'page' AND seq <= $1 AND last_seq >= $1",
            &[&(last - 1)],
        )
        .await
        .unwrap();
    assert_eq!(deleted, 1);
    assert!(backend.load_page("page", 0, 3).await.is_ok());
    let failed = backend.load_page("page", last as u64 - 1, 3).await;
    assert!(failed.is_err(), "{failed:?}");
    // The seeking and the whole reads share the read: both refuse the hole.
    let failed = backend.load_from("page", last as u64 - 1).await;
    assert!(failed.is_err(), "{failed:?}");
    let failed = backend.load("page").await;
    assert!(failed.is_err(), "{failed:?}");
    assert!(backend.load_from("page", 0).await.is_err());
}

/// Migrations are recorded, applied once by concurrent connects, and a newer schema is
/// refused.
// persistence.md §7.10 case 6 (an incompatible schema version is refused)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrations_are_tracked_and_applied_once() {
    if !server_available("migrations_are_tracked_and_applied_once") {
        return;
    }
    let schema = TestSchema::new();
    let connects = (0..6).map(|_| {
        let options = schema.options();
        tokio::spawn(async move { PostgresBackend::connect(&pg_url(), options).await })
    });
    let mut store_ids = Vec::new();
    for c in connects {
        store_ids.push(c.await.unwrap().unwrap().store_id().unwrap().to_owned());
    }
    store_ids.dedup();
    assert_eq!(store_ids.len(), 1, "one store identity per schema");
    let client = schema.client().await;
    let versions: Vec<i32> = client
        .query(
            "SELECT version FROM schema_migrations ORDER BY version",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(versions, (1..=latest_version()).collect::<Vec<_>>());
    client
        .execute(
            "INSERT INTO schema_migrations (version, name) VALUES ($1, 'future')",
            &[&(latest_version() + 1)],
        )
        .await
        .unwrap();
    let refused = PostgresBackend::connect(&pg_url(), schema.options()).await;
    assert!(
        matches!(refused, Err(Error::SchemaTooNew { .. })),
        "{refused:?}"
    );
}

/// A damaged row is an error naming the session and the seq; a format version other than 0
/// is refused when the session is opened and listed as stored; unknown header keys are not part of the stored metadata (rebuilt from the
/// known fields, as on every read path).
// persistence.md §7.10 case 19 (invalid stored data rejects the load)
#[tokio::test]
async fn damage_is_reported_with_its_seq() {
    if !server_available("damage_is_reported_with_its_seq") {
        return;
    }
    let schema = TestSchema::new();
    let backend = schema.backend().await;
    let mut header = meta("hurt");
    header.extra.push((
        "futureKey".into(),
        Value::parse(r#"{"b":1,"a":2}"#).unwrap(),
    ));
    backend.append(&header, &turns(2), false).await.unwrap();
    let stored = backend.load("hurt").await.unwrap().unwrap();
    assert_eq!(
        stored.meta,
        meta("hurt"),
        "unknown header keys are dropped on read"
    );
    let client = schema.client().await;
    client
        .execute(
            "UPDATE events SET line_text = '{\"type\":' WHERE session_id = 'hurt' AND seq = 13",
            &[],
        )
        .await
        .unwrap();
    let err = backend.load("hurt").await.unwrap_err();
    assert!(matches!(err, Error::Corrupt { seq: Some(13), .. }), "{err}");
    assert!(err.to_string().contains("\"hurt\"") && err.to_string().contains("seq 13"));
    client
        .execute(
            "DELETE FROM events WHERE session_id = 'hurt' AND seq = 13",
            &[],
        )
        .await
        .unwrap();
    let err = backend.load("hurt").await.unwrap_err();
    assert!(err.to_string().contains("not contiguous"), "{err}");
    client
        .execute("UPDATE sessions SET version = 2 WHERE id = 'hurt'", &[])
        .await
        .unwrap();
    let err = Backend::load_stored(&backend, "hurt").await.unwrap_err();
    assert!(
        matches!(err, session_persist::Error::FormatUnsupported { .. }),
        "{err}"
    );
    // A listing reads headers leniently: the session is listed with its stored version.
    let listed = Backend::list(&backend).await.unwrap();
    let hurt = listed.iter().find(|h| &*h.id == "hurt").unwrap();
    assert_eq!(hurt.to_value().get("version").unwrap().to_json(), "2");
}

/// Large lines are stored zstd-compressed when smaller, and read back byte-exact.
// persistence.md §7.11 case 10 (large data stored compressed), §7.12 (small data stays text)
#[tokio::test]
async fn large_lines_are_compressed() {
    if !server_available("large_lines_are_compressed") {
        return;
    }
    let schema = TestSchema::new();
    let backend = schema.backend().await;
    let big = "lorem ipsum ".repeat(2_000);
    let data = Value::parse(&format!(r#"{{"turn":1,"note":"{big}","z":1e3}}"#)).unwrap();
    let event = Event::appended("note/big", 0, 5, data, None, None);
    backend
        .append(&meta("big"), std::slice::from_ref(&event), false)
        .await
        .unwrap();
    let client = schema.client().await;
    let row = client
        .query_one(
            "SELECT line_text IS NULL, octet_length(line_zstd) FROM events WHERE session_id = 'big'",
            &[],
        )
        .await
        .unwrap();
    let (no_text, zstd_len): (bool, i32) = (row.get(0), row.get(1));
    assert!(no_text && (zstd_len as usize) < big.len() / 4);
    let stored = backend.load("big").await.unwrap().unwrap();
    assert_eq!(texts(&stored.events), texts(&[event]));
}

/// Configuration refusals need no server.
#[tokio::test]
async fn configuration_is_checked() {
    let tls = PostgresBackend::connect(
        "host=127.0.0.1 user=postgres dbname=test sslmode=require",
        PostgresOptions::default(),
    )
    .await;
    if cfg!(feature = "tls") {
        // TLS is built in (tests/tls.rs covers it); the main server's answer decides.
        drop(tls);
    } else {
        assert!(matches!(tls, Err(Error::TlsUnavailable)), "{tls:?}");
    }
    let mode = PostgresBackend::connect(
        "host=127.0.0.1 user=postgres dbname=test sslmode=sometimes",
        PostgresOptions::default(),
    )
    .await;
    assert!(matches!(mode, Err(Error::InvalidConfig(_))), "{mode:?}");
    let half = PostgresBackend::connect(
        "host=127.0.0.1 user=postgres dbname=test sslmode=require sslcert=/nonexistent.pem",
        PostgresOptions::default(),
    )
    .await;
    assert!(
        matches!(half, Err(Error::InvalidConfig(_) | Error::TlsUnavailable)),
        "{half:?}"
    );
    let bad =
        PostgresBackend::connect(&pg_url(), PostgresOptions::default().schema("x; drop")).await;
    assert!(matches!(bad, Err(Error::InvalidConfig(_))), "{bad:?}");
    let zero = PostgresBackend::connect(&pg_url(), PostgresOptions::default().pool_size(0)).await;
    assert!(matches!(zero, Err(Error::InvalidConfig(_))), "{zero:?}");
    let garbage = PostgresBackend::connect("host=", PostgresOptions::default()).await;
    assert!(garbage.is_err());
}

/// A closed backend refuses every operation and gives its leases up.
#[tokio::test]
async fn close_releases_leases_and_refuses_work() {
    if !server_available("close_releases_leases_and_refuses_work") {
        return;
    }
    let schema = TestSchema::new();
    let a = schema.backend().await;
    let b = schema.backend().await;
    a.append(&meta("c"), &turn(0, 1), false).await.unwrap();
    assert!(b.append(&meta("c"), &turn(11, 2), true).await.is_err());
    a.shutdown().await.unwrap();
    assert!(matches!(a.load("c").await, Err(Error::Closed)));
    b.append(&meta("c"), &turn(11, 2), true).await.unwrap();
    assert_eq!(b.load("c").await.unwrap().unwrap().events.len(), 22);
}

/// Packing follows the `SQLite` partition rule; ignorable events named like a row tag stay
/// scalar rows; everything round-trips byte-exact.
// persistence.md §7.11 case 2 (1,027 members give 2 rows), case 9 (tag-named ignorable events
// stay scalar)
#[tokio::test]
async fn packing_partitions_and_round_trips() {
    let chunks: Vec<Event> = (0..1_027u64)
        .map(|seq| {
            let data = Value::parse(&format!(
                r#"{{"turn":1,"step":1,"chunk":{{"type":"text-delta","index":0,"text":"t{seq}"}}}}"#
            ))
            .unwrap();
            Event::appended("assistant/chunk", seq, 7 + seq as i64, data, None, None)
        })
        .collect();
    let rows = session_persist_postgres::codec::pack_batch(&chunks).unwrap();
    assert_eq!(rows.len(), 2);
    assert!(rows.iter().all(|r| r.packed));
    assert_eq!((rows[0].seq, rows[0].last_seq), (0, 1_023));
    let tagged: Vec<Event> = ["text-chunks", "reasoning-chunks", "tool-call-chunks"]
        .iter()
        .enumerate()
        .map(|(i, tag)| {
            Event::parse(&format!(
                r#"{{"type":"{tag}","seq":{},"time":1,"data":{{"x":1}},"ignorable":true}}"#,
                1_027 + i
            ))
            .unwrap()
        })
        .collect();
    let rows = session_persist_postgres::codec::pack_batch(&tagged).unwrap();
    assert!(rows.iter().all(|r| !r.packed && r.ignorable));
    if !server_available("packing_partitions_and_round_trips") {
        return;
    }
    let schema = TestSchema::new();
    let backend = schema.backend().await;
    backend.append(&meta("pack"), &chunks, false).await.unwrap();
    backend.append(&meta("pack"), &tagged, true).await.unwrap();
    let stored = backend.load("pack").await.unwrap().unwrap().events;
    let all = [chunks, tagged].concat();
    assert_eq!(texts(&stored), texts(&all));
}

/// Without `create_schema`, connecting and reading write nothing: a missing schema reads as an
/// empty store, and the first write creates it (and its store identity).
#[tokio::test]
async fn reads_without_create_schema_create_nothing() {
    if !server_available("reads_without_create_schema_create_nothing") {
        return;
    }
    let schema = TestSchema::new();
    let backend = schema
        .backend_with(schema.options().create_schema(false))
        .await;
    assert_eq!(backend.store_id(), None);
    assert!(backend.load("s").await.unwrap().is_none());
    assert!(backend.load_from("s", 0).await.unwrap().is_none());
    assert!(backend.read_revision("s").await.unwrap().is_none());
    assert!(backend.next_seq("s").await.unwrap().is_none());
    assert!(backend.snapshots().await.unwrap().is_empty());
    assert!(backend.list_page(None, 10).await.unwrap().is_empty());
    let client = common::raw_client(&pg_url()).await.unwrap();
    let count = async |client: &session_persist_postgres::tokio_postgres::Client| -> i64 {
        client
            .query_one(
                "SELECT count(*) FROM information_schema.schemata WHERE schema_name = $1",
                &[&schema.name],
            )
            .await
            .unwrap()
            .get(0)
    };
    assert_eq!(count(&client).await, 0, "reading created the schema");
    let events = turns(1);
    backend.append(&meta("s"), &events, false).await.unwrap();
    assert_eq!(
        count(&client).await,
        1,
        "the first write creates the schema"
    );
    assert!(backend.store_id().is_some());
    let loaded = backend.load("s").await.unwrap().unwrap();
    assert_eq!(texts(&loaded.events), texts(&events));
}
