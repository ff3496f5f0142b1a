//! The store: live sessions, announcement, detach and publication.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, RwLock, Weak};
use std::thread::ThreadId;

use session_core::event::int_value;
use session_core::json::Value;
use session_core::{Event, Events, SharedClock};
use session_surface::{ObserverId, SeedMode, Session, SessionObserver, SharedSession, WarningSink};

use crate::error::{Error, Result, SharedError};
use crate::future::{BoxFuture, Contained, JoinAll, Spawner, default_spawner};
use crate::listeners::{
    CreatedFn, Dispatch, DisposedFn, EventFn, Listeners, ScopeId, Subscription, heard,
};
use crate::{BoxError, fork};

/// Where a prepared session's seed and header come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SeedSource {
    /// `Session.create`: the seed and the header built from `meta` are copied and validated.
    #[default]
    Snapshot,
    /// `Session.fromRestore` (the persistence load path): `meta` is the header itself,
    /// validated in place.
    Persistence,
}

/// Options of [`SessionStore::prepare`] and [`SessionStore::create`].
#[derive(Debug, Clone, Default)]
pub struct PrepareOptions {
    /// Raw seed event objects.
    pub seed: Option<Vec<Value>>,
    /// Already-parsed seed events; used when `seed` is `None`.
    pub seed_events: Option<Events>,
    /// Header fields. In snapshot mode the store builds the header from them in the order
    /// `version, id, createdAt, cwd?, parentSession?, seedLength?, origin?, delegationDepth?,
    /// agentPreset?` (`createdAt` absent or `null` means now); with
    /// [`SeedSource::Persistence`] it is the header.
    pub meta: Option<Value>,
    /// Which construction path to use.
    pub seed_source: SeedSource,
}

/// The source of [`SessionStore::fork`].
#[derive(Clone, Copy)]
pub enum ForkSource<'a> {
    /// A session id, resolved in the store.
    Id(&'a str),
    /// A session object, which must be the store's live instance for its id.
    Session(&'a SharedSession),
}

/// Process-unique store ids, for the attachment table.
static NEXT_STORE: AtomicU64 = AtomicU64::new(1);

/// Which store each session object is attached to: by id, then by object identity. An object
/// is attached to at most one store at a time.
static ATTACHED: LazyLock<Mutex<Attachments>> = LazyLock::new(|| Mutex::new(HashMap::new()));

/// Attached session objects by id, each with the id of its store.
type Attachments = HashMap<Arc<str>, Vec<(SharedSession, u64)>>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn attach(session: &SharedSession, id: &Arc<str>, store: u64) -> bool {
    let mut table = lock(&ATTACHED);
    let bucket = table.entry(id.clone()).or_default();
    if bucket.iter().any(|(s, _)| s.ptr_eq(session)) {
        return false;
    }
    bucket.push((session.clone(), store));
    true
}

fn unattach(session: &SharedSession, id: &Arc<str>, store: u64) {
    let mut table = lock(&ATTACHED);
    if let Some(bucket) = table.get_mut(id) {
        bucket.retain(|(s, owner)| !(s.ptr_eq(session) && *owner == store));
        if bucket.is_empty() {
            table.remove(id);
        }
    }
}

/// One live session of a store.
struct Entry {
    session: SharedSession,
    token: u64,
    scope: Option<ScopeId>,
    owner: Option<ScopeId>,
    observer: Option<ObserverId>,
    announced: bool,
    announcing: bool,
    /// The thread publishing an append on the session, from the dispatch phase until the
    /// append has settled.
    appending: Option<ThreadId>,
    detach_requested: bool,
}

#[derive(Default)]
struct State {
    entries: HashMap<Arc<str>, Entry>,
    /// Entry tokens in insertion order (tokens increase).
    order: BTreeMap<u64, Arc<str>>,
    next_token: u64,
    counter: u64,
}

impl State {
    fn by_token(&mut self, token: u64) -> Option<&mut Entry> {
        let id = self.order.get(&token)?;
        self.entries.get_mut(id).filter(|e| e.token == token)
    }

    fn live(&self, session: &SharedSession, id: &str) -> Option<&Entry> {
        self.entries.get(id).filter(|e| e.session.ptr_eq(session))
    }

    fn remove(&mut self, token: u64) -> Option<Entry> {
        let id = self.order.remove(&token)?;
        let entry = self.entries.remove(&id)?;
        Some(entry)
    }
}

pub(crate) struct StoreInner {
    id: u64,
    clock: SharedClock,
    state: Mutex<State>,
    pub(crate) listeners: Listeners,
    warning_sink: RwLock<WarningSink>,
    spawner: RwLock<Spawner>,
    next_scope: AtomicU64,
}

impl Drop for StoreInner {
    fn drop(&mut self) {
        let state = std::mem::take(
            self.state
                .get_mut()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        for (id, entry) in state.entries {
            if let Some(observer) = entry.observer {
                entry.session.unobserve(observer);
            }
            unattach(&entry.session, &id, self.id);
        }
    }
}

fn default_warning_sink() -> WarningSink {
    Arc::new(|warning: &str| eprintln!("{warning}"))
}

/// The in-memory session store (`SessionStore`, service key `sessions`): the live sessions of
/// a process, their announcement and disposal, publication of their events to listeners,
/// `flush` and `fork`.
///
/// Cloning gives another handle to the same store. Listeners are never called while the store
/// holds a lock, so they may call back into the store.
#[derive(Clone)]
pub struct SessionStore {
    inner: Arc<StoreInner>,
}

impl std::fmt::Debug for SessionStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = lock(&self.inner.state);
        let ids: Vec<&Arc<str>> = state.order.values().collect();
        f.debug_struct("SessionStore").field("live", &ids).finish()
    }
}

