//! The small amount of async machinery the store needs, without a runtime: boxed futures, a
//! join over flush listeners, a blocking executor and the spawner that drives asynchronous
//! listeners (on a small `futures-executor` thread pool).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, LazyLock};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;

use futures_executor::ThreadPool;

use crate::BoxError;

/// A boxed, sendable future.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// Drives a background future to completion (for asynchronous listeners, whose outcome is only
/// logged). Install one with [`SessionStore::set_spawner`](crate::SessionStore::set_spawner),
/// for example a closure that hands the future to an async runtime.
pub type Spawner = Arc<dyn Fn(BoxFuture<()>) + Send + Sync>;

/// Wakes a parked thread.
struct ThreadWaker(Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Runs a future to completion on the current thread, parking between polls.
///
/// This is a minimal executor for callers without an async runtime (tests, command-line tools).
/// Do not call it from inside an async runtime's worker thread.
pub fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
        std::thread::park();
    }
}

/// The threads of the default [`Spawner`]'s pool: asynchronous listeners only wait, so a few
/// threads drive any number of pending ones.
const LISTENER_THREADS: usize = 2;

/// The pool that drives pending listener futures for [`default_spawner`], started on first use.
/// `None` when the operating system refused to start its threads.
static LISTENER_POOL: LazyLock<Option<ThreadPool>> = LazyLock::new(|| {
    ThreadPool::builder()
        .pool_size(LISTENER_THREADS)
        .name_prefix("session-store-listener-")
        .create()
        .ok()
});

/// The default [`Spawner`]: polls the future once on the calling thread and, if it is not
/// finished yet, hands it to a small process-wide thread pool (a fixed number of threads,
/// however many futures are pending). Should the pool's threads fail to start, the future is
/// driven on a thread of its own instead.
pub fn default_spawner() -> Spawner {
    Arc::new(|mut future: BoxFuture<()>| {
        let waker = Waker::noop();
        let mut cx = Context::from_waker(waker);
        if future.as_mut().poll(&mut cx).is_pending() {
            match &*LISTENER_POOL {
                // A panic would end the pool thread it ran on; it ends only that future.
                Some(pool) => pool.spawn_ok(Isolated(future)),
                None => {
                    std::thread::spawn(move || block_on(future));
                }
            }
        }
    })
}

/// A background future whose panic while polling ends that future only.
struct Isolated(BoxFuture<()>);

impl Future for Isolated {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let future = &mut self.0;
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| future.as_mut().poll(cx)))
            .unwrap_or(Poll::Ready(()))
    }
}

/// Wraps a listener's future so that a panic while polling it becomes a failure.
pub(crate) struct Contained(pub(crate) BoxFuture<Result<(), BoxError>>);

impl Future for Contained {
    type Output = Result<(), BoxError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let future = &mut self.0;
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| future.as_mut().poll(cx)))
            .unwrap_or_else(|payload| {
                Poll::Ready(Err(crate::store::panic_message(&*payload).into()))
            })
    }
}

/// Waits for every flush listener to settle and yields their outcomes in registration order
/// (the equivalent of `Promise.allSettled`).
pub(crate) struct JoinAll {
    pending: Vec<Option<Contained>>,
    outcomes: Vec<Option<Result<(), BoxError>>>,
}

impl JoinAll {
    /// Joins `futures`, which have already been started.
    pub(crate) fn new(futures: Vec<BoxFuture<Result<(), BoxError>>>) -> JoinAll {
        let outcomes = futures.iter().map(|_| None).collect();
        JoinAll {
            pending: futures.into_iter().map(|f| Some(Contained(f))).collect(),
            outcomes,
        }
    }
}

