//! Raw decoded pictures on disk as YUV4MPEG2 (`.y4m`, 8-bit 4:2:0): what a client
//! displayed, written frame slot by frame slot, so that `braid psnr` (or ffmpeg) can judge
//! it later. Reading and writing go through the `y4m` crate.

use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};

use crate::error::{MediaError, Result};
use crate::quality::Frame;

/// The largest picture accepted when reading (8K UHD), so a corrupt header cannot ask for
/// gigabytes.
const MAX_FRAME_BYTES: usize = 7680 * 4320 * 3 / 2;

/// Whether `path` names a YUV4MPEG2 file (by its first bytes, else its extension).
pub fn is_y4m(path: &Path) -> bool {
    let mut magic = [0u8; 9];
    match std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut magic)) {
        Ok(()) => &magic == b"YUV4MPEG2",
        Err(_) => path.extension().is_some_and(|e| e.eq_ignore_ascii_case("y4m")),
    }
}

/// The encoder's output, shared so that [`Y4mWriter::finish`] can flush it and report a
/// failure (the encoder itself never gives its writer back).
#[derive(Clone)]
struct Out(Arc<Mutex<BufWriter<std::fs::File>>>);

impl Write for Out {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).flush()
    }
}

/// Writes 8-bit 4:2:0 pictures of one size to a `.y4m` file.
pub struct Y4mWriter {
    enc: y4m::Encoder<Out>,
    out: Out,
    width: u32,
    height: u32,
    path: std::path::PathBuf,
    frames: u64,
}

impl std::fmt::Debug for Y4mWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Y4mWriter")
            .field("path", &self.path)
            .field("width", &self.width)
            .field("height", &self.height)
            .field("frames", &self.frames)
            .finish()
    }
}

fn y4m_err(path: &Path, e: y4m::Error) -> MediaError {
    match e {
        y4m::Error::IoError(source) => MediaError::Io { path: path.to_path_buf(), source },
        other => MediaError::NotMedia {
            path: path.to_path_buf(),
            reason: format!("YUV4MPEG2: {other:?}"),
        },
    }
}

impl Y4mWriter {
    /// Creates `path` for `width`×`height` pictures at `fps` frames per second.
    pub fn create(path: &Path, width: u32, height: u32, fps: f64) -> Result<Y4mWriter> {
        if width == 0 || height == 0 {
            return Err(MediaError::Mismatch(format!("cannot write {width}x{height} pictures")));
        }
        let file = std::fs::File::create(path)
            .map_err(|source| MediaError::Io { path: path.to_path_buf(), source })?;
        // The frame rate as a ratio with a millisecond-exact denominator (25 → 25000/1000).
        let fps = if fps.is_finite() && fps > 0.0 { fps } else { 25.0 };
        let rate = y4m::Ratio::new((fps * 1000.0).round() as usize, 1000);
        let out = Out(Arc::new(Mutex::new(BufWriter::new(file))));
        let enc = y4m::encode(width as usize, height as usize, rate)
            .with_colorspace(y4m::Colorspace::C420jpeg)
            .write_header(out.clone())
            .map_err(|e| y4m_err(path, e))?;
        Ok(Y4mWriter { enc, out, width, height, path: path.to_path_buf(), frames: 0 })
    }

    /// Appends one picture; it must have the size given at creation.
    pub fn write(&mut self, frame: &Frame) -> Result<()> {
        if (frame.width, frame.height) != (self.width, self.height) {
            return Err(MediaError::Mismatch(format!(
                "{}: a {}x{} picture in a {}x{} file",
                self.path.display(),
                frame.width,
                frame.height,
                self.width,
                self.height
            )));
        }
        let [y, u, v] = &frame.planes;
        self.enc
            .write_frame(&y4m::Frame::new([y, u, v], None))
            .map_err(|e| y4m_err(&self.path, e))?;
        self.frames += 1;
        Ok(())
    }

    /// Pictures written so far.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Flushes the file.
    pub fn finish(self) -> Result<()> {
        let Y4mWriter { mut out, path, .. } = self;
        out.flush().map_err(|source| MediaError::Io { path, source })
    }
}

/// Reads every picture of an 8-bit 4:2:0 `.y4m` file; returns them (with pts from the
/// header's frame rate) and the frame rate.
pub fn read_y4m(path: &Path) -> Result<(Vec<Frame>, f64)> {
    let file = std::fs::File::open(path)
        .map_err(|source| MediaError::Io { path: path.to_path_buf(), source })?;
    read_y4m_from(BufReader::new(file), path)
}

