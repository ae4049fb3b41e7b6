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
    // The band rule over the allowance offload (`emtcp-allowance`'s scheduler): the
    // real-time driver's read-rate meter has no starvation signal, so under the paper's
    // window-full offload the read rate falls to what WiFi supplies during the cut and
    // the band sees WiFi as sufficient (see docs/ALGORITHMS.md, "Energy policy").
    let mut p = profile::lookup("mptcp-qe-band").expect("mptcp-qe-band is registered");
    p.scheduler = profile::lookup("emtcp-allowance").expect("emtcp-allowance").scheduler;
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
    // aeSUM with the band rule (`mptcp-qe-band`), but keeping LTE on for 5 s rather than
    // its 11.6 s tail after each wake-up, so that the test sees every switch within 22 s
    // (the band keeps one Full period through the whole cut).
    let options = ConnectOptions {
        path_policy: p.path_policy,
        aesum: AeSumConfig { min_full: Duration::from_secs(5), ..AeSumConfig::band() },
        ..ConnectOptions::default()
    };
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
            while let Ok(d) = conn.read_message().await {
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
    // WiFi falls to 0.6 Mbit/s at 8 s, below the 1.5 Mbit/s read, for 8 s: longer than
    // the minimum Full time, so staying Full shows LTE covering the shortfall, not the
    // timer.
    let script = [
        (8.0, Some(RelayCommand::SetRate(0, 600_000))),
        (11.5, None),
        (15.5, None),
        (16.0, Some(RelayCommand::SetRate(0, 4_000_000))),
        (22.0, None),
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
    // Live: Partial before the cut, Full all through it, Partial again after the restore.
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
    let full = ch.iter().find(|(t, m)| *m == PathMode::Full && *t > 8.0).map(|c| c.0);
    assert!(full.is_some_and(|t| t < 10.5), "Full within 2.5 s of the cut: {ch:?}");
    assert!(ch.iter().any(|(t, m)| *m == PathMode::Partial && *t > 16.0), "{ch:?}");
    assert_eq!(ch.len(), 3, "Partial, Full, Partial: {ch:?}");
    // Both radios were driven by real traffic; LTE was woken for the cut.
    let radios: Vec<_> = e.radios.iter().flatten().collect();
    assert_eq!(radios.len(), 2, "{e:?}");
    assert!(radios.iter().all(|r| r.energy_j > 0.0), "{e:?}");
    // LTE carried the shortfall: through the cut the reader read clearly more than the
    // 0.6 Mbit/s WiFi could deliver.
    let cut_bps = read[2].saturating_sub(read[0]) as f64 * 8.0 / 7.5;
    assert!(cut_bps > 0.9e6, "read {cut_bps:.0} bit/s during the cut");
    assert!(stats.bytes_delivered > 0);
}
