//! The async backend: [`PostgresBackend`], implementing [`session_persist::Backend`].
//!
//! Every operation checks a connection out of the backend's pool (see [`PostgresOptions`]),
//! runs one transaction on it and hands it back. Reads run `REPEATABLE READ, READ ONLY`, so a
//! read sees one snapshot of the session row and its event rows. Writes follow the lease
//! protocol described in the [crate documentation](crate).

use std::collections::HashMap;
use std::ops::Range;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use session_core::json::{self, Value};
use session_core::{Event, SessionHeader};
use session_persist::{Backend, FormatRefusal, Revision, StoredPrefix, StoredSuffix, TornMarker};
use tokio_postgres::config::SslMode as DriverSslMode;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Config, GenericClient, IsolationLevel, Row, Transaction};

use crate::BACKEND_NAME;
use crate::codec::{self, EventRow};
use crate::conninfo::{self, ConnInfo, TlsParams};
use crate::error::{Error, Result};
use crate::pool::{Connector, Pool};
use crate::schema::{self, SESSION_LOCK_CLASS};
use crate::sql;

mod outcome;
mod page;
mod publish;
mod read;
mod rows;

use self::read::decode_window;

use self::rows::{
    SessionRow, event_rows, insert_rows, ms, row_header, row_meta, session_row, to_i64, to_u64,
};

/// The default connection string.
pub const DEFAULT_URL: &str = "host=127.0.0.1 port=5432 user=postgres dbname=test";

/// The default number of pooled connections.
pub const DEFAULT_POOL_SIZE: usize = 8;

/// The default writer-lease duration.
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(30);

/// The default connect timeout.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The default pool checkout timeout.
pub const DEFAULT_POOL_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a resolution read waits for an undecided transaction's locks.
const RESOLVE_LOCK_TIMEOUT: &str = "30s";

/// The backend's options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostgresOptions {
    /// The schema that holds the tables (created when missing). `None`: the connection's
    /// default `search_path`. When set, every pooled connection starts with
    /// `options=-csearch_path=<schema>`.
    pub schema: Option<String>,
    /// The most connections the pool opens (default 8).
    pub pool_size: usize,
    /// How long a writer lease lasts after its last write (default 30 s).
    pub lease_ttl: Duration,
    /// How long a write waits for another writer's live lease to expire before failing with
    /// [`Error::LeaseHeld`] (default 0: fail at once).
    pub lease_wait: Duration,
    /// The connect timeout (default 5 s).
    pub connect_timeout: Duration,
    /// How long an operation waits for a pooled connection while all `pool_size` are checked
    /// out before failing with [`Error::PoolTimeout`] (default 30 s).
    pub pool_timeout: Duration,
    /// Whether to take `PostgreSQL` advisory locks (default on). They only make contention
    /// cheaper (the first publication of a session, migrations, the settling read after an
    /// unknown commit outcome); correctness rests on the row lock, the lease epoch and the
    /// checked next seq. Turn them off on systems whose advisory locks are stubs or missing
    /// (see `docs/postgres.md`).
    pub advisory_locks: bool,
    /// Operator takeover (default off): a write to a session whose lease another holder still
    /// holds takes it over at once, with the epoch plus one, instead of failing with
    /// [`Error::LeaseHeld`]. The old holder's next write is fenced ([`Error::LeaseLost`]).
    /// Only for a holder known to be dead or stopped.
    pub take_over: bool,
    /// Whether `connect` creates the schema and applies the migrations (default on). Off,
    /// connecting only reads: a missing schema is created by the first write, and until then
    /// every read answers as an empty store does (no session, an empty listing).
    pub create_schema: bool,
}

impl Default for PostgresOptions {
    fn default() -> PostgresOptions {
        PostgresOptions {
            schema: None,
            pool_size: DEFAULT_POOL_SIZE,
            lease_ttl: DEFAULT_LEASE_TTL,
            lease_wait: Duration::ZERO,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            pool_timeout: DEFAULT_POOL_TIMEOUT,
            advisory_locks: true,
            take_over: false,
            create_schema: true,
        }
    }
}

impl PostgresOptions {
    /// Uses `schema` for the tables.
    #[must_use]
    pub fn schema(mut self, schema: impl Into<String>) -> PostgresOptions {
        self.schema = Some(schema.into());
        self
    }

    /// Sets the pool size.
    #[must_use]
    pub fn pool_size(mut self, size: usize) -> PostgresOptions {
        self.pool_size = size;
        self
    }

    /// Sets the lease duration.
    #[must_use]
    pub fn lease_ttl(mut self, ttl: Duration) -> PostgresOptions {
        self.lease_ttl = ttl;
        self
    }

