//! The backend suite run against every backend of the workspace: the memory backend, the JSONL
//! backend in raw and zstd modes (handed out directly, behind `Box<dyn Backend>` and behind
//! `Arc<dyn Backend>`), and the JSONL backend on crash-simulating storage, where every restart
//! is a power loss.

use conformance::backend_suite::harnesses::{
    CrashJsonlHarness, JsonlHarness, MemoryHarness, Pointer,
};
use session_persist::Compression;

mod memory {
    use super::*;
    conformance::backend_suite!(MemoryHarness::new());
}

mod jsonl_raw {
    use super::*;
    conformance::backend_suite!(JsonlHarness::new(Compression::None));
}

mod jsonl_zstd {
    use super::*;
    conformance::backend_suite!(JsonlHarness::new(Compression::Zstd));
}

mod jsonl_zstd_boxed {
    use super::*;
    conformance::backend_suite!(JsonlHarness::new(Compression::Zstd).behind(Pointer::Boxed));
}

mod jsonl_raw_arced {
    use super::*;
    conformance::backend_suite!(JsonlHarness::new(Compression::None).behind(Pointer::Arced));
}

mod jsonl_raw_power_loss {
    use super::*;
    conformance::backend_suite!(CrashJsonlHarness::new(Compression::None));
}

mod jsonl_zstd_power_loss {
    use super::*;
    conformance::backend_suite!(CrashJsonlHarness::new(Compression::Zstd));
}

/// Every public case function (in `cases.rs` and its submodules) is in the macro's list (and so in `CASES` and in every backend's
/// tests), and every listed name is distinct.
#[test]
fn every_case_function_is_listed() {
    let sources = [
        include_str!("../src/backend_suite/cases.rs"),
        include_str!("../src/backend_suite/cases/publish.rs"),
        include_str!("../src/backend_suite/cases/repair.rs"),
        include_str!("../src/backend_suite/cases/service.rs"),
    ];
    // A new file of cases must be read above too.
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/backend_suite/cases");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(files, ["publish.rs", "repair.rs", "service.rs"]);
    let mut defined: Vec<&str> = sources
        .iter()
        .flat_map(|source| source.lines())
        .filter_map(|l| l.strip_prefix("pub async fn "))
        .filter_map(|rest| rest.split('(').next())
        .collect();
    defined.sort_unstable();
    let mut listed: Vec<&str> = conformance::backend_suite::CASES.to_vec();
    listed.sort_unstable();
    let before = listed.len();
    listed.dedup();
    assert_eq!(listed.len(), before, "a case is listed twice");
    assert_eq!(defined, listed);
    assert!(listed.len() >= 25, "{} cases", listed.len());
}

/// A gated case passes as not applicable (naming the capability), a case that runs its checks
/// is `Checked`, and a harness that declares a capability it lacks fails the case that checks
/// the declaration.
#[test]
fn capabilities_gate_cases_visibly_and_are_checked() {
    use conformance::backend_suite::{self, Capabilities, Harness, async_trait};
    use session_persist::Backend;
    use std::sync::Arc;

    struct Overclaiming(MemoryHarness);

    #[async_trait]
    impl Harness for Overclaiming {
        async fn open(&self) -> Arc<dyn Backend> {
            self.0.open().await
        }
        async fn reopen(&self, old: Arc<dyn Backend>) -> Arc<dyn Backend> {
            self.0.reopen(old).await
        }
        fn capabilities(&self) -> Capabilities {
            self.0.capabilities().with_seek().with_raw_artifacts()
        }
    }

    let honest = MemoryHarness::new();
    backend_suite::run_case(&honest, "repair_truncates_torn_tail_and_appends_closers").unwrap();
    assert_eq!(
        backend_suite::run_case_verdict(&honest, "repair_truncates_torn_tail_and_appends_closers")
            .unwrap(),
        backend_suite::Verdict::NotApplicable {
            capability: "torn_tails"
        }
    );
    assert_eq!(
        backend_suite::run_case_verdict(&honest, "create_append_load_round_trip").unwrap(),
        backend_suite::Verdict::Checked
    );
    let liar = Overclaiming(MemoryHarness::new());
    let failure =
        backend_suite::run_case(&liar, "declared_capabilities_match_backend").unwrap_err();
    assert_eq!(
        failure.message(),
        "the harness declares seek = true but supports_seek() is false"
    );
    assert!(backend_suite::run_case(&liar, "read_from_suffix").is_err());
    assert!(
        backend_suite::run_case(&honest, "no_such_case")
            .unwrap_err()
            .message()
            .contains("unknown backend suite case")
    );
}

/// A harness declaring the fixed envelope order gets exactly that order expected: a backend
/// that keeps every event's own key order (the memory backend) then fails the key-order case,
/// and still passes where every event was appended in the live-append order.
#[test]
fn fixed_envelope_order_is_expected_exactly() {
    use conformance::backend_suite::{self, Capabilities, Harness, async_trait};
    use session_persist::Backend;
    use std::sync::Arc;

    struct FixedOrder(MemoryHarness);

    #[async_trait]
    impl Harness for FixedOrder {
        async fn open(&self) -> Arc<dyn Backend> {
            self.0.open().await
        }
        async fn reopen(&self, old: Arc<dyn Backend>) -> Arc<dyn Backend> {
            self.0.reopen(old).await
        }
        fn capabilities(&self) -> Capabilities {
            self.0.capabilities().with_fixed_envelope_order()
        }
    }

    let harness = FixedOrder(MemoryHarness::new());
    let failure = backend_suite::run_case(
        &harness,
        "load_stored_returns_events_in_order_with_identical_json",
    )
    .unwrap_err();
    assert!(failure.message().contains("differs"), "{failure}");
    backend_suite::run_case(&harness, "create_append_load_round_trip").unwrap();
}

/// The cases each workspace backend is not applicable to, with the capability each lacks:
/// exactly these, so a case that stops being checked on a backend (a capability dropped from a
/// harness, a new gate) fails here instead of passing unseen.
#[test]
fn not_applicable_cases_are_exactly_the_declared_gaps() {
    use conformance::backend_suite::not_applicable;
    /// A case and the capability it lacks.
    type Gap<'a> = (&'a str, &'a str);

    let memory: &[Gap<'_>] = &[
        (
            "repair_truncates_torn_tail_and_appends_closers",
            "torn_tails",
        ),
        ("torn_tail_reads_are_observations", "torn_tails"),
        ("second_writer_is_refused_until_release", "writer_lock"),
        ("raw_artifact_holds_the_header_and_events", "raw_artifacts"),
        ("service_load_repairs_a_torn_tail", "torn_tails"),
    ];
    let jsonl: &[Gap<'_>] = &[];
    let cases: [(&str, Vec<Gap<'_>>, &[Gap<'_>]); 4] = [
        (
            "memory",
            not_applicable(&MemoryHarness::new()).unwrap(),
            memory,
        ),
        (
            "jsonl raw",
            not_applicable(&JsonlHarness::new(Compression::None)).unwrap(),
            jsonl,
        ),
        (
            "jsonl zstd",
            not_applicable(&JsonlHarness::new(Compression::Zstd)).unwrap(),
            jsonl,
        ),
        (
            "jsonl zstd, power loss",
            not_applicable(&CrashJsonlHarness::new(Compression::Zstd)).unwrap(),
            jsonl,
        ),
    ];
    for (name, got, expected) in cases {
        assert_eq!(got, expected, "{name}");
    }
}
