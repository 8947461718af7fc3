//! **Per-call durations** of a model node: how long a library call at its place in the
//! tree lasted, entry to exit, in the normal units, and the rule that calls a call of a
//! faulty run **too long** ([`Durations::too_long`]).
//!
//! A coverage model holds which calls happen, not how long they take: a `recv` that an
//! injected delay holds for a second looks normal. Each unit contributes one sample per
//! timed node — the longest of its calls there ([`crate::trees::TreeNode::dur`]) — to a
//! log-scale histogram (four buckets per octave, [`bucket_of`]), with the number of calls
//! behind it and the longest call. Histograms merge by adding counts, so `culprit merge`
//! of models learned apart equals one `culprit learn` over all traces.
//!
//! The rule is deliberately narrow: a wait for the peer is not a fault, and a multiplexer
//! or a blocking receive of a request/response program waits for whatever the peer does.
//! A call is too long only when (1) its node has at least [`MIN_SAMPLES`] normal samples,
//! (2) the normal durations are **tight** — the upper quantile ([`HIGH_QUANTILE`]) at most
//! [`MAX_SPREAD`] times the median (a wait whose normal durations already vary widely never
//! fires), (3) it lasted more than [`FACTOR`] times that upper quantile, more than every
//! normal call, and more than [`FLOOR_NS`] (scheduling noise on a loaded machine is
//! milliseconds). A node whose upper quantile is spread but whose bulk
//! ([`BULK_QUANTILE`]) is tight — a quick call (a `send`) that a loaded machine preempts
//! now and then — has the stricter rule: more than [`FACTOR`] times its longest normal
//! call (and [`FLOOR_NS`]). Multiplexers never fire ([`crate::trees::NodeKind::Lib`] nodes only; the
//! caller leaves `select`/`poll`/`epoll_wait` out).
//!
//! **How much a call too long weighs** ([`TooLong::once_in`], [`slow_score`]). The normal
//! units behind a node are many, but its *tail* — the slowest calls, which on a shared
//! machine are the ones the scheduler held off the CPU — is a handful of events from one
//! machine state, and the longest of them is an extreme that a longer or busier normal
//! run exceeds. So a call is weighed by how far past that tail it is, at the rate the tail
//! itself falls: the tail index `α` of the slowest [`TAIL_SHARE`] of the samples (Hill's
//! estimator on the log-scale histogram, [`Durations::tail_index`]) extends the normal
//! tail past its longest call, and a call of `d` would come about once in
//! `(d / longest)^α` normal recordings as long as the one learned. The call weighs as a
//! node never seen in that many units (never more than in the units that timed the node):
//! a call 1.2 times the longest normal one on a tail that falls slowly (`α ≈ 1`, calls
//! preempted now and then) is weak evidence, one 100 times past it strong.

/// Fewest normal samples (units with a timed call at the node) behind a duration rule.
pub const MIN_SAMPLES: u64 = 30;
/// The upper quantile the rule scales.
pub const HIGH_QUANTILE: f64 = 0.99;
/// A node whose upper quantile exceeds its median more than this many times varies too
/// widely for a duration to tell anything (unless only its tail does: [`BULK_QUANTILE`]).
pub const MAX_SPREAD: f64 = 64.0;
/// The quantile that tells a tight bulk with a thin tail (scheduling delays of a quick
/// call on a loaded machine) from a wait: when the upper quantile is spread but this one
/// is within [`MAX_SPREAD`] of the median, the node still has a rule, scaled from its
/// longest normal call instead of the upper quantile.
pub const BULK_QUANTILE: f64 = 0.9;
/// A call is too long past this many times the normal upper quantile.
pub const FACTOR: f64 = 20.0;
/// ... and past this many ns (20 ms).
pub const FLOOR_NS: u64 = 20_000_000;
/// The share of the samples, the slowest, whose spread gives the tail index
/// ([`Durations::tail_index`]): the samples past the [`HIGH_QUANTILE`] the rule scales.
pub const TAIL_SHARE: f64 = 1.0 - HIGH_QUANTILE;
/// Fewest samples the tail index is estimated from (more than [`TAIL_SHARE`] of the
/// samples when they are few).
pub const TAIL_MIN: u64 = 10;
/// Buckets per octave of the histogram.
pub const PER_OCTAVE: u32 = 4;
/// The largest bucket ([`bucket_of`]`(u64::MAX)`).
pub const MAX_BUCKET: u16 = 1 + 63 * PER_OCTAVE as u16 + (PER_OCTAVE as u16 - 1);

