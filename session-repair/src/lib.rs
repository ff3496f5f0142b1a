//! session-repair
