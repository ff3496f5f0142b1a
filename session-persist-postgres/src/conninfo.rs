//! The connection string: libpq's TLS parameters and this backend's own parameters are taken
//! out of it before the rest goes to [`tokio_postgres::Config`].
//!
//! Both forms are read: a URL (`postgres://user:pw@host:port/db?sslmode=verify-full&...`)
//! and key-value text (`host=... sslmode=require sslrootcert='/etc/ca.pem'`). No error echoes
//! a value: a connection string may hold a password.
//!
//! | parameter | meaning |
//! | --- | --- |
//! | `sslmode` | `disable`, `prefer` (default), `require`, `verify-ca`, `verify-full` (libpq's) |
//! | `sslrootcert` | a PEM file of trusted roots, or `system` (the default: the system store) |
//! | `sslcert`, `sslkey` | a PEM client certificate chain and its private key |
//! | `lease_ttl_ms` | [`crate::PostgresOptions::lease_ttl`] |
//! | `lease_wait_ms` | [`crate::PostgresOptions::lease_wait`] |
//! | `pool_size` | [`crate::PostgresOptions::pool_size`] |
//! | `pool_timeout_ms` | [`crate::PostgresOptions::pool_timeout`] |
//! | `advisory_locks` | `on` / `off`: [`crate::PostgresOptions::advisory_locks`] |

use std::path::PathBuf;
use std::time::Duration;

use crate::PostgresOptions;
use crate::error::{Error, Result};

/// libpq's `sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SslMode {
    /// Plain TCP only.
    Disable,
    /// TLS when the server offers it, plain TCP otherwise; the certificate is not verified
    /// (unless `sslrootcert` names a file: then the chain is, as with `verify-ca`).
    #[default]
    Prefer,
    /// TLS or nothing; the certificate is not verified (unless `sslrootcert` names a file:
    /// then the chain is, as with `verify-ca`).
    Require,
    /// TLS, with the server's chain verified against the roots, not its name.
    VerifyCa,
    /// TLS, with the chain and the server's host name (or IP address) verified.
    VerifyFull,
}

impl SslMode {
    fn parse(text: &str) -> Result<SslMode> {
        Ok(match text {
            "disable" => SslMode::Disable,
            "prefer" | "allow" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            other => {
                return Err(Error::InvalidConfig(format!(
                    "sslmode {other:?} is not one of disable, allow, prefer, require, verify-ca, \
                     verify-full"
                )));
            }
        })
    }

    /// Whether a plain connection is refused.
    pub fn requires_tls(self) -> bool {
        matches!(
            self,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull
        )
    }
}

/// Where trusted roots come from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Roots {
    /// The system store (`sslrootcert` absent or `system`).
    #[default]
    System,
    /// A PEM file (`sslrootcert=PATH`).
    File(PathBuf),
}

/// The TLS parameters of a connection string.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TlsParams {
    /// `sslmode`.
    pub mode: SslMode,
    /// `sslrootcert`.
    pub roots: Roots,
    /// `sslcert`.
    pub cert: Option<PathBuf>,
    /// `sslkey`.
    pub key: Option<PathBuf>,
}

/// A connection string split into what `tokio-postgres` reads and what this crate reads.
#[derive(Debug)]
pub(crate) struct ConnInfo {
    /// The rest, for [`tokio_postgres::Config`].
    pub(crate) driver: String,
    pub(crate) tls: TlsParams,
    /// The backend parameters, as (name, value).
    backend: Vec<(String, String)>,
}

const TLS_KEYS: &[&str] = &["sslmode", "sslrootcert", "sslcert", "sslkey"];
const BACKEND_KEYS: &[&str] = &[
    "lease_ttl_ms",
    "lease_wait_ms",
    "pool_size",
    "pool_timeout_ms",
    "advisory_locks",
];

