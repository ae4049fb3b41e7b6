//! Streaming end to end in real time on loopback: the in-process demo over relay-emulated
//! paths, and `braid serve` / `braid play` as separate processes. The cases run one after
//! another in one test: they are real time and the machine has two cores.

use std::process::Stdio;
use std::time::{Duration, Instant};

use braid_tests::{Guard, TempDir, assert_clean_error, braid, repo, run_braid};

/// Real-time tests in this file run one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn scenario(
    dir: &TempDir,
    name: &str,
    clip: &str,
    duration_s: u32,
    loss: f64,
    buffer_s: f64,
) -> String {
    let path = dir.join(&format!("{name}.toml"));
    let clip = repo(clip);
    std::fs::write(
        &path,
        format!(
            r#"name = "{name}"
duration_s = {duration_s}
[[path]]
name = "wifi"
role = "wifi"
down = {{ rate = "4mbit", delay_ms = 10, loss = {loss} }}
up = {{ rate = "3mbit", delay_ms = 10 }}
[[path]]
name = "lte"
role = "lte"
down = {{ rate = "4mbit", delay_ms = 40, loss = {loss} }}
up = {{ rate = "3mbit", delay_ms = 40 }}
[workload]
kind = "stream"
clip = "{}"
loop = false
buffer_s = {buffer_s}
"#,
            clip.display(),
        ),
    )
    .unwrap();
    path.to_str().unwrap().to_string()
}

fn demo(scenario: &str, profile: &str, report: &std::path::Path) -> serde_json::Value {
    demo_with(scenario, profile, report, &[])
}

fn demo_with(
    scenario: &str,
    profile: &str,
    report: &std::path::Path,
    extra: &[&str],
) -> serde_json::Value {
    let mut args = vec![
        "demo",
        "--headless",
        "--scenario",
        scenario,
        "--profile",
        profile,
        "--report",
        report.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let out = run_braid(&args);
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&std::fs::read_to_string(report).unwrap()).unwrap()
}

