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

/// A fresh directory under the system temporary directory (mode 0755 with the usual umask),
/// removed on drop.
#[cfg(unix)]
struct Scratch(std::path::PathBuf);

#[cfg(unix)]
impl Scratch {
    fn new(tag: &str) -> Scratch {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("persist-perm-{}-{n}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

#[cfg(unix)]
impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(unix)]
fn chmod(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[cfg(unix)]
fn refused_dir(e: &Error) -> Option<(std::path::PathBuf, u32)> {
    match e {
        Error::PermissiveDirectory { path, mode } => Some((path.clone(), *mode)),
        _ => None,
    }
}

#[cfg(unix)]
#[tokio::test]
async fn a_group_or_world_writable_root_project_or_session_directory_is_refused_naming_path_and_mode()
 {
    use session_persist::Backend;
    let scratch = Scratch::new("permissive");
    let root = scratch.0.join("root");
    let config = || JsonlConfig::new(&root);
    let backend = JsonlBackend::open(config()).unwrap();
    let events = turn_events(0, 1);
    backend
        .append_batch(&meta("s"), &events, false)
        .await
        .unwrap();
    let log = backend.log_path(&meta("s")).unwrap();
    let session = log.parent().unwrap().to_path_buf();
    let project = session.parent().unwrap().to_path_buf();
    let len = std::fs::metadata(&log).unwrap().len();
    for (dir, bits) in [
        (&root, 0o777),
        (&root, 0o770),
        (&project, 0o777),
        (&project, 0o1777),
        (&project, 0o720),
        (&session, 0o777),
        (&session, 0o770),
        (&session, 0o1777),
    ] {
        chmod(dir, bits);
        let want = Some((dir.clone(), bits));
        if *dir == root {
            let opened = JsonlBackend::open(config()).unwrap_err();
            assert_eq!(refused_dir(&opened), want);
            assert_eq!(
                opened.to_string(),
                format!(
                    "session directory \"{}\" must not be group/world-writable (mode {bits:04o}); another user could plant a link in it (chmod go-w it, or allow permissive directories explicitly)",
                    root.display()
                )
            );
        }
        // An open backend refuses every access through the directory.
        assert_eq!(
            refused_dir(&backend.load_stored("s").await.unwrap_err()),
            want
        );
        assert_eq!(refused_dir(&backend.list().await.unwrap_err()), want);
        assert_eq!(refused_dir(&backend.read_raw("s").await.unwrap_err()), want);
        if *dir == session {
            // Writes to the session are refused too, and leave its log as it was.
            let next = turn_events(events.len() as u64, 2);
            let appended = backend
                .append_batch(&meta("s"), &next, false)
                .await
                .unwrap_err();
            assert_eq!(refused_dir(&appended), want);
            let fresh = JsonlBackend::open(config()).unwrap();
            assert_eq!(
                refused_dir(&fresh.acquire(&meta("s"), None).await.unwrap_err()),
                want
            );
            assert_eq!(std::fs::metadata(&log).unwrap().len(), len);
        }
        let fresh = JsonlBackend::open(config().allow_permissive_dirs(false));
        if let Ok(fresh) = fresh
            && *dir != session
        {
            let published = fresh
                .append_batch(&meta("t"), &events, false)
                .await
                .unwrap_err();
            assert_eq!(refused_dir(&published), want);
            assert!(fresh.log_path(&meta("t")).is_ok_and(|p| !p.exists()));
        }
        // The opt-out.
        let allowed = JsonlBackend::open(config().allow_permissive_dirs(true)).unwrap();
        assert_eq!(
            allowed
                .load_stored("s")
                .await
                .unwrap()
                .unwrap()
                .events
                .len(),
            events.len()
        );
        assert_eq!(allowed.list().await.unwrap().len(), 1);
        chmod(dir, 0o700);
    }
    assert!(backend.load_stored("s").await.unwrap().is_some());
    // A session directory that exists, permissive, before its session is published.
    let planted = backend.log_path(&meta("u")).unwrap();
    let planted_dir = planted.parent().unwrap().to_path_buf();
    std::fs::create_dir(&planted_dir).unwrap();
    chmod(&planted_dir, 0o777);
    let published = backend
        .append_batch(&meta("u"), &events, false)
        .await
        .unwrap_err();
    assert_eq!(refused_dir(&published), Some((planted_dir.clone(), 0o777)));
    assert!(!planted.exists());
    assert_eq!(std::fs::read_dir(&planted_dir).unwrap().count(), 0);
}

#[cfg(unix)]
#[tokio::test]
async fn a_log_read_in_place_outside_a_layout_is_never_written() {
    use session_persist::{Backend, TornMarker};
    let scratch = Scratch::new("in-place");
    let root = scratch.0.join("root");
    let backend = JsonlBackend::open(JsonlConfig::new(&root)).unwrap();
    let events = turn_events(0, 1);
    backend
        .append_batch(&meta("s"), &events, false)
        .await
        .unwrap();
    let elsewhere = scratch.0.join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    chmod(&elsewhere, 0o777);
    let file = elsewhere.join("session.jsonl.zstd");
    std::fs::copy(backend.log_path(&meta("s")).unwrap(), &file).unwrap();
    let bytes = std::fs::read(&file).unwrap();

    let in_place = JsonlBackend::open_file(&file, Compression::Zstd).unwrap();
    let stored = in_place.load_stored("s").await.unwrap().unwrap();
    assert_eq!(stored.events.len(), events.len());
    assert_eq!(in_place.log_path(&meta("s")).unwrap(), file);
    assert_eq!(in_place.list().await.unwrap().len(), 1);
    assert!(in_place.read_raw("s").await.unwrap().is_some());
    assert!(matches!(
        in_place.load_stored("other").await.unwrap_err(),
        Error::IdentityMismatch { .. }
    ));
    let more = turn_events(events.len() as u64, 2);
    let refused = [
        in_place
            .append_batch(&meta("s"), &more, true)
            .await
            .unwrap_err(),
        in_place
            .commit_repair(
                &meta("s"),
                Some(TornMarker::Truncate {
                    truncate_to: 1,
                    recovered: Vec::new(),
                }),
                &[],
            )
            .await
            .unwrap_err(),
        in_place.seal("s").await.unwrap_err(),
    ];
    for e in refused {
        assert!(
            matches!(&e, Error::ReadOnlyFile { path } if *path == file),
            "{e:?}"
        );
    }
    assert_eq!(std::fs::read(&file).unwrap(), bytes);
    let names: Vec<_> = std::fs::read_dir(&elsewhere)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["session.jsonl.zstd"]);
    chmod(&elsewhere, 0o700);
}
