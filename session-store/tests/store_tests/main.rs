//! The integration tests of `session-store`, in one binary (one link instead of one per file).

mod common;
mod corpus_forks;
mod fork;
mod scoped;
mod store;