impl ConnInfo {
    pub(crate) fn parse(text: &str) -> Result<ConnInfo> {
        let mut info = ConnInfo {
            driver: String::new(),
            tls: TlsParams::default(),
            backend: Vec::new(),
        };
        if text.starts_with("postgres://") || text.starts_with("postgresql://") {
            let (base, query) = match text.split_once('?') {
                Some((base, query)) => (base, query),
                None => (text, ""),
            };
            let mut kept = Vec::new();
            for pair in query.split('&').filter(|p| !p.is_empty()) {
                let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
                let key = percent_decode(key, "a query parameter name")?;
                if TLS_KEYS.contains(&key.as_str()) || BACKEND_KEYS.contains(&key.as_str()) {
                    let value = percent_decode(value, &format!("the value of {key}"))?;
                    info.take(&key, value)?;
                } else {
                    kept.push(pair);
                }
            }
            info.driver = if kept.is_empty() {
                base.to_owned()
            } else {
                format!("{base}?{}", kept.join("&"))
            };
        } else {
            let mut kept = Vec::new();
            for (key, value) in key_values(text)? {
                if TLS_KEYS.contains(&key.as_str()) || BACKEND_KEYS.contains(&key.as_str()) {
                    info.take(&key, value)?;
                } else {
                    kept.push(format!(
                        "{key}='{}'",
                        value.replace('\\', "\\\\").replace('\'', "\\'")
                    ));
                }
            }
            info.driver = kept.join(" ");
        }
        Ok(info)
    }

    fn take(&mut self, key: &str, value: String) -> Result<()> {
        match key {
            "sslmode" => self.tls.mode = SslMode::parse(&value)?,
            "sslrootcert" if value == "system" => self.tls.roots = Roots::System,
            "sslrootcert" => self.tls.roots = Roots::File(value.into()),
            "sslcert" => self.tls.cert = Some(value.into()),
            "sslkey" => self.tls.key = Some(value.into()),
            _ => self.backend.push((key.to_owned(), value)),
        }
        Ok(())
    }

