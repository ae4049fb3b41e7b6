//! In-process connection tests, one module per subject, on the shared [`harness`].

mod harness;

mod acks;
mod cids;
mod close;
mod estimators;
mod failover;
mod fec;
mod flow;
mod handshake;
mod hostile;
mod malformed;
mod messages;
mod migration;
mod mtu;
mod pacing;
mod paths;
mod protection;
mod reinject;
mod reset;
mod strategies;
mod trace;
mod v1;
