//! Sweeps across machines: `braid compare --shard K/N` in separate processes, merged by
//! `braid merge`, write exactly what the unsharded `braid compare` writes; shards that do
//! not belong together, or do not cover the comparison, are refused with one error line.

use std::collections::BTreeMap;
use std::path::Path;

use braid_tests::{TempDir, assert_clean_error, run_braid};

const SCENARIO: &str = "sim/tests/scenarios/two-paths.toml";
const PROFILES: &str = "mptcp,tcp,roundrobin+reno";
const SEEDS: &str = "3";

/// Every file of `dir` by name, with its bytes.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| (e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).unwrap()))
        .collect()
}

fn compare(out: &Path, extra: &[&str]) -> std::process::Output {
    let out = out.to_str().unwrap();
    let mut args =
        vec!["compare", "--scenario", SCENARIO, "--profiles", PROFILES, "--seeds", SEEDS];
    args.extend_from_slice(&["--out", out]);
    args.extend_from_slice(extra);
    run_braid(&args)
}

#[test]
fn three_shards_merged_equal_the_single_run_byte_for_byte() {
    let dir = TempDir::new("sweep");
    let full = dir.join("full");
    let single = compare(&full, &["--jobs", "1"]);
    assert!(single.status.success(), "{}", String::from_utf8_lossy(&single.stderr));

    let mut shard_dirs = Vec::new();
    for k in 1..=3 {
        let d = dir.join(&format!("shard-{k}"));
        let out = compare(&d, &["--shard", &format!("{k}/3")]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8_lossy(&out.stdout);
        // 3 profiles × 3 seeds = 9 runs: 3 per shard.
        assert!(text.contains(&format!("shard {k}/3: 3 of 9 runs")), "{text}");
        assert!(d.join("shard.json").exists());
        assert!(!d.join("compare.json").exists(), "a shard writes no comparison of its own");
        shard_dirs.push(d);
    }
    let merged = dir.join("merged");
    // Shards given out of order merge the same.
    let args: Vec<&str> =
        ["merge", shard_dirs[2].to_str().unwrap(), shard_dirs[0].to_str().unwrap()]
            .into_iter()
            .chain([shard_dirs[1].to_str().unwrap(), "--out", merged.to_str().unwrap()])
            .collect();
    let out = run_braid(&args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&single.stdout),
        "the merged table differs from the single run's"
    );

    let want = files(&full);
    let got = files(&merged);
    assert!(want.contains_key("compare.json"));
    assert_eq!(
        want.keys().collect::<Vec<_>>(),
        got.keys().collect::<Vec<_>>(),
        "the merged directory holds other files"
    );
    for (name, bytes) in &want {
        assert!(got[name] == *bytes, "{name} differs between the single run and the merge");
    }
    // 9 runs, each with its CSV.
    assert_eq!(want.keys().filter(|n| n.ends_with(".csv")).count(), 9);
}

#[test]
fn shards_that_do_not_belong_together_or_leave_gaps_are_refused() {
    let dir = TempDir::new("sweep-bad");
    let a1 = dir.join("a1");
    let a2 = dir.join("a2");
    let b2 = dir.join("b2");
    for (d, shard, extra) in
        [(&a1, "1/2", &[][..]), (&a2, "2/2", &[][..]), (&b2, "2/2", &["--cc", "reno"][..])]
    {
        let mut args = vec!["--shard", shard];
        args.extend_from_slice(extra);
        let out = compare(d, &args);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let merged = dir.join("m");
    let m = merged.to_str().unwrap();
    // A share missing.
    let out = run_braid(&["merge", a1.to_str().unwrap(), "--out", m]);
    let err = assert_clean_error(&out);
    assert!(err.contains("missing [2/2]"), "{err}");
    // The same share twice.
    let out = run_braid(&["merge", a1.to_str().unwrap(), a1.to_str().unwrap(), "--out", m]);
    let err = assert_clean_error(&out);
    assert!(err.contains("given twice [1/2]"), "{err}");
    // Not a shard directory.
    let out = run_braid(&["merge", dir.join("nothing").to_str().unwrap(), "--out", m]);
    let err = assert_clean_error(&out);
    assert!(err.contains("shard.json"), "{err}");
    // A shard of another comparison (other options).
    let out = run_braid(&["merge", a1.to_str().unwrap(), b2.to_str().unwrap(), "--out", m]);
    let err = assert_clean_error(&out);
    assert!(err.contains("different comparisons"), "{err}");
    // A forged run index is refused.
    let text = std::fs::read_to_string(a2.join("shard.json")).unwrap();
    std::fs::write(a2.join("shard.json"), text.replacen("\"index\": 1", "\"index\": 0", 1))
        .unwrap();
    let out = run_braid(&["merge", a1.to_str().unwrap(), a2.to_str().unwrap(), "--out", m]);
    let err = assert_clean_error(&out);
    assert!(err.contains("is not shard 2/2's"), "{err}");
    // Bad --shard values are usage errors.
    for bad in ["0/2", "3/2", "x"] {
        let out = compare(&dir.join("bad"), &["--shard", bad]);
        assert!(!out.status.success());
    }
    // --shard needs --out.
    let out =
        run_braid(&["compare", "--scenario", SCENARIO, "--profiles", "tcp", "--shard", "1/2"]);
    let err = assert_clean_error(&out);
    assert!(err.contains("--out"), "{err}");
}
