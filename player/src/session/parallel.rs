//! Independent runs on several threads (`--jobs N`): a rayon pool of `N` threads maps the
//! runs, and the results come back in the order of the inputs, so everything written from
//! them (tables, JSON, CSV and PNG names and contents) is the same for any `N`.

use anyhow::Context as _;
use rayon::prelude::*;

/// How a batch of simulated runs is run: `--jobs` and `--protect`.
#[derive(Debug, Clone, Copy)]
pub struct Batch {
    /// Runs at a time.
    pub jobs: usize,
    /// Real AEAD instead of the simulator's null cipher.
    pub protect: bool,
}

/// The default `--jobs`: the number of cores.
pub fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// `--jobs` as given, or the default; zero is refused.
pub fn jobs(arg: Option<usize>) -> anyhow::Result<usize> {
    match arg {
        Some(0) => anyhow::bail!("--jobs must be at least 1"),
        Some(n) => Ok(n),
        None => Ok(default_jobs()),
    }
}

/// `f` over `items` on `jobs` threads; results in the order of `items`. When runs fail,
/// the first failure in that order is returned (the same one for any `jobs`).
pub fn map<T, R, F>(jobs: usize, items: &[T], f: F) -> anyhow::Result<Vec<R>>
where
    T: Sync,
    R: Send,
    F: Fn(&T) -> anyhow::Result<R> + Sync + Send,
{
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(jobs.max(1))
        .thread_name(|i| format!("braid-run-{i}"))
        .build()
        .context("starting the run threads")?;
    let results: Vec<anyhow::Result<R>> = pool.install(|| items.par_iter().map(&f).collect());
    results.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_keep_the_input_order_and_the_first_error() {
        let items: Vec<u64> = (0..50).collect();
        let square = |x: &u64| -> anyhow::Result<u64> { Ok(x * x) };
        let one = map(1, &items, square).unwrap();
        let four = map(4, &items, square).unwrap();
        assert_eq!(one, four);
        assert_eq!(one[7], 49);
        let fail = |x: &u64| -> anyhow::Result<u64> {
            if *x % 10 == 3 { anyhow::bail!("run {x} failed") } else { Ok(*x) }
        };
        for n in [1, 3] {
            let e = map(n, &items, fail).unwrap_err().to_string();
            assert_eq!(e, "run 3 failed");
        }
        assert!(jobs(Some(0)).is_err());
        assert_eq!(jobs(Some(3)).unwrap(), 3);
        assert!(jobs(None).unwrap() >= 1);
    }
}