/// The histogram bucket of a duration: 0 for 0 ns, else `1 + 4·octave + quarter`, the
/// quarter being the two bits after the leading one (exact integer arithmetic: a
/// duration's bucket never depends on floating point).
pub fn bucket_of(ns: u64) -> u16 {
    if ns == 0 {
        return 0;
    }
    let octave = 63 - ns.leading_zeros();
    let quarter = if octave >= 2 {
        (ns >> (octave - 2)) & 3
    } else {
        (ns << (2 - octave)) & 3
    };
    (1 + octave * PER_OCTAVE + quarter as u32) as u16
}

/// The largest duration of bucket `b` (its upper edge, inclusive), ns.
pub fn bucket_high(b: u16) -> u64 {
    if b == 0 {
        return 0;
    }
    let octave = u32::from(b - 1) / PER_OCTAVE;
    let quarter = u64::from(u32::from(b - 1) % PER_OCTAVE);
    // Durations of the bucket: [(4 + quarter) << (octave − 2), (5 + quarter) << (octave − 2)).
    if octave >= 2 {
        ((5 + quarter) << (octave - 2)).wrapping_sub(1)
    } else {
        // Octaves 0 and 1 hold the single values 1, 2 and 3.
        (1u64 << octave) + quarter / 2
    }
}

/// The smallest duration of bucket `b` (its lower edge), ns.
pub fn bucket_low(b: u16) -> u64 {
    if b == 0 {
        0
    } else {
        bucket_high(b - 1) + 1
    }
}

/// The normal durations of one model node (see the module's documentation).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Durations {
    /// Timed calls in the sampled units.
    pub calls: u64,
    /// The longest normal call, ns.
    pub max_ns: u64,
    /// `(bucket, units)`, buckets strictly ascending, counts ≥ 1: per unit, its longest
    /// call at the node.
    pub hist: Vec<(u16, u64)>,
}

impl Durations {
    /// Adds one unit's sample: its longest call `ns` of `calls` calls at the node.
    pub fn add(&mut self, ns: u64, calls: u64) {
        self.calls = self.calls.saturating_add(calls);
        self.max_ns = self.max_ns.max(ns);
        let b = bucket_of(ns);
        match self.hist.binary_search_by_key(&b, |e| e.0) {
            Ok(i) => self.hist[i].1 = self.hist[i].1.saturating_add(1),
            Err(i) => self.hist.insert(i, (b, 1)),
        }
    }

    /// Adds another node's durations (associative and commutative).
    pub fn merge(&mut self, o: &Durations) {
        self.calls = self.calls.saturating_add(o.calls);
        self.max_ns = self.max_ns.max(o.max_ns);
        for &(b, n) in &o.hist {
            match self.hist.binary_search_by_key(&b, |e| e.0) {
                Ok(i) => self.hist[i].1 = self.hist[i].1.saturating_add(n),
                Err(i) => self.hist.insert(i, (b, n)),
            }
        }
    }

    /// Number of samples (units).
    pub fn samples(&self) -> u64 {
        self.hist.iter().fold(0u64, |a, e| a.saturating_add(e.1))
    }

    /// The `q`-quantile of the samples, as the upper edge of its bucket (never above the
    /// longest call).
    pub fn quantile(&self, q: f64) -> u64 {
        let n = self.samples();
        let want = ((q * n as f64).ceil() as u64).clamp(1, n.max(1));
        let mut seen = 0u64;
        for &(b, c) in &self.hist {
            seen = seen.saturating_add(c);
            if seen >= want {
                return bucket_high(b).min(self.max_ns);
            }
        }
        self.max_ns
    }

