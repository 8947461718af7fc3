//! Record-time settings of the hooks: the clock mode and the filters, read once from the
//! environment when the tracer starts (see `gcc-hooks/README.md` for the user's view).

use bufpool::format::FilterRecord;

/// Clock mode: `tsc` (default) or `sampled[:N]`.
pub const CLOCK_ENV: &str = "CULPRIT_CLOCK";
/// Comma-separated function names or globs whose own calls are not recorded.
pub const EXCLUDE_ENV: &str = "CULPRIT_EXCLUDE";
/// Comma-separated function names or globs whose calls, and everything they call, are
/// not recorded.
pub const EXCLUDE_TREE_ENV: &str = "CULPRIT_EXCLUDE_TREE";
/// Comma-separated source files (basename, path suffix or glob) whose functions' calls are
/// not recorded.
pub const EXCLUDE_FILE_ENV: &str = "CULPRIT_EXCLUDE_FILE";
/// Maximum recorded call depth (calls at depth ≥ N are not recorded; 0 = unlimited).
pub const DEPTH_ENV: &str = "CULPRIT_DEPTH";

/// Default sampling interval of [`ClockMode::Sampled`] (as a power of two: 16 events).
pub const DEFAULT_SAMPLE_SHIFT: u8 = 4;
/// Largest sampling interval (as a power of two: 4096 events).
pub const MAX_SAMPLE_SHIFT: u8 = 12;

/// How a hook event gets its timestamp.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClockMode {
    /// `rdtsc` for every event (exact; ~18 ns per read on the reference VM).
    Tsc,
    /// `rdtsc` on every 2^`shift`-th hook event of a thread, and on the first hook event
    /// after any other entry was written on the thread (a wrapped libc call, a new
    /// sub-buffer); in between, the previous timestamp + 1. Timestamps stay strictly
    /// increasing per thread and never run ahead of the true TSC; they lag it by at most
    /// the time the thread spent on the last 2^`shift` − 1 hook events, plus any time spent
    /// in calls that are neither instrumented nor wrapped (e.g. `nanosleep`) in between.
    Sampled {
        /// log2 of the sampling interval, 1 ..= [`MAX_SAMPLE_SHIFT`].
        shift: u8,
    },
}

impl ClockMode {
    /// Parses `tsc`, `sampled` or `sampled:N` (N a power of two from 2 to 4096).
    pub fn parse(s: &str) -> Result<ClockMode, String> {
        let s = s.trim();
        match s {
            "" | "tsc" => return Ok(ClockMode::Tsc),
            "sampled" => {
                return Ok(ClockMode::Sampled {
                    shift: DEFAULT_SAMPLE_SHIFT,
                })
            }
            _ => {}
        }
        let n = s
            .strip_prefix("sampled:")
            .ok_or_else(|| format!("{CLOCK_ENV}={s:?}: expected tsc, sampled or sampled:N"))?;
        let n: u32 = n
            .parse()
            .map_err(|_| format!("{CLOCK_ENV}={s:?}: N must be a number"))?;
        if !n.is_power_of_two() || !(2..=1 << MAX_SAMPLE_SHIFT).contains(&n) {
            return Err(format!(
                "{CLOCK_ENV}={s:?}: N must be a power of two from 2 to {}",
                1 << MAX_SAMPLE_SHIFT
            ));
        }
        Ok(ClockMode::Sampled {
            shift: n.trailing_zeros() as u8,
        })
    }

    /// The `clock_mode` byte of the trace's filter record: 0 for [`ClockMode::Tsc`], `k`
    /// for sampling every 2^k events.
    pub fn code(self) -> u8 {
        match self {
            ClockMode::Tsc => 0,
            ClockMode::Sampled { shift } => shift,
        }
    }

    /// Inverse of [`ClockMode::code`].
    pub fn from_code(c: u8) -> Option<ClockMode> {
        match c {
            0 => Some(ClockMode::Tsc),
            1..=MAX_SAMPLE_SHIFT => Some(ClockMode::Sampled { shift: c }),
            _ => None,
        }
    }
}

impl std::fmt::Display for ClockMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClockMode::Tsc => f.write_str("tsc"),
            ClockMode::Sampled { shift } => write!(f, "sampled:{}", 1u32 << shift),
        }
    }
}

/// Everything the hooks can be told at record time. The default records every call with
/// a full TSC timestamp.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HooksConfig {
    /// Clock mode (default [`ClockMode::Tsc`]).
    pub clock: ClockMode,
    /// Calls at depth ≥ this are not recorded (0 = unlimited, the default). Depth counts
    /// instrumented calls on the thread since recording started, from 0.
    pub depth_limit: u32,
    /// Functions (names or globs) whose own calls are not recorded.
    pub exclude: Vec<String>,
    /// Functions (names or globs) whose calls and everything below are not recorded.
    pub exclude_tree: Vec<String>,
    /// Source files (basename, path suffix or glob) whose functions are not recorded.
    pub exclude_files: Vec<String>,
}

