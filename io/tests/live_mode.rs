//! The energy-aware profile on real sockets: `mptcp-qe` through the UDP relay emulator,
//! with the client's aeSUM mode switch fed by its real read rate and its radios by the
//! datagrams its sockets really carried.
//!
//! Real time: its own test binary, so that it does not share the CPU with the library's
//! simulator tests.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use braid_io::driver::{self, ConnectOptions, EnergySnapshot, PathSpec};
use braid_io::relay::{self, RelayCommand};
use braid_netem::scenario::Scenario;
use braid_transport::policy::{AeSumConfig, PathMode};
use braid_transport::profile;
use braid_transport::proto::{Config, Delivery, Reliability};

const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// WiFi 4 Mbit/s, LTE 20 Mbit/s; the client reads 1.5 Mbit/s.
const SCENARIO: &str = r#"
name = "qe-live"
duration_s = 30
seed = 3
[[path]]
name = "wifi"
role = "wifi"
down = { rate = "4mbit", delay_ms = 10 }
up = { rate = "4mbit", delay_ms = 10 }
[[path]]
name = "lte"
role = "lte"
down = { rate = "20mbit", delay_ms = 30 }
up = { rate = "20mbit", delay_ms = 30 }
"#;

const READ_BPS: f64 = 1.5e6;

fn config(p: &profile::Profile, recv: Option<u64>) -> Arc<Config> {
    let mut c = Config::new(Arc::clone(&p.controller), Arc::clone(&p.scheduler));
    if let Some(acks) = p.path_policy.ack_path() {
        c.ack_path = acks;
    }
    if let Some(r) = recv {
        c.recv_buffer_bytes = r;
    }
    Arc::new(c)
}

