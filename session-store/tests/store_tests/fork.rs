//! `SessionStore::fork` at store level: session-core §6.2 and §8.6 (items 135-148).
#![allow(clippy::unwrap_used)] // tests may unwrap

use crate::common::{json, plugin, seed_one_turn, store, turn_end, turn_start, user};
use session_core::json::Value;
use session_fork::ForkErrorCode;
use session_store::{Error, ForkSource, PrepareOptions, SessionStore, SharedSession};

fn fork_err(
    store: &SessionStore,
    source: ForkSource<'_>,
    boundary: Option<&Value>,
    child: Option<&str>,
) -> (ForkErrorCode, String) {
    let err = store.fork(source, boundary, child).unwrap_err();
    let fork = err.as_fork().expect("a SessionForkError");
    assert_eq!(fork.name(), "SessionForkError");
    (fork.code(), err.to_string())
}

fn with_cwd(store: &SessionStore, id: &str) -> SharedSession {
    store
        .create(
            Some(id),
            PrepareOptions {
                meta: Some(json(
                    r#"{"cwd":"/repo","origin":"subagent","delegationDepth":1}"#,
                )),
                ..PrepareOptions::default()
            },
        )
        .unwrap()
        .0
}

#[test]
// session-core §8.6 #135
fn forking_an_empty_source_gives_an_empty_child() {
    let store = store();
    let source = with_cwd(&store, "empty");
    let child = store
        .fork(ForkSource::Session(&source), None, Some("child"))
        .unwrap();
    assert!(store.is_live(&child));
    assert!(store.is_announced(&child));
    assert_eq!(
        child.header().to_value().to_json(),
        r#"{"version":0,"id":"child","createdAt":1767225600000,"cwd":"/repo","parentSession":"empty","seedLength":0}"#
    );
    let events: Vec<String> = child
        .events()
        .iter()
        .map(session_core::Event::to_json)
        .collect();
    assert_eq!(
        events,
        [r#"{"type":"session/end-seed","seq":0,"time":1767225600000,"data":{}}"#]
    );
    assert_eq!(child.first_live_seq(), 0);
}

#[test]
// session-core §8.6 #136, #137
fn a_default_fork_after_a_closed_turn_copies_everything() {
    let store = store();
    let source = with_cwd(&store, "src");
    source.append(turn_start(1)).unwrap();
    source.append(user("m1", "hello")).unwrap();
    source.append(turn_end(1)).unwrap();
    source.append(plugin(7)).unwrap();
    let child = store.fork(ForkSource::Id("src"), None, None).unwrap();
    assert_eq!(&*child.id(), "session-1");
    let header = child.header();
    assert_eq!(header.parent_session.as_deref(), Some("src"));
    assert_eq!(header.seed_length, Some(4));
    assert!(!header.origin_subagent, "origin is not inherited");
    assert_eq!(header.delegation_depth, None);
    assert_eq!(child.events().prefix(4), source.events());
    assert_eq!(child.seq(), 5);
    assert_eq!(child.first_live_seq(), 4);
    assert_eq!(
        child.derive_messages().to_vec(),
        source.derive_messages().to_vec()
    );
    // The child is independent: appends on it do not reach the source.
    child.append(plugin(8)).unwrap();
    assert_eq!(source.seq(), 4);
}

#[test]
// session-core §8.6 #138
fn a_fork_at_an_earlier_boundary_works_while_the_source_is_inside_a_turn() {
    let store = store();
    let (source, _d) = store
        .create(
            Some("open"),
            PrepareOptions {
                seed: Some(seed_one_turn()),
                ..PrepareOptions::default()
            },
        )
        .unwrap();
    source.append(turn_start(2)).unwrap();
    source.append(user("m2", "second")).unwrap();
    let (code, message) = fork_err(&store, ForkSource::Session(&source), None, None);
    assert_eq!(code, ForkErrorCode::OpenTurn);
    assert_eq!(
        message,
        r#"fork boundary 5 in session "open" ends inside open turn 2"#
    );
    let child = store
        .fork(ForkSource::Session(&source), Some(&Value::from(2u32)), None)
        .unwrap();
    assert_eq!(&*child.id(), "session-1", "a refused fork mints no id");
    assert_eq!(child.header().seed_length, Some(3));
    assert_eq!(child.derive_messages().len(), 1);
}

#[test]
// session-core §8.6 #141
fn invalid_boundaries_create_no_child() {
    let store = store();
    let source = with_cwd(&store, "empty");
    let (code, message) = fork_err(
        &store,
        ForkSource::Session(&source),
        Some(&Value::from(0u32)),
        Some("c"),
    );
    assert_eq!(code, ForkErrorCode::InvalidBoundary);
    assert_eq!(
        message,
        r#"fork boundary 0 does not exist in session "empty" (last seq: none)"#
    );
    for (boundary, shown) in [
        ("-1", "-1"),
        ("0.5", "0.5"),
        ("9007199254740992", "9007199254740992"),
        (r#""0""#, "0"),
    ] {
        let (code, message) = fork_err(
            &store,
            ForkSource::Session(&source),
            Some(&json(boundary)),
            Some("c"),
        );
        assert_eq!(code, ForkErrorCode::InvalidBoundary);
        assert_eq!(
            message,
            format!(
                r#"fork boundary for session "empty" must be a non-negative safe integer, got {shown}"#
            )
        );
    }
    source.append(plugin(1)).unwrap();
    let (_, message) = fork_err(
        &store,
        ForkSource::Session(&source),
        Some(&Value::from(1u32)),
        Some("c"),
    );
    assert_eq!(
        message,
        r#"fork boundary 1 does not exist in session "empty" (last seq: 0)"#
    );
    assert!(store.get("c").is_none());
    assert_eq!(store.list().len(), 1);
}

#[test]
// session-core §8.6 #143
fn an_unknown_source_id_is_not_found() {
    let store = store();
    let (code, message) = fork_err(&store, ForkSource::Id("missing"), None, None);
    assert_eq!(code, ForkErrorCode::SessionNotFound);
    assert_eq!(message, r#"session "missing" not found"#);
}

#[test]
// session-core §8.6 #144
fn a_detached_source_object_is_not_found() {
    let store = store();
    let (source, detach) = store
        .create(Some("det"), PrepareOptions::default())
        .unwrap();
    detach.detach();
    let (code, message) = fork_err(&store, ForkSource::Session(&source), None, None);
    assert_eq!(code, ForkErrorCode::SessionNotFound);
    assert_eq!(message, r#"session "det" not found"#);
}

#[test]
// session-core §8.6 #145
fn a_stale_source_object_whose_id_is_live_elsewhere_is_not_live() {
    let store = store();
    let stale = store
        .prepare(Some("dup"), PrepareOptions::default())
        .unwrap();
    let (_live, _d) = store
        .create(Some("dup"), PrepareOptions::default())
        .unwrap();
    let (code, message) = fork_err(&store, ForkSource::Session(&stale), None, None);
    assert_eq!(code, ForkErrorCode::SessionNotLive);
    assert_eq!(message, r#"session "dup" is not the live store instance"#);
}

#[test]
// session-core §8.6 #146
fn boundaries_inside_an_open_turn_are_refused() {
    let store = store();
    let (source, _d) = store.create(Some("t"), PrepareOptions::default()).unwrap();
    source.append(turn_start(1)).unwrap();
    source
        .append(session_surface::Draft::new(
            "step/start",
            json(r#"{"turn":1,"step":1}"#),
        ))
        .unwrap();
    source.append(user("m", "x")).unwrap();
    source.append(turn_end(1)).unwrap();
    for b in 0..3u32 {
        let (code, message) = fork_err(
            &store,
            ForkSource::Session(&source),
            Some(&Value::from(b)),
            None,
        );
        assert_eq!(code, ForkErrorCode::OpenTurn);
        assert_eq!(
            message,
            format!(r#"fork boundary {b} in session "t" ends inside open turn 1"#)
        );
    }
}

#[test]
// session-core §8.6 #147
fn a_live_child_id_is_refused() {
    let store = store();
    let (source, _d) = store.create(Some("s"), PrepareOptions::default()).unwrap();
    let (_other, _d2) = store
        .create(Some("taken"), PrepareOptions::default())
        .unwrap();
    let (code, message) = fork_err(&store, ForkSource::Session(&source), None, Some("taken"));
    assert_eq!(code, ForkErrorCode::SessionAlreadyExists);
    assert_eq!(message, r#"session "taken" already exists"#);
    // Forking onto the source's own id is the same case.
    let (code, _) = fork_err(&store, ForkSource::Session(&source), None, Some("s"));
    assert_eq!(code, ForkErrorCode::SessionAlreadyExists);
}

#[test]
// session-core §8.6 #148
fn a_duplicate_child_id_is_reported_before_the_source_and_boundary() {
    let store = store();
    let (source, _d) = store.create(Some("s"), PrepareOptions::default()).unwrap();
    source.append(turn_start(1)).unwrap();
    let (code, _) = fork_err(&store, ForkSource::Session(&source), None, Some("s"));
    assert_eq!(code, ForkErrorCode::SessionAlreadyExists);
    let (code, _) = fork_err(&store, ForkSource::Id("missing"), None, Some("s"));
    assert_eq!(code, ForkErrorCode::SessionAlreadyExists);
}

#[test]
// session-core §6.2 step 5 (errors from create propagate as plain errors)
fn a_creation_veto_propagates_as_a_plain_error() {
    let store = store();
    let (source, _d) = store.create(Some("s"), PrepareOptions::default()).unwrap();
    store.on_created(|s| {
        if s.header().parent_session.is_some() {
            Err("children refused".into())
        } else {
            Ok(())
        }
    });
    let err = store
        .fork(ForkSource::Session(&source), None, Some("kid"))
        .unwrap_err();
    assert!(err.as_fork().is_none());
    assert!(matches!(err, Error::Listener(_)));
    assert_eq!(err.to_string(), "children refused");
    assert!(store.get("kid").is_none());
}

#[test]
// session-core §6.2 (the child is detachable through the handle fork_owned returns)
fn fork_owned_returns_the_childs_detach() {
    let store = store();
    let (source, _d) = store.create(Some("s"), PrepareOptions::default()).unwrap();
    let (child, detach) = store
        .fork_owned(ForkSource::Session(&source), None, Some("kid"))
        .unwrap();
    assert!(store.is_live(&child));
    detach.detach();
    assert!(!store.is_live(&child));
}