    /// Sets how long a write waits for another writer's lease to expire.
    #[must_use]
    pub fn lease_wait(mut self, wait: Duration) -> PostgresOptions {
        self.lease_wait = wait;
        self
    }

    /// Sets the connect timeout.
    #[must_use]
    pub fn connect_timeout(mut self, timeout: Duration) -> PostgresOptions {
        self.connect_timeout = timeout;
        self
    }

    /// Creates the schema on connect (the default), or only at the first write.
    #[must_use]
    pub fn create_schema(mut self, create: bool) -> PostgresOptions {
        self.create_schema = create;
        self
    }

    /// Sets the pool checkout timeout.
    #[must_use]
    pub fn pool_timeout(mut self, timeout: Duration) -> PostgresOptions {
        self.pool_timeout = timeout;
        self
    }

    /// Turns advisory locks on or off.
    #[must_use]
    pub fn advisory_locks(mut self, on: bool) -> PostgresOptions {
        self.advisory_locks = on;
        self
    }

    /// Turns operator takeover on or off.
    #[must_use]
    pub fn take_over(mut self, on: bool) -> PostgresOptions {
        self.take_over = on;
        self
    }
}

/// How one append attempt ended when it did not succeed.
enum Failure {
    /// Nothing was committed.
    Definite(Error),
    /// The connection broke while the commit was in flight: the outcome is unknown.
    CommitUnknown(Error),
}

/// One write transaction's work.
#[derive(Clone, Copy)]
enum Write<'a> {
    /// An append batch's rows, at `first` (`is_materialized`: the session row exists).
    Append {
        meta: &'a SessionHeader,
        rows: &'a [EventRow],
        first: u64,
        is_materialized: bool,
    },
    /// A new session with all of its batches ([`PostgresBackend::publish`]).
    Publish {
        meta: &'a SessionHeader,
        events: &'a [Event],
        batches: &'a [Range<usize>],
    },
}

impl Write<'_> {
    /// The session written.
    fn id(&self) -> &str {
        match self {
            Write::Append { meta, .. } | Write::Publish { meta, .. } => &meta.id,
        }
    }
}

/// What re-reading the tail after an unknown commit outcome showed.
enum Resolution {
    /// The batch is stored, whole and byte-identical; the lease epoch it was written under.
    Committed(i64),
    /// Nothing of the batch is stored.
    Absent,
}

struct Inner {
    pool: Arc<Pool>,
    options: PostgresOptions,
    /// The store identity, once the schema exists (read on connect, or set by the migration
    /// of the first write).
    store_id: OnceLock<String>,
    /// This instance's lease-holder id.
    holder: String,
    /// The lease epoch held per session.
    held: Mutex<HashMap<String, i64>>,
    closed: AtomicBool,
}

/// The `PostgreSQL` session-persistence backend (`session-persistence-postgres`): every
/// session of a store in one schema, written through fenced writer leases. See the
/// [crate documentation](crate).
#[derive(Clone)]
pub struct PostgresBackend {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for PostgresBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresBackend")
            .field("store_id", &self.inner.store_id)
            .field("holder", &self.inner.holder)
            .field("options", &self.inner.options)
            .finish_non_exhaustive()
    }
}

/// Whether `name` is a plain schema name (letters, digits, `_`; not starting with a digit).
fn valid_schema_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit())
}

impl PostgresBackend {
    /// Connects with a connection string (`postgres://user@host:port/db?...` or
    /// `host=... user=... dbname=...`), applies the migrations and returns the backend.
    ///
    /// Besides `tokio-postgres`'s parameters, the string may carry libpq's TLS parameters
    /// (`sslmode`, `sslrootcert`, `sslcert`, `sslkey`) and backend options that override
    /// `options` (`lease_ttl_ms`, `lease_wait_ms`, `pool_size`, `pool_timeout_ms`,
    /// `advisory_locks`): see [`crate::conninfo`].
    pub async fn connect(url: &str, mut options: PostgresOptions) -> Result<PostgresBackend> {
        // The connection string is not echoed: it may hold a password.
        let info = ConnInfo::parse(url)?;
        info.apply(&mut options)?;
        let config = Config::from_str(&info.driver)
            .map_err(|e| Error::InvalidConfig(format!("the connection string: {e}")))?;
        PostgresBackend::open(config, &info.tls, options).await
    }

    /// Connects with a parsed configuration (see [`PostgresBackend::connect`]); its
    /// `sslmode` (`disable`, `prefer`, `require`) is read as libpq's, with the system roots.
    pub async fn from_config(config: Config, options: PostgresOptions) -> Result<PostgresBackend> {
        let tls = TlsParams {
            mode: match config.get_ssl_mode() {
                DriverSslMode::Disable => conninfo::SslMode::Disable,
                DriverSslMode::Require => conninfo::SslMode::Require,
                _ => conninfo::SslMode::Prefer,
            },
            ..TlsParams::default()
        };
        PostgresBackend::open(config, &tls, options).await
    }

