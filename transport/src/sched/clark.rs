//! The maximum of Gaussian random variables by Clark's moment matching (C. E. Clark, "The
//! greatest of a finite set of random variables", Operations Research 9(2), 1961), the
//! arithmetic of the S-EDPF scheduler \[source: ALGORITHMS.md §2\].
//!
//! For independent X₁ ~ N(μ₁, σ₁²), X₂ ~ N(μ₂, σ₂²), with θ = √(σ₁² + σ₂²) and
//! α = (μ₁ − μ₂)/θ:
//!
//! ```text
//! E[max]  = μ₁·Φ(α) + μ₂·Φ(−α) + θ·φ(α)
//! E[max²] = (μ₁² + σ₁²)·Φ(α) + (μ₂² + σ₂²)·Φ(−α) + (μ₁ + μ₂)·θ·φ(α)
//! ```
//!
//! Both moments are exact for two variables. For more, the maximum of the first two is
//! replaced by the Gaussian with those moments and folded with the next (O(P) for P paths);
//! that step is Clark's approximation, since a maximum of Gaussians is not Gaussian. The
//! fold takes the variables in order of increasing variance: a maximum of a constant and a
//! wide Gaussian is skewed, and replacing it by a Gaussian before folding in a second
//! constant overstates the result (by up to ~8 % of σ in the property test's cases).

/// A Gaussian by its mean and variance (any unit; the variance in that unit squared).
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Gaussian {
    /// Mean.
    pub mean: f64,
    /// Variance (≥ 0).
    pub var: f64,
}

impl Gaussian {
    /// A Gaussian with this mean and variance (a negative or non-finite variance is 0).
    pub fn new(mean: f64, var: f64) -> Gaussian {
        Gaussian { mean, var: if var.is_finite() && var > 0.0 { var } else { 0.0 } }
    }

    /// A constant.
    pub fn point(mean: f64) -> Gaussian {
        Gaussian { mean, var: 0.0 }
    }

    /// The standard deviation.
    pub fn sd(&self) -> f64 {
        self.var.sqrt()
    }
}

/// The standard normal density φ(x).
pub fn pdf(x: f64) -> f64 {
    (-0.5 * x * x).exp() / (2.0 * std::f64::consts::PI).sqrt()
}

/// The standard normal distribution function Φ(x) = erfc(−x/√2)/2.
pub fn cdf(x: f64) -> f64 {
    0.5 * libm::erfc(-x / std::f64::consts::SQRT_2)
}

/// The Gaussian with the first two moments of max(a, b) for independent `a` and `b`.
pub fn max2(a: Gaussian, b: Gaussian) -> Gaussian {
    let theta2 = a.var + b.var;
    // Both (nearly) constant: the maximum is the larger mean. The threshold is relative to
    // the means' scale so that θ never divides a rounding residue.
    let scale = a.mean.abs().max(b.mean.abs()).max(1.0);
    if theta2 <= (1e-12 * scale).powi(2) {
        return if a.mean >= b.mean { a } else { b };
    }
    let theta = theta2.sqrt();
    let alpha = (a.mean - b.mean) / theta;
    let (pa, pb, d) = (cdf(alpha), cdf(-alpha), pdf(alpha));
    let m1 = a.mean * pa + b.mean * pb + theta * d;
    let m2 = (a.mean * a.mean + a.var) * pa
        + (b.mean * b.mean + b.var) * pb
        + (a.mean + b.mean) * theta * d;
    Gaussian::new(m1, m2 - m1 * m1)
}

