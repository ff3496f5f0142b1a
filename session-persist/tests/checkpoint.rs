//! The checkpoint policy (spec §5, §7.13): a loop's request and tool checkpoints await the
//! store's flush, so nothing reaches a model or a tool before it is durable.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

mod coord;

use std::sync::Arc;

use coord::*;
use session_persist::cancel::CancelToken;
use session_persist::checkpoint::{
    TOOL_ABORTED_BEFORE_DISPATCH, ToolCheckpoint, aborted_before_dispatch_result,
    checkpoint_request, checkpoint_step, checkpoint_tool,
};
use session_persist::memory::{GateKind, MemoryBackend};

fn setup() -> (
    MemoryBackend,
    session_store::SessionStore,
    session_persist::Persistence,
) {
    let backend = MemoryBackend::new();
    let store = store();
    let (p, _) = service(Arc::new(backend.clone()), &store);
    (backend, store, p)
}

// persistence §7.13 #1
#[tokio::test]
async fn the_request_checkpoint_completes_before_the_request() {
    let (backend, store, _p) = setup();
    let (session, detach) = live(&store, "req", None);
    session.append(turn_start(1)).unwrap();
    session.append(user("u1", "hi")).unwrap();
    let gate = backend.hold(GateKind::Append);
    let checkpoint = tokio::spawn({
        let store = store.clone();
        async move { checkpoint_request(&store, Some("req")).await }
    });
    gate.wait_arrived(1).await;
    settle().await;
    assert!(
        !checkpoint.is_finished(),
        "the request waits for durability"
    );
    gate.open();
    assert!(checkpoint.await.unwrap().unwrap());
    // Everything recorded before the request is durable once the checkpoint returns.
    assert_eq!(backend.stored_seqs("req"), [0, 1]);
    detach.detach();
}

// persistence §7.13 #2, #3
#[tokio::test]
async fn no_session_or_a_detached_one_is_not_flushed() {
    let (backend, store, _p) = setup();
    assert!(!checkpoint_request(&store, None).await.unwrap());
    let (session, detach) = live(&store, "gone", None);
    session.append(turn_start(1)).unwrap();
    detach.detach();
    assert!(!checkpoint_request(&store, Some("gone")).await.unwrap());
    assert!(
        !checkpoint_request(&store, Some("never-existed"))
            .await
            .unwrap()
    );
    let appends_from_retirement = backend.appends();
    assert!(appends_from_retirement <= 1);
}

// persistence §7.13 #4
#[tokio::test]
async fn a_flush_failure_blocks_the_request() {
    let (backend, store, _p) = setup();
    let (session, detach) = live(&store, "req-fail", None);
    session.append(turn_start(1)).unwrap();
    backend.fail_next_append("disk unavailable");
    let err = checkpoint_request(&store, Some("req-fail"))
        .await
        .unwrap_err();
    assert_eq!(err.js_string(), "Error: disk unavailable");
    detach.detach();
}

// persistence §7.13 #5, #8
#[tokio::test]
async fn the_tool_checkpoint_flushes_top_level_calls_only() {
    let (backend, store, _p) = setup();
    let (session, detach) = live(&store, "tool", None);
    session.append(turn_start(1)).unwrap();
    assert_eq!(
        checkpoint_tool(&store, &session, true, None).await.unwrap(),
        ToolCheckpoint::Proceed
    );
    assert_eq!(
        backend.appends(),
        0,
        "a nested dispatch reuses the outer checkpoint"
    );
    assert_eq!(
        checkpoint_tool(&store, &session, false, None)
            .await
            .unwrap(),
        ToolCheckpoint::Proceed
    );
    assert_eq!(backend.stored_seqs("tool"), [0]);
    detach.detach();
}

// persistence §7.13 #6
#[tokio::test]
async fn cancellation_during_the_tool_checkpoint_gives_the_canonical_result() {
    let (backend, store, _p) = setup();
    let (session, detach) = live(&store, "tool-cancel", None);
    session.append(turn_start(1)).unwrap();
    let gate = backend.hold(GateKind::Append);
    let token = CancelToken::new();
    let checkpoint = tokio::spawn({
        let (store, session, token) = (store.clone(), session.clone(), token.clone());
        async move { checkpoint_tool(&store, &session, false, Some(&token)).await }
    });
    gate.wait_arrived(1).await;
    token.cancel();
    gate.open();
    let ToolCheckpoint::AbortedBeforeDispatch(result) = checkpoint.await.unwrap().unwrap() else {
        panic!("the body must not run");
    };
    assert_eq!(
        result.to_json(),
        format!(
            r#"{{"content":[{{"type":"text","text":"Error: tool call aborted before dispatch"}}],"isError":true,"error":{{"message":"tool call aborted before dispatch","info":{{"name":"AbortError","code":"{TOOL_ABORTED_BEFORE_DISPATCH}"}}}}}}"#
        )
    );
    assert_eq!(result, aborted_before_dispatch_result());
    detach.detach();
}

// persistence §7.13 #7
#[tokio::test]
async fn a_rejected_tool_checkpoint_does_not_run_the_body() {
    let (backend, store, _p) = setup();
    let (session, detach) = live(&store, "tool-fail", None);
    session.append(turn_start(1)).unwrap();
    backend.fail_next_append("disk unavailable");
    let err = checkpoint_tool(&store, &session, false, None)
        .await
        .unwrap_err();
    assert_eq!(err.js_string(), "Error: disk unavailable");
    detach.detach();
}

// persistence §7.13 #9
#[tokio::test]
async fn the_step_checkpoint_flushes_the_session() {
    let (backend, store, _p) = setup();
    let (session, detach) = live(&store, "step", None);
    session.append(turn_start(1)).unwrap();
    session.append(step_start(1, 1)).unwrap();
    assert!(checkpoint_step(&store, &session).await.unwrap());
    assert_eq!(backend.stored_seqs("step"), [0, 1]);
    detach.detach();
}
