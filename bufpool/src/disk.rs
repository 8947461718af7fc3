//! The on-disk layout of a trace directory: what a reader writes and every tool reads.
//!
//! A reader drains sub-buffers from the pool and appends each one, exactly as it was in
//! the pool (its [`SubBufInfo`] header and its committed entries), to a *chunk file*.
//! The directory is:
//!
//! ```text
//! DIR/manifest.json                         what was recorded (JSON, see below)
//! DIR/chunks/<reader pid>-<worker>-<start ns>.chunk   one file per drain thread and run
//! ```
//!
//! A chunk file is little-endian and has no alignment requirement:
//!
//! ```text
//! offset 0   ChunkHeader (32 bytes): magic "CULPCHK\x01", version u32 (= CHUNK_VERSION),
//!            header_size u32 (= 32), created_unix_ns u64, reader pid u32,
//!            format_version u32 (= crate::layout::FORMAT_VERSION, of the entries inside)
//! then, back to back, records:
//!            RecordHeader (16 bytes): magic u32 "CREC", data_len u32,
//!                                     crc32 u32 (of the info and data bytes), piece u32
//!            SubBufInfo (64 bytes, the pool's sub-buffer header; see crate::layout)
//!            data (data_len bytes: whole entries, see crate::format)
//! ```
//!
//! `data_len` always equals `info.bytes_used`. A record holds a whole sub-buffer
//! (`piece` = 0, no [`crate::layout::FLAG_LIVE`]) or, since chunk version 2, one *piece*
//! of it: the entries at byte offsets `piece .. piece + data_len` of its data area, saved
//! while its writer was still filling it (see [`crate::live`]); the pieces of one
//! sub-buffer share its identity (pid, start time, tid, seq, first TSC) and follow each
//! other without gaps or overlaps, the last one without `FLAG_LIVE`. Only the piece at
//! offset 0 carries the sub-buffer's `lost_before`. The checksum is the CRC-32 of IEEE
//! 802.3 (the one of zlib and gzip) over the 64 info bytes followed by the data (and,
//! when `piece` is not 0, its 4 bytes), so a torn write
//! (a reader killed in the middle of a record) or a damaged file is detected, never
//! decoded as garbage. A reader writes a record before it releases the sub-buffer; if it
//! dies in between, the sub-buffer goes back to the written set and is saved again, so a
//! directory may hold the same sub-buffer twice: readers of a trace deduplicate by
//! (pid, start time, tid, seq, first TSC). A reader that resumes a directory first cuts
//! torn records off the end of existing chunk files ([`valid_prefix`]).
//!
//! `manifest.json` (written by the `reader` crate, which owns its schema) holds the host,
//! the recorded command, start and end times, the pool's [`crate::Calibration`] and
//! geometry, one entry per process (pid, ppid, start time, exe, argv, threads, entries,
//! bytes, lost) and the totals. It is written when a reader starts (`"complete": false`)
//! and rewritten atomically (write to a temporary file, rename) when it finishes.

use crate::layout::SubBufInfo;
use bytemuck::{Pod, Zeroable};
use std::path::PathBuf;

/// Magic at offset 0 of a chunk file.
pub const CHUNK_MAGIC: [u8; 8] = *b"CULPCHK\x01";
/// Version of the chunk file layout written: 2 = records may be pieces of a sub-buffer
/// (the record header's `piece` offset, which version 1 kept at 0).
pub const CHUNK_VERSION: u32 = 2;
/// Oldest chunk file layout read (a version 1 file is a version 2 file whose records are
/// all whole sub-buffers).
pub const CHUNK_VERSION_MIN: u32 = 1;
/// Size of [`ChunkHeader`].
pub const CHUNK_HEADER_SIZE: usize = 32;
/// Magic of a record.
pub const RECORD_MAGIC: u32 = u32::from_le_bytes(*b"CREC");
/// Size of [`RecordHeader`].
pub const RECORD_HEADER_SIZE: usize = 16;
/// Size of a record's fixed part (record header + sub-buffer info).
pub const RECORD_FIXED_SIZE: usize = RECORD_HEADER_SIZE + INFO_SIZE;
/// Size of the [`SubBufInfo`] in a record.
pub const INFO_SIZE: usize = core::mem::size_of::<SubBufInfo>();
/// Largest `data_len` accepted (the largest sub-buffer data area: 1 GiB − 64).
pub const MAX_RECORD_DATA: u32 = (1 << 30) - crate::layout::SUBBUF_HEADER as u32;
/// Name of the manifest file in a trace directory.
pub const MANIFEST_FILE: &str = "manifest.json";
/// Name of the sub-directory holding chunk files.
pub const CHUNK_DIR: &str = "chunks";
/// Extension of chunk files.
pub const CHUNK_EXT: &str = "chunk";

