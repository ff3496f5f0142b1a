//! The coordinator contract (spec §7.2, `runCoordinatorContract`): live sessions written
//! through a `SessionStore`, adoption and collision rules, legacy logs, refusals. Run against
//! the memory backend and the JSONL backend in raw and zstd modes.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

mod coord;

use coord::*;
use session_core::Event;
use session_persist::Persistence;
use session_store::{ForkSource, PrepareOptions, SessionStore};

fn svc(env: &Env, store: &SessionStore) -> Persistence {
    service(env.backend(), store).0
}

fn legacy_message_log() -> Vec<Event> {
    vec![
        ev(r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#),
        ev(r#"{"type":"step/start","seq":1,"time":1,"data":{"turn":1,"step":1}}"#),
        ev(
            r#"{"type":"user/message","seq":2,"time":1,"surfaceOp":"append","data":{"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}}}"#,
        ),
        ev(
            r#"{"type":"assistant/message","seq":3,"time":1,"surfaceOp":"append","data":{"turn":1,"step":1,"content":[{"type":"tool-call","id":"c1","name":"bash","arguments":{}}],"provenance":{"provider":"p","model":"m"}}}"#,
        ),
        ev(r#"{"type":"tool/call","seq":4,"time":1,"data":{"turn":1,"step":1,"callId":"c1"}}"#),
        ev(
            r#"{"type":"tool/result","seq":5,"time":1,"surfaceOp":"append","sourceEventSeqs":[4],"data":{"turn":1,"step":1,"callId":"c1","content":[{"type":"text","text":"out"}],"isError":false}}"#,
        ),
        ev(
            r#"{"type":"tool/result","seq":6,"time":1,"surfaceOp":{"op":"replace","start":5,"end":5},"sourceEventSeqs":[5],"data":{"turn":1,"step":1,"callId":"c1","content":[{"type":"text","text":"pruned"}],"isError":false}}"#,
        ),
        ev(r#"{"type":"step/end","seq":7,"time":1,"data":{"turn":1,"step":1}}"#),
        ev(
            r#"{"type":"turn/end","seq":8,"time":1,"data":{"turn":1,"reason":{"kind":"completed"}}}"#,
        ),
    ]
}

fn message_id(e: &Event) -> String {
    let data = e.data();
    let m = if e.event_type() == "user/message" {
        data
    } else {
        data.get("message").unwrap()
    };
    m.get("id").unwrap().as_str().unwrap().to_owned()
}

fn pre_react_loop_log() -> Vec<Event> {
    vec![
        ev(r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1,"trigger":{"kind":"user"}}}"#),
        ev(
            r#"{"type":"steering/message","seq":1,"time":1,"surfaceOp":"append","data":{"turn":1,"message":{"id":"m1","role":"user","content":[],"source":{"kind":"user"}}}}"#,
        ),
        ev(
            r#"{"type":"turn/end","seq":2,"time":1,"data":{"turn":1,"reason":{"kind":"error","step":0,"message":"boom"}}}"#,
        ),
        ev(
            r#"{"type":"turn/start","seq":3,"time":1,"data":{"turn":2,"trigger":{"kind":"steering"}}}"#,
        ),
        ev(
            r#"{"type":"steering/message","seq":4,"time":1,"surfaceOp":"append","data":{"turn":2,"content":[{"type":"text","text":"flat"}],"source":{"kind":"user"}}}"#,
        ),
        ev(r#"{"type":"turn/end","seq":5,"time":1,"data":{"turn":2,"reason":{"kind":"aborted"}}}"#),
        ev(r#"{"type":"turn/start","seq":6,"time":1,"data":{"turn":3}}"#),
        ev(
            r#"{"type":"turn/end","seq":7,"time":1,"data":{"turn":3,"reason":{"kind":"disposed"}}}"#,
        ),
        ev(r#"{"type":"turn/start","seq":8,"time":1,"data":{"turn":4}}"#),
        ev(
            r#"{"type":"turn/end","seq":9,"time":1,"data":{"turn":4,"reason":{"kind":"error","step":1,"message":"m","code":"E"}}}"#,
        ),
        ev(r#"{"type":"turn/start","seq":10,"time":1,"data":{"turn":5}}"#),
        ev(
            r#"{"type":"turn/end","seq":11,"time":1,"data":{"turn":5,"reason":{"kind":"error","step":1,"failure":{"message":"f","code":"RATE","status":429,"requestId":"r"}}}}"#,
        ),
        ev(r#"{"type":"turn/start","seq":12,"time":1,"data":{"turn":6}}"#),
        ev(
            r#"{"type":"turn/end","seq":13,"time":1,"data":{"turn":6,"reason":{"kind":"brand-new","detail":1}}}"#,
        ),
    ]
}

macro_rules! coordinator_suite {
    ($module:ident, $kind:expr) => {
        mod $module {
            use super::*;

            // persistence §7.2 #1
            #[tokio::test]
            async fn live_session_flushed_then_loaded() {
                let env = Env::new($kind);
                let store = store();
                let p = svc(&env, &store);
                let (session, detach) = live(&store, "c1", Some("/proj"));
                complete_turn(&session, 1);
                assert!(store.flush(&session).await.unwrap());
                detach.detach();
                let loaded = p.load("c1").await.unwrap();
                assert_eq!(loaded.events.len(), 6);
                assert_eq!(loaded.meta.cwd.as_deref(), Some("/proj"));
                p.dispose().await.unwrap();
                let fresh = svc(&env, &coord::store()).load("c1").await.unwrap();
                assert_eq!(fresh.events, loaded.events);
            }

            // persistence §7.2 #2
            #[tokio::test]
            async fn load_rejects_a_live_open_turn_until_it_closes() {
                let env = Env::new($kind);
                let store = store();
                let p = svc(&env, &store);
                let (session, detach) = live(&store, "c2", Some("/proj"));
                session.append(turn_start(1)).unwrap();
                assert_eq!(
                    p.load("c2").await.unwrap_err().to_string(),
                    r#"cannot load session "c2" while its live turn is open; use the live Session or wait for the turn to close"#
                );
                session.append(turn_end(1)).unwrap();
                detach.detach();
                let loaded = p.load("c2").await.unwrap();
                assert_eq!(types(loaded.events.iter().cloned()), ["turn/start", "turn/end"]);
            }

            // persistence §7.2 #3
            #[tokio::test]
            async fn cold_load_racing_a_live_creation_sees_the_live_session() {
                let env = Env::new($kind);
                let m = meta("c3");
                let start = ev(r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#);
                env.seed_log(&m, None, std::slice::from_ref(&start));
                let store = store();
                let p = svc(&env, &store);
                let loading = {
                    let p = p.clone();
                    tokio::spawn(async move { p.load("c3").await })
                };
                // Created before the queued load runs.
                let (session, detach) = live_seeded(&store, "c3", Some("/proj"), &[start]);
                assert_eq!(
                    loading.await.unwrap().unwrap_err().to_string(),
                    r#"cannot load session "c3" while its live turn is open; use the live Session or wait for the turn to close"#
                );
                session.append(turn_end(1)).unwrap();
                let loaded = p.load("c3").await.unwrap();
                assert_eq!(
                    types(loaded.events.iter().cloned()),
                    ["turn/start", "session/end-seed", "turn/end"]
                );
                detach.detach();
            }

            // persistence §7.2 #4
            #[tokio::test]
            async fn an_empty_unmaterialized_live_session_is_not_found() {
                let env = Env::new($kind);
                let store = store();
                let p = svc(&env, &store);
                let (_session, detach) = live(&store, "c4", Some("/proj"));
                assert_eq!(p.load("c4").await.unwrap_err().to_string(), r#"session "c4" not found"#);
                detach.detach();
            }

            // persistence §7.2 #5, #6, #38
            #[tokio::test]
            async fn header_fields_round_trip() {
                let env = Env::new($kind);
                let store = store();
                let p = svc(&env, &store);
                let seed = turn_events(0, 1);
                let (session, detach) = store
                    .create(
                        Some("c5"),
                        PrepareOptions {
                            seed: Some(seed[..3].iter().map(Event::to_value).collect()),
                            meta: Some(v(
                                r#"{"cwd":"/proj","parentSession":"parent-1","seedLength":3,"delegationDepth":2}"#,
                            )),
                            ..PrepareOptions::default()
                        },
                    )
                    .unwrap();
                store.flush(&session).await.unwrap();
                detach.detach();
                p.dispose().await.unwrap();
                let loaded = svc(&env, &coord::store()).load("c5").await.unwrap();
                assert_eq!(loaded.meta.seed_length, Some(3));
                assert_eq!(loaded.meta.delegation_depth, Some(2));
                assert_eq!(loaded.meta.parent_session.as_deref(), Some("parent-1"));
            }

            // persistence §7.2 #7 (events are immutable values: what was appended is what is stored)
            #[tokio::test]
            async fn source_events_persist_as_appended() {
                let env = Env::new($kind);
                let store = store();
                let p = svc(&env, &store);
                let (session, detach) = live(&store, "c7", Some("/proj"));
                let appended = session.append(user("u1", "original")).unwrap();
                store.flush(&session).await.unwrap();
                detach.detach();
                p.dispose().await.unwrap();
                let stored = env.stored("c7").await;
                assert_eq!(stored[0].to_json(), appended.to_json());
                assert!(stored[0].to_json().contains("original"));
            }

            // persistence §7.2 #9
            #[tokio::test]
            async fn pre_identity_messages_get_legacy_ids() {
                let env = Env::new($kind);
                env.seed_log(&meta("c9"), None, &legacy_message_log());
                let store = store();
                let p = svc(&env, &store);
                let inspected = p.inspect("c9", None).await.unwrap();
                let ids: Vec<String> = [2, 3, 5, 6]
                    .iter()
                    .map(|&i| message_id(inspected.events.get(i).unwrap()))
                    .collect();
                assert_eq!(
                    ids,
                    [
                        "legacy-message:c9:2",
                        "legacy-message:c9:3",
                        "legacy-message:c9:5",
                        "legacy-message:c9:5"
                    ]
                );
                let suffix = p.read_from("c9", 6, None).await.unwrap();
                assert_eq!(message_id(&suffix.events[0]), "legacy-message:c9:5");
                let prep = p.prepare("c9", None).await.unwrap();
                let detach = store.enter(prep.session()).unwrap();
                store.announce(prep.session()).unwrap();
                assert_eq!(prep.session().seq(), 10);
                detach.detach();
            }

            // persistence §7.2 #10
            #[tokio::test]
            async fn pre_react_loop_logs_are_upgraded_consistently() {
                let env = Env::new($kind);
                env.seed_log(&meta("c10"), None, &pre_react_loop_log());
                let store = store();
                let p = svc(&env, &store);
                let inspected = p.inspect("c10", None).await.unwrap();
                let read = p.read_from("c10", 0, None).await.unwrap();
                assert_eq!(inspected.events.to_vec(), read.events);
                let e = inspected.events.to_vec();
                assert_eq!(e[0].data().to_json(), r#"{"turn":1}"#);
                assert_eq!(e[1].event_type(), "user/message");
                assert_eq!(message_id(&e[1]), "m1");
                assert_eq!(
                    e[2].data().to_json(),
                    r#"{"turn":1,"reason":{"kind":"error","error":{"message":"boom","code":"UNKNOWN"}}}"#
                );
                assert_eq!(
                    e[4].data().to_json(),
                    r#"{"content":[{"type":"text","text":"flat"}],"source":{"kind":"user"},"id":"legacy-message:c10:4","role":"user"}"#
                );
                assert_eq!(e[5].data().to_json(), r#"{"turn":2,"reason":{"kind":"aborted","reason":{"kind":"legacy"}}}"#);
                assert_eq!(e[7].data().to_json(), r#"{"turn":3,"reason":{"kind":"aborted","reason":{"kind":"disposed"}}}"#);
                assert_eq!(
                    e[9].data().to_json(),
                    r#"{"turn":4,"reason":{"kind":"error","error":{"message":"m","code":"E"}}}"#
                );
                assert_eq!(
                    e[11].data().to_json(),
                    r#"{"turn":5,"reason":{"kind":"error","error":{"message":"f","code":"RATE","status":429,"requestId":"r"}}}"#
                );
                assert_eq!(e[13].data().to_json(), r#"{"turn":6,"reason":{"kind":"brand-new","detail":1}}"#);
                let loaded = p.load("c10").await.unwrap();
                assert_eq!(loaded.events.to_vec(), e);
            }

            // persistence §7.2 #11
            #[tokio::test]
            async fn malformed_persisted_events_reject() {
                let env = Env::new($kind);
                let store = store();
                let p = svc(&env, &store);
                let wrong_role = ev(r#"{"type":"user/message","seq":0,"time":1,"surfaceOp":"append","data":{"id":"m","role":"assistant","content":[],"source":{"kind":"user"}}}"#);
                env.seed_log(&meta("role"), None, &[wrong_role]);
                for err in [
                    p.inspect("role", None).await.unwrap_err(),
                    p.load("role").await.unwrap_err(),
                ] {
                    assert_eq!(err.name(), "SessionPersistenceCorruptionError");
                    assert!(err.to_string().contains(r#"message must have role "user""#), "{err}");
                    assert!(err.to_string().starts_with(r#"stored session "role" failed validation: Error: "#), "{err}");
                }
                let malformed = [
                    ("old-turn-start", r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1,"trigger":null}}"#, "malformed pre-react-loop turn/start"),
                    ("old-steering", r#"{"type":"steering/message","seq":0,"time":1,"surfaceOp":"append","data":{"turn":1,"content":[],"source":{"kind":"user"},"extra":true}}"#, "malformed pre-react-loop steering/message"),
                    ("old-steering-data", r#"{"type":"steering/message","seq":0,"time":1,"surfaceOp":"append","data":null}"#, "malformed pre-react-loop steering/message"),
                    ("old-turn-end", r#"{"type":"turn/end","seq":0,"time":1,"data":{"turn":1,"step":0,"reason":{"kind":"completed"}}}"#, "malformed pre-react-loop turn/end"),
                    ("null-result", r#"{"type":"tool/result","seq":0,"time":1,"surfaceOp":"append","data":{"message":null}}"#, "lacks an identified message"),
                ];
                for (id, line, text) in malformed {
                    env.seed_log(&meta(id), None, &[ev(line)]);
                    let inspect = p.inspect(id, None).await.unwrap_err().to_string();
                    let read = p.read_from(id, 0, None).await.unwrap_err().to_string();
                    assert!(inspect.contains(text), "{inspect}");
                    assert!(read.contains(text), "{read}");
                }
                for (id, ty) in [("empty-user", "user/message"), ("empty-assistant", "assistant/message")] {
                    env.seed_log(&meta(id), None, &[ev(&format!(r#"{{"type":"{ty}","seq":0,"time":1,"surfaceOp":"append","data":{{}}}}"#))]);
                    let read = p.read_from(id, 0, None).await.unwrap_err().to_string();
                    assert!(read.contains("lacks an identified message"), "{read}");
                }
                env.seed_log(&meta("plugin"), None, &[ev(r#"{"type":"plugin/thing","seq":0,"time":1,"data":null,"ignorable":true}"#)]);
                assert_eq!(p.inspect("plugin", None).await.unwrap().events.len(), 1);
            }

            // persistence §7.2 #12 (the batch is copied when `append` is called)
            #[tokio::test]
            async fn append_snapshots_the_batch() {
                let env = Env::new($kind);
                let p = svc(&env, &store());
                p.create(&meta("c12")).await.unwrap();
                let mut batch = turn_events(0, 1);
                let pending = {
                    let (p, batch) = (p.clone(), batch.clone());
                    tokio::spawn(async move { p.append("c12", &batch).await })
                };
                batch.push(ev(r#"{"type":"user/message","seq":6,"time":1,"data":"MUTATED"}"#));
                batch.truncate(1);
                pending.await.unwrap().unwrap();
                let read = p.read_from("c12", 0, None).await.unwrap();
                assert_eq!(seqs(read.events.iter().cloned()), (0..6).collect::<Vec<_>>());
                assert!(!read.events.iter().any(|e| e.to_json().contains("MUTATED")));
            }

            // persistence §7.2 #13
            #[tokio::test]
            async fn a_fork_persists_its_seed_and_end_seed_once() {
                let env = Env::new($kind);
                let store = store();
                let p = svc(&env, &store);
                let (parent, parent_detach) = live(&store, "parent", Some("/proj"));
                complete_turn(&parent, 1);
                let child = store
                    .fork(ForkSource::Session(&parent), None, Some("child"))
                    .unwrap();
                assert!(store.flush(&child).await.unwrap());
                let stored = env.stored("child").await;
                assert_eq!(stored.len(), 7);
                assert_eq!(stored[6].event_type(), "session/end-seed");
                assert!(store.flush(&child).await.unwrap());
                assert_eq!(env.stored("child").await.len(), 7, "not written twice");
                let listed = p.list(None).await.unwrap();
                let header = listed.iter().find(|h| &*h.id == "child").unwrap();
                assert_eq!(header.parent_session.as_deref(), Some("parent"));
                assert_eq!(header.seed_length, Some(6));
                parent_detach.detach();
                store.detach(&child);
            }

            // persistence §7.2 #14
            #[tokio::test]
            async fn resume_on_a_second_backend_does_not_re_append() {
                let env = Env::new($kind);
                let store_a = store();
                let a = svc(&env, &store_a);
                let (s, d) = live(&store_a, "c14", Some("/proj"));
                complete_turn(&s, 1);
                store_a.flush(&s).await.unwrap();
                d.detach();
                a.dispose().await.unwrap();

                let store_b = coord::store();
                let b = svc(&env, &store_b);
                let loaded = b.load("c14").await.unwrap();
                let (resumed, d) = live_seeded(&store_b, "c14", Some("/proj"), &loaded.events.to_vec());
                resumed.append(turn_start(2)).unwrap();
                resumed.append(turn_end(2)).unwrap();
                store_b.flush(&resumed).await.unwrap();
                let stored = env.stored("c14").await;
                assert_eq!(seqs(stored.iter().cloned()), (0..9).collect::<Vec<_>>());
                assert_eq!(stored[6].event_type(), "session/end-seed");
                d.detach();
            }

            // persistence §7.2 #15
            #[tokio::test]
            async fn a_service_built_after_the_session_exists_still_persists_it() {
                let env = Env::new($kind);
                let store = store();
                let (session, detach) = live(&store, "c15", Some("/proj"));
                complete_turn(&session, 1);
                let p = svc(&env, &store);
                assert!(store.flush(&session).await.unwrap());
                assert_eq!(env.stored("c15").await.len(), 6, "the current log is its seed");
                session.append(turn_start(2)).unwrap();
                store.flush(&session).await.unwrap();
                let stored = env.stored("c15").await;
                assert_eq!(seqs(stored.iter().cloned()), (0..7).collect::<Vec<_>>());
                detach.detach();
                drop(p);
            }

            // persistence §7.2 #16
            #[tokio::test]
            async fn disposing_the_service_drains_unflushed_buffers() {
                let env = Env::new($kind);
                let store = store();
                let p = svc(&env, &store);
                let (session, detach) = live(&store, "c16", Some("/proj"));
                complete_turn(&session, 1);
                p.dispose().await.unwrap();
                let read = svc(&env, &coord::store()).read_from("c16", 0, None).await.unwrap();
                assert_eq!(read.events.len(), 6);
                detach.detach();
            }

            // persistence §7.2 #17
            #[tokio::test]
            async fn a_reloaded_service_adopts_a_live_materialized_session() {
                let env = Env::new($kind);
                let store = store();
                let p1 = svc(&env, &store);
                let (session, detach) = live(&store, "c17", Some("/proj"));
                complete_turn(&session, 1);
                store.flush(&session).await.unwrap();
                p1.dispose().await.unwrap();
                let p2 = svc(&env, &store);
                complete_turn(&session, 2);
                store.flush(&session).await.unwrap();
                assert_eq!(env.stored("c17").await.len(), 12);
                detach.detach();
                drop(p2);
            }

            // persistence §7.2 #18
            #[tokio::test]
            async fn adoption_persists_the_live_suffix_ahead_of_storage() {
                let env = Env::new($kind);
                let store = store();
                let p1 = svc(&env, &store);
                let (session, detach) = live(&store, "c18", Some("/proj"));
                session.append(turn_start(1)).unwrap();
                session.append(step_start(1, 1)).unwrap();
                store.flush(&session).await.unwrap();
                p1.dispose().await.unwrap();
                session.append(step_end(1, 1)).unwrap();
                session.append(turn_end(1)).unwrap();
                let _p2 = svc(&env, &store);
                store.flush(&session).await.unwrap();
                assert_eq!(seqs(env.stored("c18").await), [0, 1, 2, 3]);
                detach.detach();
            }

            // persistence §7.2 #19
            #[tokio::test]
            async fn adoption_over_an_open_turn_truncates_a_torn_tail_without_closers() {
                let env = Env::new($kind);
                let store = store();
                let p1 = svc(&env, &store);
                let (session, detach) = live(&store, "c19", Some("/proj"));
                session.append(turn_start(1)).unwrap();
                session.append(step_start(1, 1)).unwrap();
                store.flush(&session).await.unwrap();
                p1.dispose().await.unwrap();
                let header = session.header();
                let torn = env.corrupt_tail(&header, 2);
                if let Some(memory) = env.memory() {
                    assert!(!torn, "the memory backend never tears");
                    assert!(memory.stored_events("c19").is_some());
                }
                let _p2 = svc(&env, &store);
                store.flush(&session).await.unwrap();
                session.append(step_end(1, 1)).unwrap();
                session.append(turn_end(1)).unwrap();
                store.flush(&session).await.unwrap();
                let stored = env.stored("c19").await;
                assert_eq!(types(stored.clone()), ["turn/start", "step/start", "step/end", "turn/end"]);
                assert_eq!(stored[3].data().to_json(), r#"{"turn":1,"reason":{"kind":"completed"}}"#);
                detach.detach();
            }

            // persistence §7.2 #20
            #[tokio::test]
            async fn a_new_live_session_colliding_with_a_persisted_id_rejects_on_flush() {
                let env = Env::new($kind);
                env.seed_log(&meta("c20"), None, &turn_events(0, 1));
                let store = store();
                let _p = svc(&env, &store);
                let (session, detach) = live(&store, "c20", Some("/proj"));
                session.append(turn_start(1)).unwrap();
                let err = store.flush(&session).await.unwrap_err().to_string();
                assert!(err.contains("already has a persisted log") && err.contains("id collision"), "{err}");
                assert_eq!(env.stored("c20").await.len(), 6);
                detach.detach();
            }

            // persistence §7.2 #21
            #[tokio::test]
            async fn an_abandoned_lazy_id_can_be_reused() {
                let env = Env::new($kind);
                let store = store();
                let p = svc(&env, &store);
                let (_first, detach) = live(&store, "c21", Some("/proj"));
                detach.detach();
                let (second, detach) = live(&store, "c21", Some("/proj"));
                second.append(turn_start(1)).unwrap();
                second.append(turn_end(1)).unwrap();
                assert!(store.flush(&second).await.unwrap());
                assert_eq!(seqs(env.stored("c21").await), [0, 1]);
                detach.detach();
                drop(p);
            }

            // persistence §7.2 #22
            #[tokio::test]
            async fn disposal_drains_before_releasing_ownership() {
                let env = Env::new($kind);
                let store = store();
                let p = svc(&env, &store);
                let (first, detach) = live(&store, "c22", Some("/proj"));
                first.append(turn_start(1)).unwrap();
                first.append(turn_end(1)).unwrap();
                detach.detach();
                // The retirement drains the buffer; a read waits for it.
                assert_eq!(p.read_from("c22", 0, None).await.unwrap().events.len(), 2);
                let (second, detach) = live(&store, "c22", Some("/proj"));
                let err = store.flush(&second).await.unwrap_err().to_string();
                assert!(err.contains("id collision"), "{err}");
                detach.detach();
            }

            // persistence §7.2 #23 (re-running initialization for the same session is idempotent)
            #[tokio::test]
            async fn repeated_initialization_is_idempotent() {
                let env = Env::new($kind);
                let store = store();
                let p = svc(&env, &store);
                let (session, detach) = live(&store, "c23", Some("/proj"));
                session.append(turn_start(1)).unwrap();
                session.append(step_start(1, 1)).unwrap();
                session.append(step_end(1, 1)).unwrap();
                for _ in 0..3 {
                    p.flush(&session).await.unwrap();
                }
                let again = svc(&env, &store);
                store.flush(&session).await.unwrap();
                assert_eq!(seqs(env.stored("c23").await), [0, 1, 2]);
                assert_eq!(p.live_sessions(), 1);
                detach.detach();
                drop(again);
            }

            // persistence §7.2 #24
            #[tokio::test]
            async fn a_live_session_claims_cursor_zero_ownerless_state() {
                let env = Env::new($kind);
                let store = store();
                let p = svc(&env, &store);
                p.create(&meta("c24")).await.unwrap();
                let (session, detach) = live_seeded(&store, "c24", Some("/proj"), &turn_events(0, 1));
                store.flush(&session).await.unwrap();
                let stored = env.stored("c24").await;
                assert_eq!(seqs(stored.clone()), (0..7).collect::<Vec<_>>());
                assert_eq!(stored[6].event_type(), "session/end-seed");
                detach.detach();
            }

            // persistence §7.2 #25
            #[tokio::test]
            async fn an_empty_live_session_reusing_a_loaded_id_collides() {
                let env = Env::new($kind);
                env.seed_log(&meta("c25"), None, &turn_events(0, 1));
                let store = store();
                let p = svc(&env, &store);
                p.load("c25").await.unwrap();
                let (session, detach) = live(&store, "c25", Some("/proj"));
                assert_eq!(
                    store.flush(&session).await.unwrap_err().to_string(),
                    r#"session "c25" is already persisted with 6 event(s) that do not match this live session (id collision)"#
                );
                detach.detach();
            }

            // persistence §7.2 #26
            #[tokio::test]
            async fn a_seed_equal_to_the_loaded_log_claims_it() {
                let env = Env::new($kind);
                env.seed_log(&meta("c26"), None, &turn_events(0, 1));
                let store = store();
                let p = svc(&env, &store);
                let loaded = p.load("c26").await.unwrap();
                let (session, detach) = live_seeded(&store, "c26", Some("/proj"), &loaded.events.to_vec());
                store.flush(&session).await.unwrap();
                let stored = env.stored("c26").await;
                assert_eq!(stored.len(), 7, "only the construction marker is added");
                assert_eq!(stored[..6].to_vec(), loaded.events.to_vec());
                detach.detach();
            }

            // persistence §7.2 #27
            #[tokio::test]
            async fn a_superset_seed_claims_and_persists_its_suffix() {
                let env = Env::new($kind);
                env.seed_log(&meta("c27"), None, &turn_events(0, 1));
                let store = store();
                let p = svc(&env, &store);
                p.load("c27").await.unwrap();
                let mut seed = turn_events(0, 1);
                seed.extend(turn_events(6, 2).into_iter().take(2));
                let (session, detach) = store
                    .create(
                        Some("c27"),
                        PrepareOptions {
                            seed: Some(seed.iter().map(Event::to_value).collect()),
                            meta: Some(v(r#"{"cwd":"/proj","createdAt":5555}"#)),
                            ..PrepareOptions::default()
                        },
                    )
                    .unwrap();
                store.flush(&session).await.unwrap();
                assert_eq!(seqs(env.stored("c27").await), (0..9).collect::<Vec<_>>());
                detach.detach();
                p.dispose().await.unwrap();
                let reloaded = svc(&env, &coord::store()).inspect("c27", None).await.unwrap();
                assert_eq!(reloaded.meta.created_at, 1000, "the stored header stays authoritative");
            }

            // persistence §7.2 #28
            #[tokio::test]
            async fn a_different_cwd_than_created_state_collides() {
                let env = Env::new($kind);
                let store = store();
                let p = svc(&env, &store);
                p.create(&meta("c28")).await.unwrap();
                let (session, detach) = live(&store, "c28", Some("/elsewhere"));
                assert_eq!(
                    store.flush(&session).await.unwrap_err().to_string(),
                    r#"session "c28" is already persisted at a different cwd (persisted: /proj, live: /elsewhere) (id collision)"#
                );
                detach.detach();
            }

            // persistence §7.2 #29
            #[tokio::test]
            async fn the_cwd_check_runs_before_the_seed_check() {
                let env = Env::new($kind);
                env.seed_log(&meta("c29"), None, &turn_events(0, 1));
                let store = store();
                let p = svc(&env, &store);
                p.load("c29").await.unwrap();
                let (session, detach) = live(&store, "c29", Some("/elsewhere"));
                let err = store.flush(&session).await.unwrap_err().to_string();
                assert!(err.contains("different cwd") && err.contains("id collision"), "{err}");
                detach.detach();
            }

            // persistence §7.2 #30
            #[tokio::test]
            async fn a_no_cwd_state_collides_with_a_live_cwd() {
                let env = Env::new($kind);
                let store = store();
                let p = svc(&env, &store);
                let mut m = meta("c30");
                m.cwd = None;
                p.create(&m).await.unwrap();
                let (session, detach) = live(&store, "c30", Some("/proj"));
                assert_eq!(
                    store.flush(&session).await.unwrap_err().to_string(),
                    r#"session "c30" is already persisted at a different cwd (persisted: undefined, live: /proj) (id collision)"#
                );
                detach.detach();
            }

            // persistence §7.2 #31
            #[tokio::test]
            async fn append_on_a_fresh_instance_adopts_and_continues() {
                let env = Env::new($kind);
                env.seed_log(&meta("c31"), None, &turn_events(0, 1));
                let p = svc(&env, &store());
                let mut next = turn_events(6, 2);
                next.truncate(2);
                p.append("c31", &next).await.unwrap();
                assert_eq!(seqs(p.read_from("c31", 0, None).await.unwrap().events), (0..8).collect::<Vec<_>>());
            }

            // persistence §7.2 #32
            #[tokio::test]
            async fn an_empty_append_stays_lazy() {
                let env = Env::new($kind);
                let p = svc(&env, &store());
                p.create(&meta("c32")).await.unwrap();
                p.append("c32", &[]).await.unwrap();
                assert!(p.list(None).await.unwrap().is_empty());
            }

            // persistence §7.2 #33
            #[tokio::test]
            async fn missing_sessions_are_not_found() {
                let env = Env::new($kind);
                let p = svc(&env, &store());
                assert_eq!(p.load("nope").await.unwrap_err().to_string(), r#"session "nope" not found"#);
                assert_eq!(p.inspect("nope", None).await.unwrap_err().to_string(), r#"session "nope" not found"#);
            }

            // persistence §7.2 #34
            #[tokio::test]
            async fn duplicate_creates_reject() {
                let env = Env::new($kind);
                env.seed_log(&meta("on-disk"), None, &turn_events(0, 1));
                let p = svc(&env, &store());
                p.create(&meta("c34")).await.unwrap();
                assert_eq!(
                    p.create(&meta("c34")).await.unwrap_err().to_string(),
                    r#"session "c34" already exists in this backend"#
                );
                assert_eq!(
                    p.create(&meta("on-disk")).await.unwrap_err().to_string(),
                    r#"session "on-disk" already has a persisted log on disk; load/resume it instead of creating"#
                );
            }

            // persistence §7.2 #35, #36
            #[tokio::test]
            async fn foreign_format_versions_are_refused() {
                let env = Env::new($kind);
                for (id, version, text) in [
                    ("v99", "99", "uses log format v99, but this harness reads only v0: the log was written by a newer harness \u{2014} upgrade the harness to open it"),
                    ("vneg", "-1", "uses log format v-1, older than the supported v0, and this build ships no upgrade path for it"),
                ] {
                    let header = v(&format!(r#"{{"version":{version},"id":"{id}","createdAt":1000,"cwd":"/proj","delegationDepth":0}}"#));
                    env.seed_log(&meta(id), Some(header), &turn_events(0, 1));
                    let p = svc(&env, &store());
                    for err in [p.load(id).await.unwrap_err(), p.inspect(id, None).await.unwrap_err()] {
                        assert_eq!(err.name(), "SessionFormatUnsupportedError");
                        let message = err.to_string();
                        assert!(message.starts_with(&format!(r#"session "{id}" {text}"#)), "{message}");
                        assert_eq!(err.location().is_some(), $kind != Kind::Memory);
                    }
                }
            }

            // persistence §7.2 #37
            #[tokio::test]
            async fn unknown_types_are_refused_unless_ignorable() {
                let env = Env::new($kind);
                let mut events = turn_events(0, 1);
                events.push(ev(r#"{"type":"future/event","seq":6,"time":1,"data":{}}"#));
                env.seed_log(&meta("c37"), None, &events);
                let p = svc(&env, &store());
                let err = p.load("c37").await.unwrap_err();
                assert_eq!(err.name(), "SessionFormatUnsupportedError");
                assert!(err.to_string().starts_with(
                    "session \"c37\" contains event type \"future/event\" (seq 6) unknown to this harness and not marked ignorable; refusing to interpret the log \u{2014} it was likely written by a newer harness"
                ));
                events[6] = ev(r#"{"type":"future/event","seq":6,"time":1,"data":{},"ignorable":true}"#);
                env.seed_log(&meta("c37b"), None, &events);
                assert_eq!(p.load("c37b").await.unwrap().events.len(), 7);
            }

            // persistence §7.2 #39
            #[tokio::test]
            async fn a_flush_right_after_appends_persists_them_all() {
                let env = Env::new($kind);
                let store = store();
                let _p = svc(&env, &store);
                let (session, detach) = live(&store, "c39", Some("/proj"));
                session.append(turn_start(1)).unwrap();
                session.append(step_start(1, 1)).unwrap();
                session.append(step_end(1, 1)).unwrap();
                store.flush(&session).await.unwrap();
                assert_eq!(seqs(env.stored("c39").await), [0, 1, 2]);
                detach.detach();
            }

            // persistence §7.2 #40
            #[tokio::test]
            async fn a_torn_tail_is_repaired_by_load() {
                let env = Env::new($kind);
                let p = svc(&env, &store());
                p.create(&meta("c40")).await.unwrap();
                let mut events = turn_events(0, 1);
                events.push(ev(r#"{"type":"turn/start","seq":6,"time":7,"data":{"turn":2}}"#));
                events.push(ev(r#"{"type":"step/start","seq":7,"time":8,"data":{"turn":2,"step":1}}"#));
                p.append("c40", &events).await.unwrap();
                p.dispose().await.unwrap();
                let torn = env.corrupt_tail(&meta("c40"), 8);
                assert_eq!(torn, $kind != Kind::Memory, "memory logs have no torn tail to corrupt");
                let fresh = svc(&env, &store());
                let loaded = fresh.load("c40").await.unwrap();
                assert_eq!(seqs(loaded.events.iter().cloned()), (0..10).collect::<Vec<_>>());
                assert_eq!(
                    loaded.events.get(9).unwrap().data().to_json(),
                    r#"{"turn":2,"reason":{"kind":"interrupted"}}"#
                );
                let more = vec![
                    ev(r#"{"type":"turn/start","seq":10,"time":9,"data":{"turn":3}}"#),
                    ev(r#"{"type":"turn/end","seq":11,"time":9,"data":{"turn":3,"reason":{"kind":"completed"}}}"#),
                ];
                fresh.append("c40", &more).await.unwrap();
                assert_eq!(seqs(fresh.read_from("c40", 0, None).await.unwrap().events), (0..12).collect::<Vec<_>>());
            }

            #[tokio::test]
            async fn inspect_detailed_tells_the_stored_length_and_torn_tail_without_writing() {
                let env = Env::new($kind);
                let p = svc(&env, &store());
                p.create(&meta("c41")).await.unwrap();
                let mut events = turn_events(0, 1);
                events.push(ev(r#"{"type":"turn/start","seq":6,"time":7,"data":{"turn":2}}"#));
                events.push(ev(r#"{"type":"step/start","seq":7,"time":8,"data":{"turn":2,"step":1}}"#));
                p.append("c41", &events).await.unwrap();
                p.dispose().await.unwrap();
                let torn = env.corrupt_tail(&meta("c41"), 8);
                let fresh = svc(&env, &store());
                let detailed = fresh.inspect_detailed("c41", None).await.unwrap();
                // 8 stored events, then the step/end and turn/end closers, in memory only.
                assert_eq!(detailed.stored, 8);
                assert_eq!(seqs(detailed.inspection.events.iter().cloned()), (0..10).collect::<Vec<_>>());
                assert_eq!(detailed.torn.is_some(), torn);
                let plain = fresh.inspect("c41", None).await.unwrap();
                assert_eq!(plain.events.to_vec(), detailed.inspection.events.to_vec());
                assert_eq!(seqs(fresh.read_from("c41", 0, None).await.unwrap().events), (0..8).collect::<Vec<_>>());
            }
        }
    };
}

coordinator_suite!(memory, Kind::Memory);
coordinator_suite!(jsonl_none, Kind::JsonlRaw);
coordinator_suite!(jsonl_zstd, Kind::JsonlZstd);