/// A listener scope (the reference's context scopes).
///
/// Listeners registered on a scope hear only the sessions entered through it
/// ([`SessionStore::enter_in`], [`Scope::enter`], [`Scope::create`]); listeners registered on
/// the store itself hear every session. A session entered without a scope is heard only by the
/// store-level listeners. Disposing a scope ([`Scope::dispose`]) detaches the sessions it
/// created and removes its listeners.
#[derive(Clone)]
pub struct Scope {
    store: Arc<StoreInner>,
    id: ScopeId,
}

impl std::fmt::Debug for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scope")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// Detaches one entered session (the function `enter` returns in the reference).
///
/// [`Detach::detach`] works once; further calls do nothing. A detach requested while the
/// session is being announced or while an append on it is being published is deferred until
/// that operation unwinds. Dropping a `Detach` does not detach. Clones share the once-flag.
#[derive(Clone)]
pub struct Detach {
    inner: Arc<DetachInner>,
}

struct DetachInner {
    store: Weak<StoreInner>,
    token: u64,
    used: AtomicBool,
}

impl Detach {
    /// Removes the session from the store (deferred while it is announcing or appending) and
    /// emits `session/disposed` if it had been announced.
    pub fn detach(&self) {
        if self.inner.used.swap(true, Ordering::SeqCst) {
            return;
        }
        if let Some(store) = self.inner.store.upgrade() {
            store.request_detach(self.inner.token);
        }
    }

    /// Whether [`Detach::detach`] has been called.
    pub fn is_used(&self) -> bool {
        self.inner.used.load(Ordering::SeqCst)
    }
}

impl std::fmt::Debug for Detach {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Detach")
            .field("token", &self.inner.token)
            .field("used", &self.is_used())
            .finish()
    }
}

/// The observer a store registers on each entered session.
struct StoreObserver {
    store: Weak<StoreInner>,
    token: u64,
    /// The `session/event` listeners resolved in the dispatch phase of the append in
    /// progress. The session publishes one append at a time, so this lock is never contended;
    /// keeping the list here rather than in the store's entry spares two lookups of the entry
    /// per append.
    resolved: Mutex<Option<Vec<EventFn>>>,
}

impl SessionObserver for StoreObserver {
    fn dispatch(&self, session: &Session, candidate: &Event) -> std::result::Result<(), BoxError> {
        match self.store.upgrade() {
            Some(store) => store.before_event(self, session, candidate),
            None => Ok(()),
        }
    }

    fn event(&self, session: &SharedSession, event: &Event) -> std::result::Result<(), BoxError> {
        if let Some(store) = self.store.upgrade() {
            let listeners = lock(&self.resolved).take().unwrap_or_default();
            store.after_event(listeners, session, event);
        }
        Ok(())
    }

    fn settled(&self, _session: &SharedSession, _committed: Option<&Event>) {
        *lock(&self.resolved) = None;
        if let Some(store) = self.store.upgrade() {
            store.settle_append(self.token);
        }
    }
}

/// A listener failure kept as a shared error.
fn shared(e: BoxError) -> SharedError {
    Arc::from(e)
}

/// `String(err)` of JavaScript for an error: `Error: <message>`.
fn js_error(e: &dyn std::fmt::Display) -> String {
    format!("Error: {e}")
}

/// Calls user code, turning a panic into an error (its message), so that a panicking listener
/// is contained like a failing one and never leaves an entry's flags set.
pub(crate) fn guarded<R>(
    f: impl FnOnce() -> std::result::Result<R, BoxError>,
) -> std::result::Result<R, BoxError> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(outcome) => outcome,
        Err(payload) => Err(panic_message(&*payload).into()),
    }
}

