//! Decoding access units into pictures.
//!
//! - [`GstDecoder`]: the playback pipeline, GStreamer `appsrc → h264parse/h263parse →
//!   avdec_* → videoconvert → appsink`, fed access unit by access unit with PTS, giving
//!   RGBA frames for display or I420 frames for analysis.
//! - [`FfmpegDecoder`]: the reference decoder (ffmpeg-next), giving I420 frames.
//!
//! Both report how many access units failed to produce a picture, so a stream corrupt
//! part-way decodes what it can.

use std::time::Duration;

use ffmpeg_next as ffmpeg;
use gstreamer as gst;
use gstreamer::prelude::*;
use gstreamer_app as gst_app;
use gstreamer_video as gst_video;
use gstreamer_video::prelude::*;

use crate::error::{MediaError, Result};
use crate::quality::Frame;
use crate::source::{AccessUnit, Clip, Codec, StreamInfo, init_ffmpeg};

/// Pixel layout of decoded output.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum OutputFormat {
    /// 8-bit planar 4:2:0, for analysis.
    I420,
    /// 8-bit RGBA, for display.
    Rgba,
}

/// A decoded picture from the GStreamer pipeline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Picture {
    /// Planar 4:2:0.
    I420(Frame),
    /// Packed RGBA, `width·height·4` bytes.
    Rgba {
        /// Width in pixels.
        width: u32,
        /// Height in pixels.
        height: u32,
        /// Presentation time, µs.
        pts_us: Option<i64>,
        /// Pixels, row-major, tightly packed.
        pixels: Vec<u8>,
    },
}

impl Picture {
    /// The presentation time in µs, when known.
    pub fn pts_us(&self) -> Option<i64> {
        match self {
            Picture::I420(f) => f.pts_us,
            Picture::Rgba { pts_us, .. } => *pts_us,
        }
    }
}

/// Elements the playback pipeline needs, with the Debian package that provides each.
pub const REQUIRED_ELEMENTS: &[(&str, &str)] = &[
    ("appsrc", "gstreamer1.0-plugins-base"),
    ("appsink", "gstreamer1.0-plugins-base"),
    ("videoconvert", "gstreamer1.0-plugins-base"),
    ("h264parse", "gstreamer1.0-plugins-bad"),
    ("h263parse", "gstreamer1.0-plugins-bad"),
    ("avdec_h264", "gstreamer1.0-libav"),
    ("avdec_h263", "gstreamer1.0-libav"),
];

/// Initialises GStreamer and checks that every element the pipeline needs is installed,
/// naming the first missing one.
pub fn check_gstreamer() -> Result<()> {
    gst::init().map_err(|e| MediaError::Gstreamer(format!("initialisation failed: {e}")))?;
    for (element, package) in REQUIRED_ELEMENTS {
        if gst::ElementFactory::find(element).is_none() {
            return Err(MediaError::MissingElement { element: (*element).to_string(), package });
        }
    }
    Ok(())
}

/// The GStreamer decoding pipeline.
pub struct GstDecoder {
    pipeline: gst::Pipeline,
    src: gst_app::AppSrc,
    sink: gst_app::AppSink,
    format: OutputFormat,
    pushed: usize,
    decoded: usize,
    eos: bool,
}