    async fn open(
        mut config: Config,
        tls: &TlsParams,
        options: PostgresOptions,
    ) -> Result<PostgresBackend> {
        let connector = connector(tls)?;
        let plain = matches!(connector, Connector::Plain);
        config.ssl_mode(match tls.mode {
            _ if plain => DriverSslMode::Disable,
            conninfo::SslMode::Disable => DriverSslMode::Disable,
            conninfo::SslMode::Prefer => DriverSslMode::Prefer,
            _ => DriverSslMode::Require,
        });
        if let Some(schema) = &options.schema {
            if !valid_schema_name(schema) {
                return Err(Error::InvalidConfig(format!(
                    "schema {schema:?} must be 1 to 63 ASCII letters, digits or '_', not \
                     starting with a digit"
                )));
            }
            let search_path = format!("-csearch_path={schema}");
            let combined = match config.get_options() {
                Some(given) if !given.trim().is_empty() => format!("{given} {search_path}"),
                _ => search_path,
            };
            config.options(combined);
        }
        if options.pool_size == 0 {
            return Err(Error::InvalidConfig(
                "pool_size must be at least 1".to_owned(),
            ));
        }
        config.connect_timeout(options.connect_timeout);
        if config.get_application_name().is_none() {
            config.application_name(BACKEND_NAME);
        }
        let pool = Pool::new(
            config,
            connector,
            options.pool_size,
            options.connect_timeout,
            options.pool_timeout,
        );
        let mut conn = pool.get().await?;
        let store_id = OnceLock::new();
        let found = if options.create_schema {
            Some(
                schema::migrate(
                    conn.client(),
                    options.schema.as_deref(),
                    options.advisory_locks,
                )
                .await?,
            )
        } else {
            schema::probe(conn.client()).await?
        };
        if let Some(id) = found {
            let _ = store_id.set(id);
        }
        let holder: String = conn
            .client()
            .query_one("SELECT gen_random_uuid()::text", &[])
            .await
            .and_then(|row| row.try_get(0))
            .map_err(Error::pg("connect"))?;
        conn.done();
        Ok(PostgresBackend {
            inner: Arc::new(Inner {
                pool,
                options,
                store_id,
                holder,
                held: Mutex::new(HashMap::new()),
                closed: AtomicBool::new(false),
            }),
        })
    }

    /// The options.
    pub fn options(&self) -> &PostgresOptions {
        &self.inner.options
    }

    /// The store identity (a uuid created with the schema); part of every revision. `None`
    /// while the schema does not exist (see [`PostgresOptions::create_schema`]).
    pub fn store_id(&self) -> Option<&str> {
        self.inner.store_id.get().map(String::as_str)
    }

    /// Whether the schema exists: known from connect or an earlier call, else read again
    /// (another process may have created it since). Reads nothing else and writes nothing.
    async fn has_schema(&self) -> Result<bool> {
        if self.inner.store_id.get().is_some() {
            return Ok(true);
        }
        let mut conn = self.inner.pool.get().await?;
        let found = schema::probe(conn.client()).await?;
        conn.done();
        Ok(found.is_some_and(|id| {
            let _ = self.inner.store_id.set(id);
            true
        }))
    }

    /// Creates the schema and applies the migrations when this instance has not seen them
    /// (before the first write of an instance connected without
    /// [`PostgresOptions::create_schema`]).
    async fn ensure_schema(&self) -> Result<()> {
        if self.inner.store_id.get().is_some() {
            return Ok(());
        }
        let mut conn = self.inner.pool.get().await?;
        let id = schema::migrate(
            conn.client(),
            self.inner.options.schema.as_deref(),
            self.inner.options.advisory_locks,
        )
        .await?;
        conn.done();
        let _ = self.inner.store_id.set(id);
        Ok(())
    }

