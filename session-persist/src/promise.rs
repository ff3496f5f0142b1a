//! Small async building blocks shared by the coordinator: a settle-once value that any number
//! of waiters can await (a JavaScript promise's role), and the queued-abort observer.

use std::future::Future;
use std::sync::Arc;

use tokio::sync::watch;

use crate::cancel::CancelToken;
use crate::error::{Error, Result};

/// The outcome a [`Promise`] carries: a value, or an error shared by every waiter.
pub(crate) type Outcome<T> = std::result::Result<T, Arc<Error>>;

/// The settling side of a [`Promise`].
pub(crate) struct Resolver<T>(watch::Sender<Option<Outcome<T>>>);

/// A value that settles once; clones wait for the same settlement.
pub(crate) struct Promise<T>(watch::Receiver<Option<Outcome<T>>>);

impl<T> Clone for Promise<T> {
    fn clone(&self) -> Self {
        Promise(self.0.clone())
    }
}

/// A new unsettled promise and its resolver.
pub(crate) fn promise<T>() -> (Resolver<T>, Promise<T>) {
    let (tx, rx) = watch::channel(None);
    (Resolver(tx), Promise(rx))
}

/// A promise that is already settled with `outcome`.
pub(crate) fn settled<T>(outcome: Outcome<T>) -> Promise<T> {
    let (tx, rx) = promise();
    tx.settle(outcome);
    rx
}

impl<T> Resolver<T> {
    /// Settles the promise (later calls are ignored).
    pub(crate) fn settle(&self, outcome: Outcome<T>) {
        self.0.send_if_modified(|slot| {
            if slot.is_some() {
                return false;
            }
            *slot = Some(outcome);
            true
        });
    }
}

impl<T: Clone> Promise<T> {
    /// Waits for the settlement. A resolver dropped without settling counts as a failure.
    pub(crate) async fn wait(&self) -> Outcome<T> {
        let mut rx = self.0.clone();
        match rx.wait_for(Option::is_some).await {
            Ok(value) => value.clone().unwrap_or_else(|| Err(Arc::new(dropped()))),
            Err(_) => Err(Arc::new(dropped())),
        }
    }

    /// The settlement, if there is one yet.
    #[cfg(test)]
    pub(crate) fn peek(&self) -> Option<Outcome<T>> {
        self.0.borrow().clone()
    }

    /// Whether both handles wait for the same settlement.
    #[cfg(test)]
    pub(crate) fn same(&self, other: &Promise<T>) -> bool {
        self.0.same_channel(&other.0)
    }
}

fn dropped() -> Error {
    Error::Task {
        message: "the operation ended without a result".to_owned(),
    }
}

/// Unwraps a shared error for a single caller: the error itself when this was its only
/// holder, else a clone of it (errors are cheap to clone: their sources sit behind an `Arc`).
pub(crate) fn unshare(error: Arc<Error>) -> Error {
    Arc::try_unwrap(error).unwrap_or_else(|shared| (*shared).clone())
}

/// Gives a queued observer prompt cancellation without cancelling shared work
/// (`observeQueuedAbort`): once `cancel` fires while `started()` is false, resolves with the
/// exact abort reason; otherwise (no token, or the work has started) with the work's outcome.
pub(crate) async fn observe_queued_abort<T>(
    work: impl Future<Output = Result<T>>,
    cancel: Option<&CancelToken>,
    started: impl Fn() -> bool,
) -> Result<T> {
    let Some(cancel) = cancel else {
        return work.await;
    };
    tokio::pin!(work);
    tokio::select! {
        biased;
        reason = cancel.cancelled() => {
            if started() {
                work.await
            } else {
                Err(Error::Aborted(reason))
            }
        }
        outcome = &mut work => outcome,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cancel::AbortReason;

    // persistence §7.5 #17
    #[tokio::test]
    async fn observe_queued_abort_relays_fulfilment_and_rejection_exactly() {
        let token = CancelToken::new();
        let ok = observe_queued_abort(async { Ok(7) }, Some(&token), || false).await;
        assert_eq!(ok.unwrap(), 7);
        let err = observe_queued_abort(
            async { Err::<(), _>(Error::Backend("boom".into())) },
            Some(&token),
            || false,
        )
        .await
        .unwrap_err();
        assert_eq!(err.to_string(), "boom");
    }

    // persistence §7.5 #18
    #[tokio::test(start_paused = true)]
    async fn observe_queued_abort_rejects_promptly_and_ignores_late_settlement() {
        let token = CancelToken::new();
        let (tx, rx) = promise::<u32>();
        let observer = {
            let token = token.clone();
            tokio::spawn(async move {
                observe_queued_abort(
                    async move { rx.wait().await.map_err(unshare) },
                    Some(&token),
                    || false,
                )
                .await
            })
        };
        tokio::task::yield_now().await;
        let reason = AbortReason::new(std::io::Error::other("stop"));
        token.cancel_with(reason.clone());
        let got = observer.await.unwrap().unwrap_err();
        assert!(matches!(&got, Error::Aborted(r) if r.ptr_eq(&reason)));
        // The shared work settles later and nobody minds.
        tx.settle(Ok(1));
    }

    // persistence §7.5 #19
    #[tokio::test]
    async fn observe_queued_abort_pre_aborted_rejects_with_its_reason() {
        let reason = AbortReason::new(std::io::Error::other("already"));
        let token = CancelToken::cancelled_with(reason.clone());
        let got = observe_queued_abort(async { Ok(1) }, Some(&token), || false)
            .await
            .unwrap_err();
        assert!(matches!(&got, Error::Aborted(r) if r.ptr_eq(&reason)));
    }

    // persistence §7.5 #20
    #[tokio::test]
    async fn observe_queued_abort_started_work_owns_its_settlement() {
        let token = CancelToken::new();
        token.cancel();
        let got = observe_queued_abort(async { Ok(5) }, Some(&token), || true).await;
        assert_eq!(got.unwrap(), 5);
    }

    #[tokio::test]
    async fn promise_settles_once_for_every_waiter() {
        let (tx, rx) = promise::<u32>();
        let other = rx.clone();
        assert!(rx.same(&other));
        assert!(rx.peek().is_none());
        tx.settle(Ok(1));
        tx.settle(Ok(2));
        assert_eq!(rx.wait().await.unwrap(), 1);
        assert_eq!(other.wait().await.unwrap(), 1);
        let (tx, rx) = promise::<u32>();
        drop(tx);
        assert!(rx.wait().await.is_err());
        assert_eq!(settled(Ok(3)).wait().await.unwrap(), 3);
    }
}
