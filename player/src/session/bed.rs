//! A streaming session across the TUN bed (`braid compare --bed` on a stream workload):
//! the server runs on a thread in the bed's server namespace, the client on a thread in
//! its client namespace, both in this process — each with a runtime of its own, whose
//! threads (and sockets) stay in that namespace — so the client measures every message's
//! in-order delay against the server's send time on one clock, as the in-process
//! real-time sessions do. The profile is Braid's own (over the bed's UDP paths) or a
//! kernel one (over one TCP/MPTCP socket whose subflows the kernel spreads over the
//! paths).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context as _, bail};
use braid_io::bed::{Bed, BedPath};
use braid_io::driver::{self, PathSpec};
use braid_io::kernel::conn::{ClientSetup, KernelConnection};
use braid_io::kernel::meter::KernelPath;
use braid_io::kernel::{self, KernelProfile};
use braid_io::noq_media;
use braid_media::playout::PlayoutPolicy;
use braid_transport::profile::{MediaReliability, PathUse, Profile, Side};

use super::compare::RealtimeMedia;
use super::config;
use super::realtime::{self, PlayOptions, PlayOutcome, SendLog};
use super::stream::ClientConfig;

/// Which transport a bed session runs.
#[derive(Clone, Debug)]
pub enum BedProfile {
    /// Braid's own, both ends with this profile.
    BuiltIn(Profile),
    /// A kernel socket with this controller.
    Kernel(KernelProfile, String),
    /// n0's noq multipath QUIC at both ends (`noq-multipath`), its own controller.
    Noq,
}

