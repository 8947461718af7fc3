//! Stage 6 — **models**: process models, process groups and the global model (§4–5).
//!
//! A [`ProcessModel`] holds one [`TreeModel`] per **unit class** ([`UnitClass`]): the
//! initializer, loop and finalizer units of the main thread and of the other threads, and the
//! handler units of each connection ([`ConnKey`](crate::connections::ConnKey)). A tree model is the union of its units'
//! trees where each node carries its coverage probability `p = n_g / n_f` (`n_x`: the number
//! of units in which node `x` appears; `f` the parent of `g`; the root appears in every unit).
//!
//! Processes with equal [`Signature`]s form a **process group**; [`Model::add_group`] merges the
//! models of a group node by node, each node getting the **mean** of the probabilities it
//! has in the models that contain it (a handler model whose connection appears in only one
//! process model is thus copied as is). To make merging associative (`culprit merge` of
//! models learned on different nodes gives the same result as one `culprit learn` over all
//! traces), a node stores the sum of those probabilities and how many models contributed.
//!
//! The file format — JSON with a magic string and a version number — is documented in
//! `analyzer/MODEL.md`. It is written from and read into the types here through the `wire`
//! types at the end of this file: nodes are arrays whose parent is an index and whose id is
//! derived (the hash of the parent's id and the node's key), and site and callee keys are
//! indices into one table of keys shared with their names.

use crate::durations::Durations;
use crate::error::{Error, Result};
use crate::hash::{FxMap, IdMap};
use crate::sizes::SizeRange;
use crate::trees::{CallTree, NodeKey, NodeKind, Outcome, TreeOptions, ROOT};
use crate::units::{ProcessUnits, Signature, UnitView};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The `magic` field of a model file.
pub const MAGIC: &str = "culprit-model";
/// The current model format version (1: signatures without the program key; 2: nodes as
/// JSON objects with their ids, names keyed by key; 3: without per-call durations; 4:
/// without send sizes).
pub const VERSION: u32 = 5;
/// The oldest format version read (a version-3 model has no durations, a version-4 model no
/// send sizes: no such evidence is found with them).
pub const OLDEST_READ: u32 = 3;

/// Which model a unit is compared with (defined with the units, which know their class).
pub use crate::units::UnitClass;

/// One node of a tree model.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelNode {
    /// Node id (path hash).
    pub id: u64,
    /// Parent id (`trees::ROOT` at the top).
    pub parent: u64,
    /// What the node is.
    pub key: NodeKey,
    /// Sum of the node's probabilities in the merged process models.
    pub p_sum: f64,
    /// Number of process models that contain the node.
    pub models: u32,
}

impl ModelNode {
    /// The node's probability: the mean over the process models that contain it.
    pub fn p(&self) -> f64 {
        if self.models == 0 {
            0.0
        } else {
            self.p_sum / self.models as f64
        }
    }
}

/// The model of one unit class: a tree whose nodes carry probabilities.
#[derive(Clone, Debug, Default)]
pub struct TreeModel {
    /// Units learned from (all merged process models together).
    pub units: u64,
    /// Process models merged into this one.
    pub models: u32,
    /// Nodes, sorted by id.
    pub nodes: Vec<ModelNode>,
    /// Per-call durations of the timed nodes (library calls other than multiplexers), by
    /// node id ([`crate::durations`]).
    pub durations: BTreeMap<u64, Durations>,
    /// Size classes of the sends of the sized nodes (sends on sockets), by node id
    /// ([`crate::sizes`]).
    pub sizes: BTreeMap<u64, SizeRange>,
    index: IdMap<usize>,
}

/// One process model's probability of a node, `p` in [0, 1], made a multiple of 2⁻³²
/// (it moves by less than 1.2·10⁻¹⁰): sums of up to 2²¹ such values are exact in an
/// `f64`, so `p_sum`, added up as models merge ([`TreeModel::merge`]), is the same whatever
/// the order and grouping of the merges — `culprit merge` is associative and commutative
/// bit for bit, and a model merged along any tree is byte-identical.
pub fn quantize_p(p: f64) -> f64 {
    const Q: f64 = 4_294_967_296.0;
    (p.clamp(0.0, 1.0) * Q).round() / Q
}

impl TreeModel {
    /// Builds a process-level tree model from unit trees (coverage counts).
    pub fn from_trees<'a>(trees: impl IntoIterator<Item = &'a CallTree>) -> TreeModel {
        let mut d = DistinctTrees::default();
        for t in trees {
            let slowest = t.nodes.values().map(|n| n.dur.ns()).max().unwrap_or(0);
            let sized = t.nodes.values().any(|n| n.tally.sizes().is_some());
            d.time(slowest, sized, t.nodes.iter().map(|(id, n)| (*id, n)));
            d.add(t.fingerprint(), t.nodes.iter().map(|(id, n)| (*id, n)));
        }
        d.model()
    }

    /// A tree model from coverage counts (each node's probability [`quantize_p`]d).
    fn from_counts(units: u64, counts: &IdMap<(u64, NodeKey, u64)>) -> TreeModel {
        let mut nodes: Vec<ModelNode> = counts
            .iter()
            .map(|(&id, &(parent, key, n))| {
                let np = if parent == ROOT {
                    units
                } else {
                    counts.get(&parent).map_or(units, |c| c.2)
                };
                ModelNode {
                    id,
                    parent,
                    key,
                    p_sum: quantize_p(n as f64 / np.max(1) as f64),
                    models: 1,
                }
            })
            .collect();
        nodes.sort_by_key(|n| n.id);
        let mut m = TreeModel {
            units,
            models: 1,
            nodes,
            durations: BTreeMap::new(),
            sizes: BTreeMap::new(),
            index: IdMap::default(),
        };
        m.reindex();
        m
    }

    /// A tree model from its parts (nodes in any order).
    pub fn from_nodes(units: u64, models: u32, mut nodes: Vec<ModelNode>) -> TreeModel {
        nodes.sort_by_key(|n| n.id);
        let mut m = TreeModel {
            units,
            models,
            nodes,
            durations: BTreeMap::new(),
            sizes: BTreeMap::new(),
            index: IdMap::default(),
        };
        m.reindex();
        m
    }

    /// Rebuilds the id index (after loading or changing `nodes`).
    pub fn reindex(&mut self) {
        self.index = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.id, i))
            .collect();
    }

    /// The node with this id.
    pub fn get(&self, id: u64) -> Option<&ModelNode> {
        self.index.get(&id).map(|&i| &self.nodes[i])
    }

    /// Is `id` in the model (the root always is)?
    pub fn contains(&self, id: u64) -> bool {
        id == ROOT || self.index.contains_key(&id)
    }

    /// The normal durations of node `id`, if it is timed.
    pub fn durations(&self, id: u64) -> Option<&Durations> {
        self.durations.get(&id)
    }

    /// Adds another model's nodes into this one (mean-probability merge, §5; durations
    /// add up, [`Durations::merge`]).
    pub fn merge(&mut self, other: &TreeModel) {
        for (id, d) in &other.durations {
            self.durations.entry(*id).or_default().merge(d);
        }
        for (id, r) in &other.sizes {
            self.sizes.entry(*id).or_default().merge(r);
        }
        self.units += other.units;
        self.models += other.models;
        let mut map: BTreeMap<u64, ModelNode> = std::mem::take(&mut self.nodes)
            .into_iter()
            .map(|n| (n.id, n))
            .collect();
        for n in &other.nodes {
            map.entry(n.id)
                .and_modify(|m| {
                    m.p_sum += n.p_sum;
                    m.models += n.models;
                })
                .or_insert_with(|| n.clone());
        }
        self.nodes = map.into_values().collect();
        self.reindex();
    }
}

