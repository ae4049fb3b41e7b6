//! Showing what the client plays, off the network: the access units that come due are
//! decoded (GStreamer), compared with the reference for live PSNR and handed to the
//! display on a thread of their own, so the real-time loop that reads the connection
//! never waits for a picture. The display gets planar 4:2:0 pictures; a window converts
//! the one it paints to RGBA, a terminal none.

use std::sync::mpsc::{Receiver, Sender, TryRecvError, channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use braid_media::decode::{GstDecoder, OutputFormat, Picture};
use braid_media::quality::{Frame, FreezeComparator};
use braid_media::{AccessUnit, StreamInfo};

use super::live::{PaneUpdate, VideoImage};

/// How long the thread waits for a picture it expects before looking for more work (the
/// next frame comes due one frame interval later; what the session hands over meanwhile
/// waits in the channel).
const PULL_WAIT: Duration = Duration::from_millis(20);
/// At the end, how long the decoder may take to give back what it still holds.
const DRAIN_LIMIT: Duration = Duration::from_secs(2);

/// What the presenting thread has done so far.
#[derive(Clone, Debug, Default)]
pub struct Presented {
    /// When the first picture came out of the decoder.
    pub first_frame_at: Option<Instant>,
    /// Pictures decoded and shown.
    pub shown: u64,
    /// PSNR of the latest picture compared with the reference, dB.
    pub psnr_now_db: Option<f64>,
    /// Average PSNR of the pictures compared so far, dB (`None` before the first).
    pub psnr_avg_db: Option<f64>,
    /// Why presenting stopped, if it failed (the decoder refused the stream).
    pub error: Option<String>,
}

enum Job {
    Start(StreamInfo),
    Unit(AccessUnit),
}

/// Where pictures go and what they are measured against.
pub struct PresentOptions {
    /// Reference frames (looped by frame number) for live PSNR; `None`: not measured.
    pub reference: Option<Arc<Vec<Frame>>>,
    /// The display's channel (`None`: pictures are only counted).
    pub display: Option<Sender<PaneUpdate>>,
    /// Called after each picture handed to the display.
    pub wake: Arc<dyn Fn() + Send + Sync>,
}

/// The presenting thread of one session.
pub struct Presenter {
    tx: Option<Sender<Job>>,
    worker: Option<JoinHandle<()>>,
    state: Arc<Mutex<Presented>>,
}

impl Presenter {
    /// Starts the thread.
    pub fn start(opts: PresentOptions) -> anyhow::Result<Presenter> {
        let (tx, rx) = channel();
        let state = Arc::new(Mutex::new(Presented::default()));
        let shared = Arc::clone(&state);
        let worker = std::thread::Builder::new()
            .name("braid-present".into())
            .spawn(move || {
                if let Err(e) = present(&rx, &opts, &shared)
                    && let Ok(mut s) = shared.lock()
                {
                    s.error = Some(format!("{e:#}"));
                }
            })
            .context("starting the presenting thread")?;
        Ok(Presenter { tx: Some(tx), worker: Some(worker), state })
    }

    /// The stream's parameters: the decoder starts (once).
    pub fn stream(&self, info: StreamInfo) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(Job::Start(info));
        }
    }

    /// A frame came due and is shown: decode and present it.
    pub fn show(&self, au: AccessUnit) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(Job::Unit(au));
        }
    }

    /// Why presenting stopped, if it failed.
    pub fn failed(&self) -> Option<String> {
        self.state.lock().ok().and_then(|s| s.error.clone())
    }

    /// What was presented so far.
    pub fn presented(&self) -> Presented {
        self.state.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Stops taking frames and waits for the thread (what it has queued is presented).
    pub fn finish(&mut self) -> Presented {
        drop(self.tx.take());
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
        self.presented()
    }
}

impl Drop for Presenter {
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}

/// The thread: decodes what arrives, pulls pictures while any are outstanding; once the
/// session stops handing frames over, shows what is still in the decoder.
fn present(
    rx: &Receiver<Job>,
    opts: &PresentOptions,
    state: &Mutex<Presented>,
) -> anyhow::Result<()> {
    let mut decoder: Option<GstDecoder> = None;
    let mut shower = Shower { opts, state, cmp: FreezeComparator::default(), fps: 25.0 };
    loop {
        let outstanding = decoder.as_ref().is_some_and(|d| d.decoded() < d.pushed());
        // Work that waits comes first; with none, wait on the decoder while it owes a
        // picture (one wake-up per picture), else on the session.
        let job = match rx.try_recv() {
            Ok(j) => Some(j),
            Err(TryRecvError::Disconnected) => break,
            Err(TryRecvError::Empty) if outstanding => None,
            Err(TryRecvError::Empty) => match rx.recv() {
                Ok(j) => Some(j),
                Err(_) => break,
            },
        };
        match job {
            Some(Job::Start(info)) if decoder.is_none() => {
                shower.fps = info.fps;
                decoder = Some(
                    GstDecoder::new(&info, OutputFormat::I420, false)
                        .context("starting the decoder")?,
                );
            }
            Some(Job::Start(_)) => {}
            Some(Job::Unit(au)) => {
                if let Some(dec) = decoder.as_mut() {
                    dec.push(&au)?;
                }
            }
            None => {
                if let Some(dec) = decoder.as_mut()
                    && let Some(Picture::I420(f)) = dec.pull(PULL_WAIT)?
                {
                    shower.show(f);
                }
            }
        }
        // Pictures already out, without waiting.
        if let Some(dec) = decoder.as_mut() {
            while dec.decoded() < dec.pushed() {
                let Some(Picture::I420(f)) = dec.pull(Duration::ZERO)? else { break };
                shower.show(f);
            }
        }
    }
    if let Some(dec) = decoder.as_mut() {
        dec.end_of_stream();
        let deadline = Instant::now() + DRAIN_LIMIT;
        while !dec.is_eos() && Instant::now() < deadline {
            if let Some(Picture::I420(f)) = dec.pull(PULL_WAIT * 2)? {
                shower.show(f);
            }
        }
    }
    Ok(())
}

