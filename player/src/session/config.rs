//! The connection configuration of every real-time front end (serve, play, perf, proxy,
//! demo, compare): [`Profile::connection_config`] on the real clock.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::bail;
use braid_transport::PathRole;
use braid_transport::energy::PowerModels;
use braid_transport::profile::{Clock, ConfigParams, Profile, Side};
use braid_transport::proto::Config;

/// `profile`'s configuration for `side` in real time, with the receive buffer (and so the
/// flow-control window) `recv_buffer_bytes` (`None`: the transport's default).
pub fn real_time(profile: &Profile, side: Side, recv_buffer_bytes: Option<u64>) -> Arc<Config> {
    real_time_with(profile, side, recv_buffer_bytes, None)
}

/// As [`real_time`], announcing the idle timeout `idle_timeout` (`None`: the transport's
/// default). The smaller of both sides' counts (RFC 9000 §10.1), so a client's
/// `--idle-timeout` or scenario `idle_timeout_s` holds against a default server.
pub fn real_time_with(
    profile: &Profile,
    side: Side,
    recv_buffer_bytes: Option<u64>,
    idle_timeout: Option<Duration>,
) -> Arc<Config> {
    let mut params = ConfigParams::new(side, Clock::Real);
    params.recv_buffer_bytes = recv_buffer_bytes;
    params.idle_timeout = idle_timeout;
    Arc::new(profile.connection_config(params))
}

/// An idle timeout in seconds (`--idle-timeout`): 0 (none) to 3600, as the scenario key
/// `idle_timeout_s`.
pub fn idle_timeout_s(text: &str) -> Result<Duration, String> {
    let s: f64 = text.trim().parse().map_err(|_| format!("not a number of seconds: {text:?}"))?;
    if !(s.is_finite() && (0.0..=3600.0).contains(&s)) {
        return Err(format!("must be between 0 (none) and 3600 seconds, got {text}"));
    }
    Ok(Duration::from_secs_f64(s))
}

/// The radio parameters of `--power ROLE=FILE` texts (files in the format of
/// `assets/power/*.toml`); every role not given keeps its built-in parameters. An unknown
/// role, a file that cannot be read or parsed, or one whose `radio` is another role is an
/// error of one line.
pub fn power_models(texts: &[String]) -> anyhow::Result<PowerModels> {
    let mut models = PowerModels::default();
    for text in texts {
        let Some((role, file)) = text.split_once('=') else {
            bail!("--power {text}: expected ROLE=FILE (ROLE: wifi, lte or 3g)");
        };
        let role: PathRole = match role.parse() {
            Ok(r) => r,
            Err(e) => bail!("--power {text}: {e}"),
        };
        let body = match std::fs::read_to_string(Path::new(file)) {
            Ok(b) => b,
            Err(e) => bail!("--power {text}: reading {file}: {e}"),
        };
        let one_line = |e: &dyn std::fmt::Display| {
            e.to_string().split_whitespace().collect::<Vec<_>>().join(" ")
        };
        let params = match braid_netem::power::radio_params_from_toml(&body) {
            Ok(p) => p,
            Err(e) => bail!("--power {text}: {}", one_line(&e)),
        };
        if let Err(e) = models.set(role, params) {
            bail!("--power {text}: {e}");
        }
    }
    Ok(models)
}

/// Parses `--max-buffer S`: the download-ahead in seconds of media, above 0 and at most
/// 600 (the scenario key `max_buffer_s` has the same rule).
pub fn max_buffer_s(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 && s <= 600.0 => Ok(s),
        _ => Err(format!(
            "expected a download-ahead in seconds of media above 0 and at most 600 (e.g. 50), got `{text}`"
        )),
    }
}

/// Parses `--battery J`: the viewer's battery capacity, a finite number of joules above
/// zero (the scenario key `battery_j` has the same rule).
pub fn battery_j(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(j) if j.is_finite() && j > 0.0 => Ok(j),
        _ => Err(format!("expected a battery capacity in joules above 0 (e.g. 300), got `{text}`")),
    }
}