    /// The shortest duration that the rule calls too long at this node, or `None` when the
    /// node has no rule (too few samples, or durations too spread).
    pub fn limit_ns(&self) -> Option<u64> {
        if self.samples() < MIN_SAMPLES {
            return None;
        }
        let high = self.quantile(HIGH_QUANTILE).max(1);
        let median = self.quantile(0.5).max(1);
        let scaled = if high as f64 <= MAX_SPREAD * median as f64 {
            FACTOR * high as f64
        } else if self.quantile(BULK_QUANTILE).max(1) as f64 <= MAX_SPREAD * median as f64 {
            // A tight bulk with a thin tail of outliers: a quick call preempted now and then
            // on a loaded machine, not a wait. Only far beyond the longest normal call.
            FACTOR * self.max_ns as f64
        } else {
            return None;
        };
        let scaled = scaled.min(u64::MAX as f64) as u64;
        Some(scaled.max(self.max_ns).max(FLOOR_NS).saturating_add(1))
    }

    /// The tail index `α` of the normal durations: Hill's estimator, `k / Σ ln(xᵢ / x₍ₖ₊₁₎)`
    /// over the `k` slowest samples (the larger of [`TAIL_SHARE`] of them and
    /// [`TAIL_MIN`], at most all but one), `x₍ₖ₊₁₎` the next one. The histogram holds each
    /// sample's bucket only: the `c` samples of a bucket are taken as spread evenly over it
    /// on the log scale, and the slowest is the longest call itself. Large when the slowest
    /// calls lie close together (a tight tail: a call past them is far out), about 1 when
    /// they spread over decades (calls preempted by a loaded machine). `None` with fewer
    /// than two samples.
    pub fn tail_index(&self) -> Option<f64> {
        let n = self.samples();
        if n < 2 {
            return None;
        }
        let k = ((TAIL_SHARE * n as f64).ceil() as u64)
            .max(TAIL_MIN)
            .min(n - 1);
        // The logs of the k + 1 slowest samples, slowest first.
        let mut logs: Vec<f64> = Vec::with_capacity(k as usize + 1);
        'buckets: for &(b, c) in self.hist.iter().rev() {
            let low = (bucket_low(b).max(1) as f64).ln();
            let width = ((bucket_high(b).saturating_add(1)).max(1) as f64).ln() - low;
            for j in 0..c {
                if logs.len() as u64 > k {
                    break 'buckets;
                }
                logs.push(if logs.is_empty() {
                    (self.max_ns.max(1) as f64).ln()
                } else {
                    low + width * (c - j) as f64 / c as f64 - width * 0.5 / c as f64
                });
            }
        }
        let u = *logs.last()?;
        let sum: f64 = logs[..k as usize].iter().map(|x| (x - u).max(0.0)).sum();
        Some(if sum > 0.0 {
            k as f64 / sum
        } else {
            f64::INFINITY
        })
    }

    /// In how many normal recordings as long as the one learned a call of `ns` would come
    /// about once: `(ns / longest)^α` ([`Durations::tail_index`]), at least 1; infinite
    /// with no tail to go by.
    pub fn once_in(&self, ns: u64) -> f64 {
        once_in(ns, self.max_ns, self.tail_index().unwrap_or(f64::INFINITY))
    }

    /// Is a call of `ns` too long here?
    pub fn too_long(&self, ns: u64) -> bool {
        self.limit_ns().is_some_and(|l| ns >= l)
    }

    /// Checks a node's durations read from a file: buckets ascending and in range, counts
    /// ≥ 1, at least one call per sample, the longest call in the last bucket.
    pub fn check(&self) -> Result<(), String> {
        if self.hist.is_empty() {
            return Err("\"durations\" with no sample".into());
        }
        for (i, &(b, n)) in self.hist.iter().enumerate() {
            if b > MAX_BUCKET {
                return Err(format!("bucket {b} out of range (0 to {MAX_BUCKET})"));
            }
            if i > 0 && self.hist[i - 1].0 >= b {
                return Err(format!(
                    "bucket {b} does not follow bucket {}: buckets must be strictly ascending",
                    self.hist[i - 1].0
                ));
            }
            if n == 0 {
                return Err(format!("bucket {b} counts 0 samples"));
            }
        }
        if self.calls < self.samples() {
            return Err(format!(
                "{} calls for {} samples (each sample is at least one call)",
                self.calls,
                self.samples()
            ));
        }
        let last = self.hist[self.hist.len() - 1].0;
        if bucket_of(self.max_ns) != last {
            return Err(format!(
                "the longest call ({} ns) is not in the last bucket ({last})",
                self.max_ns
            ));
        }
        Ok(())
    }
}