#[test]
fn streams_play_to_the_end_intact_and_loss_shows_with_deadlines() {
    let _serial = serial();
    let dir = TempDir::new("stream-e2e");

    // H.264, reliable, two paths: every frame, identical pictures.
    let s = scenario(&dir, "h264", "assets/clips/h264-cif-25fps-2m.mp4", 14, 0.0, 30.0);
    let r = demo(&s, "mptcp", &dir.join("h264.json"));
    let st = &r["stream"];
    assert_eq!(st["frames_total"], 250, "{r}");
    assert_eq!(st["frames_lost"], 0, "{r}");
    assert_eq!(st["psnr_avg_db"], 100.0, "{r}");
    assert!(
        r["paths"].as_array().unwrap().iter().all(|p| p["throughput_bps"].as_f64().unwrap() > 0.0),
        "both paths carry data: {r}"
    );

    // H.263 (30 s), reliable.
    let s = scenario(&dir, "h263", "assets/clips/h263-qcif-15fps-64k.3gp", 34, 0.0, 30.0);
    let r = demo(&s, "mptcp", &dir.join("h263.json"));
    assert_eq!(r["stream"]["frames_total"], 450, "{r}");
    assert_eq!(r["stream"]["frames_lost"], 0, "{r}");
    assert_eq!(r["stream"]["psnr_avg_db"], 100.0, "{r}");

    // Loss with deadlines (mptcp-rt) and a one-second buffer: late frames are abandoned
    // and the picture suffers (the same scenario in the simulator loses ~60 of 250).
    // The pictures the client displayed are saved, and `braid psnr` on them gives the
    // report's PSNR.
    let s = scenario(&dir, "lossy", "assets/clips/h264-cif-25fps-2m.mp4", 25, 0.05, 1.0);
    let shown = dir.join("lossy.y4m");
    let r = demo_with(
        &s,
        "mptcp-rt",
        &dir.join("lossy.json"),
        &["--save-frames", shown.to_str().unwrap()],
    );
    let st = &r["stream"];
    assert_eq!(st["frames_total"], 250, "played to the end: {r}");
    assert!(st["frames_lost"].as_u64().unwrap() > 0, "{r}");
    let psnr = st["psnr_avg_db"].as_f64().unwrap();
    assert!(psnr < 100.0, "{r}");
    let out = run_braid(&[
        "psnr",
        shown.to_str().unwrap(),
        repo("assets/clips/h264-cif-25fps-2m.mp4").to_str().unwrap(),
        "--json",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let p: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(p["frames"], 250, "{p}");
    let measured = p["psnr_avg_db"].as_f64().unwrap();
    assert!(
        (measured - psnr).abs() < 1e-6,
        "braid psnr on the displayed frames: {measured} dB, report: {psnr} dB"
    );

    // braid serve / braid play as separate processes.
    let port = 47_000 + (std::process::id() % 1000) as u16;
    let addr = format!("127.0.0.1:{port}");
    let (server, pin) = braid_tests::spawn_serving(
        braid()
            .args([
                "serve",
                repo("assets/clips/h263-qcif-15fps-64k.3gp").to_str().unwrap(),
                "--listen",
                &addr,
            ])
            .stdout(Stdio::null()),
    );
    let _server = Guard(server);
    assert_eq!(pin.len(), 64, "serve prints its certificate fingerprint");
    std::thread::sleep(Duration::from_millis(500));
    let report = dir.join("play.json");
    let out = run_braid(&[
        "play",
        &addr,
        "--server-cert-sha256",
        &pin,
        "--headless",
        "--duration",
        "5",
        "--reference",
        repo("assets/clips/h263-qcif-15fps-64k.3gp").to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let st = &r["stream"];
    assert!(st["frames_total"].as_u64().unwrap() >= 50, "{r}");
    assert_eq!(st["frames_lost"], 0, "{r}");
    assert_eq!(st["psnr_avg_db"], 100.0, "{r}");

    // --save-frames on its own (no --report) writes what was shown.
    let shown = dir.join("play.y4m");
    let out = run_braid(&[
        "play",
        &addr,
        "--server-cert-sha256",
        &pin,
        "--headless",
        "--duration",
        "3",
        "--save-frames",
        shown.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let y4m = std::fs::read(&shown).expect("the displayed frames were written");
    assert!(
        y4m.starts_with(b"YUV4MPEG2 W176 H144"),
        "{:?}",
        String::from_utf8_lossy(&y4m[..y4m.len().min(40)])
    );
    // 176×144 I420 is 38 016 bytes a picture: 3 s at 15 fps is dozens of them.
    assert!(y4m.len() > 20 * 38_016, "{} bytes", y4m.len());
}

/// `braid play --path LOCAL/ROLE`: paths named as radios get the radio model and, with
/// `mptcp-qe`, the mode switch over them, as the demo's emulated paths do; without a role
/// a path is wired and uses no radio energy. `--battery J` gives the residual battery; the
/// in-order delay of a remote server's stream is labelled as the receiver's estimate.
#[test]
fn play_paths_with_radio_roles_report_energy_and_the_mode_timeline() {
    let _serial = serial();
    let dir = TempDir::new("play-roles");
    let port = 48_000 + (std::process::id() % 1000) as u16;
    let addr = format!("127.0.0.1:{port}");
    let mut serve = braid();
    serve
        .args([
            "serve",
            repo("assets/clips/h263-qcif-15fps-64k.3gp").to_str().unwrap(),
            "--listen",
            &addr,
            "--profile",
            "mptcp-qe",
        ])
        .stdout(Stdio::null());
    let (server, pin) = braid_tests::spawn_serving(&mut serve);
    let _server = Guard(server);
    std::thread::sleep(Duration::from_millis(300));
    let play = |name: &str, paths: &[&str], extra: &[&str]| {
        let report = dir.join(&format!("{name}.json"));
        let mut args = vec!["play", &addr, "--headless", "--duration", "4", "--profile"];
        args.extend_from_slice(&["mptcp-qe", "--server-cert-sha256", &pin]);
        for p in paths {
            args.extend_from_slice(&["--path", p]);
        }
        args.extend_from_slice(&["--report", report.to_str().unwrap()]);
        args.extend_from_slice(extra);
        let out = run_braid(&args);
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
        let r: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
        (stdout, r)
    };
    let (stdout, r) = play("radios", &["127.0.0.1/wifi", "127.0.0.1/lte"], &["--battery", "50"]);
    assert!(stdout.contains("path mode"), "{stdout}");
    assert!(stdout.contains(" wifi ") && stdout.contains(" lte "), "{stdout}");
    assert!(r["energy"]["total_j"].as_f64().unwrap() > 0.0, "{r}");
    let paths = r["paths"].as_array().unwrap();
    assert_eq!(paths.len(), 2, "{r}");
    let roles: Vec<&str> = paths.iter().map(|p| p["role"].as_str().unwrap_or("")).collect();
    assert!(roles.contains(&"wifi") && roles.contains(&"lte"), "{r}");
    assert!(paths.iter().any(|p| p["energy_j"].as_f64().unwrap_or(0.0) > 0.0), "{r}");
    let total = r["energy"]["total_j"].as_f64().unwrap();
    let residual = r["energy"]["battery_residual_j"].as_f64().unwrap_or_else(|| panic!("{r}"));
    assert!((residual - (50.0 - total).max(0.0)).abs() < 1e-9, "{residual} vs 50 − {total}");
    assert_eq!(r["delay_ms"]["estimated"], true, "{r}");

    let (stdout, r) = play("wired", &["127.0.0.1", "127.0.0.1"], &[]);
    assert_eq!(r["delay_ms"]["estimated"], true, "{r}");
    assert!(stdout.contains(" wired "), "{stdout}");
    assert!(
        r["energy"].is_null() || r["energy"]["total_j"].as_f64() == Some(0.0),
        "wired paths have no radio: {r}"
    );
}

#[test]
fn play_without_a_server_fails_cleanly() {
    let pin = "ab".repeat(32);
    let line = assert_clean_error(&run_braid(&[
        "play",
        "127.0.0.1:9",
        "--server-cert-sha256",
        &pin,
        "--headless",
        "--duration",
        "3",
    ]));
    assert!(line.contains("127.0.0.1:9"), "{line}");
}

/// Each bad TLS argument is one error line that names it.
#[test]
fn bad_tls_arguments_give_one_error_line_naming_them() {
    let clip = repo("assets/clips/h263-qcif-15fps-64k.3gp");
    let clip = clip.to_str().unwrap();
    // No trust at all, a malformed pin.
    let line = assert_clean_error(&run_braid(&["play", "127.0.0.1:9", "--headless"]));
    assert!(line.contains("--server-cert-sha256"), "{line}");
    for bad in ["xyz", &"a".repeat(63), &"g".repeat(64)] {
        let line = assert_clean_error(&run_braid(&[
            "play",
            "127.0.0.1:9",
            "--headless",
            "--server-cert-sha256",
            bad,
        ]));
        assert!(line.contains("--server-cert-sha256"), "{line}");
    }
    // --cert without --key.
    let dir = TempDir::new("tls-args");
    let cert = dir.join("a.crt");
    std::fs::write(&cert, "not a certificate").unwrap();
    let line = assert_clean_error(&run_braid(&[
        "serve",
        clip,
        "--listen",
        "127.0.0.1:0",
        "--cert",
        cert.to_str().unwrap(),
    ]));
    assert!(line.contains("--cert") && line.contains("--key"), "{line}");
    // A key that belongs to another certificate (made with openssl when it is there).
    if braid_tests::have("openssl") {
        for name in ["a", "b"] {
            let ok = std::process::Command::new("openssl")
                .args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"])
                .args(["-nodes", "-subj", "/CN=braid", "-days", "1"])
                .args(["-keyout", dir.join(&format!("{name}.key")).to_str().unwrap()])
                .args(["-out", dir.join(&format!("{name}.crt")).to_str().unwrap()])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "openssl req failed");
        }
        let line = assert_clean_error(&run_braid(&[
            "serve",
            clip,
            "--listen",
            "127.0.0.1:0",
            "--cert",
            dir.join("a.crt").to_str().unwrap(),
            "--key",
            dir.join("b.key").to_str().unwrap(),
        ]));
        assert!(line.contains("--key") && line.contains("does not match"), "{line}");
    } else {
        braid_tests::skip("openssl is not installed: the mismatched-key case is not run");
    }
    // A well-formed pin of another certificate: the handshake is refused.
    let _serial = serial();
    let port = 47_500 + (std::process::id() % 400) as u16;
    let addr = format!("127.0.0.1:{port}");
    let (server, pin) = braid_tests::spawn_serving(
        braid().args(["serve", clip, "--listen", &addr]).stdout(Stdio::null()),
    );
    let _server = Guard(server);
    assert_eq!(pin.len(), 64);
    let wrong: String = pin.chars().rev().collect();
    let line = assert_clean_error(&run_braid(&[
        "play",
        &addr,
        "--headless",
        "--duration",
        "2",
        "--server-cert-sha256",
        &wrong,
    ]));
    assert!(line.contains("--server-cert-sha256"), "{line}");
}

/// The split proxy in the middle of an emulated path: server ← relay (backbone) ← proxy ←
/// client. The H.263 clip plays to its end, intact.
#[test]
fn the_h263_clip_plays_end_to_end_through_the_proxy_over_an_emulated_backbone() {
    let _serial = serial();
    let dir = TempDir::new("proxy-e2e");
    let base = 46_000 + (std::process::id() % 500) as u16 * 4;
    let (server, relay, proxy) =
        (format!("127.0.0.1:{base}"), base + 1, format!("127.0.0.1:{}", base + 2));
    let scenario = dir.join("backbone.toml");
    std::fs::write(
        &scenario,
        r#"name = "backbone"
duration_s = 60
[[path]]
name = "backbone"
role = "wired"
down = { rate = "256kbit", delay_ms = 40, loss = 0.01 }
up = { rate = "256kbit", delay_ms = 40 }
"#,
    )
    .unwrap();
    let clip = repo("assets/clips/h263-qcif-15fps-64k.3gp");
    let spawn = |args: &[&str]| {
        Guard(braid().args(args).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap())
    };
    let (s, server_pin) = braid_tests::spawn_serving(
        braid().args(["serve", clip.to_str().unwrap(), "--listen", &server]).stdout(Stdio::null()),
    );
    let _s = Guard(s);
    let _r = spawn(&[
        "netem",
        "--scenario",
        scenario.to_str().unwrap(),
        "--server",
        &server,
        "--base-port",
        &relay.to_string(),
        "--duration",
        "0",
    ]);
    let (p, proxy_pin) = braid_tests::spawn_serving(
        braid()
            .args(["proxy", "--listen", &proxy, "--upstream", &format!("127.0.0.1:{relay}")])
            .args(["--server-cert-sha256", &server_pin])
            .stdout(Stdio::null()),
    );
    let _p = Guard(p);
    std::thread::sleep(Duration::from_millis(800));
    let report = dir.join("play.json");
    let out = run_braid(&[
        "play",
        &proxy,
        "--server-cert-sha256",
        &proxy_pin,
        "--headless",
        "--duration",
        "40",
        "--reference",
        clip.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let st = &r["stream"];
    assert_eq!(st["frames_total"], 450, "played to the end: {r}");
    assert_eq!(st["frames_lost"], 0, "{r}");
    assert_eq!(st["psnr_avg_db"], 100.0, "{r}");
}

/// The embedded demo with its default profile (`mptcp-qe`): the client runs the mode switch
/// and the radio model on its own traffic, so the summary shows the mode timeline and the
/// report the energy of each radio, with `--battery J` the residual battery.
#[test]
fn the_default_demo_reports_radio_energy_and_the_mode_timeline() {
    let _serial = serial();
    let dir = TempDir::new("demo-energy");
    let report = dir.join("demo.json");
    let out = run_braid(&[
        "demo",
        "--headless",
        "--duration",
        "15",
        "--report",
        report.to_str().unwrap(),
        "--battery",
        "200",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("profile mptcp-qe"), "{stdout}");
    assert!(stdout.contains("path mode              Full at 0.0 s"), "{stdout}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert!(r["energy"]["total_j"].as_f64().unwrap() > 0.0, "{r}");
    let paths = r["paths"].as_array().unwrap();
    assert_eq!(paths.len(), 2, "{r}");
    assert!(
        paths.iter().all(|p| p["energy_j"].as_f64().unwrap() > 0.0),
        "both radios were used: {r}"
    );
    // The demo scenario gives no battery: `--battery` does.
    let total = r["energy"]["total_j"].as_f64().unwrap();
    let residual = r["energy"]["battery_residual_j"].as_f64().unwrap_or_else(|| panic!("{r}"));
    assert!((residual - (200.0 - total)).abs() < 1e-9, "{residual} vs 200 − {total}");
    // The server ran in this process: the in-order delay is measured, not estimated.
    assert!(r["delay_ms"].get("estimated").is_none(), "{r}");
    // An all-paths `mptcp` session ran beside it on its own copy of the network: the
    // saving is measured against it, the shadow is labelled a model.
    let base = r["energy"]["baseline_mptcp_j"].as_f64().unwrap_or_else(|| panic!("{r}"));
    assert!(base > 0.0, "{r}");
    assert!(stdout.contains("mptcp beside, measured"), "{stdout}");
    assert!(stdout.contains("a model"), "{stdout}");
    // Without it, no such key.
    let out = run_braid(&[
        "demo",
        "--headless",
        "--duration",
        "3",
        "--no-baseline",
        "--report",
        report.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert!(r["energy"].get("baseline_mptcp_j").is_none(), "{r}");
    assert!(r["energy"]["total_j"].as_f64().unwrap() > 0.0, "{r}");
}

/// `braid serve` / `braid play` with kernel profiles: access units framed on a kernel
/// TCP or MPTCP byte stream, played to the end; the report has the socket's path with
/// its throughput and the sender's RTT. Braid's own controllers are refused there.
#[test]
fn kernel_profiles_serve_and_play_over_kernel_sockets() {
    let _serial = serial();
    let dir = TempDir::new("play-kernel");
    let clip = repo("assets/clips/h263-qcif-15fps-64k.3gp");
    for profile in ["kernel-tcp", "kernel-mptcp"] {
        let mut serve = braid();
        serve
            .args([
                "serve",
                clip.to_str().unwrap(),
                "--listen",
                "127.0.0.1:0",
                "--profile",
                profile,
                "--cc",
                "reno",
            ])
            .stdout(Stdio::piped());
        let (mut server, pin) = braid_tests::spawn_serving(&mut serve);
        let mut out = std::io::BufReader::new(server.stdout.take().unwrap());
        let mut line = String::new();
        std::io::BufRead::read_line(&mut out, &mut line).unwrap();
        // Keep reading: the server prints a line per client.
        std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
        let _server = Guard(server);
        let addr =
            line.split_whitespace().find(|w| w.starts_with("127.0.0.1:")).unwrap().to_string();
        let report = dir.join(&format!("{profile}.json"));
        let out = run_braid(&[
            "play",
            &addr,
            "--headless",
            "--duration",
            "5",
            "--profile",
            profile,
            "--path",
            "127.0.0.1/wifi",
            "--server-cert-sha256",
            &pin,
            "--reference",
            clip.to_str().unwrap(),
            "--report",
            report.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{profile}: {}", String::from_utf8_lossy(&out.stderr));
        let r: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
        assert_eq!(r["profile"], profile, "{r}");
        assert!(r["stream"]["frames_total"].as_u64().unwrap() > 30, "{r}");
        assert_eq!(r["stream"]["frames_lost"].as_u64(), Some(0), "{r}");
        assert!(r["stream"]["psnr_avg_db"].as_f64().unwrap() > 30.0, "{r}");
        let paths = r["paths"].as_array().unwrap();
        assert_eq!(paths.len(), 1, "{r}");
        assert!(paths[0]["throughput_bps"].as_f64().unwrap() > 10_000.0, "{r}");
        assert!(paths[0]["rtt_ms"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["energy"]["total_j"].as_f64().unwrap() > 0.0, "{r}");
    }
    let out = run_braid(&["play", "127.0.0.1:9", "--profile", "kernel-mptcp", "--cc", "lia"]);
    let line = assert_clean_error(&out);
    assert!(line.contains("--cc lia"), "{line}");
}

/// One `braid serve` / `braid netem` / `braid play` session with `profile` at both ends over
/// the demo scenario, for `secs` seconds; the play report.
fn play_through_netem(dir: &TempDir, profile: &str, base: u16, secs: u32) -> serde_json::Value {
    let (server, relay) = (format!("127.0.0.1:{base}"), base + 1);
    let clip = repo("assets/clips/h264-cif-25fps-2m.mp4");
    let scenario = repo("assets/scenarios/demo.toml");
    let (s, pin) = braid_tests::spawn_serving(
        braid()
            .args(["serve", clip.to_str().unwrap(), "--listen", &server, "--profile", profile])
            .args(["--loop", "300"])
            .stdout(Stdio::null()),
    );
    let _s = Guard(s);
    let _r = Guard(
        braid()
            .args(["netem", "--scenario", scenario.to_str().unwrap(), "--server", &server])
            .args(["--base-port", &relay.to_string(), "--duration", "0"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_millis(500));
    let report = dir.join(&format!("{profile}.json"));
    let (wifi, lte) = (
        format!("127.0.0.1/wifi=127.0.0.1:{relay}"),
        format!("127.0.0.1/lte=127.0.0.1:{}", relay + 1),
    );
    let out = run_braid(&[
        "play",
        &server,
        "--server-cert-sha256",
        &pin,
        "--path",
        &wifi,
        "--path",
        &lte,
        "--profile",
        profile,
        "--headless",
        "--duration",
        &secs.to_string(),
        "--report",
        report.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{profile}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap()
}

/// The energy story in the player viewers run: `serve`, `netem` and `play` as separate
/// processes on the demo scenario (WiFi cut to 0.5 Mbit/s at 35 s for 8 s). `mptcp-qe`
/// spends clearly less radio energy than `mptcp`, without flapping and without more
/// stalls. Measured (release build, 60 s, aeSUM's shortfall on the player's buffer):
/// 75.9 J against 102.6 J (0.74×), 3 switches, no stall either; with the sample band
/// (debug) 0.75× and 3; before aeSUM's band, 0.995× with 183 switches.
#[test]
fn mptcp_qe_saves_energy_in_braid_play_through_braid_netem() {
    let _serial = serial();
    let dir = TempDir::new("play-netem-energy");
    let base = 47_000 + (std::process::id() % 400) as u16 * 4;
    let secs = 45;
    let all = play_through_netem(&dir, "mptcp", base, secs);
    let qe = play_through_netem(&dir, "mptcp-qe", base + 2, secs);
    let energy = |r: &serde_json::Value| r["energy"]["total_j"].as_f64().unwrap_or(0.0);
    let stalls = |r: &serde_json::Value| r["stream"]["stalls"].as_u64().unwrap_or(u64::MAX);
    let (e_all, e_qe) = (energy(&all), energy(&qe));
    println!("mptcp {e_all:.1} J, mptcp-qe {e_qe:.1} J ({:.2}x): {}", e_qe / e_all, qe["energy"]);
    assert!(e_all > 0.0, "{all}");
    assert!(e_qe < 0.85 * e_all, "mptcp-qe {e_qe:.1} J against mptcp {e_all:.1} J: {qe}");
    let switches = qe["energy"]["mode_switches"].as_u64().unwrap_or(u64::MAX);
    assert!(switches <= 10 * u64::from(secs) / 60, "{switches} switches in {secs} s: {qe}");
    assert!(stalls(&qe) <= stalls(&all), "stalls: mptcp-qe {qe}, mptcp {all}");
}

/// `noq-multipath` at both ends of `braid serve`, `braid netem` and `braid play`: n0's noq
/// carries the stream over both emulated paths of the demo scenario and every frame arrives
/// (one reliable QUIC stream); each path drives its radio. Its controller and traces are
/// noq's own, so `--cc` and `--qlog` are one error line.
#[test]
fn noq_multipath_serves_and_plays_through_braid_netem() {
    let _serial = serial();
    let dir = TempDir::new("play-noq");
    let base = 45_000 + (std::process::id() % 400) as u16 * 4;
    let r = play_through_netem(&dir, "noq-multipath", base, 6);
    assert_eq!(r["profile"], "noq-multipath", "{r}");
    assert!(r["stream"]["frames_total"].as_u64().unwrap_or(0) > 100, "{r}");
    assert_eq!(r["stream"]["frames_lost"].as_u64(), Some(0), "{r}");
    let paths = r["paths"].as_array().unwrap();
    assert_eq!(paths.len(), 2, "{r}");
    for p in paths {
        assert!(p["throughput_bps"].as_f64().unwrap_or(0.0) > 10_000.0, "{p}");
        assert!(p["rtt_ms"].as_f64().unwrap_or(0.0) > 0.0, "{p}");
        assert!(p["energy_j"].as_f64().unwrap_or(0.0) > 0.0, "{p}");
    }
    for args in [
        vec!["play", "127.0.0.1:9", "--profile", "noq-multipath", "--cc", "cubic"],
        vec!["play", "127.0.0.1:9", "--profile", "noq-multipath", "--qlog", "q"],
        vec!["serve", "x.mp4", "--listen", "127.0.0.1:0", "--profile", "noq-multipath", "--retry"],
    ] {
        let line = assert_clean_error(&run_braid(&args));
        assert!(line.contains("noq-multipath"), "{args:?}: {line}");
    }
}

/// `braid compare --realtime` puts `noq-multipath` beside Braid's `mptcp` on the same
/// relay-emulated paths and seed: one row each, noq's stream whole over both paths, each
/// path's radio active about as long as Braid's (noq's UDP bytes are read for the radios
/// every 10 ms, under WiFi's 20-ms active gap: read every 100 ms, WiFi showed 4 s active
/// where Braid's showed 20). `--cc` with noq in the list is one error line.
#[test]
fn noq_multipath_compares_in_real_time_beside_braid() {
    let _serial = serial();
    let dir = TempDir::new("compare-noq");
    let secs = 8;
    let s = scenario(&dir, "compare-noq", "assets/clips/h264-cif-25fps-2m.mp4", secs, 0.0, 30.0);
    let out_dir = dir.join("out");
    let compare = |extra: &[&str]| {
        let mut args =
            vec!["compare", "--realtime", "--scenario", &s, "--profiles", "mptcp,noq-multipath"];
        args.extend_from_slice(extra);
        run_braid(&args)
    };
    let out = compare(&["--out", out_dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("noq-multipath") && table.contains("mptcp"), "{table}");
    let c: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("compare.json")).unwrap())
            .unwrap();
    let rows = c["profiles"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{c}");
    assert_eq!(rows[1]["profile"], "noq-multipath", "{c}");
    let r = &rows[1]["runs"][0];
    assert!(r["stream"]["frames_total"].as_u64().unwrap_or(0) > 100, "{r}");
    assert_eq!(r["stream"]["frames_lost"].as_u64(), Some(0), "{r}");
    let paths = r["paths"].as_array().unwrap();
    assert_eq!(paths.len(), 2, "{r}");
    // Each radio active about as long as Braid's on the same path: both download the clip
    // ahead in the first seconds, then go quiet.
    let braid = rows[0]["runs"][0]["paths"].as_array().unwrap();
    for (p, b) in paths.iter().zip(braid) {
        assert!(p["throughput_bps"].as_f64().unwrap_or(0.0) > 10_000.0, "{p}");
        assert!(p["energy_j"].as_f64().unwrap_or(0.0) > 0.0, "{p}");
        let active = p["time_active_s"].as_f64().unwrap_or(0.0);
        let braid_active = b["time_active_s"].as_f64().unwrap_or(0.0);
        assert!(braid_active > 1.0, "{b}");
        assert!(active > 0.6 * braid_active, "noq {p}, braid {b}");
    }
    let line = assert_clean_error(&compare(&["--cc", "cubic"]));
    assert!(line.contains("noq-multipath") && line.contains("--cc"), "{line}");
}

/// `play --idle-timeout S` is announced to the server and ends the session S seconds after
/// the server is gone (the default would wait 30 s); out of range or with a kernel profile
/// it is one error line.
#[test]
fn play_ends_at_the_idle_timeout_it_announced_once_the_server_is_gone() {
    let _serial = serial();
    let pin = "ab".repeat(32);
    for (s, why) in [("-1", "between 0"), ("3601", "between 0"), ("x", "not a number")] {
        let flag = format!("--idle-timeout={s}");
        let line = assert_clean_error(&run_braid(&[
            "play",
            "127.0.0.1:9",
            "--server-cert-sha256",
            &pin,
            &flag,
        ]));
        assert!(line.contains("--idle-timeout") && line.contains(why), "{s}: {line}");
    }
    let line = assert_clean_error(&run_braid(&[
        "play",
        "127.0.0.1:9",
        "--server-cert-sha256",
        &pin,
        "--profile",
        "kernel-tcp",
        "--idle-timeout",
        "5",
    ]));
    assert!(line.contains("--idle-timeout"), "{line}");

    let port = 47_000 + (std::process::id() % 1000) as u16;
    let addr = format!("127.0.0.1:{port}");
    let mut serve = braid();
    serve
        .args(["serve", repo("assets/clips/h263-qcif-15fps-64k.3gp").to_str().unwrap()])
        .args(["--listen", &addr, "--profile", "mptcp"])
        .stdout(Stdio::null());
    let (server, pin) = braid_tests::spawn_serving(&mut serve);
    let server = Guard(server);
    std::thread::sleep(Duration::from_millis(300));
    let play = braid()
        .args(["play", &addr, "--headless", "--duration", "40", "--idle-timeout", "2"])
        .args(["--server-cert-sha256", &pin])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let play = Guard(play);
    std::thread::sleep(Duration::from_secs(2));
    // Stopped, not killed: its socket stays open, so no ICMP "port unreachable" tells the
    // client (that ends a session sooner, on its own rule); only silence does.
    let stopped = std::process::Command::new("kill")
        .args(["-STOP", &server.0.id().to_string()])
        .status()
        .unwrap();
    assert!(stopped.success());
    let gone = Instant::now();
    let mut play = play;
    let status = loop {
        if let Some(st) = play.0.try_wait().unwrap() {
            break st;
        }
        assert!(
            gone.elapsed() < Duration::from_secs(15),
            "play still running 15 s after the server went"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let waited = gone.elapsed();
    let mut stderr = String::new();
    if let Some(mut e) = play.0.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut stderr);
    }
    assert!(!status.success(), "{stderr}");
    assert!(stderr.contains("nothing received on any path for 2 s"), "{stderr}");
    assert!(
        waited >= Duration::from_millis(1500) && waited < Duration::from_secs(8),
        "{waited:?}: {stderr}"
    );
}

/// `--max-buffer S`: out of range, on a workload it cannot apply to, or with a kernel
/// profile, one error line naming it.
#[test]
fn a_download_ahead_that_cannot_apply_is_one_error_line() {
    let pin = "ab".repeat(32);
    for s in ["0", "601", "nan", "x"] {
        let line = assert_clean_error(&run_braid(&[
            "play",
            "127.0.0.1:9",
            "--server-cert-sha256",
            &pin,
            "--max-buffer",
            s,
        ]));
        assert!(line.contains("--max-buffer") && line.contains("download-ahead"), "{s}: {line}");
    }
    let line = assert_clean_error(&run_braid(&[
        "play",
        "127.0.0.1:9",
        "--server-cert-sha256",
        &pin,
        "--profile",
        "kernel-tcp",
        "--max-buffer",
        "5",
    ]));
    assert!(line.contains("--max-buffer"), "{line}");
    // A bulk workload has no media to download ahead.
    let dir = TempDir::new("max-buffer-bulk");
    let bulk = dir.join("bulk.toml");
    std::fs::write(
        &bulk,
        "name = \"b\"\nduration_s = 2\n[[path]]\nname = \"p\"\ndown = { rate = \"1mbit\", delay_ms = 10 }\nup = { rate = \"1mbit\", delay_ms = 10 }\n[workload]\nkind = \"bulk\"\n",
    )
    .unwrap();
    let line = assert_clean_error(&run_braid(&[
        "compare",
        "--scenario",
        bulk.to_str().unwrap(),
        "--profiles",
        "mptcp",
        "--max-buffer",
        "5",
    ]));
    assert!(line.contains("--max-buffer") && line.contains("clip stream"), "{line}");
}

/// MARC with the real read rate in real time: `serve`, `netem` (the MARC slides' 44 KB/s
/// scenario's 1.5 Mbit/s bottleneck; its cross traffic is the simulator's only, as netem
/// warns) and `play`, all `--profile marc`, the 65 kbit/s H.263 clip. The server's qlog
/// `braid:rate_control` events show W_send following what the player reads (the clip's
/// rate, about 8 KB/s) while the path delivers far more (TFRC's X_recv), and the warning
/// about cross traffic is on netem's stderr. Measured (debug build, 20 s): W_send about
/// 8–9.5 KB/s from 4 s on, X_recv 110–150 KB/s, read rate 164 kbit/s (the first seconds
/// fill the buffer). Once the buffer is full the flow-control window also holds the
/// sending to the reads, so this shows the outcome end to end, not which of the two
/// (READ_RATE or the window) bounds W_send.
#[test]
fn marc_sends_at_the_rate_the_player_reads_in_real_time() {
    let _serial = serial();
    let dir = TempDir::new("marc-realtime");
    let base = 46_000 + (std::process::id() % 400) as u16 * 2;
    let (server, relay) = (format!("127.0.0.1:{base}"), base + 1);
    let clip = repo("assets/clips/h263-qcif-15fps-64k.3gp");
    let scenario = repo("assets/scenarios/marc-44kBps-tcp-onoff.toml");
    let qlog = dir.join("qlog");
    let (s, pin) = braid_tests::spawn_serving(
        braid()
            .args(["serve", clip.to_str().unwrap(), "--listen", &server, "--profile", "marc"])
            .args(["--loop", "300", "--qlog", qlog.to_str().unwrap()])
            .stdout(Stdio::null()),
    );
    let _s = Guard(s);
    let netem_err = dir.join("netem.err");
    let _r = Guard(
        braid()
            .args(["netem", "--scenario", scenario.to_str().unwrap(), "--server", &server])
            .args(["--base-port", &relay.to_string(), "--duration", "0"])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&netem_err).unwrap())
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_millis(500));
    let report = dir.join("marc.json");
    let path = format!("127.0.0.1/wired=127.0.0.1:{relay}");
    let out = run_braid(&[
        "play",
        &server,
        "--server-cert-sha256",
        &pin,
        "--path",
        &path,
        "--profile",
        "marc",
        "--headless",
        "--duration",
        "20",
        "--report",
        report.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let warned = std::fs::read_to_string(&netem_err).unwrap_or_default();
    assert!(warned.contains("warning:") && warned.contains("cross traffic"), "{warned}");

    let mut events = Vec::new();
    for entry in std::fs::read_dir(&qlog).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        for line in text.lines() {
            let line = line.trim_start_matches('\u{1e}');
            let Ok(e) = serde_json::from_str::<serde_json::Value>(line) else { continue };
            if e["name"] == "braid:rate_control" {
                let t = e["time"].as_f64().unwrap_or(0.0) / 1000.0;
                let d = &e["data"];
                if let (Some(w), Some(x)) = (d["w_send"].as_f64(), d["x_recv"].as_f64()) {
                    events.push((t, w, x));
                }
            }
        }
    }
    let late: Vec<(f64, f64, f64)> = events.iter().copied().filter(|e| e.0 >= 6.0).collect();
    assert!(late.len() >= 5, "{} rate_control events after 6 s: {events:?}", late.len());
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let w = median(late.iter().map(|e| e.1).collect());
    let x = median(late.iter().map(|e| e.2).collect());
    // The clip is read at its 65.4 kbit/s (8.2 KB/s) once the buffer is full.
    assert!((4_000.0..16_000.0).contains(&w), "W_send median {w} B/s: {late:?}");
    assert!(w < 0.25 * x, "W_send {w} B/s against X_recv {x} B/s: {late:?}");
}

/// `braid serve --retry` answers every ClientHello with a Retry first (RFC 9000 §8.1.2);
/// `braid play` goes through it and plays. With a kernel profile the flag is one error line.
#[test]
fn play_goes_through_a_server_that_always_asks_for_a_retry() {
    let _serial = serial();
    let line = assert_clean_error(&run_braid(&[
        "serve",
        repo("assets/clips/h263-qcif-15fps-64k.3gp").to_str().unwrap(),
        "--listen",
        "127.0.0.1:9",
        "--profile",
        "kernel-tcp",
        "--retry",
    ]));
    assert!(line.contains("--retry"), "{line}");
    let port = 45_000 + (std::process::id() % 1000) as u16;
    let addr = format!("127.0.0.1:{port}");
    let (server, pin) = braid_tests::spawn_serving(
        braid()
            .args(["serve", repo("assets/clips/h263-qcif-15fps-64k.3gp").to_str().unwrap()])
            .args(["--listen", &addr, "--retry"])
            .stdout(Stdio::null()),
    );
    let _server = Guard(server);
    std::thread::sleep(Duration::from_millis(300));
    let dir = TempDir::new("retry-play");
    let report = dir.join("r.json");
    let out = run_braid(&[
        "play",
        &addr,
        "--server-cert-sha256",
        &pin,
        "--headless",
        "--duration",
        "3",
        "--report",
        report.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert!(r["stream"]["frames_total"].as_u64().unwrap_or(0) >= 20, "{r}");
}

/// `braid serve` killed mid-stream and started again on the same port with the same key
/// files: the new process has no state for the session, answers the player's next packets
/// with a stateless reset (its tokens derive from the TLS key), and `play` ends at once
/// saying so, rather than at its 30-s idle timeout.
#[test]
fn a_restarted_server_resets_the_session_and_play_ends_at_once() {
    let _serial = serial();
    let dir = TempDir::new("reset");
    let id = rcgen::generate_simple_self_signed(vec!["braid".into(), "127.0.0.1".into()])
        .expect("a self-signed certificate");
    let (cert, key) = (dir.join("s.crt"), dir.join("s.key"));
    std::fs::write(&cert, id.cert.pem()).unwrap();
    std::fs::write(&key, id.signing_key.serialize_pem()).unwrap();
    let port = 46_000 + (std::process::id() % 1000) as u16;
    let addr = format!("127.0.0.1:{port}");
    let serve = || {
        let mut c = braid();
        c.args(["serve", repo("assets/clips/h263-qcif-15fps-64k.3gp").to_str().unwrap()])
            .args(["--listen", &addr, "--profile", "mptcp"])
            .args(["--cert", cert.to_str().unwrap(), "--key", key.to_str().unwrap()])
            .stdout(Stdio::null());
        braid_tests::spawn_serving(&mut c)
    };
    let (first, pin) = serve();
    let mut first = Guard(first);
    std::thread::sleep(Duration::from_millis(300));
    let play = braid()
        .args(["play", &addr, "--headless", "--duration", "40"])
        .args(["--server-cert-sha256", &pin])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut play = Guard(play);
    std::thread::sleep(Duration::from_secs(2));
    assert!(play.0.try_wait().unwrap().is_none(), "play ended early");
    first.0.kill().unwrap();
    let _ = first.0.wait();
    let gone = Instant::now();
    let (second, pin2) = serve();
    let _second = Guard(second);
    assert_eq!(pin2, pin, "the same certificate");
    let status = loop {
        if let Some(st) = play.0.try_wait().unwrap() {
            break st;
        }
        assert!(gone.elapsed() < Duration::from_secs(15), "play still running 15 s later");
        std::thread::sleep(Duration::from_millis(50));
    };
    let waited = gone.elapsed();
    let mut stderr = String::new();
    if let Some(mut e) = play.0.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut stderr);
    }
    eprintln!("play ended {:.2} s after the server was killed", waited.as_secs_f64());
    assert!(!status.success(), "{stderr}");
    assert!(stderr.contains("reset the connection"), "{stderr}");
    assert!(waited < Duration::from_secs(5), "{waited:?}: {stderr}");
}
