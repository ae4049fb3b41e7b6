//! `--qlog DIR`, `--pcap DIR` and `--keylog FILE`: where a run's traces, captures and TLS
//! secrets go.
//!
//! File names:
//! - simulator: `DIR/PROFILE-seedSEED-client.qlog` and `…-server.qlog` (the main flow);
//!   `DIR/PATH-down.pcap` / `DIR/PATH-up.pcap`, in `DIR/PROFILE-seedSEED/` when a
//!   command runs several (compare);
//! - real time: `DIR/CID-client.qlog` / `DIR/CID-server.qlog` (the connection id in hex),
//!   and the relay's `DIR/PATH-down.pcap` / `DIR/PATH-up.pcap` (a relay started again in
//!   the same process, as `demo --loop` and `compare --realtime` do, writes
//!   `PATH-down-2.pcap`, …).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{Context as _, bail};
use braid_sim::{TraceFactory, TraceHooks};
use braid_transport::trace::{CaptureSink, Direction, PcapWriter, QlogWriter, TraceSink, Vantage};

/// The trace flags of sim, compare, serve, play, demo, perf and netem.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TraceArgs {
    /// Write a qlog trace (JSON-SEQ) per connection and side into this directory.
    #[arg(long, value_name = "DIR", global = true)]
    pub qlog: Option<PathBuf>,
    /// Write a pcap capture per emulated path and direction (PATH-down.pcap,
    /// PATH-up.pcap) into this directory.
    #[arg(long, value_name = "DIR", global = true)]
    pub pcap: Option<PathBuf>,
    /// Append the TLS secrets in the NSS key-log format to this file (SSLKEYLOGFILE
    /// works too).
    #[arg(long, value_name = "FILE", global = true)]
    pub keylog: Option<PathBuf>,
}

/// Where the files of one command go; checked before the run starts.
#[derive(Debug)]
pub struct Traces {
    qlog: Option<PathBuf>,
    pcap: Option<PathBuf>,
    /// Runs get their own capture directory (several runs in one command).
    per_run: bool,
    /// TLS secrets are logged (--keylog or SSLKEYLOGFILE).
    key_log: bool,
    /// Capture names handed out so far (real time: a repeated relay gets `-2`, `-3`, …).
    used: Mutex<BTreeMap<String, u32>>,
}

/// Makes `dir` (and its parents) and proves it writable; an error names the flag.
fn ready_dir(flag: &str, dir: &Path) -> anyhow::Result<()> {
    if dir.exists() && !dir.is_dir() {
        bail!("{flag} {}: not a directory", dir.display());
    }
    std::fs::create_dir_all(dir).with_context(|| format!("{flag} {}", dir.display()))?;
    let probe = dir.join(".braid-write-test");
    File::create(&probe).with_context(|| format!("{flag} {}: not writable", dir.display()))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

impl TraceArgs {
    /// Checks the directories and the key log and installs the real-time hooks (every
    /// connection and relay of this process); `per_run`: the command runs several
    /// simulations. One error line before anything runs when a place is unusable.
    pub fn prepare(&self, per_run: bool) -> anyhow::Result<Arc<Traces>> {
        if let Some(d) = &self.qlog {
            ready_dir("--qlog", d)?;
        }
        if let Some(d) = &self.pcap {
            ready_dir("--pcap", d)?;
        }
        if let Some(f) = &self.keylog {
            if f.is_dir() {
                bail!("--keylog {}: is a directory", f.display());
            }
            braid_io::tls::set_key_log_file(f)
                .with_context(|| format!("--keylog {}", f.display()))?;
        }
        let traces = Arc::new(Traces {
            qlog: self.qlog.clone(),
            pcap: self.pcap.clone(),
            per_run,
            key_log: self.keylog.is_some() || std::env::var_os("SSLKEYLOGFILE").is_some(),
            used: Mutex::new(BTreeMap::new()),
        });
        if traces.qlog.is_some() {
            let t = Arc::clone(&traces);
            braid_io::driver::set_trace_factory(Arc::new(move |v, cid| t.realtime_qlog(v, cid)));
        }
        if traces.pcap.is_some() {
            let t = Arc::clone(&traces);
            braid_io::relay::set_capture_factory(Arc::new(move |path, d| t.relay_capture(path, d)));
        }
        Ok(traces)
    }
}

fn side(v: Vantage) -> &'static str {
    match v {
        Vantage::Client => "client",
        Vantage::Server => "server",
    }
}