/// A call of a faulty run that lasted longer than the rule allows at its node
/// ([`Durations::too_long`]), with what normal runs did there.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SlowCall {
    /// The node.
    pub key: crate::trees::NodeKey,
    /// How long it lasted, ns.
    pub dur_ns: u64,
    /// When it began (wall clock, ns): the exit of the node's first call in the unit minus
    /// its longest duration — exact when the longest call is the first, as for the receive
    /// that opens a handler unit.
    pub began_ns: i64,
    /// The longest normal call at the node, ns.
    pub normal_max_ns: u64,
    /// Normal calls at the node.
    pub normal_calls: u64,
    /// Normal units with a call at the node.
    pub normal_units: u64,
}

impl SlowCall {
    /// The sentence of the unit's *why*: "`recv` took 1.00 s (normal at most 0.3 ms in
    /// 2400 normal calls)".
    pub fn sentence(&self, names: &std::collections::BTreeMap<u64, String>) -> String {
        let name = crate::report::node_name(&self.key.without_outcome(), names);
        format!(
            "`{name}` took {} (normal at most {} in {} normal call{})",
            describe_ns(self.dur_ns),
            describe_ns(self.normal_max_ns),
            self.normal_calls,
            if self.normal_calls == 1 { "" } else { "s" }
        )
    }

    /// Its JSON object (`slow_call` of `culprit rank --json`).
    pub fn to_json(&self, names: &std::collections::BTreeMap<u64, String>) -> serde_json::Value {
        serde_json::json!({
            "call": crate::report::node_name(&self.key.without_outcome(), names),
            "duration_ns": self.dur_ns,
            "began_unix_ns": self.began_ns,
            "normal_max_ns": self.normal_max_ns,
            "normal_calls": self.normal_calls,
            "normal_units": self.normal_units,
        })
    }
}

/// A call too long ([`ClassLimits::slowest`]) and how much it weighs.
#[derive(Clone, Debug, PartialEq)]
pub struct TooLong {
    /// The call.
    pub call: SlowCall,
    /// In how many normal recordings as long as the one learned a call this long would
    /// come about once ([`Durations::once_in`]).
    pub once_in: f64,
}

/// The duration rule of one timed node.
#[derive(Clone, Copy, Debug)]
struct Rule {
    /// [`Durations::limit_ns`].
    limit: u64,
    /// The longest normal call.
    max_ns: u64,
    /// Normal calls.
    calls: u64,
    /// Normal units (samples).
    units: u64,
    /// [`Durations::tail_index`] (infinite with none).
    alpha: f64,
}

/// The duration rules of one class model: per timed node its limit
/// ([`Durations::limit_ns`]) and tail index, and the least limit (a unit whose longest
/// call is shorter is not looked at).
#[derive(Clone, Debug, Default)]
pub struct ClassLimits {
    /// The least limit (`u64::MAX`: no node has a rule).
    pub min_ns: u64,
    by_id: crate::hash::IdMap<Rule>,
}

impl ClassLimits {
    /// The rules of a class model.
    pub fn of(m: &crate::model::TreeModel) -> ClassLimits {
        let mut by_id = crate::hash::IdMap::default();
        let mut min_ns = u64::MAX;
        for (&id, d) in &m.durations {
            if let Some(limit) = d.limit_ns() {
                min_ns = min_ns.min(limit);
                let rule = Rule {
                    limit,
                    max_ns: d.max_ns,
                    calls: d.calls,
                    units: d.samples(),
                    alpha: d.tail_index().unwrap_or(f64::INFINITY),
                };
                by_id.insert(id, rule);
            }
        }
        ClassLimits { min_ns, by_id }
    }

