//! Measuring what a client displayed while it plays, so that a long stream keeps no
//! access unit after it came due.
//!
//! [`ShownMeter`] receives every frame as it comes due (shown with its access unit, or
//! lost), decodes the shown ones in that order (EvalVid style, as the report's batch
//! decode does) and compares what was on screen with the reference frame due at that
//! time. The decoding runs on a thread of its own: FFmpeg's scaler may not move between
//! threads, and the client must (it crosses `await` points of the real-time loop).

use std::collections::{BTreeMap, VecDeque};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;

use braid_media::decode::FfmpegDecoder;
use braid_media::quality::{Frame, black_frame, cap_psnr, compare, psnr_from_mse};
use braid_media::{AccessUnit, Codec};

/// Frames due but not yet measured at most: a shown frame whose picture the decoder has
/// not returned after this many later frames is undecodable.
const REORDER_DEPTH: usize = 16;

/// The measurement of what was displayed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Measured {
    /// Average PSNR over the frames due (0 when nothing was measured).
    pub psnr_avg_db: f64,
    /// Shown frames the decoder gave no picture for.
    pub undecodable: u64,
    /// Standard deviation of the per-frame PSNR.
    pub psnr_sd_db: f64,
}

struct Due {
    frame: u64,
    shown: bool,
    unit: Option<AccessUnit>,
}

/// Measures displayed quality frame by frame as frames come due.
pub struct ShownMeter {
    /// Unbounded: the client's real-time loop never waits for the measurement (which
    /// keeps up with playback; what it has not measured yet is what it holds).
    tx: Mutex<Option<Sender<Due>>>,
    worker: Mutex<Option<JoinHandle<Measured>>>,
    result: OnceLock<Measured>,
}

impl std::fmt::Debug for ShownMeter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShownMeter").finish_non_exhaustive()
    }
}

impl ShownMeter {
    /// A meter for a stream of `codec` against `reference` (looped by frame number).
    pub fn start(codec: Codec, reference: Arc<Vec<Frame>>) -> ShownMeter {
        let (tx, rx) = channel();
        let worker = std::thread::Builder::new()
            .name("shown-meter".into())
            .spawn(move || measure(&rx, codec, &reference))
            .ok();
        ShownMeter { tx: Mutex::new(Some(tx)), worker: Mutex::new(worker), result: OnceLock::new() }
    }

    /// Frame `frame` came due: shown with `unit`, or lost (`None`, or `shown` false).
    pub fn due(&self, frame: u64, shown: bool, unit: Option<AccessUnit>) {
        let tx = self.tx.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(tx) = tx.as_ref() {
            let _ = tx.send(Due { frame, shown, unit });
        }
    }

    /// Ends the measurement (frames due later are ignored) and returns it.
    pub fn finish(&self) -> Measured {
        self.result
            .get_or_init(|| {
                drop(self.tx.lock().unwrap_or_else(|e| e.into_inner()).take());
                let worker = self.worker.lock().unwrap_or_else(|e| e.into_inner()).take();
                worker.and_then(|w| w.join().ok()).unwrap_or_default()
            })
            .clone()
    }
}

/// The measuring thread: decodes shown frames in due order and compares the screen with
/// the reference, like the batch decode of the whole history
/// (`MediaClient::psnr_trace`), keeping only the frames not yet measured.
fn measure(rx: &Receiver<Due>, codec: Codec, reference: &[Frame]) -> Measured {
    let Ok(mut dec) = FfmpegDecoder::new(codec) else {
        // Nothing can be measured: take what comes until the client finishes.
        for _ in rx.iter() {}
        return Measured::default();
    };
    let mut st = State {
        decoded: BTreeMap::new(),
        pending: VecDeque::new(),
        screen: None,
        stats: Running::default(),
        undecodable: 0,
        any_due: false,
    };
    let mut out = Vec::new();
    for d in rx.iter() {
        st.any_due = true;
        if d.shown
            && let Some(au) = d.unit
        {
            let g = d.frame as i64;
            let tagged = AccessUnit { pts_us: g, dts_us: g, ..au };
            if dec.decode(&tagged, &mut out).is_ok() {
                st.keep(&mut out);
            }
            out.clear();
        }
        st.pending.push_back((d.frame, d.shown));
        st.resolve(reference, false);
    }
    let _ = dec.finish(&mut out);
    st.keep(&mut out);
    st.resolve(reference, true);
    if !st.any_due || reference.is_empty() {
        return Measured::default();
    }
    Measured {
        psnr_avg_db: st.stats.psnr_avg(),
        undecodable: st.undecodable,
        psnr_sd_db: st.stats.psnr_sd(),
    }
}

/// Sequence PSNR figures kept as running sums, so a long stream keeps no per-frame list:
/// the PSNR of the mean MSE (as `PsnrStats::psnr_avg`) and the standard deviation of the
/// per-frame capped PSNR (Welford's update, the population deviation of
/// `PsnrStats::psnr_sd`).
#[derive(Debug, Default)]
struct Running {
    frames: u64,
    mse_sum: f64,
    psnr_mean: f64,
    psnr_m2: f64,
}

impl Running {
    fn push(&mut self, mse_avg: f64, psnr_capped: f64) {
        self.frames += 1;
        self.mse_sum += mse_avg;
        let delta = psnr_capped - self.psnr_mean;
        self.psnr_mean += delta / self.frames as f64;
        self.psnr_m2 += delta * (psnr_capped - self.psnr_mean);
    }

    fn psnr_avg(&self) -> f64 {
        let mean = if self.frames == 0 { 0.0 } else { self.mse_sum / self.frames as f64 };
        psnr_from_mse(mean)
    }

    fn psnr_sd(&self) -> f64 {
        if self.frames < 2 {
            return 0.0;
        }
        (self.psnr_m2 / self.frames as f64).max(0.0).sqrt()
    }
}

struct State {
    decoded: BTreeMap<u64, Frame>,
    pending: VecDeque<(u64, bool)>,
    /// What is on screen (a lost or undecodable frame leaves the previous one there).
    screen: Option<Frame>,
    stats: Running,
    undecodable: u64,
    any_due: bool,
}

impl State {
    fn keep(&mut self, out: &mut Vec<Frame>) {
        for f in out.drain(..) {
            if let Some(p) = f.pts_us {
                self.decoded.insert(p as u64, f);
            }
        }
    }

    /// Measures the frames due, in order, whose picture is known (or will never come).
    fn resolve(&mut self, reference: &[Frame], at_end: bool) {
        while let Some(&(g, shown)) = self.pending.front() {
            let known = !shown || self.decoded.contains_key(&g);
            if !known && !at_end && self.pending.len() <= REORDER_DEPTH {
                return;
            }
            let picture = if shown { self.decoded.remove(&g) } else { None };
            self.pending.pop_front();
            if shown && picture.is_none() {
                self.undecodable += 1;
            }
            let n = reference.len() as u64;
            if n > 0
                && let Some(r) = reference.get((g % n) as usize)
            {
                // As `FreezeComparator::push`: the screen, black before the first picture.
                if picture.is_some() {
                    self.screen = picture;
                }
                let e = match &self.screen {
                    Some(f) => compare(f, r),
                    None => compare(&black_frame(r.width, r.height), r),
                };
                if let Ok(e) = e {
                    self.stats.push(e.mse_avg, cap_psnr(e.psnr_avg()));
                }
            }
            // Pictures of frames already measured are never used.
            self.decoded = self.decoded.split_off(&(g + 1));
        }
    }
}
