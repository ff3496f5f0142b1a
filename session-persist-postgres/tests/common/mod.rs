//! Test support: the server URL, per-test schemas, the backend-suite harness and a TCP proxy
//! that can cut a connection.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use conformance::backend_suite::{Capabilities, Harness, Storages, async_trait};
use session_persist::Backend;
use session_persist_postgres::tokio_postgres::{self, NoTls};
use session_persist_postgres::{DEFAULT_URL, PostgresBackend, PostgresOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The server URL: `SESSION_PG_URL`, or the default.
pub fn pg_url() -> String {
    std::env::var("SESSION_PG_URL").unwrap_or_else(|_| DEFAULT_URL.to_owned())
}

/// The variable that makes a missing server fail the test (`SESSION_PG_REQUIRED=1`).
pub const REQUIRED_ENV: &str = "SESSION_PG_REQUIRED";

/// Whether a missing server must fail the test (`SESSION_PG_REQUIRED=1`).
pub fn required() -> bool {
    conformance::skip::is_set(REQUIRED_ENV)
}

/// Opens a plain client (no pool), spawning its connection on the current runtime.
pub async fn raw_client(url: &str) -> Result<tokio_postgres::Client, String> {
    let config: tokio_postgres::Config = url.parse().map_err(|e| format!("{e}"))?;
    let connecting = config.connect(NoTls);
    let (client, connection) = tokio::time::timeout(Duration::from_secs(3), connecting)
        .await
        .map_err(|_| "connect timed out after 3 s".to_owned())?
        .map_err(|e| match std::error::Error::source(&e) {
            Some(cause) => format!("{e}: {cause}"),
            None => e.to_string(),
        })?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

fn probe() -> Result<(), String> {
    let url = pg_url();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        rt.block_on(async {
            let client = raw_client(&url).await?;
            client
                .simple_query("SELECT 1")
                .await
                .map_err(|e| e.to_string())?;
            sweep_stale_schemas(&client).await;
            Ok(())
        })
    })
    .join()
    .unwrap_or_else(|_| Err("the probe panicked".to_owned()))
}

/// Whether the server is reachable. When it is not: fails the test under
/// `SESSION_PG_REQUIRED=1`, otherwise prints the loud skip line and returns false.
pub fn server_available(test: &str) -> bool {
    static STATE: Mutex<Option<Result<(), String>>> = Mutex::new(None);
    let state = {
        let mut guard = STATE.lock().unwrap_or_else(PoisonError::into_inner);
        guard.get_or_insert_with(probe).clone()
    };
    match state {
        Ok(()) => true,
        Err(cause) => {
            conformance::skip::service_missing(
                REQUIRED_ENV,
                format_args!(
                    "PostgreSQL not reachable at {} ({cause}) [{test}]",
                    pg_url()
                ),
            );
            false
        }
    }
}

static NEXT_SCHEMA: AtomicU64 = AtomicU64::new(0);

/// A unique schema name for this process.
pub fn unique_schema() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "s_{}_{nanos}_{}",
        std::process::id(),
        NEXT_SCHEMA.fetch_add(1, Ordering::Relaxed)
    )
}

/// Drops schemas on a detached thread of its own: the test's runtime must keep running so
/// that connections it dropped can finish (a connection left in a transaction holds locks
/// the drop waits for). Each drop waits at most 1 s for locks and is retried; schemas a
/// killed process left behind are swept by the next run ([`sweep_stale_schemas`]).
pub fn drop_schemas(names: Vec<String>) {
    if names.is_empty() {
        return;
    }
    let url = pg_url();
    std::thread::spawn(move || {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return;
        };
        rt.block_on(async {
            let Ok(client) = raw_client(&url).await else {
                return;
            };
            let _ = client.batch_execute("SET lock_timeout = '1s'").await;
            for name in names {
                for _ in 0..10 {
                    let dropped = client
                        .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{name}\" CASCADE"))
                        .await;
                    if dropped.is_ok() {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        });
    });
}

/// Drops the test schemas (`s_<pid>_...`) of processes that are gone.
async fn sweep_stale_schemas(client: &tokio_postgres::Client) {
    if !cfg!(target_os = "linux") {
        return;
    }
    let Ok(rows) = client
        .query(
            "SELECT nspname::text FROM pg_namespace WHERE nspname ~ '^s_[0-9]+_[0-9]+_[0-9]+$'",
            &[],
        )
        .await
    else {
        return;
    };
    for row in rows {
        let name: String = row.get(0);
        let pid = name.split('_').nth(1).unwrap_or_default();
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = client
                .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{name}\" CASCADE"))
                .await;
        }
    }
}

/// A schema of one test, dropped with it.
pub struct TestSchema {
    pub name: String,
}

impl TestSchema {
    pub fn new() -> TestSchema {
        TestSchema {
            name: unique_schema(),
        }
    }

