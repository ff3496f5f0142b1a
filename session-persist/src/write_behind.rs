//! The per-session write-behind controller: batches admitted events and writes them in the
//! background, so that producing an event never waits for storage.
//!
//! # Policy
//!
//! - **Fixed window, not a debounce.** The first event admitted into an empty queue arms a timer
//!   for [`WriteBehindOptions::max_delay`] (200 ms by default). Later events never move that
//!   deadline. When it expires, everything pending is written as one batch.
//! - **At most one write at a time.** A deadline that expires while a write is running is
//!   remembered, and the next batch starts as soon as that write succeeds; a deadline that has
//!   not expired keeps its remaining time.
//! - **Failures keep the data.** A failed batch is put back in front of any newer events, in
//!   order. A background failure is reported once through [`BatchSink::report_background_failure`]
//!   and pauses automatic retries: the next admitted event starts a fresh window (which retries
//!   the retained batch together with it), and an explicit [`WriteBehind::flush`] retries at once.
//! - **Flush is a shared barrier.** Concurrent flushes share one barrier, which first waits for
//!   an overlapping write (ignoring its outcome), then writes until the queue is empty, including
//!   events admitted while it runs. It resolves with the first write error, without reporting it.
//! - **Back-pressure.** The reference has no bound on what may be pending. Here every admitted
//!   item is weighed ([`BatchSink::weigh`]); once the pending weight reaches
//!   [`WriteBehindOptions::max_pending_bytes`], the controller does not wait for the window: it
//!   starts a write immediately, or right after the running one. Admission itself never blocks
//!   and never fails: `append` is synchronous and in memory by contract, so the producer is
//!   never slowed by the disk. The buffer is bounded instead: a pending item is a shared
//!   reference to an event that the session's in-memory log already holds (an `Event` is an
//!   `Arc`), so when storage is slower than the producer the queue costs a 16-byte
//!   entry per unwritten event on top of the session itself, and memory stays bounded by the
//!   session's own size. While storage is failing, retries still follow the pause rule above
//!   instead of hammering the backend.

use std::fmt;
use std::future::{Future, IntoFuture};
use std::mem;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::sync::watch;
use tokio::task::AbortHandle;
use tokio::time::Instant;

/// A boxed, sendable future.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// The reference's default window: 200 ms.
pub const DEFAULT_MAX_DELAY: Duration = Duration::from_millis(200);

/// The default back-pressure bound on the pending weight: 64 MiB.
pub const DEFAULT_MAX_PENDING_BYTES: usize = 64 * 1024 * 1024;

/// Tuning of a [`WriteBehind`] controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteBehindOptions {
    /// The fixed batching window, measured from the first pending event.
    pub max_delay: Duration,
    /// Once the weight of the pending items reaches this bound, a write starts without waiting
    /// for the window.
    pub max_pending_bytes: usize,
}

impl Default for WriteBehindOptions {
    fn default() -> WriteBehindOptions {
        WriteBehindOptions {
            max_delay: DEFAULT_MAX_DELAY,
            max_pending_bytes: DEFAULT_MAX_PENDING_BYTES,
        }
    }
}

/// Where a [`WriteBehind`] controller sends its batches.
pub trait BatchSink<T, E>: Send + Sync + 'static {
    /// Durably writes one non-empty batch, in order. The batch is shared with the controller so
    /// that it can be retained if the write fails.
    fn write(&self, batch: Arc<Vec<T>>) -> BoxFuture<Result<(), E>>;

    /// Reports the failure of a write started by the timer (not by a flush). Called once per
    /// failed background write.
    fn report_background_failure(&self, error: &E);

    /// The error a waiting flush gets when a write's task ended without reporting a result
    /// (the write future panicked or the runtime shut down). The batch is retained.
    fn interrupted(&self) -> E;

    /// The weight of one item, counted against [`WriteBehindOptions::max_pending_bytes`].
    fn weigh(&self, item: &T) -> usize {
        let _ = item;
        0
    }
}

type Outcome<E> = Option<Result<(), E>>;

