//! From [`raw`](super::raw) structs to a validated [`Scenario`].

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use toml::Spanned;

use super::raw::*;
use super::*;
use crate::{DelayDist, LinkConfig, Loss, Rate, RateStep, Trace};

/// Most identical long-lived cross sources in one `[[cross]]`.
const MAX_CROSS_COUNT: u32 = 10_000;
/// Most flows of one flash crowd.
const MAX_FLASH_FLOWS: u32 = 10_000_000;

struct Ctx<'a> {
    text: &'a str,
    file: &'a str,
    base: &'a Path,
    traces: BTreeMap<PathBuf, Arc<Trace>>,
}

type R<T> = Result<T, ScenarioError>;

impl Ctx<'_> {
    fn err(&self, span: Range<usize>, key: &str, message: impl Into<String>) -> ScenarioError {
        let start = span.start.min(self.text.len());
        let before = self.text.get(..start).unwrap_or("");
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = self.text.get(line_start..start).map_or(0, |s| s.chars().count()) + 1;
        ScenarioError::Invalid {
            file: self.file.to_string(),
            line,
            column,
            key: key.to_string(),
            message: message.into(),
        }
    }

    fn at<T>(&self, s: &Spanned<T>, key: &str, message: impl Into<String>) -> ScenarioError {
        self.err(s.span(), key, message)
    }

    fn resolve(&self, p: &str) -> PathBuf {
        let p = Path::new(p);
        if p.is_absolute() { p.to_path_buf() } else { self.base.join(p) }
    }
}

fn toml_error(ctx: &Ctx<'_>, e: &toml::de::Error) -> ScenarioError {
    let msg = e.message().trim().to_string();
    let key = ["unknown field `", "missing field `"]
        .iter()
        .find_map(|p| msg.strip_prefix(p))
        .and_then(|rest| rest.split('`').next())
        .unwrap_or("")
        .to_string();
    ctx.err(e.span().unwrap_or(0..0), &key, msg)
}

fn rate_of(ctx: &Ctx<'_>, v: &Spanned<RateValue>, what: &str, key: &str) -> R<u64> {
    let parsed = match v.get_ref() {
        RateValue::Number(n) if n.is_finite() && *n >= 0.0 && *n < 1e15 => Some(n.round() as u64),
        RateValue::Number(_) => None,
        RateValue::Text(t) => parse_rate(t),
    };
    parsed.ok_or_else(|| {
        let shown = match v.get_ref() {
            RateValue::Number(n) => n.to_string(),
            RateValue::Text(t) => format!("\"{t}\""),
        };
        ctx.at(v, key, format!("{what}: invalid rate {shown} (expected e.g. \"64kbit\", \"2mbit\", \"1gbit\" or a number of bit/s)"))
    })
}

fn non_negative(ctx: &Ctx<'_>, v: &Spanned<f64>, what: &str, key: &str) -> R<f64> {
    let x = *v.get_ref();
    if x.is_finite() && x >= 0.0 {
        Ok(x)
    } else {
        Err(ctx.at(v, key, format!("{what}: {key} must be a number ≥ 0, got {x}")))
    }
}

/// The largest `transport_buffer_s` a scenario may ask for (the receive buffer is that many
/// seconds of the clip's media, so memory stays bounded).
const MAX_TRANSPORT_BUFFER_S: f64 = 600.0;

fn positive(ctx: &Ctx<'_>, v: &Spanned<f64>, what: &str, key: &str) -> R<f64> {
    let x = *v.get_ref();
    if x.is_finite() && x > 0.0 {
        Ok(x)
    } else {
        Err(ctx.at(v, key, format!("{what}: {key} must be a number > 0, got {x}")))
    }
}

fn probability(ctx: &Ctx<'_>, v: &Spanned<f64>, what: &str, key: &str) -> R<f64> {
    let x = *v.get_ref();
    if (0.0..=1.0).contains(&x) {
        Ok(x)
    } else {
        Err(ctx.at(v, key, format!("{what}: {key} must be a probability in [0, 1], got {x}")))
    }
}

fn secs(x: f64) -> Duration {
    Duration::from_secs_f64(x.clamp(0.0, 1e12))
}

fn millis(x: f64) -> Duration {
    secs(x / 1000.0)
}

