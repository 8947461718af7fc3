//! Loading traces, for every analysis: decoding a trace directory's entries into
//! per-thread event streams ([`decode`]), and turning addresses and Python code indices
//! into stable keys and names ([`symbolize`]).

pub mod decode;
pub mod symbolize;
