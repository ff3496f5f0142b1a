//! The reference's `built-package.spec.ts` (persistence §7.12): the built library carries its
//! SQL with it, and a fresh process that lists a `:memory:` store gets no sessions and writes
//! nothing to standard error.
#![allow(clippy::unwrap_used)] // helpers outside `#[test]` functions unwrap too

use std::process::Command;

use session_persist::Backend;
use session_persist_sqlite::{SqliteBackend, SqliteConfig};

/// Set in the child process this test starts.
const CHILD: &str = "SESSION_PERSIST_SQLITE_BUILT_PACKAGE_CHILD";

/// The child's side (in the process the test starts): list a `:memory:` store and print the
/// count.
fn list_in_child() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let listed = rt.block_on(async {
        let backend = SqliteBackend::new(SqliteConfig::new(":memory:")).unwrap();
        let listed = backend.list().await.unwrap();
        backend.close().await.unwrap();
        listed
    });
    #[allow(clippy::print_stdout)] // the parent test reads the child's stdout
    {
        println!("listed {} sessions", listed.len());
    }
}

// persistence §7.12 built-package #1: the built library loads its SQL; `list` on `:memory:`
// gives `[]`, with empty standard error.
#[test]
fn list_on_memory_in_a_fresh_process_is_empty_and_quiet() {
    // The test's name in this binary: its module path below the crate, then the function.
    const NAME: &str = "built_package::list_on_memory_in_a_fresh_process_is_empty_and_quiet";
    if std::env::var_os(CHILD).is_some() {
        list_in_child();
        return;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", NAME, "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stdout: {stdout}\nstderr: {stderr}");
    assert!(stdout.contains("listed 0 sessions"), "stdout: {stdout}");
    assert!(stderr.is_empty(), "stderr: {stderr}");
}
