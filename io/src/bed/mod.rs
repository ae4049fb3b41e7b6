//! The TUN network-namespace test bed (Linux, root): two network namespaces, client and
//! server, joined by one TUN "cable" per scenario path, each cable's ends driven by the
//! scenario's link model ([`emu`]). Kernel TCP and MPTCP, Braid's own transport and any
//! program run in the namespaces cross the same emulated links.
//!
//! Names: everything carries [`PREFIX`] and a suffix per bed — namespaces `brdSUFc`
//! (client) and `brdSUFs` (server), devices `brdSUFIc` / `brdSUFIs` for path `I` — so two
//! beds never touch each other and cleanup is exact.
//!
//! Addresses: path `I` is the point-to-point pair `10.77.I.1` (client) — `10.77.I.2`
//! (server); the server is reached at `10.77.0.2` ([`Bed::server_addr`]) over any path.
//! Client routing: the main table sends to the server over path 0; one source rule per
//! further path (`from 10.77.I.1 lookup 100+I`) sends traffic from its address over its
//! cable. MPTCP: limits raised on both sides and, in the client namespace, one `subflow`
//! endpoint per further path (`ip mptcp endpoint add 10.77.I.1 dev … subflow`), so the
//! kernel's path manager opens one subflow per path. Configuration uses iproute2's `ip`.

pub mod emu;
pub mod gso;
pub mod tun;

use std::net::{IpAddr, Ipv4Addr};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use braid_netem::scenario::Scenario;
use braid_transport::PathRole;

use self::emu::EmuCounters;

/// Whether the cables use TCP segmentation offload and batched writes ([`gso`]); the
/// environment variable `BRAID_BED_OFFLOAD=off` turns both off (one packet per `read` and
/// per `write`, as without them), to measure what they save.
pub fn offloads_enabled() -> bool {
    std::env::var("BRAID_BED_OFFLOAD").map_or(true, |v| v != "off")
}

/// Every bed name starts with this.
pub const PREFIX: &str = "brd";
/// The routing table of path `I` is `TABLE_BASE + I`.
const TABLE_BASE: usize = 100;
/// At most this many paths (device names must fit IFNAMSIZ).
pub const MAX_PATHS: usize = 16;

/// Why a bed could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BedError {
    /// Not root.
    #[error("the bed needs root (network namespaces and TUN devices); run as root")]
    NotRoot,
    /// The scenario does not fit.
    #[error("{0}")]
    Scenario(String),
    /// A command failed.
    #[error("`{cmd}` failed: {message}")]
    Command {
        /// The command line.
        cmd: String,
        /// Its error output.
        message: String,
    },
    /// A system call failed.
    #[error("{what}: {source}")]
    Io {
        /// What was done.
        what: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// A bed of that name exists already.
    #[error("bed {0} is already up")]
    Exists(String),
}

/// Runs `ip ARGS`, failing with its stderr.
pub fn ip(args: &[&str]) -> Result<(), BedError> {
    let out = Command::new("ip").args(args).output().map_err(|e| BedError::Command {
        cmd: format!("ip {}", args.join(" ")),
        message: format!("{e} (is iproute2 installed?)"),
    })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(BedError::Command {
            cmd: format!("ip {}", args.join(" ")),
            message: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

/// Whether this process runs as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The network namespaces whose names start with `prefix`.
pub fn namespaces_with_prefix(prefix: &str) -> Vec<String> {
    std::fs::read_dir("/run/netns")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().to_string())
                .filter(|n| n.starts_with(prefix))
                .collect()
        })
        .unwrap_or_default()
}

/// One path of a bed.
#[derive(Clone, Debug, PartialEq)]
pub struct BedPath {
    /// The scenario path's name.
    pub name: String,
    /// Its role.
    pub role: PathRole,
    /// The client's address on it.
    pub client_ip: Ipv4Addr,
    /// The server's address on it.
    pub server_ip: Ipv4Addr,
    /// The client-side device.
    pub client_dev: String,
    /// The server-side device.
    pub server_dev: String,
    /// The capacity of its server → client chain, bit/s (when fixed).
    pub down_bps: Option<f64>,
}

/// A bed's names (no resources).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BedNames {
    /// `brd` + suffix.
    pub base: String,
}

