//! The integration tests of `session-persist-sqlite`, in one binary (one link instead of one per file).

mod backend_suite;
mod built_package;
mod common;
mod compat;
mod compression;
mod contract;
mod differential;
mod draft_rounds;
mod durability;
mod error_kinds;
mod paging;
mod publish;
mod row_stats;
mod sql_boundary;
mod sqlite;