/// The message of a panic payload.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic".to_owned()
    }
}

impl StoreInner {
    fn warn(&self, message: &str) {
        let sink = self
            .warning_sink
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        // A failing sink must not break the notification in progress.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sink(message)));
    }

    fn spawn(&self, future: BoxFuture<()>) {
        let spawner = self
            .spawner
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        // A failing spawner must not break the notification in progress.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| spawner(future)));
    }

    /// Runs an asynchronous listener's future in the background; a failure is logged as
    /// `session "<id>": <what> listener rejected: <err>`.
    fn spawn_logged(
        self: &Arc<Self>,
        id: &str,
        what: &'static str,
        future: BoxFuture<std::result::Result<(), BoxError>>,
    ) {
        let store = Arc::downgrade(self);
        let id = id.to_owned();
        let future = Contained(future);
        self.spawn(Box::pin(async move {
            if let Err(e) = future.await
                && let Some(store) = store.upgrade()
            {
                store.warn(&format!(
                    "session \"{id}\": {what} listener rejected: {}",
                    js_error(&e)
                ));
            }
        }));
    }

    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Phase 1 of publication: marks the append in progress, runs the dispatch hooks (any error
    /// vetoes) and resolves the `session/event` listeners.
    fn before_event(
        self: &Arc<Self>,
        observer: &StoreObserver,
        session: &Session,
        candidate: &Event,
    ) -> std::result::Result<(), BoxError> {
        *lock(&observer.resolved) = None;
        let scope = {
            let mut state = self.state();
            let Some(entry) = state.by_token(observer.token) else {
                return Ok(());
            };
            entry.appending = Some(std::thread::current().id());
            entry.scope
        };
        let (hooks, listeners) = {
            let reg = self.listeners.lock();
            (heard(&reg.dispatch, scope), heard(&reg.event, scope))
        };
        if !hooks.is_empty() {
            let dispatch = Dispatch::Event { session, candidate };
            for hook in hooks {
                guarded(|| hook(&dispatch))?;
            }
            // A hook may have detached the session: only a live entry's listeners run.
            if self.state().by_token(observer.token).is_none() {
                return Ok(());
            }
        }
        *lock(&observer.resolved) = Some(listeners);
        Ok(())
    }

    /// Phase 3 of publication: calls the listeners resolved in the dispatch phase in order,
    /// with per-listener containment.
    fn after_event(
        self: &Arc<Self>,
        listeners: Vec<EventFn>,
        session: &SharedSession,
        event: &Event,
    ) {
        let id = session.id();
        for listener in listeners {
            match listener {
                EventFn::Sync(f) => {
                    if let Err(e) = guarded(|| f(session, event)) {
                        self.warn(&format!(
                            "session \"{id}\": session/event listener threw: {}",
                            js_error(&e)
                        ));
                    }
                }
                EventFn::Async(f) => match guarded(|| Ok(f(session, event))) {
                    Ok(future) => self.spawn_logged(&id, "session/event", future),
                    Err(e) => self.warn(&format!(
                        "session \"{id}\": session/event listener threw: {}",
                        js_error(&e)
                    )),
                },
            }
        }
    }

    /// Ends the append this thread was publishing on the entry (committed, vetoed or refused)
    /// and runs a detach requested meanwhile.
    fn settle_append(self: &Arc<Self>, token: u64) {
        let me = std::thread::current().id();
        let run = {
            let mut state = self.state();
            match state.by_token(token) {
                Some(entry) if entry.appending == Some(me) => {
                    entry.appending = None;
                    entry.detach_requested && !entry.announcing
                }
                _ => false,
            }
        };
        if run {
            self.request_detach(token);
        }
    }

    /// Detaches the entry `token`, or defers the detach while it is announcing or appending.
    pub(crate) fn request_detach(self: &Arc<Self>, token: u64) {
        let entry = {
            let mut state = self.state();
            let Some(entry) = state.by_token(token) else {
                return;
            };
            if entry.announcing || entry.appending.is_some() {
                entry.detach_requested = true;
                return;
            }
            state.remove(token)
        };
        let Some(entry) = entry else { return };
        if let Some(observer) = entry.observer {
            entry.session.unobserve(observer);
        }
        let id = entry.session.id();
        unattach(&entry.session, &id, self.id);
        if entry.announced {
            self.emit_disposed(&entry.session, entry.scope);
        }
    }

    /// Delivers `session/disposed` with containment.
    fn emit_disposed(self: &Arc<Self>, session: &SharedSession, scope: Option<ScopeId>) {
        let id = session.id();
        let (hooks, listeners) = {
            let reg = self.listeners.lock();
            (heard(&reg.dispatch, scope), heard(&reg.disposed, scope))
        };
        for hook in hooks {
            if let Err(e) = guarded(|| hook(&Dispatch::Disposed(session))) {
                self.warn(&format!(
                    "session \"{id}\": session/disposed dispatch threw: {}",
                    js_error(&e)
                ));
                return;
            }
        }
        for listener in listeners {
            match listener {
                DisposedFn::Sync(f) => {
                    if let Err(e) = guarded(|| f(session)) {
                        self.warn(&format!(
                            "session \"{id}\": session/disposed listener threw: {}",
                            js_error(&e)
                        ));
                    }
                }
                DisposedFn::Async(f) => match guarded(|| Ok(f(session))) {
                    Ok(future) => self.spawn_logged(&id, "session/disposed", future),
                    Err(e) => self.warn(&format!(
                        "session \"{id}\": session/disposed listener threw: {}",
                        js_error(&e)
                    )),
                },
            }
        }
    }

    fn new_scope(self: &Arc<Self>) -> Scope {
        Scope {
            store: self.clone(),
            id: self.next_scope.fetch_add(1, Ordering::Relaxed),
        }
    }

    fn prepare(&self, id: Option<&str>, options: PrepareOptions) -> Result<SharedSession> {
        self.prepare_from(id, options, None)
    }

    /// [`StoreInner::prepare`]; with `parent`, a snapshot-mode seed that is the first
    /// `seed_length` events of `parent` is taken from it by [`Session::fork_child`] (the same
    /// session, sharing the parent's validated prefix and derived state).
    fn prepare_from(
        &self,
        id: Option<&str>,
        options: PrepareOptions,
        parent: Option<(&Session, usize)>,
    ) -> Result<SharedSession> {
        let id: Arc<str> = {
            let mut state = self.state();
            match id {
                Some(id) => {
                    if state.entries.contains_key(id) {
                        return Err(Error::AlreadyExists { id: id.into() });
                    }
                    id.into()
                }
                None => loop {
                    state.counter += 1;
                    let minted = format!("session-{}", state.counter);
                    if !state.entries.contains_key(minted.as_str()) {
                        break minted.into();
                    }
                },
            }
        };
        let clock = self.clock.clone();
        let session = match options.seed_source {
            SeedSource::Persistence => {
                let header = options.meta.unwrap_or(Value::Null);
                match (options.seed, options.seed_events) {
                    (None, Some(events)) => {
                        Session::from_restore_events(id, events, &header, clock)?
                    }
                    (seed, _) => {
                        Session::from_seed(id, seed, Some(&header), SeedMode::Restore, clock)?
                    }
                }
            }
            SeedSource::Snapshot => {
                let header = build_header(&id, options.meta.as_ref(), self.clock.now_ms())?;
                match (options.seed, options.seed_events, parent) {
                    (Some(seed), _, _) => Session::create(id, Some(seed), Some(header), clock)?,
                    (None, _, Some((parent, seed_length))) => {
                        parent.fork_child(seed_length, id, Some(header), clock)?
                    }
                    (None, events, None) => {
                        Session::create_from_events(id, events, Some(header), clock)?
                    }
                }
            }
        };
        Ok(SharedSession::new(session))
    }

    fn enter(
        self: &Arc<Self>,
        session: &SharedSession,
        scope: Option<ScopeId>,
        owner: Option<ScopeId>,
    ) -> Result<Detach> {
        let id = session.id();
        let token = {
            let mut state = self.state();
            if state.entries.contains_key(&id) {
                return Err(Error::AlreadyExists { id });
            }
            if !attach(session, &id, self.id) {
                return Err(Error::AlreadyAttached { id });
            }
            state.next_token += 1;
            let token = state.next_token;
            state.order.insert(token, id.clone());
            state.entries.insert(
                id.clone(),
                Entry {
                    session: session.clone(),
                    token,
                    scope,
                    owner,
                    observer: None,
                    announced: false,
                    announcing: false,
                    appending: None,
                    detach_requested: false,
                },
            );
            token
        };
        let observer = session.observe(Arc::new(StoreObserver {
            store: Arc::downgrade(self),
            token,
            resolved: Mutex::new(None),
        }));
        let stale = {
            let mut state = self.state();
            match state.by_token(token) {
                Some(entry) => {
                    entry.observer = Some(observer);
                    false
                }
                None => true,
            }
        };
        if stale {
            session.unobserve(observer);
        }
        Ok(Detach {
            inner: Arc::new(DetachInner {
                store: Arc::downgrade(self),
                token,
                used: AtomicBool::new(false),
            }),
        })
    }

    fn announce(self: &Arc<Self>, session: &SharedSession) -> Result<()> {
        let id = session.id();
        let (token, scope) = {
            let mut state = self.state();
            let token = match state.live(session, &id) {
                Some(entry) => entry.token,
                None => return Err(Error::NotLive { id }),
            };
            let Some(entry) = state.by_token(token) else {
                return Err(Error::NotLive { id });
            };
            if entry.announced || entry.announcing {
                return Err(Error::AlreadyAnnounced { id });
            }
            entry.announced = true;
            entry.announcing = true;
            (token, entry.scope)
        };
        let result = self.emit_created(session, scope);
        let run = {
            let mut state = self.state();
            match state.by_token(token) {
                Some(entry) => {
                    entry.announcing = false;
                    entry.detach_requested && entry.appending.is_none()
                }
                None => false,
            }
        };
        if run {
            self.request_detach(token);
        }
        result
    }

    /// Delivers `session/created`: a hook or synchronous listener failure stops the delivery
    /// and is returned; an asynchronous failure is logged.
    fn emit_created(
        self: &Arc<Self>,
        session: &SharedSession,
        scope: Option<ScopeId>,
    ) -> Result<()> {
        let (hooks, listeners) = {
            let reg = self.listeners.lock();
            (heard(&reg.dispatch, scope), heard(&reg.created, scope))
        };
        for hook in hooks {
            guarded(|| hook(&Dispatch::Created(session)))
                .map_err(|e| Error::Listener(shared(e)))?;
        }
        let id = session.id();
        for listener in listeners {
            match listener {
                CreatedFn::Sync(f) => {
                    guarded(|| f(session)).map_err(|e| Error::Listener(shared(e)))?;
                }
                CreatedFn::Async(f) => {
                    let future =
                        guarded(|| Ok(f(session))).map_err(|e| Error::Listener(shared(e)))?;
                    self.spawn_logged(&id, "session/created", future);
                }
            }
        }
        Ok(())
    }

    fn create(
        self: &Arc<Self>,
        id: Option<&str>,
        options: PrepareOptions,
        scope: Option<ScopeId>,
    ) -> Result<(SharedSession, Detach)> {
        let session = self.prepare(id, options)?;
        let detach = self.enter(&session, scope, scope)?;
        if let Err(e) = self.announce(&session) {
            detach.detach();
            return Err(e);
        }
        Ok((session, detach))
    }

    fn flush(&self, session: &SharedSession) -> BoxFuture<Result<bool>> {
        let id = session.id();
        let scope = {
            let state = self.state();
            match state.live(session, &id) {
                Some(entry) => entry.scope,
                None => return Box::pin(std::future::ready(Err(Error::NotLive { id }))),
            }
        };
        let (hooks, listeners) = {
            let reg = self.listeners.lock();
            (heard(&reg.dispatch, scope), heard(&reg.flush, scope))
        };
        for hook in hooks {
            if let Err(e) = guarded(|| hook(&Dispatch::Flush(session))) {
                return Box::pin(std::future::ready(Err(Error::Listener(shared(e)))));
            }
        }
        let any = !listeners.is_empty();
        // Start every listener now; a panic while starting becomes a failed outcome.
        let started: Vec<BoxFuture<std::result::Result<(), BoxError>>> = listeners
            .iter()
            .map(|f| match guarded(|| Ok(f(session))) {
                Ok(future) => future,
                Err(e) => Box::pin(std::future::ready(Err(e))),
            })
            .collect();
        let join = JoinAll::new(started);
        Box::pin(async move {
            for outcome in join.await {
                outcome.map_err(|e| Error::Listener(shared(e)))?;
            }
            Ok(any)
        })
    }
}

/// Builds the header from `meta` in the reference's key order (§1.6).
fn build_header(id: &Arc<str>, meta: Option<&Value>, now: i64) -> Result<Value> {
    let meta = match meta {
        None => None,
        Some(Value::Object(o)) => Some(o),
        Some(_) => return Err(Error::MetaNotRecord),
    };
    let field = |key: &str| meta.and_then(|m| m.get(key)).cloned();
    let created_at = match field("createdAt") {
        None | Some(Value::Null) => int_value(now),
        Some(v) => v,
    };
    let mut entries: Vec<(&str, Value)> = vec![
        ("version", Value::from(0u32)),
        ("id", Value::string(id.clone())),
        ("createdAt", created_at),
    ];
    for key in [
        "cwd",
        "parentSession",
        "seedLength",
        "origin",
        "delegationDepth",
        "agentPreset",
    ] {
        if let Some(v) = field(key) {
            entries.push((key, v));
        }
    }
    Ok(Value::object(entries))
}

impl SessionStore {
    /// An empty store whose sessions read time from `clock`.
    pub fn new(clock: SharedClock) -> SessionStore {
        SessionStore {
            inner: Arc::new(StoreInner {
                id: NEXT_STORE.fetch_add(1, Ordering::Relaxed),
                clock,
                state: Mutex::new(State::default()),
                listeners: Listeners::default(),
                warning_sink: RwLock::new(default_warning_sink()),
                spawner: RwLock::new(default_spawner()),
                next_scope: AtomicU64::new(1),
            }),
        }
    }

