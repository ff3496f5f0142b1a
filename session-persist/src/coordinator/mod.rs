//! The persistence coordinator (`PersistenceCoordinator`): everything between a
//! [`SessionStore`](session_store::SessionStore) and a [`Backend`](crate::Backend) — live
//! write-behind, per-id serialization, adoption and collision rules, cold preparation with
//! crash repair, and teardown.
//!
//! Split by responsibility: `state` (per-id state and operation chains), `live` (live
//! adoption and write-behind), `retire` (retirement and write ownership), `cold` (the
//! in-chain cores and cold operations), `restore` (the session restored while its log is
//! read), `api` (the public service).

mod api;
mod cold;
mod live;
mod restore;
mod retire;
mod state;
#[cfg(test)]
mod tests;

pub use api::{
    DEFAULT_PREPARED_SESSION_CACHE_SIZE, DEFAULT_WRITE_BATCH_MAX_DELAY_MS,
    MAX_WRITE_BATCH_DELAY_MS, Persistence, PersistenceOptions, PreparedSession,
};