/// A model per unit class, for one process or one process group.
#[derive(Clone, Debug, Default)]
pub struct GroupModel {
    /// The signature shared by the group's processes.
    pub signature: Signature,
    /// Processes merged into it (`host:pid` of each).
    pub processes: Vec<String>,
    /// Executables seen in the group.
    pub exes: Vec<String>,
    /// The commands (arguments after `argv[0]`) the group's processes were started with,
    /// each once (empty in models learned before they were kept): what matches a process
    /// of a faulty run whose signature is no group's to its role
    /// ([`crate::units::command_similarity`]).
    pub commands: Vec<Vec<String>>,
    /// Models by unit class, sorted by class.
    pub classes: Vec<(UnitClass, TreeModel)>,
    /// How the group's normal processes ended ([`crate::ending`]; None in a process's own
    /// model and in models learned before it was recorded).
    pub ending: Option<crate::ending::EndingModel>,
}

impl GroupModel {
    /// The model of a unit class.
    pub fn class(&self, c: &UnitClass) -> Option<&TreeModel> {
        self.classes
            .binary_search_by(|(k, _)| k.cmp(c))
            .ok()
            .map(|i| &self.classes[i].1)
    }

    fn merge(&mut self, o: &GroupModel) {
        self.processes.extend(o.processes.iter().cloned());
        self.processes.sort();
        self.processes.dedup();
        self.exes.extend(o.exes.iter().cloned());
        self.exes.sort();
        self.exes.dedup();
        self.commands.extend(o.commands.iter().cloned());
        self.commands.sort();
        self.commands.dedup();
        match (&mut self.ending, &o.ending) {
            (Some(a), Some(b)) => a.merge(b),
            (a @ None, Some(b)) => *a = Some(b.clone()),
            _ => {}
        }
        let mut map: BTreeMap<UnitClass, TreeModel> =
            std::mem::take(&mut self.classes).into_iter().collect();
        for (c, t) in &o.classes {
            match map.get_mut(c) {
                Some(m) => m.merge(t),
                None => {
                    map.insert(c.clone(), t.clone());
                }
            }
        }
        self.classes = map.into_iter().collect();
    }
}

/// The model of one process (before grouping).
pub type ProcessModel = GroupModel;

/// The distinct trees of one unit class, each with the number of units that had it: most
/// units of a class repeat a few trees, so counting a tree once per distinct node set
/// ([`TreeBuf::fingerprint`](crate::trees::TreeBuf::fingerprint)) and expanding the counts later gives the coverage counts
/// (per node, the number of units it appears in) for a fraction of the work. The distinct trees held are bounded
/// ([`DISTINCT_NODES`]): past that, they are expanded into the counts and forgotten, so a
/// program whose units rarely repeat costs memory in its distinct nodes only, as before.
#[derive(Default)]
struct DistinctTrees {
    units: u64,
    seen: FxMap<(u64, u64), usize>,
    /// Each distinct tree: its number of units and its nodes (id, parent, key).
    trees: Vec<(u64, Vec<ModelEdge>)>,
    /// Nodes held in `trees`.
    held: usize,
    /// Coverage counts of the trees expanded so far: per node id, (parent, key, units).
    counts: IdMap<(u64, NodeKey, u64)>,
    /// Durations of the timed nodes, every unit counted (durations differ between units of
    /// equal trees).
    durations: IdMap<Durations>,
    /// Size classes of the sized nodes, every unit counted (as durations).
    sizes: IdMap<SizeRange>,
}

/// A node of a distinct tree: id, parent id, key.
type ModelEdge = (u64, u64, NodeKey);

/// Nodes of distinct trees a class holds before expanding them into its counts.
const DISTINCT_NODES: usize = 1 << 16;

impl DistinctTrees {
    fn add<'a>(
        &mut self,
        fingerprint: (u64, u64),
        nodes: impl Iterator<Item = (u64, &'a crate::trees::TreeNode)>,
    ) {
        self.units += 1;
        match self.seen.entry(fingerprint) {
            std::collections::hash_map::Entry::Occupied(e) => self.trees[*e.get()].0 += 1,
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(self.trees.len());
                let t: Vec<ModelEdge> = nodes.map(|(id, n)| (id, n.parent, n.key)).collect();
                self.held += t.len();
                self.trees.push((1, t));
                if self.held > DISTINCT_NODES {
                    self.expand();
                }
            }
        }
    }

    /// Adds the distinct trees held to the counts and forgets them.
    fn expand(&mut self) {
        for (mult, nodes) in self.trees.drain(..) {
            for (id, parent, key) in nodes {
                self.counts.entry(id).or_insert((parent, key, 0)).2 += mult;
            }
        }
        self.seen.clear();
        self.held = 0;
    }

    /// Counts the durations of one unit's timed nodes and the size classes of its sized ones
    /// (`slowest_ns`: the longest call; 0 when none is timed, and then, with `sized` false —
    /// no sized node —, nothing is looked at).
    fn time<'a>(
        &mut self,
        slowest_ns: u64,
        sized: bool,
        nodes: impl Iterator<Item = (u64, &'a crate::trees::TreeNode)>,
    ) {
        if slowest_ns == 0 && !sized {
            return;
        }
        for (id, n) in nodes {
            let ns = n.dur.ns();
            if ns > 0 {
                self.durations
                    .entry(id)
                    .or_default()
                    .add(ns, u64::from(n.tally.calls()));
            }
            if let Some((lo, hi)) = n.tally.sizes() {
                self.sizes.entry(id).or_default().add(lo, hi);
            }
        }
    }

    fn model(mut self) -> TreeModel {
        self.expand();
        let mut m = TreeModel::from_counts(self.units, &self.counts);
        // Only nodes of the model (always so: a timed node is a node of its unit).
        m.durations = std::mem::take(&mut self.durations)
            .into_iter()
            .filter(|(id, _)| m.index.contains_key(id))
            .collect();
        m.sizes = std::mem::take(&mut self.sizes)
            .into_iter()
            .filter(|(id, _)| m.index.contains_key(id))
            .collect();
        m
    }
}

