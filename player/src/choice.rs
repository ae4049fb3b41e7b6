//! The transport a run uses, named once on the command line and parsed once.
//!
//! A name is a Braid profile (`mptcp`, `sedpf-fec4` …, optionally `PROFILE+CC` with a
//! controller from [`braid_transport::cc::registry`]) or a kernel transport (`kernel-tcp`,
//! `kernel-mptcp` …, real sockets only). [`TransportSpec`] is what clap parses (the name is
//! checked there, so a typo is a usage error naming the known ones); [`TransportSpec::
//! resolve`] applies `--cc` and gives the [`TransportChoice`] the runners take.

use std::fmt;
use std::str::FromStr;

use braid_io::kernel::KernelProfile;
use braid_transport::profile::{self, Profile, ProfileError};

/// The kind of stack behind a transport name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StackKind {
    /// Braid's own transport (simulator, relay emulator, real sockets).
    Braid,
    /// The Linux kernel's TCP or MPTCP (real sockets, or the TUN bed).
    Kernel,
    /// n0's noq multipath QUIC (`noq-multipath`: real sockets; `braid perf`, `serve`,
    /// `play`, and `braid compare --realtime`, `--gui` and `--bed`).
    Noq,
}

/// A transport name as given: a registry profile or a kernel one, with an optional
/// `+CC`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransportSpec {
    base: Base,
    own_cc: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Base {
    Braid(&'static str),
    Kernel(KernelProfile),
    Noq,
}

/// A transport, resolved: what runs.
#[derive(Clone, Debug)]
pub enum TransportChoice {
    /// A Braid profile with its controller.
    Braid(Profile),
    /// A kernel transport (its controller, if named, is the kernel's `TCP_CONGESTION`).
    Kernel {
        /// Which.
        profile: KernelProfile,
        /// The congestion control module asked for, if any.
        cc: Option<String>,
    },
}

impl TransportSpec {
    /// Which kind of stack it names.
    pub fn kind(&self) -> StackKind {
        match self.base {
            Base::Braid(_) => StackKind::Braid,
            Base::Kernel(_) => StackKind::Kernel,
            Base::Noq => StackKind::Noq,
        }
    }

    /// Whether it names `noq-multipath`.
    pub fn is_noq(&self) -> bool {
        self.base == Base::Noq
    }

    /// The kernel profile it names, if it is one.
    pub fn kernel(&self) -> Option<KernelProfile> {
        match self.base {
            Base::Kernel(k) => Some(k),
            Base::Braid(_) | Base::Noq => None,
        }
    }

    /// The name without its `+CC`.
    pub fn base_name(&self) -> &'static str {
        match self.base {
            Base::Braid(n) => n,
            Base::Kernel(k) => k.name(),
            Base::Noq => braid_io::noq_perf::NAME,
        }
    }

    /// The controller it runs with `--cc` given as `cc`: the name's own `+CC` first.
    pub fn cc_with(&self, cc: Option<&str>) -> Option<String> {
        self.own_cc.clone().or_else(|| cc.map(str::to_string))
    }

    /// The Braid profile it names, with `cc`; an error naming the bed for a kernel one
    /// (`what`: the runner that cannot carry it).
    pub fn braid_profile(&self, cc: Option<&str>, what: &str) -> anyhow::Result<Profile> {
        match self.resolve(cc)? {
            TransportChoice::Braid(p) => Ok(p),
            TransportChoice::Kernel { .. } => Err(anyhow::anyhow!(
                "profile {self} runs on real kernel sockets, which {what} cannot carry; run it across the TUN bed with --bed (root)"
            )),
        }
    }

    /// The transport with `cc` (`--cc`) as its controller unless the name gives its own.
    pub fn resolve(&self, cc: Option<&str>) -> Result<TransportChoice, ProfileError> {
        let cc = self.own_cc.as_deref().or(cc);
        match self.base {
            Base::Braid(name) => {
                let p = profile::lookup(name)?;
                Ok(TransportChoice::Braid(match cc {
                    Some(c) => p.with_controller(c)?,
                    None => p,
                }))
            }
            Base::Kernel(k) => {
                Ok(TransportChoice::Kernel { profile: k, cc: cc.map(str::to_string) })
            }
            Base::Noq => Err(ProfileError::NotHere {
                profile: braid_io::noq_perf::NAME.into(),
                reason: "runs on real sockets only: `braid perf`, `serve`, `play`, `compare --realtime`, `--gui` and `--bed` (n0's noq multipath QUIC, its own scheduler and controller)",
            }),
        }
    }
}