/// Header of a chunk file.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct ChunkHeader {
    /// [`CHUNK_MAGIC`].
    pub magic: [u8; 8],
    /// [`CHUNK_VERSION`].
    pub version: u32,
    /// [`CHUNK_HEADER_SIZE`].
    pub header_size: u32,
    /// When the file was created (`CLOCK_REALTIME` ns).
    pub created_unix_ns: u64,
    /// Pid of the reader that wrote it.
    pub reader_pid: u32,
    /// [`crate::layout::FORMAT_VERSION`] of the entries and sub-buffer headers inside.
    pub format_version: u32,
}

const _: () = assert!(core::mem::size_of::<ChunkHeader>() == CHUNK_HEADER_SIZE);

impl ChunkHeader {
    /// A header for a new chunk file.
    pub fn new(reader_pid: u32, created_unix_ns: u64) -> ChunkHeader {
        ChunkHeader {
            magic: CHUNK_MAGIC,
            version: CHUNK_VERSION,
            header_size: CHUNK_HEADER_SIZE as u32,
            created_unix_ns,
            reader_pid,
            format_version: crate::layout::FORMAT_VERSION,
        }
    }
}

/// Header of one record.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct RecordHeader {
    /// [`RECORD_MAGIC`].
    pub magic: u32,
    /// Bytes of entry data after the info.
    pub data_len: u32,
    /// CRC-32 of the info and data bytes (and of `piece`, when it is not 0).
    pub crc32: u32,
    /// Offset of this record's first data byte in the sub-buffer's data area: 0 for a
    /// whole sub-buffer or its first piece (chunk version 1: always 0).
    pub piece: u32,
}

const _: () = assert!(core::mem::size_of::<RecordHeader>() == RECORD_HEADER_SIZE);

/// The name of a chunk file: `<reader pid>-<worker>-<start ns>.chunk`.
pub fn chunk_file_name(reader_pid: u32, worker: u32, start_unix_ns: u64) -> String {
    format!("{reader_pid}-{worker}-{start_unix_ns}.{CHUNK_EXT}")
}

/// Appends one encoded record (header, info, data) holding a whole sub-buffer to `out`.
pub fn encode_record(info: &SubBufInfo, data: &[u8], out: &mut Vec<u8>) {
    encode_piece(info, 0, data, out);
}

/// The checksum of a record: CRC-32 of the info bytes, the data, and `piece` (4 bytes,
/// little-endian) when it is not 0 — so a version 1 record checks as it always did.
fn record_crc(info: &SubBufInfo, piece: u32, data: &[u8]) -> u32 {
    let mut crc = Crc32::new();
    crc.update(bytemuck::bytes_of(info));
    crc.update(data);
    if piece != 0 {
        crc.update(&piece.to_le_bytes());
    }
    crc.finish()
}

/// Appends one encoded record to `out`: the entries at offsets `piece .. piece +
/// data.len()` of a sub-buffer's data area (`piece` = 0 and the whole data for a whole
/// sub-buffer). `info.bytes_used` is set to the data's length.
pub fn encode_piece(info: &SubBufInfo, piece: u32, data: &[u8], out: &mut Vec<u8>) {
    let mut info = *info;
    info.bytes_used = data.len() as u32;
    let ib = bytemuck::bytes_of(&info);
    let h = RecordHeader {
        magic: RECORD_MAGIC,
        data_len: data.len() as u32,
        crc32: record_crc(&info, piece, data),
        piece,
    };
    out.reserve(RECORD_FIXED_SIZE + data.len());
    out.extend_from_slice(bytemuck::bytes_of(&h));
    out.extend_from_slice(ib);
    out.extend_from_slice(data);
}

