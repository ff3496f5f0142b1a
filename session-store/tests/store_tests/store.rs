//! `SessionStore` behaviour: session-core §8.2 (items 47-72) and the publication protocol of
//! §2.7.
#![allow(clippy::unwrap_used)] // tests may unwrap

use std::sync::{Arc, Mutex};

use crate::common::{
    Log, json, plugin, seed_one_turn, store, store_with_warnings, turn_start, user, user_message,
};
use session_core::json::Value;
use session_store::{
    BoxError, Detach, Dispatch, Error, PrepareOptions, SeedSource, SessionStore, SharedSession,
};
use session_surface::{Draft, Session};

fn boom(message: &str) -> BoxError {
    message.to_owned().into()
}

fn meta(text: &str) -> PrepareOptions {
    PrepareOptions {
        meta: Some(json(text)),
        ..PrepareOptions::default()
    }
}

/// Records `session/created`, `session/event` and `session/disposed` globally.
fn record(store: &SessionStore) -> Log {
    let log = Log::default();
    let l = log.clone();
    store.on_created(move |s| {
        l.push(format!("created:{}", s.id()));
        Ok(())
    });
    let l = log.clone();
    store.on_event(move |s, e| {
        l.push(format!("event:{}:{}:{}", s.id(), e.seq(), e.event_type()));
        Ok(())
    });
    let l = log.clone();
    store.on_disposed(move |s| {
        l.push(format!("disposed:{}", s.id()));
        Ok(())
    });
    log
}

#[test]
// session-core §8.2 #47
fn create_emits_created_and_each_append_emits_event() {
    let store = store();
    let log = record(&store);
    let (session, _detach) = store.create(Some("s1"), PrepareOptions::default()).unwrap();
    assert_eq!(log.take(), ["created:s1"]);
    session.append(turn_start(1)).unwrap();
    session.append(user("m1", "hello")).unwrap();
    assert_eq!(
        log.take(),
        ["event:s1:0:turn/start", "event:s1:1:user/message"]
    );
    assert!(store.get("s1").unwrap().ptr_eq(&session));
    assert!(store.get("missing").is_none());
    let (second, _d2) = store.create(None, PrepareOptions::default()).unwrap();
    assert_eq!(log.take(), ["created:session-1"]);
    let listed: Vec<_> = store.list().iter().map(SharedSession::id).collect();
    assert_eq!(listed, [session.id(), second.id()]);
    // Publication belongs to the store's attachment: nothing reachable on the session handle
    // other than the store's detach turns it off.
    session.set_warning_sink(Arc::new(|_| {}));
    session.append(plugin(1)).unwrap();
    assert_eq!(log.take(), ["event:s1:2:plugin/thing"]);
}

