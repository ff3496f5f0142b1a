//! Cooperative cancellation for observation reads (the reference's `AbortSignal`).
//!
//! A [`CancelToken`] is cancelled once, with an optional [`AbortReason`]. Operations that take
//! `Option<&CancelToken>` check it between steps; an operation that is still queued behind
//! another one on the same session id rejects immediately with the exact reason, while an
//! operation that has already started owns its own settlement.

use std::fmt;
use std::sync::Arc;

use tokio::sync::watch;

/// Why an operation was cancelled: the exact error object given to [`CancelToken::cancel`], or
/// the generic `aborted` error when none was given.
///
/// Clones share the same object, so a caller can check with [`AbortReason::ptr_eq`] that it got
/// back exactly the reason it cancelled with.
#[derive(Clone)]
pub struct AbortReason(Arc<dyn std::error::Error + Send + Sync>);

#[derive(Debug)]
struct Aborted;

impl fmt::Display for Aborted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("aborted")
    }
}

impl std::error::Error for Aborted {}

impl AbortReason {
    /// A reason wrapping `error`.
    pub fn new(error: impl std::error::Error + Send + Sync + 'static) -> AbortReason {
        AbortReason(Arc::new(error))
    }

    /// The generic reason used when a token is cancelled without one (`Error: aborted`).
    pub fn aborted() -> AbortReason {
        AbortReason(Arc::new(Aborted))
    }

    /// The underlying error object.
    pub fn error(&self) -> &Arc<dyn std::error::Error + Send + Sync> {
        &self.0
    }

    /// Whether both reasons are the same object.
    pub fn ptr_eq(&self, other: &AbortReason) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl fmt::Display for AbortReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl fmt::Debug for AbortReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AbortReason({})", self.0)
    }
}

/// A cancellation signal shared by a caller and the operations it started.
///
/// Clones observe the same state. Cancelling is idempotent: the first reason wins.
#[derive(Clone)]
pub struct CancelToken {
    tx: Arc<watch::Sender<Option<AbortReason>>>,
}

impl Default for CancelToken {
    fn default() -> CancelToken {
        CancelToken::new()
    }
}

impl fmt::Debug for CancelToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CancelToken")
            .field("reason", &*self.tx.borrow())
            .finish()
    }
}

impl CancelToken {
    /// A token that is not cancelled.
    pub fn new() -> CancelToken {
        CancelToken {
            tx: Arc::new(watch::channel(None).0),
        }
    }

    /// A token that is already cancelled with `reason`.
    pub fn cancelled_with(reason: AbortReason) -> CancelToken {
        let token = CancelToken::new();
        token.cancel_with(reason);
        token
    }

    /// Cancels with the generic `aborted` reason (no effect if already cancelled).
    pub fn cancel(&self) {
        self.cancel_with(AbortReason::aborted());
    }

    /// Cancels with `reason` (no effect if already cancelled).
    pub fn cancel_with(&self, reason: AbortReason) {
        self.tx.send_if_modified(|slot| {
            if slot.is_some() {
                return false;
            }
            *slot = Some(reason);
            true
        });
    }

    /// The reason, once cancelled.
    pub fn reason(&self) -> Option<AbortReason> {
        self.tx.borrow().clone()
    }

    /// `Err(reason)` once cancelled, else `Ok(())`: the check done between steps.
    pub fn check(&self) -> Result<(), AbortReason> {
        match self.reason() {
            Some(reason) => Err(reason),
            None => Ok(()),
        }
    }

    /// Resolves with the reason once the token is cancelled (immediately if it already is).
    pub async fn cancelled(&self) -> AbortReason {
        let mut rx = self.tx.subscribe();
        loop {
            if let Some(reason) = rx.borrow_and_update().clone() {
                return reason;
            }
            if rx.changed().await.is_err() {
                // The sender lives in `self`, so this cannot happen while `self` is borrowed.
                std::future::pending::<()>().await;
            }
        }
    }
}

/// Checks an optional token: `Err(reason)` when it is present and cancelled.
pub fn check(token: Option<&CancelToken>) -> Result<(), AbortReason> {
    token.map_or(Ok(()), CancelToken::check)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn first_reason_wins_and_is_the_same_object() {
        let token = CancelToken::new();
        assert!(token.check().is_ok());
        let reason = AbortReason::new(std::io::Error::other("stop"));
        token.cancel_with(reason.clone());
        token.cancel();
        let got = token.cancelled().await;
        assert!(got.ptr_eq(&reason));
        assert_eq!(got.to_string(), "stop");
        assert!(check(Some(&token)).is_err());
        assert!(check(None).is_ok());
    }

    #[tokio::test]
    async fn default_reason_is_aborted() {
        let token = CancelToken::new();
        let waiter = {
            let token = token.clone();
            tokio::spawn(async move { token.cancelled().await })
        };
        tokio::task::yield_now().await;
        token.cancel();
        assert_eq!(waiter.await.unwrap().to_string(), "aborted");
    }
}
