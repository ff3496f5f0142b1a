//! `conformance` owns the checks that tell whether an implementation of the session layer
//! behaves like the reference: the golden-corpus runner, random histories, invariant checkers,
//! the reusable backend suite for third-party backends ([`mod@backend_suite`]) and the crash model
//! ([`crash_model`]).
//!
//! It is a product in its own right: a team writing its own backend runs [`mod@backend_suite`]
//! from its `tests/` with one macro call; a team writing its own harness on our crates runs the
//! generators and checkers in its CI.
//!
//! # The golden-corpus runner
//!
//! `cargo run -p conformance --bin golden -- <DIR>` checks every case that the `index.json` of
//! a directory laid out like the reference's corpus lists (and fails on any that is missing or
//! unlisted), prints counts per group and ends with `N passed, M failed, K known divergences`
//! (the deliberate differences of [`corpus::KNOWN_DIVERGENCES`]). The same runner is a library
//! function, [`corpus::run`]:
//!
//! ```no_run
//! use conformance::corpus::{self, Options};
//!
//! let report = corpus::run("../shared/corpus".as_ref(), &Options::default())?;
//! for failure in &report.failures {
//!     eprintln!("{failure}");
//! }
//! for line in report.group_lines() {
//!     println!("{line}");
//! }
//! println!("{}", report.summary());
//! # Ok::<(), conformance::corpus::LayoutError>(())
//! ```
//!
//! # Random histories and invariants
//!
//! [`gen`](gen/index.html) generates valid session histories (turns, streamed answers, tool
//! calls and results, request headers, compactions, tool-result rewrites, plugin events, fork
//! points), histories cut by a crash, and invalid mutations paired with the exact error they
//! must produce. [`invariants`] (the `session-check` crate, re-exported) checks what must hold
//! for every session and log, each checker returning a typed [`invariants::Violation`]:
//!
//! ```
//! use conformance::invariants::{check_closers_balance, check_session};
//! use conformance::r#gen::arb_history;
//! use proptest::strategy::{Strategy, ValueTree};
//! use proptest::test_runner::TestRunner;
//!
//! let mut runner = TestRunner::deterministic();
//! let history = arb_history().new_tree(&mut runner).expect("a history").current();
//! let session = history.build();
//! check_session(&session)?;
//! check_closers_balance(&session.events())?;
//! # Ok::<(), conformance::invariants::Violation>(())
//! ```

pub mod backend_suite;
pub mod corpus;
pub mod crash_model;
pub mod draft_rounds;
pub mod fuzz_targets;
pub mod r#gen;
pub mod import_samples;
pub mod skip;
/// The invariant checkers live in the product crate `session-check` (which `sessionctl verify`
/// runs without linking the generators); they are re-exported here under their old path.
pub use session_check as invariants;
