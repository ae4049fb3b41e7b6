//! Benchmarks (placeholder replaced below).
pub fn run(_args: &[String]) -> Result<(), String> { Ok(()) }
