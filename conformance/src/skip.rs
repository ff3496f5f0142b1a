//! Loud skips for tests that need something this machine may lack (a corpus, a server, a
//! browser, root). A test that cannot run fails, unless an explicit variable allows skipping;
//! the skip line is written to the process's standard error directly, because the test
//! harness captures `eprintln!` of passing tests.
//!
//! ```
//! // `true`: nothing is missing, the test runs.
//! assert!(conformance::skip::unless_allowed("MY_TEST_ALLOW_NO_TOOL", "the tool is missing", || true));
//! ```

use std::fmt::Display;
use std::io::Write;

/// Whether the environment variable `var` is set to `1`.
pub fn is_set(var: &str) -> bool {
    std::env::var_os(var).is_some_and(|v| v == "1")
}

/// Writes `SKIPPED: <why>` on a line of its own to the process's standard error.
pub fn announce(why: impl Display) {
    let _ = writeln!(std::io::stderr(), "\nSKIPPED: {why}");
}

/// For what a test needs: `true` when `present()` holds. Otherwise the test fails naming `why`
/// and `allow_var`, unless `allow_var=1`, when the skip is announced and `false` returned.
///
/// # Panics
///
/// When `present()` is false and `allow_var` is not `1`.
pub fn unless_allowed(allow_var: &str, why: impl Display, present: impl FnOnce() -> bool) -> bool {
    if present() {
        return true;
    }
    assert!(is_set(allow_var), "{why}; set {allow_var}=1 to skip");
    announce(format_args!("{why} ({allow_var}=1)"));
    false
}

/// For an optional service (the README's test command passes without it): announces the skip
/// naming `why`, unless `required_var=1`, when the test fails instead.
///
/// # Panics
///
/// When `required_var` is `1`.
pub fn service_missing(required_var: &str, why: impl Display) {
    assert!(!is_set(required_var), "{required_var}=1 but {why}");
    announce(why);
}