/// A qlog writer on a new file; a file that cannot be made is reported once on stderr
/// and the run goes on untraced.
fn qlog_file(path: PathBuf, title: &str, v: Vantage) -> Option<Box<dyn TraceSink>> {
    let made = File::create(&path)
        .and_then(|f| QlogWriter::new(BufWriter::new(f), title, v))
        .map(|w| Box::new(w) as Box<dyn TraceSink>);
    match made {
        Ok(w) => Some(w),
        Err(e) => {
            eprintln!("warning: cannot write {}: {e}", path.display());
            None
        }
    }
}

fn pcap_file(path: PathBuf, base_us: u64) -> Option<Box<dyn CaptureSink>> {
    let made = File::create(&path)
        .and_then(|f| PcapWriter::new(BufWriter::new(f), base_us))
        .map(|w| Box::new(w) as Box<dyn CaptureSink>);
    match made {
        Ok(w) => Some(w),
        Err(e) => {
            eprintln!("warning: cannot write {}: {e}", path.display());
            None
        }
    }
}

/// A name safe as one path component.
fn file_part(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() || "-_.+".contains(c) { c } else { '_' })
        .collect()
}

impl Traces {
    /// The simulator's hooks (none without --qlog and --pcap).
    pub fn hooks(self: &Arc<Self>) -> TraceHooks {
        if self.qlog.is_none() && self.pcap.is_none() && !self.key_log {
            return TraceHooks::default();
        }
        TraceHooks(Some(Arc::clone(self) as Arc<dyn TraceFactory>))
    }

    fn realtime_qlog(&self, v: Vantage, cid: u64) -> Option<Box<dyn TraceSink>> {
        let dir = self.qlog.as_ref()?;
        let title = format!("braid connection {cid:016x}");
        qlog_file(dir.join(format!("{cid:016x}-{}.qlog", side(v))), &title, v)
    }

    fn relay_capture(&self, path: &str, d: Direction) -> Option<Box<dyn CaptureSink>> {
        let dir = self.pcap.as_ref()?;
        let base = format!("{}-{}", file_part(path), d.as_str());
        let n = {
            let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
            let n = used.entry(base.clone()).or_insert(0);
            *n += 1;
            *n
        };
        let name = if n == 1 { format!("{base}.pcap") } else { format!("{base}-{n}.pcap") };
        let unix_us = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64);
        pcap_file(dir.join(name), unix_us)
    }
}

impl TraceFactory for Traces {
    fn connection(&self, profile: &str, seed: u64, v: Vantage) -> Option<Box<dyn TraceSink>> {
        let dir = self.qlog.as_ref()?;
        let title = format!("braid sim {profile} seed {seed}");
        let name = format!("{}-seed{seed}-{}.qlog", file_part(profile), side(v));
        qlog_file(dir.join(name), &title, v)
    }

    fn capture(
        &self,
        profile: &str,
        seed: u64,
        path: &str,
        d: Direction,
    ) -> Option<Box<dyn CaptureSink>> {
        let mut dir = self.pcap.clone()?;
        if self.per_run {
            dir = dir.join(format!("{}-seed{seed}", file_part(profile)));
            if let Err(e) = std::fs::create_dir_all(&dir) {
                eprintln!("warning: cannot make {}: {e}", dir.display());
                return None;
            }
        }
        pcap_file(dir.join(format!("{}-{}.pcap", file_part(path), d.as_str())), 0)
    }

    fn key_log(&self) -> Option<Arc<dyn rustls::KeyLog>> {
        self.key_log.then(braid_io::tls::key_log)
    }
}
