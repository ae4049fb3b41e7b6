//! End-to-end tests of `braid perf` on loopback, through the UDP relay emulator where a
//! scenario is given. They run in real time on a small machine, so they run one at a time
//! (a shared lock) and their thresholds leave room for a busy CPU.

use std::io::Read as _;
use std::net::UdpSocket;
use std::process::{Child, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use braid_tests::{TempDir, assert_clean_error, braid, run_braid, skip};
use serde_json::Value;

/// Real-time tests share the CPU badly: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A UDP port that was free a moment ago.
fn free_port() -> u16 {
    let s = UdpSocket::bind("127.0.0.1:0").expect("binding a probe socket");
    s.local_addr().expect("local address").port()
}

/// Kills the child (by its PID) when dropped, so a failing test leaves no server behind.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A perf server and the fingerprint of its certificate.
fn start_server(port: u16, extra: &[&str]) -> (Server, String) {
    let (child, pin) = braid_tests::spawn_serving(
        braid()
            .args(["perf", "server", "--listen", &format!("127.0.0.1:{port}")])
            .args(extra)
            .stdout(Stdio::piped()),
    );
    // Give it a moment to bind.
    std::thread::sleep(Duration::from_millis(300));
    (Server(child), pin)
}

fn json_stdout(out: &std::process::Output) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "braid perf failed: {}\nstdout: {stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("-J must print only JSON ({e}): {stdout}"))
}

fn mbps(v: &Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN) / 1e6
}

/// The shape docs/REFERENCE.md fixes for `braid perf -J`.
fn assert_report_shape(v: &Value, paths: usize) {
    assert!(v["start"].is_object(), "{v}");
    let intervals = v["intervals"].as_array().expect("intervals");
    assert!(!intervals.is_empty());
    for i in intervals {
        assert_eq!(i["streams"].as_array().map(Vec::len), Some(paths), "{i}");
        assert!(i["sum"]["bits_per_second"].is_number() && i["sum"]["bytes"].is_u64(), "{i}");
    }
    let end = &v["end"];
    for k in ["sum_received", "sum_sent"] {
        for f in ["bytes", "seconds", "bits_per_second"] {
            assert!(end[k][f].is_number(), "end.{k}.{f} missing: {end}");
        }
    }
    let rows = end["paths"].as_array().expect("end.paths");
    assert_eq!(rows.len(), paths);
    for r in rows {
        assert!(r["name"].is_string(), "{r}");
        for f in ["bytes", "bits_per_second", "rtt_ms", "retransmits"] {
            assert!(r[f].is_number(), "end.paths[].{f} missing: {r}");
        }
    }
}

const TWO_PATHS: &str = r#"
name = "two-paths"
duration_s = 6
seed = 1
[[path]]
name = "wifi"
role = "wifi"
down = { rate = "2mbit", delay_ms = 10, loss = 0.01 }
up = { rate = "2mbit", delay_ms = 10, loss = 0.01 }
[[path]]
name = "lte"
role = "lte"
down = { rate = "8mbit", delay_ms = 40 }
up = { rate = "8mbit", delay_ms = 40 }
"#;