/// [`read_y4m`] from any reader; `path` names the source in errors.
pub fn read_y4m_from(reader: impl Read, path: &Path) -> Result<(Vec<Frame>, f64)> {
    // The y4m crate multiplies the header's width and height unchecked (an overflow
    // panics in a debug build): the picture size is checked here first.
    let mut reader = BufReader::new(reader);
    let mut header = Vec::new();
    reader
        .by_ref()
        .take(1024)
        .read_until(b'\n', &mut header)
        .map_err(|source| MediaError::Io { path: path.to_path_buf(), source })?;
    check_picture_size(&header)
        .map_err(|reason| MediaError::NotMedia { path: path.to_path_buf(), reason })?;
    let limits = y4m::Limits { bytes: MAX_FRAME_BYTES };
    let input = std::io::Cursor::new(header).chain(reader);
    let mut dec = y4m::Decoder::new_with_limits(input, limits).map_err(|e| y4m_err(path, e))?;
    match dec.get_colorspace() {
        y4m::Colorspace::C420
        | y4m::Colorspace::C420jpeg
        | y4m::Colorspace::C420paldv
        | y4m::Colorspace::C420mpeg2 => {}
        other => {
            return Err(MediaError::NotMedia {
                path: path.to_path_buf(),
                reason: format!("YUV4MPEG2 colorspace {other:?}; only 8-bit 4:2:0 is compared"),
            });
        }
    }
    let (width, height) = (dec.get_width() as u32, dec.get_height() as u32);
    let rate = dec.get_framerate();
    let fps = if rate.den > 0 && rate.num > 0 { rate.num as f64 / rate.den as f64 } else { 25.0 };
    let mut frames = Vec::new();
    loop {
        match dec.read_frame() {
            Ok(f) => {
                let pts = (frames.len() as f64 * 1e6 / fps).round() as i64;
                frames.push(Frame {
                    width,
                    height,
                    pts_us: Some(pts),
                    planes: [
                        f.get_y_plane().to_vec(),
                        f.get_u_plane().to_vec(),
                        f.get_v_plane().to_vec(),
                    ],
                });
            }
            Err(y4m::Error::EOF) => break,
            Err(e) => return Err(y4m_err(path, e)),
        }
    }
    if frames.is_empty() {
        return Err(MediaError::Empty { path: path.to_path_buf() });
    }
    Ok((frames, fps))
}

/// The header line's `W` and `H` must give a picture of at most [`MAX_FRAME_BYTES`].
fn check_picture_size(header: &[u8]) -> std::result::Result<(), String> {
    let text = String::from_utf8_lossy(header);
    let field = |tag: char| {
        text.split_ascii_whitespace()
            .find_map(|t| t.strip_prefix(tag))
            .and_then(|v| v.parse::<u64>().ok())
    };
    let too_big = |w: u64, h: u64| {
        w.checked_mul(h).is_none_or(|n| n.saturating_mul(3) / 2 > MAX_FRAME_BYTES as u64)
    };
    match (field('W'), field('H')) {
        (Some(w), Some(h)) if too_big(w, h) => {
            Err(format!("a {w}x{h} picture is larger than 8K UHD"))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_with_a_huge_picture_is_an_error_not_an_overflow() {
        // Found by the y4m_reader fuzz target: the y4m crate's size product overflowed.
        for header in [
            &b"YUV4MPEG2 W4294967295 H4294967295 F25:1 C420jpeg\nFRAME\n"[..],
            b"YUV4MPEG2 W18446744073709551615 H3 F25:1\n",
            b"YUV4MPEG2 W100000 H100000 F25:1\n",
        ] {
            assert!(read_y4m_from(header, Path::new("x")).is_err());
        }
        let ok = b"YUV4MPEG2 W2 H2 F25:1 C420jpeg\nFRAME\n\x10\x10\x10\x10\x80\x80";
        assert_eq!(read_y4m_from(&ok[..], Path::new("x")).unwrap().0.len(), 1);
    }

    fn picture(w: u32, h: u32, seed: u8) -> Frame {
        let planes = [0, 1, 2].map(|i| {
            let (pw, ph) = Frame::plane_size(w, h, i);
            (0..pw * ph).map(|k| (k as u8).wrapping_mul(seed).wrapping_add(i as u8)).collect()
        });
        Frame { width: w, height: h, pts_us: None, planes }
    }

    #[test]
    fn pictures_survive_a_round_trip_through_a_file() {
        let dir = std::env::temp_dir().join(format!("braid-y4m-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("rt.y4m");
        let pics = [picture(35, 17, 3), picture(35, 17, 7)];
        let mut w = Y4mWriter::create(&path, 35, 17, 15.0).unwrap();
        for p in &pics {
            w.write(p).unwrap();
        }
        assert!(w.write(&picture(16, 16, 1)).is_err(), "a picture of another size is refused");
        w.finish().unwrap();
        assert!(is_y4m(&path));
        let (back, fps) = read_y4m(&path).unwrap();
        assert_eq!(fps, 15.0);
        assert_eq!(back.len(), 2);
        for (a, b) in back.iter().zip(&pics) {
            assert_eq!(a.planes, b.planes);
        }
        assert_eq!(back[1].pts_us, Some(66_667));
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_truncated_or_foreign_file_is_a_clear_error() {
        let dir = std::env::temp_dir().join(format!("braid-y4m-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bad.y4m");
        std::fs::write(&path, b"YUV4MPEG2 W8 H8 F25:1 C444\nFRAME\n").unwrap();
        let e = read_y4m(&path).unwrap_err().to_string();
        assert!(e.contains("bad.y4m"), "{e}");
        std::fs::write(&path, b"not a y4m at all").unwrap();
        assert!(read_y4m(&path).is_err());
        std::fs::write(&path, b"YUV4MPEG2 W8 H8 F25:1 C420jpeg\n").unwrap();
        let e = read_y4m(&path).unwrap_err().to_string();
        assert!(e.contains("no video frames"), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
