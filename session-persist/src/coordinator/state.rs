//! Coordinator state: per-id `SessionState`, live entries, retirements, the preparation
//! source type, and the per-id operation chains that serialize every operation on an id.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use session_core::{Event, SessionHeader};
use session_store::{SessionStore, SharedSession, Subscription, WarningSink};
use tokio::runtime::Handle;
use tokio::sync::{oneshot, watch};

use crate::backend::{Backend, Revision, TornMarker};
use crate::cancel::{AbortReason, CancelToken};
use crate::error::{Error, Result};
use crate::preparations::Preparations;
use crate::promise::{Promise, Resolver, observe_queued_abort, promise};
use crate::service::{DetailedInspection, Inspection};
use crate::write_behind::{WriteBehind, WriteBehindOptions};

/// Per-id coordinator state (`SessionState`).
pub(super) struct SessionState {
    /// Identity of this state object (a replaced state has another).
    pub(super) generation: u64,
    pub(super) meta: SessionHeader,
    /// The next seq storage expects.
    pub(super) cursor: u64,
    /// Whether the artifact exists.
    pub(super) materialized: bool,
    /// The live session bound to this state, if any.
    pub(super) owner: Option<SharedSession>,
    /// Write ownership not taken yet: the first append takes it, checked against this revision
    /// (a live session adopted from storage without writing, see `adopt_live_prefix`).
    pub(super) unclaimed: Option<Revision>,
}

/// One live session's initialization and write-behind controller.
#[derive(Clone)]
pub(super) struct LiveEntry {
    pub(super) session: SharedSession,
    pub(super) init: Promise<()>,
    pub(super) writes: WriteBehind<Event, Arc<Error>>,
}

pub(super) struct Retirement {
    pub(super) token: u64,
    pub(super) done: Promise<()>,
}

#[derive(Default)]
pub(super) struct Core {
    pub(super) states: HashMap<Arc<str>, SessionState>,
    pub(super) live: HashMap<Arc<str>, Vec<LiveEntry>>,
    pub(super) retirements: HashMap<Arc<str>, Retirement>,
    /// The ids this service opened for writing ([`Backend::acquire`]) and has not released;
    /// `true` once the opening covers a stored artifact (opened at a revision, or published by
    /// this service), `false` for a new session opened before its first publication.
    pub(super) leased: HashMap<Arc<str>, bool>,
    pub(super) next: u64,
    pub(super) disposed: bool,
}

impl Core {
    pub(super) fn next_token(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    pub(super) fn live_entry(&self, session: &SharedSession) -> Option<&LiveEntry> {
        self.live
            .get(&session.id())?
            .iter()
            .find(|e| e.session.ptr_eq(session))
    }

    pub(super) fn live_entries(&self) -> Vec<LiveEntry> {
        self.live.values().flatten().cloned().collect()
    }
}

/// One validated cold source and the exact unpublished session built from it.
pub(crate) struct PreparedSource {
    pub(super) inspection: Inspection,
    pub(super) session: SharedSession,
    pub(super) revision: Revision,
    pub(super) session_length: u64,
    pub(super) torn: Option<TornMarker>,
    pub(super) closers: Vec<Event>,
}

impl PreparedSource {
    /// The prepared source of `session`, whose first `length` events (the stored ones plus
    /// the `closers`) are what the inspection shows.
    pub(super) fn new(
        session: SharedSession,
        length: usize,
        revision: Revision,
        torn: Option<TornMarker>,
        closers: Vec<Event>,
    ) -> PreparedSource {
        let session_length = session.seq();
        // The inspection shares the session's own (restored) events.
        let events = session.events().prefix(length);
        PreparedSource {
            inspection: Inspection {
                meta: session.header(),
                events,
            },
            session,
            revision,
            session_length,
            torn,
            closers,
        }
    }

    pub(super) fn detailed(&self) -> DetailedInspection {
        let (surface, messages, transcript) = self
            .session
            .read(|s| (s.surface_nodes(), s.derive_messages(), s.transcript()));
        DetailedInspection {
            stored: self
                .inspection
                .events
                .len()
                .saturating_sub(self.closers.len()),
            inspection: self.inspection.clone(),
            torn: self.torn.clone(),
            surface,
            messages,
            transcript,
        }
    }
}

pub(super) type Source = Arc<PreparedSource>;

/// The tail of each id's chain: its generation and its settlement.
pub(super) type Tails = HashMap<Arc<str>, (u64, watch::Receiver<bool>)>;

/// The per-id operation chains.
#[derive(Default)]
pub(super) struct Chains {
    pub(super) tails: Mutex<Tails>,
    pub(super) next: AtomicU64,
}

/// Marks a chain link settled when dropped (also when its task panics or is cancelled).
pub(super) struct LinkGuard {
    pub(super) chains: Arc<CoordInner>,
    pub(super) id: Arc<str>,
    pub(super) generation: u64,
    pub(super) done: watch::Sender<bool>,
}

impl Drop for LinkGuard {
    fn drop(&mut self) {
        self.done.send_replace(true);
        let mut tails = self.chains.chains_lock();
        if tails
            .get(&self.id)
            .is_some_and(|(g, _)| *g == self.generation)
        {
            tails.remove(&self.id);
        }
    }
}

pub(super) const QUEUED: u8 = 0;
pub(super) const STARTED: u8 = 1;
pub(super) const ABANDONED: u8 = 2;

pub(crate) struct CoordInner {
    pub(super) backend: Arc<dyn Backend>,
    pub(super) store: SessionStore,
    pub(super) handle: Handle,
    pub(super) write_options: WriteBehindOptions,
    pub(super) core: Mutex<Core>,
    pub(super) pool: Preparations<Source, u64>,
    pub(super) chains: Chains,
    pub(super) subscriptions: Mutex<Vec<Subscription>>,
    pub(super) warnings: RwLock<WarningSink>,
    pub(super) disposal: Mutex<Option<Promise<()>>>,
    pub(super) redact: Option<crate::redact::Redactor>,
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl CoordInner {
    pub(super) fn core(&self) -> MutexGuard<'_, Core> {
        lock(&self.core)
    }