impl BedNames {
    /// The names for `suffix` (at most 6 lower-case letters or digits).
    pub fn new(suffix: &str) -> Result<BedNames, BedError> {
        if suffix.is_empty()
            || suffix.len() > 6
            || !suffix.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        {
            return Err(BedError::Scenario(format!(
                "bed suffix must be 1 to 6 lower-case letters or digits, got `{suffix}`"
            )));
        }
        Ok(BedNames { base: format!("{PREFIX}{suffix}") })
    }

    /// A suffix unique to this process.
    pub fn for_process() -> BedNames {
        BedNames { base: format!("{PREFIX}{:05x}", std::process::id() & 0xf_ffff) }
    }

    /// The client namespace.
    pub fn client_ns(&self) -> String {
        format!("{}c", self.base)
    }

    /// The server namespace.
    pub fn server_ns(&self) -> String {
        format!("{}s", self.base)
    }

    /// Whether either namespace exists.
    pub fn exists(&self) -> bool {
        let ns = namespaces_with_prefix(&self.base);
        ns.contains(&self.client_ns()) || ns.contains(&self.server_ns())
    }

    /// Removes both namespaces (their TUN ends go with the emulator's descriptors);
    /// quiet when they do not exist.
    pub fn remove(&self) {
        for ns in [self.client_ns(), self.server_ns()] {
            if std::path::Path::new("/run/netns").join(&ns).exists() {
                let _ = ip(&["netns", "del", &ns]);
            }
        }
    }
}

/// A running bed: removed when dropped.
pub struct Bed {
    names: BedNames,
    paths: Vec<BedPath>,
    stop: Arc<AtomicBool>,
    emulator: Option<std::thread::JoinHandle<()>>,
    counters: Arc<EmuCounters>,
    up: bool,
}

impl std::fmt::Debug for Bed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bed").field("names", &self.names).field("paths", &self.paths).finish()
    }
}

impl Bed {
    /// Builds the bed for `scenario` under `names`, its links seeded with `seed`.
    pub fn up(scenario: &Scenario, names: BedNames, seed: u64) -> Result<Bed, BedError> {
        if !is_root() {
            return Err(BedError::NotRoot);
        }
        if scenario.paths.is_empty() || scenario.paths.len() > MAX_PATHS {
            return Err(BedError::Scenario(format!(
                "the bed needs 1 to {MAX_PATHS} paths, scenario \"{}\" has {}",
                scenario.name,
                scenario.paths.len()
            )));
        }
        if names.exists() {
            return Err(BedError::Exists(names.base.clone()));
        }
        let mut bed = Bed {
            names,
            paths: Vec::new(),
            stop: Arc::new(AtomicBool::new(false)),
            emulator: None,
            counters: Arc::default(),
            up: true,
        };
        // From here on, a failure drops `bed`, which removes what was made.
        bed.build(scenario, seed)?;
        Ok(bed)
    }