impl GstDecoder {
    /// Builds and starts a pipeline for `info`'s codec. With `sync` the sink releases
    /// frames at their presentation time (playback); without it, as fast as they decode.
    pub fn new(info: &StreamInfo, format: OutputFormat, sync: bool) -> Result<GstDecoder> {
        check_gstreamer()?;
        let gst_err = |e: gst::glib::BoolError| MediaError::Gstreamer(e.to_string());
        let (fps_n, fps_d) = fps_fraction(info.fps);
        let (caps, parser, decoder) = match info.codec {
            Codec::H264 => (
                gst::Caps::builder("video/x-h264")
                    .field("stream-format", "byte-stream")
                    .field("alignment", "au")
                    .field("framerate", gst::Fraction::new(fps_n, fps_d))
                    .build(),
                "h264parse",
                "avdec_h264",
            ),
            Codec::H263 => (
                gst::Caps::builder("video/x-h263")
                    .field("variant", "itu")
                    .field("framerate", gst::Fraction::new(fps_n, fps_d))
                    .build(),
                "h263parse",
                "avdec_h263",
            ),
        };
        let src = gst_app::AppSrc::builder().caps(&caps).format(gst::Format::Time).build();
        let out_caps = gst_video::VideoCapsBuilder::new()
            .format(match format {
                OutputFormat::I420 => gst_video::VideoFormat::I420,
                OutputFormat::Rgba => gst_video::VideoFormat::Rgba,
            })
            .build();
        let sink = gst_app::AppSink::builder().caps(&out_caps).sync(sync).build();
        let make = |name: &str| {
            gst::ElementFactory::make(name)
                .build()
                .map_err(|e| MediaError::Gstreamer(format!("cannot create {name}: {e}")))
        };
        let parse = make(parser)?;
        let dec = make(decoder)?;
        let convert = make("videoconvert")?;
        let pipeline = gst::Pipeline::new();
        let elements =
            [src.upcast_ref::<gst::Element>(), &parse, &dec, &convert, sink.upcast_ref()];
        pipeline.add_many(elements).map_err(gst_err)?;
        gst::Element::link_many(elements).map_err(gst_err)?;
        pipeline
            .set_state(gst::State::Playing)
            .map_err(|e| MediaError::Gstreamer(format!("pipeline would not start: {e}")))?;
        Ok(GstDecoder { pipeline, src, sink, format, pushed: 0, decoded: 0, eos: false })
    }

    /// Feeds one access unit.
    pub fn push(&mut self, au: &AccessUnit) -> Result<()> {
        self.check_bus()?;
        let mut buffer = gst::Buffer::from_slice(au.data.clone());
        if let Some(b) = buffer.get_mut() {
            let pts = gst::ClockTime::from_useconds(au.pts_us.max(0) as u64);
            b.set_pts(pts);
            b.set_dts(gst::ClockTime::from_useconds(au.dts_us.max(0) as u64));
            if !au.keyframe {
                b.set_flags(gst::BufferFlags::DELTA_UNIT);
            }
        }
        self.src
            .push_buffer(buffer)
            .map_err(|e| MediaError::Gstreamer(format!("appsrc refused a buffer: {e:?}")))?;
        self.pushed += 1;
        Ok(())
    }

    /// Returns the next decoded picture, waiting at most `timeout`; `None` when none is
    /// ready (or the stream ended).
    pub fn pull(&mut self, timeout: Duration) -> Result<Option<Picture>> {
        if self.eos {
            return Ok(None);
        }
        let t = gst::ClockTime::from_nseconds(timeout.as_nanos().min(u128::from(u64::MAX)) as u64);
        match self.sink.try_pull_sample(t) {
            Some(sample) => {
                let pic = self.picture(&sample)?;
                self.decoded += 1;
                Ok(Some(pic))
            }
            None => {
                self.check_bus()?;
                if self.sink.is_eos() {
                    self.eos = true;
                }
                Ok(None)
            }
        }
    }

    /// Signals the end of the stream; remaining pictures still come out of [`GstDecoder::pull`].
    pub fn end_of_stream(&mut self) {
        let _ = self.src.end_of_stream();
    }

    /// Whether the last picture has been pulled.
    pub fn is_eos(&self) -> bool {
        self.eos
    }

    /// Signals the end of the stream and returns every remaining picture.
    pub fn finish(&mut self) -> Result<Vec<Picture>> {
        let _ = self.src.end_of_stream();
        let mut out = Vec::new();
        while !self.eos {
            if let Some(p) = self.pull(Duration::from_millis(200))? {
                out.push(p);
            }
        }
        Ok(out)
    }

    /// Access units pushed so far.
    pub fn pushed(&self) -> usize {
        self.pushed
    }

    /// Pictures produced so far.
    pub fn decoded(&self) -> usize {
        self.decoded
    }

