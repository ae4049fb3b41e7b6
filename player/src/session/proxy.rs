//! The split proxy (`braid proxy`), the proxy paper's scenario B. Each client connection accepted on `--listen` (with the
//! downstream profile) gets its own connection to the server at `--upstream` (with the
//! upstream profile); messages are relayed both ways, in order, each re-sent with the
//! delivery rule of the profile of the connection it leaves on. So the TCP-friendly rate
//! control runs only over the shared upstream part, and the proxy buffers what the client's
//! side cannot take yet (its receive window and the downstream connection's flow control
//! bound that buffer).
//!
//! Gaps (messages the upstream sender abandoned) are not forwarded: the downstream
//! connection numbers only what it carries.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;
use braid_io::driver::{self, ConnectionHandle, PathSpec};
use braid_transport::path::PathRole;
use braid_transport::profile::{self, MediaReliability, Profile};
use braid_transport::proto::{ClientCrypto, Config, Delivery, Reliability, ServerCrypto};
use braid_transport::time::Instant;

use super::config;

/// The proxy's configuration toward one side: the server side faces the client, the
/// client side faces the upstream server.
fn config(p: &Profile, side: profile::Side) -> Arc<Config> {
    config::real_time(p, side, None)
}

/// How relayed messages are delivered on a connection of profile `p`. The proxy has no
/// playout clock, so a deadline profile keeps only its retransmission budget.
fn reliability(p: &Profile) -> Reliability {
    match p.media {
        MediaReliability::Reliable => Reliability::Reliable,
        MediaReliability::Deadline { max_retransmissions } => Reliability::Deadline {
            at: Instant::from_micros(1 << 60),
            max_retransmissions: max_retransmissions.unwrap_or(u32::MAX),
        },
    }
}

/// Accepts clients on `listen` (with the `down` profile) and relays each to the server at
/// `upstream` (with the `up` profile), until the endpoint closes.
pub async fn run(
    listen: SocketAddr,
    upstream: SocketAddr,
    up: Profile,
    down: Profile,
    (identity, upstream_trust): (ServerCrypto, ClientCrypto),
) -> anyhow::Result<()> {
    let ep = driver::listen(listen, config(&down, profile::Side::Server), identity)
        .await
        .with_context(|| format!("listening on {listen}"))?;
    println!(
        "proxy listening on {} ({}) -> upstream {} ({})",
        ep.local_addr(),
        down.name,
        upstream,
        up.name
    );
    while let Some(client) = ep.accept().await {
        let (up, down, trust) = (up.clone(), down.clone(), upstream_trust.clone());
        tokio::spawn(async move {
            if let Err(e) = relay(client, upstream, up, down, trust).await {
                eprintln!("error: {e:#}");
            }
        });
    }
    Ok(())
}

/// One client: connect upstream, then copy messages both ways until either side ends.
async fn relay(
    client: ConnectionHandle,
    upstream: SocketAddr,
    up: Profile,
    down: Profile,
    trust: ClientCrypto,
) -> anyhow::Result<()> {
    let server = match driver::connect(
        config(&up, profile::Side::Client),
        trust,
        vec![PathSpec::to(upstream, PathRole::Wired)],
    )
    .await
    {
        Ok(s) => Arc::new(s),
        Err(e) => {
            client.close(1, b"upstream unreachable").await;
            return Err(e).with_context(|| format!("connecting to {upstream}"));
        }
    };
    let client = Arc::new(client);
    let to_client =
        tokio::spawn(pump(Arc::clone(&server), Arc::clone(&client), reliability(&down)));
    let to_server = tokio::spawn(pump(Arc::clone(&client), Arc::clone(&server), reliability(&up)));
    // Either direction ending (its source closed) ends the relay.
    tokio::select! {
        _ = to_client => {}
        _ = to_server => {}
    }
    server.close(0, b"relay done").await;
    client.close(0, b"relay done").await;
    Ok(())
}

/// Copies messages from `from` to `to` in order; returns when `from` has ended.
async fn pump(from: Arc<ConnectionHandle>, to: Arc<ConnectionHandle>, reliability: Reliability) {
    loop {
        match from.read_message().await {
            Ok(Delivery::Message { data, .. }) => {
                if to.send_message(data, reliability).await.is_err() {
                    return;
                }
            }
            Ok(Delivery::Gap { .. }) => {}
            Err(_) => return,
        }
    }
}
