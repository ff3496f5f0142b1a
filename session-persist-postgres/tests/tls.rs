//! TLS against a real server that this test starts: a second `PostgreSQL` in a temporary
//! directory, run as an unprivileged user (`setpriv` drops root's privileges), on a free port,
//! with a CA, a server certificate and a client certificate generated here with `rcgen`.
//!
//! It needs the server binaries (`initdb`, `postgres`: Debian's `/usr/lib/postgresql/*/bin`,
//! or `SESSION_PG_BIN`) and, as root, `setpriv`. Without them it fails, unless
//! `SESSION_TEST_ALLOW_NO_PG_BIN=1` (no binaries) or `SESSION_TEST_ALLOW_NO_SETPRIV=1` (root
//! without `setpriv`) allows the skip, which is written to stderr directly.
#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use session_core::json::Value;
use session_core::{Event, SessionHeader};
use session_persist::Backend;
use session_persist_postgres::tokio_postgres::{self, NoTls};
use session_persist_postgres::{PostgresBackend, PostgresOptions};

/// The password every connection string carries: no error may show it.
const PASSWORD: &str = "pw-Zq81-never-shown";

/// The unprivileged user the server runs as when the test runs as root (`nobody`).
const UNPRIVILEGED: u32 = 65_534;

fn skip_or_fail(allow: &str, why: &str) {
    conformance::skip::unless_allowed(allow, format_args!("tls: {why}"), || false);
}

/// The directory holding `initdb` and `postgres`.
fn pg_bin() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("SESSION_PG_BIN") {
        return Some(dir.into());
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|bin| bin.join("initdb").is_file() && bin.join("postgres").is_file())
        .collect();
    found.sort();
    found.pop()
}