    /// The clock sessions of this store are built with.
    pub fn clock(&self) -> &SharedClock {
        &self.inner.clock
    }

    /// A new listener scope.
    pub fn scope(&self) -> Scope {
        self.inner.new_scope()
    }

    /// Builds a session without adding it to the store or publishing it.
    ///
    /// Without `id` the store mints `session-<n>` from its counter (first `session-1`),
    /// skipping ids in the store. Ids are otherwise not validated.
    ///
    /// # Errors
    /// [`Error::AlreadyExists`] if the id is in the store; [`Error::MetaNotRecord`] if `meta`
    /// is not an object (snapshot mode); [`Error::Session`] when the seed or header is refused.
    pub fn prepare(&self, id: Option<&str>, options: PrepareOptions) -> Result<SharedSession> {
        self.inner.prepare(id, options)
    }

    /// [`SessionStore::prepare`] in persistence mode for a session that is already restored
    /// (by a [`session_surface::RestoreBuilder`] fed while its log was read, with this store's
    /// clock): the same id check, then the session as it was built.
    ///
    /// # Errors
    /// [`Error::AlreadyExists`] if the id is in the store.
    pub fn prepare_restored(&self, session: Session) -> Result<SharedSession> {
        if self.inner.state().entries.contains_key(&**session.id()) {
            return Err(Error::AlreadyExists {
                id: session.id().clone(),
            });
        }
        Ok(SharedSession::new(session))
    }

