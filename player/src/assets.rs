//! Assets embedded in the binary, so `braid demo` runs from any directory.

use std::path::{Path, PathBuf};

use anyhow::Context as _;

/// The bundled H.264 CIF clip (`assets/clips/h264-cif-25fps-2m.mp4`).
pub const DEMO_CLIP: &[u8] = include_bytes!("../../assets/clips/h264-cif-25fps-2m.mp4");
/// The scenario `braid demo` emulates (`assets/scenarios/demo.toml`).
pub const DEMO_SCENARIO: &str = include_str!("../../assets/scenarios/demo.toml");
/// Its path inside the repository, for reports.
pub const DEMO_CLIP_NAME: &str = "assets/clips/h264-cif-25fps-2m.mp4";

/// A file written to the temporary directory, removed on drop.
pub struct TempAsset {
    path: PathBuf,
}

impl TempAsset {
    /// Writes `bytes` to a fresh temporary file whose name ends in `suffix`.
    pub fn write(bytes: &[u8], suffix: &str) -> anyhow::Result<TempAsset> {
        let path = std::env::temp_dir().join(format!("braid-{}-{suffix}", std::process::id()));
        std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))?;
        Ok(TempAsset { path })
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempAsset {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
