//! The controller names of `--cc NAME` and `PROFILE+CC` (INTERFACES.md): one table from a
//! name to a factory and to what kind of controller it is, so front ends and the profile
//! override ([`crate::profile::Profile::with_controller`]) agree on what may be combined.

use std::sync::Arc;

use super::ControllerFactory;

/// How a controller limits sending.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A window per path, each path on its own (reno, cubic, fixed-bdp).
    Window,
    /// A window per path, coupled across the paths of a connection (lia, olia).
    Coupled,
    /// Paced at an equation-based rate from the receiver's feedback (tfrc, marc).
    RateFeedback,
    /// Paced and windowed from its own model of each path (bbr).
    Model,
}

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

/// Every controller a user may choose, in the order INTERFACES.md lists them.
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

/// The kind of the controller that reports itself as `name` (also abcwnd, which profiles
/// bundle but users do not choose: a coupled window like the LIA it extends).
pub fn kind_of(name: &str) -> Option<Kind> {
    match name {
        "abcwnd" => Some(Kind::Coupled),
        n => lookup(n).map(|e| e.kind),
    }
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
        }
        assert!(lookup("vegas").is_none());
        assert_eq!(kind_of("abcwnd"), Some(Kind::Coupled));
        assert_eq!(names(), "reno, lia, olia, cubic, bbr, tfrc, marc, fixed-bdp");
    }
}
