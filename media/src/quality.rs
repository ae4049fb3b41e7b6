//! Video quality from decoded pixels: PSNR as FFmpeg's `psnr` filter computes it, MOS,
//! the MPTCP-QE paper's eq. 13 estimate, and EvalVid-style accounting of missing frames.
//!
//! Formulas: ALGORITHMS.md §6. PSNR of one plane is `10·log10(255² / MSE)`; a frame's
//! average weights the planes' MSE by their area; a sequence's average is the PSNR of the
//! **mean MSE** over frames (not the mean of per-frame PSNRs), exactly as
//! `libavfilter/vf_psnr.c` does. Identical frames have infinite PSNR; where a number is
//! needed it is capped at [`PSNR_CAP_DB`].

use std::fmt::Write as _;

use crate::error::{MediaError, Result};

/// The value written for infinite PSNR (identical frames) in JSON, and used in averages
/// and standard deviations (docs/REFERENCE.md).
pub const PSNR_CAP_DB: f64 = 100.0;

/// An 8-bit planar 4:2:0 picture (I420), planes tightly packed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// Luma width.
    pub width: u32,
    /// Luma height.
    pub height: u32,
    /// Presentation time in microseconds, when known.
    pub pts_us: Option<i64>,
    /// Y, U, V planes; U and V are `ceil(w/2) × ceil(h/2)`.
    pub planes: [Vec<u8>; 3],
}

impl Frame {
    /// Dimensions of plane `i`.
    pub fn plane_size(width: u32, height: u32, i: usize) -> (usize, usize) {
        if i == 0 {
            (width as usize, height as usize)
        } else {
            (width.div_ceil(2) as usize, height.div_ceil(2) as usize)
        }
    }

    /// Builds a frame from strided plane data (e.g. a decoder's output).
    pub fn from_strided(
        width: u32,
        height: u32,
        pts_us: Option<i64>,
        planes: [(&[u8], usize); 3],
    ) -> Result<Frame> {
        let mut out: [Vec<u8>; 3] = Default::default();
        for (i, (data, stride)) in planes.iter().enumerate() {
            let (w, h) = Frame::plane_size(width, height, i);
            let mut plane = Vec::with_capacity(w * h);
            for row in 0..h {
                let start = row * stride;
                let line = data.get(start..start + w).ok_or_else(|| {
                    MediaError::Decoder(format!("plane {i} shorter than {w}x{h}"))
                })?;
                plane.extend_from_slice(line);
            }
            out[i] = plane;
        }
        Ok(Frame { width, height, pts_us, planes: out })
    }
}

impl Frame {
    /// The picture as packed RGBA (8 bits per channel), converting from limited-range
    /// BT.601 YUV (what H.263 and SD H.264 use).
    pub fn to_rgba(&self) -> Vec<u8> {
        let (w, h) = (self.width as usize, self.height as usize);
        let cw = self.width.div_ceil(2) as usize;
        let mut out = Vec::with_capacity(w * h * 4);
        let clamp = |v: i32| v.clamp(0, 255) as u8;
        for y in 0..h {
            for x in 0..w {
                let luma = i32::from(self.planes[0].get(y * w + x).copied().unwrap_or(16)) - 16;
                let ci = (y / 2) * cw + x / 2;
                let u = i32::from(self.planes[1].get(ci).copied().unwrap_or(128)) - 128;
                let v = i32::from(self.planes[2].get(ci).copied().unwrap_or(128)) - 128;
                // ITU-R BT.601, integer form (coefficients × 256).
                let c = 298 * luma;
                out.push(clamp((c + 409 * v + 128) >> 8));
                out.push(clamp((c - 100 * u - 208 * v + 128) >> 8));
                out.push(clamp((c + 516 * u + 128) >> 8));
                out.push(255);
            }
        }
        out
    }
}

/// Converts an MSE to PSNR in dB for 8-bit samples; MSE 0 gives +∞.
pub fn psnr_from_mse(mse: f64) -> f64 {
    if mse <= 0.0 { f64::INFINITY } else { 10.0 * (255.0f64 * 255.0 / mse).log10() }
}