/// The pairwise fold of [`max2`] over `items`, in order of increasing variance (so
/// constants merge exactly before any Gaussian replaces a skewed maximum); `None` when
/// empty.
pub fn max_all(items: impl IntoIterator<Item = Gaussian>) -> Option<Gaussian> {
    let mut v: Vec<Gaussian> = items.into_iter().collect();
    v.sort_by(|a, b| a.var.total_cmp(&b.var).then(a.mean.total_cmp(&b.mean)));
    v.into_iter().reduce(max2)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    /// A standard normal sample (Box–Muller on two 53-bit uniforms, one of the pair kept).
    fn standard_normal(rng: &mut ChaCha8Rng) -> f64 {
        use rand::Rng;
        let uniform =
            |r: &mut ChaCha8Rng| (r.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
        let u1 = 1.0 - uniform(rng);
        let u2 = uniform(rng);
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }

    /// Monte Carlo mean and variance of the maximum of independent samples.
    /// Sample mean, sample variance and the standard error of that variance
    /// (sqrt((m4 - var^2) / n), m4 the fourth central moment) of the maximum.
    fn monte_carlo(items: &[Gaussian], n: usize, seed: u64) -> (f64, f64, f64) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let xs: Vec<f64> = (0..n)
            .map(|_| {
                items
                    .iter()
                    .map(|g| g.mean + g.sd() * standard_normal(&mut rng))
                    .fold(f64::NEG_INFINITY, f64::max)
            })
            .collect();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
        let m4 = xs.iter().map(|x| (x - mean).powi(4)).sum::<f64>() / n as f64;
        (mean, var, ((m4 - var * var).max(0.0) / n as f64).sqrt())
    }

    #[test]
    fn distribution_function_matches_tabulated_values() {
        assert!((cdf(0.0) - 0.5).abs() < 1e-15);
        assert!((cdf(1.0) - 0.841_344_746_068_543).abs() < 1e-12);
        assert!((cdf(-1.96) - 0.024_997_895_148_220).abs() < 1e-12);
        assert!((pdf(0.0) - 0.398_942_280_401_433).abs() < 1e-12);
    }

    #[test]
    fn two_standard_normals_have_the_known_maximum() {
        // E[max(Z1, Z2)] = 1/√π, Var = 1 − 1/π.
        let m = max2(Gaussian::new(0.0, 1.0), Gaussian::new(0.0, 1.0));
        assert!((m.mean - 1.0 / std::f64::consts::PI.sqrt()).abs() < 1e-12, "{m:?}");
        assert!((m.var - (1.0 - 1.0 / std::f64::consts::PI)).abs() < 1e-12, "{m:?}");
    }

    #[test]
    fn constants_and_far_apart_means_reduce_to_the_larger() {
        assert_eq!(max2(Gaussian::point(3.0), Gaussian::point(5.0)), Gaussian::point(5.0));
        let m = max2(Gaussian::new(100.0, 1.0), Gaussian::new(0.0, 1.0));
        assert!((m.mean - 100.0).abs() < 1e-9 && (m.var - 1.0).abs() < 1e-9, "{m:?}");
        // Not the product of the means, not the larger mean: the spread raises it.
        let m = max2(Gaussian::point(0.05), Gaussian::new(0.05, 0.01));
        assert!(m.mean > 0.05 + 0.03, "{m:?}");
        assert_eq!(max_all([]), None);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// The fold against Monte Carlo: exact (to sampling error) for two variables,
        /// within Clark's approximation error (6 % of the largest σ) for up to five.
        #[test]
        fn fold_matches_monte_carlo(
            raw in prop::collection::vec((-1.0f64..1.0, 0.0f64..1.0), 2..6),
            seed in 0u64..1_000,
        ) {
            let items: Vec<Gaussian> =
                raw.iter().map(|&(m, s)| Gaussian::new(m, s * s)).collect();
            let Some(g) = max_all(items.iter().copied()) else { unreachable!() };
            let n = 40_000;
            let (mc_mean, mc_var, var_se) = monte_carlo(&items, n, seed);
            let max_sd = items.iter().map(Gaussian::sd).fold(0.0, f64::max);
            // Five standard errors of the Monte Carlo mean.
            let sampling = 5.0 * mc_var.max(1e-12).sqrt() / (n as f64).sqrt() + 1e-9;
            let approx = if items.len() == 2 { 0.0 } else { 0.06 * max_sd };
            prop_assert!(
                (g.mean - mc_mean).abs() <= sampling + approx,
                "clark {g:?} mc mean {mc_mean} var {mc_var} items {items:?}"
            );
            if items.len() == 2 {
                // The variance too: exact, up to five standard errors of the sample
                // variance (large when the maximum is a rare tail over a point mass).
                prop_assert!(
                    (g.var - mc_var).abs() <= 5.0 * var_se + 1e-6,
                    "clark {g:?} mc var {mc_var} items {items:?}"
                );
            }
        }
    }
}