    /// The call of a unit's tree past its node's limit that weighs most — the one that
    /// would come in the most normal recordings' worth of time ([`TooLong::once_in`]),
    /// then the one past its limit by the largest factor —, if any (`unix`: a TSC as
    /// wall-clock ns). `slowest_ns`: the tree's longest call (an upper bound), to skip the
    /// tree at once.
    pub fn slowest<'a>(
        &self,
        slowest_ns: u64,
        nodes: impl IntoIterator<Item = (u64, &'a crate::trees::TreeNode)>,
        unix: impl Fn(u64) -> i64,
    ) -> Option<TooLong> {
        if slowest_ns < self.min_ns {
            return None;
        }
        let mut best: Option<((f64, f64), TooLong)> = None;
        for (id, n) in nodes {
            let dur_ns = n.dur.ns();
            if dur_ns < self.min_ns {
                continue;
            }
            let Some(r) = self.by_id.get(&id) else {
                continue;
            };
            if dur_ns < r.limit {
                continue;
            }
            let once_in = once_in(dur_ns, r.max_ns, r.alpha);
            let rank = (once_in.min(r.units as f64), dur_ns as f64 / r.limit as f64);
            if best.as_ref().is_none_or(|(b, _)| rank > *b) {
                let end = unix(n.first_tsc);
                let call = SlowCall {
                    key: n.key,
                    dur_ns,
                    began_ns: end.saturating_sub(dur_ns.min(i64::MAX as u64) as i64),
                    normal_max_ns: r.max_ns,
                    normal_calls: r.calls,
                    normal_units: r.units,
                };
                best = Some((rank, TooLong { call, once_in }));
            }
        }
        best.map(|b| b.1)
    }
}

/// [`Durations::once_in`]: `(ns / max_ns)^alpha`, 1 for a call no longer than the longest
/// normal one, infinite when the tail index is.
fn once_in(ns: u64, max_ns: u64, alpha: f64) -> f64 {
    let ratio = ns as f64 / max_ns.max(1) as f64;
    if ratio <= 1.0 {
        1.0
    } else if alpha.is_finite() {
        ratio.powf(alpha).max(1.0)
    } else {
        f64::INFINITY
    }
}

/// The evidence score of a unit with a call too long ([`ClassLimits::slowest`]) whose
/// score was `score`: the call weighs as a node never seen in as many units as the
/// normal recordings it would take to see a call this long ([`TooLong::once_in`]), never
/// more than the normal units that timed its node — `0.8 · backing(min(once_in, units))`
/// plus `0.2 · score` ([`crate::evidence::backing_f`]) —, and the unit keeps the larger
/// of that and its score.
pub fn slow_score(score: f64, slow: &TooLong) -> f64 {
    let backed = slow.once_in.min(slow.call.normal_units as f64);
    score.max(0.8 * crate::evidence::backing_f(backed) + 0.2 * score)
}

