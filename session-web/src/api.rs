//! The HTTP side: routes, the token and host checks, security headers, the embedded assets.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use session_core::json::Value;
use session_persist::Persistence;

use crate::assets;
use crate::error::{Error, Result};
use crate::view::{SessionView, SharedView, num, obj};

/// Most events one `events` page returns.
pub const MAX_EVENTS_PAGE: usize = 2_000;
/// Most timeline rows one `timeline` page returns.
pub const MAX_TIMELINE_PAGE: usize = 5_000;
/// How many session views are kept in memory at once.
const CACHED_VIEWS: usize = 4;

/// The Content-Security-Policy of the served pages: nothing but this origin, and violations
/// reported back to it.
pub const SERVED_CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; \
    frame-ancestors 'none'; report-uri /api/csp-report";

/// What the server needs: the store to read, who may ask, and what it has read so far.
#[derive(Clone)]
pub struct WebState {
    inner: Arc<Inner>,
}

struct Inner {
    persistence: Persistence,
    store: String,
    token: Option<String>,
    loopback_only: bool,
    views: Mutex<Vec<(String, SharedView)>>,
    /// Held while a session is read, so concurrent first requests read it once.
    loading: tokio::sync::Mutex<()>,
    list: Mutex<Option<Value>>,
    csp_reports: AtomicU64,
}

impl WebState {
    /// A server over `persistence` (only its read paths are used). `store` is the store spec
    /// shown in the list (no password); `token`, when given, is required on every request;
    /// `loopback_only` refuses requests whose `Host` is not a loopback name (against DNS
    /// rebinding).
    pub fn new(
        persistence: Persistence,
        store: impl Into<String>,
        token: Option<String>,
        loopback_only: bool,
    ) -> WebState {
        WebState {
            inner: Arc::new(Inner {
                persistence,
                store: store.into(),
                token,
                loopback_only,
                views: Mutex::new(Vec::new()),
                loading: tokio::sync::Mutex::new(()),
                list: Mutex::new(None),
                csp_reports: AtomicU64::new(0),
            }),
        }
    }

    /// How many CSP violation reports the pages sent.
    pub fn csp_reports(&self) -> u64 {
        self.inner.csp_reports.load(Ordering::Relaxed)
    }

    /// The view of session `id`, read (inspect semantics) on first use and kept.
    pub async fn view(&self, id: &str, refresh: bool) -> Result<SharedView> {
        let cached = || {
            let views = self.inner.views.lock().expect("view cache lock");
            views.iter().find(|(k, _)| k == id).map(|(_, v)| v.clone())
        };
        if !refresh && let Some(v) = cached() {
            return Ok(v);
        }
        let _loading = self.inner.loading.lock().await;
        if !refresh && let Some(v) = cached() {
            return Ok(v);
        }
        let p = &self.inner.persistence;
        let detailed = p
            .inspect_detailed(id, None)
            .await
            .map_err(|e| Error::storage(format!("reading session \"{id}\""), e))?;
        let headers = p.list(None).await.unwrap_or_default();
        let view: SharedView =
            tokio::task::spawn_blocking(move || Arc::new(SessionView::build(detailed, &headers)))
                .await
                .map_err(|e| {
                    Error::invalid(format!("building the view of \"{id}\" failed: {e}"))
                })?;
        let mut views = self.inner.views.lock().expect("view cache lock");
        views.retain(|(k, _)| k != id);
        if views.len() >= CACHED_VIEWS {
            views.remove(0);
        }
        views.push((id.to_owned(), view.clone()));
        Ok(view)
    }

    /// The list document of `GET /api/sessions`.
    pub async fn list(&self, refresh: bool) -> Result<Value> {
        if !refresh && let Some(v) = self.inner.list.lock().expect("list lock").clone() {
            return Ok(v);
        }
        // The list page shows event counts and torn tails: every log is read, as `list --count` does.
        let rows = crate::list::list_rows(&self.inner.persistence, true)
            .await
            .map_err(|e| Error::storage("listing the store", e))?;
        let doc = obj([
            ("store", Value::from(self.inner.store.as_str())),
            (
                "sessions",
                Value::array(rows.iter().map(crate::ListRow::to_json)),
            ),
        ]);
        *self.inner.list.lock().expect("list lock") = Some(doc.clone());
        Ok(doc)
    }
}

