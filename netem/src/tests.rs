use super::*;

const MS: u64 = 1000;

fn t(us: u64) -> Instant {
    Instant::from_micros(us)
}

/// Offers `len`-byte datagrams every `gap_us` until `until_us`, polling every 100 µs;
/// returns (id, enqueue time, delivery time) for every delivered datagram.
fn drive(link: &mut Link<u64>, len: usize, gap_us: u64, until_us: u64) -> Vec<(u64, u64, u64)> {
    let mut sent_at = Vec::new();
    let mut out = Vec::new();
    let mut next_send = 0;
    let mut now = 0;
    while now <= until_us + 2_000_000 {
        if now <= until_us && now >= next_send {
            let id = sent_at.len() as u64;
            sent_at.push(now);
            let _ = link.enqueue(t(now), len, id);
            next_send += gap_us;
        }
        while let Some(id) = link.poll_delivery(t(now)) {
            out.push((id, sent_at[id as usize], now));
        }
        now += 100;
    }
    out
}

#[test]
fn fixed_rate_link_delivers_at_its_rate_including_header_bytes() {
    let mut link = Link::new(LinkConfig::fixed(10_000_000, Duration::from_millis(20)), 1);
    // Offer 20 Mbit/s of 1200-byte datagrams for 2 s.
    let out = drive(&mut link, 1200, 480, 2_000_000);
    // Count deliveries in a steady window [0.5 s, 1.5 s] after the delay.
    let n = out.iter().filter(|d| d.2 >= 520 * MS && d.2 < 1520 * MS).count() as f64;
    let rate = n * 1228.0 * 8.0;
    assert!((rate - 10e6).abs() / 10e6 < 0.01, "rate {rate}");
    assert!(link.counters().dropped_queue > 0);
}

#[test]
fn unloaded_link_delay_is_serialization_plus_propagation() {
    let mut link = Link::new(LinkConfig::fixed(1_000_000, Duration::from_millis(30)), 1);
    link.enqueue(t(0), 1222, 7u64).unwrap();
    // 1250 bytes at 1 Mbit/s = 10 ms, plus 30 ms.
    assert_eq!(link.next_event_time(), Some(t(10 * MS)));
    assert_eq!(link.poll_delivery(t(10 * MS)), None);
    assert_eq!(link.next_event_time(), Some(t(40 * MS)));
    assert_eq!(link.poll_delivery(t(40 * MS - 1)), None);
    assert_eq!(link.poll_delivery(t(40 * MS)), Some(7));
    assert_eq!(link.next_event_time(), None);
}

#[test]
fn default_queue_is_150_ms_at_the_rate_with_a_15000_byte_floor() {
    assert_eq!(LinkConfig::fixed(8_000_000, Duration::ZERO).queue_limit(), 150_000);
    assert_eq!(LinkConfig::fixed(64_000, Duration::ZERO).queue_limit(), 15_000);
}

#[test]
fn droptail_queue_drops_what_does_not_fit() {
    let cfg =
        LinkConfig { queue_bytes: Some(3 * 1228), ..LinkConfig::fixed(1_000_000, Duration::ZERO) };
    let mut link = Link::new(cfg, 1);
    for i in 0..5u64 {
        let r = link.enqueue(t(0), 1200, i);
        assert_eq!(r.is_ok(), i < 3, "datagram {i}");
    }
    let c = link.counters();
    assert_eq!((c.enqueued, c.dropped_queue), (3, 2));
    assert_eq!(link.queued_bytes(), 3 * 1228);
    // Once the head has left, one more fits.
    let head_done = link.next_event_time().unwrap();
    assert!(link.enqueue(head_done, 1200, 9).is_ok());
}

#[test]
fn trace_capacity_is_byte_accounted() {
    // One 1500-byte opportunity every ms: 1228-byte datagrams must get 1500/1228
    // datagrams per ms, not one.
    let trace = Trace::parse("1\n").unwrap().shared();
    let cfg = LinkConfig {
        rate: Rate::Trace { trace, once: false },
        queue_bytes: Some(1_000_000),
        ..LinkConfig::default()
    };
    let mut link = Link::new(cfg, 1);
    let out = drive(&mut link, 1200, 50, 1_000_000);
    let n = out.iter().filter(|d| d.2 >= 100 * MS && d.2 < 900 * MS).count() as f64;
    let bytes_per_ms = n * 1228.0 / 800.0;
    assert!((bytes_per_ms - 1500.0).abs() < 5.0, "{bytes_per_ms} bytes/ms");
}

