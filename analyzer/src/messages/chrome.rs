//! Chrome JSON trace-event export (what `chrome://tracing`, Perfetto's UI and many other
//! tools read), streamed event by event.
//!
//! `{"traceEvents":[…],"displayTimeUnit":"ns"}` with: `M` metadata events naming processes
//! and threads; `B`/`E` for function calls; `X` complete events for library calls (category
//! `lib`) and units (`unit`); `i` instant events for injected faults. Matched messages are
//! flows in the v2 form — `bind_id` on the complete events, with `flow_out` on the send and
//! `flow_in` on the receive. An event carries one `bind_id`, so a call that starts or ends
//! several flows (a send read by two receives) gets, for each further flow, a zero-length
//! `X` event of category `lib.part` nested at its start, carrying that flow's `bind_id`.
//! Timestamps are microseconds with nanosecond decimals, exact.

use super::slices::Sink;
use std::io::Write;

/// A [`Sink`] writing Chrome JSON.
pub struct ChromeWriter<W: Write> {
    out: W,
    first: bool,
    /// Events written.
    pub events: u64,
}

fn us(ns: u64) -> String {
    format!("{}.{:03}", ns / 1000, ns % 1000)
}

fn js(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"?\"".into())
}

impl<W: Write> ChromeWriter<W> {
    /// Starts the document.
    pub fn new(mut out: W) -> std::io::Result<Self> {
        out.write_all(b"{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n")?;
        Ok(ChromeWriter {
            out,
            first: true,
            events: 0,
        })
    }

    fn ev(&mut self, body: &str) -> std::io::Result<()> {
        if !self.first {
            self.out.write_all(b",\n")?;
        }
        self.first = false;
        self.out.write_all(b"{")?;
        self.out.write_all(body.as_bytes())?;
        self.out.write_all(b"}")?;
        self.events += 1;
        Ok(())
    }

    /// Ends the document and returns the writer.
    pub fn finish(mut self) -> std::io::Result<W> {
        self.out.write_all(b"\n]}\n")?;
        self.out.flush()?;
        Ok(self.out)
    }
}

impl<W: Write> Sink for ChromeWriter<W> {
    fn process(&mut self, pid: u32, name: &str) -> std::io::Result<()> {
        self.ev(&format!(
            "\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{pid},\"tid\":0,\"args\":{{\"name\":{}}}",
            js(name)
        ))
    }

    fn thread(&mut self, pid: u32, tid: u32, name: &str) -> std::io::Result<()> {
        let n = if name.is_empty() {
            tid.to_string()
        } else {
            name.to_string()
        };
        self.ev(&format!(
            "\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{pid},\"tid\":{tid},\"args\":{{\"name\":{}}}",
            js(&n)
        ))
    }

    fn begin(&mut self, pid: u32, tid: u32, ts: u64, name: &str) -> std::io::Result<()> {
        self.ev(&format!(
            "\"ph\":\"B\",\"cat\":\"fn\",\"pid\":{pid},\"tid\":{tid},\"ts\":{},\"name\":{}",
            us(ts),
            js(name)
        ))
    }

    fn end(&mut self, pid: u32, tid: u32, ts: u64) -> std::io::Result<()> {
        self.ev(&format!(
            "\"ph\":\"E\",\"pid\":{pid},\"tid\":{tid},\"ts\":{}",
            us(ts)
        ))
    }

    fn complete(
        &mut self,
        pid: u32,
        tid: u32,
        ts: u64,
        end: u64,
        name: &str,
        cat: &'static str,
        flows_out: &[u64],
        flows_in: &[u64],
    ) -> std::io::Result<()> {
        let dur = end.saturating_sub(ts);
        let flows: Vec<(u64, &str)> = flows_out
            .iter()
            .map(|&f| (f, "\"flow_out\":true"))
            .chain(flows_in.iter().map(|&f| (f, "\"flow_in\":true")))
            .collect();
        let base = format!(
            "\"ph\":\"X\",\"cat\":\"{cat}\",\"pid\":{pid},\"tid\":{tid},\"ts\":{},\"dur\":{},\"name\":{}",
            us(ts),
            us(dur),
            js(name)
        );
        match flows.first() {
            Some((id, dir)) => self.ev(&format!("{base},\"bind_id\":\"0x{id:x}\",{dir}"))?,
            None => self.ev(&base)?,
        }
        for (id, dir) in flows.iter().skip(1) {
            self.ev(&format!(
                "\"ph\":\"X\",\"cat\":\"lib.part\",\"pid\":{pid},\"tid\":{tid},\"ts\":{},\"dur\":0,\"name\":{},\"bind_id\":\"0x{id:x}\",{dir}",
                us(ts),
                js(name)
            ))?;
        }
        Ok(())
    }

    fn instant(&mut self, pid: u32, tid: u32, ts: u64, name: &str) -> std::io::Result<()> {
        self.ev(&format!(
            "\"ph\":\"i\",\"s\":\"t\",\"cat\":\"inject\",\"pid\":{pid},\"tid\":{tid},\"ts\":{},\"name\":{}",
            us(ts),
            js(name)
        ))
    }
}