    /// The lease epoch this instance holds on `id`, if any.
    pub fn held_epoch(&self, id: &str) -> Option<i64> {
        self.held().get(id).copied()
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<String, i64>> {
        self.inner
            .held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn check_open(&self) -> Result<()> {
        if self.inner.closed.load(Ordering::SeqCst) {
            Err(Error::Closed)
        } else {
            Ok(())
        }
    }

    fn revision(&self, row: &SessionRow) -> Revision {
        Revision::new(format!(
            "postgres:store:{}:incarnation:{}:revision:{}",
            self.store_id().unwrap_or_default(),
            row.incarnation,
            row.revision
        ))
    }

    /// [`Backend::load_stored`] with this crate's error type. The stored log is never torn:
    /// every write is one transaction, so any damage is an error naming the row.
    pub async fn load(&self, id: &str) -> Result<Option<StoredPrefix>> {
        let Some((row, rows)) = self
            .read_session(id, |_| Some((sql::EVENTS_ALL, Vec::new())))
            .await?
        else {
            return Ok(None);
        };
        let (meta, header_value) = row_meta(&row)?;
        let events = codec::decode_rows(id, &rows, 0)?;
        if events.len() as u64 != to_u64(row.next_seq) {
            return Err(Error::corrupt(
                id,
                None,
                format!(
                    "next_seq is {} but {} events are stored",
                    row.next_seq,
                    events.len()
                ),
            ));
        }
        Ok(Some(StoredPrefix {
            meta,
            header_value,
            events,
            invalid_envelope: None,
            revision: self.revision(&row),
            torn: None,
        }))
    }

    /// [`Backend::read_stored_revision`] with this crate's error type.
    pub async fn read_revision(&self, id: &str) -> Result<Option<Revision>> {
        self.check_open()?;
        if !self.has_schema().await? {
            return Ok(None);
        }
        let mut conn = self.inner.pool.get().await?;
        let row = session_row(conn.client(), id, sql::SESSION_ROW).await?;
        conn.done();
        Ok(row.map(|r| self.revision(&r)))
    }

    /// The stored next seq of `id` (`None`: no such session).
    pub async fn next_seq(&self, id: &str) -> Result<Option<u64>> {
        self.check_open()?;
        if !self.has_schema().await? {
            return Ok(None);
        }
        let mut conn = self.inner.pool.get().await?;
        let row = session_row(conn.client(), id, sql::SESSION_ROW).await?;
        conn.done();
        Ok(row.map(|r| to_u64(r.next_seq)))
    }

    /// [`Backend::load_stored_from`] with this crate's error type: reads only the rows whose
    /// last seq is at least `from_seq`.
    pub async fn load_from(&self, id: &str, from_seq: u64) -> Result<Option<StoredSuffix>> {
        let select = |_: &SessionRow| Some((sql::EVENTS_FROM, vec![to_i64(from_seq)]));
        let Some((row, rows)) = self.read_session(id, select).await? else {
            return Ok(None);
        };
        let (meta, header_value) = row_meta(&row)?;
        let events = decode_window(id, &rows, from_seq, u64::MAX)?;
        let end = events.last().map_or(from_seq, |e| e.seq() + 1);
        if from_seq < to_u64(row.next_seq) && end != to_u64(row.next_seq) {
            return Err(Error::corrupt(
                id,
                None,
                format!(
                    "next_seq is {} but the stored rows end at {end}",
                    row.next_seq
                ),
            ));
        }
        Ok(Some(StoredSuffix {
            meta,
            header_value,
            events,
        }))
    }

    /// The headers of stored sessions in id order, at most `limit`, after `after` (exclusive).
    /// Pass the last id of a page as `after` to read the next one; a page shorter than
    /// `limit` is the last.
    pub async fn list_page(&self, after: Option<&str>, limit: u32) -> Result<Vec<SessionHeader>> {
        self.check_open()?;
        if !self.has_schema().await? {
            return Ok(Vec::new());
        }
        let mut conn = self.inner.pool.get().await?;
        let limit = i64::from(limit);
        let rows = conn
            .client()
            .query(sql::LIST_PAGE, &[&after, &limit])
            .await
            .map_err(Error::pg("list"))?;
        conn.done();
        rows.iter()
            .map(|r| SessionRow::decode(r, "").map(|s| row_header(&s)))
            .collect()
    }

    /// Every session header with its revision (unordered).
    pub async fn snapshots(&self) -> Result<Vec<(SessionHeader, Revision)>> {
        self.check_open()?;
        if !self.has_schema().await? {
            return Ok(Vec::new());
        }
        let mut conn = self.inner.pool.get().await?;
        let rows = conn
            .client()
            .query(sql::LIST_ALL, &[])
            .await
            .map_err(Error::pg("list"))?;
        conn.done();
        rows.iter()
            .map(|r| {
                let row = SessionRow::decode(r, "")?;
                Ok((row_header(&row), self.revision(&row)))
            })
            .collect()
    }

    /// Locks the session row of a write (`SELECT ... FOR UPDATE`) and checks the lease:
    /// the epoch this instance holds must still be the stored one (else
    /// [`Error::LeaseLost`]); without a held epoch, a live lease of another writer is
    /// [`Error::LeaseHeld`] and anything else is taken over with the epoch plus one. Returns
    /// the row and the epoch to write under.
    async fn lock_for_write(&self, tx: &Transaction<'_>, id: &str) -> Result<(SessionRow, i64)> {
        let Some(row) = session_row(tx, id, sql::SESSION_ROW_FOR_UPDATE).await? else {
            return Err(Error::SessionMissing { id: id.to_owned() });
        };
        let mine = row.lease_holder.as_deref() == Some(self.inner.holder.as_str());
        if let Some(held) = self.held_epoch(id) {
            if row.lease_epoch != held || !mine {
                return Err(Error::LeaseLost {
                    id: id.to_owned(),
                    held,
                    current: row.lease_epoch,
                });
            }
            return Ok((row, held));
        }
        if row.lease_live && !mine && !self.inner.options.take_over {
            return Err(Error::LeaseHeld {
                id: id.to_owned(),
                epoch: row.lease_epoch,
                expires_in_ms: row.lease_ms,
            });
        }
        let epoch = row.lease_epoch + 1;
        Ok((row, epoch))
    }

    /// How long to sleep before trying a write again while another writer's lease is live
    /// (until it expires, bounded by what is left of `lease_wait`); `None`: give up.
    fn lease_nap(&self, started: Instant, expires_in_ms: i64) -> Option<Duration> {
        let left = self
            .inner
            .options
            .lease_wait
            .checked_sub(started.elapsed())
            .filter(|d| !d.is_zero())?;
        Some(Duration::from_millis(to_u64(expires_in_ms) + 5).min(left))
    }

    /// One write attempt (an append or a publication): one transaction. Returns the lease
    /// epoch the write committed under.
    async fn try_write(&self, write: &Write<'_>) -> std::result::Result<i64, Failure> {
        let mut conn = self.inner.pool.get().await.map_err(Failure::Definite)?;
        let tx = conn
            .client()
            .transaction()
            .await
            .map_err(|e| Failure::Definite(Error::pg("begin")(e)))?;
        let written = match *write {
            Write::Append {
                meta,
                rows,
                first,
                is_materialized,
            } => {
                self.append_in(&tx, meta, rows, first, is_materialized)
                    .await
            }
            Write::Publish {
                meta,
                events,
                batches,
            } => self.publish_in(&tx, meta, events, batches).await,
        };
        let epoch = match written {
            Ok(epoch) => epoch,
            Err(e) => {
                // A refusal (lease, seq) leaves a healthy connection: roll back and keep it.
                if !matches!(e, Error::Postgres { .. }) && tx.rollback().await.is_ok() {
                    conn.done();
                }
                return Err(Failure::Definite(e));
            }
        };
        match tx.commit().await {
            Ok(()) => {
                conn.done();
                Ok(epoch)
            }
            Err(e) if e.as_db_error().is_none() => {
                Err(Failure::CommitUnknown(Error::pg("commit")(e)))
            }
            Err(e) => Err(Failure::Definite(Error::pg("commit")(e))),
        }
    }

    async fn append_in(
        &self,
        tx: &Transaction<'_>,
        meta: &SessionHeader,
        rows: &[EventRow],
        first: u64,
        is_materialized: bool,
    ) -> Result<i64> {
        let id = &*meta.id;
        let last = rows.last().map_or(first, |r| to_u64(r.last_seq));
        let ttl = ms(self.inner.options.lease_ttl);
        let epoch = if is_materialized {
            let (row, epoch) = self.lock_for_write(tx, id).await?;
            if to_u64(row.next_seq) != first {
                return Err(Error::AppendStart {
                    id: id.to_owned(),
                    first,
                    expected: to_u64(row.next_seq),
                });
            }
            tx.execute_typed(
                sql::UPDATE_AFTER_WRITE,
                &[
                    (&id, Type::TEXT),
                    (&to_i64(last + 1), Type::INT8),
                    (&to_i64(first), Type::INT8),
                    (&epoch, Type::INT8),
                    (&self.inner.holder, Type::TEXT),
                    (&ttl, Type::INT8),
                ],
            )
            .await
            .map_err(Error::pg("append"))?;
            epoch
        } else {
            if first != 0 {
                return Err(Error::AppendStart {
                    id: id.to_owned(),
                    first,
                    expected: 0,
                });
            }
            self.insert_session(tx, meta, last + 1, 0).await?
        };
        insert_rows(tx, id, rows).await?;
        Ok(epoch)
    }

    /// Inserts a new session row leased to this instance at epoch 1 (under the session's
    /// advisory lock); refuses an existing one.
    async fn insert_session(
        &self,
        tx: &Transaction<'_>,
        meta: &SessionHeader,
        next_seq: u64,
        last_batch_seq: u64,
    ) -> Result<i64> {
        let id = &*meta.id;
        if self.inner.options.advisory_locks {
            tx.execute(sql::SESSION_ADVISORY_LOCK, &[&SESSION_LOCK_CLASS, &id])
                .await
                .map_err(Error::pg("append"))?;
        }
        let header = meta.to_value().to_json();
        let inserted = tx
            .query_opt(
                sql::INSERT_SESSION,
                &[
                    &id,
                    &to_i64(meta.created_at),
                    &meta.cwd.as_deref(),
                    &meta.parent_session.as_deref(),
                    &meta.seed_length.map(to_i64),
                    &meta.origin_subagent.then_some("subagent"),
                    &meta.delegation_depth.map(to_i64),
                    &meta.agent_preset.as_deref(),
                    &header,
                    &to_i64(next_seq),
                    &to_i64(last_batch_seq),
                    &self.inner.holder,
                    &ms(self.inner.options.lease_ttl),
                ],
            )
            .await
            .map_err(Error::pg("append"))?;
        match inserted {
            Some(row) => row.try_get(0).map_err(Error::pg("append")),
            None => Err(Error::AlreadyMaterialized { id: id.to_owned() }),
        }
    }

    /// [`Backend::append_batch`] with this crate's error type.
    ///
    /// One transaction: lock the session row, check the lease epoch and the next seq, insert
    /// the rows, bump the revision, renew the lease. When the connection breaks while the
    /// commit is in flight, the tail is re-read: a stored, byte-identical
    /// batch is success; an absent one is retried once (the retry re-checks everything).
    pub async fn append(
        &self,
        meta: &SessionHeader,
        events: &[Event],
        is_materialized: bool,
    ) -> Result<()> {
        self.check_open()?;
        let Some(first) = events.first().map(Event::seq) else {
            return Ok(());
        };
        self.ensure_schema().await?;
        let rows = codec::pack_batch(events)?;
        self.write(Write::Append {
            meta,
            rows: &rows,
            first,
            is_materialized,
        })
        .await
    }

    /// Runs `write` to its end: one transaction ([`PostgresBackend::try_write`]), again while
    /// another writer's lease is live (up to `lease_wait`), and, when the commit outcome is
    /// unknown, decided by re-reading what was written ([`PostgresBackend::decide`]): a stored
    /// write is success, an absent one is tried once more. On success this instance holds the
    /// session's lease at the epoch written.
    async fn write(&self, write: Write<'_>) -> Result<()> {
        let id = write.id();
        let started = Instant::now();
        let mut unknown_tries = 0;
        loop {
            match self.try_write(&write).await {
                Ok(epoch) => {
                    self.held().insert(id.to_owned(), epoch);
                    return Ok(());
                }
                Err(Failure::Definite(Error::LeaseHeld {
                    id: held_id,
                    epoch,
                    expires_in_ms,
                })) => {
                    let Some(nap) = self.lease_nap(started, expires_in_ms) else {
                        return Err(Error::LeaseHeld {
                            id: held_id,
                            epoch,
                            expires_in_ms,
                        });
                    };
                    tokio::time::sleep(nap).await;
                }
                Err(Failure::Definite(e)) => return Err(e),
                Err(Failure::CommitUnknown(e)) => {
                    unknown_tries += 1;
                    match self.decide(&write).await? {
                        Resolution::Committed(epoch) => {
                            self.held().insert(id.to_owned(), epoch);
                            return Ok(());
                        }
                        Resolution::Absent if unknown_tries < 2 => {}
                        Resolution::Absent => return Err(e),
                    }
                }
            }
        }
    }

    /// [`Backend::commit_repair`] with this crate's error type; `torn` is the seq marker.
    /// One transaction under the same lease check as an append (waiting up to `lease_wait`
    /// for another writer's lease).
    pub async fn repair(
        &self,
        meta: &SessionHeader,
        torn: Option<u64>,
        closers: &[Event],
    ) -> Result<()> {
        self.check_open()?;
        if torn.is_none() && closers.is_empty() {
            return Ok(());
        }
        self.ensure_schema().await?;
        let rows = closers
            .iter()
            .map(codec::bind_event)
            .collect::<Result<Vec<_>>>()?;
        let started = Instant::now();
        loop {
            match self.try_repair(meta, torn, closers, &rows).await {
                Err(Error::LeaseHeld {
                    id,
                    epoch,
                    expires_in_ms,
                }) => {
                    let Some(nap) = self.lease_nap(started, expires_in_ms) else {
                        return Err(Error::LeaseHeld {
                            id,
                            epoch,
                            expires_in_ms,
                        });
                    };
                    tokio::time::sleep(nap).await;
                }
                other => return other,
            }
        }
    }

    async fn try_repair(
        &self,
        meta: &SessionHeader,
        torn: Option<u64>,
        closers: &[Event],
        rows: &[EventRow],
    ) -> Result<()> {
        let id = &*meta.id;
        let mut conn = self.inner.pool.get().await?;
        let tx = conn
            .client()
            .transaction()
            .await
            .map_err(Error::pg("repair"))?;
        let (row, epoch) = self.lock_for_write(&tx, id).await?;
        let mut next = to_u64(row.next_seq);
        if let Some(marker) = torn {
            if marker > next {
                return Err(Error::StaleRepair {
                    id: id.to_owned(),
                    marker,
                    next_seq: next,
                });
            }
            let straddling = event_rows(&tx, id, sql::EVENTS_STRADDLING, &[to_i64(marker)]).await?;
            if !straddling.is_empty() {
                return Err(Error::StaleRepair {
                    id: id.to_owned(),
                    marker,
                    next_seq: next,
                });
            }
            tx.execute(sql::DELETE_FROM, &[&id, &to_i64(marker)])
                .await
                .map_err(Error::pg("repair"))?;
            next = marker;
        }
        if let Some(first) = closers.first() {
            if first.seq() != next {
                return Err(Error::StaleCloser {
                    id: id.to_owned(),
                    seq: first.seq(),
                    expected: next,
                });
            }
            insert_rows(&tx, id, rows).await?;
            next += closers.len() as u64;
        }
        tx.execute_typed(
            sql::UPDATE_AFTER_WRITE,
            &[
                (&id, Type::TEXT),
                (&to_i64(next), Type::INT8),
                (
                    &to_i64(closers.first().map_or(next, Event::seq)),
                    Type::INT8,
                ),
                (&epoch, Type::INT8),
                (&self.inner.holder, Type::TEXT),
                (&ms(self.inner.options.lease_ttl), Type::INT8),
            ],
        )
        .await
        .map_err(Error::pg("repair"))?;
        tx.commit().await.map_err(Error::pg("repair"))?;
        conn.done();
        self.held().insert(id.to_owned(), epoch);
        Ok(())
    }

    /// Server-side fork: creates `child` (a header naming its parent and seed length) holding
    /// the first `seed_length` events of `parent`, inside the database with
    /// `INSERT ... SELECT`: whole rows are copied without passing through the client; only a
    /// packed row that straddles the boundary is read, cut and re-packed. The child is leased to
    /// this instance. The boundary is taken as given (resolve it with the fork rules first).
    ///
    /// A live child with the same id and the same seed created afterwards (for example by
    /// `SessionStore::fork` under the persistence service) adopts this stored seed and persists
    /// only what follows it.
    pub async fn fork_stored(
        &self,
        parent: &str,
        child: &SessionHeader,
        seed_length: u64,
    ) -> Result<()> {
        self.check_open()?;
        let child_id = &*child.id;
        let refuse = |why: String| Error::Fork {
            parent: parent.to_owned(),
            child: child_id.to_owned(),
            why,
        };
        if seed_length == 0 {
            return Err(refuse("the seed is empty".to_owned()));
        }
        self.ensure_schema().await?;
        let mut conn = self.inner.pool.get().await?;
        let tx = conn
            .client()
            .transaction()
            .await
            .map_err(Error::pg("fork"))?;
        let Some(source) = session_row(&tx, parent, sql::SESSION_ROW_FOR_SHARE).await? else {
            return Err(refuse("the parent is not stored".to_owned()));
        };
        if to_u64(source.next_seq) < seed_length {
            return Err(refuse(format!(
                "the parent stores {} events, fewer than the seed length {seed_length}",
                source.next_seq
            )));
        }
        let epoch = self.insert_session(&tx, child, seed_length, 0).await?;
        let seed = to_i64(seed_length);
        tx.execute(sql::FORK_COPY, &[&parent, &child_id, &seed])
            .await
            .map_err(Error::pg("fork"))?;
        let straddling = event_rows(&tx, parent, sql::EVENTS_STRADDLING, &[seed]).await?;
        if let Some(row) = straddling.first() {
            let mut events = codec::decode_row(parent, row)?;
            events.retain(|e| e.seq() < seed_length);
            insert_rows(&tx, child_id, &codec::pack_batch(&events)?).await?;
        }
        tx.commit().await.map_err(Error::pg("fork"))?;
        conn.done();
        self.held().insert(child_id.to_owned(), epoch);
        Ok(())
    }

    /// [`Backend::release`] with this crate's error type: gives up the lease on `id` (only if
    /// it is still this instance's at the held epoch). The next write re-acquires it.
    pub async fn release_lease(&self, id: &str) -> Result<()> {
        let Some(epoch) = self.held().remove(id) else {
            return Ok(());
        };
        if self.inner.closed.load(Ordering::SeqCst) {
            return Ok(());
        }
        let mut conn = self.inner.pool.get().await?;
        conn.client()
            .execute(sql::RELEASE_LEASE, &[&id, &epoch, &self.inner.holder])
            .await
            .map_err(Error::pg("release"))?;
        conn.done();
        Ok(())
    }

    /// [`Backend::close`] with this crate's error type: releases every held lease, then
    /// closes the pool. Later operations fail with [`Error::Closed`].
    pub async fn shutdown(&self) -> Result<()> {
        if self.inner.closed.load(Ordering::SeqCst) {
            return Ok(());
        }
        let held: Vec<String> = self.held().keys().cloned().collect();
        let mut first_error = None;
        for id in held {
            if let Err(e) = self.release_lease(&id).await {
                first_error.get_or_insert(e);
            }
        }
        self.inner.closed.store(true, Ordering::SeqCst);
        self.inner.pool.close();
        first_error.map_or(Ok(()), Err)
    }
}

/// The connector for `tls`: plain TCP for `disable`; rustls otherwise (a build without the
/// `tls` feature connects `prefer` in plain TCP and refuses the modes that require TLS).
fn connector(tls: &TlsParams) -> Result<Connector> {
    if tls.mode == conninfo::SslMode::Disable {
        return Ok(Connector::Plain);
    }
    #[cfg(feature = "tls")]
    {
        Ok(Connector::Tls(crate::tls::connector(tls)?))
    }
    #[cfg(not(feature = "tls"))]
    {
        if tls.mode.requires_tls() || tls.cert.is_some() {
            return Err(Error::TlsUnavailable);
        }
        Ok(Connector::Plain)
    }
}

async fn read_tx(client: &mut tokio_postgres::Client) -> Result<Transaction<'_>> {
    client
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await
        .map_err(Error::pg("begin"))
}

#[async_trait]
impl Backend for PostgresBackend {
    fn name(&self) -> &str {
        BACKEND_NAME
    }

