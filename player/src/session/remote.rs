//! Playing from a `braid serve` elsewhere: `braid play`, and an address opened in the
//! window.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc::Sender;
use std::time::Duration;

use anyhow::Context as _;
use braid_io::driver::{self, ConnectionHandle, DriverError, PathSpec};
use braid_io::kernel::conn::{ClientSetup, KernelConnection};
use braid_io::noq_media::{self, NoqMediaConnection, NoqPath};
use braid_media::decode::ffmpeg_decode_clip;
use braid_media::playout::PlayoutPolicy;
use braid_media::quality::Frame;
use braid_transport::PathRole;
use braid_transport::energy::PowerModels;
use braid_transport::profile::{Profile, Side};
use braid_transport::proto::ClientCrypto;

use super::config;
use super::live::PaneUpdate;
use super::live::Wake;
use super::paths::{self, NamedPath};
use super::realtime::{self, PlayOptions, PlayOutcome};
use super::stream::ClientConfig;

/// The bit rate a remote stream's download-ahead is sized for when the client does not
/// know it (no `--reference`), bits/s: the bundled H.264 clip's rate.
pub const ASSUMED_STREAM_BPS: f64 = 2e6;

/// The client's receive window: `max_buffer_s` seconds of media (`--max-buffer`) at
/// `stream_bps` (the reference clip's rate, else [`ASSUMED_STREAM_BPS`]); without it about
/// one second, so the player's buffer, not the transport's, decides how far ahead the
/// server gets. Within [64 KB, 256 MB], as the scenarios' `max_buffer_s` is.
pub fn recv_buffer_bytes(max_buffer_s: Option<f64>, stream_bps: Option<f64>) -> u64 {
    let bps = stream_bps.filter(|b| b.is_finite() && *b > 0.0).unwrap_or(ASSUMED_STREAM_BPS);
    let s = max_buffer_s.filter(|s| s.is_finite() && *s > 0.0).unwrap_or(1.0);
    ((bps / 8.0 * s) as u64).clamp(64 * 1024, 256 * 1024 * 1024)
}

/// Connects to a `braid serve` over `paths` with `profile`, authenticating it as `crypto`
/// says; the profile's receiver-side path policy (aeSUM for mptcp-qe) runs beside the
/// client, whose receive window is `recv_buffer` bytes.
pub async fn connect(
    profile: &Profile,
    crypto: ClientCrypto,
    paths: Vec<PathSpec>,
    power: &PowerModels,
    recv_buffer: u64,
    idle_timeout: Option<Duration>,
) -> Result<ConnectionHandle, DriverError> {
    let config = config::real_time_with(profile, Side::Client, Some(recv_buffer), idle_timeout);
    let options = driver::ConnectOptions {
        power: power.clone(),
        ..driver::ConnectOptions::with_path_policy(profile.path_policy)
    };
    driver::connect_with(config, crypto, paths, options).await
}

/// A client of the server at `addr` (`braid play`).
#[derive(Clone)]
pub struct RemotePlay {
    /// The server.
    pub addr: SocketAddr,
    /// This end's transport profile.
    pub profile: Profile,
    /// The paths to open.
    pub paths: Vec<NamedPath>,
    /// The playout policy.
    pub policy: PlayoutPolicy,
    /// Stop after this long.
    pub limit: Option<Duration>,
    /// The original clip's frames, for measured PSNR.
    pub reference: Option<Arc<Vec<Frame>>>,
    /// How the server is authenticated.
    pub crypto: ClientCrypto,
    /// The clip's name in reports.
    pub clip_name: String,
    /// The client keeps every frame ([`ClientConfig::keep_history`]), e.g. to write
    /// what was displayed.
    pub keep_history: bool,
    /// The client's radio parameters per role.
    pub power: PowerModels,
    /// Play over a kernel socket set up so (a kernel profile) instead of Braid's own
    /// transport.
    pub kernel: Option<ClientSetup>,
    /// Play over n0's noq (`noq-multipath`) instead of Braid's own transport.
    pub noq: bool,
    /// The download-ahead, seconds of media (`--max-buffer`).
    pub max_buffer_s: Option<f64>,
    /// The idle timeout the client announces (`--idle-timeout`; `None`: the transport's).
    pub idle_timeout: Option<Duration>,
    /// The stream's bit rate when known (from the reference clip), bits/s.
    pub stream_bps: Option<f64>,
}