#[test]
fn trace_loops_with_period_of_last_timestamp_unless_once() {
    // Opportunities at 0, 5, 10 ms then every loop of 10 ms: 0,5,10,10,15,20,20,...
    let trace = Trace::parse("0\n5\n10\n").unwrap().shared();
    let mk = |once| {
        let cfg = LinkConfig {
            rate: Rate::Trace { trace: trace.clone(), once },
            overhead_bytes: 0,
            queue_bytes: Some(1_000_000),
            ..LinkConfig::default()
        };
        let mut link: Link<u64> = Link::new(cfg, 1);
        for i in 0..6 {
            link.enqueue(t(0), 1500, i).unwrap();
        }
        let mut times = Vec::new();
        for ms in 0..40 {
            while let Some(_id) = link.poll_delivery(t(ms * MS)) {
                times.push(ms);
            }
        }
        times
    };
    assert_eq!(mk(false), vec![0, 5, 10, 10, 15, 20]);
    assert_eq!(mk(true), vec![0, 5, 10]);
}

#[test]
fn unused_trace_capacity_is_not_banked() {
    let trace = Trace::parse("1\n").unwrap().shared();
    let cfg = LinkConfig {
        rate: Rate::Trace { trace, once: false },
        overhead_bytes: 0,
        ..LinkConfig::default()
    };
    let mut link: Link<u64> = Link::new(cfg, 1);
    // Idle for 100 ms, then 3 datagrams of 1500 bytes: one per ms, not all at once.
    for i in 0..3 {
        link.enqueue(t(100 * MS + 100), 1500, i).unwrap();
    }
    let mut times = Vec::new();
    for us in (100 * MS..110 * MS).step_by(100) {
        while link.poll_delivery(t(us)).is_some() {
            times.push(us);
        }
    }
    assert_eq!(times, vec![101 * MS, 102 * MS, 103 * MS]);
}

#[test]
fn mahimahi_trace_file_mean_rate_is_reproduced() {
    let dir =
        std::env::var_os("BRAID_TRACE_DIR").map(std::path::PathBuf::from).unwrap_or_else(|| {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/traces")
        });
    let path = dir.join("Verizon-LTE-short.down");
    let Ok(text) = std::fs::read_to_string(&path) else {
        braid_tests::skip(&format!("{} not present", path.display()));
        return;
    };
    let trace = Trace::parse(&text).unwrap().shared();
    let expect = trace.mean_rate_bps();
    let period_us = trace.period_ms() * MS;
    let cfg = LinkConfig {
        rate: Rate::Trace { trace, once: false },
        overhead_bytes: 0,
        queue_bytes: Some(100_000_000),
        ..LinkConfig::default()
    };
    let mut link: Link<u64> = Link::new(cfg, 1);
    // Saturate: keep 2 MB queued, count delivered bytes over exactly one period.
    let mut delivered = 0u64;
    let mut id = 0;
    for ms in 0..period_us / MS {
        while link.queued_bytes() < 2_000_000 {
            link.enqueue(t(ms * MS), 1500, id).unwrap();
            id += 1;
        }
        while link.poll_delivery(t(ms * MS)).is_some() {
            delivered += 1500;
        }
    }
    let rate = delivered as f64 * 8.0 / (period_us as f64 / 1e6);
    assert!((rate - expect).abs() / expect < 0.01, "rate {rate} expected {expect}");
}

