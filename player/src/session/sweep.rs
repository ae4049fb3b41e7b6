//! Sweeps across machines: `braid compare … --shard K/N --out DIR` runs only its share of
//! a simulated comparison's (profile, seed) runs and writes their reports to
//! `DIR/shard.json` beside the runs' CSVs and PNGs; `braid merge DIR… --out DIR` checks
//! that the shards belong to one comparison and cover it exactly once, and writes what the
//! unsharded run writes: the same `compare.json` byte for byte, the same CSVs and PNGs, the
//! same table.
//!
//! Runs are numbered in table order (profile by profile, each over its seeds: index =
//! profile × seeds + the seed's position); shard K of N runs the indices ≡ K − 1 (mod N),
//! so shards get the profiles' runs interleaved and finish at about the same time. Every
//! run is a pure function of (scenario, profile, seed, options), so where a run happens
//! does not change its report.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use anyhow::{Context as _, bail};
use braid_netem::scenario::Scenario;
use braid_sim::SessionReport;
use braid_transport::energy::PowerModels;
use braid_transport::profile::Profile;

use super::compare::{self, Comparison};
use super::parallel::Batch;

/// The file a shard writes into its output directory.
pub const SHARD_FILE: &str = "shard.json";

/// The version of [`SHARD_FILE`]'s format; `braid merge` refuses another.
const FORMAT: u32 = 1;

/// `--shard K/N`: the K-th of N shares (1 ≤ K ≤ N).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    /// Which share, from 1.
    pub k: u32,
    /// How many shares.
    pub n: u32,
}

impl Shard {
    /// Whether run `index` (table order) is this shard's.
    pub fn owns(self, index: usize) -> bool {
        index % self.n as usize == (self.k - 1) as usize
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.k, self.n)
    }
}

impl FromStr for Shard {
    type Err = String;
    fn from_str(s: &str) -> Result<Shard, String> {
        let bad = || format!("`{s}` is not K/N with 1 ≤ K ≤ N (e.g. 2/8)");
        let (k, n) = s.split_once('/').ok_or_else(bad)?;
        let k: u32 = k.trim().parse().map_err(|_| bad())?;
        let n: u32 = n.trim().parse().map_err(|_| bad())?;
        if k == 0 || n == 0 || k > n {
            return Err(bad());
        }
        Ok(Shard { k, n })
    }
}

/// What a shard ran: enough to check that shards belong together and to rebuild the
/// comparison.
#[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ShardFile {
    /// [`FORMAT`].
    pub format: u32,
    /// `K/N`.
    pub shard: String,
    /// The scenario's name.
    pub scenario: String,
    /// SHA-256 of the scenario file's bytes, hex.
    pub scenario_sha256: String,
    /// The options that shape every run (controller, path, cipher, power models), as the
    /// command line gave them; shards with other options do not merge.
    pub options: BTreeMap<String, String>,
    /// Every seed of the comparison (not only this shard's).
    pub seeds: Vec<u64>,
    /// Every profile of the comparison, in table order.
    pub profiles: Vec<String>,
    /// This shard's runs, in index order.
    pub runs: Vec<ShardRun>,
}

/// One run of a shard.
#[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ShardRun {
    /// Its index in table order.
    pub index: usize,
    /// Its report, as `compare.json` lists it.
    pub report: SessionReport,
}

