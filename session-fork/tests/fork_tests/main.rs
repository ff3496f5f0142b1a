//! The integration tests of `session-fork`, in one binary (one link instead of one per file).

mod corpus;
mod fork;
mod stored_numbers;
