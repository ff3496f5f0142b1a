//! The integration tests of `session-repair`, in one binary (one link instead of one per file).

mod closers;
mod corpus;
mod invariant;
mod observer;
mod pairing;
