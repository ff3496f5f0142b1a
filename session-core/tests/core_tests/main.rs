//! The integration tests of `session-core`, in one binary (one link instead of one per file).

mod append_order;
mod corpus;
mod envelope;
mod serde_value;
mod vocab_corpus;
mod vocab_properties;
