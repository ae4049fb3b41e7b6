//! Simulated streaming sessions: the playout policies against each other and against w*.

use std::path::Path;
use std::sync::Arc;

use braid_media::playout::PlayoutPolicy;
use braid_netem::scenario::Scenario;
use braid_sim::{self as sim, RunOptions, StreamReport};
use braid_transport::profile;

use super::stream::{ClientConfig, SimStream};
use super::*;

fn root() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The H.263 clip (≈65 kbit/s, 30 s) over one path of `rate`, played with `playout`.
fn scenario(rate: &str, playout: &str) -> Scenario {
    let text = format!(
        r#"
        name = "slow-link"
        duration_s = 60
        [[path]]
        name = "wired"
        role = "wired"
        down = {{ rate = "{rate}", delay_ms = 20 }}
        up = {{ rate = "1mbit", delay_ms = 20 }}
        [workload]
        kind = "stream"
        clip = "assets/clips/h263-qcif-15fps-64k.3gp"
        playout = "{playout}"
        buffer_s = 60
        "#
    );
    Scenario::parse(&text, "slow-link.toml", &root()).expect("scenario")
}

fn stream(s: &Scenario) -> StreamReport {
    let p = profile::lookup("tcp").unwrap();
    simulate(s, &p, &RunOptions::default()).unwrap().report.stream.expect("stream report")
}

#[test]
fn below_the_clip_rate_adaptive_stalls_less_than_fixed_or_starts_sooner() {
    let fixed = stream(&scenario("52kbit", "fixed"));
    let adaptive = stream(&scenario("52kbit", "adaptive"));
    assert!(fixed.stalls >= 1, "fixed must stall below the clip's rate: {fixed:?}");
    assert!(
        adaptive.stalls < fixed.stalls
            || (adaptive.stalls == fixed.stalls
                && adaptive.startup_delay_s < fixed.startup_delay_s),
        "adaptive {adaptive:?}\nfixed {fixed:?}"
    );
    // Both play the whole clip and lose nothing on a reliable profile.
    assert_eq!(fixed.frames_total, 450);
    assert_eq!(adaptive.frames_total, 450);
    assert_eq!(fixed.frames_lost, 0);
    assert_eq!(fixed.psnr_avg_db, 100.0);
}

#[test]
fn oracle_at_w_star_never_stalls_and_one_slot_earlier_does() {
    let s = scenario("52kbit", "oracle");
    let p = profile::lookup("tcp").unwrap();
    let oracle = stream(&s);
    assert_eq!(oracle.stalls, 0, "{oracle:?}");
    // The link carries ≈ 46 kbit/s of the ≈ 65 kbit/s clip after headers: (65/46 − 1)·30 s
    // ≈ 12 s at least, more where the clip is burstier than average.
    assert!((10.0..25.0).contains(&oracle.startup_delay_s), "{oracle:?}");

    let media = MediaSetup::load(&root().join("assets/clips/h263-qcif-15fps-64k.3gp")).unwrap();
    let opts = RunOptions {
        recv_buffer_bytes: Some(transport_buffer_bytes(&media.clip)),
        ..RunOptions::default()
    };
    let stream =
        oracle::Stream { media: &media, buffer_s: 60.0, buffer_bytes: 8_000_000, loop_for: None };
    let w = oracle::probe_startup_us(&s, &p, &opts, &stream).unwrap();
    let early = SimStream::new(
        Arc::clone(&media.clip),
        media.name.clone(),
        Arc::clone(&media.reference),
        p.media,
        None,
        ClientConfig {
            policy: PlayoutPolicy::Oracle { startup_us: w - 10_000 },
            buffer_s: 60.0,
            buffer_bytes: 8_000_000,
            keep_history: true,
        },
    )
    .ending_at(braid_transport::Instant::from_duration(s.duration));
    let r = sim::run_with_workload(&s, &p, &opts, Box::new(early)).unwrap();
    let st = r.report.stream.unwrap();
    assert!(st.stalls >= 1, "starting one slot before w* = {w} µs must stall: {st:?}");
}

#[test]
fn a_fast_link_plays_everything_identically() {
    let r = stream(&scenario("1mbit", "adaptive"));
    assert_eq!(r.stalls, 0);
    assert_eq!(r.frames_total, 450);
    assert_eq!(r.frames_lost, 0);
    assert_eq!(r.psnr_avg_db, 100.0);
    assert_eq!(r.mos, 5);
    assert!(r.startup_delay_s < 1.5, "{r:?}");
}

