//! Random variates used by the link models and the simulator's traffic sources.
//!
//! Written against [`rand::Rng`] (`next_u64`) only, so every draw is a fixed number of
//! words from the caller's seeded generator and results are reproducible.

use rand::Rng;

/// A uniform sample in `[0, 1)` with 53 bits of precision.
pub fn uniform<R: Rng + ?Sized>(rng: &mut R) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// A uniform sample in `(0, 1]` (safe to take the logarithm of).
pub fn uniform_open0<R: Rng + ?Sized>(rng: &mut R) -> f64 {
    1.0 - uniform(rng)
}

/// `true` with probability `p` (values outside `[0, 1]` are clamped).
pub fn bernoulli<R: Rng + ?Sized>(rng: &mut R, p: f64) -> bool {
    if p <= 0.0 {
        // Still draw, so that changing p does not shift later draws.
        let _ = rng.next_u64();
        return false;
    }
    uniform(rng) < p
}

/// A standard normal sample (Box–Muller transform; one of the pair is discarded so that
/// each call draws exactly two words).
pub fn standard_normal<R: Rng + ?Sized>(rng: &mut R) -> f64 {
    let u1 = uniform_open0(rng);
    let u2 = uniform(rng);
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

/// A Pareto sample with the given `mean` and `shape` α (> 1): scale
/// `x_m = mean·(α−1)/α`, sample `x_m / U^(1/α)`. Returns `mean` when α ≤ 1 (the mean
/// would be infinite) and 0 for a non-positive mean.
pub fn pareto<R: Rng + ?Sized>(rng: &mut R, mean: f64, shape: f64) -> f64 {
    let u = uniform_open0(rng);
    if mean <= 0.0 || !mean.is_finite() {
        return 0.0;
    }
    if shape <= 1.0 || !shape.is_finite() {
        return mean;
    }
    let xm = mean * (shape - 1.0) / shape;
    xm / u.powf(1.0 / shape)
}

/// An exponential sample with the given mean.
pub fn exponential<R: Rng + ?Sized>(rng: &mut R, mean: f64) -> f64 {
    -mean * uniform_open0(rng).ln()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn normal_has_zero_mean_and_unit_variance() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let n = 200_000;
        let xs: Vec<f64> = (0..n).map(|_| standard_normal(&mut rng)).collect();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n as f64;
        assert!(mean.abs() < 0.01, "mean {mean}");
        assert!((var - 1.0).abs() < 0.02, "var {var}");
    }

    #[test]
    fn pareto_mean_matches_requested_mean() {
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let n = 400_000;
        let mean = (0..n).map(|_| pareto(&mut rng, 2.0, 3.0)).sum::<f64>() / n as f64;
        assert!((mean - 2.0).abs() < 0.05, "mean {mean}");
    }
}