#[test]
fn jitter_never_reorders_and_keeps_the_mean_delay() {
    let cfg = LinkConfig {
        jitter: Duration::from_millis(10),
        ..LinkConfig::fixed(100_000_000, Duration::from_millis(50))
    };
    let mut link = Link::new(cfg, 3);
    let out = drive(&mut link, 100, 5_000, 2_000_000);
    assert!(out.windows(2).all(|w| w[0].0 < w[1].0), "reordered");
    assert_eq!(out.len(), 401);
    let mean_ms = out.iter().map(|d| (d.2 - d.1) as f64).sum::<f64>() / out.len() as f64 / 1000.0;
    // Packets 5 ms apart with 10 ms jitter: FIFO pushes some later, so the mean is a bit
    // above 50 ms but close.
    assert!((50.0..56.0).contains(&mean_ms), "mean {mean_ms}");
    let spread =
        out.iter().map(|d| d.2 - d.1).max().unwrap() - out.iter().map(|d| d.2 - d.1).min().unwrap();
    assert!(spread > 20 * MS, "jitter had no effect: spread {spread}");
}

#[test]
fn pareto_jitter_is_fifo_with_mean_extra_delay_near_jitter() {
    let cfg = LinkConfig {
        jitter: Duration::from_millis(4),
        delay_dist: DelayDist::Pareto,
        ..LinkConfig::fixed(100_000_000, Duration::from_millis(20))
    };
    let mut link = Link::new(cfg, 5);
    let out = drive(&mut link, 100, 50_000, 20_000_000);
    assert!(out.windows(2).all(|w| w[0].0 < w[1].0));
    let mean_ms = out.iter().map(|d| (d.2 - d.1) as f64).sum::<f64>() / out.len() as f64 / 1000.0;
    assert!((22.5..26.0).contains(&mean_ms), "mean {mean_ms}");
}

#[test]
fn bernoulli_loss_rate_matches_probability() {
    let cfg = LinkConfig {
        loss: Loss::Bernoulli(0.02),
        queue_bytes: Some(u64::MAX / 2),
        ..LinkConfig::default()
    };
    let mut link: Link<u64> = Link::new(cfg, 11);
    let n = 200_000;
    for i in 0..n {
        let _ = link.enqueue(t(i), 100, i);
    }
    let rate = link.counters().dropped_loss as f64 / n as f64;
    assert!((rate - 0.02).abs() < 0.002, "{rate}");
}

#[test]
fn gilbert_elliott_mean_loss_is_bad_state_share_times_h() {
    let loss = Loss::GilbertElliott { p: 0.01, r: 0.3, h: 0.5, k: 0.0 };
    let expect = 0.01 / 0.31 * 0.5;
    assert!((loss.mean() - expect).abs() < 1e-12);
    let cfg = LinkConfig { loss, queue_bytes: Some(u64::MAX / 2), ..LinkConfig::default() };
    let mut link: Link<u64> = Link::new(cfg, 13);
    let n = 1_000_000;
    let mut bursts = 0;
    let mut prev_lost = false;
    for i in 0..n {
        let lost = link.enqueue(t(i), 100, i).is_err();
        if lost && prev_lost {
            bursts += 1;
        }
        prev_lost = lost;
        while link.poll_delivery(t(i)).is_some() {}
    }
    let rate = link.counters().dropped_loss as f64 / n as f64;
    assert!((rate - expect).abs() / expect < 0.05, "{rate} vs {expect}");
    // Losses cluster: back-to-back losses far more often than independent loss would give.
    let independent = expect * expect * n as f64;
    assert!(bursts as f64 > 5.0 * independent, "bursts {bursts}");
}

#[test]
fn down_drops_everything_and_counts_transmit_failures_until_up() {
    let mut link = Link::new(LinkConfig::fixed(1_000_000, Duration::from_millis(10)), 1);
    for i in 0..4u64 {
        link.enqueue(t(0), 1222, i).unwrap();
    }
    // First datagram left the serializer at 10 ms and is propagating; 3 queued.
    link.set_down(t(15 * MS));
    assert_eq!(link.counters().dropped_down, 4);
    assert_eq!(link.enqueue(t(16 * MS), 100, 9), Err(DropReason::Down));
    assert_eq!(link.counters().transmit_failures(), 5);
    assert_eq!(link.next_event_time(), None);
    link.set_up(t(100 * MS));
    link.enqueue(t(100 * MS), 1222, 10).unwrap();
    assert_eq!(link.next_event_time(), Some(t(110 * MS)));
    assert_eq!(link.poll_delivery(t(120 * MS)), Some(10));
}