/// Caps an infinite PSNR at [`PSNR_CAP_DB`] for JSON and statistics.
pub fn cap_psnr(db: f64) -> f64 {
    if db.is_finite() { db.min(PSNR_CAP_DB) } else { PSNR_CAP_DB }
}

/// The error between two frames.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FrameError {
    /// Mean squared error of Y, U and V.
    pub mse: [f64; 3],
    /// Plane-area-weighted MSE.
    pub mse_avg: f64,
}

impl FrameError {
    /// PSNR of plane `i` (0 = Y).
    pub fn psnr(&self, i: usize) -> f64 {
        psnr_from_mse(self.mse[i])
    }
    /// PSNR of the weighted average.
    pub fn psnr_avg(&self) -> f64 {
        psnr_from_mse(self.mse_avg)
    }
}

/// Compares two frames of the same size.
pub fn compare(a: &Frame, b: &Frame) -> Result<FrameError> {
    if a.width != b.width || a.height != b.height {
        return Err(MediaError::Mismatch(format!(
            "frame sizes differ: {}x{} vs {}x{}",
            a.width, a.height, b.width, b.height
        )));
    }
    let mut mse = [0.0; 3];
    let mut weights = [0.0; 3];
    for i in 0..3 {
        let (w, h) = Frame::plane_size(a.width, a.height, i);
        let n = w * h;
        let (pa, pb) = (&a.planes[i], &b.planes[i]);
        if pa.len() < n || pb.len() < n {
            return Err(MediaError::Mismatch(format!("plane {i} is shorter than {w}x{h}")));
        }
        let sse: u64 = pa[..n]
            .iter()
            .zip(&pb[..n])
            .map(|(&x, &y)| {
                let d = i32::from(x) - i32::from(y);
                (d * d) as u64
            })
            .sum();
        mse[i] = sse as f64 / n as f64;
        weights[i] = n as f64;
    }
    let total: f64 = weights.iter().sum();
    let mse_avg = (0..3).map(|i| mse[i] * weights[i] / total).sum();
    Ok(FrameError { mse, mse_avg })
}

/// Accumulates per-frame errors into FFmpeg-style sequence statistics.
#[derive(Clone, Debug, Default)]
pub struct PsnrStats {
    /// Per-frame errors, in order.
    pub frames: Vec<FrameError>,
}

impl PsnrStats {
    /// Adds one frame.
    pub fn push(&mut self, e: FrameError) {
        self.frames.push(e);
    }

    fn mean_mse(&self, f: impl Fn(&FrameError) -> f64) -> f64 {
        if self.frames.is_empty() {
            return 0.0;
        }
        self.frames.iter().map(f).sum::<f64>() / self.frames.len() as f64
    }

    /// Sequence PSNR of plane `i`: the PSNR of its mean MSE.
    pub fn psnr_plane(&self, i: usize) -> f64 {
        psnr_from_mse(self.mean_mse(|e| e.mse[i]))
    }

    /// Sequence average PSNR: the PSNR of the mean weighted MSE.
    pub fn psnr_avg(&self) -> f64 {
        psnr_from_mse(self.mean_mse(|e| e.mse_avg))
    }

    /// PSNR of the worst frame.
    pub fn psnr_min(&self) -> f64 {
        psnr_from_mse(self.frames.iter().map(|e| e.mse_avg).fold(0.0, f64::max))
    }

    /// PSNR of the best frame.
    pub fn psnr_max(&self) -> f64 {
        psnr_from_mse(self.frames.iter().map(|e| e.mse_avg).fold(f64::INFINITY, f64::min))
    }

    /// Standard deviation of the per-frame (capped) average PSNR.
    pub fn psnr_sd(&self) -> f64 {
        let n = self.frames.len();
        if n < 2 {
            return 0.0;
        }
        let v: Vec<f64> = self.frames.iter().map(|e| cap_psnr(e.psnr_avg())).collect();
        let mean = v.iter().sum::<f64>() / n as f64;
        (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64).sqrt()
    }

    /// FFmpeg's closing line: `PSNR y:… u:… v:… average:… min:… max:…`.
    pub fn summary_line(&self) -> String {
        format!(
            "PSNR y:{} u:{} v:{} average:{} min:{} max:{}",
            fmt_db(self.psnr_plane(0)),
            fmt_db(self.psnr_plane(1)),
            fmt_db(self.psnr_plane(2)),
            fmt_db(self.psnr_avg()),
            fmt_db(self.psnr_min()),
            fmt_db(self.psnr_max()),
        )
    }

