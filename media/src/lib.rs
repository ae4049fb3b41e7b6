//! Braid media (in progress).