/// Builds a process model unit by unit, without holding the units ([`process_model`] over
/// units handed over one at a time).
#[derive(Default)]
pub struct ProcessModelBuilder {
    /// Slot in `classes` of each class key of the process ([`UnitView::class_key`]).
    by_key: FxMap<crate::units::ClassKey, usize>,
    /// Slot of each class.
    by_class: BTreeMap<UnitClass, usize>,
    classes: Vec<DistinctTrees>,
}

impl ProcessModelBuilder {
    fn slot(&mut self, class: UnitClass) -> usize {
        let n = self.classes.len();
        let s = *self.by_class.entry(class).or_insert(n);
        if s == n {
            self.classes.push(DistinctTrees::default());
        }
        s
    }

    /// Counts one unit, as the splitter lends it.
    pub fn add_view(&mut self, u: &UnitView<'_>) {
        let key = u.class_key();
        let s = match self.by_key.get(&key) {
            Some(&s) => s,
            None => {
                let s = self.slot(u.class());
                self.by_key.insert(key, s);
                s
            }
        };
        let t = u.tree;
        let c = &mut self.classes[s];
        c.time(
            t.slowest_ns(),
            t.sized(),
            t.nodes().iter().map(|(id, n)| (*id, n)),
        );
        c.add(t.fingerprint(), t.nodes().iter().map(|(id, n)| (*id, n)));
    }

    /// Counts one unit.
    pub fn add(&mut self, u: &crate::units::Unit) {
        let s = self.slot(u.class());
        let t = &u.tree;
        let c = &mut self.classes[s];
        let slowest = t.nodes.values().map(|n| n.dur.ns()).max().unwrap_or(0);
        let sized = t.nodes.values().any(|n| n.tally.sizes().is_some());
        c.time(slowest, sized, t.nodes.iter().map(|(id, n)| (*id, n)));
        c.add(t.fingerprint(), t.nodes.iter().map(|(id, n)| (*id, n)));
    }

    /// The model of process `p` (its units, if any, are not looked at).
    pub fn finish(self, p: &ProcessUnits) -> ProcessModel {
        let mut classes = self.classes;
        GroupModel {
            signature: p.signature.clone(),
            processes: vec![format!("{}:{}", p.host, p.pid)],
            exes: if p.exe.is_empty() {
                vec![]
            } else {
                vec![p.exe.clone()]
            },
            commands: if p.exe.is_empty() {
                vec![]
            } else {
                vec![p.command.clone()]
            },
            classes: self
                .by_class
                .into_iter()
                .map(|(c, s)| (c, std::mem::take(&mut classes[s]).model()))
                .collect(),
            ending: None,
        }
    }
}

/// Derives a process model from its units.
pub fn process_model(p: &ProcessUnits) -> ProcessModel {
    let mut b = ProcessModelBuilder::default();
    for u in &p.units {
        b.add(u);
    }
    b.finish(p)
}

/// The global model: process groups and the names of everything in them.
#[derive(Clone, Debug)]
pub struct Model {
    /// Always [`MAGIC`].
    pub magic: String,
    /// [`VERSION`].
    pub version: u32,
    /// The tree options the model was learned with (ranking uses the same).
    pub options: TreeOptions,
    /// Process groups, sorted by signature.
    pub groups: Vec<GroupModel>,
    /// Names of key parts (call sites, callees), by stable key.
    pub names: BTreeMap<u64, String>,
}

impl Model {
    /// An empty model.
    pub fn new(options: TreeOptions) -> Model {
        Model {
            magic: MAGIC.to_string(),
            version: VERSION,
            options,
            groups: Vec::new(),
            names: BTreeMap::new(),
        }
    }

    /// The group with this signature.
    pub fn group(&self, s: &Signature) -> Option<&GroupModel> {
        self.groups
            .binary_search_by(|g| g.signature.cmp(s))
            .ok()
            .map(|i| &self.groups[i])
    }

    /// Index of the group with this signature.
    pub fn group_index(&self, s: &Signature) -> Option<usize> {
        self.groups.binary_search_by(|g| g.signature.cmp(s)).ok()
    }

    /// Adds a process (or group) model: merged into the group of equal signature.
    pub fn add_group(&mut self, g: &GroupModel) {
        match self.group_index(&g.signature) {
            Some(i) => self.groups[i].merge(g),
            None => {
                let at = self.groups.partition_point(|x| x.signature < g.signature);
                self.groups.insert(at, g.clone());
            }
        }
    }

    /// Merges another model in (the decentralized step of `culprit merge`).
    pub fn merge(&mut self, o: &Model) -> std::result::Result<(), String> {
        if o.options != self.options {
            return Err(format!(
                "models were learned with different options ({:?} vs {:?})",
                self.options, o.options
            ));
        }
        for g in &o.groups {
            self.add_group(g);
        }
        for (k, v) in &o.names {
            self.names.entry(*k).or_insert_with(|| v.clone());
        }
        Ok(())
    }

    /// The JSON encoding (format [`VERSION`], `analyzer/MODEL.md`).
    pub fn to_json(&self) -> String {
        serde_json::to_string(&wire::Model::from_model(self)).unwrap_or_default()
    }

    /// Size of the JSON encoding in bytes.
    pub fn encoded_size(&self) -> usize {
        self.to_json().len()
    }

    /// Writes the model to a file.
    pub fn save(&self, path: &Path) -> Result<()> {
        use std::io::Write;
        reader::safefile::create_output(path)
            .and_then(|mut f| f.write_all((self.to_json() + "\n").as_bytes()))
            .map_err(|source| Error::Io {
                path: path.to_path_buf(),
                what: "write model",
                source,
            })
    }