/// Rejects `key` when present: it does not apply here.
fn forbid<T>(ctx: &Ctx<'_>, v: &Option<Spanned<T>>, key: &str, why: &str) -> R<()> {
    match v {
        Some(s) => Err(ctx.at(s, key, format!("{why}: key `{key}` does not apply"))),
        None => Ok(()),
    }
}

fn link_config(ctx: &mut Ctx<'_>, l: &RawLink, what: &str) -> R<LinkConfig> {
    let mut cfg = LinkConfig::default();
    let kinds = [
        l.rate.as_ref().map(|s| s.span()),
        l.trace.as_ref().map(|s| s.span()),
        l.schedule.as_ref().map(|s| s.span()),
    ];
    if let Some(second) = kinds.iter().flatten().nth(1) {
        return Err(ctx.err(
            second.clone(),
            "rate",
            format!("{what}: give only one of rate, trace, schedule"),
        ));
    }
    if let Some(r) = &l.rate {
        cfg.rate = Rate::Fixed(rate_of(ctx, r, what, "rate")?);
    }
    if let Some(t) = &l.trace {
        let path = ctx.resolve(t.get_ref());
        let trace = match ctx.traces.get(&path) {
            Some(tr) => tr.clone(),
            None => {
                let text = std::fs::read_to_string(&path).map_err(|e| {
                    ctx.at(t, "trace", format!("{what}: trace \"{}\": {e}", t.get_ref()))
                })?;
                let tr = Trace::parse(&text)
                    .map_err(|e| {
                        ctx.at(t, "trace", format!("{what}: trace \"{}\": {e}", t.get_ref()))
                    })?
                    .shared();
                ctx.traces.insert(path, tr.clone());
                tr
            }
        };
        let once = l.trace_once.as_ref().is_some_and(|o| *o.get_ref());
        cfg.rate = Rate::Trace { trace, once };
    } else if let Some(o) = &l.trace_once {
        return Err(ctx.at(o, "trace_once", format!("{what}: trace_once needs trace")));
    }
    if let Some(steps) = &l.schedule {
        let mut out: Vec<RateStep> = Vec::new();
        for s in steps.get_ref() {
            let st = s.get_ref();
            let at = non_negative(ctx, &st.at_s, what, "schedule.at_s")?;
            let at = secs(at);
            if out.last().is_some_and(|p| p.at > at) {
                return Err(ctx.at(
                    &st.at_s,
                    "schedule.at_s",
                    format!("{what}: schedule steps must be in time order"),
                ));
            }
            out.push(RateStep { at, bps: rate_of(ctx, &st.rate, what, "schedule.rate")? });
        }
        if out.is_empty() {
            return Err(ctx.at(steps, "schedule", format!("{what}: schedule is empty")));
        }
        cfg.rate = Rate::Schedule(out);
    }
    if let Some(d) = &l.delay_ms {
        cfg.delay = millis(non_negative(ctx, d, what, "delay_ms")?);
    }
    if let Some(j) = &l.jitter_ms {
        cfg.jitter = millis(non_negative(ctx, j, what, "jitter_ms")?);
    }
    if let Some(r) = &l.jitter_reorder {
        cfg.jitter_reorder = *r.get_ref();
    }
    if let Some(dd) = &l.delay_dist {
        cfg.delay_dist = match dd.get_ref().as_str() {
            "normal" => DelayDist::Normal,
            "pareto" => DelayDist::Pareto,
            other => {
                return Err(ctx.at(
                    dd,
                    "delay_dist",
                    format!("{what}: unknown delay_dist \"{other}\" (expected normal or pareto)"),
                ));
            }
        };
    }
    if let (Some(_), Some(g)) = (&l.loss, &l.gilbert) {
        return Err(ctx.at(g, "gilbert", format!("{what}: give either loss or gilbert, not both")));
    }
    if let Some(p) = &l.loss {
        cfg.loss = Loss::Bernoulli(probability(ctx, p, what, "loss")?);
    }
    if let Some(g) = &l.gilbert {
        let g = g.get_ref();
        let p = probability(ctx, &g.p, what, "gilbert.p")?;
        let r = probability(ctx, &g.r, what, "gilbert.r")?;
        let h = match &g.h {
            Some(h) => probability(ctx, h, what, "gilbert.h")?,
            None => 1.0,
        };
        let k = match &g.k {
            Some(k) => probability(ctx, k, what, "gilbert.k")?,
            None => 0.0,
        };
        cfg.loss = Loss::GilbertElliott { p, r, h, k };
    }
    if let Some(q) = &l.queue_bytes {
        if *q.get_ref() == 0 {
            return Err(ctx.at(q, "queue_bytes", format!("{what}: queue_bytes must be > 0")));
        }
        cfg.queue_bytes = Some(*q.get_ref());
    }
    Ok(cfg)
}

