//! The bodies of the media fuzz targets (`media_framing`, `y4m_reader` in the transport
//! crate's `fuzz/` project). They live here so that the ordinary tests replay every
//! stored corpus file through exactly the code the fuzzer ran (`tests/fuzz_corpus.rs`),
//! without a sanitizer build. Each takes any bytes and panics only on a broken property.

use std::path::Path;

use crate::framing::{self, MediaMessage};
use crate::quality::Frame;
use crate::yuv4mpeg::read_y4m_from;

/// `media_framing`: decoding a stream message never panics, and a decoded message
/// re-encodes to bytes that decode to the same message.
pub fn media_framing(data: &[u8]) {
    let Ok(m) = framing::decode(data) else { return };
    let bytes = match &m {
        MediaMessage::Header(h) => framing::encode_header(h),
        MediaMessage::Unit(au) => framing::encode_unit(au, &[]),
        MediaMessage::End { frames } => framing::encode_end(*frames),
        MediaMessage::Playout { playing, position_us } => {
            framing::encode_playout(*playing, *position_us)
        }
    };
    let back = framing::decode(&bytes);
    assert!(back.as_ref().is_ok_and(|b| b == &m), "re-encoded message differs: {m:?} / {back:?}");
}

/// `y4m_reader`: reading a YUV4MPEG2 stream never panics, and every picture it returns
/// has planes of the sizes its header announces.
pub fn y4m_reader(data: &[u8]) {
    let Ok((frames, fps)) = read_y4m_from(data, Path::new("fuzz input")) else { return };
    assert!(fps > 0.0 && fps.is_finite(), "frame rate {fps}");
    for f in &frames {
        for i in 0..3 {
            let (w, h) = Frame::plane_size(f.width, f.height, i);
            assert_eq!(f.planes[i].len(), w * h, "plane {i} of a {}x{} picture", f.width, f.height);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bodies_take_empty_tiny_and_valid_inputs() {
        for f in [media_framing, y4m_reader] {
            f(&[]);
            f(b"BE");
            f(b"YUV4MPEG2 ");
        }
        media_framing(&framing::encode_end(7));
        y4m_reader(b"YUV4MPEG2 W2 H2 F25:1 C420jpeg\nFRAME\n\x10\x10\x10\x10\x80\x80");
    }
}
