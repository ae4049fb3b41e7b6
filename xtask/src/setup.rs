//! Installs the system packages Braid needs, checking first so it is instant when present.
//!
//! The package list and its reasons are in the README ("System packages"). On Debian or
//! Ubuntu missing packages are installed with apt-get (directly as root, via sudo otherwise);
//! elsewhere a message names what to install.

use std::process::{Command, Stdio};

/// Debian package names, grouped by why they are needed.
const PACKAGES: &[(&str, &[&str])] = &[
    (
        "build",
        &[
            "pkg-config",
            "libclang-dev",
            "libgstreamer1.0-dev",
            "libgstreamer-plugins-base1.0-dev",
            "libavcodec-dev",
            "libavformat-dev",
            "libavutil-dev",
            "libswscale-dev",
        ],
    ),
    (
        "media run time",
        &[
            "gstreamer1.0-plugins-base",
            "gstreamer1.0-plugins-good",
            "gstreamer1.0-plugins-bad",
            "gstreamer1.0-libav",
        ],
    ),
    (
        "GUI run time",
        &[
            "libgl1-mesa-dri",
            "libglx-mesa0",
            "libegl1",
            "libegl-mesa0",
            "libxkbcommon-x11-0",
            "libxcursor1",
            "libxi6",
            "libxrandr2",
        ],
    ),
    (
        "tests, assets and benchmarks",
        &[
            "xvfb",
            "xauth",
            "imagemagick",
            "ffmpeg",
            "gstreamer1.0-tools",
            "iperf3",
            "time",
            "fonts-dejavu-core",
            // The Wireshark dissector test; DEBIAN_FRONTEND=noninteractive answers the
            // wireshark-common "install-setuid" question with its default (no).
            "tshark",
        ],
    ),
    ("the TUN network-namespace bed (braid bed, --bed; root)", &["iproute2", "iputils-ping"]),
];

/// pkg-config modules the build links against.
const PKG_CONFIG_MODULES: &[&str] = &[
    "gstreamer-1.0",
    "gstreamer-app-1.0",
    "gstreamer-video-1.0",
    "libavcodec",
    "libavformat",
    "libavutil",
    "libswscale",
];

/// GStreamer elements the playback pipeline uses (missing plugins only fail at run time).
const GST_ELEMENTS: &[&str] =
    &["appsrc", "appsink", "h264parse", "h263parse", "avdec_h264", "avdec_h263", "videoconvert"];

/// Makes sure every system package is present, installing the missing ones.
pub fn ensure() -> Result<(), String> {
    if which("dpkg-query") {
        let all: Vec<&str> = PACKAGES.iter().flat_map(|(_, p)| p.iter().copied()).collect();
        let missing = missing_debian_packages(&all);
        if !missing.is_empty() {
            eprintln!("xtask: installing missing packages: {}", missing.join(" "));
            apt_install(&missing)?;
        }
    }
    verify()
}

/// Checks what the build and the player need, with pkg-config and gst-inspect.
fn verify() -> Result<(), String> {
    let mut problems = Vec::new();
    if !which("pkg-config") {
        problems.push("pkg-config is not installed".to_string());
    } else {
        for m in PKG_CONFIG_MODULES {
            let ok = Command::new("pkg-config")
                .args(["--exists", m])
                .status()
                .map(|s| s.success())
                .unwrap_or(false);
            if !ok {
                problems.push(format!("pkg-config module `{m}` not found"));
            }
        }
    }
    if which("gst-inspect-1.0") {
        for e in GST_ELEMENTS {
            let ok = Command::new("gst-inspect-1.0")
                .args(["--exists", e])
                .status()
                .map(|s| s.success())
                .unwrap_or(false);
            if !ok {
                problems.push(format!("GStreamer element `{e}` not found"));
            }
        }
    } else {
        problems.push("gst-inspect-1.0 (gstreamer1.0-tools) is not installed".to_string());
    }
    if problems.is_empty() {
        return Ok(());
    }
    let mut msg = String::from("the system is missing what Braid needs:\n");
    for p in &problems {
        msg.push_str(&format!("  - {p}\n"));
    }
    msg.push_str("install these packages (Debian/Ubuntu names):\n");
    for (why, pkgs) in PACKAGES {
        msg.push_str(&format!("  {why}: {}\n", pkgs.join(" ")));
    }
    Err(msg)
}

fn missing_debian_packages(pkgs: &[&str]) -> Vec<String> {
    let out = Command::new("dpkg-query")
        .args(["-W", "-f=${Package} ${db:Status-Status}\n"])
        .args(pkgs)
        .stderr(Stdio::null())
        .output();
    let installed: Vec<String> = match out {
        Ok(o) => String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter_map(|l| {
                let mut it = l.split_whitespace();
                let name = it.next()?;
                (it.next() == Some("installed"))
                    .then(|| name.split(':').next().unwrap_or(name).to_string())
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    pkgs.iter().filter(|p| !installed.iter().any(|i| i == *p)).map(|p| p.to_string()).collect()
}

fn apt_install(pkgs: &[String]) -> Result<(), String> {
    if !which("apt-get") {
        return Err(format!(
            "these packages are missing and apt-get is not available: {}",
            pkgs.join(" ")
        ));
    }
    let is_root = Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false);
    let mut prefix: Vec<&str> = Vec::new();
    if !is_root {
        if !which("sudo") {
            return Err(format!(
                "not root and sudo is not available; as root run: apt-get install {}",
                pkgs.join(" ")
            ));
        }
        prefix.push("sudo");
    }
    let mk = |args: &[&str]| {
        let mut c = Command::new(prefix.first().copied().unwrap_or("apt-get"));
        if !prefix.is_empty() {
            c.arg("apt-get");
        }
        c.args(args).env("DEBIAN_FRONTEND", "noninteractive");
        c
    };
    crate::run(&mut mk(&["update", "-qq"]))?;
    let mut install = mk(&["install", "-y", "-qq"]);
    install.args(pkgs);
    crate::run(&mut install)
}

/// Whether `prog` is on PATH.
pub fn which(prog: &str) -> bool {
    std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).any(|d| d.join(prog).is_file()))
        .unwrap_or(false)
}