/// Measures a decoded picture and hands it to the display.
struct Shower<'a> {
    opts: &'a PresentOptions,
    state: &'a Mutex<Presented>,
    cmp: FreezeComparator,
    fps: f64,
}

impl Shower<'_> {
    fn show(&mut self, f: Frame) {
        let reference = self.opts.reference.as_deref().filter(|r| !r.is_empty());
        let psnr_now = reference.and_then(|r| {
            // The frame's index from its pts (loops continue counting).
            let idx =
                ((f.pts_us.unwrap_or(0).max(0) as f64 * self.fps / 1e6).round() as usize) % r.len();
            let e = r.get(idx).and_then(|rf| self.cmp.push(rf, Some(f.clone())).ok())?;
            Some(e.psnr_avg())
        });
        if let Ok(mut s) = self.state.lock() {
            s.first_frame_at.get_or_insert_with(Instant::now);
            s.shown += 1;
            if psnr_now.is_some() {
                s.psnr_now_db = psnr_now;
                s.psnr_avg_db = Some(self.cmp.stats.psnr_avg());
            }
        }
        if let Some(tx) = &self.opts.display {
            let _ = tx.send(PaneUpdate::Frame(VideoImage::from_frame(f)));
            (self.opts.wake)();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use braid_media::{Clip, OpenOptions};

    fn clip() -> Clip {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../assets/clips/h264-cif-25fps-2m.mp4");
        Clip::open(&path, &OpenOptions::default()).expect("the bundled clip")
    }

    #[test]
    fn pictures_are_decoded_measured_and_shown_off_the_callers_thread() {
        let clip = clip();
        let (reference, _) = braid_media::decode::ffmpeg_decode_clip(&clip).expect("reference");
        let (tx, rx) = std::sync::mpsc::channel();
        let woken = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let w = Arc::clone(&woken);
        let mut p = Presenter::start(PresentOptions {
            reference: Some(Arc::new(reference)),
            display: Some(tx),
            wake: Arc::new(move || {
                w.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }),
        })
        .unwrap();
        p.stream(clip.info.clone());
        let caller = std::thread::current().id();
        let started = Instant::now();
        for au in clip.units.iter().take(50) {
            p.show(au.clone());
        }
        // Handing over 50 access units does not wait for their decoding.
        let handed = started.elapsed();
        let done = p.finish();
        assert_eq!(std::thread::current().id(), caller);
        assert_eq!(done.shown, 50, "{done:?}");
        assert!(done.first_frame_at.is_some());
        // The decode is the reference's: measured PSNR is the cap.
        assert_eq!(done.psnr_avg_db.map(braid_media::quality::cap_psnr), Some(100.0));
        assert!(done.error.is_none());
        let frames: Vec<_> = rx
            .try_iter()
            .filter_map(|u| match u {
                PaneUpdate::Frame(img) => Some(img),
                _ => None,
            })
            .collect();
        assert_eq!(frames.len(), 50);
        assert_eq!(woken.load(std::sync::atomic::Ordering::Relaxed), 50);
        // The display gets 4:2:0: the RGBA is made only when asked for.
        let img = &frames[0];
        assert_eq!((img.width, img.height, img.i420.planes[0].len()), (352, 288, 352 * 288));
        assert_eq!(img.rgba().len(), 352 * 288 * 4);
        assert!(handed < std::time::Duration::from_millis(500), "{handed:?}");
    }

    #[test]
    fn a_stream_the_decoder_refuses_is_reported_not_a_hang() {
        let mut p = Presenter::start(PresentOptions {
            reference: None,
            display: None,
            wake: Arc::new(|| {}),
        })
        .unwrap();
        let clip = clip();
        p.stream(clip.info.clone());
        for au in clip.units.iter().take(5) {
            p.show(AccessUnit { data: vec![0xff; 64], ..au.clone() });
        }
        let done = p.finish();
        assert_eq!(done.shown, 0);
    }
}
