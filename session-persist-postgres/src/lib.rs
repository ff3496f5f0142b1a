//! `session-persist-postgres` owns the `PostgreSQL` session-persistence backend
//! ([`PostgresBackend`], `session-persistence-postgres`): every session of a store in one
//! database schema, written by any number of processes, each session by one fenced writer at a
//! time. It implements [`session_persist::Backend`], so the persistence coordinator,
//! write-behind and store ([`session_persist::Persistence`], `session_store::SessionStore`)
//! run on it unchanged.
//!
//! Primary types: [`PostgresBackend`] configured by [`PostgresOptions`]; the row codec in
//! [`codec`]; the schema and its migrations in [`schema`]; the crate's [`Error`].
//!
//! # Example
//!
//! ```no_run
//! use session_core::{Event, SessionHeader, json::Value};
//! use session_persist::Backend;
//! use session_persist_postgres::{PostgresBackend, PostgresOptions};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let backend = PostgresBackend::connect(
//!     "host=127.0.0.1 port=5432 user=postgres dbname=test",
//!     PostgresOptions::default().schema("sessions"),
//! )
//! .await?;
//! let meta = SessionHeader::new("demo", 1_000);
//! let data = Value::parse(r#"{"turn":1}"#)?;
//! let batch = [Event::appended("turn/start", 0, 1_000, data, None, None)];
//! backend.append_batch(&meta, &batch, false).await?; // header and batch commit together
//! let stored = backend.load_stored("demo").await?.expect("stored");
//! assert_eq!(stored.events, batch);
//! let page = backend.list_page(None, 100).await?; // headers only, in id order
//! assert_eq!(&*page[0].id, "demo");
//! backend.close().await?; // gives up the writer leases
//! # Ok(())
//! # }
//! ```
//!
//! # Schema
//!
//! Migrations ([`schema::MIGRATIONS`]) are tracked in a `schema_migrations` table and applied by
//! [`PostgresBackend::connect`] in one transaction under `pg_advisory_xact_lock`; with
//! [`PostgresOptions::create_schema`] off, connecting only reads, and the first write applies
//! them (reads of a missing schema answer as an empty store does). The tables:
//!
//! * `sessions`: the header fields as columns (`created_at`, `cwd`, lineage `parent_session`
//!   and `seed_length`, `origin`, `delegation_depth`, `agent_preset`) plus the header record
//!   as written (`header_json`, which keeps unknown header keys), `next_seq` and
//!   `last_batch_seq` (the committed tail), `incarnation` and `revision` (the
//!   [`session_persist::Revision`] is `postgres:store:<store id>:incarnation:<uuid>:revision:<n>`),
//!   and the writer lease (`lease_epoch`, `lease_holder`, `lease_expires_at`).
//! * `events`, primary key `(session_id, seq)`: one physical row per scalar event or per packed
//!   run of delta chunks (the `SQLite` backend's partition rule: 3 to 1,024 members, at most
//!   1 MiB of data), with `last_seq` for seeking reads, `type`, `time`, the surface metadata
//!   (`surface_op`, `source_event_seqs`, `ignorable`) and the line.
//!
//! **Why the line is text, not `jsonb`.** Our logs are lossless: re-encoding a stored event
//! must reproduce its bytes, key order and number spelling included. `jsonb` reorders keys,
//! drops duplicates and normalizes numbers, so it cannot be the source of truth. A row stores
//! the exact JSON line we produced, as `line_text`, or, from 4 KiB on, as a zstd frame in
//! `line_zstd` when that is strictly smaller (as the `SQLite` codec does). The other columns
//! are copies for querying and are never read back into events.
//!
//! # Writers, leases and fencing
//!
//! A backend instance writes a session under a **lease**: an epoch number, a holder id (one
//! uuid per instance) and an expiry (`lease_ttl` after the last write, 30 s by default). The
//! first publication of a session takes epoch 1. A write by an instance that holds no lease
//! on the session takes it over when it is released or expired, with the epoch plus one, and
//! fails with [`Error::LeaseHeld`] while another holder's lease is live (after waiting up to
//! `lease_wait`). [`session_persist::Backend::release`] and
//! [`session_persist::Backend::close`] give leases up.
//!
//! Every append is **one transaction**: `SELECT ... FOR UPDATE` on the session row, then the
//! checks, then the rows. The epoch this instance holds must still be the stored one, else
//! [`Error::LeaseLost`]; the batch must start at the stored `next_seq`, else
//! [`Error::AppendStart`]. Both are checked before anything is written, under the row lock,
//! so two writers can never interleave, duplicate or skip a seq. Repairs
//! ([`session_persist::Backend::commit_repair`]) are one transaction under the same checks. A
//! bulk publication of a new session ([`session_persist::Backend::publish_batches`], used by
//! `sessionctl fork` and `convert`) is one transaction too: the session row, then each batch
//! packed as its own append packs it, sent a group of batches at a time so that memory holds
//! one group's rows, not the session's.
//!
//! **A lease that expires while its holder is alive.** Expiry alone changes nothing stored:
//! if nobody took the session over, the holder's next append finds its epoch unchanged and
//! renews the lease. Once another writer has taken it over (epoch + 1), the old holder's next
//! append fails with [`Error::LeaseLost`] and writes nothing; to write again it must
//! re-acquire ([`session_persist::Backend::release`], then write), which succeeds only when the
//! new holder's lease is released or expired. There is no split brain: the epoch is compared
//! in the same transaction that writes, under the row lock, so at most one epoch can commit
//! a given seq.
//!
//! # Lost connections
//!
//! An append whose connection breaks before `COMMIT` was sent changed nothing (the server rolls
//! the transaction back). When it breaks while the `COMMIT` is in flight the outcome is
//! unknown, and it is settled by re-reading the tail on a new connection, never by a blind
//! retry: the read first takes the session's advisory lock and a `FOR SHARE` lock on its row,
//! which wait until the broken connection's transaction is decided, then compares the stored
//! rows of the batch's seqs with the batch, byte for byte. A whole, identical batch is success;
//! an absent batch is retried once (the retry re-checks the lease and the next seq); anything
//! else is [`Error::CommitOutcomeMismatch`]. A publication is settled the same way, group by
//! group: no session row is absent (the publication is retried once), a session whose tail
//! and every row match is success.
//!
//! # Reads
//!
//! Reads are `REPEATABLE READ, READ ONLY` transactions. The log is never torn (every write is
//! atomic), so any damage is an error naming the session and the row's seq.
//! [`session_persist::Backend::load_stored_from`] reads only the rows whose `last_seq` reaches
//! the requested seq; [`PostgresBackend::list_page`] pages through headers without touching
//! events; [`PostgresBackend::fork_stored`] creates a fork child's seed inside the database.
//!
//! **Takeover.** A writer that died leaves its leases live until they expire (`lease_ttl` after
//! its last write). [`PostgresOptions::take_over`] takes a live lease over at once (epoch plus
//! one), for an operator who knows the holder is dead; a holder that comes back is fenced.
//!
//! **No advisory lock is load-bearing.** Advisory locks (on by default,
//! [`PostgresOptions::advisory_locks`]) only serialize a first publication, migrations and the
//! settling read earlier; the row lock, the epoch and the next seq decide. Every statement is in
//! [`sql`], keyed by the session id, so the tables can be distributed by it
//! (`docs/postgres.md`: Citus, `CockroachDB`, `YugabyteDB`).
//!
//! # Pool
//!
//! At most [`PostgresOptions::pool_size`] connections; an operation waits for one at most
//! [`PostgresOptions::pool_timeout`], then fails with [`Error::PoolTimeout`].
//!
//! # TLS
//!
//! With the `tls` cargo feature (default), connections use rustls (ring provider) with libpq's
//! `sslmode` (`disable`, `prefer` by default, `require`, `verify-ca`, `verify-full`), roots from
//! `sslrootcert` or the system store, and a client certificate from `sslcert`/`sslkey`, all
//! read from the connection string ([`conninfo`]). Without the feature, a mode that requires
//! TLS is refused with [`Error::TlsUnavailable`]. No error shows the connection string.

pub mod backend;
pub mod codec;
pub mod conninfo;
mod error;
mod pool;
pub mod schema;
pub mod sql;
#[cfg(feature = "tls")]
mod tls;

pub use backend::{
    DEFAULT_CONNECT_TIMEOUT, DEFAULT_LEASE_TTL, DEFAULT_POOL_SIZE, DEFAULT_POOL_TIMEOUT,
    DEFAULT_URL, PostgresBackend, PostgresOptions,
};
pub use error::{Error, Result};
pub use tokio_postgres;

/// The backend's name, used in diagnostics.
pub const BACKEND_NAME: &str = "session-persistence-postgres";