    /// Adds `session` to the store in the global scope, without announcing it. Events it
    /// appends from now on are published.
    ///
    /// # Errors
    /// [`Error::AlreadyExists`] if its id is in the store, then [`Error::AlreadyAttached`] if
    /// the object is entered in any store.
    pub fn enter(&self, session: &SharedSession) -> Result<Detach> {
        self.inner.enter(session, None, None)
    }

    /// Like [`SessionStore::enter`], with `scope` as the session's listener scope.
    pub fn enter_in(&self, session: &SharedSession, scope: &Scope) -> Result<Detach> {
        self.inner.enter(session, Some(scope.id), None)
    }

    /// Marks an entered session announced and emits `session/created`.
    ///
    /// A synchronous listener error (or dispatch hook error) stops the remaining listeners and
    /// is returned; the session stays entered and announced (its detach emits
    /// `session/disposed`). An asynchronous listener failure is logged as
    /// `session "<id>": session/created listener rejected: <err>`. A detach requested during
    /// the announce runs afterwards.
    ///
    /// # Errors
    /// [`Error::NotLive`], [`Error::AlreadyAnnounced`] (also for a reentrant call from a
    /// listener), [`Error::Listener`].
    pub fn announce(&self, session: &SharedSession) -> Result<()> {
        self.inner.announce(session)
    }

