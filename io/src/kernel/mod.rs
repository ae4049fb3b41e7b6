//! Kernel transports: a TLS-protected message stream over a Linux stream socket —
//! plain TCP (`kernel-tcp`) or multipath TCP (`kernel-mptcp`, `kernel-mptcp-qe`) — with
//! the kernel's own congestion control (`TCP_CONGESTION`, cubic by default) and
//! per-subflow statistics read with `getsockopt` ([`info`]).
//!
//! - [`socket`]: opening, binding and listening (socket2, `IPPROTO_MPTCP` = 262).
//! - [`stream`]: access units framed on the byte stream (a 4-byte big-endian length
//!   before each message), through rustls, pumped by one thread per connection.
//! - [`info`]: `TCP_INFO`, `MPTCP_INFO`, `MPTCP_TCPINFO` and `MPTCP_SUBFLOW_ADDRS`.
//! - [`meter`]: the sender's subflow reports, the receiver's radios and aeSUM.
//! - [`side`]: the sender's reports as datagrams, for aeSUM (timely, unlike in-band).
//! - [`endpoint`]: `kernel-mptcp-qe`'s backup flag on the costly (LTE, 3G) paths'
//!   endpoints, and what happens when it cannot be changed.
//! - [`conn`]: a connection behind the player's calls (`braid serve` / `braid play`).
//! - [`perf`]: the bulk run of `braid perf` over a kernel socket.
//!
//! Kernel profiles need real sockets: the simulator and the UDP relay cannot carry them.

pub mod conn;
pub mod endpoint;
pub mod info;
pub mod meter;
pub mod perf;
pub mod side;
pub mod socket;
pub mod stream;

/// The congestion controller a kernel socket uses unless told otherwise (so runs are
/// comparable across machines whose default differs).
pub const DEFAULT_CC: &str = "cubic";

/// A transport profile run by the kernel.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum KernelProfile {
    /// One TCP connection (`kernel-tcp`).
    Tcp,
    /// Linux MPTCP, one subflow per path (`kernel-mptcp`).
    Mptcp,
    /// Linux MPTCP with the MPTCP-QE path policy flipping the backup flag of the costly
    /// (LTE, 3G) paths' endpoints (`kernel-mptcp-qe`).
    MptcpQe,
    /// The same with aeSUM's earlier band rule (`kernel-mptcp-qe-band`, an ablation:
    /// Full after five agreeing samples under 0.75 × the read rate).
    MptcpQeBand,
}

impl KernelProfile {
    /// The profile called `name`, if it is a kernel one.
    pub fn parse(name: &str) -> Option<KernelProfile> {
        match name {
            "kernel-tcp" => Some(KernelProfile::Tcp),
            "kernel-mptcp" => Some(KernelProfile::Mptcp),
            "kernel-mptcp-qe" => Some(KernelProfile::MptcpQe),
            "kernel-mptcp-qe-band" => Some(KernelProfile::MptcpQeBand),
            _ => None,
        }
    }

    /// Its fixed name.
    pub fn name(self) -> &'static str {
        match self {
            KernelProfile::Tcp => "kernel-tcp",
            KernelProfile::Mptcp => "kernel-mptcp",
            KernelProfile::MptcpQe => "kernel-mptcp-qe",
            KernelProfile::MptcpQeBand => "kernel-mptcp-qe-band",
        }
    }

    /// One line for `braid profiles`.
    pub fn description(self) -> &'static str {
        match self {
            KernelProfile::Tcp => {
                "the kernel's TCP on one path (real sockets or the TUN bed), TLS 1.3 over the byte stream"
            }
            KernelProfile::Mptcp => {
                "the kernel's MPTCP, one subflow per path, its default scheduler and the path's TCP_CONGESTION"
            }
            KernelProfile::MptcpQe => {
                "kernel-mptcp with the MPTCP-QE path policy: aeSUM (mptcp-qe's rule) on the receiver flips the LTE/3G endpoints' backup flag (MP_PRIO)"
            }
            KernelProfile::MptcpQeBand => {
                "kernel-mptcp-qe with aeSUM's earlier band rule, as mptcp-qe-band (ablation)"
            }
        }
    }

    /// Whether the socket is an MPTCP one.
    pub fn multipath(self) -> bool {
        !matches!(self, KernelProfile::Tcp)
    }

    /// Whether it runs the MPTCP-QE mode switch, and with which aeSUM settings.
    pub fn aesum(self) -> Option<braid_transport::policy::AeSumConfig> {
        match self {
            // As `mptcp-qe` runs it: the paper's rule alone flaps (docs/ALGORITHMS.md).
            KernelProfile::MptcpQe => Some(braid_transport::policy::AeSumConfig::band()),
            KernelProfile::MptcpQeBand => Some(braid_transport::policy::AeSumConfig::sample_band()),
            _ => None,
        }
    }

    /// All of them.
    pub const ALL: [KernelProfile; 4] = [
        KernelProfile::Tcp,
        KernelProfile::Mptcp,
        KernelProfile::MptcpQe,
        KernelProfile::MptcpQeBand,
    ];
}

/// Whether `name` is a kernel profile.
pub fn is_kernel_profile(name: &str) -> bool {
    KernelProfile::parse(name).is_some()
}

/// What went wrong on a kernel socket.
#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    /// A socket call failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// TLS failed.
    #[error("TLS: {0}")]
    Tls(String),
    /// The peer sent a frame longer than allowed.
    #[error("the peer sent a {0}-byte frame (at most {max})", max = stream::MAX_FRAME)]
    FrameTooLong(usize),
    /// The peer closed the connection.
    #[error("the connection was closed")]
    Closed,
    /// The connection ended with an error.
    #[error("{0}")]
    Ended(String),
}

impl KernelError {
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> KernelError {
        KernelError::Io { what: what.into(), source }
    }
}
