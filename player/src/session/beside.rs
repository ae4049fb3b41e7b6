//! A measured baseline beside a demo session: an all-paths `mptcp` session streaming the
//! same clip over its own copy of the same emulated network (its own relay, the scenario's
//! events on the same schedule, the window's network controls mirrored), for as long. Its
//! radio energy goes into the main session's live figures
//! ([`LiveStats::baseline_energy_j`](super::live::LiveStats::baseline_energy_j)) and
//! outcome, so the saving on screen is measured against a real run rather than against the
//! shadow model. It doubles the sessions the process runs (its pictures are decoded and
//! dropped); `braid demo --no-baseline` runs none.

use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use braid_transport::profile;

use super::inprocess::{AbortOnDrop, InProcess};
use super::live::{NetCommand, PaneUpdate, Wake};
use super::realtime::PlayOutcome;

/// The name of the profile the baseline runs.
pub const BASELINE_PROFILE: &str = "mptcp";

/// How long the main session waits for the baseline's own end once it has ended itself.
const BASELINE_GRACE: Duration = Duration::from_secs(10);

/// The baseline for `session`: the same session with the all-paths `mptcp` profile and no
/// history kept.
pub fn baseline_of(session: &InProcess) -> anyhow::Result<InProcess> {
    let mut b = session.clone();
    b.profile = profile::lookup(BASELINE_PROFILE).context("the baseline profile")?;
    b.keep_history = false;
    Ok(b)
}

/// Sends every command from `rx` to two receivers (main session, baseline).
fn mirror(
    rx: Receiver<NetCommand>,
) -> anyhow::Result<(Receiver<NetCommand>, Receiver<NetCommand>)> {
    let (a_tx, a_rx) = channel();
    let (b_tx, b_rx) = channel();
    std::thread::Builder::new()
        .name("braid-mirror".into())
        .spawn(move || {
            for c in rx {
                let _ = b_tx.send(c.clone());
                if a_tx.send(c).is_err() {
                    return;
                }
            }
        })
        .context("starting the controls mirror")?;
    Ok((a_rx, b_rx))
}

/// Runs `main` to `tx` with `baseline` (if any) beside it, and returns the main session's
/// outcome with the baseline's energy (its final figure, or the last one it reported when
/// it did not end within a grace period).
pub async fn run(
    main: InProcess,
    baseline: Option<InProcess>,
    tx: Sender<PaneUpdate>,
    wake: Wake,
    commands: Option<Receiver<NetCommand>>,
) -> anyhow::Result<PlayOutcome> {
    let Some(base) = baseline else { return main.run(tx, wake, commands).await };
    let (main_cmds, base_cmds) = match commands {
        Some(rx) => {
            let (a, b) = mirror(rx)?;
            (Some(a), Some(b))
        }
        None => (None, None),
    };
    let latest: Arc<Mutex<Option<f64>>> = Arc::default();
    // The baseline's figures: only its energy is kept.
    let (base_tx, base_rx) = channel::<PaneUpdate>();
    {
        let latest = Arc::clone(&latest);
        std::thread::Builder::new()
            .name("braid-baseline".into())
            .spawn(move || {
                for u in base_rx {
                    if let PaneUpdate::Stats(s) = u
                        && let Ok(mut g) = latest.lock()
                    {
                        *g = Some(s.energy_j);
                    }
                }
            })
            .context("starting the baseline's collector")?;
    }
    let mut base_task = AbortOnDrop(tokio::spawn(base.run(base_tx, Arc::new(|| {}), base_cmds)));
    // The main session's figures carry the baseline's latest energy.
    let (main_tx, main_rx) = channel::<PaneUpdate>();
    {
        let (latest, wake) = (Arc::clone(&latest), Arc::clone(&wake));
        std::thread::Builder::new()
            .name("braid-beside".into())
            .spawn(move || {
                for u in main_rx {
                    let u = match u {
                        PaneUpdate::Stats(mut s) => {
                            s.baseline_energy_j = latest.lock().ok().and_then(|g| *g);
                            PaneUpdate::Stats(s)
                        }
                        other => other,
                    };
                    if tx.send(u).is_err() {
                        return;
                    }
                    wake();
                }
            })
            .context("starting the baseline's forwarder")?;
    }
    let mut outcome = main.run(main_tx, wake, main_cmds).await?;
    let ended = tokio::time::timeout(BASELINE_GRACE, &mut base_task.0).await;
    outcome.baseline_energy_j = match ended {
        Ok(Ok(Ok(o))) => o.energy.map(|e| e.total_j()),
        _ => latest.lock().ok().and_then(|g| *g),
    };
    Ok(outcome)
}