    /// `prepare`, `enter` and `announce` in the global scope. If the announce fails, the
    /// session is detached (emitting `session/disposed`) and the error returned, so the id can
    /// be used again.
    pub fn create(
        &self,
        id: Option<&str>,
        options: PrepareOptions,
    ) -> Result<(SharedSession, Detach)> {
        self.inner.create(id, options, None)
    }

    /// The live session with this id.
    pub fn get(&self, id: &str) -> Option<SharedSession> {
        self.inner
            .state()
            .entries
            .get(id)
            .map(|e| e.session.clone())
    }

    /// The live sessions in insertion order (a fresh list).
    pub fn list(&self) -> Vec<SharedSession> {
        let state = self.inner.state();
        state
            .order
            .values()
            .filter_map(|id| state.entries.get(id))
            .map(|e| e.session.clone())
            .collect()
    }

    /// Whether `session` is the live instance of its id in this store.
    pub fn is_live(&self, session: &SharedSession) -> bool {
        self.inner.state().live(session, &session.id()).is_some()
    }

    /// Whether `session` has been announced in this store (and is still live).
    pub fn is_announced(&self, session: &SharedSession) -> bool {
        self.inner
            .state()
            .live(session, &session.id())
            .is_some_and(|e| e.announced)
    }

    /// Detaches the live instance `session` as its [`Detach`] would; returns whether it was
    /// live. (Useful for sessions created by [`SessionStore::fork`].)
    pub fn detach(&self, session: &SharedSession) -> bool {
        let token = self
            .inner
            .state()
            .live(session, &session.id())
            .map(|e| e.token);
        match token {
            Some(token) => {
                self.inner.request_detach(token);
                true
            }
            None => false,
        }
    }

