//! Permissions and secrets: private modes on every published or repaired log, and the
//! redaction hook (`PersistenceOptions::redact`, off by default).
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

mod coord;

use std::path::Path;
use std::sync::Arc;

use coord::{Env, Kind, complete_turn, live, meta, service_with, store, turn_events, user};
use session_core::Event;
use session_core::json::Value;
use session_persist::redact::{Redactor, with_data};
use session_persist::{Compression, Error, JsonlBackend, JsonlConfig, PersistenceOptions};

#[cfg(unix)]
fn mode(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[cfg(unix)]
fn assert_private(root: &Path, log: &Path) {
    assert_eq!(mode(log), 0o600, "{}", log.display());
    let mut dir = log.parent().unwrap();
    while dir.starts_with(root) {
        assert_eq!(mode(dir), 0o700, "{}", dir.display());
        dir = dir.parent().unwrap();
    }
}

fn log_path(env: &Env, id: &str) -> std::path::PathBuf {
    let compression = if env.kind == Kind::JsonlZstd {
        Compression::Zstd
    } else {
        Compression::None
    };
    JsonlBackend::open(JsonlConfig::new(env.root()).compression(compression))
        .unwrap()
        .log_path(&meta(id))
        .unwrap()
}

#[cfg(unix)]
#[tokio::test]
async fn logs_are_0600_and_directories_0700_after_publication_and_after_repair() {
    for kind in [Kind::JsonlRaw, Kind::JsonlZstd] {
        let env = Env::new(kind);
        let store = store();
        let (p, _) = service_with(env.backend(), &store, PersistenceOptions::default());
        let (session, detach) = live(&store, "m", Some("/proj"));
        complete_turn(&session, 1);
        store.flush(&session).await.unwrap();
        let path = log_path(&env, "m");
        assert_private(&env.root(), &path);
        detach.detach();
        p.dispose().await.unwrap();

        // A crash leaves a torn tail; `load` repairs it (cut + closers) and keeps the modes.
        let mut torn = turn_events(6, 2);
        torn.truncate(3);
        let backend = env.backend();
        backend.append_batch(&meta("m"), &torn, true).await.unwrap();
        backend.close().await.unwrap();
        assert!(env.corrupt_tail(&meta("m"), 9));
        let store2 = coord::store();
        let (p, _) = service_with(env.backend(), &store2, PersistenceOptions::default());
        let loaded = p.load("m").await.unwrap();
        assert!(loaded.events.len() > 9, "closers were appended");
        assert_private(&env.root(), &path);
        p.dispose().await.unwrap();
    }
}

/// Replaces every occurrence of `sk-` secrets in `data` with `[redacted]`.
fn hide_secrets() -> Redactor {
    Arc::new(|e: &Event| {
        let json = e.data().to_json();
        if json.contains("sk-") {
            with_data(
                e,
                Value::parse(&json.replace("sk-live-1234", "[redacted]")).unwrap(),
            )
        } else {
            e.clone()
        }
    })
}

#[tokio::test]
async fn the_redaction_hook_rewrites_the_stored_copy_only() {
    for kind in [Kind::JsonlRaw, Kind::JsonlZstd] {
        let env = Env::new(kind);
        let store = store();
        let (p, _) = service_with(
            env.backend(),
            &store,
            PersistenceOptions {
                redact: Some(hide_secrets()),
                ..PersistenceOptions::default()
            },
        );
        let (session, detach) = live(&store, "r", Some("/proj"));
        session.append(coord::turn_start(1)).unwrap();
        session
            .append(user("u1", "my key is sk-live-1234"))
            .unwrap();
        store.flush(&session).await.unwrap();
        // In memory: the original.
        assert!(
            session
                .events()
                .get(1)
                .unwrap()
                .to_json()
                .contains("sk-live-1234")
        );
        // On disk: redacted, envelope intact.
        let stored = env.stored("r").await;
        assert_eq!(stored.len(), 2);
        let text = stored[1].data().to_json();
        assert!(text.contains("my key is [redacted]"), "{text}");
        assert_eq!(stored[1].event_type(), "user/message");
        assert_eq!(stored[1].seq(), 1);
        assert_eq!(
            stored[1].surface_op_value(),
            session.events().get(1).unwrap().surface_op_value()
        );
        if kind == Kind::JsonlRaw {
            let bytes = std::fs::read(log_path(&env, "r")).unwrap();
            assert!(!String::from_utf8_lossy(&bytes).contains("sk-live-1234"));
        }
        detach.detach();
        p.dispose().await.unwrap();
    }
}

#[tokio::test]
async fn redaction_is_off_by_default() {
    assert!(PersistenceOptions::default().redact.is_none());
    let env = Env::new(Kind::JsonlRaw);
    let store = store();
    let (p, _) = service_with(env.backend(), &store, PersistenceOptions::default());
    let (session, detach) = live(&store, "plain", Some("/proj"));
    session.append(coord::turn_start(1)).unwrap();
    session.append(user("u1", "sk-live-1234")).unwrap();
    store.flush(&session).await.unwrap();
    let bytes = std::fs::read(log_path(&env, "plain")).unwrap();
    assert!(String::from_utf8_lossy(&bytes).contains("sk-live-1234"));
    detach.detach();
    p.dispose().await.unwrap();
}

#[tokio::test]
async fn a_redactor_that_changes_the_envelope_is_refused_and_writes_nothing() {
    let cases: [(&str, Redactor); 3] = [
        (
            "type",
            Arc::new(|e: &Event| {
                Event::appended("user/note", e.seq(), e.time(), e.data().clone(), None, None)
            }),
        ),
        (
            "seq",
            Arc::new(|e: &Event| {
                Event::appended(
                    e.event_type(),
                    e.seq() + 1,
                    e.time(),
                    e.data().clone(),
                    None,
                    None,
                )
            }),
        ),
        (
            "time",
            Arc::new(|e: &Event| {
                Event::appended(
                    e.event_type(),
                    e.seq(),
                    e.time() + 1,
                    e.data().clone(),
                    None,
                    None,
                )
            }),
        ),
    ];
    for (field, redactor) in cases {
        let env = Env::new(Kind::JsonlRaw);
        let store = store();
        let (p, _) = service_with(
            env.backend(),
            &store,
            PersistenceOptions {
                redact: Some(redactor),
                ..PersistenceOptions::default()
            },
        );
        let (session, detach) = live(&store, "bad", Some("/proj"));
        session.append(coord::turn_start(1)).unwrap();
        let err = store.flush(&session).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("redaction of event 0 of session \"bad\" changed its {field}")
        );
        assert!(!log_path(&env, "bad").exists(), "nothing was written");
        detach.detach();
        let _ = p.dispose().await;
    }
    // Dropping `surfaceOp` is an envelope change too.
    let append_op = Event::appended(
        "user/message",
        0,
        1,
        Value::parse(r#"{"id":"u"}"#).unwrap(),
        None,
        Some(Value::from("append")),
    );
    let strip: Redactor = Arc::new(|e: &Event| {
        Event::appended(
            e.event_type(),
            e.seq(),
            e.time(),
            e.data().clone(),
            None,
            None,
        )
    });
    let err = session_persist::redact::apply(&strip, "x", vec![append_op]).unwrap_err();
    assert!(matches!(
        err,
        Error::RedactionChangedEnvelope {
            seq: 0,
            field: "surfaceOp",
            ..
        }
    ));
    assert_eq!(
        err.to_string(),
        "redaction of event 0 of session \"x\" changed its surfaceOp"
    );
}
