//! Demuxing with FFmpeg: a file in, access units out.
//!
//! [`Clip::open`] reads the video stream of an .mp4 / .3gp / .mov file or a raw .h264 /
//! .h263 elementary stream into memory as [`AccessUnit`]s in decode order. H.264 comes out
//! as Annex-B (start codes), with SPS/PPS in front of every keyframe, whatever the
//! container stored, so any decoder can start at any keyframe. Raw streams carry no
//! timing: frames are stamped at the stream's nominal rate or at [`OpenOptions::fps`].

use std::path::{Path, PathBuf};
use std::sync::Once;

use ffmpeg_next as ffmpeg;

use crate::error::{MediaError, Result};

/// The video codecs Braid streams.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Codec {
    /// ITU-T H.263 (baseline).
    H263,
    /// ITU-T H.264 / MPEG-4 AVC.
    H264,
}

impl Codec {
    /// The codec's name as ffmpeg spells it.
    pub fn name(self) -> &'static str {
        match self {
            Codec::H263 => "h263",
            Codec::H264 => "h264",
        }
    }
}

impl std::fmt::Display for Codec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One coded picture.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccessUnit {
    /// Position in decode order, from 0.
    pub index: usize,
    /// Presentation time in microseconds from the start of the clip.
    pub pts_us: i64,
    /// Decode time in microseconds from the start of the clip.
    pub dts_us: i64,
    /// Whether a decoder can start here.
    pub keyframe: bool,
    /// The coded bytes (H.264: Annex-B).
    pub data: Vec<u8>,
}

/// What a clip is.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct StreamInfo {
    /// The codec.
    pub codec: Codec,
    /// Picture width in pixels.
    pub width: u32,
    /// Picture height in pixels.
    pub height: u32,
    /// Frames per second.
    pub fps: f64,
    /// Number of access units (frames).
    pub frames: usize,
    /// Media duration in seconds (frames / fps).
    pub duration_s: f64,
    /// Mean coded bit rate over the duration, bits/s.
    pub bitrate_bps: f64,
    /// Out-of-band codec configuration (H.264: SPS and PPS, Annex-B); empty when in-band.
    #[serde(skip)]
    pub codec_config: Vec<u8>,
}

/// How to open a clip.
#[derive(Clone, Debug, Default)]
pub struct OpenOptions {
    /// Frame rate to use when the stream has none (raw streams), or to override it.
    pub fps: Option<f64>,
}

/// A whole video stream in memory.
#[derive(Clone, Debug)]
pub struct Clip {
    /// Where it came from.
    pub path: PathBuf,
    /// Codec, size, rate.
    pub info: StreamInfo,
    /// Access units in decode order.
    pub units: Vec<AccessUnit>,
    /// Packets the demuxer reported as corrupt and skipped.
    pub corrupt_packets: usize,
    /// Whether reading stopped early on an I/O or format error (a truncated file).
    pub truncated: bool,
}

/// Initialises FFmpeg once and keeps its own logging quiet: errors are reported by Braid.
pub fn init_ffmpeg() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        // Initialisation cannot fail in practice on FFmpeg ≥ 4 (no global registration).
        let _ = ffmpeg::init();
        ffmpeg::util::log::set_level(ffmpeg::util::log::Level::Quiet);
    });
}