/// 2 + 8 Mbit/s, 10/40 ms one-way, 1 % loss: every byte arrives intact and two paths
/// carry clearly more than the faster one alone.
///
/// Two cases. Loss on WiFi only: the goodput is above what the 8 Mbit/s path alone can
/// carry. Loss on both: any loss-based controller is then capped near 1.5 Mbit/s on the
/// 80 ms LTE path (Mathis et al. 1997: MSS/RTT·1.22/√p), so the comparison is with each
/// path alone under the same loss, measured in the same run.
#[test]
fn perf_over_two_emulated_paths_aggregates_and_delivers_every_byte() {
    let _g = serial();
    let dir = TempDir::new("perf-two-paths");
    let file = dir.join("two.toml");
    std::fs::write(&file, TWO_PATHS).unwrap();
    let out = run_braid(&["perf", "client", "--scenario", file.to_str().unwrap(), "-J"]);
    let v = json_stdout(&out);
    assert_report_shape(&v, 2);
    let end = &v["end"];
    assert_eq!(end["verified"], Value::Bool(true));
    let goodput = mbps(&end["sum_received"]["bits_per_second"]);
    let wifi = mbps(&end["paths"][0]["bits_per_second"]);
    let lte = mbps(&end["paths"][1]["bits_per_second"]);
    // Measured 7.9–8.1 Mbit/s over 6 s (WiFi ≈ 0.9, LTE ≈ 7.1) on a loaded 2-core machine.
    // The LTE path alone carries at most ≈ 7.6 Mbit/s of payload (8 Mbit/s counts 28 bytes
    // of IP + UDP per 1200-byte datagram, which also holds ~30 bytes of braid header and
    // DATA frame).
    assert!(goodput > 7.65, "goodput {goodput:.2} Mbit/s (wifi {wifi:.2}, lte {lte:.2})");
    assert!(wifi > 0.4 && lte > 5.0, "wifi {wifi:.2}, lte {lte:.2} Mbit/s");
    // Bytes the client verified equal the sum over paths, less what is still buffered.
    let received = end["sum_received"]["bytes"].as_u64().unwrap();
    let per_path: u64 =
        end["paths"].as_array().unwrap().iter().map(|p| p["bytes"].as_u64().unwrap()).sum();
    assert!(received <= per_path, "{received} > {per_path}");

    // 1 % loss on both paths: the transfer stays intact, and aggregates over paths that
    // are each loss-bound.
    let lossy = TWO_PATHS
        .replace(
            r#"down = { rate = "8mbit", delay_ms = 40 }"#,
            r#"down = { rate = "8mbit", delay_ms = 40, loss = 0.01 }"#,
        )
        .replace(
            r#"up = { rate = "8mbit", delay_ms = 40 }"#,
            r#"up = { rate = "8mbit", delay_ms = 40, loss = 0.01 }"#,
        );
    assert_ne!(lossy, TWO_PATHS);
    std::fs::write(&file, &lossy).unwrap();
    let out =
        run_braid(&["perf", "client", "--scenario", file.to_str().unwrap(), "--time", "4", "-J"]);
    let v = json_stdout(&out);
    let end = &v["end"];
    assert_eq!(end["verified"], Value::Bool(true));
    let goodput = mbps(&end["sum_received"]["bits_per_second"]);
    assert!(end["paths"][1]["retransmits"].as_u64().unwrap() > 0, "{end}");
    // Each path alone under the same loss, single-path TCP-like (`tcp` uses the first
    // path): the faster path alone is loss-bound too, and two paths carry clearly more
    // than either. Measured: 2.6 Mbit/s on both against 1.83 (WiFi alone) and 1.61 (LTE
    // alone).
    let alone = |text: &str| {
        std::fs::write(&file, text).unwrap();
        let out = run_braid(&[
            "perf",
            "client",
            "--scenario",
            file.to_str().unwrap(),
            "--profile",
            "tcp",
            "--time",
            "4",
            "-J",
        ]);
        let v = json_stdout(&out);
        assert_eq!(v["end"]["verified"], Value::Bool(true));
        mbps(&v["end"]["sum_received"]["bits_per_second"])
    };
    let wifi_alone = alone(&lossy);
    let lte_only = {
        let at = lossy.find("[[path]]").unwrap();
        let lte = lossy.find("[[path]]\nname = \"lte\"").unwrap();
        format!("{}{}", &lossy[..at], &lossy[lte..])
    };
    let lte_alone = alone(&lte_only);
    assert!(
        goodput > 1.2 * wifi_alone.max(lte_alone),
        "1 % loss on both paths: {goodput:.2} Mbit/s over both, WiFi alone {wifi_alone:.2}, LTE alone {lte_alone:.2}"
    );
}