    fn build(&mut self, scenario: &Scenario, seed: u64) -> Result<(), BedError> {
        let (cns, sns) = (self.names.client_ns(), self.names.server_ns());
        ip(&["netns", "add", &cns])?;
        ip(&["netns", "add", &sns])?;
        for ns in [&cns, &sns] {
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
        }
        let mut ends = Vec::new();
        for (i, p) in scenario.paths.iter().enumerate() {
            let client_dev = format!("{}{i:x}c", self.names.base);
            let server_dev = format!("{}{i:x}s", self.names.base);
            let (cd, sd) = (client_dev.clone(), server_dev.clone());
            let io = |what: String| move |source| BedError::Io { what, source };
            let c = tun::in_namespace(&cns, move || tun::open_tun(&cd))
                .map_err(io(format!("creating TUN {client_dev} in {cns}")))?;
            let s = tun::in_namespace(&sns, move || tun::open_tun(&sd))
                .map_err(io(format!("creating TUN {server_dev} in {sns}")))?;
            ends.push((c, s));
            let client_ip = Ipv4Addr::new(10, 77, i as u8, 1);
            let server_ip = Ipv4Addr::new(10, 77, i as u8, 2);
            let (cip, sip) = (client_ip.to_string(), server_ip.to_string());
            ip(&["-n", &cns, "addr", "add", &cip, "peer", &sip, "dev", &client_dev])?;
            ip(&["-n", &sns, "addr", "add", &sip, "peer", &cip, "dev", &server_dev])?;
            // The server answers on 10.77.0.2 over every cable.
            if i > 0 {
                ip(&["-n", &sns, "addr", "add", "10.77.0.2/32", "dev", &server_dev])?;
            }
            for (ns, dev) in [(&cns, &client_dev), (&sns, &server_dev)] {
                ip(&["-n", ns, "link", "set", dev, "mtu", "1500", "up"])?;
            }
            let table = (TABLE_BASE + i).to_string();
            ip(&["-n", &cns, "route", "add", "10.77.0.0/16", "dev", &client_dev, "table", &table])?;
            ip(&["-n", &cns, "rule", "add", "from", &cip, "lookup", &table])?;
            if i == 0 {
                ip(&["-n", &cns, "route", "add", "default", "dev", &client_dev])?;
            }
            let down_bps = p
                .down
                .iter()
                .filter_map(|&l| scenario.links.get(l).and_then(|l| l.config.rate.nominal_bps()))
                .reduce(f64::min);
            self.paths.push(BedPath {
                name: p.name.clone(),
                role: p.role,
                client_ip,
                server_ip,
                client_dev,
                server_dev,
                down_bps,
            });
        }
        // MPTCP: limits both sides, one subflow endpoint per further client path.
        let n = (scenario.paths.len() + 1).min(8).to_string();
        for ns in [&cns, &sns] {
            // Kernels without MPTCP say so here; the bed still carries everything else.
            let _ = ip(&["-n", ns, "mptcp", "endpoint", "flush"]);
            let _ =
                ip(&["-n", ns, "mptcp", "limits", "set", "subflows", &n, "add_addr_accepted", &n]);
        }
        for p in self.paths.iter().skip(1) {
            let _ = ip(&[
                "-n",
                &cns,
                "mptcp",
                "endpoint",
                "add",
                &p.client_ip.to_string(),
                "dev",
                &p.client_dev,
                "subflow",
            ]);
        }
        let handle =
            emu::start(scenario, ends, seed, Arc::clone(&self.stop), Arc::clone(&self.counters))
                .map_err(|source| BedError::Io { what: "starting the emulator".into(), source })?;
        self.emulator = Some(handle);
        Ok(())
    }

    /// Its names.
    pub fn names(&self) -> &BedNames {
        &self.names
    }

    /// Its paths, in scenario order.
    pub fn paths(&self) -> &[BedPath] {
        &self.paths
    }

    /// Where the client reaches the server.
    pub fn server_addr(&self) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(10, 77, 0, 2))
    }

    /// The emulator's counters.
    pub fn counters(&self) -> &EmuCounters {
        &self.counters
    }

    /// Stops the emulator and removes the namespaces (also done on drop).
    pub fn down(mut self) {
        self.teardown();
    }

    fn teardown(&mut self) {
        if !self.up {
            return;
        }
        self.up = false;
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.emulator.take() {
            let _ = h.join();
        }
        self.names.remove();
    }
}

impl Drop for Bed {
    fn drop(&mut self) {
        self.teardown();
    }
}

/// Sets the backup flag of the endpoint with address `addr` in namespace `ns`
/// (`ip mptcp endpoint change ADDR backup|nobackup`).
pub fn set_endpoint_backup(ns: &str, addr: IpAddr, backup: bool) -> Result<(), BedError> {
    let flag = if backup { "backup" } else { "nobackup" };
    ip(&["-n", ns, "mptcp", "endpoint", "change", &addr.to_string(), flag])
}

/// SIGINT and SIGTERM set the returned flag instead of ending the process, so a bed's
/// owner can tear it down; call once.
pub fn catch_termination() -> Arc<AtomicBool> {
    static FLAG: AtomicBool = AtomicBool::new(false);
    extern "C" fn on_signal(_: libc::c_int) {
        FLAG.store(true, Ordering::SeqCst);
    }
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic (async-signal-safe).
        unsafe {
            libc::signal(sig, on_signal as *const () as libc::sighandler_t);
        }
    }
    let out = Arc::new(AtomicBool::new(false));
    let o = Arc::clone(&out);
    std::thread::spawn(move || {
        while !FLAG.load(Ordering::SeqCst) {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        o.store(true, Ordering::SeqCst);
    });
    out
}

/// Sets the backup flag of the endpoint with address `addr` in this process's namespace
/// (`ip mptcp endpoint change ADDR backup|nobackup`).
pub fn set_endpoint_backup_here(addr: IpAddr, backup: bool) -> Result<(), BedError> {
    let flag = if backup { "backup" } else { "nobackup" };
    ip(&["mptcp", "endpoint", "change", &addr.to_string(), flag])
}