/// The router: pages at `/`, assets, and the API under `/api/`.
pub fn router(state: WebState) -> Router {
    Router::new()
        .route("/", get(page))
        .route(
            "/app.js",
            get(|| async { asset("text/javascript", assets::APP_JS) }),
        )
        .route(
            "/app.css",
            get(|| async { asset("text/css", assets::APP_CSS) }),
        )
        .route("/api/sessions", get(sessions))
        .route("/api/sessions/{id}", get(session))
        .route("/api/sessions/{id}/timeline", get(timeline))
        .route("/api/sessions/{id}/events", get(events))
        .route("/api/sessions/{id}/messages", get(messages))
        .route("/api/sessions/{id}/header", get(request_header))
        .route("/api/sessions/{id}/compactions", get(compactions))
        .route("/api/sessions/{id}/closers", get(closers))
        .route("/api/csp-report", post(csp_report))
        .route("/api/csp-reports", get(csp_count))
        .fallback(|| async { error_response(&Error::not_found("no such page")) })
        .layer(middleware::from_fn_with_state(state.clone(), guard))
        .with_state(state)
}

/// Runs the server on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: WebState,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(state))
        .with_graceful_shutdown(shutdown)
        .await
}

const TOKEN_COOKIE: &str = "sessionctl_token";

/// Whether `host` (a `Host` header) names a loopback address.
fn loopback_host(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or_default()
    } else {
        host.rsplit_once(':').map_or(host, |(h, _)| h)
    };
    name == "localhost"
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Token and host checks, then the security headers on every answer.
async fn guard(State(state): State<WebState>, req: Request, next: Next) -> Response {
    let headers = req.headers();
    if state.inner.loopback_only {
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or_default();
        if !loopback_host(host) {
            return error_response(&Error::invalid(format!(
                "host \"{host}\" is not a loopback name; this server answers loopback requests only"
            )));
        }
    }
    let mut set_cookie = false;
    if let Some(token) = &state.inner.token {
        let query_token = req.uri().query().and_then(|q| {
            q.split('&')
                .find_map(|kv| kv.strip_prefix("token="))
                .map(str::to_owned)
        });
        let ok = query_token.as_deref() == Some(token.as_str())
            || bearer(headers).as_deref() == Some(token.as_str())
            || cookie(headers, TOKEN_COOKIE).as_deref() == Some(token.as_str());
        if !ok {
            return error_response(&Error::unauthorized());
        }
        set_cookie = query_token.is_some();
    }
    let mut response = next.run(req).await;
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(SERVED_CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if set_cookie
        && let Some(token) = &state.inner.token
        && let Ok(v) = HeaderValue::from_str(&format!(
            "{TOKEN_COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/"
        ))
    {
        h.insert(header::SET_COOKIE, v);
    }
    response
}

fn bearer(headers: &HeaderMap) -> Option<String> {
    headers
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
        .map(str::to_owned)
}

fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|kv| kv.trim().strip_prefix(name)?.strip_prefix('='))
        .map(str::to_owned)
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}

fn json(v: &Value) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], v.to_json()).into_response()
}

fn error_response(e: &Error) -> Response {
    let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let kind = format!("{:?}", e.kind());
    let body = obj([
        ("error", Value::from(e.to_string())),
        ("kind", Value::from(kind.as_str())),
    ]);
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_json(),
    )
        .into_response()
}

fn respond(r: Result<Value>) -> Response {
    match r {
        Ok(v) => json(&v),
        Err(e) => error_response(&e),
    }
}

type Params = Query<HashMap<String, String>>;

/// A non-negative integer query parameter, or `default` when absent.
fn param(q: &HashMap<String, String>, name: &str, default: Option<u64>) -> Result<Option<u64>> {
    match q.get(name) {
        None => Ok(default),
        Some(v) => v.parse::<u64>().map(Some).map_err(|_| {
            Error::invalid(format!(
                "query parameter {name}={v:?} is not a non-negative integer"
            ))
        }),
    }
}