    /// Parses a model, checking magic and version.
    pub fn from_json(path: &Path, text: &str) -> Result<Model> {
        let w = Self::wire_of(path, text.as_bytes())?;
        Self::from_wire(path, w)
    }

    /// The file's JSON read straight into its typed form ([`wire::Model`]), never into a
    /// generic JSON tree (`serde_json::Value` takes about twelve times the file's size: an
    /// 87 MB model peaked at 1.1 GB). Magic and version are checked here; when the file is
    /// not of this format, the cheap header pass of [`super::model_check::check_header`]
    /// names what is wrong with it before the schema error.
    fn wire_of(path: &Path, bytes: &[u8]) -> Result<wire::Model<'static>> {
        let bad = |why: String| Error::BadModel {
            path: path.to_path_buf(),
            why,
        };
        let w: wire::Model<'static> = match serde_json::from_slice(bytes) {
            Ok(w) => w,
            Err(e) => {
                super::model_check::check_header(bytes, MAGIC, OLDEST_READ..=VERSION)
                    .map_err(bad)?;
                return Err(bad(format!("{e}")));
            }
        };
        super::model_check::check_magic_version(
            Some(w.magic.as_ref()),
            Some(u64::from(w.version)),
            MAGIC,
            OLDEST_READ..=VERSION,
        )
        .map_err(bad)?;
        super::model_check::check_keys(&w.keys).map_err(bad)?;
        Ok(w)
    }

    /// The model of a file's typed form, sorted and range-checked.
    fn from_wire(path: &Path, w: wire::Model<'_>) -> Result<Model> {
        let bad = |why: String| Error::BadModel {
            path: path.to_path_buf(),
            why,
        };
        let mut m = w.into_model().map_err(bad)?;
        // Read from an older format, it is now a model of this one (with no durations).
        m.version = VERSION;
        for g in &mut m.groups {
            g.classes.sort_by(|a, b| a.0.cmp(&b.0));
        }
        m.groups.sort_by(|a, b| a.signature.cmp(&b.signature));
        super::model_check::check_model(&m).map_err(bad)?;
        Ok(m)
    }

    /// Reads a model file: its size checked before it is read, its text parsed into the
    /// typed form and dropped before the model is built (the peak is a few times the file).
    pub fn load(path: &Path) -> Result<Model> {
        Ok(Self::load_hashed(path)?.0)
    }

    /// [`Model::load`], with the hash of the file's bytes (its last newline left out) that
    /// a shard's part file carries (`crate::partial::model_hash`): the hash of the model's
    /// encoding when the file is as `culprit learn` or `culprit merge` wrote it, found
    /// without encoding the model again.
    pub fn load_hashed(path: &Path) -> Result<(Model, u64)> {
        // A regular file of bounded size (never a FIFO or /dev/zero).
        let bytes = reader::safefile::read_bounded(path, super::model_check::MAX_MODEL_BYTES)
            .map_err(Error::Reader)?;
        if let Err(e) = std::str::from_utf8(&bytes) {
            return Err(Error::BadModel {
                path: path.to_path_buf(),
                why: format!("not UTF-8 text: {e}"),
            });
        }
        let w = Self::wire_of(path, &bytes)?;
        let hash = crate::hash::str_hash(bytes.strip_suffix(b"\n").unwrap_or(&bytes));
        drop(bytes);
        Ok((Self::from_wire(path, w)?, hash))
    }

    /// Total number of nodes.
    pub fn node_count(&self) -> usize {
        self.groups
            .iter()
            .flat_map(|g| &g.classes)
            .map(|(_, t)| t.nodes.len())
            .sum()
    }
}

/// The file format (`analyzer/MODEL.md`, "Model file format"): what is written and read.
mod wire {
    use super::*;

    /// A node: `[parent, kind, site, callee, outcome, p_sum, models]`. `parent` is 0 for the
    /// root, else 1 + the position of the parent in the class's `nodes` (parents come first);
    /// `site` and `callee` are positions in the file's `keys`. The id is derived:
    /// `NodeKey::child_of(parent's id)`.
    pub type Node = (u32, u8, u32, u32, i32, f64, u32);
    /// A node whose id cannot be derived (it is not the hash of its parent's id and key, or
    /// its parent is not in the class): `[id, parent id, kind, site, callee, outcome, p_sum,
    /// models]`. Models learned by Culprit have none; the form exists so that any model in
    /// memory is written exactly.
    pub type Loose = (u64, u64, u8, u32, u32, i32, f64, u32);
    /// The durations of a timed node (version 4): `[node, calls, max_ns, [[bucket, units],
    /// …]]`, `node` being 1 + its position in `nodes` followed by `loose`
    /// ([`crate::durations::Durations`]).
    pub type Dur = (u32, u64, u64, Vec<(u16, u64)>);
    /// The send sizes of a sized node (version 5): `[node, units, least class, greatest
    /// class]`, `node` as in [`Dur`] ([`crate::sizes::SizeRange`]).
    pub type Size = (u32, u64, u8, u8);