/// What is wrong in a chunk file.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ChunkErrorKind {
    /// The file header is missing or wrong.
    #[error("not a Culprit chunk file: {0}")]
    BadFileHeader(String),
    /// The file ends in the middle of a record (a reader was killed mid-write, or the
    /// file was truncated).
    #[error("record truncated: needs {need} bytes, the file has {have} left")]
    Truncated {
        /// Bytes the record needs.
        need: u64,
        /// Bytes left in the file.
        have: u64,
    },
    /// A record does not start with [`RECORD_MAGIC`].
    #[error("bad record magic 0x{0:08x}")]
    BadRecordMagic(u32),
    /// A record's checksum does not match its contents.
    #[error("checksum mismatch: stored 0x{stored:08x}, computed 0x{computed:08x}")]
    Checksum {
        /// Stored in the record header.
        stored: u32,
        /// Computed over the record.
        computed: u32,
    },
    /// A record's fields contradict each other.
    #[error("inconsistent record: {0}")]
    Inconsistent(String),
}

/// An error at a byte offset of a chunk file.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("at byte offset {offset}: {kind}")]
pub struct ChunkError {
    /// Offset of the record (or 0 for the file header).
    pub offset: u64,
    /// What is wrong.
    pub kind: ChunkErrorKind,
}

/// An error reading or writing a trace directory, naming the file.
#[derive(Debug, thiserror::Error)]
pub enum DiskError {
    /// An I/O error.
    #[error("{path}: {what}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What was being done.
        what: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// A chunk file is damaged.
    #[error("{path}: {err}")]
    Chunk {
        /// The file.
        path: PathBuf,
        /// What is wrong, and where.
        err: ChunkError,
    },
}

/// Checks a chunk file header (the first [`CHUNK_HEADER_SIZE`] bytes, or fewer if the
/// file is shorter).
pub fn parse_chunk_header(bytes: &[u8]) -> Result<ChunkHeader, ChunkError> {
    let bad = |m: String| ChunkError {
        offset: 0,
        kind: ChunkErrorKind::BadFileHeader(m),
    };
    if bytes.len() < CHUNK_HEADER_SIZE {
        return Err(bad(format!(
            "{} bytes, shorter than the {CHUNK_HEADER_SIZE}-byte file header",
            bytes.len()
        )));
    }
    let h: ChunkHeader = bytemuck::pod_read_unaligned(&bytes[..CHUNK_HEADER_SIZE]);
    if h.magic != CHUNK_MAGIC {
        return Err(bad(format!("bad magic {:02x?}", h.magic)));
    }
    if !(CHUNK_VERSION_MIN..=CHUNK_VERSION).contains(&h.version) {
        return Err(bad(format!(
            "chunk version {} (this build reads versions {CHUNK_VERSION_MIN} to {CHUNK_VERSION})",
            h.version
        )));
    }
    if h.header_size != CHUNK_HEADER_SIZE as u32 {
        return Err(bad(format!("header size {}", h.header_size)));
    }
    if h.format_version != crate::layout::FORMAT_VERSION {
        return Err(bad(format!(
            "entries of format version {} (this build reads version {})",
            h.format_version,
            crate::layout::FORMAT_VERSION
        )));
    }
    Ok(h)
}