impl ShardFile {
    /// Writes the file into `dir`.
    pub fn write(&self, dir: &Path) -> anyhow::Result<PathBuf> {
        let path = dir.join(SHARD_FILE);
        let text = serde_json::to_string_pretty(self).context("serialising the shard")?;
        std::fs::write(&path, text + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
        Ok(path)
    }

    /// Reads `dir/shard.json`.
    pub fn read(dir: &Path) -> anyhow::Result<ShardFile> {
        let path = dir.join(SHARD_FILE);
        let text = std::fs::read_to_string(&path).with_context(|| {
            format!(
                "reading {} (is {} the --out of `braid compare --shard`?)",
                path.display(),
                dir.display()
            )
        })?;
        let file: ShardFile =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        if file.format != FORMAT {
            bail!("{}: shard format {} (this braid reads {FORMAT})", path.display(), file.format);
        }
        Ok(file)
    }
}

/// The command-line settings of a sharded comparison that shape its runs.
#[derive(Debug, Clone)]
pub struct ShardSettings {
    /// The scenario file as given.
    pub scenario_file: PathBuf,
    /// `--cc`.
    pub cc: Option<String>,
    /// `--path`.
    pub path: Option<String>,
    /// `--protect`.
    pub protect: bool,
    /// `--power ROLE=FILE`, as given.
    pub power: Vec<String>,
    /// `--seeds`.
    pub seeds: u32,
    /// `--battery`, J.
    pub battery_j: Option<f64>,
    /// `--max-buffer`, s.
    pub max_buffer_s: Option<f64>,
}

impl ShardSettings {
    /// The options every shard of one comparison must share: the given flags, the power
    /// files by content, the battery when given.
    fn options(&self) -> anyhow::Result<BTreeMap<String, String>> {
        let mut options = BTreeMap::new();
        options.insert("cc".to_string(), self.cc.clone().unwrap_or_default());
        options.insert("path".to_string(), self.path.clone().unwrap_or_default());
        options.insert("protect".to_string(), self.protect.to_string());
        let mut power = Vec::new();
        for spec in &self.power {
            let (role, file) = spec.split_once('=').unwrap_or(("", spec.as_str()));
            let body = std::fs::read(file).with_context(|| format!("reading {file}"))?;
            power.push(format!("{role}:{}", sha256_hex(&body)));
        }
        options.insert("power".to_string(), power.join(","));
        // Only when given, so that shards written before the flag existed still merge.
        if let Some(j) = self.battery_j {
            options.insert("battery".to_string(), j.to_string());
        }
        if let Some(s) = self.max_buffer_s {
            options.insert("max_buffer".to_string(), s.to_string());
        }
        Ok(options)
    }
}

/// Runs shard `shard` of the simulated comparison and writes its runs' CSVs and PNGs and
/// `shard.json` into `out`.
#[allow(clippy::too_many_arguments)]
pub fn run_shard(
    settings: &ShardSettings,
    shard: Shard,
    scenario: &Scenario,
    profiles: &[Profile],
    power: &PowerModels,
    hooks: &braid_sim::TraceHooks,
    batch: Batch,
    out: &PathBuf,
) -> anyhow::Result<()> {
    let bytes = std::fs::read(&settings.scenario_file)
        .with_context(|| format!("reading {}", settings.scenario_file.display()))?;
    let options = settings.options()?;
    let runs = compare::simulate_runs(
        scenario,
        profiles,
        settings.seeds,
        settings.path.clone(),
        Some(out),
        power,
        hooks,
        batch,
        |i| shard.owns(i),
    )?;
    let total = profiles.len() * settings.seeds as usize;
    let file = ShardFile {
        format: FORMAT,
        shard: shard.to_string(),
        scenario: scenario.name.clone(),
        scenario_sha256: sha256_hex(&bytes),
        options,
        seeds: compare::seed_list(scenario, settings.seeds),
        profiles: profiles.iter().map(|p| p.name.to_string()).collect(),
        runs: runs.into_iter().map(|(index, report)| ShardRun { index, report }).collect(),
    };
    let path = file.write(out)?;
    println!("shard {shard}: {} of {total} runs, written to {}", file.runs.len(), path.display());
    Ok(())
}

/// SHA-256 of `bytes`, lower-case hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, bytes)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The shards read from `dirs`, checked: one comparison (same scenario bytes, options,
/// seeds and profiles), every share 1..N exactly once, every run index exactly once.
pub fn merge(dirs: &[PathBuf]) -> anyhow::Result<Comparison> {
    if dirs.is_empty() {
        bail!("give the output directories of the shards to merge");
    }
    let mut shards: Vec<(Shard, ShardFile, &Path)> = Vec::new();
    for dir in dirs {
        let file = ShardFile::read(dir)?;
        let shard: Shard = file
            .shard
            .parse()
            .map_err(|e| anyhow::anyhow!("{}: shard {e}", dir.join(SHARD_FILE).display()))?;
        shards.push((shard, file, dir.as_path()));
    }
    shards.sort_by_key(|(s, _, _)| s.k);
    let (first_shard, first, first_dir) = &shards[0];
    for (shard, file, dir) in &shards[1..] {
        let differs = |what: &str| {
            anyhow::anyhow!(
                "{} and {} are shards of different comparisons: their {what} differ",
                first_dir.display(),
                dir.display()
            )
        };
        if shard.n != first_shard.n {
            return Err(differs("shard counts (N)"));
        }
        if file.scenario != first.scenario || file.scenario_sha256 != first.scenario_sha256 {
            return Err(differs("scenario files"));
        }
        if file.options != first.options {
            return Err(differs("options (--cc, --path, --protect, --power, --battery)"));
        }
        if file.seeds != first.seeds {
            return Err(differs("seeds"));
        }
        if file.profiles != first.profiles {
            return Err(differs("profiles"));
        }
    }
    let n = first_shard.n;
    let have: Vec<u32> = shards.iter().map(|(s, _, _)| s.k).collect();
    let want: Vec<u32> = (1..=n).collect();
    if have != want {
        let missing: Vec<String> =
            want.iter().filter(|k| !have.contains(k)).map(|k| format!("{k}/{n}")).collect();
        let mut twice: Vec<String> =
            have.windows(2).filter(|w| w[0] == w[1]).map(|w| format!("{}/{n}", w[0])).collect();
        twice.dedup();
        bail!(
            "the shards do not cover the comparison once: missing [{}], given twice [{}]",
            missing.join(", "),
            twice.join(", ")
        );
    }
    let total = first.profiles.len() * first.seeds.len();
    let scenario = first.scenario.clone();
    let seeds = first.seeds.clone();
    let profiles = first.profiles.clone();
    let mut by_index: BTreeMap<usize, SessionReport> = BTreeMap::new();
    for (shard, file, dir) in shards {
        for run in file.runs {
            if run.index >= total || !shard.owns(run.index) {
                bail!(
                    "{}: run {} is not shard {shard}'s",
                    dir.join(SHARD_FILE).display(),
                    run.index
                );
            }
            let (p, s) = (run.index / seeds.len(), run.index % seeds.len());
            if run.report.profile != profiles[p] || run.report.seed != seeds[s] {
                bail!(
                    "{}: run {} is profile {} seed {}, expected {} seed {}",
                    dir.join(SHARD_FILE).display(),
                    run.index,
                    run.report.profile,
                    run.report.seed,
                    profiles[p],
                    seeds[s]
                );
            }
            by_index.insert(run.index, run.report);
        }
    }
    if by_index.len() != total {
        let missing: Vec<String> =
            (0..total).filter(|i| !by_index.contains_key(i)).map(|i| i.to_string()).collect();
        bail!(
            "the shards lack runs {} of {total} (a shard that failed part-way?)",
            missing.join(", ")
        );
    }
    Ok(compare::summarize(&scenario, seeds, &profiles, by_index.into_values()))
}

/// Copies every file of the shard directories but their `shard.json` into `out` (the
/// runs' CSVs and PNGs). A name present in two shards with different bytes is an error.
pub fn copy_run_files(dirs: &[PathBuf], out: &Path) -> anyhow::Result<usize> {
    let mut copied: BTreeMap<std::ffi::OsString, PathBuf> = BTreeMap::new();
    for dir in dirs {
        let entries =
            std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))?;
        for entry in entries {
            let entry = entry.with_context(|| format!("listing {}", dir.display()))?;
            let name = entry.file_name();
            if name == SHARD_FILE || !entry.file_type().map(|t| t.is_file()).unwrap_or(false) {
                continue;
            }
            let from = entry.path();
            if let Some(prev) = copied.get(&name) {
                let same = std::fs::read(prev).ok() == std::fs::read(&from).ok();
                if !same {
                    bail!("{} and {} differ", prev.display(), from.display());
                }
                continue;
            }
            let to = out.join(&name);
            if to != from {
                std::fs::copy(&from, &to)
                    .with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
            }
            copied.insert(name, from);
        }
    }
    Ok(copied.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_k_of_n_parses_and_owns_every_nth_run() {
        let s: Shard = "2/3".parse().unwrap();
        assert_eq!(s, Shard { k: 2, n: 3 });
        let owned: Vec<usize> = (0..8).filter(|&i| s.owns(i)).collect();
        assert_eq!(owned, vec![1, 4, 7]);
        for bad in ["0/3", "4/3", "1/0", "x/2", "2", "1/2/3", ""] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
        // Every index belongs to exactly one shard.
        for i in 0..50 {
            let owners = (1..=7).filter(|&k| Shard { k, n: 7 }.owns(i)).count();
            assert_eq!(owners, 1);
        }
    }

    #[test]
    fn shards_share_the_battery_only_when_one_is_given() {
        let settings = ShardSettings {
            scenario_file: PathBuf::from("s.toml"),
            cc: None,
            path: None,
            protect: false,
            power: Vec::new(),
            seeds: 1,
            battery_j: None,
            max_buffer_s: None,
        };
        let keys: Vec<String> = settings.options().unwrap().into_keys().collect();
        assert_eq!(keys, ["cc", "path", "power", "protect"]);
        let with = ShardSettings { battery_j: Some(100.0), ..settings };
        assert_eq!(with.options().unwrap().get("battery").map(String::as_str), Some("100"));
    }

    #[test]
    fn sha256_is_lower_case_hex() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
