//! The integration tests of `session-cli`, in one binary (one link instead of one per file).

mod append;
mod append_failure;
mod batches;
mod cli;
mod common;
mod compaction;
mod compaction_stores;
mod corpus;
mod demo;
mod hostile;
mod import;
mod large;
mod list_rows;
mod negative;
mod one_session;
mod pager;
mod papercuts;
mod postgres_store;
mod progress;
mod seal;
mod sqlite_store;
mod stdin;
mod terminal;
mod web_browser;
mod web_serve;
mod writers;