/// A duration in words: `1.00 s`, `0.3 ms`, `12 µs`, `800 ns`.
pub fn describe_ns(ns: u64) -> String {
    let f = ns as f64;
    if ns >= 1_000_000_000 {
        format!("{:.2} s", f / 1e9)
    } else if ns >= 10_000_000 {
        format!("{:.0} ms", f / 1e6)
    } else if ns >= 100_000 {
        format!("{:.1} ms", f / 1e6)
    } else if ns >= 1_000 {
        format!("{:.0} µs", f / 1e3)
    } else {
        format!("{ns} ns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_ordered_and_their_edges_hold_them() {
        let mut prev = 0;
        for ns in (0..5000u64).chain([1 << 20, 999_999_999, u64::MAX - 1, u64::MAX]) {
            let b = bucket_of(ns);
            assert!(b >= prev, "{ns}");
            prev = b;
            assert!(b <= MAX_BUCKET);
            assert!(
                bucket_high(b) >= ns,
                "{ns}: bucket {b} ends at {}",
                bucket_high(b)
            );
            if ns > 0 && ns <= 5000 && bucket_of(ns - 1) != b {
                assert_eq!(bucket_high(bucket_of(ns - 1)), ns - 1, "{ns}: bucket {b}");
            }
        }
        assert_eq!(bucket_of(u64::MAX), MAX_BUCKET);
        // Four buckets per octave: 1 ms and 2 ms are four apart.
        assert_eq!(bucket_of(2_000_000) - bucket_of(1_000_000), 4);
    }

    fn normal(n: u64, ns: impl Fn(u64) -> u64) -> Durations {
        let mut d = Durations::default();
        for i in 0..n {
            d.add(ns(i), 2);
        }
        d
    }

    #[test]
    fn a_call_far_beyond_tight_normal_durations_is_too_long() {
        // 2 400 normal receives of 20–300 µs; the delayed one took a second.
        let d = normal(2400, |i| 20_000 + (i * 7919) % 280_000);
        assert!(d.too_long(1_000_000_000));
        // Ten times longer than normal is a slow machine, not a fault (the floor).
        assert!(!d.too_long(3_000_000));
        assert!(!d.too_long(d.max_ns));
    }

    #[test]
    fn waits_that_already_vary_widely_never_fire() {
        // A blocking receive waiting for its peer: 50 µs to 2 s.
        let d = normal(500, |i| 50_000u64 << (i % 16));
        assert_eq!(d.limit_ns(), None);
        assert!(!d.too_long(60_000_000_000));
    }

    #[test]
    fn a_thin_tail_of_preempted_calls_keeps_a_rule_past_the_longest() {
        // 700 sends of 4–8 µs and 20 preempted ones of 1–6 ms (p99 spread, p90 tight):
        // a send held 1.5 s is too long, one 20 times short of it — 75 ms, more than 20
        // times the upper quantile but less than 20 times the longest — is not.
        let mut d = normal(700, |i| 4_000 + (i * 37) % 4_000);
        for i in 0..20 {
            d.add(1_000_000 + i * 250_000, 1);
        }
        let (p99, median) = (d.quantile(HIGH_QUANTILE), d.quantile(0.5));
        assert!(
            p99 as f64 > MAX_SPREAD * median as f64,
            "p99 {p99} median {median}"
        );
        assert!(d.too_long(1_500_000_000));
        assert!(!d.too_long(75_000_000));
        assert_eq!(d.limit_ns(), Some(FACTOR as u64 * d.max_ns + 1));
        // A wait whose bulk varies: no rule (as before).
        let w = normal(500, |i| 50_000u64 << (i % 16));
        assert!(w.quantile(BULK_QUANTILE) as f64 > MAX_SPREAD * w.quantile(0.5) as f64);
    }

    #[test]
    fn too_few_samples_never_fire() {
        let d = normal(MIN_SAMPLES - 1, |_| 10_000);
        assert!(!d.too_long(10_000_000_000));
        let d = normal(MIN_SAMPLES, |_| 10_000);
        assert!(d.too_long(10_000_000_000));
    }

    #[test]
    fn an_outlier_among_normal_calls_raises_the_limit_to_it() {
        // One normal call took 500 ms: a call of 400 ms is not beyond every normal one.
        let mut d = normal(1000, |_| 10_000);
        d.add(500_000_000, 1);
        assert!(!d.too_long(400_000_000));
        assert!(d.too_long(600_000_000));
    }

    #[test]
    fn merge_is_exact_and_associative() {
        let a = normal(40, |i| 1000 + i);
        let b = normal(7, |i| 1 << (i + 10));
        let c = normal(3, |_| 0);
        let mut ab_c = a.clone();
        ab_c.merge(&b);
        ab_c.merge(&c);
        let mut bc = b.clone();
        bc.merge(&c);
        let mut a_bc = a.clone();
        a_bc.merge(&bc);
        assert_eq!(ab_c, a_bc);
        let mut all = Durations::default();
        for i in 0..40 {
            all.add(1000 + i, 2);
        }
        for i in 0..7 {
            all.add(1 << (i + 10), 2);
        }
        for _ in 0..3 {
            all.add(0, 2);
        }
        assert_eq!(all, ab_c);
        assert_eq!(all.samples(), 50);
        assert_eq!(all.calls, 100);
        assert!(all.check().is_ok());
    }

    #[test]
    fn checks_name_the_problem() {
        let mut d = normal(3, |i| 1000 * (i + 1));
        assert!(d.check().is_ok());
        d.hist.swap(0, 1);
        assert!(d.check().unwrap_err().contains("strictly ascending"));
        let mut d = normal(3, |_| 1000);
        d.calls = 1;
        assert!(d.check().unwrap_err().contains("1 calls for 3 samples"));
        let mut d = normal(3, |_| 1000);
        d.max_ns = 5_000_000;
        assert!(d.check().unwrap_err().contains("last bucket"));
        let mut d = normal(3, |_| 1000);
        d.hist[0].0 = MAX_BUCKET + 1;
        assert!(d.check().unwrap_err().contains("out of range"));
        assert!(Durations::default().check().is_err());
    }

    /// A synthetic class: 400 normal handler units each `recv` (20–300 µs, twice) then
    /// `send`; learned into a model, the durations give a rule for `recv` and `send`; a
    /// unit whose `recv` took a second is found, named and dated from the call's start.
    #[test]
    fn a_synthetic_delayed_receive_is_found_in_its_unit() {
        use crate::model::TreeModel;
        use crate::trees::{CallTree, NodeKey, NodeKind, Outcome, TreeBuf, ROOT};
        let key = |site: u64, callee: u64| NodeKey {
            kind: NodeKind::Lib,
            site,
            callee,
            outcome: Outcome::Ok,
        };
        let (recv, send) = (key(1, 10), key(2, 11));
        let unit = |recv_ns: u64, send_ns: u64| {
            let mut t = TreeBuf::default();
            t.add_timed(ROOT, recv, recv.hash(), 1_000, 20_000);
            t.add_timed(ROOT, recv, recv.hash(), 2_000, recv_ns);
            t.add_timed(ROOT, send, send.hash(), 3_000, send_ns);
            t
        };
        let normal: Vec<CallTree> = (0..400u64)
            .map(|i| unit(20_000 + (i * 7919) % 280_000, 5_000 + i).to_tree())
            .collect();
        let m = TreeModel::from_trees(&normal);
        let d = m.durations(recv.child_of(ROOT)).unwrap();
        assert_eq!((d.samples(), d.calls), (400, 800));
        let lim = ClassLimits::of(&m);
        assert_eq!(lim.by_id.len(), 2);
        // A normal unit is not looked at past its longest call.
        let ok = unit(250_000, 6_000);
        assert_eq!(
            lim.slowest(
                ok.slowest_ns(),
                ok.nodes().iter().map(|(i, n)| (*i, n)),
                |t| t as i64
            ),
            None
        );
        // The delayed one: its second `recv` took 1 s.
        let bad = unit(1_000_000_000, 6_000);
        let found = lim
            .slowest(
                bad.slowest_ns(),
                bad.nodes().iter().map(|(i, n)| (*i, n)),
                |t| 5_000_000_000 + t as i64,
            )
            .expect("the delayed receive is too long");
        // The slowest normal receives lie close together (289–300 µs): a call 3 300 times
        // past them would not come in any number of normal recordings.
        assert!(found.once_in > 1e20, "{}", found.once_in);
        let s = &found.call;
        assert_eq!(s.key, recv);
        assert_eq!(s.dur_ns, 1_000_000_000);
        assert_eq!(s.normal_calls, 800);
        assert_eq!(s.normal_units, 400);
        // Dated from its start: the node's first exit (TSC 1000) minus its longest call.
        assert_eq!(s.began_ns, 5_000_001_000 - 1_000_000_000);
        let names = std::collections::BTreeMap::from([(10, "recv".to_string())]);
        assert_eq!(
            s.sentence(&names),
            format!(
                "`recv` took 1.00 s (normal at most {} in 800 normal calls)",
                describe_ns(d.max_ns)
            )
        );
        // It weighs as a call never seen in 400 units, above any score it had.
        let e = slow_score(0.1, &found);
        assert!(
            (e - (0.8 * crate::evidence::backing(400) + 0.02)).abs() < 1e-12,
            "{e}"
        );
        assert_eq!(slow_score(1.0, &found), 1.0);
    }

    /// Normal durations whose slowest tenth falls as a Pareto tail of index `alpha` from
    /// 1 ms: sample `i` of the tail at `1 ms · (tail / (i + 1))^(1/alpha)`, the bulk at
    /// 100–500 µs.
    fn pareto_tail(n: u64, alpha: f64) -> Durations {
        let tail = n / 10;
        let mut d = normal(n - tail, |i| 100_000 + (i * 7919) % 400_000);
        for i in 0..tail {
            let x = 1e6 * (tail as f64 / (i + 1) as f64).powf(1.0 / alpha);
            d.add(x as u64, 1);
        }
        d
    }

    #[test]
    fn the_tail_index_follows_how_fast_the_slowest_calls_thin_out() {
        for alpha in [0.7, 1.0, 2.0, 4.0] {
            let d = pareto_tail(20_000, alpha);
            let a = d.tail_index().unwrap();
            // The buckets are a quarter octave wide: within a fifth.
            assert!((a / alpha - 1.0).abs() < 0.2, "α {alpha}: estimated {a}");
        }
        // Calls that all took the same time: no tail to speak of (the histogram spreads
        // them over their bucket, a fifth of an octave).
        assert!(normal(100, |_| 10_000).tail_index().unwrap() > 20.0);
        assert_eq!(normal(1, |_| 10_000).tail_index(), None);
        assert!(normal(2, |i| 10_000 << i).tail_index().unwrap().is_finite());
    }

    #[test]
    fn a_call_just_past_a_spread_tail_weighs_little_and_one_far_past_it_much() {
        // A quick call preempted now and then on a loaded machine (α = 1): 1 ms to 2 s in
        // 20 000 units, the longest 2 s.
        let d = pareto_tail(20_000, 1.0);
        let max = d.max_ns;
        // 1.2 times the longest: about one normal recording in 1.2 has one.
        let near = d.once_in(max * 6 / 5);
        assert!((1.0..2.0).contains(&near), "{near}");
        // 100 times: about once in 100 recordings.
        let far = d.once_in(max * 100);
        assert!((50.0..200.0).contains(&far), "{far}");
        let weigh = |once_in: f64| {
            let call = SlowCall {
                key: crate::trees::test_key(1),
                dur_ns: 0,
                began_ns: 0,
                normal_max_ns: max,
                normal_calls: 20_000,
                normal_units: 20_000,
            };
            slow_score(0.0, &TooLong { call, once_in })
        };
        // The near one stays well below a node never seen in the 20 000 units; the far
        // one close to it; none above it.
        assert!(weigh(near) < 0.3, "{}", weigh(near));
        assert!(weigh(far) > 0.75, "{}", weigh(far));
        let never = 0.8 * crate::evidence::backing(20_000);
        assert_eq!(weigh(f64::INFINITY), never);
        // A tail that thins out fast (α = 4): 1.5 times past it is already strong.
        let t = pareto_tail(20_000, 4.0);
        assert!(
            t.once_in(t.max_ns * 3 / 2) > 3.0,
            "{}",
            t.once_in(t.max_ns * 3 / 2)
        );
        assert!(weigh(t.once_in(t.max_ns * 3)) > 0.75);
    }

    #[test]
    fn durations_in_words() {
        assert_eq!(describe_ns(1_000_000_000), "1.00 s");
        assert_eq!(describe_ns(300_000), "0.3 ms");
        assert_eq!(describe_ns(45_000_000), "45 ms");
        assert_eq!(describe_ns(12_000), "12 µs");
        assert_eq!(describe_ns(800), "800 ns");
    }
}