impl Clip {
    /// Opens `path` and reads its video stream.
    pub fn open(path: impl AsRef<Path>, opts: &OpenOptions) -> Result<Clip> {
        let path = path.as_ref().to_path_buf();
        std::fs::metadata(&path).map_err(|source| MediaError::Io { path: path.clone(), source })?;
        init_ffmpeg();
        let mut input = ffmpeg::format::input(&path)
            .map_err(|e| MediaError::NotMedia { path: path.clone(), reason: e.to_string() })?;
        let format_name = input.format().name().to_string();
        let raw = matches!(format_name.as_str(), "h264" | "h263");
        let stream = input
            .streams()
            .best(ffmpeg::media::Type::Video)
            .ok_or_else(|| MediaError::NoVideo { path: path.clone() })?;
        let stream_index = stream.index();
        let params = stream.parameters();
        let codec_id = params.id();
        let codec = match codec_id {
            ffmpeg::codec::Id::H263 => Codec::H263,
            ffmpeg::codec::Id::H264 => Codec::H264,
            other => {
                return Err(MediaError::UnsupportedCodec { path, codec: other.name().to_string() });
            }
        };
        // SAFETY: `params` wraps a valid AVCodecParameters owned by the open input; we only
        // read plain fields and copy the extradata bytes out.
        let (width, height, extradata) = unsafe {
            let p = params.as_ptr();
            let extra = if (*p).extradata.is_null() || (*p).extradata_size <= 0 {
                Vec::new()
            } else {
                std::slice::from_raw_parts((*p).extradata, (*p).extradata_size as usize).to_vec()
            };
            ((*p).width.max(0) as u32, (*p).height.max(0) as u32, extra)
        };
        let time_base = stream.time_base();
        let stream_fps =
            rational_f64(stream.avg_frame_rate()).or_else(|| rational_f64(stream.rate()));
        let fps = match opts.fps.or(stream_fps) {
            Some(f) if f.is_finite() && f > 0.0 && f < 1000.0 => f,
            _ => return Err(MediaError::NoFrameRate { path }),
        };
        let tb = rational_f64(time_base).unwrap_or(0.0);

        let avcc = if codec == Codec::H264 && extradata.first() == Some(&1) {
            Some(AvcConfig::parse(&extradata)?)
        } else {
            None
        };
        let codec_config = avcc.as_ref().map(|c| c.annexb_parameter_sets()).unwrap_or_default();

        let mut units = Vec::new();
        let mut corrupt_packets = 0usize;
        let mut truncated = false;
        let mut first_ts: Option<i64> = None;
        loop {
            let mut packet = ffmpeg::Packet::empty();
            match packet.read(&mut input) {
                Ok(()) => {}
                Err(ffmpeg::Error::Eof) => break,
                Err(ffmpeg::Error::InvalidData) => {
                    corrupt_packets += 1;
                    continue;
                }
                Err(_) => {
                    truncated = true;
                    break;
                }
            }
            if packet.stream() != stream_index {
                continue;
            }
            let Some(bytes) = packet.data() else { continue };
            if bytes.is_empty() {
                continue;
            }
            let index = units.len();
            let data = match &avcc {
                Some(cfg) => match cfg.to_annexb(bytes, packet.is_key()) {
                    Ok(d) => d,
                    Err(_) => {
                        corrupt_packets += 1;
                        continue;
                    }
                },
                None => bytes.to_vec(),
            };
            let nominal = (index as f64 * 1e6 / fps).round() as i64;
            let (pts_us, dts_us) = if raw || tb <= 0.0 {
                (nominal, nominal)
            } else {
                let dts = packet.dts().or(packet.pts());
                let pts = packet.pts().or(dts);
                match (pts, dts) {
                    (Some(p), Some(d)) => {
                        let base = *first_ts.get_or_insert(d.min(p));
                        (
                            ((p - base) as f64 * tb * 1e6).round() as i64,
                            ((d - base) as f64 * tb * 1e6).round() as i64,
                        )
                    }
                    _ => (nominal, nominal),
                }
            };
            units.push(AccessUnit { index, pts_us, dts_us, keyframe: packet.is_key(), data });
        }
        if units.is_empty() {
            return Err(MediaError::Empty { path });
        }
        let frames = units.len();
        let duration_s = frames as f64 / fps;
        let total_bytes: usize = units.iter().map(|u| u.data.len()).sum();
        let info = StreamInfo {
            codec,
            width,
            height,
            fps,
            frames,
            duration_s,
            bitrate_bps: total_bytes as f64 * 8.0 / duration_s,
            codec_config,
        };
        Ok(Clip { path, info, units, corrupt_packets, truncated })
    }

    /// The playout vector: for each access unit in decode order, the media time (µs) by
    /// which the decoder needs it and the cumulative bytes needed up to and including it.
    /// This is D_k of the proxy paper's schedule model (ALGORITHMS.md §7).
    pub fn playout_vector(&self) -> Vec<(i64, u64)> {
        let mut cum = 0u64;
        self.units
            .iter()
            .map(|u| {
                cum += u.data.len() as u64;
                (u.dts_us.max(0), cum)
            })
            .collect()
    }

    /// Total coded bytes.
    pub fn total_bytes(&self) -> u64 {
        self.units.iter().map(|u| u.data.len() as u64).sum()
    }
}

fn rational_f64(r: ffmpeg::Rational) -> Option<f64> {
    (r.numerator() > 0 && r.denominator() > 0)
        .then(|| f64::from(r.numerator()) / f64::from(r.denominator()))
}

/// An H.264 decoder configuration record (ISO/IEC 14496-15 §5.2.4.1, "avcC").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AvcConfig {
    /// Bytes in each NAL unit length prefix (1, 2 or 4).
    pub length_size: usize,
    /// Sequence parameter sets.
    pub sps: Vec<Vec<u8>>,
    /// Picture parameter sets.
    pub pps: Vec<Vec<u8>>,
}

const START_CODE: [u8; 4] = [0, 0, 0, 1];

