use super::*;
use crate::{Loss, Rate};

fn parse(text: &str) -> Result<Scenario, ScenarioError> {
    Scenario::parse(text, "scenario.toml", Path::new("."))
}

fn err(text: &str) -> ScenarioError {
    match parse(text) {
        Ok(s) => panic!("accepted: {s:?}"),
        Err(e) => e,
    }
}

const FULL: &str = r#"
name = "wifi-lte"
duration_s = 60
seed = 7

[[link]]
name = "backbone"
rate = "2048kbit"
delay_ms = 75
queue_bytes = 64000

[[link]]
name = "bearer"
rate = 1000000
jitter_ms = 5
delay_dist = "pareto"
gilbert = { p = 0.01, r = 0.3, h = 0.5 }

[[path]]
name = "wifi"
role = "wifi"
down = { rate = "2mbit", delay_ms = 10 }
up = { rate = "2mbit", delay_ms = 10, loss = 0.01 }

[[path]]
name = "lte"
role = "lte"
down = { via = ["backbone", "bearer"] }
up = { rate = "1gbit", delay_ms = 40 }

[[node]]
name = "proxy"
after = "backbone"
upstream_profile = "tfrc"
downstream_profile = "tcp"

[[event]]
at_s = 20
path = "wifi"
action = "down"

[[event]]
at_s = 10
link = "backbone"
action = "set"
rate = "1mbit"

[[cross]]
link = "backbone"
kind = "reno"
count = 16

[[cross]]
path = "wifi"
kind = "onoff"
rate = "100kbit"
on_s = 1.0
off_s = 2.0
shape = 1.5

[[cross]]
link = "bearer"
kind = "flash"
flows = 800
flow_bytes = 20000
start_s = 5
stop_s = 15

[workload]
kind = "stream"
clip = "../clips/h264-cif-25fps-2m.mp4"
loop = true
playout = "adaptive"
buffer_s = 30
buffer_bytes = 8000000
reader = { pattern = { rates = ["1mbit", "3mbit"], period = "rtt" } }
battery_j = 300
"#;

#[test]
fn full_interfaces_example_parses_into_typed_fields() {
    let s = Scenario::parse(FULL, "x.toml", Path::new("/scen")).unwrap();
    assert_eq!(s.name, "wifi-lte");
    assert_eq!(s.duration, Duration::from_secs(60));
    assert_eq!(s.seed, 7);
    let names: Vec<&str> = s.links.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["backbone", "bearer", "wifi.down", "wifi.up", "lte.up"]);
    assert_eq!(s.links[0].config.rate, Rate::Fixed(2_048_000));
    assert_eq!(s.links[0].config.delay, Duration::from_millis(75));
    assert_eq!(s.links[0].config.queue_bytes, Some(64_000));
    assert_eq!(s.links[1].config.loss, Loss::GilbertElliott { p: 0.01, r: 0.3, h: 0.5, k: 0.0 });
    assert_eq!(s.links[3].config.loss, Loss::Bernoulli(0.01));
    assert_eq!(s.paths[0].role, PathRole::Wifi);
    assert_eq!(s.paths[1].down, vec![0, 1]);
    assert_eq!(s.paths[1].up, vec![4]);
    assert_eq!(s.nodes[0].after, 0);
    // Events are sorted by time.
    assert_eq!(s.events[0].at, Duration::from_secs(10));
    assert_eq!(
        s.events[0].action,
        Action::Set { rate_bps: Some(1_000_000), delay: None, loss: None }
    );
    assert_eq!(s.event_links(&s.events[1]), vec![2, 3]);
    assert_eq!(s.cross[0].kind, CrossKind::Reno);
    assert_eq!(s.cross[0].count, 16);
    assert_eq!(s.cross[0].stop, Duration::from_secs(60));
    assert_eq!(s.cross[1].target, CrossTarget::Path(0));
    assert_eq!(s.cross[2].kind, CrossKind::Flash { flows: 800, flow_bytes: 20_000 });
    let WorkloadKind::Stream(st) = &s.workload.kind else { panic!("not a stream") };
    assert_eq!(
        st.source,
        StreamSource::Clip(PathBuf::from("/scen/../clips/h264-cif-25fps-2m.mp4"))
    );
    assert!(st.loop_clip);
    assert_eq!(st.buffer_bytes, Some(8_000_000));
    assert_eq!(
        st.reader,
        Reader::Pattern { rates_bps: vec![1_000_000, 3_000_000], period: PatternPeriod::Rtt }
    );
    assert_eq!(s.workload.battery_j, Some(300.0));
}