    fn check_bus(&self) -> Result<()> {
        let Some(bus) = self.pipeline.bus() else { return Ok(()) };
        while let Some(msg) = bus.pop_filtered(&[gst::MessageType::Error]) {
            if let gst::MessageView::Error(err) = msg.view() {
                return Err(MediaError::Gstreamer(format!(
                    "{} ({})",
                    err.error(),
                    err.debug().map(|d| d.to_string()).unwrap_or_default()
                )));
            }
        }
        Ok(())
    }

    fn picture(&self, sample: &gst::Sample) -> Result<Picture> {
        let gst_err = |what: &str| MediaError::Gstreamer(what.to_string());
        let caps = sample.caps().ok_or_else(|| gst_err("sample without caps"))?;
        let info = gst_video::VideoInfo::from_caps(caps).map_err(|e| gst_err(&e.to_string()))?;
        let buffer = sample.buffer().ok_or_else(|| gst_err("sample without buffer"))?;
        let pts_us = buffer.pts().map(|t| t.useconds() as i64);
        let frame = gst_video::VideoFrameRef::from_buffer_ref_readable(buffer, &info)
            .map_err(|e| gst_err(&e.to_string()))?;
        let (w, h) = (info.width(), info.height());
        let strides = frame.plane_stride();
        let plane = |i: u32| -> Result<(&[u8], usize)> {
            let data = frame.plane_data(i).map_err(|e| gst_err(&e.to_string()))?;
            let stride = strides.get(i as usize).copied().unwrap_or(0).max(0) as usize;
            Ok((data, stride))
        };
        match self.format {
            OutputFormat::I420 => Ok(Picture::I420(Frame::from_strided(
                w,
                h,
                pts_us,
                [plane(0)?, plane(1)?, plane(2)?],
            )?)),
            OutputFormat::Rgba => {
                let (data, stride) = plane(0)?;
                let row = w as usize * 4;
                let mut pixels = Vec::with_capacity(row * h as usize);
                for y in 0..h as usize {
                    let line = data
                        .get(y * stride..y * stride + row)
                        .ok_or_else(|| gst_err("RGBA plane too short"))?;
                    pixels.extend_from_slice(line);
                }
                Ok(Picture::Rgba { width: w, height: h, pts_us, pixels })
            }
        }
    }
}

impl Drop for GstDecoder {
    fn drop(&mut self) {
        let _ = self.pipeline.set_state(gst::State::Null);
    }
}

/// A frame rate as a GStreamer fraction: integral rates as n/1, NTSC-style ones as n/1001.
fn fps_fraction(fps: f64) -> (i32, i32) {
    if (fps - fps.round()).abs() < 1e-6 {
        (fps.round().max(1.0) as i32, 1)
    } else {
        ((fps * 1001.0).round().max(1.0) as i32, 1001)
    }
}

/// Decodes a whole clip through GStreamer as fast as possible, returning the pictures and
/// the number of access units that produced none.
pub fn gst_decode_clip(clip: &Clip, format: OutputFormat) -> Result<(Vec<Picture>, usize)> {
    let mut dec = GstDecoder::new(&clip.info, format, false)?;
    let mut out = Vec::with_capacity(clip.units.len());
    for au in &clip.units {
        dec.push(au)?;
        while let Some(p) = dec.pull(Duration::ZERO)? {
            out.push(p);
        }
    }
    out.extend(dec.finish()?);
    let failed = clip.units.len().saturating_sub(out.len());
    Ok((out, failed))
}

/// The reference decoder (FFmpeg's software decoders through ffmpeg-next).
pub struct FfmpegDecoder {
    decoder: ffmpeg::decoder::Video,
    scaler: Option<(ffmpeg::format::Pixel, u32, u32, ffmpeg::software::scaling::Context)>,
    failed: usize,
}

