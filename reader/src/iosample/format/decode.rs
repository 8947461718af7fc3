//! Decoding: record bodies, and a whole file read back with its damaged parts skipped.

use super::{
    kind, BacklogRecord, Counters, DiskLine, DiskRecord, EndRecord, ExitRecord, ExitSource,
    FdClass, FdGroup, FdsRecord, FormatError, IntakeRecord, ProcRecord, Record, SampleRecord,
    SpanRecord, HEADER_LEN, MAGIC, MAX_RECORD, VERSION,
};
use serde::Serialize;
use std::path::Path;

struct Cur<'a> {
    b: &'a [u8],
    at: usize,
}

impl Cur<'_> {
    fn v(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *self.b.get(self.at)?;
            self.at += 1;
            v |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }

    fn u32(&mut self) -> Option<u32> {
        u32::try_from(self.v()?).ok()
    }

    fn s(&mut self) -> Option<String> {
        let n = usize::try_from(self.v()?).ok()?;
        let end = self.at.checked_add(n)?;
        let s = self.b.get(self.at..end)?;
        self.at = end;
        Some(String::from_utf8_lossy(s).into_owned())
    }

    fn counters(&mut self) -> Option<Counters> {
        let mut a = [0u64; 7];
        for x in &mut a {
            *x = self.v()?;
        }
        Some(Counters::from_array(a))
    }

    fn count(&mut self) -> Option<usize> {
        // Each element takes at least one byte: a count larger than what is left is damage.
        let n = usize::try_from(self.v()?).ok()?;
        (n <= self.b.len() - self.at).then_some(n)
    }
}

/// Decodes one record body; `None` if it is malformed, `Some(None)` for an unknown kind.
pub fn decode(k: u8, body: &[u8]) -> Option<Option<Record>> {
    let mut c = Cur { b: body, at: 0 };
    let r = match k {
        kind::META => Record::Meta(serde_json::from_str(&c.s()?).ok()?),
        kind::PROC => Record::Proc(ProcRecord {
            pid: c.u32()?,
            ppid: c.u32()?,
            uid: c.u32()?,
            start_ticks: c.v()?,
            flags: c.v()?,
            comm: c.s()?,
            exe: c.s()?,
            cmdline: c.s()?,
        }),
        kind::SAMPLE => {
            let mut s = SampleRecord {
                seq: c.v()?,
                deadline_mono_ns: c.v()?,
                mono_ns: c.v()?,
                unix_ns: c.v()?,
                took_ns: c.v()?,
                changed: Vec::new(),
            };
            let n = c.count()?;
            s.changed.reserve(n);
            for _ in 0..n {
                s.changed.push((c.u32()?, c.counters()?));
            }
            Record::Sample(s)
        }
        kind::EXIT => Record::Exit(ExitRecord {
            pid: c.u32()?,
            ppid: c.u32()?,
            source: match c.v()? {
                1 => ExitSource::Taskstats,
                _ => ExitSource::LastSample,
            },
            mono_ns: c.v()?,
            unix_ns: c.v()?,
            counters: c.counters()?,
            comm: c.s()?,
        }),
        kind::DISK => {
            let seq = c.v()?;
            let n = c.count()?;
            let mut lines = Vec::with_capacity(n);
            for _ in 0..n {
                lines.push(DiskLine {
                    name: c.s()?,
                    reads: c.v()?,
                    sectors_read: c.v()?,
                    writes: c.v()?,
                    sectors_written: c.v()?,
                    io_ms: c.v()?,
                });
            }
            Record::Disk(DiskRecord { seq, lines })
        }
        kind::FDS => {
            let pid = c.u32()?;
            let mono_ns = c.v()?;
            let n = c.count()?;
            let mut groups = Vec::with_capacity(n);
            for _ in 0..n {
                groups.push(FdGroup {
                    class: FdClass::from_code(c.v()?),
                    shared: c.v()? != 0,
                    place: c.s()?,
                    count: c.v()?,
                });
            }
            Record::Fds(FdsRecord {
                pid,
                mono_ns,
                groups,
            })
        }
        kind::NOTE => Record::Note(c.s()?),
        kind::END => Record::End(EndRecord {
            samples: c.v()?,
            missed: c.v()?,
            jitter_p50_ns: c.v()?,
            jitter_p99_ns: c.v()?,
            jitter_max_ns: c.v()?,
        }),
        kind::SPAN => {
            let seq = c.v()?;
            let n = c.count()?;
            let mut since = Vec::with_capacity(n);
            for _ in 0..n {
                since.push((c.u32()?, c.v()?));
            }
            Record::Span(SpanRecord { seq, since })
        }
        kind::BACKLOG => {
            let seq = c.v()?;
            let n = c.count()?;
            let mut changed = Vec::with_capacity(n);
            for _ in 0..n {
                changed.push((c.u32()?, c.v()?, c.v()?));
            }
            Record::Backlog(BacklogRecord { seq, changed })
        }
        kind::INTAKE => {
            let seq = c.v()?;
            let n = c.count()?;
            let mut changed = Vec::with_capacity(n);
            for _ in 0..n {
                changed.push((c.u32()?, c.v()?, c.v()?));
            }
            Record::Intake(IntakeRecord { seq, changed })
        }
        _ => return Some(None),
    };
    Some(Some(r))
}

