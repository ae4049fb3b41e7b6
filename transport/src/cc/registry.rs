//! The controller names of `--cc NAME` and `PROFILE+CC` (docs/REFERENCE.md): one table from a
//! name to a factory and to what kind of controller it is, so front ends and the profile
//! override ([`crate::profile::Profile::with_controller`]) agree on what may be combined.

use std::sync::Arc;

use super::ControllerFactory;

pub use super::Kind;

/// One row of the table.
#[derive(Copy, Clone, Debug)]
pub struct Entry {
    /// The name users type (and [`super::Controller::name`] reports).
    pub name: &'static str,
    /// What kind it is.
    pub kind: Kind,
    /// Builds the factory with its defaults.
    pub factory: fn() -> Arc<dyn ControllerFactory>,
}

/// Every controller a user may choose, in the order docs/REFERENCE.md lists them.
pub const CONTROLLERS: &[Entry] = &[
    Entry { name: "reno", kind: Kind::Window, factory: || Arc::new(super::RenoConfig::default()) },
    Entry { name: "lia", kind: Kind::Coupled, factory: || Arc::new(super::LiaConfig::default()) },
    Entry { name: "olia", kind: Kind::Coupled, factory: || Arc::new(super::OliaConfig::default()) },
    Entry {
        name: "cubic",
        kind: Kind::Window,
        factory: || Arc::new(super::CubicConfig::default()),
    },
    Entry { name: "bbr", kind: Kind::Model, factory: || Arc::new(super::BbrConfig::default()) },
    Entry {
        name: "tfrc",
        kind: Kind::RateFeedback,
        factory: || Arc::new(super::TfrcConfig::default()),
    },
    Entry {
        name: "marc",
        kind: Kind::RateFeedback,
        factory: || Arc::new(super::MarcConfig::default()),
    },
    Entry {
        name: "fixed-bdp",
        kind: Kind::Window,
        factory: || Arc::new(super::FixedBdpConfig::default()),
    },
];

/// The entry called `name`.
pub fn lookup(name: &str) -> Option<&'static Entry> {
    CONTROLLERS.iter().find(|e| e.name == name)
}

/// The names, comma-separated, for error messages.
pub fn names() -> String {
    CONTROLLERS.iter().map(|e| e.name).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_builds_the_controller_it_names() {
        for e in CONTROLLERS {
            assert_eq!((e.factory)().build().name(), e.name);
            // Each factory declares the kind the table gives its name.
            assert_eq!((e.factory)().kind(), e.kind, "{}", e.name);
        }
        assert!(lookup("vegas").is_none());
        assert_eq!(super::super::AbCwndConfig::default().kind(), Kind::Coupled);
        assert_eq!(names(), "reno, lia, olia, cubic, bbr, tfrc, marc, fixed-bdp");
    }
}