impl AvcConfig {
    /// Parses an avcC record.
    pub fn parse(b: &[u8]) -> Result<AvcConfig> {
        let bad = |what: &str| MediaError::BadConfig(format!("avcC: {what}"));
        if b.len() < 7 || b[0] != 1 {
            return Err(bad("too short or wrong version"));
        }
        let length_size = usize::from(b[4] & 0x03) + 1;
        if length_size == 3 {
            return Err(bad("3-byte NAL length prefix"));
        }
        let mut pos = 5;
        let read_sets = |count: usize, pos: &mut usize| -> Result<Vec<Vec<u8>>> {
            let mut sets = Vec::with_capacity(count);
            for _ in 0..count {
                let len_bytes =
                    b.get(*pos..*pos + 2).ok_or_else(|| bad("truncated parameter set length"))?;
                let len = usize::from(u16::from_be_bytes([len_bytes[0], len_bytes[1]]));
                *pos += 2;
                let set = b.get(*pos..*pos + len).ok_or_else(|| bad("truncated parameter set"))?;
                sets.push(set.to_vec());
                *pos += len;
            }
            Ok(sets)
        };
        let n_sps = usize::from(b[5] & 0x1f);
        pos += 1;
        let sps = read_sets(n_sps, &mut pos)?;
        let n_pps = usize::from(*b.get(pos).ok_or_else(|| bad("missing PPS count"))?);
        pos += 1;
        let pps = read_sets(n_pps, &mut pos)?;
        Ok(AvcConfig { length_size, sps, pps })
    }

    /// SPS and PPS as Annex-B.
    pub fn annexb_parameter_sets(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for set in self.sps.iter().chain(&self.pps) {
            out.extend_from_slice(&START_CODE);
            out.extend_from_slice(set);
        }
        out
    }

    /// Converts one length-prefixed access unit to Annex-B; keyframes get SPS/PPS in front
    /// unless they already carry them.
    pub fn to_annexb(&self, au: &[u8], keyframe: bool) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(au.len() + 64);
        let mut pos = 0;
        let mut has_sps = false;
        let mut nals = Vec::new();
        while pos < au.len() {
            let prefix = au
                .get(pos..pos + self.length_size)
                .ok_or_else(|| MediaError::BadConfig("truncated NAL length".into()))?;
            let len = prefix.iter().fold(0usize, |acc, &x| (acc << 8) | usize::from(x));
            pos += self.length_size;
            let nal = au.get(pos..pos + len).ok_or_else(|| {
                MediaError::BadConfig("NAL unit runs past the access unit".into())
            })?;
            if nal.first().map(|h| h & 0x1f) == Some(7) {
                has_sps = true;
            }
            nals.push(nal);
            pos += len;
        }
        if keyframe && !has_sps {
            out.extend_from_slice(&self.annexb_parameter_sets());
        }
        for nal in nals {
            out.extend_from_slice(&START_CODE);
            out.extend_from_slice(nal);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn avcc() -> Vec<u8> {
        // version 1, profile 66, compat 0xc0, level 30, 4-byte lengths, 1 SPS, 1 PPS
        let mut v = vec![1, 66, 0xc0, 30, 0xff, 0xe1, 0, 3, 0x67, 0xaa, 0xbb, 1, 0, 2, 0x68, 0xcc];
        v.shrink_to_fit();
        v
    }

    #[test]
    fn avcc_record_parses_and_converts_to_annexb() {
        let cfg = AvcConfig::parse(&avcc()).unwrap();
        assert_eq!(cfg.length_size, 4);
        assert_eq!(cfg.sps, vec![vec![0x67, 0xaa, 0xbb]]);
        assert_eq!(cfg.pps, vec![vec![0x68, 0xcc]]);
        let au = [0, 0, 0, 2, 0x65, 0x11, 0, 0, 0, 1, 0x06];
        let out = cfg.to_annexb(&au, true).unwrap();
        assert_eq!(
            out,
            vec![
                0, 0, 0, 1, 0x67, 0xaa, 0xbb, 0, 0, 0, 1, 0x68, 0xcc, 0, 0, 0, 1, 0x65, 0x11, 0, 0,
                0, 1, 0x06
            ]
        );
        let out = cfg.to_annexb(&au, false).unwrap();
        assert_eq!(out, vec![0, 0, 0, 1, 0x65, 0x11, 0, 0, 0, 1, 0x06]);
    }

    #[test]
    fn malformed_avcc_and_access_units_are_errors_not_panics() {
        for cut in 0..avcc().len() - 1 {
            let _ = AvcConfig::parse(&avcc()[..cut]);
        }
        assert!(AvcConfig::parse(&avcc()[..9]).is_err());
        let cfg = AvcConfig::parse(&avcc()).unwrap();
        assert!(cfg.to_annexb(&[0, 0, 0, 9, 0x65], false).is_err());
        assert!(cfg.to_annexb(&[0, 0], false).is_err());
    }

    proptest::proptest! {
        #[test]
        fn avcc_parser_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..64)) {
            if let Ok(cfg) = AvcConfig::parse(&bytes) {
                let _ = cfg.to_annexb(&bytes, true);
            }
        }
    }
}
