//! Request-header (`request/header`) canonicalisation, equality and folding, and the
//! `request/context` fold.