/// What of a file could not be read: damaged records skipped (each costs only itself:
/// reading resumes at the next record that frames and checks) and a cut tail.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Tail {
    /// Offset of the first damaged or cut part, if any.
    pub damaged_at: Option<u64>,
    /// Bytes ignored in all (every damaged part, and a cut tail).
    pub ignored_bytes: u64,
    /// Why the first part was ignored: `truncated record`, `bad CRC`, `bad record
    /// length`, `malformed record body`.
    pub why: Option<String>,
    /// Damaged or cut parts skipped (0 or 1 for a file only cut short).
    pub parts: u64,
}

impl Tail {
    /// In words, if anything was ignored: the first part and why, how many parts, how
    /// many bytes.
    pub fn describe(&self) -> Option<String> {
        let why = self.why.as_ref()?;
        Some(format!(
            "{why} at byte {}{}: {} bytes ignored",
            self.damaged_at.unwrap_or(0),
            if self.parts > 1 {
                format!(" ({} damaged parts skipped in all)", self.parts)
            } else {
                String::new()
            },
            self.ignored_bytes
        ))
    }

    fn skip(&mut self, at: usize, bytes: usize, why: &str) {
        if self.damaged_at.is_none() {
            self.damaged_at = Some(at as u64);
            self.why = Some(why.to_string());
        }
        self.ignored_bytes += bytes as u64;
        self.parts += 1;
    }
}

/// The record at `at`, if one frames there (length in range, all of it in `bytes`),
/// checks (CRC) and decodes: its end, and the record (`None`: a kind this reader does not
/// know). Else why not.
#[allow(clippy::type_complexity)]
fn record_at(bytes: &[u8], at: usize) -> Result<(usize, Option<Record>), &'static str> {
    let Some(len) = bytes.get(at..at + 4) else {
        return Err("truncated record");
    };
    let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]);
    if len == 0 || len > MAX_RECORD {
        return Err("bad record length");
    }
    let end = at + 4 + len as usize + 4;
    if end > bytes.len() {
        return Err("truncated record");
    }
    let payload = &bytes[at + 4..end - 4];
    let crc = u32::from_le_bytes([
        bytes[end - 4],
        bytes[end - 3],
        bytes[end - 2],
        bytes[end - 1],
    ]);
    if crc32fast::hash(payload) != crc {
        return Err("bad CRC");
    }
    match decode(payload[0], &payload[1..]) {
        None => Err("malformed record body"),
        Some(r) => Ok((end, r)),
    }
}