/// The WiFi path goes down at 2 s and comes back at 7 s: the transfer continues on LTE
/// and completes intact.
#[test]
fn perf_survives_the_wifi_path_going_down_for_five_seconds() {
    let _g = serial();
    let dir = TempDir::new("perf-wifi-down");
    let file = dir.join("down.toml");
    std::fs::write(
        &file,
        r#"
name = "wifi-down"
duration_s = 10
seed = 2
[[path]]
name = "wifi"
role = "wifi"
down = { rate = "8mbit", delay_ms = 10 }
up = { rate = "8mbit", delay_ms = 10 }
[[path]]
name = "lte"
role = "lte"
down = { rate = "4mbit", delay_ms = 40 }
up = { rate = "4mbit", delay_ms = 40 }
[[event]]
at_s = 2
path = "wifi"
action = "down"
[[event]]
at_s = 7
path = "wifi"
action = "up"
"#,
    )
    .unwrap();
    let t0 = Instant::now();
    let out = run_braid(&["perf", "client", "--scenario", file.to_str().unwrap(), "-J"]);
    let v = json_stdout(&out);
    assert!(t0.elapsed() < Duration::from_secs(14), "took {:?}", t0.elapsed());
    assert_report_shape(&v, 2);
    assert_eq!(v["end"]["verified"], Value::Bool(true));
    let iv = v["intervals"].as_array().unwrap();
    let at = |k: usize, f: &dyn Fn(&Value) -> f64| iv.get(k).map(f).unwrap_or(f64::NAN);
    let sum = |i: &Value| mbps(&i["sum"]["bits_per_second"]);
    let wifi = |i: &Value| mbps(&i["streams"][0]["bits_per_second"]);
    // While WiFi is down (3 s – 7 s) it carries nothing and LTE carries the stream.
    for k in 3..6 {
        assert!(at(k, &wifi) < 0.05, "interval {k}: wifi {} Mbit/s while down", at(k, &wifi));
        assert!(at(k, &sum) > 2.0, "interval {k}: only {} Mbit/s while WiFi is down", at(k, &sum));
    }
    // After it returns, WiFi carries data again.
    let back: f64 = (8..iv.len()).map(|k| at(k, &wifi)).sum();
    assert!(back > 1.0, "WiFi carried {back} Mbit/s·s after coming back: {iv:?}");
    let goodput = mbps(&v["end"]["sum_received"]["bits_per_second"]);
    assert!(goodput > 4.0, "goodput {goodput:.2} Mbit/s");
}

/// Nothing listens at the address: one error line within a few seconds.
#[test]
fn perf_client_to_an_unreachable_server_fails_fast_with_one_error_line() {
    let _g = serial();
    let port = free_port();
    let t0 = Instant::now();
    let pin = "00".repeat(32);
    let out = run_braid(&[
        "perf",
        "client",
        &format!("127.0.0.1:{port}"),
        "--time",
        "2",
        "--server-cert-sha256",
        &pin,
    ]);
    let line = assert_clean_error(&out);
    assert!(t0.elapsed() < Duration::from_secs(5), "took {:?}", t0.elapsed());
    assert!(line.contains(&format!("127.0.0.1:{port}")), "{line}");

    // A server that never answers (a bare UDP socket): the handshake times out.
    let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap().to_string();
    let t0 = Instant::now();
    let out =
        run_braid(&["perf", "client", &addr, "--time", "2", "-J", "--server-cert-sha256", &pin]);
    let line = assert_clean_error(&out);
    assert!(t0.elapsed() < Duration::from_secs(6), "took {:?}", t0.elapsed());
    assert!(line.contains("no answer"), "{line}");
    assert!(out.stdout.is_empty(), "stdout: {}", String::from_utf8_lossy(&out.stdout));

    // Bad arguments are one line too.
    let out = run_braid(&["perf", "client", &addr, "--path", "not-an-ip"]);
    assert_clean_error(&out);
    let out = run_braid(&["perf", "client", &addr, "--time", "-1"]);
    assert_clean_error(&out);
    let out = run_braid(&["perf", "client", &addr, "--profile", "nope"]);
    assert!(assert_clean_error(&out).contains("unknown profile"));
    for bad in ["xyz", &"0".repeat(63)] {
        let out = run_braid(&["perf", "client", &addr, "--server-cert-sha256", bad]);
        assert!(assert_clean_error(&out).contains("--server-cert-sha256"));
    }
    let out = run_braid(&["perf", "client", "--scenario", "/nonexistent/x.toml"]);
    assert_clean_error(&out);
}