/// Parses the fixed part (record header + info) of the record at `offset`, given its
/// first [`RECORD_FIXED_SIZE`] bytes (or fewer, at the end of the file) and how many
/// bytes of the file are left from `offset`. Checks everything but the checksum.
pub fn parse_record_fixed(
    fixed: &[u8],
    offset: u64,
    left: u64,
) -> Result<(RecordHeader, SubBufInfo), ChunkError> {
    let err = |kind| ChunkError { offset, kind };
    if (fixed.len() as u64) < RECORD_HEADER_SIZE as u64 || left < RECORD_FIXED_SIZE as u64 {
        return Err(err(ChunkErrorKind::Truncated {
            need: RECORD_FIXED_SIZE as u64,
            have: left,
        }));
    }
    let h: RecordHeader = bytemuck::pod_read_unaligned(&fixed[..RECORD_HEADER_SIZE]);
    if h.magic != RECORD_MAGIC {
        return Err(err(ChunkErrorKind::BadRecordMagic(h.magic)));
    }
    if fixed.len() < RECORD_FIXED_SIZE {
        return Err(err(ChunkErrorKind::Truncated {
            need: RECORD_FIXED_SIZE as u64,
            have: fixed.len() as u64,
        }));
    }
    let info: SubBufInfo = bytemuck::pod_read_unaligned(&fixed[RECORD_HEADER_SIZE..]);
    let need = RECORD_FIXED_SIZE as u64 + h.data_len as u64;
    if h.data_len > MAX_RECORD_DATA {
        return Err(err(ChunkErrorKind::Inconsistent(format!(
            "data length {} exceeds the largest sub-buffer",
            h.data_len
        ))));
    }
    if left < need {
        return Err(err(ChunkErrorKind::Truncated { need, have: left }));
    }
    if info.magic != crate::layout::SUBBUF_MAGIC {
        return Err(err(ChunkErrorKind::Inconsistent(format!(
            "sub-buffer magic 0x{:08x}",
            info.magic
        ))));
    }
    if info.bytes_used != h.data_len || info.bytes_used > info.data_size {
        return Err(err(ChunkErrorKind::Inconsistent(format!(
            "data length {} but the sub-buffer says {} used of {}",
            h.data_len, info.bytes_used, info.data_size
        ))));
    }
    if u64::from(h.piece) + u64::from(h.data_len) > u64::from(info.data_size) {
        return Err(err(ChunkErrorKind::Inconsistent(format!(
            "piece at offset {} of {} bytes overruns the {}-byte sub-buffer",
            h.piece, h.data_len, info.data_size
        ))));
    }
    Ok((h, info))
}

/// Verifies a record's checksum given its info and data bytes.
pub fn check_record(
    h: &RecordHeader,
    info: &SubBufInfo,
    data: &[u8],
    offset: u64,
) -> Result<(), ChunkError> {
    let computed = record_crc(info, h.piece, data);
    if computed != h.crc32 {
        return Err(ChunkError {
            offset,
            kind: ChunkErrorKind::Checksum {
                stored: h.crc32,
                computed,
            },
        });
    }
    Ok(())
}

/// One record of a chunk file held in memory.
#[derive(Clone, Copy, Debug)]
pub struct RecordRef<'a> {
    /// Offset of the record in the file.
    pub offset: u64,
    /// Offset of its data in the sub-buffer (0 for a whole sub-buffer, see
    /// [`RecordHeader::piece`]).
    pub piece: u32,
    /// The sub-buffer header.
    pub info: SubBufInfo,
    /// The entries.
    pub data: &'a [u8],
}

impl RecordRef<'_> {
    /// File offset of the first data byte (for decode error positions).
    pub fn data_offset(&self) -> u64 {
        self.offset + RECORD_FIXED_SIZE as u64
    }
}

/// Iterates over the records of a whole chunk file in memory (header included). After
/// the first error it yields nothing.
pub struct Records<'a> {
    buf: &'a [u8],
    pos: usize,
    failed: bool,
}