impl RemotePlay {
    /// A client of `addr` over one path per `--path` text (see [`paths::client_paths`]),
    /// measuring PSNR against `reference` (decoded here) when given.
    pub fn new(
        addr: SocketAddr,
        path_texts: &[String],
        profile: Profile,
        policy: PlayoutPolicy,
        reference: Option<&Path>,
        limit: Option<Duration>,
        crypto: ClientCrypto,
    ) -> anyhow::Result<RemotePlay> {
        let (reference, clip_name, stream_bps) = match reference {
            Some(p) => {
                let clip = realtime::load_clip(p)?;
                let (frames, _) = ffmpeg_decode_clip(&clip)
                    .with_context(|| format!("decoding {}", p.display()))?;
                (Some(Arc::new(frames)), p.display().to_string(), Some(clip.info.bitrate_bps))
            }
            None => (None, format!("stream from {addr}"), None),
        };
        let paths = paths::client_paths(path_texts, addr, &profile)?;
        Ok(RemotePlay {
            addr,
            profile,
            paths,
            policy,
            limit,
            reference,
            crypto,
            clip_name,
            keep_history: false,
            power: PowerModels::default(),
            kernel: None,
            noq: false,
            max_buffer_s: None,
            idle_timeout: None,
            stream_bps,
        })
    }

    /// Connects over a kernel socket set up as `setup` says (its radios from this
    /// client's power models).
    pub async fn connect_kernel(
        &self,
        setup: &ClientSetup,
    ) -> anyhow::Result<Arc<KernelConnection>> {
        let setup = ClientSetup { power: self.power.clone(), ..setup.clone() };
        let (addr, crypto) = (self.addr, self.crypto.clone());
        let conn =
            tokio::task::spawn_blocking(move || KernelConnection::connect(addr, setup, &crypto))
                .await
                .context("the connecting thread failed")?
                .with_context(|| format!("connecting to {addr}"))?;
        Ok(Arc::new(conn))
    }

    /// Connects over n0's noq, one noq path per path (each from its local address; the
    /// first leaves from wherever routing sends it), the receive windows the
    /// download-ahead.
    pub async fn connect_noq(&self) -> anyhow::Result<Arc<NoqMediaConnection>> {
        if let Some(p) = self.paths.iter().find(|p| p.spec.iface.is_some()) {
            anyhow::bail!(
                "path {}: @IFACE binds Braid's sockets to an interface; noq-multipath sends from each path's local address",
                p.name
            );
        }
        let paths: Vec<NoqPath> = self
            .paths
            .iter()
            .map(|p| NoqPath {
                name: p.name.clone(),
                local: Some(p.spec.local.ip()).filter(|ip| !ip.is_unspecified()),
                remote: p.spec.remote,
                role: p.spec.role,
            })
            .collect();
        let recv = recv_buffer_bytes(self.max_buffer_s, self.stream_bps);
        let conn = noq_media::connect(&paths, &self.crypto, Some(recv), &self.power)
            .await
            .with_context(|| format!("connecting to {}", self.addr))?;
        Ok(Arc::new(conn))
    }

    /// Connects.
    pub async fn connect(&self) -> anyhow::Result<Arc<ConnectionHandle>> {
        let specs = self.paths.iter().map(|p| p.spec.clone()).collect();
        let recv = recv_buffer_bytes(self.max_buffer_s, self.stream_bps);
        let conn = connect(
            &self.profile,
            self.crypto.clone(),
            specs,
            &self.power,
            recv,
            self.idle_timeout,
        )
        .await
        .with_context(|| format!("connecting to {}", self.addr))?;
        Ok(Arc::new(conn))
    }