const MIN: &str = r#"
name = "m"
duration_s = 5
[[path]]
name = "a"
down = { rate = "10mbit" }
up = { rate = "10mbit" }
"#;

#[test]
fn defaults_are_seed_1_wired_and_unlimited_bulk() {
    let s = parse(MIN).unwrap();
    assert_eq!(s.seed, 1);
    assert_eq!(s.paths[0].role, PathRole::Wired);
    assert_eq!(s.workload.kind, WorkloadKind::Bulk { bytes: None });
}

#[test]
fn rates_accept_units_and_plain_numbers() {
    assert_eq!(parse_rate("64kbit"), Some(64_000));
    assert_eq!(parse_rate("2mbit"), Some(2_000_000));
    assert_eq!(parse_rate("1gbit"), Some(1_000_000_000));
    assert_eq!(parse_rate("1.5Mbit"), Some(1_500_000));
    assert_eq!(parse_rate("9600"), Some(9600));
    assert_eq!(parse_rate("2mbps"), None);
    assert_eq!(parse_rate("fast"), None);
}

#[test]
fn unknown_role_names_path_key_line_and_column() {
    let e = err(r#"name = "m"
duration_s = 5
[[path]]
name = "wifi"
role = "wlan"
down = { rate = "10mbit" }
up = { rate = "10mbit" }
"#);
    assert_eq!(
        e.to_string(),
        r#"scenario.toml:5:8: path "wifi": unknown role "wlan" (expected wifi, lte, 3g or wired)"#
    );
    assert_eq!(e.key(), "path.role");
}

#[test]
fn unknown_keys_are_rejected_with_their_position() {
    let e = err(&MIN.replace("duration_s = 5", "duration_s = 5\nspeed = 3"));
    assert!(e.to_string().contains("unknown field `speed`"), "{e}");
    assert_eq!(e.key(), "speed");
    assert_eq!(e.position(), Some((4, 1)));
    let e = err(&MIN
        .replace(r#"down = { rate = "10mbit" }"#, r#"down = { rate = "10mbit", dealy_ms = 3 }"#));
    assert!(e.to_string().contains("dealy_ms"), "{e}");
    assert_eq!(e.position().map(|p| p.0), Some(6));
}

#[test]
fn missing_required_keys_are_named() {
    let e = err("duration_s = 5\n[[path]]\nname = \"a\"\ndown = {}\nup = {}\n");
    assert!(e.to_string().contains("missing field `name`"), "{e}");
    assert_eq!(e.key(), "name");
    let e = err("name = \"x\"\nduration_s = 5\n");
    assert!(e.to_string().contains("at least one [[path]]"), "{e}");
}

#[test]
fn bad_rate_is_reported_at_the_value() {
    let e = err(&MIN.replace(r#"down = { rate = "10mbit" }"#, r#"down = { rate = "10mbps" }"#));
    assert!(
        e.to_string().starts_with(r#"scenario.toml:6:17: path "a": down: invalid rate "10mbps""#),
        "{e}"
    );
}

#[test]
fn undefined_link_in_via_is_rejected() {
    let e = err(&MIN.replace(r#"down = { rate = "10mbit" }"#, r#"down = { via = ["nowhere"] }"#));
    assert_eq!(e.to_string(), r#"scenario.toml:6:17: path "a": down: unknown link "nowhere""#);
    assert_eq!(e.key(), "path.down.via");
}

#[test]
fn via_with_link_keys_is_rejected() {
    let text = format!("{MIN}\n[[link]]\nname = \"b\"\nrate = 1000\n")
        .replace(r#"down = { rate = "10mbit" }"#, r#"down = { via = ["b"], delay_ms = 3 }"#);
    let e = err(&text);
    assert!(e.to_string().contains("a `via` chain takes no other link keys"), "{e}");
}

#[test]
fn undefined_event_and_cross_targets_are_rejected() {
    let e = err(&format!("{MIN}[[event]]\nat_s = 1\npath = \"b\"\naction = \"down\"\n"));
    assert!(e.to_string().contains(r#"event: unknown path "b""#), "{e}");
    let e = err(&format!("{MIN}[[event]]\nat_s = 1\nlink = \"b\"\naction = \"down\"\n"));
    assert!(e.to_string().contains(r#"event: unknown link "b""#), "{e}");
    let e = err(&format!("{MIN}[[cross]]\nlink = \"x\"\nkind = \"reno\"\n"));
    assert!(e.to_string().contains(r#"unknown link "x""#), "{e}");
    let e = err(&format!("{MIN}[[node]]\nname = \"p\"\nafter = \"x\"\n"));
    assert!(e.to_string().contains(r#"node "p": unknown link "x""#), "{e}");
}

#[test]
fn bad_event_actions_are_rejected() {
    let e = err(&format!("{MIN}[[event]]\nat_s = 1\npath = \"a\"\naction = \"explode\"\n"));
    assert_eq!(e.key(), "event.action");
    let e = err(&format!("{MIN}[[event]]\nat_s = 1\npath = \"a\"\naction = \"set\"\n"));
    assert!(e.to_string().contains("needs rate, delay_ms or loss"), "{e}");
    let e = err(&format!(
        "{MIN}[[event]]\nat_s = 1\npath = \"a\"\naction = \"down\"\nrate = \"1mbit\"\n"
    ));
    assert!(e.to_string().contains("`rate` does not apply"), "{e}");
}

#[test]
fn cross_kinds_check_their_keys() {
    let e = err(&format!("{MIN}[[cross]]\npath = \"a\"\nkind = \"cbr\"\n"));
    assert!(e.to_string().contains("missing key `rate`"), "{e}");
    let e = err(&format!("{MIN}[[cross]]\npath = \"a\"\nkind = \"reno\"\nflows = 3\n"));
    assert!(e.to_string().contains("`flows` does not apply"), "{e}");
    let e =
        err(&format!("{MIN}[[cross]]\npath = \"a\"\nkind = \"onoff\"\nrate = 1000\nshape = 0.5\n"));
    assert_eq!(e.key(), "cross.shape");
    let e = err(&format!("{MIN}[[cross]]\npath = \"a\"\nkind = \"flash\"\nflows = 3\n"));
    assert!(e.to_string().contains("missing key `flow_bytes`"), "{e}");
    let e = err(&format!("{MIN}[[cross]]\npath = \"a\"\nkind = \"tcp\"\n"));
    assert_eq!(e.key(), "cross.kind");
}

#[test]
fn link_values_are_checked() {
    let with =
        |kv: &str| MIN.replace(r#"down = { rate = "10mbit" }"#, &format!("down = {{ {kv} }}"));
    assert_eq!(err(&with("loss = 1.5")).key(), "loss");
    assert_eq!(err(&with("delay_ms = -1")).key(), "delay_ms");
    assert_eq!(err(&with(r#"delay_dist = "uniform""#)).key(), "delay_dist");
    assert_eq!(err(&with(r#"rate = "1mbit", trace = "x""#)).key(), "rate");
    assert_eq!(err(&with("loss = 0.1, gilbert = { p = 0.1, r = 0.2 }")).key(), "gilbert");
    assert_eq!(err(&with("trace_once = true")).key(), "trace_once");
    assert_eq!(err(&with("queue_bytes = 0")).key(), "queue_bytes");
    let e = err(&with(r#"trace = "no-such.trace""#));
    assert!(e.to_string().contains(r#"trace "no-such.trace""#), "{e}");
    // Schedules are an extension.
    let s =
        parse(&with(r#"schedule = [{ at_s = 0, rate = "1mbit" }, { at_s = 2, rate = "2mbit" }]"#))
            .unwrap();
    assert!(matches!(&s.links[0].config.rate, Rate::Schedule(st) if st.len() == 2));
}

#[test]
fn duplicate_names_are_rejected() {
    let e = err(&format!("{MIN}[[path]]\nname = \"a\"\ndown = {{}}\nup = {{}}\n"));
    assert!(e.to_string().contains(r#"path "a": defined twice"#), "{e}");
}

#[test]
fn trace_files_resolve_relative_to_the_scenario_file() {
    let dir = std::env::temp_dir().join(format!("braid-scenario-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("t.down"), "1\n2\n").unwrap();
    let text = MIN.replace(
        r#"down = { rate = "10mbit" }"#,
        r#"down = { trace = "t.down", trace_once = true }"#,
    );
    std::fs::write(dir.join("s.toml"), &text).unwrap();
    let s = Scenario::load(&dir.join("s.toml")).unwrap();
    let Rate::Trace { trace, once } = &s.links[0].config.rate else { panic!() };
    assert!(*once);
    assert_eq!(trace.opportunities(), 2);
    std::fs::write(dir.join("bad.down"), "1\nfoo\n").unwrap();
    let e = Scenario::parse(&text.replace("t.down", "bad.down"), "s.toml", &dir).unwrap_err();
    assert!(e.to_string().contains("line 2"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn workload_keys_are_checked_per_kind() {
    let s = parse(&format!("{MIN}[workload]\nkind = \"bulk\"\nbytes = 1000\n")).unwrap();
    assert_eq!(s.workload.kind, WorkloadKind::Bulk { bytes: Some(1000) });
    let e = err(&format!("{MIN}[workload]\nkind = \"bulk\"\nclip = \"x.mp4\"\n"));
    assert_eq!(e.key(), "clip");
    let e = err(&format!("{MIN}[workload]\nkind = \"stream\"\n"));
    assert!(e.to_string().contains("missing key `clip` or `cbr`"), "{e}");
    let s = parse(&format!(
        "{MIN}[workload]\nkind = \"stream\"\ncbr = {{ rate = \"352kbit\", packet_bytes = 1040 }}\nplayout = \"fixed\"\nreader = \"pattern\"\npattern = {{ rates = [\"1mbit\"], period = 200 }}\n"
    ))
    .unwrap();
    let WorkloadKind::Stream(st) = s.workload.kind else { panic!() };
    assert_eq!(st.source, StreamSource::Cbr { rate_bps: 352_000, packet_bytes: 1040 });
    assert_eq!(st.playout, Playout::Fixed);
    assert_eq!(
        st.reader,
        Reader::Pattern { rates_bps: vec![1_000_000], period: PatternPeriod::Millis(200.0) }
    );
    let e = err(&format!("{MIN}[workload]\nkind = \"video\"\n"));
    assert_eq!(e.key(), "workload.kind");
}

#[test]
fn every_playout_policy_name_parses_and_others_are_rejected() {
    let stream = |p: &str| {
        format!("{MIN}[workload]\nkind = \"stream\"\nclip = \"x.mp4\"\nplayout = \"{p}\"\n")
    };
    for (name, want) in [
        ("fixed", Playout::Fixed),
        ("media3", Playout::Media3),
        ("adaptive", Playout::Adaptive),
        ("oracle", Playout::Oracle),
    ] {
        let s = parse(&stream(name)).unwrap();
        let WorkloadKind::Stream(st) = s.workload.kind else { panic!() };
        assert_eq!(st.playout, want, "{name}");
    }
    let e = err(&stream("exoplayer"));
    assert_eq!(e.key(), "workload.playout");
    assert!(e.to_string().contains("media3"), "{e}");
}

#[test]
fn syntax_errors_have_a_position() {
    let e = err("name = \"x\"\nduration_s = = 5\n");
    assert_eq!(e.position().map(|p| p.0), Some(2));
}

mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn arbitrary_text_never_panics(text in "\\PC{0,400}") {
            let _ = parse(&text);
        }

        #[test]
        fn mutated_valid_files_never_panic(cut in 0usize..2000, insert in "[ =\\[\\]{}\"a-z0-9.,\n-]{0,12}") {
            let mut text = FULL.to_string();
            let at = text.char_indices().map(|(i, _)| i).nth(cut % FULL.len()).unwrap_or(0);
            text.insert_str(at, &insert);
            if let Err(e) = Scenario::parse(&text, "x.toml", Path::new("/nonexistent")) {
                // Every error has a position inside the text.
                let (line, col) = e.position().unwrap();
                prop_assert!(line >= 1 && line <= text.lines().count() + 1 && col >= 1, "{e}");
            }
        }
    }
}

#[test]
fn bundled_scenarios_parse() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../assets/scenarios");
    let Ok(entries) = std::fs::read_dir(&dir) else { return };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    for f in files {
        if let Err(e) = Scenario::load(&f) {
            panic!("{e}");
        }
    }
}

#[test]
fn jitter_reorder_key_reaches_the_link_and_defaults_to_fifo() {
    let text = r#"
name = "j"
duration_s = 1
[[link]]
name = "a"
rate = "10mbit"
delay_ms = 50
jitter_ms = 100
jitter_reorder = true
[[path]]
name = "p"
down = { via = ["a"] }
up = { rate = "10mbit", delay_ms = 50, jitter_ms = 10 }
"#;
    let s = parse(text).unwrap();
    let down = &s.links[s.paths[0].down[0]].config;
    assert!(down.jitter_reorder);
    let up = &s.links[s.paths[0].up[0]].config;
    assert!(!up.jitter_reorder, "FIFO is the default");
    assert!(parse(&text.replace("jitter_reorder = true", "jitter_reorder = 1")).is_err());
}

#[test]
fn max_buffer_s_is_the_download_ahead_and_transport_buffer_s_its_older_name() {
    let stream =
        |extra: &str| format!("{MIN}\n[workload]\nkind = \"stream\"\nclip = \"c.mp4\"\n{extra}\n");
    let ahead = |text: &str| match parse(text).map(|s| s.workload.kind) {
        Ok(WorkloadKind::Stream(st)) => Ok(st.transport_buffer_s),
        Ok(other) => panic!("{other:?}"),
        Err(e) => Err(e.to_string()),
    };
    assert_eq!(ahead(&stream("max_buffer_s = 50")), Ok(Some(50.0)));
    assert_eq!(ahead(&stream("transport_buffer_s = 50")), Ok(Some(50.0)));
    let both = ahead(&stream("max_buffer_s = 50\ntransport_buffer_s = 60")).unwrap_err();
    assert!(both.contains("not both"), "{both}");
    let big = ahead(&stream("max_buffer_s = 601")).unwrap_err();
    assert!(big.contains("max_buffer_s must be at most 600"), "{big}");
    let zero = ahead(&stream("max_buffer_s = 0")).unwrap_err();
    assert!(zero.contains("max_buffer_s"), "{zero}");
    let cbr = format!(
        "{MIN}\n[workload]\nkind = \"stream\"\ncbr = {{ rate = \"1mbit\" }}\nmax_buffer_s = 5\n"
    );
    let e = ahead(&cbr).unwrap_err();
    assert!(e.contains("max_buffer_s applies to a `clip` stream"), "{e}");
    let bulk = format!("{MIN}\n[workload]\nkind = \"bulk\"\nmax_buffer_s = 5\n");
    assert!(parse(&bulk).is_err());
    // The flag's setter: the same value, the same limits.
    let mut s = parse(&stream("")).unwrap();
    assert!(s.set_max_buffer_s(30.0).is_ok());
    assert_eq!(
        ahead(&stream("max_buffer_s = 30")).unwrap(),
        match &s.workload.kind {
            WorkloadKind::Stream(st) => st.transport_buffer_s,
            other => panic!("{other:?}"),
        }
    );
    assert!(s.set_max_buffer_s(f64::NAN).is_err());
    assert!(s.set_max_buffer_s(700.0).is_err());
    let mut b = parse(&bulk.replace("max_buffer_s = 5\n", "")).unwrap();
    assert!(b.set_max_buffer_s(5.0).is_err());
}

#[test]
fn transport_buffer_s_is_a_clip_streams_key() {
    let stream =
        |extra: &str| format!("{MIN}\n[workload]\nkind = \"stream\"\nclip = \"c.mp4\"\n{extra}\n");
    let s = parse(&stream("transport_buffer_s = 60")).unwrap();
    match &s.workload.kind {
        WorkloadKind::Stream(st) => assert_eq!(st.transport_buffer_s, Some(60.0)),
        other => panic!("{other:?}"),
    }
    let s = parse(&stream("")).unwrap();
    match &s.workload.kind {
        WorkloadKind::Stream(st) => assert_eq!(st.transport_buffer_s, None),
        other => panic!("{other:?}"),
    }
    for bad in ["transport_buffer_s = 0", "transport_buffer_s = -1", "transport_buffer_s = 601"] {
        let e = err(&stream(bad));
        assert!(e.to_string().contains("transport_buffer_s must be"), "{bad}: {e}");
    }
    let cbr = format!(
        "{MIN}\n[workload]\nkind = \"stream\"\ncbr = {{ rate = \"1mbit\" }}\ntransport_buffer_s = 5\n"
    );
    assert!(err(&cbr).to_string().contains("applies to a `clip` stream"), "{}", err(&cbr));
    let bulk = format!("{MIN}\n[workload]\nkind = \"bulk\"\ntransport_buffer_s = 5\n");
    assert!(err(&bulk).to_string().contains("transport_buffer_s"), "{}", err(&bulk));
}

#[test]
fn idle_timeout_s_is_optional_bounded_and_zero_means_none() {
    let with = |v: &str| {
        parse(&MIN.replace("duration_s = 5", &format!("duration_s = 5\nidle_timeout_s = {v}")))
    };
    assert_eq!(parse(MIN).unwrap().idle_timeout, None);
    assert_eq!(with("5").unwrap().idle_timeout, Some(Duration::from_secs(5)));
    assert_eq!(with("0").unwrap().idle_timeout, Some(Duration::ZERO));
    for bad in ["-1", "3601", "nan"] {
        let e = with(bad).unwrap_err().to_string();
        assert!(e.contains("idle_timeout_s"), "{bad}: {e}");
    }
}