#[test]
fn set_rate_keeps_bytes_already_served() {
    let mut link = Link::new(LinkConfig::fixed(1_000_000, Duration::ZERO), 1);
    link.enqueue(t(0), 1222, 1u64).unwrap(); // 10 ms at 1 Mbit/s
    link.set_rate(t(5 * MS), Rate::Fixed(500_000)); // half served; rest takes 10 ms
    assert_eq!(link.next_event_time(), Some(t(15 * MS)));
    assert_eq!(link.poll_delivery(t(15 * MS)), Some(1));
}

#[test]
fn rate_schedule_changes_rate_at_step_times() {
    let steps = vec![
        RateStep { at: Duration::ZERO, bps: 1_000_000 },
        RateStep { at: Duration::from_millis(5), bps: 500_000 },
    ];
    let cfg = LinkConfig { rate: Rate::Schedule(steps), ..LinkConfig::default() };
    let mut link = Link::new(cfg, 1);
    link.enqueue(t(0), 1222, 1u64).unwrap();
    assert_eq!(link.next_event_time(), Some(t(15 * MS)));
}

#[test]
fn same_seed_gives_same_loss_and_jitter() {
    let cfg = LinkConfig {
        jitter: Duration::from_millis(5),
        loss: Loss::Bernoulli(0.1),
        ..LinkConfig::fixed(10_000_000, Duration::from_millis(10))
    };
    let a = drive(&mut Link::new(cfg.clone(), 42), 500, 1000, 500_000);
    let b = drive(&mut Link::new(cfg.clone(), 42), 500, 1000, 500_000);
    let c = drive(&mut Link::new(cfg, 43), 500, 1000, 500_000);
    assert_eq!(a, b);
    assert_ne!(a, c);
}

/// smoltcp-netsim-style table: each link offered 1.5× its rate (or 12 Mbit/s) of
/// 1200-byte datagrams for 3 s; figures measured over the deliveries.
#[test]
fn link_model_summary_table() {
    let trace = Trace::parse("1\n").unwrap().shared();
    let cases: Vec<(&str, LinkConfig)> = vec![
        ("fixed 2mbit 10ms", LinkConfig::fixed(2_000_000, Duration::from_millis(10))),
        (
            "fixed 8mbit 20ms q=30k",
            LinkConfig {
                queue_bytes: Some(30_000),
                ..LinkConfig::fixed(8_000_000, Duration::from_millis(20))
            },
        ),
        (
            "jitter 5ms normal",
            LinkConfig {
                jitter: Duration::from_millis(5),
                ..LinkConfig::fixed(4_000_000, Duration::from_millis(20))
            },
        ),
        (
            "jitter 5ms pareto",
            LinkConfig {
                jitter: Duration::from_millis(5),
                delay_dist: DelayDist::Pareto,
                ..LinkConfig::fixed(4_000_000, Duration::from_millis(20))
            },
        ),
        (
            "bernoulli 5%",
            LinkConfig {
                loss: Loss::Bernoulli(0.05),
                ..LinkConfig::fixed(4_000_000, Duration::from_millis(20))
            },
        ),
        (
            "gilbert p.05 r.3 h.5",
            LinkConfig {
                loss: Loss::GilbertElliott { p: 0.05, r: 0.3, h: 0.5, k: 0.0 },
                ..LinkConfig::fixed(4_000_000, Duration::from_millis(20))
            },
        ),
        (
            "trace `1` (12mbit)",
            LinkConfig {
                rate: Rate::Trace { trace, once: false },
                delay: Duration::from_millis(5),
                ..LinkConfig::default()
            },
        ),
    ];
    let mut table = format!(
        "{:<24} {:>8} {:>8} {:>8} {:>8} {:>7} {:>7}\n",
        "link", "Mbit/s", "mean ms", "p95 ms", "max ms", "loss", "qdrop"
    );
    for (name, cfg) in cases {
        let rate = cfg.rate.nominal_bps().unwrap_or(12e6);
        let gap_us = (1228.0 * 8.0 / (1.5 * rate) * 1e6) as u64;
        let mut link = Link::new(cfg, 1);
        let out = drive(&mut link, 1200, gap_us, 3_000_000);
        let c = link.counters();
        let mut delays: Vec<u64> = out.iter().map(|d| d.2 - d.1).collect();
        delays.sort_unstable();
        let mean = delays.iter().sum::<u64>() as f64 / delays.len() as f64 / 1000.0;
        let p95 = delays[(delays.len() * 95).div_ceil(100) - 1] as f64 / 1000.0;
        let max = *delays.last().unwrap() as f64 / 1000.0;
        let first = out.first().unwrap().2;
        let last = out.last().unwrap().2;
        let mbps = (out.len() - 1) as f64 * 1228.0 * 8.0 / ((last - first) as f64 / 1e6) / 1e6;
        let offered = c.enqueued + c.dropped_loss + c.dropped_queue;
        table.push_str(&format!(
            "{:<24} {:>8.3} {:>8.1} {:>8.1} {:>8.1} {:>6.1}% {:>7}\n",
            name,
            mbps,
            mean,
            p95,
            max,
            100.0 * c.dropped_loss as f64 / offered as f64,
            c.dropped_queue
        ));
    }
    insta::assert_snapshot!(table);
}

