//! The preparation pool (`SessionPreparations`): shared cold reads, exclusive reservations of
//! unpublished sessions, and a small LRU of ready entries.
//!
//! Entry phases: `loading → ready ⇄ committing → reserved`. Observers share an in-flight or
//! ready entry; a reservation waits until the entry is ready, commits it (durable repair and
//! cursor state), and holds it exclusively until it is attached (published), discarded, or
//! released back to the ready LRU. Only ready entries count toward the capacity.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::runtime::Handle;
use tokio::sync::watch;

use crate::cancel::CancelToken;
use crate::error::{Error, Result};
use crate::promise::{Promise, Resolver, observe_queued_abort, promise, unshare};
use crate::write_behind::BoxFuture;

/// The phase of a pool entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// The cold read is running.
    Loading,
    /// Loaded and shareable; counts toward the LRU capacity.
    Ready,
    /// A reservation is committing it.
    Committing,
    /// Exclusively held by a reservation.
    Reserved,
}

/// What [`Preparations::discard_ready`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Discard {
    /// No entry for that exact source.
    Missing,
    /// The ready entry was removed.
    Discarded,
    /// The entry is committing or reserved and stays.
    Retained,
}

/// An exclusively held prepared source with its committed state.
#[derive(Clone)]
pub(crate) struct Reservation<S, C> {
    id: Arc<str>,
    entry: u64,
    token: u64,
    /// The prepared source.
    pub(crate) source: S,
    /// What the commit established.
    pub(crate) state: C,
}

/// A source observed through [`Preparations::inspect`], with the identity of its entry.
pub(crate) struct Observed<S> {
    /// The entry that produced it (for [`Preparations::discard_ready`]).
    pub(crate) entry: u64,
    /// The source.
    pub(crate) source: S,
}

struct Entry<S, C> {
    token: u64,
    result: Promise<S>,
    phase: Phase,
    source: Option<S>,
    reservation: Option<Reservation<S, C>>,
    order: u64,
}

struct PoolState<S, C> {
    entries: HashMap<Arc<str>, Entry<S, C>>,
    next: u64,
}

struct PoolInner<S, C> {
    state: Mutex<PoolState<S, C>>,
    changed: watch::Sender<u64>,
    capacity: usize,
    handle: Handle,
}

/// The pool. Clones share it.
pub(crate) struct Preparations<S, C> {
    inner: Arc<PoolInner<S, C>>,
}

impl<S, C> Clone for Preparations<S, C> {
    fn clone(&self) -> Self {
        Preparations {
            inner: self.inner.clone(),
        }
    }
}

/// A cold loader: starts the read and hands its outcome to the [`Settle`] it receives (also
/// for a failure it detects synchronously).
pub(crate) type Loader<'a, S, C> = Box<dyn FnOnce(Settle<S, C>) + Send + 'a>;

/// Settles the load of one pool entry: the entry becomes ready (or is removed on failure)
/// before the observers are woken, so work queued behind the load sees the ready entry.
/// Dropping it unsettled counts as a failed load.
pub(crate) struct Settle<S, C>
where
    S: Clone + Send + Sync + 'static,
    C: Clone + Send + Sync + 'static,
{
    pool: Preparations<S, C>,
    id: Arc<str>,
    token: u64,
    out: Option<Resolver<S>>,
}

impl<S, C> Settle<S, C>
where
    S: Clone + Send + Sync + 'static,
    C: Clone + Send + Sync + 'static,
{
    /// Settles the load with `outcome`.
    pub(crate) fn settle(mut self, outcome: Result<S>) {
        self.finish(outcome);
    }

    fn finish(&mut self, outcome: Result<S>) {
        let Some(out) = self.out.take() else {
            return;
        };
        match &outcome {
            Ok(source) => {
                let mut st = self.pool.lock();
                if let Some(e) = st
                    .entries
                    .get_mut(&*self.id)
                    .filter(|e| e.token == self.token)
                {
                    e.source = Some(source.clone());
                    self.pool.make_ready(&mut st, &self.id);
                }
            }
            Err(_) => self.pool.remove(&self.id, self.token),
        }
        out.settle(outcome.map_err(Arc::new));
    }
}