fn refresh(q: &HashMap<String, String>) -> bool {
    q.get("refresh").is_some_and(|v| v == "1")
}

async fn page() -> Response {
    (
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        assets::served_page(),
    )
        .into_response()
}

async fn sessions(State(s): State<WebState>, Query(q): Params) -> Response {
    respond(s.list(refresh(&q)).await)
}

async fn session(State(s): State<WebState>, Path(id): Path<String>, Query(q): Params) -> Response {
    respond(s.view(&id, refresh(&q)).await.map(|v| v.summary()))
}

async fn timeline(State(s): State<WebState>, Path(id): Path<String>, Query(q): Params) -> Response {
    let run = async {
        let depth = param(&q, "depth", Some(2))?.unwrap_or(2) as usize;
        let from = param(&q, "from", Some(0))?.unwrap_or(0) as usize;
        let limit = param(&q, "limit", Some(200))?.unwrap_or(200) as usize;
        let v = s.view(&id, false).await?;
        Ok(v.timeline_page(depth, from, limit.min(MAX_TIMELINE_PAGE)))
    };
    respond(run.await)
}

async fn events(State(s): State<WebState>, Path(id): Path<String>, Query(q): Params) -> Response {
    let run = async {
        let from = param(&q, "from", Some(0))?.unwrap_or(0);
        let limit = param(&q, "limit", Some(200))?.unwrap_or(200) as usize;
        let v = s.view(&id, false).await?;
        Ok(v.events_page(from, limit.min(MAX_EVENTS_PAGE)))
    };
    respond(run.await)
}

async fn messages(State(s): State<WebState>, Path(id): Path<String>, Query(q): Params) -> Response {
    let run = async {
        let at = param(&q, "at", None)?;
        let v = s.view(&id, false).await?;
        tokio::task::spawn_blocking(move || v.messages_at(at))
            .await
            .map_err(|e| Error::invalid(format!("deriving messages failed: {e}")))?
    };
    respond(run.await)
}

async fn request_header(
    State(s): State<WebState>,
    Path(id): Path<String>,
    Query(q): Params,
) -> Response {
    let run = async {
        let at = param(&q, "at", None)?;
        let v = s.view(&id, false).await?;
        tokio::task::spawn_blocking(move || v.header_at(at))
            .await
            .map_err(|e| Error::invalid(format!("folding the header failed: {e}")))?
    };
    respond(run.await)
}

async fn compactions(State(s): State<WebState>, Path(id): Path<String>) -> Response {
    respond(s.view(&id, false).await.map(|v| {
        obj([
            ("id", Value::from(id.as_str())),
            ("compactions", v.compactions_json()),
        ])
    }))
}

async fn closers(State(s): State<WebState>, Path(id): Path<String>) -> Response {
    respond(s.view(&id, false).await.map(|v| {
        obj([
            ("id", Value::from(id.as_str())),
            ("closers", v.closers_json()),
        ])
    }))
}

/// Counts a CSP violation report (the body is not kept: a page can send anything).
async fn csp_report(State(s): State<WebState>, body: Bytes) -> Response {
    let _ = body.len();
    s.inner.csp_reports.fetch_add(1, Ordering::Relaxed);
    StatusCode::NO_CONTENT.into_response()
}

async fn csp_count(State(s): State<WebState>) -> Response {
    json(&obj([("reports", num(s.csp_reports()))]))
}

#[cfg(test)]
mod tests {
    use super::loopback_host;

    #[test]
    fn only_loopback_host_names_pass() {
        for ok in [
            "127.0.0.1:7878",
            "localhost:1",
            "localhost",
            "[::1]:80",
            "127.9.9.9",
        ] {
            assert!(loopback_host(ok), "{ok}");
        }
        for bad in [
            "attacker.example",
            "attacker.example:7878",
            "10.0.0.1:80",
            "[::2]:80",
            "localhost.attacker.example",
            "127.0.0.1.nip.io:80",
            "",
        ] {
            assert!(!loopback_host(bad), "{bad}");
        }
    }
}