pub(super) fn parse(text: &str, file: &str, base: &Path) -> R<Scenario> {
    let mut ctx = Ctx { text, file, base, traces: BTreeMap::new() };
    let raw: RawScenario = toml::from_str(text).map_err(|e| toml_error(&ctx, &e))?;

    let name = raw.name.get_ref().trim().to_string();
    if name.is_empty() {
        return Err(ctx.at(&raw.name, "name", "name must not be empty"));
    }
    let duration_s = positive(&ctx, &raw.duration_s, "scenario", "duration_s")?;
    let duration = secs(duration_s);
    let seed = raw.seed.as_ref().map_or(1, |s| *s.get_ref());
    let idle_timeout = match &raw.idle_timeout_s {
        None => None,
        Some(v) => {
            let s = *v.get_ref();
            if !(s.is_finite() && (0.0..=3600.0).contains(&s)) {
                return Err(ctx.at(
                    v,
                    "idle_timeout_s",
                    "idle_timeout_s must be between 0 (none) and 3600 seconds",
                ));
            }
            Some(secs(s))
        }
    };

    // Named links.
    let mut links: Vec<LinkDef> = Vec::new();
    for l in &raw.link {
        let rl = l.get_ref();
        let Some(n) = &rl.name else {
            return Err(ctx.at(l, "link.name", "link: missing key `name`"));
        };
        let lname = n.get_ref().clone();
        let what = format!("link \"{lname}\"");
        if lname.is_empty() {
            return Err(ctx.at(n, "link.name", "link: name must not be empty"));
        }
        if links.iter().any(|x| x.name == lname) {
            return Err(ctx.at(n, "link.name", format!("{what}: defined twice")));
        }
        forbid(&ctx, &rl.via, "via", &format!("{what}: only a path's down/up may use via;"))?;
        let config = link_config(&mut ctx, rl, &what)?;
        links.push(LinkDef { name: lname, inline: false, config });
    }
    let named = links.len();
    let find_link =
        |links: &[LinkDef], name: &str| links.iter().take(named).position(|x| x.name == name);

    // Paths.
    let mut paths: Vec<PathDef> = Vec::new();
    for p in &raw.path {
        let rp = p.get_ref();
        let pname = rp.name.get_ref().clone();
        let what = format!("path \"{pname}\"");
        if pname.is_empty() {
            return Err(ctx.at(&rp.name, "path.name", "path: name must not be empty"));
        }
        if paths.iter().any(|x| x.name == pname) {
            return Err(ctx.at(&rp.name, "path.name", format!("{what}: defined twice")));
        }
        let role = match &rp.role {
            Some(r) => r.get_ref().parse::<PathRole>().map_err(|_| {
                ctx.at(
                    r,
                    "path.role",
                    format!(
                        "{what}: unknown role \"{}\" (expected wifi, lte, 3g or wired)",
                        r.get_ref()
                    ),
                )
            })?,
            None => PathRole::Wired,
        };
        let mut chains = [Vec::new(), Vec::new()];
        for (i, (dir, end)) in [("down", &rp.down), ("up", &rp.up)].into_iter().enumerate() {
            let rl = end.get_ref();
            let where_ = format!("{what}: {dir}");
            let key = format!("path.{dir}");
            if let Some(via) = &rl.via {
                let others = [
                    rl.name.as_ref().map(|s| s.span()),
                    rl.rate.as_ref().map(|s| s.span()),
                    rl.trace.as_ref().map(|s| s.span()),
                    rl.trace_once.as_ref().map(|s| s.span()),
                    rl.schedule.as_ref().map(|s| s.span()),
                    rl.delay_ms.as_ref().map(|s| s.span()),
                    rl.jitter_ms.as_ref().map(|s| s.span()),
                    rl.delay_dist.as_ref().map(|s| s.span()),
                    rl.jitter_reorder.as_ref().map(|s| s.span()),
                    rl.loss.as_ref().map(|s| s.span()),
                    rl.gilbert.as_ref().map(|s| s.span()),
                    rl.queue_bytes.as_ref().map(|s| s.span()),
                ];
                if let Some(sp) = others.iter().flatten().next() {
                    return Err(ctx.err(
                        sp.clone(),
                        &key,
                        format!("{where_}: a `via` chain takes no other link keys"),
                    ));
                }
                if via.get_ref().is_empty() {
                    return Err(ctx.at(
                        via,
                        &format!("{key}.via"),
                        format!("{where_}: via is empty"),
                    ));
                }
                for v in via.get_ref() {
                    let idx = find_link(&links, v.get_ref()).ok_or_else(|| {
                        ctx.at(
                            v,
                            &format!("{key}.via"),
                            format!("{where_}: unknown link \"{}\"", v.get_ref()),
                        )
                    })?;
                    chains[i].push(idx);
                }
            } else {
                forbid(
                    &ctx,
                    &rl.name,
                    "name",
                    &format!("{where_}: an inline link is named after its path;"),
                )?;
                let config = link_config(&mut ctx, rl, &where_)?;
                links.push(LinkDef { name: format!("{pname}.{dir}"), inline: true, config });
                chains[i].push(links.len() - 1);
            }
        }
        let [down, up] = chains;
        paths.push(PathDef { name: pname, role, down, up });
    }
    if paths.is_empty() {
        return Err(ctx.err(0..0, "path", "scenario: at least one [[path]] is needed"));
    }
    let find_path = |name: &str| paths.iter().position(|x| x.name == name);

    // Nodes.
    let mut nodes: Vec<NodeDef> = Vec::new();
    for n in &raw.node {
        let rn = n.get_ref();
        let nname = rn.name.get_ref().clone();
        let what = format!("node \"{nname}\"");
        if nodes.iter().any(|x| x.name == nname) {
            return Err(ctx.at(&rn.name, "node.name", format!("{what}: defined twice")));
        }
        let after = find_link(&links, rn.after.get_ref()).ok_or_else(|| {
            ctx.at(
                &rn.after,
                "node.after",
                format!("{what}: unknown link \"{}\"", rn.after.get_ref()),
            )
        })?;
        let followed = paths
            .iter()
            .flat_map(|p| [&p.down, &p.up])
            .any(|c| c.iter().position(|&x| x == after).is_some_and(|i| i + 1 < c.len()));
        if !followed {
            return Err(ctx.at(
                &rn.after,
                "node.after",
                format!(
                    "{what}: link \"{}\" is not followed by another link in any path's chain",
                    rn.after.get_ref()
                ),
            ));
        }
        if let Some(b) = &rn.buffer_bytes
            && *b.get_ref() == 0
        {
            return Err(ctx.at(
                b,
                "node.buffer_bytes",
                format!("{what}: buffer_bytes must be > 0"),
            ));
        }
        nodes.push(NodeDef {
            buffer_bytes: rn.buffer_bytes.as_ref().map(|b| *b.get_ref()),
            name: nname,
            after,
            upstream_profile: rn.upstream_profile.as_ref().map(|s| s.get_ref().clone()),
            downstream_profile: rn.downstream_profile.as_ref().map(|s| s.get_ref().clone()),
        });
    }

    // Events.
    let mut events: Vec<EventDef> = Vec::new();
    for e in &raw.event {
        let re = e.get_ref();
        let what = "event";
        let at = secs(non_negative(&ctx, &re.at_s, what, "at_s")?);
        let target = match (&re.path, &re.link) {
            (Some(p), None) => Target::Path(find_path(p.get_ref()).ok_or_else(|| {
                ctx.at(p, "event.path", format!("event: unknown path \"{}\"", p.get_ref()))
            })?),
            (None, Some(l)) => Target::Link(find_link(&links, l.get_ref()).ok_or_else(|| {
                ctx.at(l, "event.link", format!("event: unknown link \"{}\"", l.get_ref()))
            })?),
            (Some(_), Some(l)) => {
                return Err(ctx.at(l, "event.link", "event: give either path or link, not both"));
            }
            (None, None) => {
                return Err(ctx.at(e, "event.path", "event: missing key `path` or `link`"));
            }
        };
        let direction =
            match &re.direction {
                None => Direction::Both,
                Some(d) => {
                    if matches!(target, Target::Link(_)) {
                        return Err(ctx.at(
                            d,
                            "event.direction",
                            "event: direction applies to path events only",
                        ));
                    }
                    match d.get_ref().as_str() {
                        "both" => Direction::Both,
                        "down" => Direction::Down,
                        "up" => Direction::Up,
                        other => return Err(ctx.at(
                            d,
                            "event.direction",
                            format!(
                                "event: unknown direction \"{other}\" (expected down, up or both)"
                            ),
                        )),
                    }
                }
            };
        let action = match re.action.get_ref().as_str() {
            "down" | "up" => {
                let why = format!("event: action \"{}\"", re.action.get_ref());
                forbid(&ctx, &re.rate, "rate", &why)?;
                forbid(&ctx, &re.delay_ms, "delay_ms", &why)?;
                forbid(&ctx, &re.loss, "loss", &why)?;
                if re.action.get_ref() == "down" { Action::Down } else { Action::Up }
            }
            "set" => {
                let rate_bps =
                    re.rate.as_ref().map(|r| rate_of(&ctx, r, what, "event.rate")).transpose()?;
                let delay = re
                    .delay_ms
                    .as_ref()
                    .map(|d| non_negative(&ctx, d, what, "delay_ms").map(millis))
                    .transpose()?;
                let loss =
                    re.loss.as_ref().map(|l| probability(&ctx, l, what, "loss")).transpose()?;
                if rate_bps.is_none() && delay.is_none() && loss.is_none() {
                    return Err(ctx.at(
                        &re.action,
                        "event.action",
                        "event: action \"set\" needs rate, delay_ms or loss",
                    ));
                }
                Action::Set { rate_bps, delay, loss }
            }
            other => {
                return Err(ctx.at(
                    &re.action,
                    "event.action",
                    format!("event: unknown action \"{other}\" (expected down, up or set)"),
                ));
            }
        };
        events.push(EventDef { at, target, direction, action, caption: re.caption.clone() });
    }
    events.sort_by_key(|e| e.at);

    // Cross traffic.
    let mut cross = Vec::new();
    for c in &raw.cross {
        let rc = c.get_ref();
        let kind_name = rc.kind.get_ref().as_str();
        let what = format!("cross \"{kind_name}\"");
        let target = match (&rc.link, &rc.path) {
            (Some(l), None) => {
                CrossTarget::Link(find_link(&links, l.get_ref()).ok_or_else(|| {
                    ctx.at(l, "cross.link", format!("{what}: unknown link \"{}\"", l.get_ref()))
                })?)
            }
            (None, Some(p)) => CrossTarget::Path(find_path(p.get_ref()).ok_or_else(|| {
                ctx.at(p, "cross.path", format!("{what}: unknown path \"{}\"", p.get_ref()))
            })?),
            (Some(_), Some(p)) => {
                return Err(ctx.at(
                    p,
                    "cross.path",
                    format!("{what}: give either link or path, not both"),
                ));
            }
            (None, None) => {
                return Err(ctx.at(
                    c,
                    "cross.link",
                    format!("{what}: missing key `link` or `path`"),
                ));
            }
        };
        let count = match &rc.count {
            Some(n) if *n.get_ref() == 0 || *n.get_ref() > MAX_CROSS_COUNT => {
                return Err(ctx.at(
                    n,
                    "cross.count",
                    format!("{what}: count must be in 1..={MAX_CROSS_COUNT}"),
                ));
            }
            Some(n) => *n.get_ref(),
            None => 1,
        };
        let start = rc
            .start_s
            .as_ref()
            .map(|s| non_negative(&ctx, s, &what, "start_s"))
            .transpose()?
            .unwrap_or(0.0);
        let stop = rc
            .stop_s
            .as_ref()
            .map(|s| non_negative(&ctx, s, &what, "stop_s"))
            .transpose()?
            .unwrap_or(duration_s);
        if let Some(s) = &rc.stop_s
            && stop < start
        {
            return Err(ctx.at(s, "cross.stop_s", format!("{what}: stop_s is before start_s")));
        }
        let needs_rate = |ctx: &Ctx<'_>| -> R<u64> {
            match &rc.rate {
                Some(r) => rate_of(ctx, r, &what, "cross.rate"),
                None => Err(ctx.at(&rc.kind, "cross.rate", format!("{what}: missing key `rate`"))),
            }
        };
        let packet_bytes = match &rc.packet_bytes {
            Some(p) if *p.get_ref() == 0 || *p.get_ref() > 65_507 => {
                return Err(ctx.at(
                    p,
                    "cross.packet_bytes",
                    format!("{what}: packet_bytes must be in 1..=65507"),
                ));
            }
            Some(p) => *p.get_ref(),
            None => 1200,
        };
        let why = format!("{what}:");
        let kind = match kind_name {
            "reno" | "tfrc" => {
                for (v, k) in [
                    (&rc.rate.as_ref().map(|s| s.span()), "rate"),
                    (&rc.packet_bytes.as_ref().map(|s| s.span()), "packet_bytes"),
                ] {
                    if let Some(sp) = v {
                        return Err(ctx.err(
                            sp.clone(),
                            k,
                            format!("{why} key `{k}` does not apply"),
                        ));
                    }
                }
                forbid(&ctx, &rc.on_s, "on_s", &why)?;
                forbid(&ctx, &rc.off_s, "off_s", &why)?;
                forbid(&ctx, &rc.shape, "shape", &why)?;
                forbid(&ctx, &rc.flows, "flows", &why)?;
                forbid(&ctx, &rc.flow_bytes, "flow_bytes", &why)?;
                if kind_name == "reno" { CrossKind::Reno } else { CrossKind::Tfrc }
            }
            "cbr" => {
                forbid(&ctx, &rc.on_s, "on_s", &why)?;
                forbid(&ctx, &rc.off_s, "off_s", &why)?;
                forbid(&ctx, &rc.shape, "shape", &why)?;
                forbid(&ctx, &rc.flows, "flows", &why)?;
                forbid(&ctx, &rc.flow_bytes, "flow_bytes", &why)?;
                CrossKind::Cbr { rate_bps: needs_rate(&ctx)?, packet_bytes }
            }
            "onoff" => {
                forbid(&ctx, &rc.flows, "flows", &why)?;
                forbid(&ctx, &rc.flow_bytes, "flow_bytes", &why)?;
                let on_s = rc
                    .on_s
                    .as_ref()
                    .map(|s| positive(&ctx, s, &what, "on_s"))
                    .transpose()?
                    .unwrap_or(1.0);
                let off_s = rc
                    .off_s
                    .as_ref()
                    .map(|s| positive(&ctx, s, &what, "off_s"))
                    .transpose()?
                    .unwrap_or(1.0);
                let shape = match &rc.shape {
                    Some(s) if !(*s.get_ref() > 1.0 && s.get_ref().is_finite()) => {
                        return Err(ctx.at(
                            s,
                            "cross.shape",
                            format!("{what}: shape must be > 1 (finite mean)"),
                        ));
                    }
                    Some(s) => *s.get_ref(),
                    None => 1.5,
                };
                CrossKind::OnOff { rate_bps: needs_rate(&ctx)?, packet_bytes, on_s, off_s, shape }
            }
            "flash" => {
                forbid(&ctx, &rc.rate, "rate", &why)?;
                forbid(&ctx, &rc.packet_bytes, "packet_bytes", &why)?;
                forbid(&ctx, &rc.on_s, "on_s", &why)?;
                forbid(&ctx, &rc.off_s, "off_s", &why)?;
                forbid(&ctx, &rc.shape, "shape", &why)?;
                forbid(&ctx, &rc.count, "count", &why)?;
                let flows = match &rc.flows {
                    Some(f) if (1..=MAX_FLASH_FLOWS).contains(f.get_ref()) => *f.get_ref(),
                    Some(f) => {
                        return Err(ctx.at(
                            f,
                            "cross.flows",
                            format!("{what}: flows must be in 1..={MAX_FLASH_FLOWS}"),
                        ));
                    }
                    None => {
                        return Err(ctx.at(
                            &rc.kind,
                            "cross.flows",
                            format!("{what}: missing key `flows`"),
                        ));
                    }
                };
                let flow_bytes = match &rc.flow_bytes {
                    Some(f) if *f.get_ref() >= 1 => *f.get_ref(),
                    Some(f) => {
                        return Err(ctx.at(
                            f,
                            "cross.flow_bytes",
                            format!("{what}: flow_bytes must be ≥ 1"),
                        ));
                    }
                    None => {
                        return Err(ctx.at(
                            &rc.kind,
                            "cross.flow_bytes",
                            format!("{what}: missing key `flow_bytes`"),
                        ));
                    }
                };
                CrossKind::Flash { flows, flow_bytes }
            }
            other => {
                return Err(ctx.at(
                    &rc.kind,
                    "cross.kind",
                    format!(
                        "cross: unknown kind \"{other}\" (expected reno, tfrc, cbr, onoff or flash)"
                    ),
                ));
            }
        };
        cross.push(CrossDef { target, kind, count, start: secs(start), stop: secs(stop) });
    }

    let workload = match &raw.workload {
        None => WorkloadDef::default(),
        Some(w) => workload(&ctx, w)?,
    };

    Ok(Scenario {
        name,
        duration,
        seed,
        idle_timeout,
        links,
        paths,
        nodes,
        events,
        cross,
        workload,
    })
}

