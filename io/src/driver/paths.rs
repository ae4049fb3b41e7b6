//! What a client connects with and what it reports of its paths: [`PathSpec`],
//! [`ConnectOptions`], [`PathInfo`], and the task's view of a path's socket.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use tokio::net::UdpSocket;

use braid_transport::energy::PowerModels;
use braid_transport::path::{PathId, PathRole};
use braid_transport::policy::{AeSumConfig, PathPolicy};

use super::DEFAULT_HANDSHAKE_TIMEOUT;

/// One path a client opens: its socket's local address (port 0 = any) and optional
/// interface, the remote it talks to, and the access-network role announced to the peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathSpec {
    /// Local address to bind (an unspecified IP and/or port 0 let the OS choose).
    pub local: SocketAddr,
    /// Interface to bind to with `SO_BINDTODEVICE` (Linux only).
    pub iface: Option<String>,
    /// The server (or relay) address this path sends to.
    pub remote: SocketAddr,
    /// The access network, announced in the handshake / PATH_JOIN.
    pub role: PathRole,
}

impl PathSpec {
    /// A path from any local address of `remote`'s family to `remote`.
    pub fn to(remote: SocketAddr, role: PathRole) -> PathSpec {
        PathSpec { local: unspecified_for(remote), iface: None, remote, role }
    }
}

/// The unspecified address (port 0) of `remote`'s family.
pub fn unspecified_for(remote: SocketAddr) -> SocketAddr {
    match remote.ip() {
        IpAddr::V4(_) => SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0),
        IpAddr::V6(_) => SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0),
    }
}

/// Client options beyond the connection's [`Config`].
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    /// Give up when the handshake has not completed after this long.
    pub handshake_timeout: Duration,
    /// The receiver-side path policy to run beside the connection (the profile's:
    /// aeSUM's Partial/Full mode switch for `mptcp-qe`, WiFi-first handover for
    /// `handover`); [`PathPolicy::None`] runs none.
    pub path_policy: PathPolicy,
    /// aeSUM's settings, when the policy runs it.
    pub aesum: AeSumConfig,
    /// The client's radio parameters per role (the built-in ones unless replaced).
    pub power: PowerModels,
    /// A NEW_TOKEN token from an earlier connection to the same server
    /// ([`crate::driver::ConnectionHandle::take_new_token`]), sent in the Initial so the
    /// server can skip address validation (RFC 9000 §8.1.3). Use each token once.
    pub token: Option<Vec<u8>>,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
            path_policy: PathPolicy::None,
            aesum: AeSumConfig::default(),
            power: PowerModels::default(),
            token: None,
        }
    }
}

impl ConnectOptions {
    /// The defaults, running `policy` beside the connection (a profile's `path_policy`).
    pub fn with_path_policy(policy: PathPolicy) -> ConnectOptions {
        ConnectOptions {
            path_policy: policy,
            aesum: policy.aesum_config(),
            ..ConnectOptions::default()
        }
    }
}

/// A client path as the driver sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathInfo {
    /// The connection's id for the path (`None` if it could not be added).
    pub id: Option<PathId>,
    /// The socket's local address.
    pub local: SocketAddr,
    /// The remote address.
    pub remote: SocketAddr,
    /// The interface it is bound to.
    pub iface: Option<String>,
    /// The role announced.
    pub role: PathRole,
    /// Why the path was given up (its socket failed), if it was.
    pub error: Option<String>,
}

/// One client path's socket, as the connection's task holds it.
pub(super) struct ClientPath {
    pub(super) sock: UdpSocket,
    /// Batched receives (GRO) on `sock`.
    pub(super) udp: quinn_udp::UdpSocketState,
    pub(super) local: SocketAddr,
    pub(super) remote: SocketAddr,
    /// The connection's id for it, once added.
    pub(super) id: Option<PathId>,
    pub(super) role: PathRole,
    /// Given up (its socket failed, or the connection refused to add it).
    pub(super) failed: bool,
}
