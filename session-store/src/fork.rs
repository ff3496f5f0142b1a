//! `SessionStore.fork` (§6.2): the store-level checks, then the boundary rules of
//! `session-fork`, then `create` (the child shares the parent's prefix and derived state).

use session_core::event::seq_value;
use session_core::json::Value;
use session_fork::{ForkError, resolve_boundary};
use session_surface::SharedSession;

use crate::error::{Error, Result};
use crate::store::{Detach, ForkSource, PrepareOptions, SeedSource, SessionStore};

pub(crate) fn fork(
    store: &SessionStore,
    source: ForkSource<'_>,
    boundary: Option<&Value>,
    child_id: Option<&str>,
) -> Result<(SharedSession, Detach)> {
    let inner = store.inner();
    // 1. A given child id must not be live; checked before the source and the boundary.
    if let Some(child) = child_id
        && inner.live_instance(child).is_some()
    {
        return Err(ForkError::already_exists(child).into());
    }
    // 2. Resolve the source to the store's live instance.
    let source = match source {
        ForkSource::Id(id) => inner
            .live_instance(id)
            .ok_or_else(|| Error::Fork(ForkError::not_found(id)))?,
        ForkSource::Session(session) => {
            let id = session.id();
            match inner.live_instance(&id) {
                None => return Err(ForkError::not_found(&id).into()),
                Some(live) if !live.ptr_eq(session) => {
                    return Err(ForkError::not_live(&id).into());
                }
                Some(live) => live,
            }
        }
    };
    // 3-4. The boundary and the seed (a prefix sharing the source's storage).
    let id = source.id();
    // An O(1) snapshot of the source: its log and its derived state.
    let parent = source.read(Clone::clone);
    let events = parent.events();
    let header = parent.header().clone();
    let seed_length = resolve_boundary(&events, &id, boundary)?;
    // 5. create(childId, {seed, meta: {cwd?, parentSession, seedLength}}).
    let mut meta: Vec<(&str, Value)> = Vec::with_capacity(3);
    if let Some(cwd) = header.cwd {
        meta.push(("cwd", Value::string(cwd)));
    }
    meta.push(("parentSession", Value::string(id)));
    meta.push(("seedLength", seq_value(seed_length as u64)));
    // The child shares the parent's validated prefix and its derived state at the boundary.
    let options = PrepareOptions {
        seed: None,
        seed_events: None,
        meta: Some(Value::object(meta)),
        seed_source: SeedSource::Snapshot,
    };
    inner.create_child(child_id, options, &parent, seed_length)
}