fn workload(ctx: &Ctx<'_>, w: &Spanned<RawWorkload>) -> R<WorkloadDef> {
    let rw = w.get_ref();
    let kind_name = rw.kind.as_ref().map_or("bulk", |k| k.get_ref().as_str());
    let battery_j =
        rw.battery_j.as_ref().map(|b| positive(ctx, b, "workload", "battery_j")).transpose()?;
    let kind = match kind_name {
        "bulk" => {
            let why = "workload \"bulk\":";
            forbid(ctx, &rw.clip, "clip", why)?;
            forbid(ctx, &rw.cbr, "cbr", why)?;
            forbid(ctx, &rw.loop_, "loop", why)?;
            forbid(ctx, &rw.playout, "playout", why)?;
            forbid(ctx, &rw.buffer_s, "buffer_s", why)?;
            forbid(ctx, &rw.buffer_bytes, "buffer_bytes", why)?;
            forbid(ctx, &rw.transport_buffer_s, "transport_buffer_s", why)?;
            forbid(ctx, &rw.max_buffer_s, "max_buffer_s", why)?;
            forbid(ctx, &rw.reader, "reader", why)?;
            forbid(ctx, &rw.pattern, "pattern", why)?;
            let bytes = match &rw.bytes {
                Some(b) if *b.get_ref() == 0 => {
                    return Err(ctx.at(b, "workload.bytes", "workload: bytes must be > 0"));
                }
                Some(b) => Some(*b.get_ref()),
                None => None,
            };
            WorkloadKind::Bulk { bytes }
        }
        "stream" => {
            let what = "workload \"stream\"";
            forbid(ctx, &rw.bytes, "bytes", &format!("{what}:"))?;
            let source = match (&rw.clip, &rw.cbr) {
                (Some(c), None) => StreamSource::Clip(ctx.resolve(c.get_ref())),
                (None, Some(c)) => {
                    let cb = c.get_ref();
                    let rate_bps = rate_of(ctx, &cb.rate, what, "workload.cbr.rate")?;
                    let packet_bytes = match &cb.packet_bytes {
                        Some(p) if *p.get_ref() == 0 => {
                            return Err(ctx.at(
                                p,
                                "workload.cbr.packet_bytes",
                                format!("{what}: packet_bytes must be > 0"),
                            ));
                        }
                        Some(p) => *p.get_ref(),
                        None => 1200,
                    };
                    StreamSource::Cbr { rate_bps, packet_bytes }
                }
                (Some(_), Some(c)) => {
                    return Err(ctx.at(
                        c,
                        "workload.cbr",
                        format!("{what}: give either clip or cbr, not both"),
                    ));
                }
                (None, None) => {
                    return Err(ctx.at(
                        w,
                        "workload.clip",
                        format!("{what}: missing key `clip` or `cbr`"),
                    ));
                }
            };
            let playout = match &rw.playout {
                None => Playout::Adaptive,
                Some(p) => match p.get_ref().as_str() {
                    "fixed" => Playout::Fixed,
                    "media3" => Playout::Media3,
                    "adaptive" => Playout::Adaptive,
                    "oracle" => Playout::Oracle,
                    other => {
                        return Err(ctx.at(p, "workload.playout", format!("{what}: unknown playout \"{other}\" (expected fixed, media3, adaptive or oracle)")));
                    }
                },
            };
            let buffer_s =
                rw.buffer_s.as_ref().map(|b| positive(ctx, b, what, "buffer_s")).transpose()?;
            let buffer_bytes = match &rw.buffer_bytes {
                Some(b) if *b.get_ref() == 0 => {
                    return Err(ctx.at(
                        b,
                        "workload.buffer_bytes",
                        format!("{what}: buffer_bytes must be > 0"),
                    ));
                }
                Some(b) => Some(*b.get_ref()),
                None => None,
            };
            // `max_buffer_s`, and `transport_buffer_s`, its older name: one of them.
            let (ahead, key) = match (&rw.max_buffer_s, &rw.transport_buffer_s) {
                (Some(m), Some(_)) => {
                    return Err(ctx.at(
                        m,
                        "workload.max_buffer_s",
                        format!(
                            "{what}: give max_buffer_s or transport_buffer_s (its older name), not both"
                        ),
                    ));
                }
                (Some(m), None) => (Some(m), "max_buffer_s"),
                (None, t) => (t.as_ref(), "transport_buffer_s"),
            };
            let transport_buffer_s = match (ahead, &source) {
                (None, _) => None,
                (Some(b), StreamSource::Clip(_)) => {
                    let x = positive(ctx, b, what, key)?;
                    if x > MAX_TRANSPORT_BUFFER_S {
                        return Err(ctx.at(
                            b,
                            &format!("workload.{key}"),
                            format!(
                                "{what}: {key} must be at most {MAX_TRANSPORT_BUFFER_S} s, got {x}"
                            ),
                        ));
                    }
                    Some(x)
                }
                (Some(b), StreamSource::Cbr { .. }) => {
                    return Err(ctx.at(
                        b,
                        &format!("workload.{key}"),
                        format!("{what}: {key} applies to a `clip` stream, not to `cbr`"),
                    ));
                }
            };
            let pattern_of = |p: &RawPattern, span: Range<usize>| -> R<Reader> {
                if p.rates.is_empty() {
                    return Err(ctx.err(
                        span,
                        "workload.pattern.rates",
                        format!("{what}: pattern rates are empty"),
                    ));
                }
                let mut rates_bps = Vec::new();
                for r in &p.rates {
                    let v = match r {
                        RateValue::Number(n) if n.is_finite() && *n >= 0.0 => {
                            Some(n.round() as u64)
                        }
                        RateValue::Number(_) => None,
                        RateValue::Text(t) => parse_rate(t),
                    };
                    rates_bps.push(v.ok_or_else(|| {
                        ctx.err(
                            span.clone(),
                            "workload.pattern.rates",
                            format!("{what}: invalid rate {r:?} in pattern"),
                        )
                    })?);
                }
                let period = match &p.period {
                    None => PatternPeriod::Rtt,
                    Some(PeriodValue::Text(t)) if t == "rtt" => PatternPeriod::Rtt,
                    Some(PeriodValue::Number(n)) if n.is_finite() && *n > 0.0 => {
                        PatternPeriod::Millis(*n)
                    }
                    Some(other) => {
                        return Err(ctx.err(span, "workload.pattern.period", format!("{what}: pattern period must be \"rtt\" or a number of ms > 0, got {other:?}")));
                    }
                };
                Ok(Reader::Pattern { rates_bps, period })
            };
            let reader = match (&rw.reader, &rw.pattern) {
                (None, None) => Reader::Player,
                (Some(r), pat) => match (r.get_ref(), pat) {
                    (RawReader::Name(n), None) if n == "player" => Reader::Player,
                    (RawReader::Name(n), Some(p)) if n == "pattern" => {
                        pattern_of(p.get_ref(), p.span())?
                    }
                    (RawReader::Name(n), None) if n == "pattern" => {
                        return Err(ctx.at(r, "workload.pattern", format!("{what}: reader \"pattern\" needs `pattern = {{ rates = [...], period = ... }}`")));
                    }
                    (RawReader::Table(t), None) => pattern_of(&t.pattern, r.span())?,
                    (RawReader::Name(n), _) if n != "player" && n != "pattern" => {
                        return Err(ctx.at(
                            r,
                            "workload.reader",
                            format!("{what}: unknown reader \"{n}\" (expected player or pattern)"),
                        ));
                    }
                    (_, Some(p)) => {
                        return Err(ctx.at(
                            p,
                            "workload.pattern",
                            format!("{what}: `pattern` given twice or with reader \"player\""),
                        ));
                    }
                    (_, None) => Reader::Player,
                },
                (None, Some(p)) => pattern_of(p.get_ref(), p.span())?,
            };
            WorkloadKind::Stream(StreamDef {
                source,
                loop_clip: rw.loop_.as_ref().is_some_and(|l| *l.get_ref()),
                playout,
                buffer_s,
                buffer_bytes,
                transport_buffer_s,
                reader,
            })
        }
        other => {
            let k = rw.kind.as_ref().map_or(0..0, |k| k.span());
            return Err(ctx.err(
                k,
                "workload.kind",
                format!("workload: unknown kind \"{other}\" (expected bulk or stream)"),
            ));
        }
    };
    Ok(WorkloadDef { kind, battery_j })
}
