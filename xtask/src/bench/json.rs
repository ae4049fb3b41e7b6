//! Reading the benchmarks' JSON (iperf3 and `braid perf` `-J` reports, quinn's perf
//! `--json` output, `braid sim --report` session reports) with `serde_json`: a missing or
//! mistyped key is an error that names its full path, never a panic.

use serde_json::Value;

/// Parses `text` as one JSON document.
pub fn parse(text: &str) -> Result<Value, String> {
    serde_json::from_str(text).map_err(|e| format!("not valid JSON ({e})"))
}

/// The value at `path` (object keys, outermost first) in `v`.
pub fn at<'a>(v: &'a Value, path: &[&str]) -> Result<&'a Value, String> {
    let mut here = v;
    for (i, key) in path.iter().enumerate() {
        here = here.get(key).ok_or_else(|| format!("no key `{}`", path[..=i].join(".")))?;
    }
    Ok(here)
}

/// The number at `path` (object keys, outermost first) in `v`.
pub fn number(v: &Value, path: &[&str]) -> Result<f64, String> {
    let found = at(v, path)?;
    found.as_f64().ok_or_else(|| format!("`{}` is not a number: {found}", path.join(".")))
}

/// Received payload bytes and their seconds from an iperf3-shaped `-J` report
/// (`iperf3 -J` and `braid perf client -J`): `end.sum_received.bytes` and `.seconds`.
pub fn sum_received(text: &str) -> Result<(f64, f64), String> {
    let v = parse(text)?;
    let totals = at(&v, &["end", "sum_received"]).map_err(|e| match v.get("error") {
        // iperf3 -J reports its own failures as `{"error": "…"}`.
        Some(Value::String(err)) => format!("{e} (the report says: {err})"),
        _ => e,
    })?;
    let bytes = number(totals, &["bytes"]).map_err(|e| format!("end.sum_received: {e}"))?;
    let secs = number(totals, &["seconds"]).map_err(|e| format!("end.sum_received: {e}"))?;
    Ok((bytes, secs))
}

/// quinn's perf `--json` output (`{"start": …, "intervals": [{"streams": […], "sum":
/// {…, "bytes": N, …}}, …]}`): the intervals' `sum.bytes` added up, and how many
/// intervals there were.
pub fn quinn_intervals(text: &str) -> Result<(f64, usize), String> {
    let v = parse(text)?;
    let intervals = at(&v, &["intervals"])?
        .as_array()
        .ok_or_else(|| "`intervals` is not an array".to_string())?;
    if intervals.is_empty() {
        return Err("no intervals".into());
    }
    let mut bytes = 0.0;
    for (i, interval) in intervals.iter().enumerate() {
        bytes += number(interval, &["sum", "bytes"]).map_err(|e| format!("intervals[{i}]: {e}"))?;
    }
    Ok((bytes, intervals.len()))
}