#[test]
// session-core §8.2 #48
fn duplicate_id_is_refused_and_a_seeded_create_derives_the_same_messages() {
    let store = store();
    let (source, _d) = store
        .create(Some("dup"), PrepareOptions::default())
        .unwrap();
    source.append(turn_start(1)).unwrap();
    source.append(user("m1", "hello")).unwrap();
    let err = store
        .create(Some("dup"), PrepareOptions::default())
        .unwrap_err();
    assert!(matches!(err, Error::AlreadyExists { .. }));
    assert_eq!(err.to_string(), r#"session "dup" already exists"#);

    let seed: Vec<Value> = source
        .events()
        .iter()
        .map(session_core::Event::to_value)
        .collect();
    let (copy, _d2) = store
        .create(
            Some("copy"),
            PrepareOptions {
                seed: Some(seed),
                ..PrepareOptions::default()
            },
        )
        .unwrap();
    assert_eq!(
        copy.derive_messages().to_vec(),
        source.derive_messages().to_vec()
    );
}

#[test]
// session-core §8.2 #49
fn entering_a_stale_prepared_session_whose_id_is_live_fails() {
    let store = store();
    let stale = store
        .prepare(Some("same"), PrepareOptions::default())
        .unwrap();
    let (live, _d) = store
        .create(Some("same"), PrepareOptions::default())
        .unwrap();
    live.append(plugin(1)).unwrap();
    let err = store.enter(&stale).unwrap_err();
    assert_eq!(err.to_string(), r#"session "same" already exists"#);
    assert!(store.get("same").unwrap().ptr_eq(&live));
    assert_eq!(live.seq(), 1);
    assert!(!store.is_live(&stale));
}

#[test]
// session-core §8.2 #50
fn prepare_enter_announce_and_detach_are_separate_steps() {
    let store = store();
    let log = record(&store);
    let session = store.prepare(Some("p"), PrepareOptions::default()).unwrap();
    assert!(store.get("p").is_none());
    assert!(store.list().is_empty());
    let detach = store.enter(&session).unwrap();
    assert!(store.get("p").is_some());
    assert!(log.get().is_empty(), "enter does not announce");
    store.announce(&session).unwrap();
    assert_eq!(log.take(), ["created:p"]);
    detach.detach();
    assert!(store.get("p").is_none());
    assert_eq!(log.take(), ["disposed:p"]);
    detach.detach();
    assert!(log.get().is_empty(), "a second detach does nothing");
    assert!(detach.is_used());
}

#[test]
// session-core §8.2 #51
fn one_object_cannot_be_entered_into_two_stores_at_once() {
    let first = store();
    let second = store();
    let session = first
        .prepare(Some("shared"), PrepareOptions::default())
        .unwrap();
    let detach = first.enter(&session).unwrap();
    let err = second.enter(&session).unwrap_err();
    assert!(matches!(err, Error::AlreadyAttached { .. }));
    assert_eq!(
        err.to_string(),
        r#"session "shared" is already attached to a store"#
    );
    assert!(second.get("shared").is_none());
    detach.detach();
    let detach2 = second.enter(&session).unwrap();
    assert!(second.is_live(&session));
    detach2.detach();
}

#[test]
// session-core §8.2 #51 (a dropped store releases its sessions' attachments)
fn dropping_a_store_releases_its_attachments() {
    let session = {
        let first = store();
        let session = first
            .prepare(Some("orphan"), PrepareOptions::default())
            .unwrap();
        let _detach = first.enter(&session).unwrap();
        session
    };
    let second = store();
    assert!(second.enter(&session).is_ok());
}

#[test]
// session-core §8.2 #52
fn repeated_announce_direct_or_reentrant_fails() {
    let store = store();
    let log = record(&store);
    let reentrant = Arc::new(Mutex::new(None::<String>));
    let r = reentrant.clone();
    let inner = store.clone();
    store.on_created(move |s| {
        *r.lock().unwrap() = inner.announce(s).err().map(|e| e.to_string());
        Ok(())
    });
    let session = store.prepare(Some("a"), PrepareOptions::default()).unwrap();
    let detach = store.enter(&session).unwrap();
    store.announce(&session).unwrap();
    assert_eq!(
        reentrant.lock().unwrap().as_deref(),
        Some(r#"session "a" was already announced"#)
    );
    let err = store.announce(&session).unwrap_err();
    assert!(matches!(err, Error::AlreadyAnnounced { .. }));
    assert_eq!(err.to_string(), r#"session "a" was already announced"#);
    detach.detach();
    assert_eq!(log.take(), ["created:a", "disposed:a"]);
}

#[test]
// session-core §8.2 #52 (announce needs the live entry)
fn announce_of_a_session_that_is_not_live_fails() {
    let store = store();
    let session = store.prepare(Some("n"), PrepareOptions::default()).unwrap();
    let err = store.announce(&session).unwrap_err();
    assert_eq!(err.to_string(), r#"session "n" is not live in this store"#);
    // An entry that now belongs to another object.
    let (_live, _d) = store.create(Some("n"), PrepareOptions::default()).unwrap();
    let err = store.announce(&session).unwrap_err();
    assert!(matches!(err, Error::NotLive { .. }));
}

#[test]
// session-core §8.2 #53
fn detach_requested_inside_a_created_listener_is_deferred() {
    let store = store();
    let log = Log::default();
    let slot: Arc<Mutex<Option<Detach>>> = Arc::default();
    let (l, s, st) = (log.clone(), slot.clone(), store.clone());
    store.on_created(move |session| {
        l.push("created:first");
        s.lock().unwrap().as_ref().unwrap().detach();
        l.push(format!("live-after-detach:{}", st.is_live(session)));
        Ok(())
    });
    let l = log.clone();
    store.on_created(move |_| {
        l.push("created:second");
        Ok(())
    });
    let l = log.clone();
    store.on_disposed(move |_| {
        l.push("disposed");
        Ok(())
    });
    let session = store.prepare(Some("d"), PrepareOptions::default()).unwrap();
    *slot.lock().unwrap() = Some(store.enter(&session).unwrap());
    store.announce(&session).unwrap();
    assert_eq!(
        log.take(),
        [
            "created:first",
            "live-after-detach:true",
            "created:second",
            "disposed"
        ]
    );
    assert!(!store.is_live(&session));
}

#[test]
// session-core §8.2 #54
fn disposing_the_owner_inside_created_rolls_the_creation_back() {
    let store = store();
    let owner = store.scope();
    let log = record(&store);
    let o = owner.clone();
    store.on_created(move |_| {
        o.dispose();
        Ok(())
    });
    let (session, detach) = owner
        .create(Some("owned"), PrepareOptions::default())
        .unwrap();
    assert_eq!(log.take(), ["created:owned", "disposed:owned"]);
    assert!(!store.is_live(&session));
    assert!(store.get("owned").is_none());
    detach.detach();
    assert!(log.get().is_empty());
    // Later appends still work but are not published.
    session.append(plugin(1)).unwrap();
    assert!(log.get().is_empty());
}

#[test]
// session-core §8.2 #55
fn a_bare_created_session_has_a_minimal_header() {
    let store = store();
    let (session, _d) = store
        .create(Some("bare"), PrepareOptions::default())
        .unwrap();
    let header = session.header();
    assert_eq!(
        header.to_value().to_json(),
        r#"{"version":0,"id":"bare","createdAt":1767225600000}"#
    );
    assert!(header.cwd.is_none());
    assert!(header.parent_session.is_none());
}

#[test]
// session-core §8.2 #56
fn meta_cwd_and_parent_session_are_copied() {
    let store = store();
    let (session, _d) = store
        .create(
            Some("m"),
            meta(r#"{"parentSession":"p","cwd":"/work","ignored":1}"#),
        )
        .unwrap();
    assert_eq!(
        session.header().to_value().to_json(),
        r#"{"version":0,"id":"m","createdAt":1767225600000,"cwd":"/work","parentSession":"p"}"#
    );
}

#[test]
// session-core §8.2 #57
fn meta_origin_and_delegation_depth_are_copied() {
    let store = store();
    let (session, _d) = store
        .create(
            Some("sub"),
            meta(r#"{"delegationDepth":2,"origin":"subagent","agentPreset":"x","createdAt":5}"#),
        )
        .unwrap();
    let header = session.header();
    assert!(header.origin_subagent);
    assert_eq!(header.delegation_depth, Some(2));
    assert_eq!(header.created_at, 5);
    assert_eq!(
        header.to_value().to_json(),
        r#"{"version":0,"id":"sub","createdAt":5,"origin":"subagent","delegationDepth":2,"agentPreset":"x"}"#
    );
}

#[test]
// session-core §8.2 #57 (createdAt null falls back to now)
fn meta_created_at_null_means_now() {
    let store = store();
    let (session, _d) = store
        .create(Some("n"), meta(r#"{"createdAt":null}"#))
        .unwrap();
    assert_eq!(session.header().created_at, 1_767_225_600_000);
}

#[test]
// session-core §8.2 #58
fn meta_rejections() {
    let cases: &[(&str, &str)] = &[
        (
            r#"{"parentSession":-0}"#,
            "session header is not losslessly JSON-serializable",
        ),
        (r#"{"cwd":1}"#, "session header cwd must be a string"),
        (
            r#"{"parentSession":1}"#,
            "session header parentSession must be a string",
        ),
        (
            r#"{"createdAt":"123"}"#,
            "session header createdAt must be a non-negative safe integer",
        ),
        (
            r#"{"createdAt":1.5}"#,
            "session header createdAt must be a non-negative safe integer",
        ),
        (
            r#"{"createdAt":-1}"#,
            "session header createdAt must be a non-negative safe integer",
        ),
        // Beyond the safe range: refused by the header snapshot (port decision 3) before the
        // createdAt rule is reached.
        (
            r#"{"createdAt":9007199254740992}"#,
            "session header is not losslessly JSON-serializable",
        ),
        (
            r#"{"seedLength":"1"}"#,
            "session header seedLength must be a non-negative safe integer",
        ),
        (
            r#"{"seedLength":0.5}"#,
            "session header seedLength must be a non-negative safe integer",
        ),
        (
            r#"{"seedLength":-1}"#,
            "session header seedLength must be a non-negative safe integer",
        ),
        (
            r#"{"origin":"fork"}"#,
            r#"session header origin must be "subagent""#,
        ),
        (
            r#"{"delegationDepth":"1"}"#,
            "session header delegationDepth must be a non-negative safe integer",
        ),
        (
            r#"{"delegationDepth":0.5}"#,
            "session header delegationDepth must be a non-negative safe integer",
        ),
        (
            r#"{"delegationDepth":-1}"#,
            "session header delegationDepth must be a non-negative safe integer",
        ),
        (
            r#"{"agentPreset":1}"#,
            "session header agentPreset must be a string",
        ),
        (r#"{"cwd":null}"#, "session header cwd must be a string"),
        ("[]", "session header is not a plain JSON record"),
    ];
    let store = store();
    for (meta_text, message) in cases {
        let err = store.create(Some("bad"), meta(meta_text)).unwrap_err();
        assert_eq!(&err.to_string(), message, "meta {meta_text}");
        assert!(store.get("bad").is_none());
    }
}

#[test]
// session-core §8.2 #59
fn a_relative_cwd_is_refused_and_nothing_is_registered() {
    let store = store();
    let log = record(&store);
    let err = store
        .create(Some("rel"), meta(r#"{"cwd":"relative/path"}"#))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"session header cwd must be an absolute path, got "relative/path""#
    );
    assert!(store.list().is_empty());
    assert!(log.get().is_empty());
}

#[test]
// session-core §8.2 #60
fn a_session_created_without_a_store_gets_a_version_0_header() {
    let session = Session::create("alone", None, None, crate::common::clock()).unwrap();
    assert_eq!(session.header().created_at, 1_767_225_600_000);
    assert_eq!(
        session
            .header()
            .to_value()
            .get("version")
            .and_then(Value::as_u64),
        Some(0)
    );
}

#[test]
// session-core §8.2 #61
fn after_detach_appends_work_but_are_not_observed() {
    let store = store();
    let log = record(&store);
    let (session, detach) = store
        .create(Some("gone"), PrepareOptions::default())
        .unwrap();
    detach.detach();
    log.take();
    assert!(store.get("gone").is_none());
    session.append(plugin(1)).unwrap();
    assert_eq!(session.seq(), 1);
    assert!(log.get().is_empty());
}

#[test]
// session-core §8.2 #62
fn a_throwing_created_listener_vetoes_create_and_disposes() {
    let store = store();
    let log = record(&store);
    let armed = Arc::new(Mutex::new(true));
    let a = armed.clone();
    store.on_created(move |_| {
        if *a.lock().unwrap() {
            Err(boom("creation refused"))
        } else {
            Ok(())
        }
    });
    let l = log.clone();
    store.on_created(move |_| {
        l.push("created:after");
        Ok(())
    });
    let err = store
        .create(Some("v"), PrepareOptions::default())
        .unwrap_err();
    assert!(matches!(err, Error::Listener(_)));
    assert_eq!(err.to_string(), "creation refused");
    assert_eq!(log.take(), ["created:v", "disposed:v"]);
    assert!(store.get("v").is_none());

    *armed.lock().unwrap() = false;
    let (session, _d) = store.create(Some("v"), PrepareOptions::default()).unwrap();
    session.append(plugin(1)).unwrap();
    assert_eq!(
        log.take(),
        ["created:v", "created:after", "event:v:0:plugin/thing"]
    );
}

#[test]
// session-core §8.2 #63
fn event_listener_failures_are_contained_with_exact_warnings() {
    let (store, warnings) = store_with_warnings();
    let log = Log::default();
    let l = log.clone();
    store.on_event(move |s, e| {
        // The event is committed before listeners run.
        l.push(format!("first:{}:{}", e.seq(), s.seq()));
        Err(boom("sync boom"))
    });
    store.on_event_async(|_, _| Box::pin(async { Err(boom("async boom")) }));
    let l = log.clone();
    store.on_event(move |_, e| {
        l.push(format!("last:{}", e.seq()));
        Ok(())
    });
    let (session, _d) = store.create(Some("w"), PrepareOptions::default()).unwrap();
    let event = session.append(plugin(1)).unwrap();
    assert_eq!(event.seq(), 0);
    assert_eq!(log.take(), ["first:0:1", "last:0"]);
    assert_eq!(
        warnings.take(),
        [
            r#"session "w": session/event listener threw: Error: sync boom"#,
            r#"session "w": session/event listener rejected: Error: async boom"#,
        ]
    );
    assert_eq!(session.seq(), 1);
}

#[test]
// session-core §8.2 #63 (a panicking listener is contained like a failing one)
fn a_panicking_event_listener_is_contained() {
    let (store, warnings) = store_with_warnings();
    let log = Log::default();
    store.on_event(|_, _| panic!("listener panicked"));
    let l = log.clone();
    store.on_event(move |_, _| {
        l.push("after");
        Ok(())
    });
    let (session, detach) = store.create(Some("p"), PrepareOptions::default()).unwrap();
    session.append(plugin(1)).unwrap();
    assert_eq!(log.take(), ["after"]);
    assert_eq!(
        warnings.take(),
        [r#"session "p": session/event listener threw: Error: listener panicked"#]
    );
    // The entry is not left in an appending state: detach is immediate.
    detach.detach();
    assert!(store.get("p").is_none());
}

#[test]
// session-core §8.2 #64
fn a_dispatch_veto_leaves_the_log_unchanged() {
    let store = store();
    let log = record(&store);
    let seen = Log::default();
    let s = seen.clone();
    let armed = Arc::new(Mutex::new(true));
    let a = armed.clone();
    store.on_dispatch(move |session, candidate| {
        s.push(format!(
            "{}:{}:{}",
            candidate.seq(),
            session.seq(),
            candidate.event_type()
        ));
        if *a.lock().unwrap() {
            Err(boom("vetoed"))
        } else {
            Ok(())
        }
    });
    let (session, _d) = store
        .create(Some("veto"), PrepareOptions::default())
        .unwrap();
    log.take();
    let err = session.append(plugin(1)).unwrap_err();
    assert_eq!(err.to_string(), "vetoed");
    assert_eq!(session.seq(), 0);
    assert!(log.get().is_empty(), "no listener runs on veto");
    *armed.lock().unwrap() = false;
    let event = session.append(plugin(2)).unwrap();
    assert_eq!(event.seq(), 0, "the next append reuses seq 0");
    assert_eq!(seen.take(), ["0:0:plugin/thing", "0:0:plugin/thing"]);
    assert_eq!(log.take(), ["event:veto:0:plugin/thing"]);
}

#[test]
// session-core §8.2 #65
fn a_vetoed_surface_replace_leaves_the_surface_unchanged() {
    let store = store();
    store.on_dispatch(|_, candidate| {
        if candidate.is_replacement_surface_event() {
            Err(boom("no replaces"))
        } else {
            Ok(())
        }
    });
    let (session, _d) = store.create(Some("r"), PrepareOptions::default()).unwrap();
    session.append(turn_start(1)).unwrap();
    session.append(plugin(1)).unwrap();
    session.append(user("m1", "hello")).unwrap();
    assert_eq!(session.surface_nodes().to_vec(), [2]);
    let replace = Draft::new("user/message", user_message("m2", "summary"))
        .replace_op(2, 2)
        .sources(&[2]);
    assert_eq!(
        session.append(replace).unwrap_err().to_string(),
        "no replaces"
    );
    assert_eq!(session.surface_nodes().to_vec(), [2]);
    assert_eq!(session.replace_generation(), 0);
    session.append(user("m3", "again")).unwrap();
    assert_eq!(session.surface_nodes().to_vec(), [2, 3]);
}

#[test]
// session-core §8.2 #66
fn a_failure_while_resolving_dispatch_propagates_and_commits_nothing() {
    let store = store();
    let log = record(&store);
    store.on_dispatch_any(|d| match d {
        Dispatch::Event { .. } => panic!("resolution failed"),
        _ => Ok(()),
    });
    let (session, detach) = store.create(Some("f"), PrepareOptions::default()).unwrap();
    log.take();
    let err = session.append(plugin(1)).unwrap_err();
    assert_eq!(err.to_string(), "resolution failed");
    assert_eq!(session.seq(), 0);
    assert!(log.get().is_empty());
    detach.detach();
    assert_eq!(log.take(), ["disposed:f"]);
}

#[test]
// session-core §8.2 #67
fn an_append_from_inside_an_observer_is_rejected_and_contained() {
    let (store, warnings) = store_with_warnings();
    let log = Log::default();
    store.on_event(|s, e| {
        if e.seq() == 0 {
            s.append(plugin(99))?;
        }
        Ok(())
    });
    let l = log.clone();
    store.on_event(move |_, e| {
        l.push(format!("later:{}", e.seq()));
        Ok(())
    });
    let (session, _d) = store.create(Some("re"), PrepareOptions::default()).unwrap();
    session.append(plugin(1)).unwrap();
    assert_eq!(session.seq(), 1);
    assert_eq!(log.take(), ["later:0"]);
    assert_eq!(
        warnings.take(),
        [
            r#"session "re": session/event listener threw: Error: session append cannot reenter while another append is being published"#
        ]
    );
}

#[test]
// session-core §8.2 #68
fn a_detach_requested_in_the_dispatch_phase_is_deferred() {
    let store = store();
    let log = Log::default();
    let slot: Arc<Mutex<Option<Detach>>> = Arc::default();
    let (l, s, st) = (log.clone(), slot.clone(), store.clone());
    store.on_dispatch(move |session, _| {
        if let Some(d) = s.lock().unwrap().take() {
            d.detach();
        }
        let live = st.get(session.id()).is_some();
        l.push(format!(
            "resolve:{}",
            if live { "live" } else { "detached" }
        ));
        Ok(())
    });
    let (l, st) = (log.clone(), store.clone());
    store.on_event(move |session, _| {
        let live = st.is_live(session);
        l.push(format!(
            "observe:{}",
            if live { "live" } else { "detached" }
        ));
        Ok(())
    });
    let (l, st) = (log.clone(), store.clone());
    store.on_disposed(move |session| {
        let live = st.is_live(session);
        l.push(format!(
            "dispose:{}",
            if live { "live" } else { "detached" }
        ));
        Ok(())
    });
    let (session, detach) = store.create(Some("dd"), PrepareOptions::default()).unwrap();
    *slot.lock().unwrap() = Some(detach);
    session.append(plugin(1)).unwrap();
    assert_eq!(
        log.take(),
        ["resolve:live", "observe:live", "dispose:detached"]
    );
    assert!(store.get("dd").is_none());
}

#[test]
// session-core §2.7 (a detach requested in a vetoed append still happens)
fn a_detach_requested_in_a_vetoed_append_still_happens() {
    let store = store();
    let log = record(&store);
    let slot: Arc<Mutex<Option<Detach>>> = Arc::default();
    let s = slot.clone();
    store.on_dispatch(move |_, _| {
        if let Some(d) = s.lock().unwrap().take() {
            d.detach();
        }
        Err(boom("vetoed"))
    });
    let (session, detach) = store.create(Some("vd"), PrepareOptions::default()).unwrap();
    log.take();
    *slot.lock().unwrap() = Some(detach);
    assert_eq!(session.append(plugin(1)).unwrap_err().to_string(), "vetoed");
    assert_eq!(session.seq(), 0);
    assert!(store.get("vd").is_none());
    assert_eq!(log.take(), ["disposed:vd"]);
}

#[test]
// session-core §2.7 (a detach requested by an event listener runs after the others)
fn a_detach_requested_by_an_event_listener_runs_after_all_listeners() {
    let store = store();
    let log = record(&store);
    let slot: Arc<Mutex<Option<Detach>>> = Arc::default();
    let s = slot.clone();
    store.on_event(move |_, _| {
        if let Some(d) = s.lock().unwrap().take() {
            d.detach();
        }
        Ok(())
    });
    let l = log.clone();
    store.on_event(move |_, _| {
        l.push("second listener");
        Ok(())
    });
    let (session, detach) = store.create(Some("el"), PrepareOptions::default()).unwrap();
    log.take();
    *slot.lock().unwrap() = Some(detach);
    session.append(plugin(1)).unwrap();
    assert_eq!(
        log.take(),
        ["event:el:0:plugin/thing", "second listener", "disposed:el"]
    );
    session.append(plugin(2)).unwrap();
    assert!(log.get().is_empty());
}

#[test]
// session-core §8.2 #69
fn an_async_created_rejection_is_logged_and_does_not_roll_back() {
    let (store, warnings) = store_with_warnings();
    let log = record(&store);
    store.on_created_async(|_| Box::pin(async { Err(boom("later")) }));
    let l = log.clone();
    store.on_created(move |_| {
        l.push("created:after");
        Ok(())
    });
    let (session, _d) = store.create(Some("ar"), PrepareOptions::default()).unwrap();
    assert!(store.is_live(&session));
    assert_eq!(log.take(), ["created:ar", "created:after"]);
    assert_eq!(
        warnings.take(),
        [r#"session "ar": session/created listener rejected: Error: later"#]
    );
}

#[test]
// session-core §8.2 #69 (a rejection that settles later, on the spawner's thread)
fn an_async_listener_that_settles_later_is_still_logged() {
    let (store, warnings) = store_with_warnings();
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let rx = Arc::new(Mutex::new(Some(rx)));
    store.on_created_async(move |_| {
        let rx = rx.lock().unwrap().take();
        Box::pin(async move {
            if let Some(rx) = rx {
                // Pending on the first poll, finished on another thread.
                YieldOnce(false).await;
                rx.recv().ok();
            }
            Err(boom("slow"))
        })
    });
    let (_session, _d) = store
        .create(Some("slow"), PrepareOptions::default())
        .unwrap();
    assert!(warnings.get().is_empty());
    tx.send(()).unwrap();
    for _ in 0..500 {
        if !warnings.get().is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    assert_eq!(
        warnings.take(),
        [r#"session "slow": session/created listener rejected: Error: slow"#]
    );
}

/// A future that is pending once.
struct YieldOnce(bool);

impl std::future::Future for YieldOnce {
    type Output = ();
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if self.0 {
            std::task::Poll::Ready(())
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    }
}

#[test]
// session-core §8.2 #70
fn disposed_listener_failures_are_contained() {
    let (store, warnings) = store_with_warnings();
    let log = Log::default();
    store.on_disposed(|_| Err(boom("sync dispose")));
    store.on_disposed_async(|_| Box::pin(async { Err(boom("async dispose")) }));
    let l = log.clone();
    store.on_disposed(move |s| {
        l.push(format!("disposed:{}", s.id()));
        Ok(())
    });
    let (_session, detach) = store.create(Some("dl"), PrepareOptions::default()).unwrap();
    detach.detach();
    assert_eq!(log.take(), ["disposed:dl"]);
    assert_eq!(
        warnings.take(),
        [
            r#"session "dl": session/disposed listener threw: Error: sync dispose"#,
            r#"session "dl": session/disposed listener rejected: Error: async dispose"#,
        ]
    );
    // Never announced: no disposed notification.
    let quiet = store
        .prepare(Some("quiet"), PrepareOptions::default())
        .unwrap();
    store.enter(&quiet).unwrap().detach();
    assert!(log.get().is_empty());
    assert!(warnings.get().is_empty());
}

#[test]
// session-core §8.2 #71
fn a_disposed_dispatch_failure_is_logged_and_the_detach_completes() {
    let (store, warnings) = store_with_warnings();
    let log = record(&store);
    store.on_dispatch_any(|d| match d {
        Dispatch::Disposed(_) => Err(boom("resolve failed")),
        _ => Ok(()),
    });
    let (session, detach) = store.create(Some("dt"), PrepareOptions::default()).unwrap();
    log.take();
    detach.detach();
    assert!(!store.is_live(&session));
    assert!(log.get().is_empty());
    assert_eq!(
        warnings.take(),
        [r#"session "dt": session/disposed dispatch threw: Error: resolve failed"#]
    );
}

#[test]
// session-core §8.2 #72 (JS: hooks cannot swap listener arguments; here they only get
// shared references, and listeners receive the disposed session itself)
fn dispatch_hooks_cannot_replace_disposed_arguments() {
    let store = store();
    let hooked: Arc<Mutex<Option<SharedSession>>> = Arc::default();
    let h = hooked.clone();
    store.on_dispatch_any(move |d| {
        if let Dispatch::Disposed(s) = d {
            *h.lock().unwrap() = Some((*s).clone());
        }
        Ok(())
    });
    let received: Arc<Mutex<Option<SharedSession>>> = Arc::default();
    let r = received.clone();
    store.on_disposed(move |s| {
        *r.lock().unwrap() = Some(s.clone());
        Ok(())
    });
    let (session, detach) = store
        .create(Some("args"), PrepareOptions::default())
        .unwrap();
    detach.detach();
    assert!(received.lock().unwrap().as_ref().unwrap().ptr_eq(&session));
    assert!(hooked.lock().unwrap().as_ref().unwrap().ptr_eq(&session));
}

#[test]
// session-core §6.1 (minted ids skip ids already in the store)
fn minted_ids_count_up_and_skip_live_ids() {
    let store = store();
    let (_a, _da) = store
        .create(Some("session-2"), PrepareOptions::default())
        .unwrap();
    let first = store.prepare(None, PrepareOptions::default()).unwrap();
    assert_eq!(&*first.id(), "session-1");
    let (second, _db) = store.create(None, PrepareOptions::default()).unwrap();
    assert_eq!(&*second.id(), "session-3");
    assert_eq!(
        &*store.prepare(None, PrepareOptions::default()).unwrap().id(),
        "session-4"
    );
}

#[test]
// session-core §6.1 (ids are not validated)
fn the_empty_id_is_accepted() {
    let store = store();
    let (session, _d) = store.create(Some(""), PrepareOptions::default()).unwrap();
    assert!(store.get("").unwrap().ptr_eq(&session));
}

#[test]
// session-core §6.1 (prepare with seedSource persistence uses the restore path)
fn prepare_from_persistence_restores_in_place() {
    let store = store();
    let header =
        json(r#"{"version":0,"id":"restored","createdAt":7,"cwd":"/w","delegationDepth":0}"#);
    let session = store
        .prepare(
            Some("restored"),
            PrepareOptions {
                seed: Some(seed_one_turn()),
                meta: Some(header.clone()),
                seed_source: SeedSource::Persistence,
                ..PrepareOptions::default()
            },
        )
        .unwrap();
    assert_eq!(session.header().to_value(), header);
    assert_eq!(session.first_live_seq(), 3);
    assert_eq!(session.seq(), 4);
    assert_eq!(
        session.event(3).unwrap().to_json(),
        r#"{"type":"session/end-seed","seq":3,"time":1767225600000,"data":{}}"#
    );
    // The restore path takes the header as given: a mismatching id is refused.
    let err = store
        .prepare(
            Some("other"),
            PrepareOptions {
                meta: Some(header),
                seed_source: SeedSource::Persistence,
                ..PrepareOptions::default()
            },
        )
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"session header id "restored" does not match session id "other""#
    );
    let err = store
        .prepare(
            Some("nohdr"),
            PrepareOptions {
                seed_source: SeedSource::Persistence,
                ..PrepareOptions::default()
            },
        )
        .unwrap_err();
    assert_eq!(err.to_string(), "session header is not a plain JSON record");
}

#[test]
// session-core §6.1 (an already-parsed seed is accepted like a raw one)
fn prepare_from_seed_events_matches_prepare_from_values() {
    let store = store();
    let raw = store
        .prepare(
            Some("raw"),
            PrepareOptions {
                seed: Some(seed_one_turn()),
                ..PrepareOptions::default()
            },
        )
        .unwrap();
    let parsed = store
        .prepare(
            Some("parsed"),
            PrepareOptions {
                seed_events: Some(raw.events().prefix(3)),
                ..PrepareOptions::default()
            },
        )
        .unwrap();
    assert_eq!(parsed.events(), raw.events());
    assert_eq!(parsed.first_live_seq(), 3);
}

#[test]
// session-core §6.1 (the store is Send + Sync and usable from several threads)
fn the_store_is_shared_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<SessionStore>();
    assert_send_sync::<Detach>();
    let store = store();
    let log = record(&store);
    let handles: Vec<_> = (0..4)
        .map(|i| {
            let store = store.clone();
            std::thread::spawn(move || {
                let (s, d) = store
                    .create(Some(&format!("t{i}")), PrepareOptions::default())
                    .unwrap();
                for n in 0..10 {
                    s.append(plugin(n)).unwrap();
                }
                d.detach();
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let entries = log.take();
    assert_eq!(entries.len(), 4 * 12);
    assert!(store.list().is_empty());
}

#[test]
// session-core §6.1 (detach through the store handle)
fn store_detach_detaches_the_live_instance_only() {
    let store = store();
    let log = record(&store);
    let stale = store.prepare(Some("x"), PrepareOptions::default()).unwrap();
    let (live, detach) = store.create(Some("x"), PrepareOptions::default()).unwrap();
    assert!(!store.detach(&stale));
    assert!(store.is_live(&live));
    assert!(store.detach(&live));
    assert!(!store.is_live(&live));
    assert_eq!(log.take(), ["created:x", "disposed:x"]);
    detach.detach();
    assert!(log.get().is_empty());
}

#[test]
// session-core §6.1 (unsubscribing stops a listener; dropping the subscription does not)
fn subscriptions_unsubscribe_explicitly() {
    let store = store();
    let log = Log::default();
    let l = log.clone();
    let kept = store.on_event(move |_, e| {
        l.push(format!("kept:{}", e.seq()));
        Ok(())
    });
    let l = log.clone();
    drop(store.on_event(move |_, e| {
        l.push(format!("dropped:{}", e.seq()));
        Ok(())
    }));
    let (session, _d) = store.create(Some("u"), PrepareOptions::default()).unwrap();
    session.append(plugin(0)).unwrap();
    kept.unsubscribe();
    kept.unsubscribe();
    session.append(plugin(1)).unwrap();
    assert_eq!(log.take(), ["kept:0", "dropped:0", "dropped:1"]);
}

/// An observer registered directly on a session (outside the store) that vetoes everything.
struct Vetoer;

impl session_surface::SessionObserver for Vetoer {
    fn dispatch(
        &self,
        _session: &Session,
        _candidate: &session_core::Event,
    ) -> Result<(), BoxError> {
        Err(boom("foreign veto"))
    }
}

#[test]
// session-core §2.7 (a veto by a later observer of the session still ends the append)
fn a_veto_by_another_observer_settles_the_append() {
    let store = store();
    let log = record(&store);
    let slot: Arc<Mutex<Option<Detach>>> = Arc::default();
    let s = slot.clone();
    store.on_dispatch(move |_, _| {
        if let Some(d) = s.lock().unwrap().take() {
            d.detach();
        }
        Ok(())
    });
    let (session, detach) = store.create(Some("fv"), PrepareOptions::default()).unwrap();
    let vetoer = session.observe(Arc::new(Vetoer));
    log.take();
    // Without a pending detach: the entry is not left appending.
    assert_eq!(
        session.append(plugin(1)).unwrap_err().to_string(),
        "foreign veto"
    );
    let second = detach.clone();
    // With a detach requested in the store's dispatch phase: it runs once the append is over.
    *slot.lock().unwrap() = Some(detach);
    assert_eq!(
        session.append(plugin(2)).unwrap_err().to_string(),
        "foreign veto"
    );
    assert!(store.get("fv").is_none());
    assert_eq!(log.take(), ["disposed:fv"]);
    second.detach();
    session.unobserve(vetoer);
    session.append(plugin(3)).unwrap();
    assert!(log.get().is_empty());
}

#[test]
// session-core §2.7 (the deferred disposal runs after the publication is released)
fn a_deferred_disposal_listener_may_append_unpublished() {
    let (store, warnings) = store_with_warnings();
    let log = record(&store);
    let slot: Arc<Mutex<Option<Detach>>> = Arc::default();
    let s = slot.clone();
    store.on_event(move |_, _| {
        if let Some(d) = s.lock().unwrap().take() {
            d.detach();
        }
        Ok(())
    });
    store.on_disposed(|session| {
        session.append(plugin(100))?;
        Ok(())
    });
    let (session, detach) = store
        .create(Some("late"), PrepareOptions::default())
        .unwrap();
    log.take();
    *slot.lock().unwrap() = Some(detach);
    session.append(plugin(1)).unwrap();
    assert_eq!(log.take(), ["event:late:0:plugin/thing", "disposed:late"]);
    assert!(warnings.get().is_empty());
    assert_eq!(session.seq(), 2);
}

#[test]
// session-core §8.2 #63 (an async listener whose future panics is contained as a rejection)
fn a_panicking_async_listener_is_contained_as_a_rejection() {
    let (store, warnings) = store_with_warnings();
    let log = Log::default();
    store.on_event_async(|_, _| Box::pin(async { panic!("async panicked") }));
    let l = log.clone();
    store.on_event(move |_, _| {
        l.push("after");
        Ok(())
    });
    let (session, _d) = store.create(Some("ap"), PrepareOptions::default()).unwrap();
    session.append(plugin(1)).unwrap();
    assert_eq!(log.take(), ["after"]);
    assert_eq!(
        warnings.take(),
        [r#"session "ap": session/event listener rejected: Error: async panicked"#]
    );
}
