//! Retirement of a disposed live session, and the write ownership (`Backend::acquire` /
//! `Backend::release`) a service holds for the sessions it opened.

use std::sync::Arc;

use session_core::SessionHeader;
use session_store::SharedSession;

use super::state::{CoordInner, Retirement};
use crate::backend::{Backend, Revision};
use crate::cancel::{self, CancelToken};
use crate::error::{Error, Result};
use crate::promise::{observe_queued_abort, promise, unshare};

impl CoordInner {
    /// Starts the final drain of a disposed live session.
    pub(super) fn retire(self: &Arc<Self>, session: &SharedSession) {
        let id = session.id();
        let (resolver, done) = promise();
        let token = {
            let mut core = self.core();
            if core.live_entry(session).is_none() {
                return;
            }
            let token = core.next_token();
            core.retirements.insert(
                id.clone(),
                Retirement {
                    token,
                    done: done.clone(),
                },
            );
            token
        };
        let me = self.clone();
        let session = session.clone();
        self.handle.spawn(async move {
            let outcome = me.retire_core(&session).await;
            if let Err(e) = &outcome {
                me.warn(&format!(
                    "{}: session \"{id}\" retirement failed: {}",
                    me.name(),
                    e.js_string()
                ));
            }
            {
                let mut core = me.core();
                if core.retirements.get(&id).is_some_and(|r| r.token == token) {
                    core.retirements.remove(&id);
                }
            }
            resolver.settle(Ok(()));
            // When the application has let go of the session already, this is its last
            // handle, and dropping a large session frees every event: do that on the blocking
            // pool rather than stall an asynchronous worker.
            let handle = me.handle.clone();
            drop(me);
            drop(handle.spawn_blocking(move || drop(session)));
        });
    }

    pub(super) async fn retire_core(self: &Arc<Self>, session: &SharedSession) -> Result<()> {
        self.flush_session(session).await?;
        let id = session.id();
        let session = session.clone();
        let op_id = id.clone();
        self.serialize(&id, None, move |me| async move {
            let released = {
                let mut core = me.core();
                if let Some(entries) = core.live.get_mut(&op_id) {
                    entries.retain(|e| !e.session.ptr_eq(&session));
                    if entries.is_empty() {
                        core.live.remove(&op_id);
                    }
                }
                let owned = core
                    .states
                    .get(&op_id)
                    .and_then(|s| s.owner.as_ref())
                    .is_some_and(|o| o.ptr_eq(&session));
                if owned {
                    core.states.remove(&op_id);
                    core.leased.remove(&op_id);
                }
                owned
            };
            if released {
                me.backend.release(&op_id).await?;
            }
            Ok(())
        })
        .await
    }

    /// Opens the session of `meta` for writing ([`Backend::acquire`]) unless this service holds
    /// it already: a service opens a session once, until it releases it at retirement.
    pub(super) async fn open_for_writing(
        &self,
        meta: &SessionHeader,
        stored: Option<&Revision>,
    ) -> Result<()> {
        let held = self.core().leased.get(&*meta.id).copied();
        match (held, stored) {
            (Some(true), _) | (Some(false), None) => return Ok(()),
            (None | Some(false), _) => {}
        }
        self.backend.acquire(meta, stored).await?;
        self.core().leased.insert(meta.id.clone(), stored.is_some());
        Ok(())
    }

    /// Waits for a retiring lifecycle of `id`, if any.
    pub(super) async fn wait_for_retirement(
        &self,
        id: &str,
        cancel: Option<&CancelToken>,
    ) -> Result<()> {
        let done = self.core().retirements.get(id).map(|r| r.done.clone());
        match done {
            None => cancel::check(cancel).map_err(Error::Aborted),
            Some(done) => {
                observe_queued_abort(
                    async move { done.wait().await.map_err(unshare) },
                    cancel,
                    || false,
                )
                .await
            }
        }
    }
}
