//! `serve`: the read-only web view of the store's sessions (`session-web`), on this process's
//! tokio runtime. Loopback by default; a non-loopback address needs `--allow-remote`, and
//! then every request needs the token printed at start.

use std::net::SocketAddr;

use crate::args::Global;
use crate::cmd_read::require_store;
use crate::error::{Error, Result};
use crate::output::Out;
use crate::store::Store;

/// The address `serve` binds without `--bind`.
pub(crate) const DEFAULT_BIND: &str = "127.0.0.1:7878";

/// `serve`'s options.
#[derive(Debug, Clone, Default)]
pub(crate) struct ServeArgs {
    /// `--bind ADDR:PORT`.
    pub(crate) bind: Option<String>,
    /// `--open`: open the page in the desktop's browser.
    pub(crate) open: bool,
    /// `--allow-remote`: accept a non-loopback address (a token is then required).
    pub(crate) allow_remote: bool,
}

/// Parses `--bind` and applies the loopback rule.
pub(crate) fn bind_address(args: &ServeArgs) -> Result<SocketAddr> {
    let text = args.bind.as_deref().unwrap_or(DEFAULT_BIND);
    let addr: SocketAddr = text.parse().map_err(|_| {
        Error::usage(format!(
            "--bind expects ADDRESS:PORT (for example 127.0.0.1:7878 or [::1]:7878), got \"{text}\""
        ))
    })?;
    if !addr.ip().is_loopback() && !args.allow_remote {
        return Err(Error::usage(format!(
            "refusing to serve on {addr}, which is not a loopback address: pass --allow-remote to \
             accept it (every request then needs the token printed at start)"
        )));
    }
    Ok(addr)
}

/// `serve`.
pub(crate) fn serve(args: &ServeArgs, global: &Global, out: &mut Out) -> Result<()> {
    let addr = bind_address(args)?;
    let at = global.store();
    require_store(&at)?;
    let store = Store::open(&at)?;
    let token = args
        .allow_remote
        .then(|| uuid::Uuid::new_v4().simple().to_string());
    let listener = store
        .block_on(tokio::net::TcpListener::bind(addr))
        .map_err(|e| Error::failed(format!("cannot listen on {addr}: {e}"), None))?;
    let local = listener.local_addr()?;
    let url = match &token {
        Some(t) => format!("http://{local}/?token={t}"),
        None => format!("http://{local}/"),
    };
    out.line(&format!("serving {} read-only at {url}", at.spec()))?;
    if let Some(t) = &token {
        out.line(&format!("token: {t} (every request needs it)"))?;
    }
    out.line("press Ctrl-C to stop")?;
    out.flush()?;
    if args.open {
        // The desktop's opener; failing to open is only a warning.
        if let Err(e) = std::process::Command::new("xdg-open").arg(&url).spawn() {
            eprintln!("warning: could not open a browser (xdg-open: {e}); open {url}");
        }
    }
    let state = session_web::WebState::new(
        store.persistence.clone(),
        at.spec(),
        token,
        !args.allow_remote,
    );
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    store
        .block_on(session_web::serve(listener, state, shutdown))
        .map_err(|e| Error::failed(format!("serving on {local} failed: {e}"), None))?;
    store.close()
}
