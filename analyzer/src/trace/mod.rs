//! Loading traces, for every analysis: per-process loading of trace directories
//! ([`load`]), decoding their entries into per-thread event streams ([`decode`]), turning
//! addresses and Python code indices into stable keys and names ([`symbolize`]), and
//! traces built by hand for tests and benchmarks ([`builder`]).

pub mod builder;
pub mod clock;
pub mod decode;
pub mod discover;
pub mod elf;
pub mod load;
pub mod outline;
pub mod procname;
pub mod recorded;
pub mod runindex;
pub mod select;
pub mod symbolize;
pub mod unseen;