    /// Applies the backend parameters to `options`.
    pub(crate) fn apply(&self, options: &mut PostgresOptions) -> Result<()> {
        for (key, value) in &self.backend {
            let number = || {
                value.parse::<u64>().map_err(|_| {
                    Error::InvalidConfig(format!("{key} must be a whole number, not {value:?}"))
                })
            };
            match key.as_str() {
                "lease_ttl_ms" => options.lease_ttl = Duration::from_millis(number()?),
                "lease_wait_ms" => options.lease_wait = Duration::from_millis(number()?),
                "pool_size" => {
                    options.pool_size = usize::try_from(number()?).unwrap_or(usize::MAX);
                }
                "pool_timeout_ms" => options.pool_timeout = Duration::from_millis(number()?),
                "advisory_locks" => {
                    options.advisory_locks = match value.as_str() {
                        "on" | "true" | "1" => true,
                        "off" | "false" | "0" => false,
                        _ => {
                            return Err(Error::InvalidConfig(format!(
                                "advisory_locks must be on or off, not {value:?}"
                            )));
                        }
                    };
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// Decodes `%XX` escapes (and `+` stays `+`, as libpq reads it). `what` names the part in
/// the error; the text itself is never echoed.
fn percent_decode(text: &str, what: &str) -> Result<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| {
                    Error::InvalidConfig(format!(
                        "{what} has a bad percent escape at byte {i} of the query"
                    ))
                })?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out)
        .map_err(|_| Error::InvalidConfig(format!("{what} is not UTF-8 once decoded")))
}

/// Splits libpq key-value text (`key = value`, values optionally single-quoted with `\`
/// escapes) into pairs.
fn key_values(text: &str) -> Result<Vec<(String, String)>> {
    let mut pairs = Vec::new();
    let mut chars = text.char_indices().peekable();
    loop {
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        let Some(&(start, _)) = chars.peek() else {
            return Ok(pairs);
        };
        let mut key = String::new();
        while let Some((_, c)) = chars.next_if(|(_, c)| *c != '=' && !c.is_whitespace()) {
            key.push(c);
        }
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        if chars.next_if(|(_, c)| *c == '=').is_none() {
            return Err(Error::InvalidConfig(format!(
                "the connection string has no '=' after the key at byte {start}"
            )));
        }
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        let mut value = String::new();
        if chars.next_if(|(_, c)| *c == '\'').is_some() {
            loop {
                match chars.next() {
                    None => {
                        return Err(Error::InvalidConfig(format!(
                            "the value of {key:?} (from byte {start}) has no closing quote"
                        )));
                    }
                    Some((_, '\'')) => break,
                    Some((_, '\\')) => match chars.next() {
                        Some((_, c)) => value.push(c),
                        None => {
                            return Err(Error::InvalidConfig(format!(
                                "the value of {key:?} (from byte {start}) ends in a lone '\\'"
                            )));
                        }
                    },
                    Some((_, c)) => value.push(c),
                }
            }
        } else {
            while let Some((_, c)) = chars.next_if(|(_, c)| !c.is_whitespace()) {
                if c == '\\' {
                    if let Some((_, escaped)) = chars.next() {
                        value.push(escaped);
                    }
                } else {
                    value.push(c);
                }
            }
        }
        pairs.push((key, value));
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn url_tls_and_backend_parameters_are_taken_out() {
        let info = ConnInfo::parse(
            "postgres://u:s3cret@db.example:5433/app?sslmode=verify-full&application_name=x\
             &sslrootcert=%2Fetc%2Fca.pem&lease_ttl_ms=5000&sslcert=/c.pem&sslkey=/k.pem",
        )
        .unwrap();
        assert_eq!(
            info.driver,
            "postgres://u:s3cret@db.example:5433/app?application_name=x"
        );
        assert_eq!(info.tls.mode, SslMode::VerifyFull);
        assert_eq!(info.tls.roots, Roots::File("/etc/ca.pem".into()));
        assert_eq!(info.tls.cert, Some("/c.pem".into()));
        assert_eq!(info.tls.key, Some("/k.pem".into()));
        let mut options = PostgresOptions::default();
        info.apply(&mut options).unwrap();
        assert_eq!(options.lease_ttl, Duration::from_secs(5));
    }

    #[test]
    fn key_value_text_keeps_the_driver_part_quoted() {
        let info = ConnInfo::parse(
            "host=127.0.0.1 password='it''s' sslmode = require sslrootcert='/a b/ca.pem' \
             advisory_locks=off",
        );
        // `''` is not libpq's quote escape: the value ends at the second quote, and the rest
        // (`s'`) starts a key without '='.
        assert!(info.is_err());
        let info = ConnInfo::parse(
            r"host=127.0.0.1 password='it\'s' sslmode = require sslrootcert='/a b/ca.pem' advisory_locks=off",
        )
        .unwrap();
        assert_eq!(info.driver, r"host='127.0.0.1' password='it\'s'");
        assert_eq!(info.tls.mode, SslMode::Require);
        assert_eq!(info.tls.roots, Roots::File("/a b/ca.pem".into()));
        let mut options = PostgresOptions::default();
        info.apply(&mut options).unwrap();
        assert!(!options.advisory_locks);
        let config: tokio_postgres::Config = info.driver.parse().unwrap();
        assert_eq!(config.get_password(), Some(&b"it's"[..]));
    }

    #[test]
    fn errors_never_echo_the_password() {
        for text in [
            "postgres://u:hunter2@h/db?sslmode=bogus",
            "postgres://u:hunter2@h/db?sslrootcert=%zz",
            "password=hunter2 sslmode=bogus",
            "password='hunter2",
            "password=hunter2 lease_ttl_ms",
        ] {
            let e = ConnInfo::parse(text).unwrap_err();
            assert!(!format!("{e} {e:?}").contains("hunter2"), "{text}: {e}");
        }
        let info = ConnInfo::parse("password=hunter2 lease_ttl_ms=abc").unwrap();
        let e = info.apply(&mut PostgresOptions::default()).unwrap_err();
        assert!(!format!("{e} {e:?}").contains("hunter2"), "{e}");
    }

    #[test]
    fn sslmode_defaults_to_prefer() {
        let info = ConnInfo::parse("postgres://u@h/db").unwrap();
        assert_eq!(info.tls.mode, SslMode::Prefer);
        assert_eq!(info.driver, "postgres://u@h/db");
        assert!(
            ConnInfo::parse("host=h sslmode=verify-ca")
                .unwrap()
                .tls
                .mode
                == SslMode::VerifyCa
        );
    }
}