impl Default for HooksConfig {
    fn default() -> Self {
        HooksConfig {
            clock: ClockMode::Tsc,
            depth_limit: 0,
            exclude: Vec::new(),
            exclude_tree: Vec::new(),
            exclude_files: Vec::new(),
        }
    }
}

fn split_list(s: &str) -> Vec<String> {
    s.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect()
}

impl HooksConfig {
    /// Reads the settings from the process environment. Invalid values are reported in
    /// the returned warnings and replaced by the default (recording must go on).
    pub fn from_env() -> (HooksConfig, Vec<String>) {
        Self::from_vars(|k| std::env::var(k).ok())
    }

    /// Reads the settings through `get` (the environment, or a map in tests).
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> (HooksConfig, Vec<String>) {
        let mut cfg = HooksConfig::default();
        let mut warnings = Vec::new();
        if let Some(v) = get(CLOCK_ENV) {
            match ClockMode::parse(&v) {
                Ok(c) => cfg.clock = c,
                Err(e) => warnings.push(format!("{e}; using tsc")),
            }
        }
        if let Some(v) = get(DEPTH_ENV) {
            match v.trim().parse::<u32>() {
                Ok(d) => cfg.depth_limit = d,
                Err(_) => warnings.push(format!("{DEPTH_ENV}={v:?}: not a number; no depth limit")),
            }
        }
        if let Some(v) = get(EXCLUDE_ENV) {
            cfg.exclude = split_list(&v);
        }
        if let Some(v) = get(EXCLUDE_TREE_ENV) {
            cfg.exclude_tree = split_list(&v);
        }
        if let Some(v) = get(EXCLUDE_FILE_ENV) {
            cfg.exclude_files = split_list(&v);
        }
        (cfg, warnings)
    }

    /// True if some exclusion pattern is set.
    pub fn has_exclusions(&self) -> bool {
        !(self.exclude.is_empty() && self.exclude_tree.is_empty() && self.exclude_files.is_empty())
    }

    /// The filter record written into the trace: depth limit, clock mode, and the
    /// exclusions as `fn=a,b;tree=c;file=d.c` (only the non-empty parts), followed by
    /// `;resolved=N` — how many function addresses the patterns matched.
    pub fn filter_record(&self, resolved: usize) -> FilterRecord {
        let mut parts = Vec::new();
        for (tag, list) in [
            ("fn", &self.exclude),
            ("tree", &self.exclude_tree),
            ("file", &self.exclude_files),
        ] {
            if !list.is_empty() {
                parts.push(format!("{tag}={}", list.join(",")));
            }
        }
        if self.has_exclusions() {
            parts.push(format!("resolved={resolved}"));
        }
        FilterRecord {
            depth_limit: self.depth_limit,
            clock_mode: self.clock.code(),
            excluded: parts.join(";").into_bytes(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn clock_modes_parse_and_round_trip() {
        assert_eq!(ClockMode::parse("tsc"), Ok(ClockMode::Tsc));
        assert_eq!(
            ClockMode::parse("sampled"),
            Ok(ClockMode::Sampled {
                shift: DEFAULT_SAMPLE_SHIFT
            })
        );
        assert_eq!(
            ClockMode::parse("sampled:64"),
            Ok(ClockMode::Sampled { shift: 6 })
        );
        for bad in [
            "sampled:3",
            "sampled:1",
            "sampled:8192",
            "sampled:x",
            "coarse",
        ] {
            assert!(ClockMode::parse(bad).is_err(), "{bad}");
        }
        for c in 0..=MAX_SAMPLE_SHIFT {
            assert_eq!(ClockMode::from_code(c).map(ClockMode::code), Some(c));
        }
        assert_eq!(ClockMode::from_code(MAX_SAMPLE_SHIFT + 1), None);
        assert_eq!(ClockMode::Sampled { shift: 5 }.to_string(), "sampled:32");
    }

    #[test]
    fn env_is_read_and_bad_values_warn() {
        let env: HashMap<&str, &str> = [
            (CLOCK_ENV, "sampled:8"),
            (DEPTH_ENV, "3"),
            (EXCLUDE_ENV, " a, b* ,,"),
            (EXCLUDE_FILE_ENV, "util.c"),
        ]
        .into_iter()
        .collect();
        let (cfg, w) = HooksConfig::from_vars(|k| env.get(k).map(|s| s.to_string()));
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(cfg.clock, ClockMode::Sampled { shift: 3 });
        assert_eq!(cfg.depth_limit, 3);
        assert_eq!(cfg.exclude, ["a", "b*"]);
        assert!(cfg.exclude_tree.is_empty());
        let r = cfg.filter_record(7);
        assert_eq!(r.depth_limit, 3);
        assert_eq!(r.clock_mode, 3);
        assert_eq!(r.excluded, b"fn=a,b*;file=util.c;resolved=7");

        let (cfg, w) = HooksConfig::from_vars(|k| match k {
            CLOCK_ENV => Some("fast".into()),
            DEPTH_ENV => Some("deep".into()),
            _ => None,
        });
        assert_eq!(cfg, HooksConfig::default());
        assert_eq!(w.len(), 2);
        assert!(HooksConfig::default().filter_record(0).excluded.is_empty());
    }
}