impl Future for JoinAll {
    type Output = Vec<Result<(), BoxError>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let mut done = true;
        for (slot, outcome) in this.pending.iter_mut().zip(this.outcomes.iter_mut()) {
            if let Some(future) = slot {
                match Pin::new(future).poll(cx) {
                    Poll::Ready(result) => {
                        *outcome = Some(result);
                        *slot = None;
                    }
                    Poll::Pending => done = false,
                }
            }
        }
        if !done {
            return Poll::Pending;
        }
        let outcomes = std::mem::take(&mut this.outcomes)
            .into_iter()
            .map(|o| o.unwrap_or(Ok(())))
            .collect();
        Poll::Ready(outcomes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use std::sync::mpsc;

    /// Pending until `rx` has a message; wakes through a helper thread.
    struct Signal(mpsc::Receiver<()>);

    impl Future for Signal {
        type Output = ();
        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            if self.0.try_recv().is_ok() {
                return Poll::Ready(());
            }
            let waker = cx.waker().clone();
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(1));
                waker.wake();
            });
            Poll::Pending
        }
    }

    #[test]
    fn block_on_waits_for_a_wake_from_another_thread() {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(10));
            tx.send(()).unwrap();
        });
        block_on(async move {
            Signal(rx).await;
        });
    }

    #[test]
    fn join_all_keeps_registration_order_and_waits_for_every_future() {
        let (tx, rx) = mpsc::channel();
        let order = Arc::new(Mutex::new(Vec::new()));
        let o = order.clone();
        let slow: BoxFuture<Result<(), BoxError>> = Box::pin(async move {
            Signal(rx).await;
            o.lock().unwrap().push("slow");
            Err("slow failed".into())
        });
        let fast: BoxFuture<Result<(), BoxError>> = Box::pin(async { Err("fast failed".into()) });
        std::thread::spawn(move || tx.send(()).unwrap());
        let outcomes = block_on(JoinAll::new(vec![slow, fast]));
        assert_eq!(*order.lock().unwrap(), ["slow"]);
        let messages: Vec<String> = outcomes
            .iter()
            .map(|o| o.as_ref().unwrap_err().to_string())
            .collect();
        assert_eq!(messages, ["slow failed", "fast failed"]);
        assert!(block_on(JoinAll::new(Vec::new())).is_empty());
    }

    #[test]
    fn join_all_turns_a_panicking_future_into_a_failure() {
        let bad: BoxFuture<Result<(), BoxError>> = Box::pin(async { panic!("poll panicked") });
        let outcomes = block_on(JoinAll::new(vec![bad, Box::pin(async { Ok(()) })]));
        assert_eq!(
            outcomes[0].as_ref().unwrap_err().to_string(),
            "poll panicked"
        );
        assert!(outcomes[1].is_ok());
    }

    #[test]
    fn the_default_spawner_finishes_ready_futures_inline_and_pending_ones_on_the_pool() {
        let spawner = default_spawner();
        let done = Arc::new(Mutex::new(Vec::new()));
        let d = done.clone();
        spawner(Box::pin(async move { d.lock().unwrap().push("inline") }));
        assert_eq!(*done.lock().unwrap(), ["inline"]);
        let (tx, rx) = mpsc::channel();
        let (finished_tx, finished_rx) = mpsc::channel();
        spawner(Box::pin(async move {
            Signal(rx).await;
            finished_tx.send(()).unwrap();
        }));
        tx.send(()).unwrap();
        finished_rx
            .recv_timeout(std::time::Duration::from_secs(5))
            .unwrap();
    }

    #[test]
    fn the_default_spawner_drives_many_pending_futures_on_a_fixed_number_of_threads() {
        const PENDING: usize = 64;
        let spawner = default_spawner();
        let threads = Arc::new(Mutex::new(Vec::new()));
        let (finished_tx, finished_rx) = mpsc::channel();
        let mut releases = Vec::new();
        for _ in 0..PENDING {
            let (tx, rx) = mpsc::channel();
            releases.push(tx);
            let threads = threads.clone();
            let finished_tx = finished_tx.clone();
            spawner(Box::pin(async move {
                Signal(rx).await;
                threads.lock().unwrap().push(std::thread::current().id());
                finished_tx.send(()).unwrap();
            }));
        }
        // Every future is pending at once: a thread per future would use PENDING threads.
        for tx in releases {
            tx.send(()).unwrap();
        }
        for _ in 0..PENDING {
            finished_rx
                .recv_timeout(std::time::Duration::from_secs(10))
                .unwrap();
        }
        let mut ids = threads.lock().unwrap().clone();
        assert_eq!(ids.len(), PENDING);
        ids.sort_by_key(|id| format!("{id:?}"));
        ids.dedup();
        assert!(
            ids.len() <= LISTENER_THREADS,
            "{} threads drove the pending futures",
            ids.len()
        );
    }

    #[test]
    fn a_panicking_background_future_does_not_stop_the_pool() {
        let spawner = default_spawner();
        for _ in 0..2 * LISTENER_THREADS {
            let (tx, rx) = mpsc::channel();
            spawner(Box::pin(async move {
                Signal(rx).await;
                panic!("background future panicked");
            }));
            tx.send(()).unwrap();
        }
        let (tx, rx) = mpsc::channel();
        let (finished_tx, finished_rx) = mpsc::channel();
        spawner(Box::pin(async move {
            Signal(rx).await;
            finished_tx.send(()).unwrap();
        }));
        tx.send(()).unwrap();
        finished_rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .unwrap();
    }
}
