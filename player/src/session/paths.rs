//! Client paths from the command line: `--path LOCAL[@IFACE][/ROLE][=REMOTE]`.

use std::net::{IpAddr, SocketAddr};

use anyhow::bail;
use braid_io::driver::{self, PathSpec};
use braid_transport::PathRole;
use braid_transport::profile::{PathUse, Profile};

/// One client path and the name reports give it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamedPath {
    /// The interface, or `pathN`.
    pub name: String,
    /// The socket to open.
    pub spec: PathSpec,
}

/// Reads `--path` number `i` toward `remote`: a local IP or IP:PORT (empty: any),
/// optionally `@INTERFACE` (`SO_BINDTODEVICE`, Linux), and optionally `/ROLE`, the radio
/// behind it (`wifi`, `lte`, `3g` or `wired`; without one the path is `wired`: no radio
/// model, so no energy and nothing for a mode switch to act on), and optionally
/// `=REMOTE`, the address this path sends to instead of `remote` (a relay in front of the
/// server, such as a path of `braid netem`).
pub fn parse_path(text: &str, remote: SocketAddr, i: usize) -> anyhow::Result<NamedPath> {
    let (text_before, remote) = match text.split_once('=') {
        Some((rest, r)) => match r.parse::<SocketAddr>() {
            Ok(r) => (rest, r),
            Err(_) => bail!("--path {text}: `{r}` after = is not an address (expected IP:PORT)"),
        },
        None => (text, remote),
    };
    let (rest, role) = match text_before.rsplit_once('/') {
        Some((rest, r)) => match r.parse::<PathRole>() {
            Ok(role) => (rest, role),
            Err(e) => bail!("--path {text}: {e}"),
        },
        None => (text_before, PathRole::Wired),
    };
    let (local, iface) = match rest.split_once('@') {
        Some((l, i)) if !i.is_empty() => (l, Some(i.to_string())),
        Some(_) => bail!("--path {text}: empty interface name after @"),
        None => (rest, None),
    };
    let local: SocketAddr = if local.is_empty() {
        driver::unspecified_for(remote)
    } else if let Ok(sa) = local.parse::<SocketAddr>() {
        sa
    } else if let Ok(ip) = local.parse::<IpAddr>() {
        SocketAddr::new(ip, 0)
    } else {
        bail!(
            "--path {text}: `{local}` is not an IP address (expected LOCAL[@IFACE][/ROLE][=REMOTE], e.g. 192.168.1.5@wlan0/wifi)"
        )
    };
    if local.is_ipv4() != remote.is_ipv4() {
        bail!(
            "--path {text}: the local address and the server {remote} are of different IP families"
        );
    }
    let name = iface.clone().unwrap_or_else(|| format!("path{i}"));
    Ok(NamedPath { name, spec: PathSpec { local, iface, remote, role } })
}

/// The paths of a client of `remote`: one per `--path` text, or one path from any local
/// address (`path0`) when there is none; only the first for a one-path `profile`.
pub fn client_paths(
    texts: &[String],
    remote: SocketAddr,
    profile: &Profile,
) -> anyhow::Result<Vec<NamedPath>> {
    let mut paths = Vec::new();
    if texts.is_empty() {
        paths.push(NamedPath { name: "path0".into(), spec: PathSpec::to(remote, PathRole::Wired) });
    }
    for (i, t) in texts.iter().enumerate() {
        paths.push(parse_path(t, remote, i)?);
    }
    if profile.paths == PathUse::Single {
        paths.truncate(1);
    }
    Ok(paths)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_local_addresses_with_an_optional_interface() {
        let server: SocketAddr = "192.0.2.1:4433".parse().unwrap();
        let p = parse_path("10.0.0.2@wlan0", server, 0).unwrap();
        assert_eq!(p.name, "wlan0");
        assert_eq!(p.spec.local, "10.0.0.2:0".parse().unwrap());
        assert_eq!(p.spec.iface.as_deref(), Some("wlan0"));
        assert_eq!(parse_path("10.0.0.3:5000", server, 1).unwrap().name, "path1");
        assert_eq!(
            parse_path("@eth0", server, 0).unwrap().spec.local,
            "0.0.0.0:0".parse().unwrap()
        );
        let e = |t: &str| parse_path(t, server, 0).unwrap_err().to_string();
        assert!(e("10.0.0.2@").contains("empty interface name"));
        assert!(e("wlan0").contains("is not an IP address"));
        assert!(e("::1").contains("different IP families"));
    }

    #[test]
    fn a_role_suffix_names_the_radio_and_an_unknown_one_is_an_error() {
        let server: SocketAddr = "192.0.2.1:4433".parse().unwrap();
        let p = parse_path("10.0.0.2@wwan0/lte", server, 0).unwrap();
        assert_eq!(p.name, "wwan0");
        assert_eq!(p.spec.iface.as_deref(), Some("wwan0"));
        assert_eq!(p.spec.role, PathRole::Lte);
        assert_eq!(parse_path("10.0.0.3/wifi", server, 1).unwrap().spec.role, PathRole::Wifi);
        assert_eq!(parse_path("/3g", server, 1).unwrap().spec.role, PathRole::ThreeG);
        assert_eq!(parse_path("10.0.0.3", server, 1).unwrap().spec.role, PathRole::Wired);
        let six: SocketAddr = "[2001:db8::1]:4433".parse().unwrap();
        let p = parse_path("[2001:db8::2]:5000@eth0/wired", six, 0).unwrap();
        assert_eq!(p.spec.local, "[2001:db8::2]:5000".parse().unwrap());
        let via = parse_path("127.0.0.1/wifi=127.0.0.1:5001", server, 0).unwrap();
        assert_eq!(via.spec.remote, "127.0.0.1:5001".parse().unwrap());
        assert_eq!(via.spec.role, PathRole::Wifi);
        assert_eq!(parse_path("=127.0.0.1:5002", server, 1).unwrap().spec.remote.port(), 5002);
        let e = parse_path("127.0.0.1=relay", server, 0).unwrap_err().to_string();
        assert!(e.contains("after = is not an address"), "{e}");
        let e = parse_path("10.0.0.2@wlan0/5g", server, 0).unwrap_err().to_string();
        assert_eq!(
            e,
            "--path 10.0.0.2@wlan0/5g: unknown path role `5g` (expected wifi, lte, 3g or wired)"
        );
        assert!(!e.contains('\n'));
    }

    #[test]
    fn without_paths_a_client_opens_one_from_any_address() {
        let server: SocketAddr = "127.0.0.1:4433".parse().unwrap();
        let mptcp = braid_transport::profile::lookup("mptcp").unwrap();
        let p = client_paths(&[], server, &mptcp).unwrap();
        assert_eq!(
            p,
            [NamedPath { name: "path0".into(), spec: PathSpec::to(server, PathRole::Wired) }]
        );
        let two = ["127.0.0.1@lo".to_string(), "127.0.0.1".to_string()];
        assert_eq!(client_paths(&two, server, &mptcp).unwrap().len(), 2);
        let tcp = braid_transport::profile::lookup("tcp").unwrap();
        assert_eq!(client_paths(&two, server, &tcp).unwrap().len(), 1);
    }
}
