//! Shared helpers of the benchmark binaries in `src/bin/` (one per area). Each binary
//! measures Culprit next to the tool people would use instead, in the same run, and
//! prints a Markdown table of ns/event and ratios. Figures are kept in `bench/RESULTS.md`.

pub mod live;