    /// FFmpeg's per-frame stats file (`psnr=stats_file=…`), one line per frame from n:1.
    pub fn stats_file(&self) -> String {
        let mut s = String::new();
        for (i, e) in self.frames.iter().enumerate() {
            let _ = writeln!(
                s,
                "n:{} mse_avg:{:.2} mse_y:{:.2} mse_u:{:.2} mse_v:{:.2} psnr_avg:{} psnr_y:{} psnr_u:{} psnr_v:{} ",
                i + 1,
                e.mse_avg,
                e.mse[0],
                e.mse[1],
                e.mse[2],
                fmt_db2(e.psnr_avg()),
                fmt_db2(e.psnr(0)),
                fmt_db2(e.psnr(1)),
                fmt_db2(e.psnr(2)),
            );
        }
        s
    }
}

fn fmt_db(x: f64) -> String {
    if x.is_finite() { format!("{x:.6}") } else { "inf".into() }
}

fn fmt_db2(x: f64) -> String {
    if x.is_finite() { format!("{x:.2}") } else { "inf".into() }
}

/// Mean opinion score from PSNR, EvalVid's mapping: ≥37 → 5, 31–37 → 4, 25–31 → 3,
/// 20–25 → 2, <20 → 1.
pub fn mos_from_psnr(db: f64) -> u8 {
    match db {
        x if x >= 37.0 => 5,
        x if x >= 31.0 => 4,
        x if x >= 25.0 => 3,
        x if x >= 20.0 => 2,
        _ => 1,
    }
}

/// The MPTCP-QE paper's eq. 13 PSNR **estimate** from throughputs (same units throughout):
/// `20·log10(MAX_Bitrate / |EXP_Thr − CRT_Thr|)`. Undefined when the throughputs are equal;
/// then it returns [`PSNR_CAP_DB`] (to be reported as "≥ cap"). Also capped above.
pub fn psnr_eq13_estimate(max_bitrate: f64, expected_thr: f64, current_thr: f64) -> f64 {
    let diff = (expected_thr - current_thr).abs();
    if diff <= 0.0 || max_bitrate <= 0.0 {
        return PSNR_CAP_DB;
    }
    cap_psnr(20.0 * (max_bitrate / diff).log10())
}

/// EvalVid-style comparison of what was displayed against the reference: when a frame was
/// lost, late or undecodable, the last displayed frame stays on screen and is compared with
/// the reference frame due at that time.
#[derive(Debug, Default)]
pub struct FreezeComparator {
    shown: Option<Frame>,
    /// Statistics so far.
    pub stats: PsnrStats,
    /// Reference frames for which nothing new was displayed.
    pub frozen: usize,
}

impl FreezeComparator {
    /// Accounts for one reference frame; `displayed` is the decoded frame shown for it,
    /// `None` when it was missing (the previous one stays on screen).
    pub fn push(&mut self, reference: &Frame, displayed: Option<Frame>) -> Result<FrameError> {
        match displayed {
            Some(f) => self.shown = Some(f),
            None => self.frozen += 1,
        }
        let e = match &self.shown {
            Some(f) => compare(f, reference)?,
            // Nothing shown yet: a black (Y=16, U=V=128) screen.
            None => compare(&black_frame(reference.width, reference.height), reference)?,
        };
        self.stats.push(e);
        Ok(e)
    }
}

