//! The integration tests of `session-surface`, in one binary (one link instead of one per file).

mod append_rules;
mod arbitrary_input;
mod common;
mod corpus;
mod derived_cache;
mod from_serde;
mod fuzz_regressions;
mod prepared;
mod properties;
mod restore_events;
mod session;
mod shared;
mod surface;
