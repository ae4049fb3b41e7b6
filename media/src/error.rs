//! The media crate's error type.

use std::path::PathBuf;

/// Everything that can go wrong reading, decoding or comparing video.
#[derive(Debug, thiserror::Error)]
pub enum MediaError {
    /// The file does not exist or cannot be read.
    #[error("cannot read {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// FFmpeg could not open the file as media.
    #[error("{path} is not a media file ffmpeg can open ({reason})")]
    NotMedia {
        /// The file.
        path: PathBuf,
        /// FFmpeg's reason.
        reason: String,
    },
    /// The file has no video stream.
    #[error("{path} has no video stream")]
    NoVideo {
        /// The file.
        path: PathBuf,
    },
    /// The video codec is not one Braid streams.
    #[error("unsupported codec `{codec}` in {path} (Braid plays h263 and h264)")]
    UnsupportedCodec {
        /// The file.
        path: PathBuf,
        /// The codec as ffmpeg names it.
        codec: String,
    },
    /// The stream holds no frames at all.
    #[error("{path}: no video frames could be read (truncated or corrupt)")]
    Empty {
        /// The file.
        path: PathBuf,
    },
    /// A frame rate was needed and none is known.
    #[error("{path}: the stream carries no frame rate; pass --fps")]
    NoFrameRate {
        /// The file.
        path: PathBuf,
    },
    /// Malformed codec configuration (e.g. an avcC record).
    #[error("malformed codec configuration: {0}")]
    BadConfig(String),
    /// A decoder failed to start.
    #[error("decoder: {0}")]
    Decoder(String),
    /// A GStreamer element is missing (a plugin package is not installed).
    #[error("GStreamer element `{element}` is missing (install {package})")]
    MissingElement {
        /// The element factory name.
        element: String,
        /// The Debian package that provides it.
        package: &'static str,
    },
    /// GStreamer reported an error.
    #[error("GStreamer: {0}")]
    Gstreamer(String),
    /// A media message is malformed.
    #[error("media message: {0}")]
    Framing(String),
    /// Two videos cannot be compared.
    #[error("cannot compare: {0}")]
    Mismatch(String),
}

/// Shorthand for results in this crate.
pub type Result<T, E = MediaError> = std::result::Result<T, E>;