/// A black I420 frame (video range).
pub fn black_frame(width: u32, height: u32) -> Frame {
    let planes = [0, 1, 2].map(|i| {
        let (w, h) = Frame::plane_size(width, height, i);
        vec![if i == 0 { 16 } else { 128 }; w * h]
    });
    Frame { width, height, pts_us: None, planes }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flat(w: u32, h: u32, y: u8, u: u8, v: u8) -> Frame {
        let planes = [y, u, v]
            .iter()
            .enumerate()
            .map(|(i, &val)| {
                let (pw, ph) = Frame::plane_size(w, h, i);
                vec![val; pw * ph]
            })
            .collect::<Vec<_>>();
        let [a, b, c]: [Vec<u8>; 3] = planes.try_into().unwrap();
        Frame { width: w, height: h, pts_us: None, planes: [a, b, c] }
    }

    #[test]
    fn identical_frames_have_infinite_psnr_capped_at_100() {
        let a = flat(4, 4, 10, 20, 30);
        let e = compare(&a, &a).unwrap();
        assert!(e.psnr_avg().is_infinite());
        assert_eq!(cap_psnr(e.psnr_avg()), 100.0);
        let mut s = PsnrStats::default();
        s.push(e);
        assert!(s.summary_line().contains("average:inf"));
    }

    #[test]
    fn weighted_average_follows_plane_areas() {
        // Y differs by 2 everywhere (MSE 4), chroma identical: weighted MSE = 4·16/24.
        let a = flat(4, 4, 10, 20, 30);
        let b = flat(4, 4, 12, 20, 30);
        let e = compare(&a, &b).unwrap();
        assert_eq!(e.mse, [4.0, 0.0, 0.0]);
        assert!((e.mse_avg - 4.0 * 16.0 / 24.0).abs() < 1e-12);
        assert!((e.psnr(0) - 10.0 * (65025.0f64 / 4.0).log10()).abs() < 1e-12);
    }

    #[test]
    fn sequence_average_is_psnr_of_mean_mse_not_mean_of_psnr() {
        let mut s = PsnrStats::default();
        s.push(FrameError { mse: [1.0; 3], mse_avg: 1.0 });
        s.push(FrameError { mse: [100.0; 3], mse_avg: 100.0 });
        let expected = psnr_from_mse(50.5);
        assert!((s.psnr_avg() - expected).abs() < 1e-12);
        assert!((s.psnr_min() - psnr_from_mse(100.0)).abs() < 1e-12);
        assert!((s.psnr_max() - psnr_from_mse(1.0)).abs() < 1e-12);
    }

    #[test]
    fn rgba_conversion_maps_video_black_white_and_grey() {
        let black = flat(2, 2, 16, 128, 128).to_rgba();
        assert_eq!(&black[..4], &[0, 0, 0, 255]);
        let white = flat(2, 2, 235, 128, 128).to_rgba();
        assert_eq!(&white[..4], &[255, 255, 255, 255]);
        let grey = flat(2, 2, 126, 128, 128).to_rgba();
        assert!(grey[0] == grey[1] && grey[1] == grey[2] && (126..=129).contains(&grey[0]));
        assert_eq!(black.len(), 2 * 2 * 4);
    }

    #[test]
    fn different_sizes_are_an_error() {
        assert!(compare(&flat(4, 4, 0, 0, 0), &flat(2, 2, 0, 0, 0)).is_err());
    }

    #[test]
    fn mos_table_boundaries() {
        assert_eq!(mos_from_psnr(f64::INFINITY), 5);
        assert_eq!(mos_from_psnr(37.0), 5);
        assert_eq!(mos_from_psnr(36.9), 4);
        assert_eq!(mos_from_psnr(31.0), 4);
        assert_eq!(mos_from_psnr(30.0), 3);
        assert_eq!(mos_from_psnr(24.0), 2);
        assert_eq!(mos_from_psnr(19.9), 1);
    }

    #[test]
    fn eq13_estimate_is_capped_when_undefined() {
        assert_eq!(psnr_eq13_estimate(2e6, 1e6, 1e6), PSNR_CAP_DB);
        // 20·log10(2e6 / 2e5) = 20 dB
        assert!((psnr_eq13_estimate(2e6, 1e6, 1.2e6) - 20.0).abs() < 1e-9);
    }

    #[test]
    fn freeze_compares_the_last_shown_frame_with_the_due_reference() {
        let r0 = flat(4, 4, 50, 128, 128);
        let r1 = flat(4, 4, 60, 128, 128);
        let mut c = FreezeComparator::default();
        c.push(&r0, Some(r0.clone())).unwrap();
        let e = c.push(&r1, None).unwrap();
        assert_eq!(c.frozen, 1);
        assert_eq!(e.mse[0], 100.0);
    }
}