    async fn load_stored(&self, id: &str) -> session_persist::Result<Option<StoredPrefix>> {
        Ok(self.load(id).await?)
    }

    async fn read_stored_revision(&self, id: &str) -> session_persist::Result<Option<Revision>> {
        Ok(self.read_revision(id).await?)
    }

    fn supports_seek(&self) -> bool {
        true
    }

    async fn load_stored_from(
        &self,
        id: &str,
        from_seq: u64,
    ) -> session_persist::Result<Option<StoredSuffix>> {
        Ok(self.load_from(id, from_seq).await?)
    }

    async fn load_stored_page(
        &self,
        id: &str,
        from_seq: u64,
        max_events: usize,
    ) -> session_persist::Result<Option<session_persist::StoredPage>> {
        Ok(self.load_page(id, from_seq, max_events).await?)
    }

    async fn append_batch(
        &self,
        meta: &SessionHeader,
        events: &[Event],
        is_materialized: bool,
    ) -> session_persist::Result<()> {
        Ok(self.append(meta, events, is_materialized).await?)
    }

    /// One transaction for every batch, each packed as its own append would pack it, the
    /// rows sent a group of batches at a time.
    async fn publish_batches(
        &self,
        meta: &SessionHeader,
        events: Vec<Event>,
        batches: &[Range<usize>],
    ) -> session_persist::Result<()> {
        Ok(self.publish(meta, &events, batches).await?)
    }

    async fn commit_repair(
        &self,
        meta: &SessionHeader,
        torn: Option<TornMarker>,
        closers: &[Event],
    ) -> session_persist::Result<()> {
        let torn = match torn {
            None => None,
            Some(TornMarker::FromSeq(seq)) => Some(seq),
            Some(_) => return Err(Error::ForeignMarker.into()),
        };
        Ok(self.repair(meta, torn, closers).await?)
    }

    async fn list(&self) -> session_persist::Result<Vec<SessionHeader>> {
        Ok(self
            .snapshots()
            .await?
            .into_iter()
            .map(|(m, _)| m)
            .collect())
    }

    async fn list_snapshots(&self) -> session_persist::Result<Vec<(SessionHeader, Revision)>> {
        Ok(self.snapshots().await?)
    }

    async fn release(&self, id: &str) -> session_persist::Result<()> {
        Ok(self.release_lease(id).await?)
    }

    async fn close(&self) -> session_persist::Result<()> {
        Ok(self.shutdown().await?)
    }
}
