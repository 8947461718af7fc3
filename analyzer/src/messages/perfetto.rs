//! Perfetto export: the trace as Perfetto's protobuf `Trace`, written packet by packet
//! (streamed: memory holds one packet, plus the flow index of [`super::slices`]).
//!
//! The messages are declared here by hand with `prost`, with the field numbers of
//! Perfetto's `protos/perfetto/trace/` schema, and only the fields emitted:
//! `TracePacket { timestamp 8, trusted_packet_sequence_id 10, track_event 11,
//! sequence_flags 13, track_descriptor 60 }`, `TrackEvent { type 9, track_uuid 11,
//! categories 22, name 23, flow_ids 47, terminating_flow_ids 48 }`, `TrackDescriptor {
//! uuid 1, name 2, process 3, thread 4, parent_uuid 5 }`, `ProcessDescriptor { pid 1,
//! process_name 6 }`, `ThreadDescriptor { pid 1, tid 2, thread_name 5 }`. The tests decode
//! the output with the official `perfetto_trace_pb2`.
//!
//! Tracks: one per process (named `host:pid exe`), one per thread under it, and a `units`
//! track under a thread when units are drawn. Library calls and function calls are
//! slices; a matched message is a flow from its send's slice (`flow_ids`) to its receive's
//! slice (`terminating_flow_ids`); an injected fault is an instant event.

use super::slices::Sink;
use prost::Message;
use std::io::Write;

