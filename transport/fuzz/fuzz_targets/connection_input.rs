//! Any sequence of datagrams thrown at an established client connection: no panic, and the
//! receive buffer never exceeds its configured size.
//!
//! Input layout: the first byte picks how many 16-byte time steps pass between datagrams;
//! the rest is split into datagrams at 0xFF 0xFF markers. Each datagram's first byte picks
//! which of two addresses it claims to come from; the connection id is patched in for odd
//! lengths so that frames past the header get exercised.
#![no_main]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use braid_transport::cc::{Controller, ControllerFactory, RttSample};
use braid_transport::proto::{Config, Connection};
use braid_transport::sched::{PathView, Scheduler, SchedulerFactory};
use braid_transport::{Instant, PathId, PathRole};
use libfuzzer_sys::fuzz_target;

#[derive(Debug)]
struct Fixed;
impl ControllerFactory for Fixed {
    fn build(&self) -> Box<dyn Controller> {
        Box::new(FixedCc)
    }
}
struct FixedCc;
impl Controller for FixedCc {
    fn on_path_added(&mut self, _: Instant, _: PathId, _: usize) {}
    fn on_path_removed(&mut self, _: PathId) {}
    fn on_sent(&mut self, _: Instant, _: PathId, _: usize, _: u64) {}
    fn on_ack(&mut self, _: Instant, _: PathId, _: Instant, _: usize, _: &RttSample) {}
    fn on_congestion_event(&mut self, _: Instant, _: PathId, _: Instant, _: bool) {}
    fn window(&self, _: PathId) -> u64 {
        100_000
    }
    fn name(&self) -> &'static str {
        "fixed"
    }
}

#[derive(Debug)]
struct First;
impl SchedulerFactory for First {
    fn build(&self) -> Box<dyn Scheduler> {
        Box::new(First)
    }
}
impl Scheduler for First {
    fn select(&mut self, _: Instant, paths: &[PathView], bytes: usize, out: &mut Vec<PathId>) {
        out.extend(
            paths
                .iter()
                .find(|p| p.usable && p.has_room(bytes))
                .map(|p| p.id),
        );
    }
    fn name(&self) -> &'static str {
        "first"
    }
}

const BUFFER: u64 = 16 * 1024;

fuzz_target!(|data: &[u8]| {
    let Some((&step, rest)) = data.split_first() else {
        return;
    };
    let mut config = Config::new(Arc::new(Fixed), Arc::new(First));
    config.recv_buffer_bytes = BUFFER;
    let local = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)), 5000);
    let remote = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), 4433);
    let other = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 1, 1)), 4433);
    let mut now = Instant::ZERO;
    let (crypto, _) = braid_transport::proto::crypto::deterministic::pair(1);
    let mut c = Connection::connect(Arc::new(config), &crypto, now, 1, local, remote, PathRole::Wifi)
        .expect("a valid TLS configuration");
    let cid = c.connection_id().to_be_bytes();
    let mut buf = Vec::new();
    for chunk in rest.split(|&b| b == 0xff).filter(|c| !c.is_empty()) {
        let mut d = chunk.to_vec();
        if d.len() % 2 == 1 && d.len() > 9 {
            // A short header with this connection's id (packet protection still applies).
            d[1..9].copy_from_slice(&cid);
            d[0] = 0x43;
        }
        let from = if chunk[0] & 0x80 == 0 { remote } else { other };
        c.handle_datagram(now, local, from, &d);
        while c.poll_transmit(now, &mut buf).is_some() {}
        while c.read_message(now).is_some() {}
        while c.poll_event().is_some() {}
        assert!(c.recv_buffered() <= BUFFER);
        now += Duration::from_micros(u64::from(step) * 16);
        if c.poll_timeout().is_some_and(|t| t <= now) {
            c.handle_timeout(now);
        }
    }
});
