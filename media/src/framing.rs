//! Access units ⇄ transport messages.
//!
//! A media stream is a sequence of messages: first a [`StreamHeader`] (codec, size, rate,
//! codec configuration and the stream's plan: every frame's time and size, which lets the
//! client compute start-up schedules), then one message per access unit. Layout (all
//! integers big-endian):
//!
//! ```text
//! header:  'B' 'H' ver:u8 codec:u8 width:u16 height:u16 fps_milli:u32 frames:u32
//!          config_len:u32 config plan_len:u32 plan_len × (pts_us:i64 bytes:u32)
//! unit:    'B' 'U' flags:u8 index:u32 pts_us:i64 dts_us:i64 config_len:u32 config data…
//! ```
//! `flags` bit 0 = keyframe. A keyframe carries the codec configuration again so a client
//! can start (or recover) at any keyframe. Two small control messages complete the set:
//!
//! ```text
//! end:     'B' 'E' frames:u32                      (server: no frame after `frames`)
//! playout: 'B' 'P' playing:u8 position_us:i64      (client: where its media clock is)
//! ```

use crate::error::{MediaError, Result};
use crate::source::{AccessUnit, Codec, StreamInfo};

const VERSION: u8 = 1;

/// The first message of a stream.
#[derive(Clone, Debug, PartialEq)]
pub struct StreamHeader {
    /// The codec.
    pub codec: Codec,
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// Frames per second.
    pub fps: f64,
    /// Number of frames (access units).
    pub frames: u32,
    /// Out-of-band codec configuration (Annex-B SPS/PPS for H.264).
    pub codec_config: Vec<u8>,
    /// Every frame's presentation time (µs) and size, in decode order.
    pub plan: Vec<(i64, u32)>,
}

impl StreamHeader {
    /// The header for a clip.
    pub fn new(info: &StreamInfo, units: &[AccessUnit]) -> StreamHeader {
        StreamHeader {
            codec: info.codec,
            width: info.width,
            height: info.height,
            fps: info.fps,
            frames: units.len() as u32,
            codec_config: info.codec_config.clone(),
            plan: units.iter().map(|u| (u.pts_us, u.data.len() as u32)).collect(),
        }
    }
}

/// One decoded message.
#[derive(Clone, Debug, PartialEq)]
pub enum MediaMessage {
    /// The stream header.
    Header(StreamHeader),
    /// An access unit.
    Unit(AccessUnit),
    /// The stream ends after this many frames.
    End {
        /// Frames sent in all.
        frames: u32,
    },
    /// The client's playout position (lets deadlines follow stalls).
    Playout {
        /// Whether the media clock runs.
        playing: bool,
        /// Media position, µs.
        position_us: i64,
    },
}

/// Encodes the end-of-stream message.
pub fn encode_end(frames: u32) -> Vec<u8> {
    let mut out = b"BE".to_vec();
    out.extend_from_slice(&frames.to_be_bytes());
    out
}

/// Encodes a playout report.
pub fn encode_playout(playing: bool, position_us: i64) -> Vec<u8> {
    let mut out = b"BP".to_vec();
    out.push(u8::from(playing));
    out.extend_from_slice(&position_us.to_be_bytes());
    out
}

fn codec_code(c: Codec) -> u8 {
    match c {
        Codec::H263 => 1,
        Codec::H264 => 2,
    }
}

/// Encodes the stream header.
pub fn encode_header(h: &StreamHeader) -> Vec<u8> {
    let mut out = Vec::with_capacity(32 + h.codec_config.len() + h.plan.len() * 12);
    out.extend_from_slice(b"BH");
    out.push(VERSION);
    out.push(codec_code(h.codec));
    out.extend_from_slice(&(h.width.min(u32::from(u16::MAX)) as u16).to_be_bytes());
    out.extend_from_slice(&(h.height.min(u32::from(u16::MAX)) as u16).to_be_bytes());
    out.extend_from_slice(
        &((h.fps * 1000.0).round().clamp(0.0, f64::from(u32::MAX)) as u32).to_be_bytes(),
    );
    out.extend_from_slice(&h.frames.to_be_bytes());
    out.extend_from_slice(&(h.codec_config.len() as u32).to_be_bytes());
    out.extend_from_slice(&h.codec_config);
    out.extend_from_slice(&(h.plan.len() as u32).to_be_bytes());
    for &(pts, bytes) in &h.plan {
        out.extend_from_slice(&pts.to_be_bytes());
        out.extend_from_slice(&bytes.to_be_bytes());
    }
    out
}

/// Encodes one access unit; `config` is prepended information for keyframes (may be empty).
pub fn encode_unit(au: &AccessUnit, config: &[u8]) -> Vec<u8> {
    let config: &[u8] = if au.keyframe { config } else { &[] };
    let mut out = Vec::with_capacity(27 + config.len() + au.data.len());
    out.extend_from_slice(b"BU");
    out.push(u8::from(au.keyframe));
    out.extend_from_slice(&(au.index as u32).to_be_bytes());
    out.extend_from_slice(&au.pts_us.to_be_bytes());
    out.extend_from_slice(&au.dts_us.to_be_bytes());
    out.extend_from_slice(&(config.len() as u32).to_be_bytes());
    out.extend_from_slice(config);
    out.extend_from_slice(&au.data);
    out
}

struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.b.len()).ok_or_else(|| {
            MediaError::Framing(format!("message truncated at byte {} (needed {n} more)", self.pos))
        })?;
        let s = &self.b[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16> {
        let s = self.take(2)?;
        Ok(u16::from_be_bytes([s[0], s[1]]))
    }
    fn u32(&mut self) -> Result<u32> {
        let s = self.take(4)?;
        Ok(u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
    }
    fn i64(&mut self) -> Result<i64> {
        let s = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        Ok(i64::from_be_bytes(a))
    }
    fn rest(&mut self) -> &'a [u8] {
        let s = &self.b[self.pos..];
        self.pos = self.b.len();
        s
    }
}

