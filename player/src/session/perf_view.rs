//! `braid perf`'s text: iperf3-like lines as a run goes and the summary after it, for the
//! built-in transport and the kernel's alike.

use std::net::SocketAddr;

use braid_io::perf::{ClientRun, Event, Start, fmt_bytes, fmt_rate};

/// What the client prints as the run goes.
pub fn print_event(e: Event<'_>) {
    match e {
        Event::Started(start) => print_start(start),
        Event::Interval(i) => {
            for s in &i.streams {
                println!(
                    "[{:>3}] {:<8} {:>6.2}-{:<6.2} sec  {:>11}  {:>15}",
                    s.socket,
                    s.name,
                    s.start,
                    s.end,
                    fmt_bytes(s.bytes),
                    fmt_rate(s.bits_per_second)
                );
            }
            let sum = &i.sum;
            println!(
                "[SUM] {:<8} {:>6.2}-{:<6.2} sec  {:>11}  {:>15}",
                "",
                sum.start,
                sum.end,
                fmt_bytes(sum.bytes),
                fmt_rate(sum.bits_per_second)
            );
        }
    }
}

fn print_start(start: &Start) {
    let (host, port) = (&start.connecting_to.host, start.connecting_to.port);
    let n = start.paths.len();
    match &start.scenario {
        Some(s) => println!(
            "Scenario {s}: in-process server on {host}:{port}, {n} emulated path(s), profile {}",
            start.profile
        ),
        None => println!("Connected to {host}:{port}, {n} path(s), profile {}", start.profile),
    }
    for (i, p) in start.paths.iter().enumerate() {
        println!("[{i:>3}] {:<8} local {} -> {} ({})", p.name, p.local, p.remote, p.role);
    }
    println!("[ ID] Path     Interval           Transfer     Bitrate");
}

/// The summary after the run.
pub fn print_summary(run: &ClientRun) {
    let end = &run.report.end;
    let seconds = end.sum_received.seconds;
    let secs = seconds.max(1e-9);
    println!("- - - - - - - - - - - - - - - - - - - - - - - - - - - - - -");
    println!("[ ID] Path     Interval           Transfer     Bitrate          Retr   RTT");
    for (i, p) in end.paths.iter().enumerate() {
        println!(
            "[{i:>3}] {:<8} {:>6.2}-{:<6.2} sec  {:>11}  {:>15}  {:>5}  {:>6.1} ms{}",
            p.name,
            0.0,
            seconds,
            fmt_bytes(p.bytes),
            fmt_rate(p.bytes as f64 * 8.0 / secs),
            p.retransmits,
            p.rtt_ms,
            if p.error.is_empty() { String::new() } else { format!("  (failed: {})", p.error) }
        );
    }
    for (label, t) in [("sender", &end.sum_sent), ("receiver", &end.sum_received)] {
        println!(
            "[SUM] {:<8} {:>6.2}-{:<6.2} sec  {:>11}  {:>15}         {label}",
            "",
            0.0,
            seconds,
            fmt_bytes(t.bytes),
            fmt_rate(t.bits_per_second)
        );
    }
    if let Some(c) = end.capacity_bps {
        println!(
            "Goodput is {:.1} % of the configured capacity ({})",
            100.0 * end.sum_received.bits_per_second / c.max(1.0),
            fmt_rate(c)
        );
    }
    let local = if run.local.is_empty() {
        String::new()
    } else {
        format!(
            ", local {}",
            run.local.iter().map(SocketAddr::to_string).collect::<Vec<_>>().join(", ")
        )
    };
    println!(
        "Verified {} in {} messages: every byte intact and in order (connection {:016x}{local})",
        fmt_bytes(end.sum_received.bytes),
        run.messages,
        run.connection_id,
    );
}