/// Parses a chunk file held in memory.
pub fn records(file: &[u8]) -> Records<'_> {
    Records {
        buf: file,
        pos: 0,
        failed: false,
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<RecordRef<'a>, ChunkError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        if self.pos == 0 {
            if let Err(e) = parse_chunk_header(self.buf) {
                self.failed = true;
                return Some(Err(e));
            }
            self.pos = CHUNK_HEADER_SIZE;
        }
        if self.pos >= self.buf.len() {
            return None;
        }
        let off = self.pos as u64;
        let rest = &self.buf[self.pos..];
        let fixed = &rest[..rest.len().min(RECORD_FIXED_SIZE)];
        let r = parse_record_fixed(fixed, off, rest.len() as u64).and_then(|(h, info)| {
            let data = &rest[RECORD_FIXED_SIZE..RECORD_FIXED_SIZE + h.data_len as usize];
            check_record(&h, &info, data, off)?;
            Ok(RecordRef {
                offset: off,
                piece: h.piece,
                info,
                data,
            })
        });
        match r {
            Ok(rec) => {
                self.pos += RECORD_FIXED_SIZE + rec.data.len();
                Some(Ok(rec))
            }
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

/// The length of the longest prefix of a chunk file made of a valid header and whole,
/// valid records, and the error that ends it (if any). A reader resuming a directory
/// truncates a file to this length when the error is a torn last record.
pub fn valid_prefix(file: &[u8]) -> (usize, Option<ChunkError>) {
    if let Err(e) = parse_chunk_header(file) {
        return (0, Some(e));
    }
    let mut end = CHUNK_HEADER_SIZE;
    for r in records(file) {
        match r {
            Ok(rec) => end = rec.offset as usize + RECORD_FIXED_SIZE + rec.data.len(),
            Err(e) => return (end, Some(e)),
        }
    }
    (end, None)
}

/// Incremental CRC-32 (IEEE 802.3, reflected, polynomial 0xEDB88320): the `crc32fast`
/// crate, which folds with `PCLMULQDQ` where the CPU has it (about 10× a table-driven loop)
/// and slices by 16 elsewhere.
#[derive(Clone, Debug, Default)]
pub struct Crc32(crc32fast::Hasher);

impl Crc32 {
    /// A fresh checksum.
    pub fn new() -> Crc32 {
        Crc32(crc32fast::Hasher::new())
    }

    /// Feeds bytes.
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    /// The checksum of everything fed so far.
    pub fn finish(&self) -> u32 {
        self.0.clone().finalize()
    }
}

/// CRC-32 of one byte slice.
pub fn crc32(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(seq: u64, used: u32) -> SubBufInfo {
        SubBufInfo {
            magic: crate::layout::SUBBUF_MAGIC,
            pid: 10,
            tid: 11,
            seq,
            bytes_used: used,
            data_size: 8192 - 64,
            ..Default::default()
        }
    }

    fn file(recs: &[(SubBufInfo, Vec<u8>)]) -> Vec<u8> {
        let mut f = bytemuck::bytes_of(&ChunkHeader::new(1, 2)).to_vec();
        for (i, d) in recs {
            encode_record(i, d, &mut f);
        }
        f
    }

    #[test]
    fn crc32_matches_the_standard_check_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
        // Agrees with the bit-by-bit definition at every length and split.
        let data: Vec<u8> = (0..200u32).map(|i| (i * 7 + 3) as u8).collect();
        let slow = |d: &[u8]| {
            let mut c = 0xFFFF_FFFFu32;
            for &b in d {
                c ^= b as u32;
                for _ in 0..8 {
                    c = if c & 1 != 0 {
                        0xEDB8_8320 ^ (c >> 1)
                    } else {
                        c >> 1
                    };
                }
            }
            c ^ 0xFFFF_FFFF
        };
        for n in 0..data.len() {
            assert_eq!(crc32(&data[..n]), slow(&data[..n]), "length {n}");
            let mut c = Crc32::new();
            c.update(&data[..n / 3]);
            c.update(&data[n / 3..n]);
            assert_eq!(c.finish(), slow(&data[..n]), "split {n}");
        }
    }

    #[test]
    fn records_round_trip() {
        let f = file(&[(info(0, 3), vec![1, 2, 3]), (info(1, 0), vec![])]);
        let got: Vec<_> = records(&f).collect::<Result<_, _>>().unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].data, &[1, 2, 3]);
        assert_eq!(got[0].info.seq, 0);
        assert_eq!(got[1].info.seq, 1);
        assert_eq!(
            got[1].offset,
            (CHUNK_HEADER_SIZE + RECORD_FIXED_SIZE + 3) as u64
        );
        assert_eq!(valid_prefix(&f), (f.len(), None));
    }

    #[test]
    fn every_truncation_is_detected() {
        let f = file(&[(info(0, 5), vec![9; 5]), (info(1, 7), vec![8; 7])]);
        let first_end = CHUNK_HEADER_SIZE + RECORD_FIXED_SIZE + 5;
        for cut in 0..f.len() {
            let part = &f[..cut];
            let res: Result<Vec<_>, _> = records(part).collect();
            if cut == CHUNK_HEADER_SIZE || cut == first_end {
                assert!(res.is_ok(), "cut {cut}");
                continue;
            }
            let e = res.unwrap_err();
            if cut < CHUNK_HEADER_SIZE {
                assert!(matches!(e.kind, ChunkErrorKind::BadFileHeader(_)), "{e}");
            } else {
                assert!(
                    matches!(e.kind, ChunkErrorKind::Truncated { .. }),
                    "{cut}: {e}"
                );
                let want = if cut < first_end {
                    CHUNK_HEADER_SIZE
                } else {
                    first_end
                };
                assert_eq!(e.offset as usize, want);
                assert_eq!(valid_prefix(part).0, want);
            }
        }
    }

    #[test]
    fn every_flipped_bit_is_detected() {
        let f = file(&[(info(0, 6), vec![1, 2, 3, 4, 5, 6])]);
        for byte in CHUNK_HEADER_SIZE..f.len() {
            for bit in 0..8 {
                let mut g = f.clone();
                g[byte] ^= 1 << bit;
                let res: Result<Vec<_>, _> = records(&g).collect();
                assert!(res.is_err(), "flip {byte}:{bit} undetected");
            }
        }
    }

    #[test]
    fn pieces_round_trip_and_their_offset_is_checksummed() {
        let mut f = bytemuck::bytes_of(&ChunkHeader::new(1, 2)).to_vec();
        encode_piece(&info(0, 0), 0, &[1, 2, 3], &mut f);
        encode_piece(&info(0, 0), 3, &[4, 5], &mut f);
        let got: Vec<_> = records(&f).collect::<Result<_, _>>().unwrap();
        assert_eq!((got[0].piece, got[0].data), (0, &[1, 2, 3][..]));
        assert_eq!((got[1].piece, got[1].data), (3, &[4, 5][..]));
        assert_eq!(got[1].info.bytes_used, 2);
        // Every bit of the piece offset is covered by the checksum.
        let at = CHUNK_HEADER_SIZE + RECORD_FIXED_SIZE + 3 + 12;
        for bit in 0..32 {
            let mut g = f.clone();
            g[at + bit / 8] ^= 1 << (bit % 8);
            assert!(
                records(&g).collect::<Result<Vec<_>, _>>().is_err(),
                "bit {bit}"
            );
        }
        // A piece that would overrun its sub-buffer is refused.
        let mut g = bytemuck::bytes_of(&ChunkHeader::new(1, 2)).to_vec();
        encode_piece(&info(0, 0), 8192 - 64 - 1, &[1, 2], &mut g);
        let e = records(&g).next().unwrap().unwrap_err();
        assert!(e.to_string().contains("overruns"), "{e}");
    }

    #[test]
    fn version_1_files_are_read() {
        let mut f = file(&[(info(0, 3), vec![1, 2, 3])]);
        f[8..12].copy_from_slice(&1u32.to_le_bytes());
        assert_eq!(records(&f).count(), 1);
        assert!(records(&f).all(|r| r.is_ok()));
        f[8..12].copy_from_slice(&3u32.to_le_bytes());
        let e = records(&f).next().unwrap().unwrap_err();
        assert!(e.to_string().contains("chunk version 3"), "{e}");
    }

    #[test]
    fn a_wrong_file_is_named_as_such() {
        let e = records(b"hello world, this is not a chunk file")
            .next()
            .unwrap()
            .unwrap_err();
        assert!(e.to_string().contains("not a Culprit chunk file"), "{e}");
    }
}
