//! Writes Markov-modulated cellular-like traces (see `braid_netem::markov`).
//!
//! `cargo run -p braid-transport --example markov_traces -- DIR MODEL FIRST_SEED LAST_SEED
//! [DURATION_S]` writes `DIR/MODEL-SEED.down` for each seed; MODEL is `lte`,
//! `lte-driving`, `umts` or `evdo`; the duration defaults to 40 s.

use braid_netem::markov::{MarkovModel, to_mahimahi};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [dir, model, first, last, rest @ ..] = args.as_slice() else {
        return Err("usage: markov_traces DIR MODEL FIRST_SEED LAST_SEED [DURATION_S]".into());
    };
    let m = match model.as_str() {
        "lte" => MarkovModel::lte(),
        "lte-driving" => MarkovModel::lte_driving(),
        "umts" => MarkovModel::umts(),
        "evdo" => MarkovModel::evdo(),
        other => return Err(format!("unknown model `{other}`").into()),
    };
    let duration_s: u64 = rest.first().map_or(Ok(40), |d| d.parse())?;
    std::fs::create_dir_all(dir)?;
    for seed in first.parse::<u64>()?..=last.parse::<u64>()? {
        let ts = m.generate_ms(duration_s * 1000, seed)?;
        let path = std::path::Path::new(dir).join(format!("{model}-{seed}.down"));
        std::fs::write(&path, to_mahimahi(&ts))?;
        println!("{}", path.display());
    }
    Ok(())
}