impl fmt::Display for TransportSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self.base_name();
        match &self.own_cc {
            Some(cc) => write!(f, "{name}+{cc}"),
            None => f.write_str(name),
        }
    }
}

impl FromStr for TransportSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<TransportSpec, String> {
        let s = s.trim();
        let (name, own_cc) = match s.split_once('+') {
            Some((n, c)) if !c.is_empty() => (n, Some(c.to_string())),
            Some(_) => return Err(format!("`{s}`: a controller name must follow `+`")),
            None => (s, None),
        };
        if let Some(k) = KernelProfile::parse(name) {
            return Ok(TransportSpec { base: Base::Kernel(k), own_cc });
        }
        if name == braid_io::noq_perf::NAME {
            if own_cc.is_some() {
                return Err(format!("`{s}`: {name} runs noq's own congestion controller"));
            }
            return Ok(TransportSpec { base: Base::Noq, own_cc });
        }
        match profile::REGISTRY.iter().find(|e| e.name == name) {
            Some(e) => {
                let spec = TransportSpec { base: Base::Braid(e.name), own_cc };
                // A refused `+CC` is refused here, at parse time, with the reason.
                if spec.own_cc.is_some() {
                    spec.resolve(None).map_err(|e| e.to_string())?;
                }
                Ok(spec)
            }
            None => Err(format!(
                "unknown profile `{name}` (known: {}, {}, {}; `braid profiles` describes them)",
                profile::names().join(", "),
                KernelProfile::ALL.map(KernelProfile::name).join(", "),
                braid_io::noq_perf::NAME
            )),
        }
    }
}

/// One row of `braid profiles`.
#[derive(Clone, Debug, serde::Serialize)]
pub struct RegistryRow {
    /// The name.
    pub name: &'static str,
    /// Braid's transport or the kernel's.
    pub stack: StackKind,
    /// The congestion controller.
    pub controller: &'static str,
    /// The packet scheduler.
    pub scheduler: &'static str,
    /// The energy-aware path policy.
    pub path_policy: String,
    /// Which paths it uses: `one` or `all`.
    pub paths: &'static str,
    /// Where it runs: `sim`, `realtime`, `sockets`, `bed`.
    pub runs_on: Vec<&'static str>,
    /// One line of description.
    pub description: &'static str,
}

/// Every transport name, Braid's profiles in registry order then the kernel's.
pub fn registry() -> Vec<RegistryRow> {
    let mut rows: Vec<RegistryRow> = profile::REGISTRY
        .iter()
        .map(|e| {
            let p = e.build();
            RegistryRow {
                name: e.name,
                stack: StackKind::Braid,
                controller: p.controller.build().name(),
                scheduler: p.scheduler.build().name(),
                path_policy: policy_name(&p),
                paths: match p.paths {
                    profile::PathUse::Single => "one",
                    profile::PathUse::All => "all",
                },
                runs_on: vec!["sim", "realtime", "sockets", "bed"],
                description: e.description,
            }
        })
        .collect();
    for k in KernelProfile::ALL {
        rows.push(RegistryRow {
            name: k.name(),
            stack: StackKind::Kernel,
            controller: "kernel",
            scheduler: if k.multipath() { "kernel" } else { "-" },
            path_policy: match k {
                KernelProfile::MptcpQe => "aesum shortfall (MP_PRIO backup flag)".into(),
                KernelProfile::MptcpQeBand => "aesum band (MP_PRIO backup flag)".into(),
                _ => "none".into(),
            },
            paths: if k.multipath() { "all" } else { "one" },
            runs_on: vec!["sockets", "bed"],
            description: k.description(),
        });
    }
    rows.push(RegistryRow {
        name: braid_io::noq_perf::NAME,
        stack: StackKind::Noq,
        controller: "noq",
        scheduler: "noq",
        path_policy: "none".into(),
        paths: "all",
        runs_on: vec!["sockets", "bed"],
        description: braid_io::noq_perf::DESCRIPTION,
    });
    rows
}