    pub fn options(&self) -> PostgresOptions {
        PostgresOptions::default().schema(self.name.clone())
    }

    /// A backend on this schema.
    /// A backend of this schema connected through a new [`Proxy`] (a pool of 2), and the proxy.
    pub async fn through_proxy(&self) -> (Proxy, PostgresBackend) {
        let proxy = Proxy::start(upstream()).await;
        let backend = PostgresBackend::connect(&proxy.url(), self.options().pool_size(2))
            .await
            .unwrap();
        (proxy, backend)
    }

    pub async fn backend(&self) -> PostgresBackend {
        self.backend_with(self.options()).await
    }

    pub async fn backend_with(&self, options: PostgresOptions) -> PostgresBackend {
        PostgresBackend::connect(&pg_url(), options).await.unwrap()
    }

    /// A plain client whose search path is this schema.
    pub async fn client(&self) -> tokio_postgres::Client {
        let client = raw_client(&pg_url()).await.unwrap();
        client
            .batch_execute(&format!("SET search_path TO \"{}\"", self.name))
            .await
            .unwrap();
        client
    }
}

impl Drop for TestSchema {
    fn drop(&mut self) {
        drop_schemas(vec![self.name.clone()]);
    }
}

/// The backend-suite harness: every `open` is a new schema; a restart closes the instance and
/// connects a new one on the same schema; a concurrent instance is another connection pool
/// with its own holder id.
#[derive(Default)]
pub struct PostgresHarness {
    storages: Storages<String>,
    schemas: Mutex<Vec<String>>,
}

impl PostgresHarness {
    /// The harness, or `None` (after the loud skip line) without a server.
    pub fn new(test: &str) -> Option<PostgresHarness> {
        server_available(test).then(PostgresHarness::default)
    }

    async fn open_on(&self, schema: &str) -> Arc<dyn Backend> {
        let backend = PostgresBackend::connect(
            &pg_url(),
            PostgresOptions::default().schema(schema.to_owned()),
        )
        .await
        .unwrap_or_else(|e| panic!("PostgresHarness: cannot connect on schema {schema}: {e}"));
        let backend: Arc<dyn Backend> = Arc::new(backend);
        self.storages.register(&backend, schema.to_owned());
        backend
    }

    fn schema_of(&self, backend: &Arc<dyn Backend>) -> String {
        self.storages
            .get(backend)
            .unwrap_or_else(|| panic!("PostgresHarness: the backend was not opened here"))
    }
}

impl Drop for PostgresHarness {
    fn drop(&mut self) {
        let names =
            std::mem::take(&mut *self.schemas.lock().unwrap_or_else(PoisonError::into_inner));
        drop_schemas(names);
    }
}

#[async_trait]
impl Harness for PostgresHarness {
    async fn open(&self) -> Arc<dyn Backend> {
        let schema = unique_schema();
        self.schemas
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(schema.clone());
        self.open_on(&schema).await
    }

    async fn reopen(&self, old: Arc<dyn Backend>) -> Arc<dyn Backend> {
        let schema = self.schema_of(&old);
        let _ = old.close().await;
        drop(old);
        self.open_on(&schema).await
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::none()
            .with_seek()
            .with_writer_lock()
            .with_revision_changes_on_append()
            .with_seq_checks()
    }

    async fn open_concurrent(&self, live: &Arc<dyn Backend>) -> Option<Arc<dyn Backend>> {
        Some(self.open_on(&self.schema_of(live)).await)
    }
}

/// When a [`Proxy`] cuts its connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// Never.
    Never,
    /// After forwarding a client message that contains the simple query `COMMIT` (the
    /// server gets the commit, the client never gets the answer).
    AfterCommit,
    /// Instead of forwarding a client message that contains `COMMIT` (the server never gets
    /// it).
    BeforeCommit,
    /// After forwarding this many more client bytes in total (counted over all connections).
    AfterBytes(u64),
    /// Like `AfterBytes`, then the machine is down: every connection is cut at its next
    /// message and new connections are refused until [`Proxy::up`].
    DieAfterBytes(u64),
}

/// A TCP proxy on 127.0.0.1 in front of the server, whose cut can be armed at any time. A
/// cut closes the connection it happened on (both directions) and disarms.
pub struct Proxy {
    pub port: u16,
    state: Arc<ProxyState>,
}

struct ProxyState {
    cut: Mutex<Cut>,
    /// Client bytes forwarded since `AfterBytes` was armed.
    forwarded: AtomicU64,
    cuts: AtomicUsize,
    down: AtomicBool,
}

const COMMIT_QUERY: &[u8] = b"Q\0\0\0\x0bCOMMIT\0";

