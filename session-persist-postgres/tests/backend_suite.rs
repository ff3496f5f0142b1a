//! The conformance backend suite (every case of `conformance::backend_suite`) against the
//! real server, each backend on a schema of its own. Without a server every case prints
//! `SKIPPED: PostgreSQL not reachable at ...` and passes, unless `SESSION_PG_REQUIRED=1`.

mod common;

conformance::backend_suite!({
    let Some(harness) = common::PostgresHarness::new("backend_suite") else {
        return;
    };
    harness
});
