//! Project automation for Braid.
//!
//! ```text
//! cargo xtask demo [ARGS…]   install what is missing, build in release, run `braid demo ARGS…`
//! cargo xtask test [ARGS…]   install what is missing, run the whole test suite (dev profile)
//! cargo xtask setup          only install what is missing
//! cargo xtask assets         regenerate the bundled clips from ffmpeg's synthetic sources
//! cargo xtask bench          run the benchmarks recorded in BENCHMARKS.md
//! cargo xtask imports        check that no module imports from a sibling that imports it back
//! ```
//!
//! This crate deliberately depends on `std` plus serde/serde_json (pure Rust, to read the
//! benchmarks' JSON) and on nothing that needs a system library: it must build before the
//! system libraries it installs exist.

mod assets;
mod bench;
mod imports;
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
        "imports" => imports::run(),
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

const USAGE: &str = "usage: cargo xtask <demo|test|setup|assets|bench|imports> [ARGS…]
  demo    install missing system packages, build braid in release, run `braid demo ARGS…`
  test    install missing system packages, run the whole test suite
  setup   install missing system packages only
  assets  regenerate assets/clips from ffmpeg's synthetic sources
  bench   run the benchmarks recorded in BENCHMARKS.md
  imports fail on module import cycles (siblings that use each other)";

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
    // Guards first, so that a formatting slip or a lint fails in seconds rather than after
    // the suite: rustfmt, and clippy with warnings as errors (transport/clippy.toml keeps
    // HashMap/HashSet, the wall clock and thread-local RNGs out of the sans-IO crate).
    run(cargo().args(["fmt", "--all", "--check"]))
        .map_err(|e| format!("{e}\n  (run `cargo fmt --all` to format the tree)"))?;
    // No module may import from a sibling that imports it back (`cargo xtask imports`).
    imports::run()?;
    run(cargo().args(["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"]))?;
    // One build profile for everything (dev). The end-to-end tests run the real `braid`
    // binary, which `cargo test` does not build for another package: build it first.
    run(cargo().args(["build", "--package", "braid-player", "--bin", "braid"]))?;
    // Tests whose prerequisite is missing record themselves here (braid_tests::skip); under
    // CI=true they fail instead.
    let skip_log = root().join("target").join("test-skips.log");
    let _ = std::fs::remove_file(&skip_log);
    let result = run(cargo()
        .args(["test", "--workspace", "--exclude", "xtask", "--no-fail-fast"])
        .args(args)
        .env("BRAID_SKIP_LOG", &skip_log));
    report_skips(&skip_log);
    result
}

/// Prints how many tests were skipped and why (nothing when none was).
fn report_skips(log: &Path) {
    let Ok(text) = std::fs::read_to_string(log) else { return };
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.is_empty() {
        return;
    }
    println!("{} test(s) skipped for a missing prerequisite:", lines.len());
    for l in lines {
        let (test, reason) = l.split_once('\t').unwrap_or((l, ""));
        println!("  {test}: {reason}");
    }
}