/// Runs `f` on a new thread inside network namespace `ns` (threads it starts stay there).
fn in_namespace<T: Send + 'static>(
    ns: &str,
    name: &str,
    f: impl FnOnce() -> anyhow::Result<T> + Send + 'static,
) -> anyhow::Result<std::thread::JoinHandle<anyhow::Result<T>>> {
    let path = format!("/run/netns/{ns}");
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let file = std::fs::File::open(&path).with_context(|| format!("opening {path}"))?;
            use std::os::fd::AsRawFd as _;
            // SAFETY: a valid namespace descriptor; setns changes only this thread.
            if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                return Err(std::io::Error::last_os_error())
                    .with_context(|| format!("entering namespace {path}"));
            }
            f()
        })
        .context("starting a namespace thread")
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// One stream of `media` across `bed` (built from the scenario `media` came from) with
/// `profile`, for `duration`; returns what the client played, with every message's
/// in-order delay.
pub fn stream(
    bed: &Bed,
    media: &RealtimeMedia,
    profile: &BedProfile,
    duration: Duration,
    stop: &AtomicBool,
) -> anyhow::Result<PlayOutcome> {
    let identity = braid_io::tls::self_signed().context("making the server certificate")?;
    let server_ip = bed.server_addr();
    let send_log = SendLog::default();
    let done = Arc::new(AtomicBool::new(false));
    let (port_tx, port_rx) = std::sync::mpsc::channel::<anyhow::Result<u16>>();
    let (clip, loop_for) = (media.clip(), media.loop_for(duration));
    let server = {
        let (profile, crypto, log, done) =
            (profile.clone(), identity.crypto.clone(), send_log.clone(), Arc::clone(&done));
        in_namespace(&bed.names().server_ns(), "bed-server", move || {
            let rt = runtime()?;
            rt.block_on(async move {
                let any = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0);
                match profile {
                    BedProfile::BuiltIn(p) => {
                        let cfg = config::real_time(&p, Side::Server, None);
                        let ep = match driver::listen(any, cfg, crypto).await {
                            Ok(ep) => ep,
                            Err(e) => {
                                let _ = port_tx.send(Err(e.into()));
                                return Ok(());
                            }
                        };
                        let _ = port_tx.send(Ok(ep.local_addr().port()));
                        let accept = tokio::time::timeout(Duration::from_secs(10), ep.accept());
                        let Ok(Some(conn)) = accept.await else { return Ok(()) };
                        let conn = Arc::new(conn);
                        let serving = realtime::serve(conn, clip, p.media, loop_for, Some(log));
                        wait_or_done(serving, &done).await
                    }
                    BedProfile::Kernel(k, cc) => {
                        let listener = match kernel::socket::listen(k, any, &cc) {
                            Ok(l) => l,
                            Err(e) => {
                                let _ = port_tx.send(Err(e.into()));
                                return Ok(());
                            }
                        };
                        let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
                        listener.set_nonblocking(true).context("listening")?;
                        let listener = tokio::net::TcpListener::from_std(listener)?;
                        let _ = port_tx.send(Ok(port));
                        let accept =
                            tokio::time::timeout(Duration::from_secs(10), listener.accept());
                        let Ok(Ok((sock, _))) = accept.await else { return Ok(()) };
                        let conn =
                            Arc::new(KernelConnection::accept(sock.into_std()?, &cc, &crypto)?);
                        let r = serve_reliably(&conn, clip, loop_for, log, &done).await;
                        conn.close().await;
                        r
                    }
                    BedProfile::Noq => {
                        let listener = match noq_media::NoqMediaListener::bind(any, &crypto) {
                            Ok(l) => l,
                            Err(e) => {
                                let _ = port_tx.send(Err(e.into()));
                                return Ok(());
                            }
                        };
                        let _ = port_tx
                            .send(listener.local_addr().map(|a| a.port()).map_err(Into::into));
                        let Ok(conn) = listener.accept().await else { return Ok(()) };
                        let conn = Arc::new(conn);
                        let r = serve_reliably(&conn, clip, loop_for, log, &done).await;
                        conn.close(0, b"done").await;
                        r
                    }
                }
            })
        })?
    };
    let port = match port_rx.recv_timeout(Duration::from_secs(10)) {
        Ok(Ok(p)) => p,
        Ok(Err(e)) => return Err(e.context("starting the server in the bed")),
        Err(_) => bail!("the server in the bed did not start"),
    };
    let remote = SocketAddr::new(server_ip, port);
    let client = {
        let profile = profile.clone();
        let paths: Vec<BedPath> = bed.paths().to_vec();
        let client_ns = bed.names().client_ns();
        let crypto = identity.pinned_client();
        let (reference, clip_name, buffer_s, power) =
            (media.reference(), media.name.clone(), media.buffer_s(), media.power.clone());
        // The scenario's download-ahead, as every other front end sizes it.
        let recv = super::stream_buffer_bytes(&media.clip(), media.max_buffer_s());
        let idle = media.idle_timeout();
        in_namespace(&client_ns.clone(), "bed-client", move || {
            let rt = runtime()?;
            let names: Vec<String> = paths.iter().map(|p| p.name.clone()).collect();
            let opts = PlayOptions {
                client: ClientConfig {
                    policy: PlayoutPolicy::adaptive(),
                    buffer_s,
                    ..ClientConfig::default()
                },
                limit: Some(duration),
                reference: Some(reference),
                clip_name,
                display: None,
                wake: Arc::new(|| {}),
                path_names: names,
                send_log: Some(send_log),
            };
            rt.block_on(async move {
                match profile {
                    BedProfile::BuiltIn(p) => {
                        let mut specs: Vec<PathSpec> = paths
                            .iter()
                            .map(|b| PathSpec {
                                local: SocketAddr::new(IpAddr::V4(b.client_ip), 0),
                                iface: None,
                                remote,
                                role: b.role,
                            })
                            .collect();
                        if p.paths == PathUse::Single {
                            specs.truncate(1);
                        }
                        let cfg = config::real_time_with(&p, Side::Client, Some(recv), idle);
                        let options = driver::ConnectOptions {
                            power,
                            ..driver::ConnectOptions::with_path_policy(p.path_policy)
                        };
                        let conn = driver::connect_with(cfg, crypto, specs, options)
                            .await
                            .context("connecting across the bed")?;
                        realtime::play(Arc::new(conn), opts).await
                    }
                    BedProfile::Kernel(k, cc) => {
                        let mut kpaths: Vec<KernelPath> = paths
                            .iter()
                            .map(|b| KernelPath {
                                name: b.name.clone(),
                                local: Some(IpAddr::V4(b.client_ip)),
                                role: b.role,
                                capacity_bps: b.down_bps,
                            })
                            .collect();
                        if !k.multipath() {
                            kpaths.truncate(1);
                        }
                        let setup = ClientSetup {
                            power,
                            recv_buffer: Some(recv as usize),
                            netns: Some(client_ns),
                            ..ClientSetup::new(k, &cc, kpaths)
                        };
                        let conn = tokio::task::spawn_blocking(move || {
                            KernelConnection::connect(remote, setup, &crypto)
                        })
                        .await
                        .context("the connecting thread failed")?
                        .context("connecting across the bed")?;
                        let conn = Arc::new(conn);
                        let out = realtime::play(Arc::clone(&conn), opts).await;
                        conn.close().await;
                        out
                    }
                    BedProfile::Noq => {
                        let npaths: Vec<noq_media::NoqPath> = paths
                            .iter()
                            .map(|b| noq_media::NoqPath {
                                name: b.name.clone(),
                                local: Some(IpAddr::V4(b.client_ip)),
                                remote,
                                role: b.role,
                            })
                            .collect();
                        let conn = noq_media::connect(&npaths, &crypto, Some(recv), &power)
                            .await
                            .context("connecting across the bed")?;
                        let conn = Arc::new(conn);
                        let out = realtime::play(Arc::clone(&conn), opts).await;
                        conn.close(0, b"done").await;
                        out
                    }
                }
            })
        })?
    };
    // Wait for the client (or a stop), then end the server.
    while !client.is_finished() && !stop.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(20));
    }
    done.store(true, Ordering::SeqCst);
    if stop.load(Ordering::SeqCst) {
        bail!("interrupted");
    }
    let outcome = client.join().map_err(|_| anyhow::anyhow!("the client thread panicked"))?;
    let served = server.join().map_err(|_| anyhow::anyhow!("the server thread panicked"))?;
    match (outcome, served) {
        (Err(e), Err(se)) => Err(e.context(format!("server: {se:#}"))),
        (o, _) => o,
    }
}

/// Runs `serving` until it ends or `done` is set.
/// Serves the clip on a reliable byte stream (a kernel socket, noq: every message
/// delivered, none abandoned) until it ends or `done` is set.
async fn serve_reliably<C: super::transport::MediaConnection>(
    conn: &Arc<C>,
    clip: Arc<braid_media::source::Clip>,
    loop_for: Option<Duration>,
    log: SendLog,
    done: &AtomicBool,
) -> anyhow::Result<()> {
    let serving =
        realtime::serve(Arc::clone(conn), clip, MediaReliability::Reliable, loop_for, Some(log));
    wait_or_done(serving, done).await
}

async fn wait_or_done(
    serving: impl std::future::Future<Output = anyhow::Result<()>>,
    done: &AtomicBool,
) -> anyhow::Result<()> {
    tokio::pin!(serving);
    loop {
        tokio::select! {
            r = &mut serving => return r,
            _ = tokio::time::sleep(Duration::from_millis(50)) => {
                if done.load(Ordering::SeqCst) {
                    return Ok(());
                }
            }
        }
    }
}