mod props {
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum Op {
        Send { dt_us: u64, len: usize },
        Wait { dt_us: u64 },
        Down,
        Up,
        SetRate(u64),
        SetDelay(u64, u64),
        SetLoss(f64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            8 => (0u64..3000, 1usize..1500).prop_map(|(dt_us, len)| Op::Send { dt_us, len }),
            4 => (0u64..50_000).prop_map(|dt_us| Op::Wait { dt_us }),
            1 => Just(Op::Down),
            1 => Just(Op::Up),
            1 => (0u64..20_000_000).prop_map(Op::SetRate),
            1 => (0u64..100, 0u64..30).prop_map(|(d, j)| Op::SetDelay(d, j)),
            1 => (0.0f64..0.5).prop_map(Op::SetLoss),
        ]
    }

    fn config() -> impl Strategy<Value = LinkConfig> {
        let rate = prop_oneof![
            Just(Rate::Unlimited),
            (1u64..50_000_000).prop_map(Rate::Fixed),
            Just(Rate::Trace {
                trace: Trace::parse("0\n0\n3\n7\n7\n7\n10\n").unwrap().shared(),
                once: false
            }),
            Just(Rate::Trace { trace: Trace::parse("2\n5\n").unwrap().shared(), once: true }),
            Just(Rate::Schedule(vec![
                RateStep { at: Duration::ZERO, bps: 1_000_000 },
                RateStep { at: Duration::from_millis(50), bps: 0 },
                RateStep { at: Duration::from_millis(80), bps: 9_000_000 },
            ])),
        ];
        let dist = prop_oneof![Just(DelayDist::Normal), Just(DelayDist::Pareto)];
        (
            rate,
            0u64..50,
            0u64..20,
            dist,
            0.0f64..0.3,
            prop::option::of(1500u64..40_000),
            any::<bool>(),
        )
            .prop_map(|(rate, d, j, delay_dist, p, queue_bytes, jitter_reorder)| {
                LinkConfig {
                    rate,
                    delay: Duration::from_millis(d),
                    jitter: Duration::from_millis(j),
                    delay_dist,
                    loss: Loss::Bernoulli(p),
                    queue_bytes,
                    overhead_bytes: IP_UDP_OVERHEAD,
                    jitter_reorder,
                }
            })
    }