impl<S, C> Drop for Settle<S, C>
where
    S: Clone + Send + Sync + 'static,
    C: Clone + Send + Sync + 'static,
{
    fn drop(&mut self) {
        if self.out.is_some() {
            self.finish(Err(Error::Task {
                message: "the preparation load ended without a result".to_owned(),
            }));
        }
    }
}

/// A commit: durable repair and cursor state for a ready source. `Ok(None)` means the source
/// is stale and must be reloaded.
pub(crate) type Commit<S, C> = Box<dyn FnOnce(S) -> BoxFuture<Result<Option<(S, C)>>> + Send>;

impl<S, C> Preparations<S, C>
where
    S: Clone + Send + Sync + 'static,
    C: Clone + Send + Sync + 'static,
{
    /// A pool keeping at most `capacity` ready entries.
    pub(crate) fn new(capacity: usize, handle: Handle) -> Preparations<S, C> {
        Preparations {
            inner: Arc::new(PoolInner {
                state: Mutex::new(PoolState {
                    entries: HashMap::new(),
                    next: 1,
                }),
                changed: watch::channel(0).0,
                capacity,
                handle,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, PoolState<S, C>> {
        self.inner
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn bump(&self) {
        self.inner.changed.send_modify(|n| *n += 1);
    }

    /// Whether an entry exists for `id`.
    pub(crate) fn has(&self, id: &str) -> bool {
        self.lock().entries.contains_key(id)
    }

    /// The phase of the entry for `id`.
    pub(crate) fn phase(&self, id: &str) -> Option<Phase> {
        self.lock().entries.get(id).map(|e| e.phase)
    }

    /// How many entries exist.
    pub(crate) fn len(&self) -> usize {
        self.lock().entries.len()
    }

    /// The existing entry for `id`, or a new one whose load starts now (before this returns,
    /// so that work queued after this call runs after the load).
    fn entry_for(&self, id: &str, load: Loader<'_, S, C>) -> (u64, Promise<S>) {
        let (token, resolver, result) = {
            let mut st = self.lock();
            if let Some(e) = st.entries.get(id) {
                return (e.token, e.result.clone());
            }
            let token = st.next;
            st.next += 1;
            let (resolver, result) = promise();
            st.entries.insert(
                Arc::from(id),
                Entry {
                    token,
                    result: result.clone(),
                    phase: Phase::Loading,
                    source: None,
                    reservation: None,
                    order: 0,
                },
            );
            (token, resolver, result)
        };
        load(Settle {
            pool: self.clone(),
            id: Arc::from(id),
            token,
            out: Some(resolver),
        });
        (token, result)
    }

    /// Marks an entry ready, wakes waiters and applies the LRU bound.
    fn make_ready(&self, st: &mut PoolState<S, C>, id: &str) {
        if let Some(e) = st.entries.get_mut(id) {
            e.phase = Phase::Ready;
        }
        self.touch(st, id);
        self.bump();
    }

    fn touch(&self, st: &mut PoolState<S, C>, id: &str) {
        let order = st.next;
        st.next += 1;
        if let Some(e) = st.entries.get_mut(id) {
            e.order = order;
        }
        let ready = st
            .entries
            .values()
            .filter(|e| e.phase == Phase::Ready)
            .count();
        if ready <= self.inner.capacity {
            return;
        }
        let oldest = st
            .entries
            .iter()
            .filter(|(_, e)| e.phase == Phase::Ready)
            .min_by_key(|(_, e)| e.order)
            .map(|(k, _)| k.clone());
        if let Some(k) = oldest {
            st.entries.remove(&k);
        }
    }

    /// Removes the entry for `id` if it is still entry `token`.
    fn remove(&self, id: &str, token: u64) {
        let mut st = self.lock();
        if st.entries.get(id).is_some_and(|e| e.token == token) {
            st.entries.remove(id);
            drop(st);
            self.bump();
        }
    }

    /// Observes the source of `id`, sharing an in-flight or ready entry or starting a load.
    /// Cancelling only abandons this observation; the shared load goes on.
    pub(crate) async fn inspect(
        &self,
        id: &str,
        load: Loader<'_, S, C>,
        cancel: Option<&CancelToken>,
    ) -> Result<Observed<S>> {
        let (token, result) = self.entry_for(id, load);
        let loaded = observe_queued_abort(
            async { result.wait().await.map_err(unshare) },
            cancel,
            || false,
        )
        .await?;
        let mut st = self.lock();
        let (source, ready) = match st.entries.get(id).filter(|e| e.token == token) {
            Some(e) => (e.source.clone().unwrap_or(loaded), e.phase == Phase::Ready),
            None => (loaded, false),
        };
        if ready {
            self.touch(&mut st, id);
        }
        Ok(Observed {
            entry: token,
            source,
        })
    }

    /// Reserves the source of `id`: waits for the entry to be ready, commits it, and holds it.
    /// `Ok(None)`: the entry was invalidated or replaced meanwhile (the caller retries).
    pub(crate) async fn reserve(
        &self,
        id: &str,
        load: Loader<'_, S, C>,
        commit: Commit<S, C>,
        cancel: Option<&CancelToken>,
    ) -> Result<Option<Reservation<S, C>>> {
        let (token, result) = self.entry_for(id, load);
        observe_queued_abort(
            async { result.wait().await.map_err(unshare) },
            cancel,
            || false,
        )
        .await?;
        let source = loop {
            let mut changed = self.inner.changed.subscribe();
            {
                let mut st = self.lock();
                let Some(e) = st.entries.get_mut(id).filter(|e| e.token == token) else {
                    return Ok(None);
                };
                if e.phase == Phase::Ready {
                    let Some(source) = e.source.clone() else {
                        return Ok(None);
                    };
                    e.phase = Phase::Committing;
                    break source;
                }
            }
            observe_queued_abort(
                async {
                    let _ = changed.changed().await;
                    Ok(())
                },
                cancel,
                || false,
            )
            .await?;
        };
        self.bump();
        // The commit and the transition that follows it run to completion even if this caller
        // goes away, so the entry never stays `committing`.
        let pool = self.clone();
        let id: Arc<str> = Arc::from(id);
        let cancel = cancel.cloned();
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.inner.handle.spawn(async move {
            let committed = commit(source).await;
            let outcome = pool.finish_commit(&id, token, committed, cancel.as_ref());
            if let Err(Ok(Some(unclaimed))) = tx.send(outcome) {
                pool.release(&unclaimed, true);
            }
        });
        rx.await.unwrap_or_else(|_| {
            Err(Error::Task {
                message: "the preparation commit ended without a result".to_owned(),
            })
        })
    }

    fn finish_commit(
        &self,
        id: &Arc<str>,
        token: u64,
        committed: Result<Option<(S, C)>>,
        cancel: Option<&CancelToken>,
    ) -> Result<Option<Reservation<S, C>>> {
        let (source, state) = match committed {
            Err(error) => {
                self.remove(id, token);
                return Err(error);
            }
            Ok(None) => {
                self.remove(id, token);
                return Ok(None);
            }
            Ok(Some(committed)) => committed,
        };
        let mut st = self.lock();
        let Some(e) = st.entries.get_mut(&**id).filter(|e| e.token == token) else {
            return Ok(None);
        };
        e.source = Some(source.clone());
        if let Some(reason) = cancel.and_then(CancelToken::reason) {
            self.make_ready(&mut st, id);
            return Err(Error::Aborted(reason));
        }
        let reservation_token = st.next;
        st.next += 1;
        let reservation = Reservation {
            id: id.clone(),
            entry: token,
            token: reservation_token,
            source,
            state,
        };
        if let Some(e) = st.entries.get_mut(&**id) {
            e.phase = Phase::Reserved;
            e.reservation = Some(reservation.clone());
        }
        drop(st);
        self.bump();
        Ok(Some(reservation))
    }

    /// The reservation a publication of `id` must match: `Ok(None)` when there is no entry;
    /// an error when an entry exists but is not reserved for the session `is_session` accepts.
    pub(crate) fn reservation_for(
        &self,
        id: &str,
        is_session: impl Fn(&S) -> bool,
    ) -> Result<Option<Reservation<S, C>>> {
        let st = self.lock();
        let Some(e) = st.entries.get(id) else {
            return Ok(None);
        };
        match (&e.reservation, &e.source) {
            (Some(r), Some(source)) if e.phase == Phase::Reserved && is_session(source) => {
                Ok(Some(r.clone()))
            }
            _ => Err(Error::CannotPublish { id: id.to_owned() }),
        }
    }

    fn holds(st: &PoolState<S, C>, r: &Reservation<S, C>) -> bool {
        st.entries.get(&*r.id).is_some_and(|e| {
            e.token == r.entry && e.reservation.as_ref().is_some_and(|h| h.token == r.token)
        })
    }

    /// Consumes a reservation after its session was published.
    pub(crate) fn attach(&self, r: &Reservation<S, C>) -> Result<()> {
        let st = self.lock();
        if !Self::holds(&st, r) {
            return Err(Error::NotReserved {
                id: r.id.to_string(),
            });
        }
        drop(st);
        self.remove(&r.id, r.entry);
        Ok(())
    }

    /// Consumes a reservation whose caller only needed the committed view.
    pub(crate) fn discard(&self, r: &Reservation<S, C>) {
        let st = self.lock();
        if Self::holds(&st, r) {
            drop(st);
            self.remove(&r.id, r.entry);
        }
    }

    /// Gives a reservation back: to the ready LRU when `reusable`, else removes the entry.
    pub(crate) fn release(&self, r: &Reservation<S, C>, reusable: bool) {
        let mut st = self.lock();
        let reserved = st
            .entries
            .get(&*r.id)
            .is_some_and(|e| e.phase == Phase::Reserved);
        if !Self::holds(&st, r) || !reserved {
            return;
        }
        if !reusable {
            drop(st);
            self.remove(&r.id, r.entry);
            return;
        }
        if let Some(e) = st.entries.get_mut(&*r.id) {
            e.reservation = None;
        }
        self.make_ready(&mut st, &r.id);
    }

    /// Drops the entry of `id`, whatever its phase (the stored log changed).
    pub(crate) fn invalidate(&self, id: &str) {
        let mut st = self.lock();
        if st.entries.remove(id).is_some() {
            drop(st);
            self.bump();
        }
    }

    /// Drops the ready entry `entry` of `id`; a committing or reserved one is retained.
    pub(crate) fn discard_ready(&self, id: &str, entry: u64) -> Discard {
        let st = self.lock();
        match st.entries.get(id).filter(|e| e.token == entry) {
            None => Discard::Missing,
            Some(e) if e.phase != Phase::Ready => Discard::Retained,
            Some(_) => {
                drop(st);
                self.remove(id, entry);
                Discard::Discarded
            }
        }
    }

    /// Refuses writes while a preparation of `id` is committing or reserved.
    pub(crate) fn assert_writable(&self, id: &str) -> Result<()> {
        match self.phase(id) {
            Some(Phase::Committing | Phase::Reserved) => {
                Err(Error::PreparationReserved { id: id.to_owned() })
            }
            _ => Ok(()),
        }
    }

    /// Takes the ready source of `id` out of the pool (once).
    pub(crate) fn take_ready(&self, id: &str) -> Option<S> {
        let mut st = self.lock();
        let e = st.entries.get(id)?;
        if e.phase != Phase::Ready {
            return None;
        }
        let source = e.source.clone()?;
        st.entries.remove(id);
        drop(st);
        self.bump();
        Some(source)
    }
}

impl<S, C> Reservation<S, C> {
    /// The session id.
    pub(crate) fn id(&self) -> &Arc<str> {
        &self.id
    }
}

/// A loader that settles at once with `outcome` (tests).
#[cfg(test)]
pub(crate) fn ready_loader<'a, S, C>(outcome: Result<S>) -> Loader<'a, S, C>
where
    S: Clone + Send + Sync + 'static,
    C: Clone + Send + Sync + 'static,
{
    Box::new(move |settle| settle.settle(outcome))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cancel::AbortReason;
    use std::sync::atomic::{AtomicUsize, Ordering};

    type Pool = Preparations<Arc<str>, u32>;

    fn pool(capacity: usize) -> Pool {
        Preparations::new(capacity, Handle::current())
    }

    type Slot = Arc<Mutex<Option<Settle<Arc<str>, u32>>>>;

    /// A loader counting its calls, settled through the returned slot.
    fn held(count: &Arc<AtomicUsize>) -> (Loader<'static, Arc<str>, u32>, Slot) {
        let slot: Slot = Arc::new(Mutex::new(None));
        let s = slot.clone();
        let count = count.clone();
        let load: Loader<'static, Arc<str>, u32> = Box::new(move |settle| {
            count.fetch_add(1, Ordering::SeqCst);
            *s.lock().unwrap() = Some(settle);
        });
        (load, slot)
    }

    fn value(v: &str) -> Loader<'static, Arc<str>, u32> {
        ready_loader(Ok(Arc::from(v)))
    }

    fn commit_ok() -> Commit<Arc<str>, u32> {
        Box::new(|s| Box::pin(async move { Ok(Some((s, 1))) }))
    }

    fn commit_with(outcome: Result<Option<u32>>) -> Commit<Arc<str>, u32> {
        Box::new(move |s| Box::pin(async move { outcome.map(|o| o.map(|c| (s, c))) }))
    }

    async fn settle() {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }

    fn never() -> Loader<'static, Arc<str>, u32> {
        Box::new(|_| panic!("the entry should be shared"))
    }

    // persistence §7.5 #1
    #[tokio::test]
    async fn shares_in_flight_and_ready_sources_and_invalidates() {
        let p = pool(5);
        let count = Arc::new(AtomicUsize::new(0));
        let (load, slot) = held(&count);
        let a = {
            let p = p.clone();
            tokio::spawn(async move { p.inspect("s", load, None).await.map(|o| o.source) })
        };
        settle().await;
        let b = {
            let p = p.clone();
            tokio::spawn(async move { p.inspect("s", never(), None).await.map(|o| o.source) })
        };
        settle().await;
        slot.lock()
            .unwrap()
            .take()
            .unwrap()
            .settle(Ok(Arc::from("v")));
        assert_eq!(&*a.await.unwrap().unwrap(), "v");
        assert_eq!(&*b.await.unwrap().unwrap(), "v");
        assert_eq!(p.phase("s"), Some(Phase::Ready));
        assert_eq!(&*p.inspect("s", never(), None).await.unwrap().source, "v");
        assert_eq!(count.load(Ordering::SeqCst), 1);
        p.invalidate("s");
        p.invalidate("s");
        assert!(!p.has("s"));
    }

    // persistence §7.5 #2
    #[tokio::test]
    async fn first_observer_cancelling_does_not_cancel_the_shared_load() {
        let p = pool(5);
        let count = Arc::new(AtomicUsize::new(0));
        let (load, slot) = held(&count);
        let token = CancelToken::new();
        let first = {
            let (p, token) = (p.clone(), token.clone());
            tokio::spawn(async move { p.inspect("s", load, Some(&token)).await.map(|o| o.source) })
        };
        settle().await;
        let second = {
            let p = p.clone();
            tokio::spawn(async move { p.inspect("s", never(), None).await.map(|o| o.source) })
        };
        settle().await;
        let reason = AbortReason::new(std::io::Error::other("first gave up"));
        token.cancel_with(reason.clone());
        assert!(matches!(first.await.unwrap(), Err(Error::Aborted(r)) if r.ptr_eq(&reason)));
        slot.lock()
            .unwrap()
            .take()
            .unwrap()
            .settle(Ok(Arc::from("v")));
        assert_eq!(&*second.await.unwrap().unwrap(), "v");
        assert_eq!(count.load(Ordering::SeqCst), 1);
    }

    // persistence §7.5 #3
    #[tokio::test]
    async fn abandoned_loads_still_become_ready_and_the_lru_evicts_the_older() {
        let p = pool(1);
        for id in ["a", "b"] {
            let count = Arc::new(AtomicUsize::new(0));
            let (load, slot) = held(&count);
            let token = CancelToken::cancelled_with(AbortReason::aborted());
            assert!(p.inspect(id, load, Some(&token)).await.is_err());
            slot.lock()
                .unwrap()
                .take()
                .unwrap()
                .settle(Ok(Arc::from(id)));
            settle().await;
            assert_eq!(p.phase(id), Some(Phase::Ready));
        }
        assert!(!p.has("a"), "the older ready entry was evicted");
        assert!(p.has("b"));
    }

    // persistence §7.5 #4
    #[tokio::test]
    async fn failed_and_invalidated_loads_are_removed_but_observers_get_the_outcome() {
        let p = pool(5);
        let err = p
            .inspect("s", ready_loader(Err(Error::Backend("nope".into()))), None)
            .await
            .err()
            .unwrap();
        assert_eq!(err.to_string(), "nope");
        settle().await;
        assert!(!p.has("s"));
        let count = Arc::new(AtomicUsize::new(0));
        let (load, slot) = held(&count);
        let observer = {
            let p = p.clone();
            tokio::spawn(async move { p.inspect("t", load, None).await.map(|o| o.source) })
        };
        settle().await;
        p.invalidate("t");
        slot.lock()
            .unwrap()
            .take()
            .unwrap()
            .settle(Ok(Arc::from("v")));
        assert_eq!(&*observer.await.unwrap().unwrap(), "v");
        assert!(!p.has("t"), "an invalidated load does not come back");
    }

    // persistence §7.5 #5
    #[tokio::test]
    async fn a_load_that_fails_synchronously_is_removed_and_rejects() {
        let p = pool(5);
        let load: Loader<'static, Arc<str>, u32> =
            Box::new(|settle| settle.settle(Err(Error::Backend("sync".into()))));
        let err = p.inspect("s", load, None).await.err().unwrap();
        assert_eq!(err.to_string(), "sync");
        assert!(!p.has("s"));
    }

    // persistence §7.5 #6
    #[tokio::test]
    async fn ready_entries_are_evicted_while_reserved_ones_are_kept() {
        let p = pool(1);
        let r = p
            .reserve("a", value("a"), commit_ok(), None)
            .await
            .unwrap()
            .unwrap();
        p.inspect("b", value("b"), None).await.unwrap();
        p.inspect("c", value("c"), None).await.unwrap();
        settle().await;
        assert_eq!(p.phase("a"), Some(Phase::Reserved));
        assert!(!p.has("b"));
        assert_eq!(p.phase("c"), Some(Phase::Ready));
        p.release(&r, true);
        assert_eq!(p.phase("a"), Some(Phase::Ready));
        assert!(!p.has("c"), "releasing made a the newest ready entry");
    }

    // persistence §7.5 #7
    #[tokio::test]
    async fn discard_ready_reports_missing_discarded_or_retained() {
        let p = pool(5);
        let seen = p.inspect("s", value("v"), None).await.unwrap();
        settle().await;
        assert_eq!(p.discard_ready("s", seen.entry + 100), Discard::Missing);
        assert_eq!(p.discard_ready("s", seen.entry), Discard::Discarded);
        assert_eq!(p.discard_ready("s", seen.entry), Discard::Missing);
        let r = p
            .reserve("s", value("w"), commit_ok(), None)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(p.discard_ready("s", r.entry), Discard::Retained);
    }

    // persistence §7.5 #8
    #[tokio::test]
    async fn waiting_for_an_existing_reservation_and_publication_checks() {
        let p = pool(5);
        let r = p
            .reserve("s", value("v"), commit_ok(), None)
            .await
            .unwrap()
            .unwrap();
        // A second reservation waits for the first.
        let waiter = {
            let p = p.clone();
            tokio::spawn(async move { p.reserve("s", never(), commit_ok(), None).await })
        };
        settle().await;
        assert!(!waiter.is_finished());
        // The exact session is recognized; an alias is refused.
        assert!(p.reservation_for("s", |s| &**s == "v").unwrap().is_some());
        assert_eq!(
            p.reservation_for("s", |s| &**s == "alias")
                .err()
                .unwrap()
                .to_string(),
            r#"cannot publish session "s": persisted state already owns this identity"#
        );
        assert_eq!(
            p.assert_writable("s").unwrap_err().to_string(),
            r#"cannot append session "s" while its persisted preparation is reserved"#
        );
        p.attach(&r).unwrap();
        assert_eq!(
            p.attach(&r).unwrap_err().to_string(),
            r#"session "s" preparation is no longer reserved"#
        );
        // The waiter's entry is gone: it sees `None`.
        assert!(waiter.await.unwrap().unwrap().is_none());
        assert!(p.assert_writable("s").is_ok());
        assert!(p.reservation_for("s", |_| true).unwrap().is_none());
    }

    // persistence §7.5 #9
    #[tokio::test]
    async fn an_abortable_reservation_wait_rejects_and_keeps_the_held_one() {
        let p = pool(5);
        let r = p
            .reserve("s", value("v"), commit_ok(), None)
            .await
            .unwrap()
            .unwrap();
        let token = CancelToken::new();
        let waiter = {
            let (p, token) = (p.clone(), token.clone());
            tokio::spawn(async move { p.reserve("s", never(), commit_ok(), Some(&token)).await })
        };
        settle().await;
        let reason = AbortReason::new(std::io::Error::other("waited too long"));
        token.cancel_with(reason.clone());
        assert!(matches!(waiter.await.unwrap(), Err(Error::Aborted(x)) if x.ptr_eq(&reason)));
        assert_eq!(p.phase("s"), Some(Phase::Reserved));
        p.attach(&r).unwrap();
    }

    // persistence §7.5 #10
    #[tokio::test]
    async fn a_failed_commit_removes_the_entry_and_wakes_a_waiter_with_none() {
        let p = pool(5);
        let (tx, rx) = promise::<()>();
        let commit: Commit<Arc<str>, u32> = Box::new(move |_s| {
            Box::pin(async move {
                let _ = rx.wait().await;
                Err(Error::Backend("repair failed".into()))
            })
        });
        let first = {
            let p = p.clone();
            tokio::spawn(async move { p.reserve("s", value("v"), commit, None).await })
        };
        settle().await;
        assert_eq!(p.phase("s"), Some(Phase::Committing));
        let waiter = {
            let p = p.clone();
            tokio::spawn(async move { p.reserve("s", never(), commit_ok(), None).await })
        };
        settle().await;
        tx.settle(Ok(()));
        assert_eq!(
            first.await.unwrap().err().unwrap().to_string(),
            "repair failed"
        );
        assert!(waiter.await.unwrap().unwrap().is_none());
        assert!(!p.has("s"));
    }

    // persistence §7.5 #11
    #[tokio::test]
    async fn cancellation_after_commit_returns_the_entry_to_the_ready_pool() {
        let p = pool(5);
        let token = CancelToken::new();
        let t = token.clone();
        let commit: Commit<Arc<str>, u32> = Box::new(move |s| {
            Box::pin(async move {
                t.cancel();
                Ok(Some((s, 1)))
            })
        });
        let err = p
            .reserve("s", value("v"), commit, Some(&token))
            .await
            .err()
            .unwrap();
        assert_eq!(err.to_string(), "aborted");
        assert_eq!(p.phase("s"), Some(Phase::Ready));
        assert_eq!(p.take_ready("s").as_deref(), Some("v"));
        assert!(p.take_ready("s").is_none());
    }

    // persistence §7.5 #12
    #[tokio::test]
    async fn an_invalidated_commit_is_not_revived_by_a_late_cancellation() {
        let p = pool(5);
        let token = CancelToken::new();
        let (t, q) = (token.clone(), p.clone());
        let commit: Commit<Arc<str>, u32> = Box::new(move |s| {
            Box::pin(async move {
                q.invalidate("s");
                t.cancel();
                Ok(Some((s, 1)))
            })
        });
        let got = p.reserve("s", value("v"), commit, Some(&token)).await;
        assert!(matches!(got, Ok(None)));
        assert!(!p.has("s"));
    }

    // persistence §7.5 #13
    #[tokio::test]
    async fn an_entry_invalidated_while_its_commit_succeeds_is_not_reserved() {
        let p = pool(5);
        let q = p.clone();
        let commit: Commit<Arc<str>, u32> = Box::new(move |s| {
            Box::pin(async move {
                q.invalidate("s");
                Ok(Some((s, 1)))
            })
        });
        assert!(
            p.reserve("s", value("v"), commit, None)
                .await
                .unwrap()
                .is_none()
        );
        assert!(!p.has("s"));
        // A stale commit (`Ok(None)`) is dropped the same way.
        assert!(
            p.reserve("s", value("v"), commit_with(Ok(None)), None)
                .await
                .unwrap()
                .is_none()
        );
        assert!(!p.has("s"));
    }

    // persistence §7.5 #14
    #[tokio::test]
    async fn a_load_invalidated_before_reservation_gives_none() {
        let p = pool(5);
        let count = Arc::new(AtomicUsize::new(0));
        let (load, slot) = held(&count);
        let reserving = {
            let p = p.clone();
            tokio::spawn(async move { p.reserve("s", load, commit_ok(), None).await })
        };
        settle().await;
        p.invalidate("s");
        slot.lock()
            .unwrap()
            .take()
            .unwrap()
            .settle(Ok(Arc::from("v")));
        assert!(reserving.await.unwrap().unwrap().is_none());
    }

    // persistence §7.5 #15
    #[tokio::test]
    async fn take_ready_skips_pending_entries_and_takes_once() {
        let p = pool(5);
        let count = Arc::new(AtomicUsize::new(0));
        let (load, slot) = held(&count);
        let _ = p.entry_for("s", load);
        assert!(p.take_ready("s").is_none(), "loading");
        slot.lock()
            .unwrap()
            .take()
            .unwrap()
            .settle(Ok(Arc::from("v")));
        settle().await;
        assert_eq!(p.take_ready("s").as_deref(), Some("v"));
        assert!(p.take_ready("s").is_none());
        let r = p
            .reserve("t", value("w"), commit_ok(), None)
            .await
            .unwrap()
            .unwrap();
        assert!(p.take_ready("t").is_none(), "reserved");
        p.discard(&r);
        assert!(!p.has("t"));
    }

    // persistence §7.5 #16
    #[tokio::test]
    async fn publication_is_refused_while_only_an_inspection_exists() {
        let p = pool(5);
        p.inspect("s", value("v"), None).await.unwrap();
        assert!(p.reservation_for("s", |_| true).is_err());
        assert!(p.reservation_for("other", |_| true).unwrap().is_none());
        assert_eq!(p.len(), 1);
    }
}
