//! Radio power-model files (`assets/power/{wifi,lte,3g}.toml`, `--power ROLE=FILE`).
//!
//! The model itself is the protocol crate's ([`braid_transport::energy`]); this module only
//! reads its parameters from TOML, so that the protocol crate carries no file format.

use braid_transport::energy::{EnergyError, RadioParams};

/// Parses and validates a power-model file.
pub fn radio_params_from_toml(text: &str) -> Result<RadioParams, EnergyError> {
    let p: RadioParams = toml::from_str(text).map_err(|e| EnergyError::Parse(e.to_string()))?;
    p.validate()?;
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use braid_transport::PathRole;

    const LTE_TOML: &str = include_str!("../../assets/power/lte.toml");

    #[test]
    fn bundled_files_are_the_builtin_parameters() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../assets/power");
        for role in [PathRole::Wifi, PathRole::Lte, PathRole::ThreeG] {
            let text =
                std::fs::read_to_string(dir.join(format!("{}.toml", role.as_str()))).unwrap();
            assert_eq!(radio_params_from_toml(&text).unwrap(), RadioParams::builtin(role).unwrap());
        }
    }

    #[test]
    fn bad_parameter_files_are_errors() {
        assert!(radio_params_from_toml("radio = 1").is_err());
        let neg = LTE_TOML.replace("beta_mw = 1288.04", "beta_mw = -5.0");
        assert!(radio_params_from_toml(&neg).is_err());
        let extra = format!("{LTE_TOML}\nsurprise = 3\n");
        assert!(radio_params_from_toml(&extra).is_err());
    }
}