    #[derive(Serialize, Deserialize)]
    pub struct Model<'a> {
        pub(super) magic: Cow<'a, str>,
        pub(super) version: u32,
        options: TreeOptions,
        pub(super) keys: Vec<u64>,
        names: Vec<Option<Cow<'a, str>>>,
        groups: Vec<Group<'a>>,
    }

    #[derive(Serialize, Deserialize)]
    struct Group<'a> {
        signature: Cow<'a, Signature>,
        processes: Cow<'a, [String]>,
        exes: Cow<'a, [String]>,
        /// The commands the group's processes were started with (optional: absent in
        /// older models).
        #[serde(default, skip_serializing_if = "<[Vec<String>]>::is_empty")]
        commands: Cow<'a, [Vec<String>]>,
        classes: Vec<(Cow<'a, UnitClass>, Tree)>,
        /// How the group's normal processes ended (optional: absent in older models).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ending: Option<Cow<'a, crate::ending::EndingModel>>,
    }

    #[derive(Serialize, Deserialize)]
    struct Tree {
        units: u64,
        models: u32,
        nodes: Vec<Node>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        loose: Vec<Loose>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        durations: Vec<Dur>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        sizes: Vec<Size>,
    }

    fn kind_code(k: NodeKind) -> u8 {
        k as u8
    }

    fn kind_of(c: u8) -> Option<NodeKind> {
        Some(match c {
            0 => NodeKind::C,
            1 => NodeKind::Py,
            2 => NodeKind::PyBuiltin,
            3 => NodeKind::Lib,
            4 => NodeKind::Exception,
            _ => return None,
        })
    }

    impl<'a> Model<'a> {
        pub fn from_model(m: &'a super::Model) -> Model<'a> {
            let mut all = BTreeSet::new();
            for (_, t) in m.groups.iter().flat_map(|g| &g.classes) {
                for n in &t.nodes {
                    all.insert(n.key.site);
                    all.insert(n.key.callee);
                }
            }
            all.extend(m.names.keys().copied());
            let keys: Vec<u64> = all.into_iter().collect();
            let at: IdMap<u32> = keys
                .iter()
                .enumerate()
                .map(|(i, &k)| (k, i as u32))
                .collect();
            let names = keys
                .iter()
                .map(|k| m.names.get(k).map(|n| Cow::Borrowed(n.as_str())))
                .collect();
            let groups = m
                .groups
                .iter()
                .map(|g| Group {
                    signature: Cow::Borrowed(&g.signature),
                    processes: Cow::Borrowed(&g.processes),
                    exes: Cow::Borrowed(&g.exes),
                    commands: Cow::Borrowed(&g.commands),
                    classes: g
                        .classes
                        .iter()
                        .map(|(c, t)| (Cow::Borrowed(c), Tree::from_tree(t, &at)))
                        .collect(),
                    ending: g.ending.as_ref().map(Cow::Borrowed),
                })
                .collect();
            Model {
                magic: Cow::Borrowed(&m.magic),
                version: m.version,
                options: m.options,
                keys,
                names,
                groups,
            }
        }

        pub fn into_model(self) -> std::result::Result<super::Model, String> {
            if self.names.len() != self.keys.len() {
                return Err(format!(
                    "{} names for {} keys",
                    self.names.len(),
                    self.keys.len()
                ));
            }
            let names = self
                .keys
                .iter()
                .zip(self.names)
                .filter_map(|(&k, n)| n.map(|n| (k, n.into_owned())))
                .collect();
            let mut groups = Vec::with_capacity(self.groups.len());
            for g in self.groups {
                let mut classes = Vec::with_capacity(g.classes.len());
                for (c, t) in g.classes {
                    let t = t
                        .into_tree(&self.keys)
                        .map_err(|e| format!("class {c:?}: {e}"))?;
                    classes.push((c.into_owned(), t));
                }
                groups.push(GroupModel {
                    signature: g.signature.into_owned(),
                    processes: g.processes.into_owned(),
                    exes: g.exes.into_owned(),
                    commands: g.commands.into_owned(),
                    classes,
                    ending: g.ending.map(Cow::into_owned),
                });
            }
            Ok(super::Model {
                magic: self.magic.into_owned(),
                version: self.version,
                options: self.options,
                groups,
                names,
            })
        }
    }

    impl Tree {
        /// Nodes depth-first from the root, children in key order; those not reachable that
        /// way (their id is not derived from their parent's) are loose.
        fn from_tree(t: &TreeModel, at: &IdMap<u32>) -> Tree {
            let mut children: IdMap<Vec<(NodeKey, usize)>> = IdMap::default();
            for (i, n) in t.nodes.iter().enumerate() {
                if n.key.child_of(n.parent) == n.id {
                    children.entry(n.parent).or_default().push((n.key, i));
                }
            }
            for c in children.values_mut() {
                c.sort_by_key(|a| a.0);
            }
            let mut nodes = Vec::with_capacity(t.nodes.len());
            let mut reached = vec![false; t.nodes.len()];
            // Indices in `t.nodes` in the order written.
            let mut written: Vec<usize> = Vec::with_capacity(t.nodes.len());
            // (node index in `t.nodes`, its 1-based position in `nodes`; 0: the root).
            let mut stack: Vec<(u64, u32)> = vec![(ROOT, 0)];
            while let Some((id, pos)) = stack.pop() {
                if let Some(ch) = children.get(&id) {
                    // Pushed in reverse so that they come out in key order.
                    for &(_, i) in ch.iter().rev() {
                        let n = &t.nodes[i];
                        reached[i] = true;
                        written.push(i);
                        nodes.push((
                            pos,
                            kind_code(n.key.kind),
                            at[&n.key.site],
                            at[&n.key.callee],
                            n.key.outcome.code(),
                            n.p_sum,
                            n.models,
                        ));
                        stack.push((n.id, nodes.len() as u32));
                    }
                }
            }
            let loose = t
                .nodes
                .iter()
                .zip(&reached)
                .filter(|(_, &r)| !r)
                .map(|(n, _)| {
                    (
                        n.id,
                        n.parent,
                        kind_code(n.key.kind),
                        at[&n.key.site],
                        at[&n.key.callee],
                        n.key.outcome.code(),
                        n.p_sum,
                        n.models,
                    )
                })
                .collect::<Vec<Loose>>();
            // Positions (1-based) of the nodes as written: `nodes`, then `loose`.
            let mut pos: IdMap<u32> = IdMap::default();
            if !t.durations.is_empty() || !t.sizes.is_empty() {
                let mut order: Vec<usize> = Vec::with_capacity(t.nodes.len());
                order.extend(written.iter().copied());
                order.extend((0..t.nodes.len()).filter(|&i| !reached[i]));
                for (p, i) in order.into_iter().enumerate() {
                    pos.insert(t.nodes[i].id, p as u32 + 1);
                }
            }
            let mut durations: Vec<Dur> = t
                .durations
                .iter()
                .filter_map(|(id, d)| pos.get(id).map(|&p| (p, d.calls, d.max_ns, d.hist.clone())))
                .collect();
            durations.sort_by_key(|d| d.0);
            let mut sizes: Vec<Size> = t
                .sizes
                .iter()
                .filter_map(|(id, r)| pos.get(id).map(|&p| (p, r.units, r.lo, r.hi)))
                .collect();
            sizes.sort_by_key(|s| s.0);
            Tree {
                units: t.units,
                models: t.models,
                nodes,
                loose,
                durations,
                sizes,
            }
        }

        fn into_tree(self, keys: &[u64]) -> std::result::Result<TreeModel, String> {
            let key = |i: usize, kind: u8, site: u32, callee: u32, outcome: i32| {
                let part = |k: u32| {
                    keys.get(k as usize)
                        .copied()
                        .ok_or_else(|| format!("node {i}: key {k} out of range"))
                };
                Ok::<_, String>(NodeKey {
                    kind: kind_of(kind).ok_or_else(|| format!("node {i}: bad kind {kind}"))?,
                    site: part(site)?,
                    callee: part(callee)?,
                    outcome: Outcome::from_code(outcome)
                        .ok_or_else(|| format!("node {i}: bad outcome {outcome}"))?,
                })
            };
            let mut out: Vec<ModelNode> = Vec::with_capacity(self.nodes.len() + self.loose.len());
            for (i, (parent, kind, site, callee, outcome, p_sum, models)) in
                self.nodes.into_iter().enumerate()
            {
                let parent = match parent as usize {
                    0 => ROOT,
                    p if p <= i => out[p - 1].id,
                    p => return Err(format!("node {i}: parent {p} does not come before it")),
                };
                let key = key(i, kind, site, callee, outcome)?;
                out.push(ModelNode {
                    id: key.child_of(parent),
                    parent,
                    key,
                    p_sum,
                    models,
                });
            }
            let n = out.len();
            for (i, (id, parent, kind, site, callee, outcome, p_sum, models)) in
                self.loose.into_iter().enumerate()
            {
                out.push(ModelNode {
                    id,
                    parent,
                    key: key(n + i, kind, site, callee, outcome)?,
                    p_sum,
                    models,
                });
            }
            let mut durations = BTreeMap::new();
            for (node, calls, max_ns, hist) in self.durations {
                let id = match node as usize {
                    p if p >= 1 && p <= out.len() => out[p - 1].id,
                    p => return Err(format!("durations of node {p}: no such node")),
                };
                let d = Durations {
                    calls,
                    max_ns,
                    hist,
                };
                d.check()
                    .map_err(|e| format!("durations of node {node}: {e}"))?;
                if durations.insert(id, d).is_some() {
                    return Err(format!("durations of node {node} given twice"));
                }
            }
            let mut sizes = BTreeMap::new();
            for (node, units, lo, hi) in self.sizes {
                let id = match node as usize {
                    p if p >= 1 && p <= out.len() => out[p - 1].id,
                    p => return Err(format!("sizes of node {p}: no such node")),
                };
                let r = SizeRange { units, lo, hi };
                r.check()
                    .map_err(|e| format!("sizes of node {node}: {e}"))?;
                if sizes.insert(id, r).is_some() {
                    return Err(format!("sizes of node {node} given twice"));
                }
            }
            let mut t = TreeModel::from_nodes(self.units, self.models, out);
            t.durations = durations;
            t.sizes = sizes;
            if let Some(w) = t.nodes.windows(2).find(|w| w[0].id == w[1].id) {
                return Err(format!("two nodes with id {}", w[0].id));
            }
            Ok(t)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connections::ConnKey;
    use crate::trees::{NodeKind, Outcome};
    use crate::units::UnitKind;

    fn key(n: u64) -> NodeKey {
        NodeKey {
            kind: NodeKind::C,
            site: n,
            callee: n,
            outcome: Outcome::Any,
        }
    }

    #[test]
    fn coverage_probabilities() {
        // 4 units: a in all, b under a in 3, c under b in 1 (repeated calls count once).
        let mut trees = Vec::new();
        for i in 0..4 {
            let mut t = CallTree::default();
            let a = t.add(ROOT, key(1), 0);
            if i < 3 {
                let b = t.add(a, key(2), 0);
                if i == 0 {
                    t.add(b, key(3), 0);
                    t.add(b, key(3), 0);
                }
            }
            trees.push(t);
        }
        let m = TreeModel::from_trees(&trees);
        let a = key(1).child_of(ROOT);
        let b = key(2).child_of(a);
        let c = key(3).child_of(b);
        assert_eq!(m.units, 4);
        assert_eq!(m.get(a).unwrap().p(), 1.0);
        assert_eq!(m.get(b).unwrap().p(), 0.75);
        // A multiple of 2⁻³² (`quantize_p`): within half of one of 1/3.
        assert!((m.get(c).unwrap().p() - 1.0 / 3.0).abs() <= 0.5 / 4_294_967_296.0);
        assert_eq!(m.get(c).unwrap().p(), quantize_p(1.0 / 3.0));
    }

    #[test]
    fn merge_is_mean_and_associative() {
        let mk = |p: f64| {
            let mut t = TreeModel {
                units: 1,
                models: 1,
                nodes: vec![ModelNode {
                    id: 7,
                    parent: ROOT,
                    key: key(7),
                    p_sum: p,
                    models: 1,
                }],
                durations: BTreeMap::new(),
                sizes: BTreeMap::new(),
                index: IdMap::default(),
            };
            t.reindex();
            t
        };
        let mut ab = mk(1.0);
        ab.merge(&mk(0.5));
        let mut abc = ab.clone();
        abc.merge(&mk(0.0));
        let mut bc = mk(0.5);
        bc.merge(&mk(0.0));
        let mut abc2 = mk(1.0);
        abc2.merge(&bc);
        assert_eq!(ab.get(7).unwrap().p(), 0.75);
        assert_eq!(abc.get(7).unwrap().p(), 0.5);
        assert_eq!(abc2.get(7).unwrap().p(), 0.5);
        assert_eq!(abc.models, 3);
    }

    #[test]
    fn bad_model_files_are_named() {
        let p = Path::new("m.json");
        let e = Model::from_json(p, "{").unwrap_err().to_string();
        assert!(
            e.starts_with("m.json: not a usable Culprit model: not JSON"),
            "{e}"
        );
        let e = Model::from_json(p, r#"{"magic":"x","version":1}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("magic"), "{e}");
        let e = Model::from_json(p, r#"{"magic":"culprit-model","version":99}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("version 99"), "{e}");
        let m = Model::new(TreeOptions::default());
        let back = Model::from_json(p, &m.to_json()).unwrap();
        assert_eq!(back.version, VERSION);
        // A file of a format too old is refused, naming the file and the versions read.
        let v2 = r#"{"magic":"culprit-model","version":2,"options":{"outcome_aware":true},"groups":[],"names":{}}"#;
        let e = Model::from_json(p, v2).unwrap_err().to_string();
        assert!(
            e.starts_with("m.json: ")
                && e.contains("format version 2, this culprit reads versions 3 to 5"),
            "{e}"
        );
        // Versions 3 (no durations) and 4 (no send sizes) are read, and become models of
        // this version.
        for old in [3, 4] {
            let text = sample()
                .to_json()
                .replace("\"version\":5", &format!("\"version\":{old}"));
            assert!(text.contains(&format!("\"version\":{old}")));
            let back = Model::from_json(p, &text).unwrap();
            assert_eq!(back.version, VERSION);
            same(&sample(), &back);
        }
    }

    fn sample() -> Model {
        // Two processes' trees: a → {b → c (errno), d}; the second without d, with e.
        let lib = |site: u64, outcome| NodeKey {
            kind: NodeKind::Lib,
            site,
            callee: 13,
            outcome,
        };
        let mut g = GroupModel {
            signature: Signature(vec![1, 2]),
            processes: vec!["h:1".into(), "h:2".into()],
            exes: vec!["/bin/x".into()],
            commands: vec![vec!["--name".into(), "1".into()]],
            classes: Vec::new(),
            ending: None,
        };
        let mut trees = Vec::new();
        for i in 0..2 {
            let mut t = CallTree::default();
            let a = t.add(ROOT, key(100), 0);
            let b = t.add(a, key(200), 0);
            let c = t.add(b, lib(300, Outcome::Errno(104)), 0);
            t.nodes.get_mut(&c).unwrap().dur = crate::trees::Dur::from_ns(1000 * (i + 1));
            if i == 0 {
                let d = t.add(a, lib(400, Outcome::Ok), 0);
                // A send on a socket of 17 bytes (the round trip keeps its size range).
                t.nodes.get_mut(&d).unwrap().tally.add_size(5);
            } else {
                t.add(ROOT, key(500), 0);
            }
            trees.push(t);
        }
        let class = |kind| UnitClass {
            kind,
            main_thread: true,
            conn: ConnKey(vec![9, 8]),
        };
        g.classes
            .push((class(UnitKind::Handler), TreeModel::from_trees(&trees)));
        let mut half = TreeModel::from_trees(&trees[..1]);
        half.merge(&TreeModel::from_trees(&trees[1..]));
        g.classes.push((class(UnitKind::Loop), half));
        let mut m = Model::new(TreeOptions::default());
        m.add_group(&g);
        m.names.insert(100, "a (x.py:1)".into());
        m.names.insert(13, "recv".into());
        m.names.insert(77, "a name no node uses".into());
        m
    }

    fn same(a: &Model, b: &Model) {
        assert_eq!(a.options, b.options);
        assert_eq!(a.names, b.names);
        assert_eq!(a.groups.len(), b.groups.len());
        for (x, y) in a.groups.iter().zip(&b.groups) {
            assert_eq!(x.signature, y.signature);
            assert_eq!(x.processes, y.processes);
            assert_eq!(x.exes, y.exes);
            assert_eq!(x.commands, y.commands);
            assert_eq!(x.classes.len(), y.classes.len());
            for ((cx, tx), (cy, ty)) in x.classes.iter().zip(&y.classes) {
                assert_eq!(cx, cy);
                assert_eq!((tx.units, tx.models), (ty.units, ty.models));
                assert_eq!(tx.nodes, ty.nodes);
                assert_eq!(tx.durations, ty.durations);
                assert_eq!(tx.sizes, ty.sizes);
                for n in &ty.nodes {
                    assert_eq!(ty.get(n.id), Some(n), "index rebuilt");
                }
            }
        }
    }

    #[test]
    fn the_file_format_round_trips() {
        let p = Path::new("m.json");
        let m = sample();
        let text = m.to_json();
        let back = Model::from_json(p, &text).unwrap();
        same(&m, &back);
        assert_eq!(back.to_json(), text, "writing is deterministic");
        // Ids are derived, not stored: no node id appears in the file.
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let t = &v["groups"][0]["classes"][0][1];
        assert_eq!(t["nodes"].as_array().unwrap().len(), 5);
        assert!(t.get("loose").is_none());
        for n in &m.groups[0].classes[0].1.nodes {
            assert!(!text.contains(&n.id.to_string()), "id {} written", n.id);
        }
        // Parents come first: a at 1, b under it at 2, c under b at 3.
        assert_eq!(t["nodes"][0][0], 0);
        assert_eq!(v["keys"].as_array().unwrap().len(), 7);
        assert_eq!(v["names"].as_array().unwrap().len(), 7);

        // A node whose id is not derived from its parent's (or whose parent is missing) is
        // written whole, in `loose`, and read back exactly.
        let mut m2 = sample();
        let t2 = &mut m2.groups[0].classes[0].1;
        let mut nodes = t2.nodes.clone();
        nodes.push(ModelNode {
            id: 7,
            parent: ROOT,
            key: key(600),
            p_sum: 0.5,
            models: 1,
        });
        nodes.push(ModelNode {
            id: key(700).child_of(12345),
            parent: 12345,
            key: key(700),
            p_sum: 1.0,
            models: 1,
        });
        *t2 = TreeModel::from_nodes(t2.units, t2.models, nodes);
        let text2 = m2.to_json();
        let v2: serde_json::Value = serde_json::from_str(&text2).unwrap();
        assert_eq!(
            v2["groups"][0]["classes"][0][1]["loose"]
                .as_array()
                .unwrap()
                .len(),
            2
        );
        same(&m2, &Model::from_json(p, &text2).unwrap());
    }

    #[test]
    fn durations_are_learned_per_node_and_merge_like_one_learning() {
        let m = sample();
        let h = &m.groups[0].classes[0].1;
        assert_eq!(h.durations.len(), 1, "one timed node");
        let d = h.durations.values().next().unwrap();
        assert_eq!((d.samples(), d.calls, d.max_ns), (2, 2, 2000));
        // The loop class was merged from two one-tree models: the same durations.
        let l = &m.groups[0].classes[1].1;
        assert_eq!(l.durations, h.durations);
        // Written and read back exactly (the sample's round trip checks it), at the node.
        let v: serde_json::Value = serde_json::from_str(&m.to_json()).unwrap();
        let w = &v["groups"][0]["classes"][0][1]["durations"];
        assert_eq!(w.as_array().unwrap().len(), 1);
        let at = w[0][0].as_u64().unwrap() as usize;
        let node = &v["groups"][0]["classes"][0][1]["nodes"][at - 1];
        assert_eq!(
            node[1],
            NodeKind::Lib as u8,
            "the node written at {at} is c"
        );
        assert_eq!(w[0][1], 2);
    }

    #[test]
    fn malformed_durations_are_refused() {
        let p = Path::new("m.json");
        let text = sample().to_json();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let bad = |f: &dyn Fn(&mut serde_json::Value)| {
            let mut v = v.clone();
            f(&mut v["groups"][0]["classes"][0][1]["durations"][0]);
            Model::from_json(p, &v.to_string()).unwrap_err().to_string()
        };
        let e = bad(&|d| d[0] = 99.into());
        assert!(e.contains("durations of node 99: no such node"), "{e}");
        let e = bad(&|d| d[1] = 1.into());
        assert!(e.contains("1 calls for 2 samples"), "{e}");
        let e = bad(&|d| d[2] = 5_000_000.into());
        assert!(e.contains("last bucket"), "{e}");
        let e = bad(&|d| d[3][0][0] = 9999.into());
        assert!(e.contains("out of range"), "{e}");
        let e = bad(&|d| d[3] = serde_json::json!([]));
        assert!(e.contains("no sample"), "{e}");
        // Durations on a function node (a is node 1).
        let e = bad(&|d| d[0] = 1.into());
        assert!(e.contains("not a library call"), "{e}");
        // More samples than the class has units.
        let e = bad(&|d| {
            d[1] = 100.into();
            d[3][0][1] = 50.into();
        });
        assert!(e.contains("samples for 2 units"), "{e}");
    }

    #[test]
    fn malformed_sizes_are_refused() {
        let p = Path::new("m.json");
        let text = sample().to_json();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let sizes = &v["groups"][0]["classes"][0][1]["sizes"];
        assert_eq!(sizes.as_array().map(Vec::len), Some(1), "{text}");
        let bad = |f: &dyn Fn(&mut serde_json::Value)| {
            let mut v = v.clone();
            f(&mut v["groups"][0]["classes"][0][1]["sizes"][0]);
            Model::from_json(p, &v.to_string()).unwrap_err().to_string()
        };
        let e = bad(&|s| s[0] = 99.into());
        assert!(e.contains("sizes of node 99: no such node"), "{e}");
        let e = bad(&|s| s[1] = 0.into());
        assert!(e.contains("no unit"), "{e}");
        let e = bad(&|s| s[2] = 9.into());
        assert!(e.contains("out of order or range"), "{e}");
        let e = bad(&|s| s[3] = 64.into());
        assert!(e.contains("out of order or range"), "{e}");
        // Sizes on a function node (a is node 1).
        let e = bad(&|s| s[0] = 1.into());
        assert!(e.contains("not a library call"), "{e}");
        // More units than the class has.
        let e = bad(&|s| s[1] = 3.into());
        assert!(e.contains("3 units of 2"), "{e}");
    }

    #[test]
    fn malformed_nodes_are_refused() {
        let p = Path::new("m.json");
        let text = sample().to_json();
        let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let nodes = &mut v["groups"][0]["classes"][0][1]["nodes"];
        let bad =
            |v: &serde_json::Value| Model::from_json(p, &v.to_string()).unwrap_err().to_string();
        let saved = nodes[0].clone();
        nodes[0][0] = 3.into();
        assert!(
            bad(&v).contains("parent 3 does not come before it"),
            "{}",
            bad(&v)
        );
        v["groups"][0]["classes"][0][1]["nodes"][0] = saved.clone();
        v["groups"][0]["classes"][0][1]["nodes"][0][2] = 99.into();
        assert!(bad(&v).contains("key 99 out of range"), "{}", bad(&v));
        v["groups"][0]["classes"][0][1]["nodes"][0] = saved.clone();
        v["groups"][0]["classes"][0][1]["nodes"][0][1] = 9.into();
        assert!(bad(&v).contains("bad kind 9"), "{}", bad(&v));
        v["groups"][0]["classes"][0][1]["nodes"][0] = saved;
        v["names"].as_array_mut().unwrap().pop();
        assert!(bad(&v).contains("6 names for 7 keys"), "{}", bad(&v));
    }

    #[test]
    fn every_node_kind_round_trips() {
        for k in [
            NodeKind::C,
            NodeKind::Py,
            NodeKind::PyBuiltin,
            NodeKind::Lib,
            NodeKind::Exception,
        ] {
            let mut m = Model::new(TreeOptions::default());
            let mut t = CallTree::default();
            t.add(
                ROOT,
                NodeKey {
                    kind: k,
                    site: 1,
                    callee: 2,
                    outcome: Outcome::Any,
                },
                0,
            );
            m.add_group(&GroupModel {
                classes: vec![(
                    UnitClass {
                        kind: UnitKind::Loop,
                        main_thread: true,
                        conn: ConnKey::default(),
                    },
                    TreeModel::from_trees([&t]),
                )],
                ..Default::default()
            });
            let back = Model::from_json(Path::new("m"), &m.to_json()).unwrap();
            assert_eq!(back.groups[0].classes[0].1.nodes[0].key.kind, k);
        }
    }

    #[test]
    fn distinct_trees_count_like_coverage_also_past_their_bound() {
        use crate::trees::{CallTree, NodeKind, Outcome, TreeBuf};
        let key = |n: u64| NodeKey {
            kind: NodeKind::C,
            site: n,
            callee: n + 1,
            outcome: Outcome::Any,
        };
        // 4000 units of 40 nodes, 2500 of them distinct: past DISTINCT_NODES.
        let mut trees: Vec<CallTree> = Vec::new();
        let mut d = DistinctTrees::default();
        for u in 0..4000u64 {
            let mut t = TreeBuf::default();
            let v = (u * 7919) % 2500;
            let mut parent = ROOT;
            for i in 0..40u64 {
                let id = t.add(parent, key(i + ((v >> (i % 12)) & 1) * 100), i);
                if i % 3 == 0 {
                    parent = id;
                }
            }
            d.add(t.fingerprint(), t.nodes().iter().map(|(id, n)| (*id, n)));
            trees.push(t.to_tree());
        }
        assert!(
            !d.counts.is_empty(),
            "the bound was passed: trees were expanded"
        );
        // Coverage counted directly: per node, the units whose tree has it.
        let mut counts: IdMap<(u64, NodeKey, u64)> = IdMap::default();
        for t in &trees {
            for (&id, n) in &t.nodes {
                counts.entry(id).or_insert((n.parent, n.key, 0)).2 += 1;
            }
        }
        let want = TreeModel::from_counts(trees.len() as u64, &counts);
        let got = d.model();
        assert_eq!(got.units, want.units);
        assert_eq!(got.nodes, want.nodes);
    }
}