impl Proxy {
    /// Starts the proxy in front of `host:port`.
    pub async fn start(upstream: (String, u16)) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(ProxyState {
            cut: Mutex::new(Cut::Never),
            forwarded: AtomicU64::new(0),
            cuts: AtomicUsize::new(0),
            down: AtomicBool::new(false),
        });
        let accept_state = state.clone();
        tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    return;
                };
                if accept_state.down.load(Ordering::SeqCst) {
                    drop(client);
                    continue;
                }
                let upstream = upstream.clone();
                let state = accept_state.clone();
                tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect((upstream.0.as_str(), upstream.1)).await
                    {
                        pipe(client, server, state).await;
                    }
                });
            }
        });
        Proxy { port, state }
    }

    /// Arms a cut.
    pub fn arm(&self, cut: Cut) {
        self.state.forwarded.store(0, Ordering::SeqCst);
        *self
            .state
            .cut
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = cut;
    }

    /// Brings a machine that died back up.
    pub fn up(&self) {
        self.arm(Cut::Never);
        self.state.down.store(false, Ordering::SeqCst);
    }

    /// Client bytes forwarded since the last [`Proxy::arm`].
    pub fn forwarded(&self) -> u64 {
        self.state.forwarded.load(Ordering::SeqCst)
    }

    /// How many cuts happened.
    pub fn cuts(&self) -> usize {
        self.state.cuts.load(Ordering::SeqCst)
    }

    /// A connection string through the proxy (the same database and user as [`pg_url`]),
    /// in plain TCP: the proxy cuts on what it reads.
    pub fn url(&self) -> String {
        let config: tokio_postgres::Config = pg_url().parse().unwrap();
        let user = config.get_user().unwrap_or("postgres");
        let db = config.get_dbname().unwrap_or("test");
        format!(
            "host=127.0.0.1 port={} user={user} dbname={db} sslmode=disable",
            self.port
        )
    }
}

/// The host and port of [`pg_url`].
pub fn upstream() -> (String, u16) {
    let config: tokio_postgres::Config = pg_url().parse().unwrap();
    let host = config
        .get_hosts()
        .iter()
        .find_map(|h| {
            if let tokio_postgres::config::Host::Tcp(name) = h {
                Some(name.clone())
            } else {
                None
            }
        })
        .unwrap_or_else(|| "127.0.0.1".to_owned());
    let port = config.get_ports().first().copied().unwrap_or(5432);
    (host, port)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

async fn pipe(client: TcpStream, server: TcpStream, state: Arc<ProxyState>) {
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let down = tokio::spawn(async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match server_read.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if client_write.write_all(&buf[..n]).await.is_err() {
                        return;
                    }
                }
            }
        }
    });
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match client_read.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let chunk = &buf[..n];
        if state.down.load(Ordering::SeqCst) {
            break;
        }
        let cut = *state.cut.lock().unwrap_or_else(PoisonError::into_inner);
        let (forward, stop) = match cut {
            Cut::Never => {
                state.forwarded.fetch_add(n as u64, Ordering::SeqCst);
                (n, false)
            }
            Cut::AfterCommit if contains(chunk, COMMIT_QUERY) => (n, true),
            Cut::BeforeCommit if contains(chunk, COMMIT_QUERY) => (0, true),
            Cut::AfterBytes(k) | Cut::DieAfterBytes(k) => {
                let before = state.forwarded.fetch_add(n as u64, Ordering::SeqCst);
                if before + n as u64 >= k {
                    ((k.saturating_sub(before)) as usize, true)
                } else {
                    (n, false)
                }
            }
            Cut::AfterCommit | Cut::BeforeCommit => (n, false),
        };
        if forward > 0 && server_write.write_all(&chunk[..forward]).await.is_err() {
            break;
        }
        if stop {
            if matches!(cut, Cut::DieAfterBytes(_)) {
                state.down.store(true, Ordering::SeqCst);
            }
            *state.cut.lock().unwrap_or_else(PoisonError::into_inner) = Cut::Never;
            state.cuts.fetch_add(1, Ordering::SeqCst);
            let _ = server_write.flush().await;
            break;
        }
    }
    down.abort();
    // Dropping both halves closes both connections.
}

/// Two writers on one schema for lease tests: `short` with a lease of [`LeasePair::TTL`],
/// `long` with a 30 s lease, so `long` is refused until `short`'s lease expired
/// ([`LeasePair::expire`]) and then takes the session over.
pub struct LeasePair {
    pub short: PostgresBackend,
    pub long: PostgresBackend,
}

impl LeasePair {
    /// The short lease.
    pub const TTL: Duration = Duration::from_millis(100);

    pub async fn new(schema: &TestSchema) -> LeasePair {
        LeasePair {
            short: schema
                .backend_with(schema.options().lease_ttl(Self::TTL))
                .await,
            long: schema
                .backend_with(schema.options().lease_ttl(Duration::from_secs(30)))
                .await,
        }
    }

    /// Waits until `short`'s lease has expired.
    pub async fn expire(&self) {
        tokio::time::sleep(Self::TTL + Duration::from_millis(50)).await;
    }
}
