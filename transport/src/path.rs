//! Identifiers and descriptions shared by everything that deals with paths.

use std::fmt;
use std::str::FromStr;

/// Bytes of IPv4 + UDP header per datagram: what a link carries (and a radio transmits) on
/// top of a QUIC datagram's own length.
pub const IP_UDP_OVERHEAD: u32 = 28;

/// The energy rank of a radio kind: lower is cheaper to wake and keep awake (wired 0,
/// WiFi 1, LTE 2, 3G 3).
pub fn role_cost(role: PathRole) -> u8 {
    match role {
        PathRole::Wired => 0,
        PathRole::Wifi => 1,
        PathRole::Lte => 2,
        PathRole::ThreeG => 3,
    }
}

/// Identifies one path of a connection. Path 0 is the one the handshake used.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct PathId(pub u32);

impl fmt::Display for PathId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "path{}", self.0)
    }
}

/// What kind of access network a path uses. Drives the energy model and the path policies.
#[derive(
    Copy,
    Clone,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Default,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum PathRole {
    /// A WLAN radio.
    Wifi,
    /// An LTE radio.
    Lte,
    /// A 3G (UMTS/HSPA) radio.
    #[serde(rename = "3g")]
    ThreeG,
    /// A wired link: no radio energy.
    #[default]
    Wired,
}

impl PathRole {
    /// The name used in scenario files and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            PathRole::Wifi => "wifi",
            PathRole::Lte => "lte",
            PathRole::ThreeG => "3g",
            PathRole::Wired => "wired",
        }
    }

    /// Whether the radio is a costly one: LTE and 3G. Only a costly path's MPTCP endpoint
    /// is flagged as a backup in `kernel-mptcp-qe`'s Partial mode; WiFi and wired paths
    /// never are.
    pub fn is_costly(self) -> bool {
        matches!(self, PathRole::Lte | PathRole::ThreeG)
    }
}

impl fmt::Display for PathRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An unknown path role name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown path role `{0}` (expected wifi, lte, 3g or wired)")]
pub struct UnknownRole(pub String);

impl FromStr for PathRole {
    type Err = UnknownRole;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "wifi" => Ok(PathRole::Wifi),
            "lte" => Ok(PathRole::Lte),
            "3g" => Ok(PathRole::ThreeG),
            "wired" => Ok(PathRole::Wired),
            other => Err(UnknownRole(other.to_string())),
        }
    }
}

/// Whether a path carries data (the MP_PRIO analogue), as announced with PATH_STATUS.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum PathStatus {
    /// Carries data.
    #[default]
    Active,
    /// Used only when no active path is usable.
    Backup,
    /// Closed: carries nothing.
    Closed,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_lte_and_3g_are_costly() {
        let costly: Vec<PathRole> =
            [PathRole::Wifi, PathRole::Lte, PathRole::ThreeG, PathRole::Wired]
                .into_iter()
                .filter(|r| r.is_costly())
                .collect();
        assert_eq!(costly, [PathRole::Lte, PathRole::ThreeG]);
    }
}