fn setpriv() -> Option<PathBuf> {
    ["/usr/bin/setpriv", "/bin/setpriv"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

#[cfg(unix)]
fn chown_tree(path: &Path, uid: u32) {
    std::os::unix::fs::chown(path, Some(uid), Some(uid)).unwrap();
    if path.is_dir() {
        for entry in std::fs::read_dir(path).unwrap() {
            chown_tree(&entry.unwrap().path(), uid);
        }
    }
}

/// The certificates of the test.
struct Pki {
    ca_pem: String,
    other_ca_pem: String,
    server_cert: String,
    server_key: String,
    client_cert: String,
    client_key: String,
}

fn ca(name: &str) -> (Issuer<'static, KeyPair>, String) {
    let mut params = CertificateParams::new(Vec::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let key = KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    (Issuer::new(params, key), cert.pem())
}

fn pki() -> Pki {
    let (issuer, ca_pem) = ca("session test CA");
    let (_, other_ca_pem) = ca("an untrusted CA");
    let mut server = CertificateParams::new(vec!["db.test".to_owned()]).unwrap();
    server
        .distinguished_name
        .push(DnType::CommonName, "db.test");
    let server_key = KeyPair::generate().unwrap();
    let server_cert = server.signed_by(&server_key, &issuer).unwrap();
    let mut client = CertificateParams::new(Vec::new()).unwrap();
    client
        .distinguished_name
        .push(DnType::CommonName, "certuser");
    let client_key = KeyPair::generate().unwrap();
    let client_cert = client.signed_by(&client_key, &issuer).unwrap();
    Pki {
        ca_pem,
        other_ca_pem,
        server_cert: server_cert.pem(),
        server_key: server_key.serialize_pem(),
        client_cert: client_cert.pem(),
        client_key: client_key.serialize_pem(),
    }
}

/// The server; stopped (and its directory removed) on drop, panics included.
struct Server {
    dir: PathBuf,
    port: u16,
    child: Option<Child>,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // Fast shutdown (SIGINT), then SIGKILL if it lingers.
            let _ = Command::new("kill")
                .args(["-INT", &child.id().to_string()])
                .status();
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if child.try_wait().ok().flatten().is_some() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A command run as the server's user.
fn as_server_user(program: &Path, drop_to: Option<&Path>) -> Command {
    match drop_to {
        Some(setpriv) => {
            let mut cmd = Command::new(setpriv);
            cmd.args([
                format!("--reuid={UNPRIVILEGED}"),
                format!("--regid={UNPRIVILEGED}"),
                "--clear-groups".to_owned(),
            ])
            .arg(program);
            cmd
        }
        None => Command::new(program),
    }
}

/// Starts the TLS server, or says why it cannot (`None` after a permitted skip).
fn start(pki: &Pki) -> Option<Server> {
    let Some(bin) = pg_bin() else {
        skip_or_fail(
            "SESSION_TEST_ALLOW_NO_PG_BIN",
            "no PostgreSQL server binaries (initdb, postgres) in /usr/lib/postgresql/*/bin or \
             $SESSION_PG_BIN",
        );
        return None;
    };
    let root = is_root();
    let drop_to = if root {
        let Some(setpriv) = setpriv() else {
            skip_or_fail(
                "SESSION_TEST_ALLOW_NO_SETPRIV",
                "running as root (PostgreSQL refuses to) and setpriv is not installed",
            );
            return None;
        };
        Some(setpriv)
    } else {
        None
    };
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let dir = std::env::temp_dir().join(format!("session-pg-tls-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut server = Server {
        dir: dir.clone(),
        port: free_port(),
        child: None,
    };
    let write = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
    };
    write("ca.pem", &pki.ca_pem);
    write("other-ca.pem", &pki.other_ca_pem);
    write("server.crt", &pki.server_cert);
    write("server.key", &pki.server_key);
    write("client.crt", &pki.client_cert);
    write("client.key", &pki.client_key);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        if root {
            chown_tree(&dir, UNPRIVILEGED);
        }
    }
    let data = dir.join("data");
    let out = as_server_user(&bin.join("initdb"), drop_to.as_deref())
        .arg("-D")
        .arg(&data)
        .args([
            "-U",
            "postgres",
            "-A",
            "trust",
            "--no-sync",
            "--no-locale",
            "-E",
            "UTF8",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "initdb failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Client certificates authenticate `certuser`; everyone else is trusted.
    let hba = data.join("pg_hba.conf");
    let rest = std::fs::read_to_string(&hba).unwrap();
    std::fs::write(
        &hba,
        format!(
            "hostssl all certuser 127.0.0.1/32 cert\nhost all certuser 127.0.0.1/32 reject\n{rest}"
        ),
    )
    .unwrap();
    // In the configuration file, not on the command line: the test turns ssl off later with
    // ALTER SYSTEM, which a command-line setting would override.
    let mut conf = std::fs::OpenOptions::new()
        .append(true)
        .open(data.join("postgresql.conf"))
        .unwrap();
    writeln!(
        conf,
        "ssl = on\nssl_cert_file = '{}'\nssl_key_file = '{}'\nssl_ca_file = '{}'",
        dir.join("server.crt").display(),
        dir.join("server.key").display(),
        dir.join("ca.pem").display()
    )
    .unwrap();
    drop(conf);
    let log = std::fs::File::create(dir.join("server.log")).unwrap();
    let child = as_server_user(&bin.join("postgres"), drop_to.as_deref())
        .arg("-D")
        .arg(&data)
        .args(["-p", &server.port.to_string(), "-k"])
        .arg(&dir)
        .args(["-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    server.child = Some(child);
    Some(server)
}

impl Server {
    fn file(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }

    /// A key-value connection string to the server as `host`, with the password.
    fn url(&self, host: &str, extra: &str) -> String {
        format!(
            "host={host} hostaddr=127.0.0.1 port={} user=postgres password={PASSWORD} \
             dbname=postgres connect_timeout=10 {extra}",
            self.port
        )
    }

    /// A plain admin client.
    async fn admin(&self) -> tokio_postgres::Client {
        let url = format!(
            "host=127.0.0.1 port={} user=postgres dbname=postgres sslmode=disable",
            self.port
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match tokio_postgres::connect(&url, NoTls).await {
                Ok((client, connection)) => {
                    tokio::spawn(async move {
                        let _ = connection.await;
                    });
                    return client;
                }
                Err(e) => {
                    let log = std::fs::read_to_string(self.dir.join("server.log"));
                    assert!(
                        Instant::now() < deadline,
                        "the TLS server did not start: {e}\n{}",
                        log.unwrap_or_default()
                    );
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }
}

/// Checks that neither Display nor Debug of `err` nor of any link of its chain shows the
/// password, and returns the chain as text.
fn chain_without_password(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = String::new();
    let mut at = Some(err);
    while let Some(e) = at {
        let shown = format!("{e} | {e:?}");
        assert!(!shown.contains(PASSWORD), "the password shows in {shown}");
        text = format!("{text}{e}: ");
        at = e.source();
    }
    text
}

async fn connect(url: &str) -> Result<PostgresBackend, session_persist_postgres::Error> {
    PostgresBackend::connect(url, PostgresOptions::default().schema("tls")).await
}

async fn refused(url: &str, expect: &str) {
    let err = connect(url)
        .await
        .expect_err(url.split(PASSWORD).next().unwrap_or(""));
    let chain = chain_without_password(&err);
    assert!(
        chain.to_lowercase().contains(expect),
        "expected {expect:?} in the error chain: {chain}"
    );
    let contract: session_persist::Error = err.into();
    chain_without_password(&contract);
}

/// Whether the backend's pooled connection (application name) is encrypted.
async fn encrypted(admin: &tokio_postgres::Client, user: &str) -> bool {
    let row = admin
        .query_one(
            "SELECT coalesce(bool_and(s.ssl), false) FROM pg_stat_ssl s \
             JOIN pg_stat_activity a USING (pid) \
             WHERE a.application_name = 'session-persistence-postgres' AND a.usename = $1",
            &[&user],
        )
        .await
        .unwrap();
    row.get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_modes_against_a_real_server() {
    let pki = pki();
    let Some(server) = start(&pki) else {
        return;
    };
    let admin = server.admin().await;
    admin
        .batch_execute("CREATE ROLE certuser LOGIN; GRANT ALL ON DATABASE postgres TO certuser")
        .await
        .unwrap();
    let ca = server.file("ca.pem");

    // verify-full: the chain leads to the CA and the certificate names db.test.
    let url = server.url("db.test", &format!("sslmode=verify-full sslrootcert={ca}"));
    let backend = connect(&url).await.unwrap();
    let meta = SessionHeader::new("over-tls", 1_000);
    let data = Value::parse(r#"{"turn":1}"#).unwrap();
    let batch = [Event::appended("turn/start", 0, 1_000, data, None, None)];
    backend.append_batch(&meta, &batch, false).await.unwrap();
    assert_eq!(
        backend.load("over-tls").await.unwrap().unwrap().events,
        batch
    );
    assert!(
        encrypted(&admin, "postgres").await,
        "verify-full connected in plain TCP"
    );
    backend.close().await.unwrap();

    // The same as a URL, the root file percent-encoded.
    let url = format!(
        "postgresql://postgres:{PASSWORD}@db.test:{}/postgres?hostaddr=127.0.0.1&sslmode=verify-full&sslrootcert={}",
        server.port,
        ca.replace('/', "%2F")
    );
    connect(&url).await.unwrap().close().await.unwrap();

    // verify-full refuses a name the certificate does not carry; verify-ca accepts it.
    let wrong = server.url(
        "wrong.test",
        &format!("sslmode=verify-full sslrootcert={ca}"),
    );
    refused(&wrong, "certificate").await;
    let chain_only = server.url("wrong.test", &format!("sslmode=verify-ca sslrootcert={ca}"));
    connect(&chain_only).await.unwrap().close().await.unwrap();

    // A CA that did not sign the server certificate is refused, by verify-ca too.
    let other = server.file("other-ca.pem");
    for mode in ["verify-full", "verify-ca", "require"] {
        let url = server.url("db.test", &format!("sslmode={mode} sslrootcert={other}"));
        refused(&url, "certificate").await;
    }

    // require without a root file: encrypted, unverified.
    let url = server.url("wrong.test", "sslmode=require");
    let backend = connect(&url).await.unwrap();
    assert!(
        encrypted(&admin, "postgres").await,
        "require connected in plain TCP"
    );
    backend.close().await.unwrap();

    // A client certificate authenticates certuser (hostssl ... cert); without one it is refused.
    let client = format!(
        "sslmode=verify-full sslrootcert={ca} sslcert={} sslkey={}",
        server.file("client.crt"),
        server.file("client.key")
    );
    let url = server
        .url("db.test", &client)
        .replace("user=postgres", "user=certuser");
    let backend = PostgresBackend::connect(&url, PostgresOptions::default().schema("certs"))
        .await
        .unwrap();
    assert!(encrypted(&admin, "certuser").await);
    backend.close().await.unwrap();
    let url = server
        .url("db.test", &format!("sslmode=verify-full sslrootcert={ca}"))
        .replace("user=postgres", "user=certuser");
    refused(&url, "client certificate").await;

    // A missing root file is a typed TLS error naming the parameter and the file.
    let url = server.url(
        "db.test",
        "sslmode=verify-full sslrootcert=/nonexistent/ca.pem",
    );
    let err = connect(&url).await.unwrap_err();
    assert!(
        matches!(err, session_persist_postgres::Error::Tls { .. }),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("sslrootcert /nonexistent/ca.pem"),
        "{err}"
    );
    chain_without_password(&err);

    // A server without TLS: require is refused, prefer falls back to plain TCP.
    admin
        .batch_execute("ALTER SYSTEM SET ssl = off")
        .await
        .unwrap();
    admin
        .batch_execute("SELECT pg_reload_conf()")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    refused(&server.url("db.test", "sslmode=require"), "tls").await;
    refused(
        &server.url("db.test", &format!("sslmode=verify-full sslrootcert={ca}")),
        "tls",
    )
    .await;
    let backend = connect(&server.url("db.test", "sslmode=prefer"))
        .await
        .unwrap();
    assert!(
        !encrypted(&admin, "postgres").await,
        "ssl=off, yet encrypted"
    );
    backend.close().await.unwrap();
    drop(admin);
    drop(server);
}
