//! Shared helpers for Braid's end-to-end tests (the tests themselves are in `tests/`).
//!
//! The tests run the real `braid` binary. `cargo xtask test` builds it before running the
//! suite; [`braid`] finds it next to the test executable (same target dir and profile).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The repository root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A path inside the repository.
pub fn repo(rel: &str) -> PathBuf {
    root().join(rel)
}

/// A file from the shared test data beside the project, when present; otherwise the
/// calling test is skipped through [`skip`] (a failure under CI).
pub fn shared(rel: &str) -> Option<PathBuf> {
    let p = root().join("../shared").join(rel);
    if p.exists() {
        Some(p)
    } else {
        skip(&format!("../shared/{rel} is not present"));
        None
    }
}

/// The environment variable naming the file where skipped tests are recorded
/// (`cargo xtask test` sets it and prints a summary of the file after the run).
pub const SKIP_LOG_VAR: &str = "BRAID_SKIP_LOG";

/// Whether this is a CI run (`CI=true`, as CI systems set it).
pub fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// The calling test cannot run here: a prerequisite (a display server, root for network
/// namespaces, the shared test data) is missing. The caller returns right after.
///
/// Under CI every prerequisite is provided (CI runs as root, installs Xvfb, and has the
/// shared test data beside the project), so a missing one is a failure there: this panics.
/// Elsewhere it prints `not run, prerequisite missing: REASON` and appends `TEST\tREASON` to the file named by
/// [`SKIP_LOG_VAR`], so that the skip is counted instead of passing silently.
#[track_caller]
pub fn skip(reason: &str) {
    let test = std::thread::current().name().unwrap_or("?").to_string();
    if under_ci() {
        panic!("{test}: prerequisite missing under CI=true: {reason}");
    }
    eprintln!("not run, prerequisite missing: {reason}");
    if let Some(log) = std::env::var_os(SKIP_LOG_VAR) {
        use std::io::Write as _;
        let line = format!("{test}\t{reason}\n");
        let file = std::fs::OpenOptions::new().create(true).append(true).open(log);
        if let Ok(mut f) = file {
            let _ = f.write_all(line.as_bytes());
        }
    }
}

/// The `braid` binary of this build.
pub fn braid_path() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    // target/<profile>/deps/<test> → target/<profile>/braid
    let dir = exe.parent().and_then(Path::parent).expect("target directory");
    let bin = dir.join(format!("braid{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.is_file(),
        "{} not found: build it first with `cargo build -p braid-player` (cargo xtask test does)",
        bin.display()
    );
    bin
}

/// A `braid` command ready to take arguments.
pub fn braid() -> Command {
    let mut c = Command::new(braid_path());
    c.current_dir(root());
    c
}

/// Spawns a serving `braid` command (`serve`, `perf server`, `proxy`) with stderr piped
/// and returns it with the certificate fingerprint it prints (`certificate sha256 HEX`);
/// the rest of its stderr is drained in the background.
pub fn spawn_serving(cmd: &mut Command) -> (std::process::Child, String) {
    use std::io::BufRead;
    let mut child = cmd.stderr(std::process::Stdio::piped()).spawn().expect("spawning braid");
    let stderr = child.stderr.take().expect("piped stderr");
    let mut lines = std::io::BufReader::new(stderr).lines();
    let mut pin = String::new();
    for line in lines.by_ref() {
        let Ok(line) = line else { break };
        if let Some(hex) = line.strip_prefix("certificate sha256 ") {
            pin = hex.trim().to_owned();
            break;
        }
    }
    std::thread::spawn(move || for _ in lines {});
    (child, pin)
}

/// Runs `braid ARGS…` and returns its output.
pub fn run_braid(args: &[&str]) -> Output {
    braid().args(args).output().expect("running braid")
}

/// Runs `braid ARGS…` with a time limit: `None` when it had to be killed (a hang).
pub fn run_braid_within(args: &[&str], limit: Duration) -> Option<Output> {
    let child = braid()
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting braid");
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => Some(out.expect("waiting for braid")),
        Err(_) => {
            // Only the child this call started, by its pid.
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            None
        }
    }
}

/// Asserts the command failed the way every `braid` failure must: non-zero exit, one
/// `error: …` line on stderr, no panic or backtrace. Returns the error line.
pub fn assert_clean_error(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success(), "expected failure, got success; stderr: {stderr}");
    assert!(
        !stderr.contains("panicked")
            && !stderr.contains("internal error")
            && !stderr.contains("RUST_BACKTRACE"),
        "panic: {stderr}"
    );
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "expected exactly one error line, got: {stderr}");
    assert!(lines[0].starts_with("error: "), "{stderr}");
    lines[0].to_string()
}

/// A scratch directory removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    /// Creates `braid-<name>-<pid>` in the system temporary directory.
    pub fn new(name: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("braid-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("creating a temporary directory");
        TempDir(p)
    }

    /// A path inside it.
    pub fn join(&self, rel: &str) -> PathBuf {
        self.0.join(rel)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs ffmpeg (installed by `cargo xtask setup`) and asserts it succeeded.
pub fn ffmpeg(args: &[&str]) -> Output {
    let out = Command::new("ffmpeg")
        .current_dir(root())
        .args(["-hide_banner", "-nostdin", "-y"])
        .args(args)
        .output()
        .expect("running ffmpeg");
    assert!(out.status.success(), "ffmpeg {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out
}

/// A child process this test started; killed (by its PID) and reaped when dropped, even
/// when the test fails.
pub struct Guard(pub Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Whether `prog` is on the PATH.
pub fn have(prog: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {prog}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Whether the tools of the screenshot tests are installed (`cargo xtask setup` installs
/// them): Xvfb and ImageMagick's `convert` and `import`.
pub fn have_xvfb_and_imagemagick() -> bool {
    have("Xvfb") && Path::new("/usr/bin/convert").exists() && have("import")
}

/// Starts Xvfb with a `size` screen (e.g. "1280x900x24") on the first free display in
/// `displays`; returns it (stopped when dropped) and its `DISPLAY` name.
pub fn xvfb(displays: std::ops::Range<u32>, size: &str) -> Option<(Guard, String)> {
    for n in displays {
        let lock = format!("/tmp/.X{n}-lock");
        if Path::new(&lock).exists() {
            // An Xvfb killed by an earlier run leaves its lock behind: reuse the display
            // only when the process that holds the lock is gone.
            let holder =
                std::fs::read_to_string(&lock).ok().and_then(|t| t.trim().parse::<u32>().ok());
            if holder.is_none_or(|pid| Path::new(&format!("/proc/{pid}")).exists()) {
                continue;
            }
            let _ = std::fs::remove_file(&lock);
            let _ = std::fs::remove_file(format!("/tmp/.X11-unix/X{n}"));
        }
        let child = Command::new("Xvfb")
            .args([
                format!(":{n}"),
                "-screen".into(),
                "0".into(),
                size.into(),
                "-nolisten".into(),
                "tcp".into(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let guard = Guard(child);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if Path::new(&format!("/tmp/.X11-unix/X{n}")).exists() {
                return Some((guard, format!(":{n}")));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    None
}
