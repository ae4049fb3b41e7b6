//! Project automation for Braid.
//!
//! ```text
//! cargo xtask demo [ARGS…]   install what is missing, build in release, run `braid demo ARGS…`
//! cargo xtask test [ARGS…]   install what is missing, run the whole test suite (dev profile)
//! cargo xtask setup          only install what is missing
//! cargo xtask assets         regenerate the bundled clips from ffmpeg's synthetic sources
//! cargo xtask bench          run the benchmarks recorded in BENCHMARKS.md
//! ```
//!
//! This crate deliberately depends on nothing but `std`: it must build before the system
//! libraries it installs exist.

mod assets;
mod bench;
mod setup;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let cmd = args.next().unwrap_or_default();
    let rest: Vec<String> = args.collect();
    let result = match cmd.as_str() {
        "setup" => setup::ensure(),
        "demo" => demo(&rest),
        "test" => test(&rest),
        "assets" => assets::generate(),
        "bench" => setup::ensure().and_then(|()| bench::run_benches(&rest)),
        "" | "help" | "-h" | "--help" => {
            println!("{}", USAGE);
            Ok(())
        }
        other => Err(format!("unknown xtask command `{other}`\n\n{USAGE}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

const USAGE: &str = "usage: cargo xtask <demo|test|setup|assets|bench> [ARGS…]
  demo    install missing system packages, build braid in release, run `braid demo ARGS…`
  test    install missing system packages, run the whole test suite
  setup   install missing system packages only
  assets  regenerate assets/clips from ffmpeg's synthetic sources
  bench   run the benchmarks recorded in BENCHMARKS.md";

/// The workspace root (the parent of this crate's directory).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// Runs a command to completion, turning a failure into a message that names it.
pub fn run(cmd: &mut Command) -> Result<(), String> {
    let shown = format!("{cmd:?}");
    let status = cmd.status().map_err(|e| format!("could not start {shown}: {e}"))?;
    if status.success() { Ok(()) } else { Err(format!("{shown} failed with {status}")) }
}

fn cargo() -> Command {
    let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    c.current_dir(root());
    c
}

fn demo(args: &[String]) -> Result<(), String> {
    setup::ensure()?;
    run(cargo().args(["build", "--release", "--package", "braid-player", "--bin", "braid"]))?;
    let bin = root().join("target/release/braid");
    run(Command::new(bin).current_dir(root()).arg("demo").args(args))
}

fn test(args: &[String]) -> Result<(), String> {
    setup::ensure()?;
    // One build profile for everything (dev). The end-to-end tests run the real `braid`
    // binary, which `cargo test` does not build for another package: build it first.
    run(cargo().args(["build", "--package", "braid-player", "--bin", "braid"]))?;
    run(cargo().args(["test", "--workspace", "--exclude", "xtask", "--no-fail-fast"]).args(args))
}
