//! The scenario file as written: serde structs mirroring the TOML, with spans kept for
//! error messages. Validation into the typed [`super::Scenario`] happens in `validate`.

use serde::Deserialize;
use toml::Spanned;

/// A rate: a string with a unit (`"2mbit"`) or a number of bit/s.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum RateValue {
    Number(f64),
    Text(String),
}

impl<'de> Deserialize<'de> for RateValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = RateValue;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a rate such as \"2mbit\" or a number of bit/s")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<RateValue, E> {
                Ok(RateValue::Number(v as f64))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<RateValue, E> {
                Ok(RateValue::Number(v as f64))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<RateValue, E> {
                Ok(RateValue::Number(v))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<RateValue, E> {
                Ok(RateValue::Text(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

/// `"rtt"` or a number of milliseconds.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum PeriodValue {
    Number(f64),
    Text(String),
}

impl<'de> Deserialize<'de> for PeriodValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match RateValue::deserialize(d)? {
            RateValue::Number(n) => Ok(PeriodValue::Number(n)),
            RateValue::Text(t) => Ok(PeriodValue::Text(t)),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawScenario {
    pub name: Spanned<String>,
    pub duration_s: Spanned<f64>,
    pub seed: Option<Spanned<u64>>,
    pub idle_timeout_s: Option<Spanned<f64>>,
    #[serde(default)]
    pub link: Vec<Spanned<RawLink>>,
    #[serde(default)]
    pub path: Vec<Spanned<RawPath>>,
    #[serde(default)]
    pub node: Vec<Spanned<RawNode>>,
    #[serde(default)]
    pub event: Vec<Spanned<RawEvent>>,
    #[serde(default)]
    pub cross: Vec<Spanned<RawCross>>,
    pub workload: Option<Spanned<RawWorkload>>,
}

/// A `[[link]]` table, or an inline `down = { … }` / `up = { … }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLink {
    pub name: Option<Spanned<String>>,
    pub via: Option<Spanned<Vec<Spanned<String>>>>,
    pub rate: Option<Spanned<RateValue>>,
    pub trace: Option<Spanned<String>>,
    pub trace_once: Option<Spanned<bool>>,
    pub schedule: Option<Spanned<Vec<Spanned<RawStep>>>>,
    pub delay_ms: Option<Spanned<f64>>,
    pub jitter_ms: Option<Spanned<f64>>,
    pub delay_dist: Option<Spanned<String>>,
    pub jitter_reorder: Option<Spanned<bool>>,
    pub loss: Option<Spanned<f64>>,
    pub gilbert: Option<Spanned<RawGilbert>>,
    pub queue_bytes: Option<Spanned<u64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawStep {
    pub at_s: Spanned<f64>,
    pub rate: Spanned<RateValue>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawGilbert {
    pub p: Spanned<f64>,
    pub r: Spanned<f64>,
    pub h: Option<Spanned<f64>>,
    pub k: Option<Spanned<f64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPath {
    pub name: Spanned<String>,
    pub role: Option<Spanned<String>>,
    pub down: Spanned<RawLink>,
    pub up: Spanned<RawLink>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawNode {
    pub name: Spanned<String>,
    pub after: Spanned<String>,
    pub upstream_profile: Option<Spanned<String>>,
    pub downstream_profile: Option<Spanned<String>>,
    pub buffer_bytes: Option<Spanned<u64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawEvent {
    pub at_s: Spanned<f64>,
    pub path: Option<Spanned<String>>,
    pub link: Option<Spanned<String>>,
    pub direction: Option<Spanned<String>>,
    pub action: Spanned<String>,
    pub rate: Option<Spanned<RateValue>>,
    pub delay_ms: Option<Spanned<f64>>,
    pub loss: Option<Spanned<f64>>,
    pub caption: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCross {
    pub link: Option<Spanned<String>>,
    pub path: Option<Spanned<String>>,
    pub kind: Spanned<String>,
    pub count: Option<Spanned<u32>>,
    pub start_s: Option<Spanned<f64>>,
    pub stop_s: Option<Spanned<f64>>,
    pub rate: Option<Spanned<RateValue>>,
    pub packet_bytes: Option<Spanned<u32>>,
    pub on_s: Option<Spanned<f64>>,
    pub off_s: Option<Spanned<f64>>,
    pub shape: Option<Spanned<f64>>,
    pub flows: Option<Spanned<u32>>,
    pub flow_bytes: Option<Spanned<u64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawWorkload {
    pub kind: Option<Spanned<String>>,
    pub bytes: Option<Spanned<u64>>,
    pub clip: Option<Spanned<String>>,
    pub cbr: Option<Spanned<RawCbr>>,
    #[serde(rename = "loop")]
    pub loop_: Option<Spanned<bool>>,
    pub playout: Option<Spanned<String>>,
    pub buffer_s: Option<Spanned<f64>>,
    pub buffer_bytes: Option<Spanned<u64>>,
    pub transport_buffer_s: Option<Spanned<f64>>,
    pub max_buffer_s: Option<Spanned<f64>>,
    pub reader: Option<Spanned<RawReader>>,
    pub pattern: Option<Spanned<RawPattern>>,
    pub battery_j: Option<Spanned<f64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCbr {
    pub rate: Spanned<RateValue>,
    pub packet_bytes: Option<Spanned<u32>>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum RawReader {
    Name(String),
    Table(RawReaderTable),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawReaderTable {
    pub pattern: RawPattern,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPattern {
    pub rates: Vec<RateValue>,
    pub period: Option<PeriodValue>,
}
