//! A small connection pool: at most `size` [`tokio_postgres::Client`]s, handed out behind a
//! semaphore, connected lazily, and discarded when their connection broke.
//!
//! Back-pressure: a checkout waits (in FIFO order, the semaphore's) for a free connection, at
//! most the pool timeout, then fails with [`Error::PoolTimeout`]; a connect waits at most the
//! connect timeout ([`Error::ConnectTimeout`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_postgres::{Client, Config, NoTls};
#[cfg(feature = "tls")]
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::error::{Error, Result};

/// One pooled connection.
pub(crate) struct Conn {
    pub(crate) client: Client,
}

/// How connections are made.
pub(crate) enum Connector {
    /// Plain TCP (`sslmode=disable`, or `prefer` in a build without TLS).
    Plain,
    /// TLS through rustls (`prefer` falls back to plain TCP when the server refuses TLS).
    #[cfg(feature = "tls")]
    Tls(MakeRustlsConnect),
}

pub(crate) struct Pool {
    config: Config,
    connector: Connector,
    size: usize,
    connect_timeout: Duration,
    checkout_timeout: Duration,
    idle: Mutex<Vec<Conn>>,
    permits: Arc<Semaphore>,
    closed: AtomicBool,
}

/// A connection checked out of the pool. It goes back to the pool only when the operation
/// marked it healthy ([`Pooled::done`]) and it is still open: a connection dropped on an error
/// path may be broken in a way the driver has not noticed yet, so it is discarded.
pub(crate) struct Pooled {
    conn: Option<Conn>,
    healthy: bool,
    pool: Arc<Pool>,
    _permit: OwnedSemaphorePermit,
}

impl Pooled {
    pub(crate) fn client(&mut self) -> &mut Client {
        match &mut self.conn {
            Some(conn) => &mut conn.client,
            // `conn` is only taken in `drop`.
            None => unreachable!("a pooled connection is used after drop"),
        }
    }
}

impl Pooled {
    /// Hands a connection whose operation succeeded back to the pool.
    pub(crate) fn done(mut self) {
        self.healthy = true;
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take()
            && self.healthy
            && !conn.client.is_closed()
            && !self.pool.closed.load(Ordering::SeqCst)
        {
            self.pool
                .idle
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(conn);
        }
    }
}

impl Pool {
    pub(crate) fn new(
        config: Config,
        connector: Connector,
        size: usize,
        connect_timeout: Duration,
        checkout_timeout: Duration,
    ) -> Arc<Pool> {
        Arc::new(Pool {
            config,
            connector,
            size: size.max(1),
            connect_timeout,
            checkout_timeout,
            idle: Mutex::new(Vec::new()),
            permits: Arc::new(Semaphore::new(size.max(1))),
            closed: AtomicBool::new(false),
        })
    }

    /// Opens a new connection outside the pool's accounting.
    pub(crate) async fn connect(&self) -> Result<Client> {
        let timed_out = |_| Error::ConnectTimeout {
            ms: self.connect_timeout.as_millis(),
        };
        match &self.connector {
            Connector::Plain => {
                let connecting = self.config.connect(NoTls);
                let (client, connection) = tokio::time::timeout(self.connect_timeout, connecting)
                    .await
                    .map_err(timed_out)?
                    .map_err(Error::pg("connect"))?;
                tokio::spawn(async move {
                    // The error surfaces on the client's next call.
                    let _ = connection.await;
                });
                Ok(client)
            }
            #[cfg(feature = "tls")]
            Connector::Tls(tls) => {
                let connecting = self.config.connect(tls.clone());
                let (client, connection) = tokio::time::timeout(self.connect_timeout, connecting)
                    .await
                    .map_err(timed_out)?
                    .map_err(Error::pg("connect"))?;
                tokio::spawn(async move {
                    let _ = connection.await;
                });
                Ok(client)
            }
        }
    }

    /// A connection: an idle one that is still open, or a new one.
    pub(crate) async fn get(self: &Arc<Self>) -> Result<Pooled> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(Error::Closed);
        }
        let permit =
            tokio::time::timeout(self.checkout_timeout, self.permits.clone().acquire_owned())
                .await
                .map_err(|_| Error::PoolTimeout {
                    ms: self.checkout_timeout.as_millis(),
                    size: self.size,
                })?
                .map_err(|_| Error::Closed)?;
        let reused = loop {
            let next = self
                .idle
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .pop();
            match next {
                Some(conn) if conn.client.is_closed() => {}
                other => break other,
            }
        };
        let conn = match reused {
            Some(conn) => conn,
            None => Conn {
                client: self.connect().await?,
            },
        };
        Ok(Pooled {
            conn: Some(conn),
            healthy: false,
            pool: self.clone(),
            _permit: permit,
        })
    }

    /// Drops every idle connection and refuses new checkouts.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.permits.close();
        self.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
}
