//! Operator takeover after a writer process dies or stops, with real processes: the holder is
//! this test binary run again as a child (`TAKEOVER_CHILD` names its schema), which publishes
//! a session under a 60 s lease and then is killed (`SIGKILL`), or is stopped (`SIGSTOP`) and
//! resumed after the takeover, when its next append must be fenced.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::Duration;

use common::{TestSchema, server_available};
use session_core::json::Value;
use session_core::{Event, SessionHeader};
use session_persist_postgres::{Error, PostgresBackend, PostgresOptions};

/// The child's schema; set only in the child.
const CHILD_SCHEMA: &str = "TAKEOVER_CHILD";
/// The child's session id.
const CHILD_SESSION: &str = "TAKEOVER_SESSION";
/// The lease the child holds: far longer than the test.
const CHILD_LEASE: Duration = Duration::from_secs(60);

fn meta(id: &str) -> SessionHeader {
    SessionHeader::new(id, 1_000)
}

fn batch(first: u64, len: u64, who: &str) -> Vec<Event> {
    (first..first + len)
        .map(|seq| {
            let data = Value::parse(&format!(r#"{{"turn":1,"note":"{who}-{seq}"}}"#)).unwrap();
            Event::appended("note/marker", seq, 1_000 + seq as i64, data, None, None)
        })
        .collect()
}

/// The child: publishes the session (3 events), says `LEASED <epoch>`, then waits for a line
/// on stdin, appends 2 events from seq 3 and says `APPEND ok` or `APPEND <error>`.
async fn child(schema: &str, id: &str) {
    let options = PostgresOptions::default()
        .schema(schema)
        .lease_ttl(CHILD_LEASE);
    let backend = PostgresBackend::connect(&common::pg_url(), options)
        .await
        .unwrap();
    backend
        .append(&meta(id), &batch(0, 3, "child"), false)
        .await
        .unwrap();
    let mut out = std::io::stdout();
    writeln!(out, "\nLEASED {}", backend.held_epoch(id).unwrap()).unwrap();
    out.flush().unwrap();
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    let verdict = match backend.append(&meta(id), &batch(3, 2, "child"), true).await {
        Ok(()) => "ok".to_owned(),
        Err(e @ Error::LeaseLost { .. }) => format!("lease_lost {e}"),
        Err(e) => format!("other {e}"),
    };
    writeln!(out, "APPEND {verdict}").unwrap();
    out.flush().unwrap();
}

/// The holder process; killed and reaped on drop (panics included).
struct Holder(Child);

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs `test` of this binary as the holder child and waits for its `LEASED` line.
fn spawn_holder(test: &str, schema: &str, id: &str) -> (Holder, BufReader<ChildStdout>) {
    let child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(CHILD_SCHEMA, schema)
        .env(CHILD_SESSION, id)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut child = Holder(child);
    let mut out = BufReader::new(child.0.stdout.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "the holder exited before taking the lease"
        );
        // The harness writes `test NAME ... ` before the child's own output on the line.
        if let Some(at) = line.find("LEASED ") {
            assert_eq!(line[at..].trim(), "LEASED 1");
            return (child, out);
        }
    }
}

fn signal(child: &Holder, sig: &str) {
    let status = Command::new("kill")
        .args([sig, &child.0.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill {sig} failed");
}

/// Runs the child side when this process is the child; returns whether it was.
fn as_child() -> bool {
    let (Ok(schema), Ok(id)) = (std::env::var(CHILD_SCHEMA), std::env::var(CHILD_SESSION)) else {
        return false;
    };
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(child(&schema, &id));
    true
}

/// A killed (`SIGKILL`) holder leaves a live lease: writes and repairs are refused with the lease
/// wait in the error, until a takeover bumps the epoch and writes.
#[test]
fn a_killed_holder_is_taken_over() {
    if as_child() {
        return;
    }
    if !server_available("a_killed_holder_is_taken_over") {
        return;
    }
    let schema = TestSchema::new();
    let (mut holder, _out) = spawn_holder("a_killed_holder_is_taken_over", &schema.name, "k");
    holder.0.kill().unwrap();
    holder.0.wait().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let plain = schema.backend().await;
        let refused = plain.append(&meta("k"), &batch(3, 1, "op"), true).await;
        match refused {
            Err(Error::LeaseHeld {
                epoch: 1,
                expires_in_ms,
                ..
            }) => assert!(
                expires_in_ms > 50_000 && expires_in_ms <= 60_000,
                "{expires_in_ms}"
            ),
            other => panic!("expected LeaseHeld, got {other:?}"),
        }
        let refused = plain.repair(&meta("k"), Some(3), &[]).await;
        assert!(
            matches!(refused, Err(Error::LeaseHeld { epoch: 1, .. })),
            "{refused:?}"
        );
        let operator = schema.backend_with(schema.options().take_over(true)).await;
        operator
            .append(&meta("k"), &batch(3, 2, "op"), true)
            .await
            .unwrap();
        assert_eq!(operator.held_epoch("k"), Some(2));
        let stored = operator.load("k").await.unwrap().unwrap().events;
        assert_eq!(stored.len(), 5);
        // The refused writer stays refused: the operator's lease is live.
        let still = plain.append(&meta("k"), &batch(5, 1, "op"), true).await;
        assert!(
            matches!(still, Err(Error::LeaseHeld { epoch: 2, .. })),
            "{still:?}"
        );
        operator.shutdown().await.unwrap();
        plain.shutdown().await.unwrap();
    });
}

/// A stopped (`SIGSTOP`) holder is taken over; resumed (`SIGCONT`), its next append is fenced with
/// `LeaseLost` and writes nothing.
#[test]
fn a_paused_holder_is_fenced_after_a_takeover() {
    if as_child() {
        return;
    }
    if !server_available("a_paused_holder_is_fenced_after_a_takeover") {
        return;
    }
    let schema = TestSchema::new();
    let (mut holder, mut out) = spawn_holder(
        "a_paused_holder_is_fenced_after_a_takeover",
        &schema.name,
        "p",
    );
    signal(&holder, "-STOP");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (operator, before) = rt.block_on(async {
        let operator = schema.backend_with(schema.options().take_over(true)).await;
        operator
            .append(&meta("p"), &batch(3, 4, "op"), true)
            .await
            .unwrap();
        assert_eq!(operator.held_epoch("p"), Some(2));
        let before = operator.load("p").await.unwrap().unwrap();
        (operator, before)
    });
    signal(&holder, "-CONT");
    let mut stdin = holder.0.stdin.take().unwrap();
    writeln!(stdin, "go").unwrap();
    drop(stdin);
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "the holder said nothing"
        );
        if let Some(at) = line.find("APPEND ") {
            line = line[at..].to_owned();
            break;
        }
    }
    assert!(holder.0.wait().unwrap().success());
    assert!(
        line.starts_with("APPEND lease_lost") && line.contains("epoch 2"),
        "the resumed holder was not fenced: {line}"
    );
    rt.block_on(async {
        let after = operator.load("p").await.unwrap().unwrap();
        assert_eq!(after.events, before.events, "the fenced holder wrote");
        assert_eq!(after.revision, before.revision);
        operator.shutdown().await.unwrap();
    });
}
