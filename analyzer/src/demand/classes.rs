//! **Services from a learned model**: a served request's service is the class of the
//! handler unit that processed it — the process group the model put the process in and
//! the identity of the connection (the call stacks that set it up), as `culprit rank`
//! sees them — so that two request types the code handles differently are told apart
//! even on one port, and one request type keeps its name from run to run and node to node.
//!
//! A request is given the class of the handler unit of its process whose span holds the
//! moment the request arrived; a request no handler unit holds keeps its port name.

use super::transactions::{Role, Transaction};
use crate::decode::TraceSet;
use crate::error::Result;
use crate::model::Model;
use crate::units::UnitKind;
use std::collections::HashMap;

/// A handler unit's span (unix ns) and class.
type Span = (i64, i64, String);

/// Handler units of each process (host, pid), by start.
pub struct Classes {
    by_proc: HashMap<(String, u32), Vec<Span>>,
}

impl Classes {
    /// Ranks `set` against `model` and keeps the handler units' spans and classes.
    pub fn new(model: &Model, set: &TraceSet) -> Result<Classes> {
        let opts = crate::Options::default();
        let rep = crate::rank(model, set, &opts)?;
        let mut by_proc: HashMap<(String, u32), Vec<Span>> = HashMap::new();
        for u in rep.iter() {
            let i = &u.info;
            if i.kind != UnitKind::Handler {
                continue;
            }
            let conn = i.conn.0.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &k| {
                (h ^ k).wrapping_mul(0x0100_0000_01b3)
            });
            let group = u.group.map_or("-".to_string(), |g| g.to_string());
            let port = i
                .local
                .as_deref()
                .and_then(|l| l.rsplit(':').next())
                .map_or(String::new(), |p| format!(" port:{p}"));
            let class = format!("handler g{group} conn:{:08x}{port}", conn as u32);
            by_proc.entry((i.host.clone(), i.pid)).or_default().push((
                i.t_start_unix_ns,
                i.t_end_unix_ns,
                class,
            ));
        }
        for v in by_proc.values_mut() {
            v.sort();
        }
        Ok(Classes { by_proc })
    }

    /// Renames the served transactions of process `(host, pid)` by handler-unit class.
    pub fn relabel(&self, host: &str, pid: u32, tx: &mut [Transaction]) {
        let Some(units) = self.by_proc.get(&(host.to_string(), pid)) else {
            return;
        };
        for t in tx.iter_mut().filter(|t| t.role == Role::Served) {
            let k = units.partition_point(|u| u.0 <= t.start_ns);
            // The latest unit started by then, or the one just after (the unit may begin
            // at the receive's entry, a little before the request's recorded arrival).
            let cand = [k.checked_sub(1), Some(k)];
            if let Some(u) = cand
                .into_iter()
                .flatten()
                .filter_map(|k| units.get(k))
                .find(|u| u.0 <= t.end_ns && u.1 >= t.start_ns)
            {
                t.service = u.2.clone();
            }
        }
    }
}