/// Decodes one message. Never panics; malformed input is a [`MediaError::Framing`].
pub fn decode(msg: &[u8]) -> Result<MediaMessage> {
    let mut r = Reader { b: msg, pos: 0 };
    match r.take(2)? {
        b"BH" => {
            let ver = r.u8()?;
            if ver != VERSION {
                return Err(MediaError::Framing(format!("unknown stream header version {ver}")));
            }
            let codec = match r.u8()? {
                1 => Codec::H263,
                2 => Codec::H264,
                other => return Err(MediaError::Framing(format!("unknown codec code {other}"))),
            };
            let width = u32::from(r.u16()?);
            let height = u32::from(r.u16()?);
            let fps = f64::from(r.u32()?) / 1000.0;
            let frames = r.u32()?;
            let cfg_len = r.u32()? as usize;
            let codec_config = r.take(cfg_len)?.to_vec();
            let plan_len = r.u32()? as usize;
            // Bound the allocation by what the message can actually hold.
            if plan_len > (msg.len() - r.pos) / 12 {
                return Err(MediaError::Framing(format!(
                    "plan of {plan_len} frames does not fit the message"
                )));
            }
            let mut plan = Vec::with_capacity(plan_len);
            for _ in 0..plan_len {
                plan.push((r.i64()?, r.u32()?));
            }
            Ok(MediaMessage::Header(StreamHeader {
                codec,
                width,
                height,
                fps,
                frames,
                codec_config,
                plan,
            }))
        }
        b"BU" => {
            let flags = r.u8()?;
            let index = r.u32()? as usize;
            let pts_us = r.i64()?;
            let dts_us = r.i64()?;
            let cfg_len = r.u32()? as usize;
            let config = r.take(cfg_len)?;
            let rest = r.rest();
            let mut data = Vec::with_capacity(config.len() + rest.len());
            data.extend_from_slice(config);
            data.extend_from_slice(rest);
            Ok(MediaMessage::Unit(AccessUnit {
                index,
                pts_us,
                dts_us,
                keyframe: flags & 1 == 1,
                data,
            }))
        }
        b"BE" => Ok(MediaMessage::End { frames: r.u32()? }),
        b"BP" => {
            let playing = r.u8()? == 1;
            Ok(MediaMessage::Playout { playing, position_us: r.i64()? })
        }
        other => {
            Err(MediaError::Framing(format!("not a media message (starts with {other:02x?})")))
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn header() -> StreamHeader {
        StreamHeader {
            codec: Codec::H264,
            width: 352,
            height: 288,
            fps: 25.0,
            frames: 2,
            codec_config: vec![0, 0, 0, 1, 0x67, 1, 2],
            plan: vec![(0, 5000), (40_000, 800)],
        }
    }

    #[test]
    fn header_round_trips() {
        let h = header();
        assert_eq!(decode(&encode_header(&h)).unwrap(), MediaMessage::Header(h));
    }

    #[test]
    fn keyframes_carry_the_configuration_in_front_of_their_data() {
        let au = AccessUnit {
            index: 7,
            pts_us: 280_000,
            dts_us: 280_000,
            keyframe: true,
            data: vec![0, 0, 0, 1, 0x65, 9],
        };
        let MediaMessage::Unit(back) = decode(&encode_unit(&au, &[0xaa, 0xbb])).unwrap() else {
            panic!()
        };
        assert_eq!(back.data, vec![0xaa, 0xbb, 0, 0, 0, 1, 0x65, 9]);
        assert_eq!((back.index, back.pts_us, back.keyframe), (7, 280_000, true));
        let delta = AccessUnit { keyframe: false, ..au };
        let MediaMessage::Unit(back) = decode(&encode_unit(&delta, &[0xaa])).unwrap() else {
            panic!()
        };
        assert_eq!(back, delta, "delta frames carry no configuration");
    }

    #[test]
    fn control_messages_round_trip() {
        assert_eq!(decode(&encode_end(42)).unwrap(), MediaMessage::End { frames: 42 });
        assert_eq!(
            decode(&encode_playout(true, -5)).unwrap(),
            MediaMessage::Playout { playing: true, position_us: -5 }
        );
        assert!(decode(&encode_end(1)[..4]).is_err());
    }

    #[test]
    fn malformed_messages_are_errors() {
        assert!(decode(b"").is_err());
        assert!(decode(b"XX").is_err());
        let mut h = encode_header(&header());
        h.truncate(h.len() - 3);
        assert!(decode(&h).is_err());
        let mut bogus = encode_header(&StreamHeader { plan: vec![], ..header() });
        let n = bogus.len();
        bogus[n - 4..].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(decode(&bogus).is_err(), "a huge plan length must not allocate");
    }

    proptest! {
        #[test]
        fn units_round_trip(index in 0u32..1_000_000, pts in any::<i64>(), dts in any::<i64>(), key in any::<bool>(),
                            data in proptest::collection::vec(any::<u8>(), 0..300)) {
            let au = AccessUnit { index: index as usize, pts_us: pts, dts_us: dts, keyframe: key, data };
            prop_assert_eq!(decode(&encode_unit(&au, &[])).unwrap(), MediaMessage::Unit(au));
        }

        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode(&bytes);
            let mut tagged = b"BH\x01\x02".to_vec();
            tagged.extend_from_slice(&bytes);
            let _ = decode(&tagged);
        }
    }
}