impl FfmpegDecoder {
    /// Opens a decoder for `codec` (H.264 input must be Annex-B with in-band SPS/PPS, as
    /// [`Clip`] provides).
    pub fn new(codec: Codec) -> Result<FfmpegDecoder> {
        init_ffmpeg();
        let id = match codec {
            Codec::H263 => ffmpeg::codec::Id::H263,
            Codec::H264 => ffmpeg::codec::Id::H264,
        };
        let c = ffmpeg::codec::decoder::find(id)
            .ok_or_else(|| MediaError::Decoder(format!("FFmpeg has no {codec} decoder")))?;
        let mut ctx = ffmpeg::codec::Context::new_with_codec(c);
        // One thread: deterministic and comparable with `ffmpeg -threads 1`.
        let mut threading = ffmpeg::threading::Config::kind(ffmpeg::threading::Type::Frame);
        threading.count = 1;
        ctx.set_threading(threading);
        let decoder = ctx
            .decoder()
            .video()
            .map_err(|e| MediaError::Decoder(format!("cannot open the {codec} decoder: {e}")))?;
        Ok(FfmpegDecoder { decoder, scaler: None, failed: 0 })
    }

    /// Feeds one access unit and appends any pictures it completes to `out`.
    pub fn decode(&mut self, au: &AccessUnit, out: &mut Vec<Frame>) -> Result<()> {
        let mut packet = ffmpeg::Packet::copy(&au.data);
        packet.set_pts(Some(au.pts_us));
        packet.set_dts(Some(au.dts_us));
        if self.decoder.send_packet(&packet).is_err() {
            // Corrupt data: the decoder refused it; count it and carry on.
            self.failed += 1;
        }
        self.receive(out)
    }

    /// Flushes the decoder at the end of the stream.
    pub fn finish(&mut self, out: &mut Vec<Frame>) -> Result<()> {
        let _ = self.decoder.send_eof();
        self.receive(out)
    }

    /// Access units the decoder refused.
    pub fn refused(&self) -> usize {
        self.failed
    }

    fn receive(&mut self, out: &mut Vec<Frame>) -> Result<()> {
        let mut frame = ffmpeg::frame::Video::empty();
        while self.decoder.receive_frame(&mut frame).is_ok() {
            out.push(self.convert_to_i420(&frame)?);
        }
        Ok(())
    }

    fn convert_to_i420(&mut self, f: &ffmpeg::frame::Video) -> Result<Frame> {
        use ffmpeg::format::Pixel;
        let (w, h) = (f.width(), f.height());
        let pts = f.pts();
        if matches!(f.format(), Pixel::YUV420P | Pixel::YUVJ420P) {
            return Frame::from_strided(w, h, pts, [0, 1, 2].map(|i| (f.data(i), f.stride(i))));
        }
        let fmt = f.format();
        let rebuild =
            !matches!(&self.scaler, Some((pf, pw, ph, _)) if *pf == fmt && *pw == w && *ph == h);
        if rebuild {
            let ctx = ffmpeg::software::scaling::Context::get(
                fmt,
                w,
                h,
                Pixel::YUV420P,
                w,
                h,
                ffmpeg::software::scaling::Flags::BILINEAR,
            )
            .map_err(|e| MediaError::Decoder(format!("cannot convert {fmt:?} to I420: {e}")))?;
            self.scaler = Some((fmt, w, h, ctx));
        }
        let mut conv = ffmpeg::frame::Video::empty();
        if let Some((_, _, _, ctx)) = self.scaler.as_mut() {
            ctx.run(f, &mut conv)
                .map_err(|e| MediaError::Decoder(format!("pixel conversion failed: {e}")))?;
        }
        Frame::from_strided(w, h, pts, [0, 1, 2].map(|i| (conv.data(i), conv.stride(i))))
    }
}

/// Decodes a whole clip with the reference decoder. Returns the frames and the number of
/// access units that produced no picture.
pub fn ffmpeg_decode_clip(clip: &Clip) -> Result<(Vec<Frame>, usize)> {
    let mut dec = FfmpegDecoder::new(clip.info.codec)?;
    let mut out = Vec::with_capacity(clip.units.len());
    for au in &clip.units {
        dec.decode(au, &mut out)?;
    }
    dec.finish(&mut out)?;
    let failed = clip.units.len().saturating_sub(out.len());
    Ok((out, failed))
}
