//! session-surface
