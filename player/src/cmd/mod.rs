//! One module per `braid` subcommand.

pub mod bed;
pub mod compare;
pub mod demo;
pub mod interop;
pub mod kernel;
pub mod merge;
pub mod netem;
pub mod perf;
pub mod play;
pub mod probe;
pub mod profiles;
pub mod proxy;
pub mod psnr;
pub mod repro;
pub mod schedule;
pub mod serve;
pub mod sim;
pub mod tls;
pub mod trace;