#[test]
fn same_scenario_and_seed_give_the_same_report() {
    let s = scenario("52kbit", "adaptive");
    let p = profile::lookup("mptcp").unwrap();
    let a = simulate(&s, &p, &RunOptions::default()).unwrap().report.to_json();
    let b = simulate(&s, &p, &RunOptions::default()).unwrap().report.to_json();
    assert_eq!(a, b);
}

/// The proxy's claim on start-up, over five seeds: each run crosses a backbone with 5 %
/// random loss, so one seed alone is chaotic (measured when this test was written, seconds
/// with and without the node, seeds 1 to 5: tcp 6.60/6.37, 4.54/19.20, 6.16/16.52, 4.65/10.68, 4.55/14.65;
/// tfrc 6.96/14.86, 7.05/8.60, 7.61/24.62, 5.89/13.42, 5.17/26.44). The medians must
/// fall with the node.
#[test]
fn the_proxy_scenarios_start_up_delay_falls_with_the_node_present() {
    let with = Scenario::load(&root().join("assets/scenarios/proxy-wireless-proxy.toml"))
        .expect("proxy scenario");
    assert_eq!(with.nodes.len(), 1);
    let mut without = with.clone();
    without.nodes.clear();
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    for name in ["tcp", "tfrc"] {
        let p = profile::lookup(name).unwrap();
        let (mut sa, mut sb) = (Vec::new(), Vec::new());
        for seed in 1..=5 {
            let opts = RunOptions { seed: Some(seed), ..RunOptions::default() };
            let a = simulate(&with, &p, &opts).unwrap().report;
            let b = simulate(&without, &p, &opts).unwrap().report;
            // The node really ran: it held data, and only its run reports a proxy buffer.
            assert!(a.proxy_buffer_bytes.is_some_and(|y| y > 0), "{name}: {a:?}");
            assert!(b.proxy_buffer_bytes.is_none(), "{name}");
            let (a, b) = (a.stream.expect("stream"), b.stream.expect("stream"));
            assert_eq!((a.frames_total, a.frames_lost), (450, 0), "{name} with the node");
            sa.push(a.startup_delay_s);
            sb.push(b.startup_delay_s);
        }
        assert!(
            median(sa.clone()) < median(sb.clone()),
            "{name}: start-up with the node {sa:?} s, without {sb:?} s"
        );
    }
}

/// The embedded demo scenario in the simulator: `mptcp-qe` lets LTE sleep once WiFi is
/// seen to carry the stream, rides out WiFi's degradation on the media downloaded ahead
/// (the player's buffer never falls, so LTE is not woken), and spends well under
/// all-paths `mptcp` — without a stall or a lost frame.
#[test]
fn the_demo_scenario_tells_the_energy_story() {
    // The embedded scenario, its clip resolved where the file lives.
    let scenario = Scenario::parse(
        crate::assets::DEMO_SCENARIO,
        "demo.toml",
        &root().join("assets/scenarios"),
    )
    .expect("the embedded scenario");
    let run = |name: &str| {
        let p = profile::lookup(name).unwrap();
        simulate(&scenario, &p, &RunOptions::default()).expect("simulated")
    };
    let qe = run("mptcp-qe");
    let all = run("mptcp");
    let st = qe.report.stream.as_ref().unwrap();
    assert_eq!((st.stalls, st.frames_lost), (0, 0), "{st:?}");
    let e = qe.report.energy.as_ref().unwrap();
    // Full at the start, Partial once WiFi is seen to carry the stream (and at most a flip
    // or two): not the hundreds a tie between WiFi's arrivals and the read rate makes.
    assert!(e.mode_switches <= 4, "{e:?}");
    assert!(e.time_in_partial_s > 50.0, "{e:?}");
    let lte = qe.series.paths.iter().position(|p| p == "lte").unwrap();
    let carried = |from: f64, to: f64| -> f64 {
        qe.series
            .rows
            .iter()
            .filter(|r| r.t_s > from && r.t_s <= to)
            .map(|r| r.throughput_bps[lte])
            .sum()
    };
    // WiFi's dip (35–43 s) eats into what was downloaded ahead, never into the player's
    // buffer: LTE sleeps on.
    assert_eq!(
        carried(6.0, 60.0),
        0.0,
        "LTE carried data while WiFi and the download-ahead sufficed"
    );
    let ratio = e.total_j / all.report.energy.as_ref().unwrap().total_j;
    assert!(ratio <= 0.85, "mptcp-qe spent {ratio:.2}× mptcp's energy");
}