    pub(super) fn chains_lock(&self) -> MutexGuard<'_, Tails> {
        lock(&self.chains.tails)
    }

    pub(super) fn name(&self) -> &str {
        self.backend.name()
    }

    pub(super) fn warn(&self, message: &str) {
        let sink = self
            .warnings
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        sink(message);
    }

    pub(super) fn closed(&self) -> Error {
        Error::Closed {
            backend: self.name().to_owned(),
        }
    }

    pub(super) fn check_open(&self) -> Result<()> {
        if self.core().disposed {
            return Err(self.closed());
        }
        Ok(())
    }

    // ---- per-id serialization ----

    /// Queues `op` behind every earlier operation on `id` and starts it when they have
    /// settled, whatever their outcome. `deliver` receives the outcome. With `cancel`, an
    /// operation cancelled before it starts does not run.
    pub(super) fn enqueue<T, F, Fut>(
        self: &Arc<Self>,
        id: &str,
        cancel: Option<CancelToken>,
        flag: Arc<AtomicU8>,
        op: F,
        deliver: impl FnOnce(Result<T>) + Send + 'static,
    ) where
        T: Send + 'static,
        F: FnOnce(Arc<CoordInner>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T>> + Send + 'static,
    {
        let id: Arc<str> = Arc::from(id);
        let generation = self.chains.next.fetch_add(1, Ordering::Relaxed) + 1;
        let (done, rx) = watch::channel(false);
        let previous = self
            .chains_lock()
            .insert(id.clone(), (generation, rx))
            .map(|(_, prev)| prev);
        let me = self.clone();
        self.handle.spawn(async move {
            let guard = LinkGuard {
                chains: me.clone(),
                id,
                generation,
                done,
            };
            if let Some(mut previous) = previous {
                let _ = previous.wait_for(|settled| *settled).await;
            }
            let outcome = match cancel.as_ref().and_then(CancelToken::reason) {
                Some(reason) => Err(Error::Aborted(reason)),
                None => {
                    if flag
                        .compare_exchange(QUEUED, STARTED, Ordering::SeqCst, Ordering::SeqCst)
                        .is_ok()
                    {
                        op(me).await
                    } else {
                        Err(Error::Aborted(
                            cancel
                                .as_ref()
                                .and_then(CancelToken::reason)
                                .unwrap_or_else(AbortReason::aborted),
                        ))
                    }
                }
            };
            // The outcome is delivered before the next operation on this id may start.
            deliver(outcome);
            drop(guard);
        });
    }

    /// Runs `op` in `id`'s chain; the returned future gives its outcome. With `cancel`, a
    /// caller whose operation has not started yet gets the exact reason at once.
    pub(super) fn serialize<T, F, Fut>(
        self: &Arc<Self>,
        id: &str,
        cancel: Option<&CancelToken>,
        op: F,
    ) -> impl Future<Output = Result<T>> + Send + 'static
    where
        T: Send + 'static,
        F: FnOnce(Arc<CoordInner>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T>> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let flag = Arc::new(AtomicU8::new(QUEUED));
        self.enqueue(id, cancel.cloned(), flag.clone(), op, move |outcome| {
            let _ = tx.send(outcome);
        });
        let cancel = cancel.cloned();
        async move {
            let result = async {
                rx.await.unwrap_or_else(|_| {
                    Err(Error::Task {
                        message: "a serialized operation ended without a result".to_owned(),
                    })
                })
            };
            observe_queued_abort(result, cancel.as_ref(), || {
                flag.compare_exchange(QUEUED, ABANDONED, Ordering::SeqCst, Ordering::SeqCst)
                    .is_err()
            })
            .await
        }
    }

    /// Runs `op` in `id`'s chain and returns its settlement as a shareable promise.
    pub(super) fn serialize_shared<T, F, Fut>(self: &Arc<Self>, id: &str, op: F) -> Promise<T>
    where
        T: Clone + Send + Sync + 'static,
        F: FnOnce(Arc<CoordInner>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T>> + Send + 'static,
    {
        let (resolver, result): (Resolver<T>, Promise<T>) = promise();
        self.enqueue(
            id,
            None,
            Arc::new(AtomicU8::new(QUEUED)),
            op,
            move |outcome| resolver.settle(outcome.map_err(Arc::new)),
        );
        result
    }
}
