//! Strings a part file ([`super::partial`]) holds once: a table every process of the part
//! refers to by index — its host, the names of the key parts its units use, the names and
//! call sites of its annotated trees. A shard of 1 000 processes of one program names the
//! same functions 1 000 times; the part file names each once.
//!
//! [`Strings`] builds the table; [`InternedLines`] is an annotated tree whose names are
//! indices into it, made whole ([`InternedLines::expand`]) only for the trees a ranking
//! lists (its first `trees_kept`), so that the merge never copies the names of the others.

use crate::report::TreeLine;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// A table of distinct strings under construction, each given the index of its first
/// appearance.
#[derive(Debug, Default)]
pub(crate) struct Strings {
    index: crate::hash::FxMap<String, u32>,
    strings: Vec<String>,
}

impl Strings {
    /// The index of `s`, added if new.
    pub fn of(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.strings.len() as u32;
        self.strings.push(s.to_owned());
        self.index.insert(s.to_owned(), i);
        i
    }

    /// The table, in index order.
    pub fn into_vec(self) -> Vec<String> {
        self.strings
    }
}

/// One line of an annotated tree ([`TreeLine`]), its name and call site indices into a
/// table of strings.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct LineRef {
    depth: u32,
    name: u32,
    site: u32,
    in_unit: bool,
    p: Option<f64>,
    delta: Option<f64>,
    calls: u32,
}

impl LineRef {
    /// `l` with its names added to `table`.
    pub fn of(l: &TreeLine, table: &mut Strings) -> LineRef {
        LineRef {
            depth: l.depth as u32,
            name: table.of(&l.name),
            site: table.of(&l.site),
            in_unit: l.in_unit,
            p: l.p,
            delta: l.delta,
            calls: l.calls,
        }
    }

    /// Whether its indices are in a table of `n` strings.
    pub fn fits(&self, n: usize) -> bool {
        (self.name as usize) < n && (self.site as usize) < n
    }
}

/// An annotated tree, its names in a table shared with the other trees of its part file.
#[derive(Clone, Debug)]
pub(crate) struct InternedLines {
    /// The lines.
    pub lines: Vec<LineRef>,
    /// The table their indices refer to (checked when read: [`LineRef::fits`]).
    pub strings: Arc<[String]>,
}

impl InternedLines {
    /// The lines, names and all.
    pub fn expand(&self) -> Vec<TreeLine> {
        let s = |i: u32| self.strings.get(i as usize).cloned().unwrap_or_default();
        self.lines
            .iter()
            .map(|l| TreeLine {
                depth: l.depth as usize,
                name: s(l.name),
                site: s(l.site),
                in_unit: l.in_unit,
                p: l.p,
                delta: l.delta,
                calls: l.calls,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_come_back_whole_with_each_name_stored_once() {
        let line = |depth, name: &str, site: &str| TreeLine {
            depth,
            name: name.into(),
            site: site.into(),
            in_unit: depth % 2 == 0,
            p: Some(0.25 * depth as f64),
            delta: (depth == 1).then_some(0.5),
            calls: depth as u32 + 1,
        };
        let tree = vec![
            line(0, "main", ""),
            line(1, "recv", "main"),
            line(2, "recv", ""),
        ];
        let mut table = Strings::default();
        let refs: Vec<LineRef> = tree.iter().map(|l| LineRef::of(l, &mut table)).collect();
        let strings: Arc<[String]> = table.into_vec().into();
        assert_eq!(&*strings, ["main", "", "recv"]);
        assert!(refs.iter().all(|r| r.fits(3)) && !refs[1].fits(2));
        let back = InternedLines {
            lines: refs,
            strings,
        };
        assert_eq!(back.expand(), tree);
    }
}
