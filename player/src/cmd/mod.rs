//! One module per `braid` subcommand.

pub mod demo;
pub mod probe;
pub mod psnr;
pub mod schedule;