    /// Starts every `session/flush` listener of the session's scope and the global ones, waits
    /// for all of them to settle, and returns the first failure in registration order, else
    /// whether any listener existed.
    ///
    /// The live check and the start of the listeners happen when `flush` is called; the
    /// returned future only waits.
    ///
    /// # Errors
    /// [`Error::NotLive`]; [`Error::Listener`] with the first listener failure.
    pub fn flush(&self, session: &SharedSession) -> BoxFuture<Result<bool>> {
        self.inner.flush(session)
    }

    /// Forks a closed-turn prefix of `source` into a new live child session (§6.2).
    ///
    /// Checks, in order: a given `child_id` must not be live (`SESSION_ALREADY_EXISTS`); the
    /// source must resolve to the store's live instance (`SESSION_NOT_FOUND`,
    /// `SESSION_NOT_LIVE`); the boundary (inclusive, default the last seq) must be a
    /// contiguous seq outside an open turn (`INVALID_BOUNDARY`, `OPEN_TURN`). The child is
    /// then created with the prefix as its seed and `meta` `{cwd?, parentSession,
    /// seedLength}`; its id is minted when omitted. The child stays live until
    /// [`SessionStore::detach`]; use [`SessionStore::fork_owned`] to get its [`Detach`].
    ///
    /// # Errors
    /// [`Error::Fork`] for the checks above; any error of `create` as it is.
    pub fn fork(
        &self,
        source: ForkSource<'_>,
        boundary: Option<&Value>,
        child_id: Option<&str>,
    ) -> Result<SharedSession> {
        self.fork_owned(source, boundary, child_id)
            .map(|(session, _)| session)
    }

    /// [`SessionStore::fork`], also returning the child's [`Detach`].
    pub fn fork_owned(
        &self,
        source: ForkSource<'_>,
        boundary: Option<&Value>,
        child_id: Option<&str>,
    ) -> Result<(SharedSession, Detach)> {
        fork::fork(self, source, boundary, child_id)
    }

    pub(crate) fn inner(&self) -> &Arc<StoreInner> {
        &self.inner
    }

    /// Where warnings go (contained listener failures). The default writes to standard error.
    pub fn set_warning_sink(&self, sink: WarningSink) {
        *self
            .inner
            .warning_sink
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = sink;
    }

    /// How asynchronous listeners' futures are driven. The default polls a future once and, if
    /// it is not finished, blocks on it in a new thread.
    pub fn set_spawner(&self, spawner: Spawner) {
        *self
            .inner
            .spawner
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = spawner;
    }
}

impl StoreInner {
    /// Creates a fork child whose seed is the first `seed_length` events of `parent` (see
    /// [`StoreInner::prepare_from`]).
    pub(crate) fn create_child(
        self: &Arc<Self>,
        id: Option<&str>,
        options: PrepareOptions,
        parent: &Session,
        seed_length: usize,
    ) -> Result<(SharedSession, Detach)> {
        let session = self.prepare_from(id, options, Some((parent, seed_length)))?;
        let detach = self.enter(&session, None, None)?;
        if let Err(e) = self.announce(&session) {
            detach.detach();
            return Err(e);
        }
        Ok((session, detach))
    }