fn policy_name(p: &Profile) -> String {
    use braid_transport::policy::{AeSumRule, PathPolicy};
    let mut s = match p.path_policy {
        PathPolicy::None => "none".to_string(),
        PathPolicy::Handover => "handover".to_string(),
        PathPolicy::Emtcp => "emtcp offload".to_string(),
        PathPolicy::MptcpQe { aesum, wesack, rule } => {
            let mut parts = Vec::new();
            if aesum {
                parts.push(match rule {
                    AeSumRule::Shortfall => "aesum shortfall",
                    AeSumRule::SampleBand => "aesum band",
                    AeSumRule::Paper => "aesum",
                });
            }
            if wesack {
                parts.push("wesack");
            }
            if parts.is_empty() { "mptcp-qe (none on)".into() } else { parts.join(" + ") }
        }
    };
    if let Some(tau) = p.fec {
        s.push_str(&format!(" + code tau={tau}"));
    }
    if p.reinject.is_some() {
        s.push_str(" + qoe re-injection");
    }
    s
}

/// The registry as `braid profiles` prints it: a table.
pub fn registry_table() -> String {
    use std::fmt::Write as _;
    let rows = registry();
    let w = |head: &str, f: fn(&RegistryRow) -> String| {
        rows.iter().map(|r| f(r).len()).chain([head.len()]).max().unwrap_or(0)
    };
    let (wn, wc, ws, wp) = (
        w("profile", |r| r.name.to_string()),
        w("controller", |r| r.controller.to_string()),
        w("scheduler", |r| r.scheduler.to_string()),
        w("path policy", |r| r.path_policy.clone()),
    );
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:wn$}  {:wc$}  {:ws$}  {:wp$}  paths  description",
        "profile", "controller", "scheduler", "path policy"
    );
    for r in &rows {
        let _ = writeln!(
            out,
            "{:wn$}  {:wc$}  {:ws$}  {:wp$}  {:5}  {}",
            r.name, r.controller, r.scheduler, r.path_policy, r.paths, r.description
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_once_with_their_controller() {
        let s: TransportSpec = "mptcp+bbr".parse().unwrap();
        assert_eq!(s.kind(), StackKind::Braid);
        assert_eq!(s.to_string(), "mptcp+bbr");
        match s.resolve(Some("reno")).unwrap() {
            TransportChoice::Braid(p) => assert_eq!(p.name, "mptcp+bbr"),
            other => panic!("{other:?}"),
        }
        let k: TransportSpec = "kernel-mptcp".parse().unwrap();
        assert_eq!(k.kernel(), Some(KernelProfile::Mptcp));
        assert!("nope".parse::<TransportSpec>().unwrap_err().contains("kernel-mptcp"));
        assert!("mptcp+".parse::<TransportSpec>().is_err());
        // A refused combination is refused when parsed.
        assert!("tfrc+reno".parse::<TransportSpec>().is_err());
        assert!("tcp+nope".parse::<TransportSpec>().is_err());
    }

    #[test]
    fn the_registry_lists_every_profile_and_kernel_transport_once() {
        let rows = registry();
        let names: Vec<&str> = rows.iter().map(|r| r.name).collect();
        // Braid's profiles, the kernel's and noq-multipath.
        assert_eq!(names.len(), profile::names().len() + KernelProfile::ALL.len() + 1);
        assert_eq!(names.iter().filter(|x| **x == braid_io::noq_perf::NAME).count(), 1);
        let noq: TransportSpec = braid_io::noq_perf::NAME.parse().unwrap();
        assert!(noq.is_noq() && noq.kernel().is_none());
        assert!(noq.resolve(None).is_err(), "noq-multipath has no Braid profile to resolve to");
        for n in profile::names() {
            assert_eq!(names.iter().filter(|x| **x == n).count(), 1, "{n}");
        }
        let qe = rows.iter().find(|r| r.name == "mptcp-qe").unwrap();
        assert_eq!(qe.path_policy, "aesum shortfall + wesack");
        assert!(registry_table().lines().count() == rows.len() + 1);
    }
}
