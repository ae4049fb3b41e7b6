//! End-to-end tests live in `tests/`; this crate holds their shared helpers.
