//! The paper's method (Maruyama & Matsuoka, IPDPS'08): cut each process's events into
//! execution units ([`units`]), build each unit's call tree ([`trees`]) with its
//! connections ([`connections`]), learn per-group models of normal runs ([`model`]),
//! score a faulty run's units against them ([`score`]) and order them (`ranking`).

pub mod baselines;
pub mod connections;
pub mod consequence;
pub mod durations;
pub mod ending;
pub mod evidence;
pub(crate) mod interned;
pub mod learn;
pub mod model;
pub mod model_check;
pub mod narrative;
pub mod options;
pub mod partial;
mod pipeline;
pub mod rank;
pub(crate) mod ranking;
pub(crate) mod rows;
pub mod score;
pub mod show;
pub mod sizes;
pub mod trees;
pub mod units;
pub mod weigh;