/// The next offset after `from` where a whole record frames, checks and decodes (see
/// [`record_at`]), if any; `budget` bounds the bytes checksummed on the way (a file of
/// lengths that all fit must not make the search quadratic).
fn resync(bytes: &[u8], from: usize, budget: &mut u64) -> Option<usize> {
    for at in from..bytes.len().saturating_sub(8) {
        let len = u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
        if len == 0 || len > MAX_RECORD || at + 8 + len as usize > bytes.len() {
            continue;
        }
        *budget = budget.checked_sub(u64::from(len))?;
        if record_at(bytes, at).is_ok() {
            return Some(at);
        }
    }
    None
}

/// Reads every whole record of an IO-sample file, in order. A damaged or truncated tail ends
/// the read: it is described in the returned [`Tail`], and the records before it are kept.
/// A regular file of at most [`MAX_SAMPLE_FILE_BYTES`], checked before reading (never a
/// FIFO, a device or a sparse giant: `crate::safefile`).
pub fn read_records(path: &Path) -> Result<(Vec<Record>, Tail), FormatError> {
    let bytes =
        crate::safefile::read_bounded(path, MAX_SAMPLE_FILE_BYTES).map_err(|e| match e {
            crate::Error::Io { source, .. } => FormatError::Io {
                path: path.to_path_buf(),
                what: "cannot read",
                source,
            },
            crate::Error::NotRegular { kind, .. } => FormatError::NotSampleFile {
                path: path.to_path_buf(),
                why: format!("{kind}, not a regular file"),
            },
            other => FormatError::NotSampleFile {
                path: path.to_path_buf(),
                why: other
                    .to_string()
                    .trim_start_matches(&format!("{}: ", path.display()))
                    .to_string(),
            },
        })?;
    parse_records(path, &bytes)
}

/// The largest IO-sample file read (4 GiB: some 100 million samples of a process).
pub const MAX_SAMPLE_FILE_BYTES: u64 = 4 << 30;

/// [`read_records`] over bytes already in memory (`path` names them in errors).
pub fn parse_records(path: &Path, bytes: &[u8]) -> Result<(Vec<Record>, Tail), FormatError> {
    let not = |why: String| FormatError::NotSampleFile {
        path: path.to_path_buf(),
        why,
    };
    if bytes.len() < HEADER_LEN {
        return Err(not(format!(
            "{} bytes, shorter than the {HEADER_LEN}-byte header",
            bytes.len()
        )));
    }
    if &bytes[..8] != MAGIC {
        return Err(not("bad magic (expected CULPIOS)".into()));
    }
    let version = u16::from_le_bytes([bytes[8], bytes[9]]);
    if version != VERSION {
        return Err(not(format!(
            "version {version}; this culprit reads version {VERSION}"
        )));
    }
    let mut out = Vec::new();
    let mut at = HEADER_LEN;
    let mut tail = Tail::default();
    // Checksumming while looking for the next record after damage: at most 16 times the
    // file (each byte is the start of at most a few candidates that frame).
    let mut budget = 16 * bytes.len() as u64 + (1 << 20);
    while at < bytes.len() {
        match record_at(bytes, at) {
            Ok((end, r)) => {
                out.extend(r);
                at = end;
            }
            // A record cut by the end of the file: what a writer being killed, or still
            // writing, leaves. Nothing whole follows it.
            Err(why @ "truncated record") if resync(bytes, at + 1, &mut budget).is_none() => {
                tail.skip(at, bytes.len() - at, why);
                break;
            }
            // Damage: skip to the next record that frames and checks; a sample costs only
            // itself (CRC-32 makes a false start about 1 in 4 billion).
            Err(why) => match resync(bytes, at + 1, &mut budget) {
                Some(next) => {
                    tail.skip(at, next - at, why);
                    at = next;
                }
                None => {
                    tail.skip(at, bytes.len() - at, why);
                    break;
                }
            },
        }
    }
    Ok((out, tail))
}