    /// How the client plays, showing on `display`.
    pub fn options(&self, display: Option<Sender<PaneUpdate>>, wake: Wake) -> PlayOptions {
        PlayOptions {
            client: ClientConfig {
                policy: self.policy.clone(),
                keep_history: self.keep_history,
                ..ClientConfig::default()
            },
            limit: self.limit,
            reference: self.reference.clone(),
            clip_name: self.clip_name.clone(),
            display,
            wake,
            path_names: self.paths.iter().map(|p| p.name.clone()).collect(),
            send_log: None,
        }
    }

    /// Connects and plays, showing on `tx` (when given).
    pub async fn run(
        self,
        tx: Option<Sender<PaneUpdate>>,
        wake: Wake,
    ) -> anyhow::Result<PlayOutcome> {
        if let Some(setup) = &self.kernel {
            let conn = self.connect_kernel(setup).await?;
            return realtime::play(conn, self.options(tx, wake)).await;
        }
        if self.noq {
            let conn = self.connect_noq().await?;
            let out = realtime::play(Arc::clone(&conn), self.options(tx, wake)).await;
            conn.close(0, b"done").await;
            return out;
        }
        let conn = self.connect().await?;
        realtime::play(conn, self.options(tx, wake)).await
    }
}

/// Plays the stream a `braid serve` at `addr` (`host:port#SHA256`, the fingerprint the
/// server printed) sends, over one path, with the adaptive policy (an address opened in
/// the window). `noq`: the server is a `braid serve --profile noq-multipath`.
pub async fn play_address(
    text: String,
    profile: Profile,
    noq: bool,
    tx: Sender<PaneUpdate>,
    wake: Wake,
) -> anyhow::Result<PlayOutcome> {
    let Some((addr, pin)) = text.split_once('#') else {
        anyhow::bail!("give the server's certificate fingerprint: HOST:PORT#SHA256 (got {text})");
    };
    let crypto = braid_io::tls::pinned(braid_io::tls::parse_fingerprint(pin)?);
    let addr = addr.to_owned();
    let remote = tokio::net::lookup_host(addr.as_str())
        .await
        .with_context(|| format!("cannot resolve {addr}"))?
        .next()
        .ok_or_else(|| anyhow::anyhow!("{addr} resolves to no address"))?;
    let play = RemotePlay {
        addr: remote,
        paths: vec![NamedPath {
            name: "path0".into(),
            spec: PathSpec::to(remote, PathRole::Wired),
        }],
        profile,
        policy: PlayoutPolicy::adaptive(),
        limit: None,
        reference: None,
        clip_name: format!("stream from {addr}"),
        crypto,
        keep_history: false,
        power: PowerModels::default(),
        kernel: None,
        noq,
        max_buffer_s: None,
        idle_timeout: None,
        stream_bps: None,
    };
    if noq {
        let conn = play.connect_noq().await.with_context(|| format!("no server at {addr}"))?;
        let out = realtime::play(Arc::clone(&conn), play.options(Some(tx), wake)).await;
        conn.close(0, b"done").await;
        return out;
    }
    let specs = play.paths.iter().map(|p| p.spec.clone()).collect();
    let recv = recv_buffer_bytes(play.max_buffer_s, play.stream_bps);
    let conn = connect(&play.profile, play.crypto.clone(), specs, &play.power, recv, None)
        .await
        .with_context(|| format!("no server at {addr}"))?;
    realtime::play(Arc::new(conn), play.options(Some(tx), wake)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_receive_window_holds_the_download_ahead_in_seconds_of_media() {
        // One second by default: 250 kB at the assumed 2 Mbit/s.
        assert_eq!(recv_buffer_bytes(None, None), 250_000);
        // 50 s of a 2 Mbit/s clip; of the assumed rate without a reference.
        assert_eq!(recv_buffer_bytes(Some(50.0), Some(2e6)), 12_500_000);
        assert_eq!(recv_buffer_bytes(Some(50.0), None), 12_500_000);
        assert_eq!(recv_buffer_bytes(Some(10.0), Some(64e3)), 80_000);
        // Bounded both ways.
        assert_eq!(recv_buffer_bytes(Some(0.01), Some(64e3)), 64 * 1024);
        assert_eq!(recv_buffer_bytes(Some(600.0), Some(1e9)), 256 * 1024 * 1024);
    }
}