/// The server process dies mid-transfer: the client says so and exits non-zero.
#[test]
fn perf_client_reports_a_server_killed_mid_transfer() {
    let _g = serial();
    let port = free_port();
    let (mut server, pin) = start_server(port, &[]);
    let t0 = Instant::now();
    let client = braid()
        .args([
            "perf",
            "client",
            &format!("127.0.0.1:{port}"),
            "--path",
            "127.0.0.1",
            "--path",
            "127.0.0.1",
        ])
        .args(["--time", "20", "--server-cert-sha256", &pin])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting the client");
    std::thread::sleep(Duration::from_millis(1500));
    server.0.kill().expect("killing the server by its PID");
    let _ = server.0.wait();
    let out = client.wait_with_output().expect("waiting for the client");
    let elapsed = t0.elapsed();
    let line = assert_clean_error(&out);
    assert!(elapsed < Duration::from_secs(8), "client took {elapsed:?} to notice");
    assert!(line.contains("lost after"), "{line}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("[SUM]"), "no interval lines before the failure: {stdout}");
}

/// `--threads 2` on both ends (a multi-thread runtime; the command runs on one of its
/// workers): the transfer is intact, the one-off server ends after its client with its
/// summary, and failures are still one error line.
#[test]
fn perf_with_two_runtime_threads_delivers_and_fails_cleanly() {
    let _g = serial();
    let port = free_port();
    let (mut server, pin) = start_server(port, &["--one-off", "--threads", "2"]);
    let addr = format!("127.0.0.1:{port}");
    let client = |extra: &[&str]| {
        let mut args = vec!["perf", "client", &addr, "--threads", "2", "--time", "2"];
        args.extend_from_slice(&["--server-cert-sha256", &pin]);
        args.extend_from_slice(extra);
        run_braid(&args)
    };
    let out = client(&["-J"]);
    let v = json_stdout(&out);
    assert_report_shape(&v, 1);
    assert_eq!(v["end"]["verified"], Value::Bool(true));
    assert!(v["end"]["sum_received"]["bytes"].as_u64().unwrap() > 1_000_000, "{}", v["end"]);
    let deadline = Instant::now() + Duration::from_secs(5);
    let status = loop {
        if let Ok(Some(s)) = server.0.try_wait() {
            break Some(s);
        }
        if Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.is_some_and(|s| s.success()), "one-off server: {status:?}");
    let mut text = String::new();
    if let Some(mut o) = server.0.stdout.take() {
        let _ = o.read_to_string(&mut text);
    }
    assert!(text.contains("Connection ") && text.contains("queued"), "server output: {text}");

    // The same failures as on one thread: the server is gone now.
    let out = client(&[]);
    assert!(assert_clean_error(&out).contains(&addr));
    let out = run_braid(&["perf", "client", &addr, "--threads", "2", "--profile", "nope"]);
    assert!(assert_clean_error(&out).contains("unknown profile"));
}

/// Random datagrams sprayed at the server's port during a transfer change nothing.
#[test]
fn perf_transfer_is_intact_while_garbage_is_sprayed_at_the_server() {
    let _g = serial();
    let port = free_port();
    let (mut server, pin) = start_server(port, &["--one-off"]);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sprayer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let s = UdpSocket::bind("127.0.0.1:0").unwrap();
            let mut x = 0x9E37_79B9_7F4A_7C15u64;
            let mut sent = 0u64;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let mut buf = [0u8; 1300];
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let len = (x % 1300) as usize;
                for b in buf.iter_mut().take(len) {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    *b = x as u8;
                }
                // Some look like braid headers (version byte 1).
                if sent.is_multiple_of(2) && len > 0 {
                    buf[0] = 1;
                }
                let _ = s.send_to(&buf[..len], ("127.0.0.1", port));
                sent += 1;
                if sent.is_multiple_of(20) {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            sent
        })
    };
    let out = run_braid(&[
        "perf",
        "client",
        &format!("127.0.0.1:{port}"),
        "--time",
        "3",
        "-J",
        "--server-cert-sha256",
        &pin,
    ]);
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let sent = sprayer.join().unwrap();
    let v = json_stdout(&out);
    assert_report_shape(&v, 1);
    assert_eq!(v["end"]["verified"], Value::Bool(true));
    assert!(v["end"]["sum_received"]["bytes"].as_u64().unwrap() > 1_000_000, "{}", v["end"]);
    assert!(sent > 1000, "only {sent} datagrams sprayed");
    // The one-off server exits after the client; it reports what it dropped.
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = server.0.try_wait() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = server.0.kill();
    let mut text = String::new();
    if let Some(mut o) = server.0.stdout.take() {
        let _ = o.read_to_string(&mut text);
    }
    assert!(text.contains("Dropped"), "server output: {text}");
}