struct Timer {
    id: u64,
    abort: AbortHandle,
}

struct State<T, E> {
    pending: Vec<T>,
    pending_bytes: usize,
    timer: Option<Timer>,
    timer_ids: u64,
    active: Option<watch::Receiver<Outcome<E>>>,
    barrier: Option<watch::Receiver<Outcome<E>>>,
    deadline_expired: bool,
    automatic_paused: bool,
}

struct Inner<T, E> {
    state: Mutex<State<T, E>>,
    sink: Arc<dyn BatchSink<T, E>>,
    options: WriteBehindOptions,
    handle: Handle,
}

/// The write-behind controller of one live session (the reference's `SessionWriteBehind`).
///
/// Cloning gives another handle to the same controller.
pub struct WriteBehind<T, E> {
    inner: Arc<Inner<T, E>>,
}

impl<T, E> Clone for WriteBehind<T, E> {
    fn clone(&self) -> Self {
        WriteBehind {
            inner: self.inner.clone(),
        }
    }
}

impl<T, E> fmt::Debug for WriteBehind<T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.inner.lock();
        f.debug_struct("WriteBehind")
            .field("pending", &st.pending.len())
            .field("pending_bytes", &st.pending_bytes)
            .field("active", &st.active.is_some())
            .field("barrier", &st.barrier.is_some())
            .field("timer", &st.timer.is_some())
            .field("automatic_paused", &st.automatic_paused)
            .finish_non_exhaustive()
    }
}

/// A flush in progress: await it (it is already running) for the barrier's outcome.
///
/// Every flush requested while a barrier runs gets a handle to that same barrier.
pub struct Flush<E> {
    rx: watch::Receiver<Outcome<E>>,
    interrupted: E,
}

impl<E> Flush<E> {
    /// Whether both handles wait for the same barrier.
    pub fn same_barrier(&self, other: &Flush<E>) -> bool {
        self.rx.same_channel(&other.rx)
    }
}

impl<E: Clone + Send + Sync + 'static> IntoFuture for Flush<E> {
    type Output = Result<(), E>;
    type IntoFuture = BoxFuture<Result<(), E>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move { settled(self.rx, self.interrupted).await })
    }
}

/// Waits until a write or barrier channel carries its outcome.
async fn settled<E: Clone>(mut rx: watch::Receiver<Outcome<E>>, interrupted: E) -> Result<(), E> {
    match rx.wait_for(Option::is_some).await {
        Ok(outcome) => outcome.clone().unwrap_or(Ok(())),
        Err(_) => Err(interrupted),
    }
}

/// Restores a batch whose write task ended without a result (panic or runtime shutdown).
struct WriteGuard<T: Clone, E> {
    inner: Option<Arc<Inner<T, E>>>,
    batch: Option<Arc<Vec<T>>>,
    bytes: usize,
}

impl<T: Clone, E> Drop for WriteGuard<T, E> {
    fn drop(&mut self) {
        if let (Some(inner), Some(batch)) = (self.inner.take(), self.batch.take()) {
            let mut st = inner.lock();
            st.active = None;
            restore(&mut st, batch, self.bytes);
            cancel_timer(&mut st);
            st.automatic_paused = true;
        }
    }
}

fn restore<T: Clone, E>(st: &mut State<T, E>, batch: Arc<Vec<T>>, bytes: usize) {
    // When the sink kept a handle to the batch, the items are cloned back.
    let mut restored = Arc::try_unwrap(batch).unwrap_or_else(|shared| shared.as_ref().clone());
    restored.append(&mut st.pending);
    st.pending = restored;
    st.pending_bytes = st.pending_bytes.saturating_add(bytes);
}

fn cancel_timer<T, E>(st: &mut State<T, E>) {
    if let Some(timer) = st.timer.take() {
        timer.abort.abort();
    }
}