/// A session report's (`braid sim --report FILE`) `goodput_bps`, bit/s.
pub fn goodput_bps(text: &str) -> Result<f64, String> {
    number(&parse(text)?, &["goodput_bps"])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iperf3_totals_are_read_from_end_sum_received() {
        let j = r#"{"start": {}, "intervals": [{"sum": {"bytes": 7, "seconds": 1}}],
            "end": {"sum_sent": {"bytes": 5, "seconds": 1.0},
                    "sum_received": {"bytes": 1500000000, "seconds": 8.01, "bits_per_second": 1.4e9}}}"#;
        assert_eq!(sum_received(j), Ok((1.5e9, 8.01)));
    }

    #[test]
    fn braid_perf_report_is_read_like_iperf3() {
        // The shape of io/src/perf/report.rs's PerfReport, pretty-printed, keys sorted.
        let j = r#"{
  "end": {
    "paths": [],
    "sender_counters": true,
    "sum_received": { "bits_per_second": 8000000.0, "bytes": 8000000, "seconds": 8.0 },
    "sum_sent": { "bits_per_second": 8000000.0, "bytes": 8000000, "seconds": 8.0 },
    "verified": true
  },
  "intervals": [],
  "start": { "profile": "braid" }
}"#;
        assert_eq!(sum_received(j), Ok((8e6, 8.0)));
    }

    #[test]
    fn missing_iperf3_keys_are_named() {
        let no_end = r#"{"start": {}}"#;
        assert_eq!(sum_received(no_end), Err("no key `end`".into()));
        let no_sum = r#"{"end": {"sum_sent": {"bytes": 5, "seconds": 1}}}"#;
        assert_eq!(sum_received(no_sum), Err("no key `end.sum_received`".into()));
        let no_secs = r#"{"end": {"sum_received": {"bytes": 5}}}"#;
        assert_eq!(sum_received(no_secs), Err("end.sum_received: no key `seconds`".into()));
        let text = r#"{"end": {"sum_received": {"bytes": "5", "seconds": 1}}}"#;
        assert_eq!(
            sum_received(text),
            Err("end.sum_received: `bytes` is not a number: \"5\"".into())
        );
        let failed = r#"{"start": {}, "intervals": [], "end": {},
            "error": "unable to connect to server: Connection refused"}"#;
        assert_eq!(
            sum_received(failed),
            Err("no key `end.sum_received` (the report says: unable to connect to server: \
                 Connection refused)"
                .into())
        );
        assert!(sum_received("").unwrap_err().starts_with("not valid JSON"));
        assert!(sum_received("[1, 2").unwrap_err().starts_with("not valid JSON"));
    }

    #[test]
    fn quinn_intervals_add_up_their_sums() {
        let j = r#"{"start":{"timestamp":{"timesecs":1700000000}},"intervals":[
            {"streams":[{"id":0,"start":0.0,"end":1.0,"seconds":1.0,"bytes":999,"bits_per_second":7992.0,"sender":false}],
             "sum":{"start":0.0,"end":1.0,"seconds":1.0,"bytes":1000,"bits_per_second":8000.0,"sender":false}},
            {"streams":[],
             "sum":{"start":1.0,"end":2.0,"seconds":1.0,"bytes":3000,"bits_per_second":24000.0,"sender":false}}]}"#;
        assert_eq!(quinn_intervals(j), Ok((4000.0, 2)));
    }

    #[test]
    fn quinn_output_without_intervals_or_sums_is_an_error() {
        assert_eq!(quinn_intervals(r#"{"start": {}}"#), Err("no key `intervals`".into()));
        assert_eq!(
            quinn_intervals(r#"{"intervals": {}}"#),
            Err("`intervals` is not an array".into())
        );
        assert_eq!(quinn_intervals(r#"{"intervals": []}"#), Err("no intervals".into()));
        let no_sum = r#"{"intervals": [{"sum": {"bytes": 1}}, {"streams": []}]}"#;
        assert_eq!(quinn_intervals(no_sum), Err("intervals[1]: no key `sum`".into()));
        let no_bytes = r#"{"intervals": [{"sum": {"seconds": 1.0}}]}"#;
        assert_eq!(quinn_intervals(no_bytes), Err("intervals[0]: no key `sum.bytes`".into()));
    }

    #[test]
    fn session_report_goodput() {
        let j = r#"{"scenario": "wifi-lte-trace", "profile": "mptcp+lia", "seed": 1,
            "duration_s": 120.0, "goodput_bps": 3512345.5, "bytes_delivered": 52685182,
            "delay_ms": {"p50": 80.0, "p95": 150.0, "p99": 210.0},
            "paths": [{"name": "wifi", "role": "wifi", "throughput_bps": 1.9e6, "rtt_ms": 41.0}]}"#;
        assert_eq!(goodput_bps(j), Ok(3512345.5));
        // Only the top-level key counts, not one nested deeper.
        let none = r#"{"scenario": "x", "stream": {"goodput_bps": 1.0}}"#;
        assert_eq!(goodput_bps(none), Err("no key `goodput_bps`".into()));
    }

    #[test]
    fn paths_name_the_first_missing_key() {
        let v = parse(r#"{"a": {"b": {"c": 2.5}, "n": null}}"#).unwrap();
        assert_eq!(number(&v, &["a", "b", "c"]), Ok(2.5));
        assert_eq!(number(&v, &["a", "x", "c"]), Err("no key `a.x`".into()));
        assert_eq!(number(&v, &["a", "n"]), Err("`a.n` is not a number: null".into()));
        assert_eq!(number(&v, &["a", "n", "c"]), Err("no key `a.n.c`".into()));
    }
}