#[derive(Clone, PartialEq, prost::Message)]
struct TracePacket {
    #[prost(uint64, optional, tag = "8")]
    timestamp: Option<u64>,
    #[prost(uint32, optional, tag = "10")]
    trusted_packet_sequence_id: Option<u32>,
    #[prost(message, optional, tag = "11")]
    track_event: Option<TrackEvent>,
    #[prost(uint32, optional, tag = "13")]
    sequence_flags: Option<u32>,
    #[prost(message, optional, tag = "60")]
    track_descriptor: Option<TrackDescriptor>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct TrackEvent {
    /// 1 SLICE_BEGIN, 2 SLICE_END, 3 INSTANT.
    #[prost(int32, optional, tag = "9")]
    r#type: Option<i32>,
    #[prost(uint64, optional, tag = "11")]
    track_uuid: Option<u64>,
    #[prost(string, repeated, tag = "22")]
    categories: Vec<String>,
    #[prost(string, optional, tag = "23")]
    name: Option<String>,
    #[prost(fixed64, repeated, packed = "false", tag = "47")]
    flow_ids: Vec<u64>,
    #[prost(fixed64, repeated, packed = "false", tag = "48")]
    terminating_flow_ids: Vec<u64>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct TrackDescriptor {
    #[prost(uint64, optional, tag = "1")]
    uuid: Option<u64>,
    #[prost(string, optional, tag = "2")]
    name: Option<String>,
    #[prost(message, optional, tag = "3")]
    process: Option<ProcessDescriptor>,
    #[prost(message, optional, tag = "4")]
    thread: Option<ThreadDescriptor>,
    #[prost(uint64, optional, tag = "5")]
    parent_uuid: Option<u64>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct ProcessDescriptor {
    #[prost(int32, optional, tag = "1")]
    pid: Option<i32>,
    #[prost(string, optional, tag = "6")]
    process_name: Option<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct ThreadDescriptor {
    #[prost(int32, optional, tag = "1")]
    pid: Option<i32>,
    #[prost(int32, optional, tag = "2")]
    tid: Option<i32>,
    #[prost(string, optional, tag = "5")]
    thread_name: Option<String>,
}

const SEQ: u32 = 1;
const SLICE_BEGIN: i32 = 1;
const SLICE_END: i32 = 2;
const INSTANT: i32 = 3;
/// `SEQ_INCREMENTAL_STATE_CLEARED`.
const STATE_CLEARED: u32 = 1;

/// A [`Sink`] writing Perfetto protobuf.
pub struct PerfettoWriter<W: Write> {
    out: W,
    buf: Vec<u8>,
    next_uuid: u64,
    process_uuid: u64,
    thread_uuid: u64,
    unit_uuid: Option<u64>,
    first: bool,
    /// Packets written.
    pub packets: u64,
}

impl<W: Write> PerfettoWriter<W> {
    /// Writes to `out` (wrap a file in a `BufWriter`).
    pub fn new(out: W) -> Self {
        PerfettoWriter {
            out,
            buf: Vec::with_capacity(256),
            next_uuid: 1,
            process_uuid: 0,
            thread_uuid: 0,
            unit_uuid: None,
            first: true,
            packets: 0,
        }
    }

    /// Flushes and returns the writer.
    pub fn finish(mut self) -> std::io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }

    fn packet(&mut self, mut p: TracePacket) -> std::io::Result<()> {
        p.trusted_packet_sequence_id = Some(SEQ);
        if self.first {
            p.sequence_flags = Some(STATE_CLEARED);
            self.first = false;
        }
        self.buf.clear();
        p.encode(&mut self.buf).map_err(std::io::Error::other)?;
        // Field 1 of `Trace` (repeated TracePacket), length-delimited.
        let mut head = Vec::with_capacity(11);
        head.push(0x0a);
        prost::encoding::encode_varint(self.buf.len() as u64, &mut head);
        self.out.write_all(&head)?;
        self.out.write_all(&self.buf)?;
        self.packets += 1;
        Ok(())
    }

    fn uuid(&mut self) -> u64 {
        self.next_uuid += 1;
        self.next_uuid
    }

    fn event(&mut self, ts: u64, track: u64, e: TrackEvent) -> std::io::Result<()> {
        self.packet(TracePacket {
            timestamp: Some(ts),
            track_event: Some(TrackEvent {
                track_uuid: Some(track),
                ..e
            }),
            ..Default::default()
        })
    }
}

impl<W: Write> Sink for PerfettoWriter<W> {
    fn process(&mut self, pid: u32, name: &str) -> std::io::Result<()> {
        self.process_uuid = self.uuid();
        self.packet(TracePacket {
            track_descriptor: Some(TrackDescriptor {
                uuid: Some(self.process_uuid),
                process: Some(ProcessDescriptor {
                    pid: Some(pid as i32),
                    process_name: Some(name.to_string()),
                }),
                ..Default::default()
            }),
            ..Default::default()
        })
    }

    fn thread(&mut self, pid: u32, tid: u32, name: &str) -> std::io::Result<()> {
        self.thread_uuid = self.uuid();
        self.unit_uuid = None;
        let tname = if name.is_empty() {
            format!("{tid}")
        } else {
            name.to_string()
        };
        self.packet(TracePacket {
            track_descriptor: Some(TrackDescriptor {
                uuid: Some(self.thread_uuid),
                parent_uuid: Some(self.process_uuid),
                thread: Some(ThreadDescriptor {
                    pid: Some(pid as i32),
                    tid: Some(tid as i32),
                    thread_name: Some(tname),
                }),
                ..Default::default()
            }),
            ..Default::default()
        })
    }

    fn begin(&mut self, _pid: u32, _tid: u32, ts: u64, name: &str) -> std::io::Result<()> {
        let t = self.thread_uuid;
        self.event(
            ts,
            t,
            TrackEvent {
                r#type: Some(SLICE_BEGIN),
                categories: vec!["fn".into()],
                name: Some(name.to_string()),
                ..Default::default()
            },
        )
    }

    fn end(&mut self, _pid: u32, _tid: u32, ts: u64) -> std::io::Result<()> {
        let t = self.thread_uuid;
        self.event(
            ts,
            t,
            TrackEvent {
                r#type: Some(SLICE_END),
                ..Default::default()
            },
        )
    }

    fn complete(
        &mut self,
        _pid: u32,
        _tid: u32,
        ts: u64,
        end: u64,
        name: &str,
        cat: &'static str,
        flows_out: &[u64],
        flows_in: &[u64],
    ) -> std::io::Result<()> {
        let track = if cat == "unit" {
            match self.unit_uuid {
                Some(u) => u,
                None => {
                    let u = self.uuid();
                    self.unit_uuid = Some(u);
                    let parent = self.thread_uuid;
                    self.packet(TracePacket {
                        track_descriptor: Some(TrackDescriptor {
                            uuid: Some(u),
                            parent_uuid: Some(parent),
                            name: Some("units".into()),
                            ..Default::default()
                        }),
                        ..Default::default()
                    })?;
                    u
                }
            }
        } else {
            self.thread_uuid
        };
        self.event(
            ts,
            track,
            TrackEvent {
                r#type: Some(SLICE_BEGIN),
                categories: vec![cat.into()],
                name: Some(name.to_string()),
                flow_ids: flows_out.to_vec(),
                terminating_flow_ids: flows_in.to_vec(),
                ..Default::default()
            },
        )?;
        self.event(
            end.max(ts),
            track,
            TrackEvent {
                r#type: Some(SLICE_END),
                ..Default::default()
            },
        )
    }

    fn instant(&mut self, _pid: u32, _tid: u32, ts: u64, name: &str) -> std::io::Result<()> {
        let t = self.thread_uuid;
        self.event(
            ts,
            t,
            TrackEvent {
                r#type: Some(INSTANT),
                categories: vec!["inject".into()],
                name: Some(name.to_string()),
                ..Default::default()
            },
        )
    }
}