/// The mode changes after the start, as (seconds, mode).
fn changes(e: &EnergySnapshot) -> Vec<(f64, PathMode)> {
    e.timeline.iter().skip(1).map(|(t, m)| (t.as_secs_f64(), *m)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mode_timeline_follows_the_wifi_rate_live_through_the_relay() {
    // The shipped `mptcp-qe` as it is: the window-full offload, aeSUM's band with its
    // agreeing samples.
    let p = profile::lookup("mptcp-qe").expect("mptcp-qe is registered");
    let scenario = Scenario::parse(SCENARIO, "qe-live.toml", std::path::Path::new("."))
        .expect("valid scenario");
    let identity = braid_io::tls::self_signed().expect("a self-signed certificate");
    let ep =
        driver::listen(SocketAddr::new(LOOPBACK, 0), config(&p, None), identity.crypto.clone())
            .await
            .expect("server");
    let relay = relay::start(&scenario, ep.local_addr(), LOOPBACK, None, scenario.seed)
        .await
        .expect("relay");
    // The server sends as fast as flow control lets it: the client's reading paces it.
    let server = tokio::spawn(async move {
        let Some(conn) = ep.accept().await else { return };
        let chunk = Bytes::from(vec![0x5a; 1000]);
        while conn.send_message(chunk.clone(), Reliability::Reliable).await.is_ok() {}
    });
    let paths = relay
        .paths()
        .iter()
        .zip(&scenario.paths)
        .map(|(rp, sp)| PathSpec::to(rp.listen, sp.role))
        .collect();
    let options = ConnectOptions::with_path_policy(p.path_policy);
    assert_eq!(options.aesum, AeSumConfig::band(), "the shipped rule");
    let conn = Arc::new(
        driver::connect_with(config(&p, Some(64 * 1024)), identity.pinned_client(), paths, options)
            .await
            .expect("connect"),
    );
    let reader = {
        let conn = Arc::clone(&conn);
        tokio::spawn(async move {
            // A steady reader: one message per its share of the read rate, never
            // catching up on time lost while nothing arrived.
            let mut next = tokio::time::Instant::now();
            loop {
                // It reads at its own rate: finding nothing is starvation.
                let d = match conn.try_read_message() {
                    Some(d) => d,
                    None => {
                        conn.reader_starved();
                        let Ok(d) = conn.read_message().await else { break };
                        d
                    }
                };
                if let Delivery::Message { data, .. } = d {
                    next = next.max(tokio::time::Instant::now())
                        + Duration::from_secs_f64(data.len() as f64 * 8.0 / READ_BPS);
                }
                tokio::time::sleep_until(next).await;
            }
        })
    };
    let t0 = tokio::time::Instant::now();
    let mut samples: Vec<EnergySnapshot> = Vec::new();
    // Full at the start, Partial once WiFi's 4 Mbit/s is seen to cover the reader. WiFi falls to 0.6 Mbit/s at 16 s, below the 1.5 Mbit/s read, for
    // 8 s; then it is back.
    let script = [
        (15.5, Some(RelayCommand::SetRate(0, 600_000))),
        (19.5, None),
        (23.5, Some(RelayCommand::SetRate(0, 4_000_000))),
        (27.0, None),
    ];
    let mut read = Vec::new();
    for (at, cmd) in script {
        tokio::time::sleep_until(t0 + Duration::from_secs_f64(at)).await;
        samples.push(conn.energy().await.expect("a client has an energy meter"));
        read.push(conn.stats().await.map_or(0, |s| s.bytes_delivered));
        if let Some(c) = cmd {
            relay.command(c);
        }
    }
    let stats = conn.stats().await.expect("stats");
    reader.abort();
    server.abort();
    let e = samples.last().cloned().unwrap_or_default();
    let ch = changes(&e);
    for (s, r) in samples.iter().zip(&read) {
        println!(
            "mode {:?}, forecast {:?} bit/s, {:?}, read {r} B",
            s.mode, s.forecast_bps, s.last_switch
        );
    }
    assert_eq!(
        samples[0].mode,
        Some(PathMode::Partial),
        "before the cut: {:?}",
        changes(&samples[0])
    );
    assert_eq!(samples[1].mode, Some(PathMode::Full), "during the cut: {:?}", changes(&samples[1]));
    assert_eq!(
        samples[2].mode,
        Some(PathMode::Full),
        "late in the cut: {:?}",
        changes(&samples[2])
    );
    assert_eq!(e.mode, Some(PathMode::Partial), "after the restore: {ch:?}");
    // Full within 3.5 s of the cut (five agreeing samples once the forecast fell).
    let full = ch.iter().find(|(t, m)| *m == PathMode::Full && *t > 15.5).map(|c| c.0);
    let Some(full) = full else { panic!("no switch to Full after the cut: {ch:?}") };
    assert!(full < 19.0, "Full {:.1} s after the cut: {ch:?}", full - 15.5);
    // The switch compared the forecast with what the reader reads while it has data
    // (1.5 Mbit/s), not with what WiFi still brought: a starved reader is not reading.
    let why = samples[1].last_switch.expect("a switch to Full, with its reason");
    assert_eq!(why.mode, PathMode::Full);
    assert!(why.read_rate_bps > 0.9e6, "read rate at the switch: {why:?}");
    assert!(why.forecast_bps < 0.9 * why.read_rate_bps, "{why:?}");
    // Partial again within 2 s of WiFi's return (five agreeing samples once the forecast
    // has climbed back).
    let back = ch.iter().find(|(t, m)| *m == PathMode::Partial && *t > 23.5).map(|c| c.0);
    assert!(back.is_some_and(|t| t < 25.5), "Partial within 2 s of the restore: {ch:?}");
    // No flapping: Partial, Full, Partial after the start (at most one more each way).
    assert!(ch.len() <= 4, "{ch:?}");
    // Both radios were driven by real traffic; LTE was woken for the cut.
    let radios: Vec<_> = e.radios.iter().flatten().collect();
    assert_eq!(radios.len(), 2, "{e:?}");
    assert!(radios.iter().all(|r| r.energy_j > 0.0), "{e:?}");
    // What the reader got through the cut. Not asserted: under the window-full offload
    // with this 64 KiB receive window flow control, not WiFi's congestion window, limits
    // the sender, so WiFi's window is never full and LTE, though on, carries little
    // (measured 0.61 Mbit/s read; docs/ALGORITHMS.md, "Energy policy").
    let cut_bps = read[2].saturating_sub(read[0]) as f64 * 8.0 / 8.0;
    println!("read {cut_bps:.0} bit/s during the cut");
    assert!(stats.bytes_delivered > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_waiting_for_data_is_not_counted_as_reading() {
    // The server supplies 0.5 Mbit/s; the reader would read 1.5 Mbit/s. The time it
    // waits with nothing to read is left out: the read rate the connection measures is
    // the reader's own rate, not the supply (which it was before the driver told the
    // connection that its reader waited).
    let p = profile::lookup("mptcp").expect("mptcp is registered");
    let identity = braid_io::tls::self_signed().expect("a self-signed certificate");
    let ep =
        driver::listen(SocketAddr::new(LOOPBACK, 0), config(&p, None), identity.crypto.clone())
            .await
            .expect("server");
    let at = ep.local_addr();
    let server = tokio::spawn(async move {
        let Some(conn) = ep.accept().await else { return };
        let chunk = Bytes::from(vec![0x5a; 1000]);
        let mut tick = tokio::time::interval(Duration::from_millis(16));
        loop {
            tick.tick().await;
            if conn.send_message(chunk.clone(), Reliability::Reliable).await.is_err() {
                return;
            }
        }
    });
    let conn = Arc::new(
        driver::connect_with(
            config(&p, None),
            identity.pinned_client(),
            vec![PathSpec::to(at, braid_transport::path::PathRole::Wifi)],
            ConnectOptions::default(),
        )
        .await
        .expect("connect"),
    );
    let reader = {
        let conn = Arc::clone(&conn);
        tokio::spawn(async move {
            loop {
                let d = match conn.try_read_message() {
                    Some(d) => d,
                    None => {
                        conn.reader_starved();
                        let Ok(d) = conn.read_message().await else { break };
                        d
                    }
                };
                if let Delivery::Message { data, .. } = d {
                    let busy = Duration::from_secs_f64(data.len() as f64 * 8.0 / READ_BPS);
                    tokio::time::sleep(busy).await;
                }
            }
        })
    };
    tokio::time::sleep(Duration::from_secs(4)).await;
    let st = conn.stats().await.expect("stats");
    reader.abort();
    server.abort();
    let supplied = st.bytes_delivered as f64 * 8.0 / 4.0;
    println!("read rate {:.0} bit/s, supplied {supplied:.0} bit/s", st.read_rate_bps);
    assert!(supplied < 0.6e6, "supplied {supplied:.0} bit/s");
    // Measured 0.99–1.18 Mbit/s (the reader's sleeps round up to the runtime's 1 ms
    // tick); 0.46 Mbit/s without the signal.
    assert!(st.read_rate_bps > 0.8e6, "read rate {:.0} bit/s", st.read_rate_bps);
}