impl<T, E> Inner<T, E> {
    fn lock(&self) -> MutexGuard<'_, State<T, E>> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl<T, E> WriteBehind<T, E>
where
    T: Clone + Send + Sync + 'static,
    E: Clone + Send + Sync + 'static,
{
    /// A controller that writes through `sink`, spawning its timer and write tasks on `handle`.
    pub fn new(
        sink: Arc<dyn BatchSink<T, E>>,
        options: WriteBehindOptions,
        handle: Handle,
    ) -> WriteBehind<T, E> {
        WriteBehind {
            inner: Arc::new(Inner {
                state: Mutex::new(State {
                    pending: Vec::new(),
                    pending_bytes: 0,
                    timer: None,
                    timer_ids: 0,
                    active: None,
                    barrier: None,
                    deadline_expired: false,
                    automatic_paused: false,
                }),
                sink,
                options,
                handle,
            }),
        }
    }

    /// The options this controller was built with.
    pub fn options(&self) -> WriteBehindOptions {
        self.inner.options
    }

    /// Admits one item. Never blocks on storage and never fails: the item is queued, and a
    /// timer or an immediate write is started as the policy says (see the module docs).
    pub fn enqueue(&self, item: T) {
        let weight = self.inner.sink.weigh(&item);
        let inner = &self.inner;
        let mut st = inner.lock();
        let was_empty = st.pending.is_empty();
        st.pending.push(item);
        st.pending_bytes = st.pending_bytes.saturating_add(weight);
        if st.barrier.is_some() {
            // The running barrier drains it.
            return;
        }
        if st.automatic_paused {
            // A fresh window that also retries the retained failed batch.
            st.automatic_paused = false;
            st.deadline_expired = false;
            arm_timer(inner, &mut st);
            return;
        }
        if was_empty {
            arm_timer(inner, &mut st);
        }
        if st.pending_bytes >= inner.options.max_pending_bytes {
            if st.active.is_some() {
                st.deadline_expired = true;
            } else {
                start_write(inner, &mut st, true);
            }
        }
    }

    /// Starts (or joins) the flush barrier: resolves once every item admitted before the call,
    /// and every item admitted while the barrier runs, has been written; rejects with the first
    /// write error (the failed batch stays queued, in order).
    pub fn flush(&self) -> Flush<E> {
        let inner = &self.inner;
        let mut st = inner.lock();
        if let Some(rx) = &st.barrier {
            return Flush {
                rx: rx.clone(),
                interrupted: inner.sink.interrupted(),
            };
        }
        cancel_timer(&mut st);
        st.deadline_expired = false;
        st.automatic_paused = false;
        let (tx, rx) = watch::channel(None);
        st.barrier = Some(rx.clone());
        let overlapping = st.active.clone();
        drop(st);
        inner
            .handle
            .spawn(run_barrier(inner.clone(), tx, overlapping));
        Flush {
            rx,
            interrupted: inner.sink.interrupted(),
        }
    }

    /// Cancels the batching timer only (pending items stay queued).
    pub fn cancel_automatic_wait(&self) {
        cancel_timer(&mut self.inner.lock());
    }

    /// Whether anything is pending or a write is running.
    pub fn has_work(&self) -> bool {
        let st = self.inner.lock();
        !st.pending.is_empty() || st.active.is_some()
    }

    /// How many items are queued (not counting a running write).
    pub fn pending_len(&self) -> usize {
        self.inner.lock().pending.len()
    }

    /// The weight of the queued items (see [`BatchSink::weigh`]).
    pub fn pending_bytes(&self) -> usize {
        self.inner.lock().pending_bytes
    }

    /// Whether a batching timer is armed.
    pub fn timer_armed(&self) -> bool {
        self.inner.lock().timer.is_some()
    }

    /// Whether a write is running.
    pub fn write_active(&self) -> bool {
        self.inner.lock().active.is_some()
    }

    /// Whether a flush barrier is running.
    pub fn flushing(&self) -> bool {
        self.inner.lock().barrier.is_some()
    }

    /// Whether automatic retries are paused after a failed write.
    pub fn automatic_paused(&self) -> bool {
        self.inner.lock().automatic_paused
    }

    /// Whether both handles control the same controller.
    pub fn ptr_eq(&self, other: &WriteBehind<T, E>) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

fn arm_timer<T, E>(inner: &Arc<Inner<T, E>>, st: &mut State<T, E>)
where
    T: Clone + Send + Sync + 'static,
    E: Clone + Send + Sync + 'static,
{
    cancel_timer(st);
    st.timer_ids += 1;
    let id = st.timer_ids;
    let deadline = Instant::now() + inner.options.max_delay;
    let weak: Weak<Inner<T, E>> = Arc::downgrade(inner);
    let task = inner.handle.spawn(async move {
        tokio::time::sleep_until(deadline).await;
        if let Some(inner) = weak.upgrade() {
            on_deadline(&inner, id);
        }
    });
    st.timer = Some(Timer {
        id,
        abort: task.abort_handle(),
    });
}

fn on_deadline<T, E>(inner: &Arc<Inner<T, E>>, id: u64)
where
    T: Clone + Send + Sync + 'static,
    E: Clone + Send + Sync + 'static,
{
    let mut st = inner.lock();
    if st.timer.as_ref().is_none_or(|t| t.id != id) {
        return;
    }
    st.timer = None;
    if st.active.is_some() {
        // The window's budget was used up while a write ran: continue right after it.
        st.deadline_expired = true;
    } else if st.barrier.is_none() && !st.pending.is_empty() {
        start_write(inner, &mut st, true);
    }
}

/// Takes everything pending as one batch and starts writing it; returns the write's outcome
/// channel.
fn start_write<T, E>(
    inner: &Arc<Inner<T, E>>,
    st: &mut State<T, E>,
    background: bool,
) -> watch::Receiver<Outcome<E>>
where
    T: Clone + Send + Sync + 'static,
    E: Clone + Send + Sync + 'static,
{
    let batch = Arc::new(mem::take(&mut st.pending));
    let bytes = mem::take(&mut st.pending_bytes);
    cancel_timer(st);
    st.deadline_expired = false;
    let (tx, rx) = watch::channel(None);
    st.active = Some(rx.clone());
    let inner = inner.clone();
    inner.handle.clone().spawn(async move {
        let mut guard = WriteGuard {
            inner: Some(inner.clone()),
            batch: Some(batch.clone()),
            bytes,
        };
        let result = inner.sink.write(batch).await;
        guard.inner = None;
        let batch = guard.batch.take();
        finish_write(&inner, batch, bytes, result, background, &tx);
    });
    rx
}

fn finish_write<T, E>(
    inner: &Arc<Inner<T, E>>,
    batch: Option<Arc<Vec<T>>>,
    bytes: usize,
    result: Result<(), E>,
    background: bool,
    tx: &watch::Sender<Outcome<E>>,
) where
    T: Clone + Send + Sync + 'static,
    E: Clone + Send + Sync + 'static,
{
    let mut st = inner.lock();
    st.active = None;
    match &result {
        Ok(()) => {
            drop(batch);
            let over_bound = st.pending_bytes >= inner.options.max_pending_bytes;
            if st.barrier.is_none()
                && !st.pending.is_empty()
                && !st.automatic_paused
                && (st.deadline_expired || over_bound)
            {
                start_write(inner, &mut st, true);
            }
            drop(st);
        }
        Err(error) => {
            if let Some(batch) = batch {
                restore(&mut st, batch, bytes);
            }
            cancel_timer(&mut st);
            st.deadline_expired = false;
            st.automatic_paused = true;
            drop(st);
            if background {
                inner.sink.report_background_failure(error);
            }
        }
    }
    tx.send_replace(Some(result));
}

async fn run_barrier<T, E>(
    inner: Arc<Inner<T, E>>,
    tx: watch::Sender<Outcome<E>>,
    overlapping: Option<watch::Receiver<Outcome<E>>>,
) where
    T: Clone + Send + Sync + 'static,
    E: Clone + Send + Sync + 'static,
{
    if let Some(active) = overlapping {
        // Its outcome does not matter here: a background failure was already reported and its
        // batch is back in the queue.
        let _ = settled(active, inner.sink.interrupted()).await;
        inner.lock().automatic_paused = false;
    }
    loop {
        let write = {
            let mut st = inner.lock();
            if st.pending.is_empty() {
                st.barrier = None;
                drop(st);
                tx.send_replace(Some(Ok(())));
                return;
            }
            start_write(&inner, &mut st, false)
        };
        if let Err(error) = settled(write, inner.sink.interrupted()).await {
            inner.lock().barrier = None;
            tx.send_replace(Some(Err(error)));
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    /// A sink that records every attempted batch with its start time, takes `write_ms` per
    /// write, and fails while `fail` is set.
    struct Recorder {
        attempts: Mutex<Vec<(u64, Vec<u64>)>>,
        reports: Mutex<Vec<String>>,
        fail: AtomicBool,
        panic_once: AtomicBool,
        write_ms: AtomicUsize,
        unit_weight: usize,
        start: Instant,
    }

    impl Recorder {
        fn new() -> Arc<Recorder> {
            Recorder::weighted(0)
        }

        fn weighted(unit_weight: usize) -> Arc<Recorder> {
            Arc::new(Recorder {
                attempts: Mutex::new(Vec::new()),
                reports: Mutex::new(Vec::new()),
                fail: AtomicBool::new(false),
                panic_once: AtomicBool::new(false),
                write_ms: AtomicUsize::new(0),
                unit_weight,
                start: Instant::now(),
            })
        }

        fn batches(&self) -> Vec<Vec<u64>> {
            self.attempts
                .lock()
                .unwrap()
                .iter()
                .map(|(_, b)| b.clone())
                .collect()
        }

        fn starts(&self) -> Vec<u64> {
            self.attempts
                .lock()
                .unwrap()
                .iter()
                .map(|(t, _)| *t)
                .collect()
        }

        fn reports(&self) -> Vec<String> {
            self.reports.lock().unwrap().clone()
        }
    }

    impl BatchSink<u64, String> for Recorder {
        fn write(&self, batch: Arc<Vec<u64>>) -> BoxFuture<Result<(), String>> {
            let at = u64::try_from(self.start.elapsed().as_millis()).unwrap();
            self.attempts
                .lock()
                .unwrap()
                .push((at, batch.as_ref().clone()));
            let fail = self.fail.load(Ordering::SeqCst);
            let panic = self.panic_once.swap(false, Ordering::SeqCst);
            let ms = self.write_ms.load(Ordering::SeqCst) as u64;
            Box::pin(async move {
                if ms > 0 {
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                }
                assert!(!panic, "write task panicked");
                if fail {
                    Err("disk unavailable".to_owned())
                } else {
                    Ok(())
                }
            })
        }

        fn report_background_failure(&self, error: &String) {
            self.reports.lock().unwrap().push(error.clone());
        }

        fn interrupted(&self) -> String {
            "write interrupted".to_owned()
        }

        fn weigh(&self, _item: &u64) -> usize {
            self.unit_weight
        }
    }

    fn controller(sink: &Arc<Recorder>) -> WriteBehind<u64, String> {
        controller_with(sink, WriteBehindOptions::default())
    }

    fn controller_with(
        sink: &Arc<Recorder>,
        options: WriteBehindOptions,
    ) -> WriteBehind<u64, String> {
        WriteBehind::new(sink.clone(), options, Handle::current())
    }

    /// Lets every ready task run (time does not move).
    async fn settle() {
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
    }

    async fn advance(ms: u64) {
        tokio::time::advance(Duration::from_millis(ms)).await;
        settle().await;
    }

    // persistence §7.4 #1
    #[tokio::test(start_paused = true)]
    async fn one_fixed_window_from_the_first_event() {
        let sink = Recorder::new();
        let wb = controller(&sink);
        // The controller owns what it was given: the caller's later changes to its own copy
        // do not reach the written batch.
        let mut produced = 0_u64;
        wb.enqueue(produced);
        produced += 100;
        advance(150).await;
        wb.enqueue(1);
        advance(49).await;
        assert!(sink.batches().is_empty(), "nothing at 199 ms");
        advance(1).await;
        assert_eq!(sink.batches(), vec![vec![0, 1]]);
        assert_eq!(sink.starts(), vec![200]);
        assert_eq!(produced, 100);
        assert!(!wb.has_work());
        assert!(!wb.timer_armed());
    }

    // persistence §7.4 #2
    #[tokio::test(start_paused = true)]
    async fn twenty_events_ten_ms_apart_make_one_batch() {
        let sink = Recorder::new();
        let wb = controller(&sink);
        for i in 0..20 {
            wb.enqueue(i);
            advance(10).await;
        }
        assert_eq!(sink.batches(), vec![(0..20).collect::<Vec<_>>()]);
        assert_eq!(sink.starts(), vec![200]);
    }

    // persistence §7.4 #3
    #[tokio::test(start_paused = true)]
    async fn concurrent_flushes_share_one_barrier_that_drains_late_events() {
        let sink = Recorder::new();
        sink.write_ms.store(10, Ordering::SeqCst);
        let wb = controller(&sink);
        wb.enqueue(0);
        let first = wb.flush();
        let second = wb.flush();
        assert!(first.same_barrier(&second));
        assert!(!wb.timer_armed(), "the flush cancels the window");
        settle().await;
        // It started immediately, without waiting for the window.
        assert_eq!(sink.batches(), vec![vec![0]]);
        assert!(wb.write_active());
        // Admitted during the barrier: drained by it.
        wb.enqueue(1);
        assert!(!wb.timer_armed());
        let third = wb.flush();
        assert!(third.same_barrier(&first));
        let (a, b, c) = tokio::join!(
            first.into_future(),
            second.into_future(),
            third.into_future()
        );
        assert_eq!((a, b, c), (Ok(()), Ok(()), Ok(())));
        assert_eq!(sink.batches(), vec![vec![0], vec![1]]);
        assert_eq!(sink.starts(), vec![0, 10]);
        assert!(!wb.timer_armed(), "no timers remain");
        assert!(!wb.has_work());
        assert!(!wb.flushing());
    }

    // persistence §7.4 #4
    #[tokio::test(start_paused = true)]
    async fn event_after_a_quiescent_barrier_starts_its_own_window() {
        let sink = Recorder::new();
        let wb = controller(&sink);
        let flush = wb.flush();
        settle().await;
        // The barrier observed the empty queue and cleared itself in the same step.
        assert!(!wb.flushing());
        wb.enqueue(0);
        assert_eq!(flush.await, Ok(()));
        assert!(sink.batches().is_empty());
        assert!(wb.timer_armed());
        advance(199).await;
        assert!(sink.batches().is_empty());
        advance(1).await;
        assert_eq!(sink.batches(), vec![vec![0]]);
        assert_eq!(sink.starts(), vec![200]);
    }

    // persistence §7.4 #5
    #[tokio::test(start_paused = true)]
    async fn tail_expired_during_a_write_starts_right_after_it() {
        let sink = Recorder::new();
        sink.write_ms.store(300, Ordering::SeqCst);
        let wb = controller(&sink);
        wb.enqueue(0);
        advance(200).await; // write [0] runs 200..500
        advance(50).await;
        wb.enqueue(1); // window 250..450 expires during the write
        advance(200).await;
        assert_eq!(sink.batches(), vec![vec![0]]);
        assert!(!wb.timer_armed());
        advance(49).await;
        assert_eq!(sink.batches().len(), 1);
        advance(1).await;
        assert_eq!(sink.batches(), vec![vec![0], vec![1]]);
        assert_eq!(sink.starts(), vec![200, 500]);
    }

    // persistence §7.4 #6
    #[tokio::test(start_paused = true)]
    async fn tail_not_yet_expired_keeps_its_remaining_time() {
        let sink = Recorder::new();
        sink.write_ms.store(50, Ordering::SeqCst);
        let wb = controller(&sink);
        wb.enqueue(0);
        advance(200).await; // write [0] runs 200..250
        wb.enqueue(1); // window 200..400
        advance(50).await;
        assert!(!wb.write_active());
        assert!(wb.timer_armed());
        advance(99).await;
        advance(50).await; // 399 ms: 149 ms after the write ended
        assert_eq!(sink.batches(), vec![vec![0]]);
        advance(1).await;
        assert_eq!(sink.batches(), vec![vec![0], vec![1]]);
        assert_eq!(sink.starts(), vec![200, 400]);
    }

    // persistence §7.4 #7
    #[tokio::test(start_paused = true)]
    async fn background_failure_is_reported_once_and_waits_for_the_next_event() {
        let sink = Recorder::new();
        sink.fail.store(true, Ordering::SeqCst);
        let wb = controller(&sink);
        wb.enqueue(0);
        advance(200).await;
        assert_eq!(sink.reports(), vec!["disk unavailable".to_owned()]);
        assert!(wb.has_work());
        assert!(wb.automatic_paused());
        assert_eq!(wb.pending_len(), 1);
        advance(1000).await;
        assert_eq!(sink.batches().len(), 1, "no automatic retry");
        sink.fail.store(false, Ordering::SeqCst);
        wb.enqueue(1);
        advance(199).await;
        assert_eq!(sink.batches().len(), 1);
        advance(1).await;
        assert_eq!(sink.batches(), vec![vec![0], vec![0, 1]]);
        assert_eq!(sink.starts(), vec![200, 1400]);
        assert_eq!(sink.reports().len(), 1);
        assert!(!wb.has_work());
    }

    // persistence §7.4 #8
    #[tokio::test(start_paused = true)]
    async fn overlapping_background_failure_is_retried_inside_the_flush() {
        let sink = Recorder::new();
        sink.fail.store(true, Ordering::SeqCst);
        sink.write_ms.store(10, Ordering::SeqCst);
        let wb = controller(&sink);
        wb.enqueue(0);
        advance(200).await;
        assert!(wb.write_active());
        let first = wb.flush();
        let second = wb.flush();
        sink.fail.store(false, Ordering::SeqCst);
        let (a, b) = tokio::join!(first.into_future(), second.into_future());
        assert_eq!((a, b), (Ok(()), Ok(())));
        assert_eq!(sink.batches(), vec![vec![0], vec![0]]);
        assert_eq!(sink.reports().len(), 1);
        assert!(!wb.has_work());
        assert!(!wb.automatic_paused());
    }

    // persistence §7.4 #9
    #[tokio::test(start_paused = true)]
    async fn barrier_failure_is_surfaced_unreported_and_retained() {
        let sink = Recorder::new();
        sink.fail.store(true, Ordering::SeqCst);
        let wb = controller(&sink);
        wb.enqueue(0);
        assert_eq!(wb.flush().await, Err("disk unavailable".to_owned()));
        assert!(sink.reports().is_empty());
        assert_eq!(wb.pending_len(), 1);
        assert!(wb.automatic_paused());
        assert!(!wb.flushing());
        advance(1000).await;
        assert_eq!(sink.batches().len(), 1);
        sink.fail.store(false, Ordering::SeqCst);
        wb.enqueue(1);
        advance(200).await;
        assert_eq!(sink.batches(), vec![vec![0], vec![0, 1]]);
        assert!(!wb.has_work());
    }

    // persistence §7.4 #10
    #[tokio::test(start_paused = true)]
    async fn large_failed_batch_is_retained_and_retried_whole() {
        const N: u64 = 150_000;
        let sink = Recorder::new();
        sink.fail.store(true, Ordering::SeqCst);
        let wb = controller(&sink);
        for i in 0..N {
            wb.enqueue(i);
        }
        advance(200).await;
        assert_eq!(sink.reports().len(), 1);
        assert_eq!(wb.pending_len(), N as usize);
        sink.fail.store(false, Ordering::SeqCst);
        assert_eq!(wb.flush().await, Ok(()));
        let batches = sink.batches();
        assert_eq!(batches.len(), 2);
        assert_eq!(batches[1], (0..N).collect::<Vec<_>>());
        assert_eq!(wb.pending_len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn failed_batch_goes_back_before_newer_events() {
        let sink = Recorder::new();
        sink.fail.store(true, Ordering::SeqCst);
        sink.write_ms.store(10, Ordering::SeqCst);
        let wb = controller(&sink);
        wb.enqueue(0);
        wb.enqueue(1);
        advance(200).await;
        wb.enqueue(2); // admitted while the failing write runs
        advance(10).await;
        assert_eq!(wb.pending_len(), 3);
        sink.fail.store(false, Ordering::SeqCst);
        assert_eq!(wb.flush().await, Ok(()));
        assert_eq!(sink.batches(), vec![vec![0, 1], vec![0, 1, 2]]);
    }

    #[tokio::test(start_paused = true)]
    async fn back_pressure_starts_a_write_without_waiting_for_the_window() {
        let sink = Recorder::weighted(10);
        sink.write_ms.store(50, Ordering::SeqCst);
        let wb = controller_with(
            &sink,
            WriteBehindOptions {
                max_delay: Duration::from_millis(200),
                max_pending_bytes: 30,
            },
        );
        wb.enqueue(0);
        wb.enqueue(1);
        settle().await;
        assert!(sink.batches().is_empty());
        assert_eq!(wb.pending_bytes(), 20);
        wb.enqueue(2); // reaches the bound
        settle().await;
        assert_eq!(sink.batches(), vec![vec![0, 1, 2]]);
        assert_eq!(wb.pending_bytes(), 0);
        // While that write runs, the bound is reached again: the next write follows it at once.
        for i in 3..6 {
            wb.enqueue(i);
        }
        assert_eq!(wb.pending_len(), 3);
        advance(50).await;
        assert_eq!(sink.batches(), vec![vec![0, 1, 2], vec![3, 4, 5]]);
        assert_eq!(sink.starts(), vec![0, 50]);
        // Below the bound the window applies again.
        advance(50).await;
        wb.enqueue(6);
        advance(199).await;
        assert_eq!(sink.batches().len(), 2);
        advance(1).await;
        assert_eq!(sink.batches().len(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn back_pressure_does_not_bypass_the_failure_pause() {
        let sink = Recorder::weighted(10);
        sink.fail.store(true, Ordering::SeqCst);
        let wb = controller_with(
            &sink,
            WriteBehindOptions {
                max_delay: Duration::from_millis(200),
                max_pending_bytes: 20,
            },
        );
        wb.enqueue(0);
        wb.enqueue(1);
        settle().await;
        assert_eq!(sink.batches().len(), 1);
        assert_eq!(sink.reports().len(), 1);
        // Over the bound, but paused: this event opens a fresh window instead of a retry storm.
        wb.enqueue(2);
        settle().await;
        assert_eq!(sink.batches().len(), 1);
        assert!(wb.timer_armed());
        advance(200).await;
        assert_eq!(sink.batches(), vec![vec![0, 1], vec![0, 1, 2]]);
        assert_eq!(sink.reports().len(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_task_that_dies_keeps_its_batch() {
        let sink = Recorder::new();
        sink.panic_once.store(true, Ordering::SeqCst);
        let wb = controller(&sink);
        wb.enqueue(0);
        assert_eq!(wb.flush().await, Err("write interrupted".to_owned()));
        assert_eq!(wb.pending_len(), 1);
        assert!(!wb.write_active());
        assert_eq!(wb.flush().await, Ok(()));
        assert_eq!(sink.batches(), vec![vec![0], vec![0]]);
    }

    #[tokio::test(start_paused = true)]
    async fn cancel_automatic_wait_only_stops_the_timer() {
        let sink = Recorder::new();
        let wb = controller(&sink);
        wb.enqueue(0);
        wb.cancel_automatic_wait();
        assert!(!wb.timer_armed());
        advance(1000).await;
        assert!(sink.batches().is_empty());
        assert_eq!(wb.pending_len(), 1);
        assert_eq!(wb.flush().await, Ok(()));
        assert_eq!(sink.batches(), vec![vec![0]]);
    }
}