#[cfg(test)]
mod tests {
    use braid_sim::main_flow_config;
    use braid_transport::profile::{self, REAL_TIME_KEEP_ALIVE};

    use super::*;

    #[test]
    fn power_files_replace_their_role_and_mistakes_are_one_line() {
        let dir = std::env::temp_dir().join(format!("braid-power-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let lte_text = include_str!("../../../assets/power/lte.toml");
        let doubled = lte_text.replace("beta_mw = ", "beta_mw = 2");
        let lte = dir.join("lte.toml");
        std::fs::write(&lte, &doubled).unwrap();
        let m = power_models(&[format!("lte={}", lte.display())]).unwrap();
        let builtin = braid_transport::energy::RadioParams::builtin(PathRole::Lte).unwrap();
        let got = m.params(PathRole::Lte).unwrap();
        assert_ne!(got, builtin);
        assert_eq!(got, braid_netem::power::radio_params_from_toml(&doubled).unwrap());
        assert_eq!(
            m.params(PathRole::Wifi),
            braid_transport::energy::RadioParams::builtin(PathRole::Wifi)
        );
        assert!(power_models(&[]).unwrap().is_builtin());
        let err = |t: String| {
            let e = format!("{:#}", power_models(&[t]).unwrap_err());
            assert!(!e.contains('\n'), "{e}");
            e
        };
        assert!(err(format!("5g={}", lte.display())).contains("unknown path role `5g`"));
        assert!(err(format!("wifi={}", lte.display())).contains("the file is for radio `lte`"));
        assert!(err(format!("wired={}", lte.display())).contains("has no radio"));
        assert!(err(lte.display().to_string()).contains("expected ROLE=FILE"));
        assert!(err("lte=/nonexistent/lte.toml".into()).contains("reading /nonexistent"));
        let bad = dir.join("bad.toml");
        std::fs::write(&bad, "radio = \"lte\"\nbeta_mw = [\n").unwrap();
        assert!(err(format!("lte={}", bad.display())).contains("power model"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_battery_is_a_positive_number_of_joules() {
        assert_eq!(battery_j("300"), Ok(300.0));
        assert_eq!(battery_j("0.5"), Ok(0.5));
        for bad in ["0", "-1", "inf", "NaN", "300J", ""] {
            let e = battery_j(bad).unwrap_err();
            assert!(e.contains("above 0"), "{bad}: {e}");
        }
    }

    /// What the simulator and the real-time front ends run is the same configuration for
    /// every registered profile and both ends; the documented differences of the clock are
    /// the real-time client's keep-alive and real-time path MTU discovery (simulated links
    /// have no MTU to find).
    #[test]
    fn simulated_and_real_time_configurations_are_equal_for_every_profile() {
        let recv = Some(300_000);
        let all = profile::all();
        assert!(all.len() >= 17, "registry shrank: {}", all.len());
        for p in &all {
            for side in [Side::Client, Side::Server] {
                // The real-time server keeps the default receive buffer, as the
                // simulator's server does (its client gets the player's buffer).
                let rt_recv = if side == Side::Client { recv } else { None };
                let sim = main_flow_config(p, side, recv, None);
                let mut real = (*real_time(p, side, rt_recv)).clone();
                let expect_keep_alive = (side == Side::Client).then_some(REAL_TIME_KEEP_ALIVE);
                assert_eq!(real.keep_alive, expect_keep_alive, "{} {side:?}", p.name);
                assert_eq!(sim.keep_alive, None, "{} {side:?}", p.name);
                real.keep_alive = None;
                assert_eq!(real.mtu_discovery_max, Some(profile::MTU_DISCOVERY_MAX));
                assert_eq!(sim.mtu_discovery_max, None, "{} {side:?}", p.name);
                real.mtu_discovery_max = None;
                assert_eq!(
                    format!("{sim:?}"),
                    format!("{real:?}"),
                    "{} {side:?}: simulator and real time differ",
                    p.name
                );
            }
        }
    }
}