/// Runs `ip ARGS…`; false when it fails.
fn ip(args: &[&str]) -> bool {
    std::process::Command::new("ip")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Two network namespaces joined by two veth pairs, removed on drop.
struct Namespaces {
    srv: String,
    cli: String,
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        ip(&["netns", "del", &self.srv]);
        ip(&["netns", "del", &self.cli]);
    }
}

/// A client path bound to an interface (`LOCAL@IFACE`) whose interface is deleted
/// mid-transfer: the connection continues on the other path and stays intact. Needs
/// root (network namespaces and veth pairs); skipped otherwise.
#[test]
fn perf_continues_when_a_path_interface_disappears() {
    let _g = serial();
    let id = std::process::id();
    let ns = Namespaces { srv: format!("braid-srv-{id}"), cli: format!("braid-cli-{id}") };
    let (s, c) = (ns.srv.as_str(), ns.cli.as_str());
    let setup: &[&[&str]] = &[
        &["netns", "add", s],
        &["netns", "add", c],
        &["link", "add", "vA", "netns", s, "type", "veth", "peer", "name", "vB", "netns", c],
        &["link", "add", "wA", "netns", s, "type", "veth", "peer", "name", "wB", "netns", c],
        &["-n", s, "addr", "add", "10.9.0.1/24", "dev", "vA"],
        &["-n", s, "addr", "add", "10.9.1.1/24", "dev", "wA"],
        &["-n", c, "addr", "add", "10.9.0.2/24", "dev", "vB"],
        &["-n", c, "addr", "add", "10.9.1.2/24", "dev", "wB"],
        &["-n", s, "link", "set", "lo", "up"],
        &["-n", c, "link", "set", "lo", "up"],
        &["-n", s, "link", "set", "vA", "up"],
        &["-n", s, "link", "set", "wA", "up"],
        &["-n", c, "link", "set", "vB", "up"],
        &["-n", c, "link", "set", "wB", "up"],
        // The second path reaches the server's address over its own link.
        &["-n", c, "route", "add", "10.9.0.0/24", "dev", "wB", "metric", "200"],
    ];
    for args in setup {
        if !ip(args) {
            skip(&format!(
                "cannot build the network namespaces (`ip {}` failed; needs root)",
                args.join(" ")
            ));
            return;
        }
    }
    // Replies on the second link arrive on an interface that is not the route back.
    for dev in ["all", "vB", "wB"] {
        let _ =
            ip(&["netns", "exec", c, "sysctl", "-qw", &format!("net.ipv4.conf.{dev}.rp_filter=0")]);
    }
    let bin = braid_tests::braid_path();
    let bin = bin.to_str().unwrap();
    let (server, pin) = braid_tests::spawn_serving(
        std::process::Command::new("ip")
            .args(["netns", "exec", s, bin, "perf", "server", "--listen", "10.9.0.1:5401"])
            .stdout(Stdio::null()),
    );
    let _server = Server(server);
    std::thread::sleep(Duration::from_millis(400));
    let client = std::process::Command::new("ip")
        .args(["netns", "exec", c, bin, "perf", "client", "10.9.0.1:5401"])
        .args(["--server-cert-sha256", &pin])
        .args(["--path", "10.9.0.2@vB", "--path", "10.9.1.2@wB", "--time", "4", "-J"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting the client");
    std::thread::sleep(Duration::from_millis(2000));
    assert!(ip(&["-n", c, "link", "del", "wB"]), "deleting the interface");
    let out = client.wait_with_output().unwrap();
    let v = json_stdout(&out);
    assert_report_shape(&v, 2);
    assert_eq!(v["end"]["verified"], Value::Bool(true));
    let iv = v["intervals"].as_array().unwrap();
    // The second path carried data before its interface went away, none after.
    let wb = |k: usize| iv[k]["streams"][1]["bytes"].as_u64().unwrap_or(0);
    assert!(wb(0) + wb(1) > 0, "wB never carried data: {iv:?}");
    assert_eq!(wb(iv.len() - 1), 0, "{iv:?}");
    let vb_last = iv[iv.len() - 1]["streams"][0]["bytes"].as_u64().unwrap_or(0);
    assert!(vb_last > 1_000_000, "the remaining path stalled: {iv:?}");
    // Whether the socket itself reports the loss (ENETUNREACH) depends on whether the
    // connection still tried the path after the interface went away, or had already
    // given up on it after RTOs: both are correct, so the error text is not required.
    let err = v["end"]["paths"][1]["error"].as_str().unwrap_or("");
    if err.is_empty() {
        eprintln!("note: path wB stopped without a socket error (declared failed by RTO)");
    }
}

/// `noq-multipath` (n0's noq, its own scheduler and controller) on the same emulated
/// links as Braid's profiles: every byte arrives verified, both paths carry data, and
/// together they carry more than the 8 Mbit/s path alone could.
#[test]
fn noq_multipath_runs_on_the_same_emulated_paths() {
    let _serial = serial();
    let dir = TempDir::new("noq");
    let scenario = dir.join("two.toml");
    std::fs::write(&scenario, TWO_PATHS.replace("loss = 0.01", "loss = 0.0")).expect("scenario");
    let s = scenario.to_str().unwrap_or_default();
    let args =
        ["perf", "client", "--scenario", s, "--profile", "noq-multipath", "--time", "5", "-J"];
    let v = json_stdout(&run_braid(&args));
    assert_report_shape(&v, 2);
    assert_eq!(v["start"]["profile"], "noq-multipath");
    assert_eq!(v["end"]["verified"], true);
    let rows = v["end"]["paths"].as_array().expect("paths");
    for r in rows {
        assert!(r["bytes"].as_u64().unwrap_or(0) > 200_000, "a path idle: {r}");
    }
    let goodput = mbps(&v["end"]["sum_received"]["bits_per_second"]);
    assert!(goodput > 8.2, "{goodput} Mbit/s on 2 + 8 Mbit/s");
}

/// The same against a separate `braid perf server --profile noq-multipath`, two paths
/// from two loopback addresses; and the commands that cannot carry it say so.
#[test]
fn noq_multipath_client_and_server_as_separate_processes() {
    let _serial = serial();
    let port = free_port();
    let (_server, pin) = start_server(port, &["--profile", "noq-multipath", "--one-off"]);
    let addr = format!("127.0.0.1:{port}");
    let args = [
        "perf",
        "client",
        &addr,
        "--profile",
        "noq-multipath",
        "--server-cert-sha256",
        &pin,
        "--path",
        "127.0.0.1",
        "--path",
        "127.0.0.2",
        "--time",
        "2",
        "-J",
    ];
    let v = json_stdout(&run_braid(&args));
    assert_report_shape(&v, 2);
    // Both paths carry data: far more than the path's validation and probes (a few kB).
    // Alone, each carries hundreds of MB; one loaded full-suite run saw 88 kB on the
    // second, whose share noq's scheduler decides on equal loopback paths.
    for r in v["end"]["paths"].as_array().expect("paths") {
        assert!(r["bytes"].as_u64().unwrap_or(0) > 20_000, "a path idle: {r}");
    }
    let demo = braid_tests::repo("assets/scenarios/demo.toml");
    let demo = demo.to_str().unwrap_or_default();
    for args in [
        vec!["sim", "--scenario", demo, "--profile", "noq-multipath"],
        vec!["perf", "server", "--profile", "noq-multipath+cubic"],
    ] {
        let out = run_braid(&args);
        assert!(!out.status.success(), "{args:?} ran");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("noq-multipath"), "{args:?}: {err}");
    }
}

/// `compare` takes `noq-multipath` in real time or across the bed only, with noq's own
/// controller: `--cc` with it, or the simulator, is refused with one line before any bed
/// is built (so this needs no root).
#[test]
fn compare_refuses_noq_with_cc_or_off_the_bed() {
    let bulk = braid_tests::repo("assets/scenarios/bed-wifi-lte.toml");
    let bulk = bulk.to_str().unwrap_or_default();
    let cc = ["compare", "--bed", "--scenario", bulk, "--profiles", "mptcp,noq-multipath"];
    for (args, says) in [
        ([&cc[..], &["--cc", "cubic"]].concat(), "--cc"),
        (vec!["compare", "--scenario", bulk, "--profiles", "mptcp,noq-multipath"], "--bed"),
    ] {
        let out = run_braid(&args);
        assert!(!out.status.success(), "{args:?} ran");
        let err = String::from_utf8_lossy(&out.stderr);
        let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
        assert_eq!(lines.len(), 1, "{args:?}: {err}");
        assert!(lines[0].contains("noq-multipath") && lines[0].contains(says), "{args:?}: {err}");
    }
}
