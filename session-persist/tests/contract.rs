//! The backend-agnostic persistence contract (spec §7.1, `runPersistenceContract`), run
//! against the memory backend and the JSONL backend in raw and zstd modes.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

mod coord;

use coord::*;
use session_core::json::Value;
use session_persist::cancel::{AbortReason, CancelToken};
use session_persist::{Error, Persistence};

fn svc(env: &Env) -> Persistence {
    service(env.backend(), &store()).0
}

fn tool_call_message(seq: u64, turn: u64, call: &str) -> session_core::Event {
    ev(&format!(
        r#"{{"type":"assistant/message","seq":{seq},"time":1,"data":{{"turn":{turn},"step":1,"message":{{"id":"a-tool","role":"assistant","content":[{{"type":"tool-call","id":"{call}","name":"bash","arguments":{{}}}}],"source":{{"kind":"model","provider":"p","model":"m"}}}}}},"surfaceOp":"append"}}"#
    ))
}

macro_rules! contract_suite {
    ($module:ident, $kind:expr) => {
        mod $module {
            use super::*;

            // persistence §7.1 #1
            #[tokio::test]
            async fn create_append_load_round_trip() {
                let env = Env::new($kind);
                let p = svc(&env);
                p.create(&meta("s1")).await.unwrap();
                let events = turn_events(0, 1);
                p.append("s1", &events).await.unwrap();
                p.dispose().await.unwrap();
                let loaded = svc(&env).load("s1").await.unwrap();
                assert_eq!(&*loaded.meta.id, "s1");
                assert_eq!(loaded.meta.cwd.as_deref(), Some("/proj"));
                assert_eq!(loaded.meta.to_value().get("version").unwrap().as_u64(), Some(0));
                assert_eq!(loaded.events.to_vec(), events);
            }

            // persistence §7.1 #2
            #[tokio::test]
            async fn bad_created_at_rejects_without_reserving_the_id() {
                let env = Env::new($kind);
                let p = svc(&env);
                let err = p
                    .create_value(&v(r#"{"version":0,"id":"s2","createdAt":1.5,"cwd":"/proj"}"#))
                    .await
                    .unwrap_err();
                assert_eq!(err.name(), "TypeError");
                assert_eq!(
                    err.to_string(),
                    "session metadata createdAt must be a non-negative safe integer"
                );
                let mut huge = meta("s2");
                huge.created_at = 1 << 53;
                assert!(matches!(p.create(&huge).await, Err(Error::MetadataCreatedAt)));
                p.create(&meta("s2")).await.unwrap();
            }

            // persistence §7.1 #3
            #[tokio::test]
            async fn interrupted_turn_inspect_then_load_then_continue() {
                let env = Env::new($kind);
                let p = svc(&env);
                p.create(&meta("s3")).await.unwrap();
                let mut events = turn_events(0, 1);
                events.push(ev(r#"{"type":"turn/start","seq":6,"time":7,"data":{"turn":2}}"#));
                events.push(ev(r#"{"type":"step/start","seq":7,"time":8,"data":{"turn":2,"step":1}}"#));
                p.append("s3", &events).await.unwrap();
                let before = p.list_snapshots(None).await.unwrap()[0].revision.clone();

                let fresh = p.clone();
                let inspected = fresh.inspect("s3", None).await.unwrap();
                assert_eq!(inspected.events.len(), 10);
                assert_eq!(
                    types(inspected.events.iter().skip(8).cloned()),
                    ["step/end", "turn/end"]
                );
                assert_eq!(fresh.list_snapshots(None).await.unwrap()[0].revision, before);

                let loaded = fresh.load("s3").await.unwrap();
                assert_eq!(seqs(loaded.events.iter().cloned()), (0..10).collect::<Vec<_>>());
                let last = loaded.events.last().unwrap();
                assert_eq!(
                    last.to_json(),
                    r#"{"type":"turn/end","seq":9,"time":8,"data":{"turn":2,"reason":{"kind":"interrupted"}}}"#
                );
                assert_ne!(fresh.list_snapshots(None).await.unwrap()[0].revision, before);

                let mut more = turn_events(10, 3);
                more.truncate(2);
                fresh.append("s3", &more).await.unwrap();
                p.dispose().await.unwrap();
                let reloaded = svc(&env).inspect("s3", None).await.unwrap();
                assert_eq!(seqs(reloaded.events.iter().take(12).cloned()), (0..12).collect::<Vec<_>>());
            }

            // persistence §7.1 #4
            #[tokio::test]
            async fn unrecorded_tool_call_gets_a_not_started_result() {
                let env = Env::new($kind);
                let p = svc(&env);
                p.create(&meta("s4")).await.unwrap();
                let events = vec![
                    ev(r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#),
                    ev(r#"{"type":"step/start","seq":1,"time":1,"data":{"turn":1,"step":1}}"#),
                    tool_call_message(2, 1, "call-1"),
                ];
                p.append("s4", &events).await.unwrap();
                p.dispose().await.unwrap();
                let loaded = svc(&env).load("s4").await.unwrap();
                let closers: Vec<_> = loaded.events.iter().skip(3).cloned().collect();
                assert_eq!(types(closers.clone()), ["tool/result", "step/end", "turn/end"]);
                let result = &closers[0];
                let message = result.data().get("message").unwrap();
                assert_eq!(message.get("source").unwrap().get("callId").unwrap().as_str(), Some("call-1"));
                let block = &message.get("content").unwrap().as_array().unwrap()[0];
                assert_eq!(block.get("isError"), Some(&Value::Bool(true)));
                assert_eq!(
                    result.data().get("error").unwrap().get("code").unwrap().as_str(),
                    Some("TOOL_NOT_STARTED")
                );
            }

            // persistence §7.1 #5
            #[tokio::test]
            async fn recorded_tool_call_gets_an_outcome_unknown_result() {
                let env = Env::new($kind);
                let p = svc(&env);
                p.create(&meta("s5")).await.unwrap();
                let events = vec![
                    ev(r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#),
                    ev(r#"{"type":"step/start","seq":1,"time":1,"data":{"turn":1,"step":1}}"#),
                    tool_call_message(2, 1, "call-2"),
                    ev(r#"{"type":"tool/call","seq":3,"time":1,"data":{"turn":1,"step":1,"callId":"call-2"}}"#),
                ];
                p.append("s5", &events).await.unwrap();
                p.dispose().await.unwrap();
                let fresh = svc(&env);
                let loaded = fresh.load("s5").await.unwrap();
                let result = loaded.events.get(4).unwrap().clone();
                assert_eq!(result.event_type(), "tool/result");
                let error = result.data().get("error").unwrap();
                assert_eq!(error.get("name").unwrap().as_str(), Some("ToolOutcomeUnknownError"));
                assert_eq!(error.get("code").unwrap().as_str(), Some("TOOL_OUTCOME_UNKNOWN"));
                assert!(result.data().to_json().contains("Do not retry blindly."));
                assert_eq!(result.source_event_seqs(), Some(vec![3]));
                // A resumed session derives the matching tool result.
                let prep = fresh.prepare("s5", None).await.unwrap();
                let messages = prep.session().derive_messages();
                let last = messages.last().unwrap();
                assert_eq!(
                    last.get("source").unwrap().get("callId").unwrap().as_str(),
                    Some("call-2")
                );
            }

            // persistence §7.1 #6
            #[tokio::test]
            async fn created_but_never_appended_is_not_listed() {
                let env = Env::new($kind);
                let p = svc(&env);
                p.create(&meta("s6")).await.unwrap();
                assert!(p.list(None).await.unwrap().is_empty());
                assert!(p.list_snapshots(None).await.unwrap().is_empty());
            }

            // persistence §7.1 #7
            #[tokio::test]
            async fn pre_aborted_reads_reject_with_the_exact_reason() {
                let env = Env::new($kind);
                let p = svc(&env);
                let token = CancelToken::new();
                assert!(p.list_snapshots(Some(&token)).await.unwrap().is_empty());
                let reason = AbortReason::new(std::io::Error::other("caller went away"));
                token.cancel_with(reason.clone());
                let same = |e: Error| e.abort_reason().is_some_and(|r| r.ptr_eq(&reason));
                assert!(same(p.list(Some(&token)).await.unwrap_err()));
                assert!(same(p.list_snapshots(Some(&token)).await.unwrap_err()));
                assert!(same(p.inspect("s7", Some(&token)).await.unwrap_err()));
                assert!(same(p.read_from("s7", 0, Some(&token)).await.unwrap_err()));
            }

            // persistence §7.1 #8
            #[tokio::test]
            async fn read_from_returns_stored_suffixes() {
                let env = Env::new($kind);
                let p = svc(&env);
                p.create(&meta("s8")).await.unwrap();
                let mut events = turn_events(0, 1);
                events.push(ev(r#"{"type":"turn/start","seq":6,"time":1,"data":{"turn":2}}"#));
                p.append("s8", &events).await.unwrap();
                let all = p.read_from("s8", 0, None).await.unwrap();
                assert_eq!(&*all.meta.id, "s8");
                assert_eq!(all.events, events, "an open turn is returned as stored");
                assert_eq!(p.read_from("s8", 3, None).await.unwrap().events, events[3..].to_vec());
                assert!(p.read_from("s8", 7, None).await.unwrap().events.is_empty());
                assert!(p.read_from("s8", 100, None).await.unwrap().events.is_empty());
                assert_eq!(
                    p.read_from("missing", 0, None).await.unwrap_err().to_string(),
                    r#"session "missing" not found"#
                );
                let err = p.read_from("s8", 1 << 53, None).await.unwrap_err();
                assert_eq!(err.name(), "TypeError");
                assert_eq!(
                    err.to_string(),
                    "readFrom fromSeq must be a non-negative safe integer, got 9007199254740992"
                );
            }

            // persistence §7.1 #9
            #[tokio::test]
            async fn snapshot_revisions_are_stable_until_an_append() {
                let env = Env::new($kind);
                let p = svc(&env);
                p.create(&meta("s9")).await.unwrap();
                p.append("s9", &turn_events(0, 1)[..3]).await.unwrap();
                let a = p.list_snapshots(None).await.unwrap();
                let b = p.list_snapshots(None).await.unwrap();
                assert_eq!(a, b);
                p.append("s9", &turn_events(0, 1)[3..]).await.unwrap();
                assert_ne!(p.list_snapshots(None).await.unwrap()[0].revision, a[0].revision);
            }

            // persistence §7.1 #10
            #[tokio::test]
            async fn re_appending_stored_seqs_rejects() {
                let env = Env::new($kind);
                let p = svc(&env);
                p.create(&meta("s10")).await.unwrap();
                p.append("s10", &turn_events(0, 1)).await.unwrap();
                assert_eq!(
                    p.append("s10", &turn_events(0, 1)[..1]).await.unwrap_err().to_string(),
                    r#"append seq mismatch for "s10": expected 6 at index 0, got 0"#
                );
            }

            // persistence §7.1 #11
            #[tokio::test]
            async fn a_seq_gap_inside_a_batch_rejects() {
                let env = Env::new($kind);
                let p = svc(&env);
                p.create(&meta("s11")).await.unwrap();
                let mut events = turn_events(0, 1);
                events.remove(2);
                assert_eq!(
                    p.append("s11", &events).await.unwrap_err().to_string(),
                    r#"append seq mismatch for "s11": expected 2 at index 2, got 3"#
                );
                assert!(p.list(None).await.unwrap().is_empty(), "nothing was written");
            }

            // persistence §7.1 #12 (the non-JSON values Rust can hold: -0 and unsafe integers)
            #[tokio::test]
            async fn non_lossless_data_rejects() {
                let env = Env::new($kind);
                let p = svc(&env);
                p.create(&meta("s12")).await.unwrap();
                for data in ["-0", r#"{"n":9007199254740993}"#, r#"[1,{"x":-0.0}]"#] {
                    let e = ev(&format!(r#"{{"type":"turn/start","seq":0,"time":1,"data":{data}}}"#));
                    let err = p.append("s12", &[e]).await.unwrap_err();
                    assert_eq!(err.name(), "TypeError");
                    assert!(err.to_string().contains("losslessly JSON-serializable"), "{err}");
                }
                let err = p
                    .create_value(&v(r#"{"version":0,"id":"m","createdAt":1,"x":-0}"#))
                    .await
                    .unwrap_err();
                assert_eq!(err.to_string(), "session metadata must be losslessly JSON-serializable");
            }
        }
    };
}

contract_suite!(memory, Kind::Memory);
contract_suite!(jsonl_none, Kind::JsonlRaw);
contract_suite!(jsonl_zstd, Kind::JsonlZstd);