    proptest! {
        #[test]
        fn fifo_conservation_and_queue_bound_hold_for_any_schedule(
            cfg in config(),
            ops in prop::collection::vec(op(), 1..300),
            seed in 0u64..1000,
        ) {
            let fifo = !cfg.jitter_reorder;
            let mut link: Link<u64> = Link::new(cfg, seed);
            let mut now = 0u64;
            let mut next_id = 0u64;
            let mut last_delivered: Option<u64> = None;
            let mut delivered = 0u64;
            let drain = |link: &mut Link<u64>, now: u64, last: &mut Option<u64>, n: &mut u64| -> Result<(), TestCaseError> {
                while let Some(id) = link.poll_delivery(t(now)) {
                    prop_assert!(!fifo || last.is_none_or(|l| id > l), "reordered: {id} after {last:?}");
                    *last = Some(id);
                    *n += 1;
                }
                if let Some(next) = link.next_event_time() {
                    prop_assert!(next.as_micros() + 1 >= now, "next event {next:?} in the past of {now}");
                }
                Ok(())
            };
            for op in ops {
                match op {
                    Op::Send { dt_us, len } => {
                        now += dt_us;
                        drain(&mut link, now, &mut last_delivered, &mut delivered)?;
                        let _ = link.enqueue(t(now), len, next_id);
                        next_id += 1;
                    }
                    Op::Wait { dt_us } => now += dt_us,
                    Op::Down => link.set_down(t(now)),
                    Op::Up => link.set_up(t(now)),
                    Op::SetRate(bps) => link.set_rate(t(now), Rate::Fixed(bps)),
                    Op::SetDelay(d, j) => link.set_delay(t(now), Duration::from_millis(d), Duration::from_millis(j)),
                    Op::SetLoss(p) => link.set_loss(t(now), Loss::Bernoulli(p)),
                }
                prop_assert!(link.queued_bytes() <= link.queue_limit());
                drain(&mut link, now, &mut last_delivered, &mut delivered)?;
            }
            // Follow the wake-ups to the end: everything queued leaves unless the rate is
            // zero, a one-shot trace ran out, or the link is down.
            for _ in 0..100_000 {
                let Some(next) = link.next_event_time() else { break };
                now = now.max(next.as_micros());
                drain(&mut link, now, &mut last_delivered, &mut delivered)?;
            }
            let c = link.counters();
            prop_assert_eq!(c.delivered, delivered);
            // Every datagram offered is delivered, dropped, or still inside.
            prop_assert_eq!(
                next_id,
                c.delivered + c.dropped_queue + c.dropped_loss + c.dropped_down + link.queued_len() as u64 + link.in_flight() as u64
            );
        }
    }
}

/// Mean and lag-1 autocorrelation of the per-datagram delays (µs), in delivery order of
/// their ids.
fn delay_stats(out: &[(u64, u64, u64)]) -> (f64, f64) {
    let mut by_id: Vec<_> = out.to_vec();
    by_id.sort_unstable_by_key(|d| d.0);
    let d: Vec<f64> = by_id.iter().map(|x| (x.2 - x.1) as f64).collect();
    let n = d.len() as f64;
    let mean = d.iter().sum::<f64>() / n;
    let var = d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
    let cov = d.windows(2).map(|w| (w[0] - mean) * (w[1] - mean)).sum::<f64>() / (n - 1.0);
    (mean, cov / var)
}

#[test]
fn jitter_reorder_draws_independent_delays_truncated_at_zero() {
    // 10 Mbit/s, 50 ms mean delay, σ = 100 ms, 1200-byte datagrams at 8 Mbit/s for 10 s.
    let cfg = |reorder| LinkConfig {
        jitter: Duration::from_millis(100),
        jitter_reorder: reorder,
        ..LinkConfig::fixed(10_000_000, Duration::from_millis(50))
    };
    let mut link = Link::new(cfg(true), 11);
    let out = drive(&mut link, 1200, 1_200, 10_000_000);
    assert_eq!(out.len(), 8334, "nothing may be lost");
    assert!(out.windows(2).any(|w| w[0].0 > w[1].0), "never reordered");
    let (mean_us, rho) = delay_stats(&out);
    // E[max(0, N(50, 100²))] = 50·Φ(0.5) + 100·φ(0.5) = 69.8 ms, plus ~1 ms serialization
    // and the 100 µs polling grid.
    assert!((68_000.0..73_000.0).contains(&mean_us), "mean {mean_us}");
    assert!(rho.abs() < 0.05, "delays correlated: {rho}");
    assert!(out.iter().all(|d| d.2 >= d.1), "negative delay");

    // The FIFO default on the same link: no reordering, and the running maximum makes the
    // delays strongly correlated and far above the mean.
    let mut fifo = Link::new(cfg(false), 11);
    let out = drive(&mut fifo, 1200, 1_200, 10_000_000);
    assert!(out.windows(2).all(|w| w[0].0 < w[1].0), "FIFO reordered");
    let (fifo_mean, fifo_rho) = delay_stats(&out);
    assert!(fifo_mean > 150_000.0, "FIFO mean {fifo_mean}");
    assert!(fifo_rho > 0.9, "FIFO correlation {fifo_rho}");
}