    /// The live instance for `id`, if any.
    pub(crate) fn live_instance(&self, id: &str) -> Option<SharedSession> {
        self.state().entries.get(id).map(|e| e.session.clone())
    }
}

/// Registration methods shared by the store (global scope) and scopes.
macro_rules! listener_methods {
    ($scope:expr) => {
        /// Registers a synchronous `session/created` listener. An error vetoes the creation
        /// and stops later listeners.
        pub fn on_created(
            &self,
            f: impl Fn(&SharedSession) -> std::result::Result<(), BoxError> + Send + Sync + 'static,
        ) -> Subscription {
            self.registry()
                .add_created($scope(self), CreatedFn::Sync(Arc::new(f)))
        }

        /// Registers an asynchronous `session/created` listener; a failure is logged as
        /// `session "<id>": session/created listener rejected: <err>` and does not roll back.
        pub fn on_created_async(
            &self,
            f: impl Fn(&SharedSession) -> BoxFuture<std::result::Result<(), BoxError>>
                + Send
                + Sync
                + 'static,
        ) -> Subscription {
            self.registry()
                .add_created($scope(self), CreatedFn::Async(Arc::new(f)))
        }

        /// Registers a `session/event` listener (post-commit). An error is logged as
        /// `session "<id>": session/event listener threw: <err>`; later listeners still run.
        pub fn on_event(
            &self,
            f: impl Fn(&SharedSession, &Event) -> std::result::Result<(), BoxError>
                + Send
                + Sync
                + 'static,
        ) -> Subscription {
            self.registry()
                .add_event($scope(self), EventFn::Sync(Arc::new(f)))
        }

        /// Registers an asynchronous `session/event` listener; a failure is logged as
        /// `session "<id>": session/event listener rejected: <err>`.
        pub fn on_event_async(
            &self,
            f: impl Fn(&SharedSession, &Event) -> BoxFuture<std::result::Result<(), BoxError>>
                + Send
                + Sync
                + 'static,
        ) -> Subscription {
            self.registry()
                .add_event($scope(self), EventFn::Async(Arc::new(f)))
        }

        /// Registers a pre-commit hook for appends: it sees the frozen candidate while the log
        /// still has its old length, and an error vetoes the append.
        pub fn on_dispatch(
            &self,
            f: impl Fn(&Session, &Event) -> std::result::Result<(), BoxError> + Send + Sync + 'static,
        ) -> Subscription {
            self.registry().add_dispatch(
                $scope(self),
                Arc::new(move |d: &Dispatch<'_>| match d {
                    Dispatch::Event { session, candidate } => f(session, candidate),
                    _ => Ok(()),
                }),
            )
        }

        /// Registers a dispatch hook for every notification (see [`Dispatch`]).
        pub fn on_dispatch_any(
            &self,
            f: impl Fn(&Dispatch<'_>) -> std::result::Result<(), BoxError> + Send + Sync + 'static,
        ) -> Subscription {
            self.registry().add_dispatch($scope(self), Arc::new(f))
        }

        /// Registers a `session/disposed` listener. An error is logged as
        /// `session "<id>": session/disposed listener threw: <err>`.
        pub fn on_disposed(
            &self,
            f: impl Fn(&SharedSession) -> std::result::Result<(), BoxError> + Send + Sync + 'static,
        ) -> Subscription {
            self.registry()
                .add_disposed($scope(self), DisposedFn::Sync(Arc::new(f)))
        }

        /// Registers an asynchronous `session/disposed` listener; a failure is logged as
        /// `session "<id>": session/disposed listener rejected: <err>`.
        pub fn on_disposed_async(
            &self,
            f: impl Fn(&SharedSession) -> BoxFuture<std::result::Result<(), BoxError>>
                + Send
                + Sync
                + 'static,
        ) -> Subscription {
            self.registry()
                .add_disposed($scope(self), DisposedFn::Async(Arc::new(f)))
        }

        /// Registers a `session/flush` listener: called when the session is flushed; the
        /// flush waits for its future.
        pub fn on_flush(
            &self,
            f: impl Fn(&SharedSession) -> BoxFuture<std::result::Result<(), BoxError>>
                + Send
                + Sync
                + 'static,
        ) -> Subscription {
            self.registry().add_flush($scope(self), Arc::new(f))
        }
    };
}

impl SessionStore {
    fn registry(&self) -> &Listeners {
        &self.inner.listeners
    }

    listener_methods!(|_: &SessionStore| None);
}

impl Scope {
    fn registry(&self) -> &Listeners {
        &self.store.listeners
    }

    listener_methods!(|s: &Scope| Some(s.id));

    /// Enters `session` with this scope (see [`SessionStore::enter_in`]).
    pub fn enter(&self, session: &SharedSession) -> Result<Detach> {
        self.store.enter(session, Some(self.id), None)
    }

    /// `prepare`, `enter` and `announce` with this scope as the session's listener scope and
    /// owner: disposing the scope detaches the session.
    pub fn create(
        &self,
        id: Option<&str>,
        options: PrepareOptions,
    ) -> Result<(SharedSession, Detach)> {
        self.store.create(id, options, Some(self.id))
    }

    /// Disposes the scope: detaches the sessions it created (most recent first; deferred while
    /// they are announcing or appending), then removes its listeners.
    pub fn dispose(&self) {
        let tokens: Vec<u64> = {
            let state = self.store.state();
            state
                .order
                .iter()
                .rev()
                .filter(|(_, id)| {
                    state
                        .entries
                        .get(*id)
                        .is_some_and(|e| e.owner == Some(self.id))
                })
                .map(|(t, _)| *t)
                .collect()
        };
        for token in tokens {
            self.store.request_detach(token);
        }
        self.store.listeners.lock().remove_scope(self.id);
    }
}
