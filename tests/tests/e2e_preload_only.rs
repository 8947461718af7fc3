//! Issue 5's end-to-end story with an `LD_PRELOAD`-only trace of an unmodified C server:
//! the C ring (`tests/e2e/ring_node.c`) compiled WITHOUT `-finstrument-functions`, its
//! header read with `read(2)` (`-DHEADER_READ`), so the trace holds library calls keyed by
//! call site and no function entry at all. In the faulty run the `read` of job 4's header
//! on node 2 fails with ECONNRESET: node 2 closes its lhs connection with data unread, node
//! 1 gets the reset, the ring hangs. The ranking must localize it from library calls alone.

#[path = "../e2e/common.rs"]
mod common;

use common::*;

#[test]
fn a_reset_header_read_in_an_uninstrumented_c_ring_is_ranked_first() {
    let tmp = tempfile::tempdir().expect("temporary directory");
    let (model, faulty, units, _prog) = c_ring_story(
        &CRingStory {
            name: "C ring (LD_PRELOAD only)",
            // Frame pointers: without them libtrace.so records stack addresses as return
            // addresses and the launcher's signature changes from run to run (see the
            // e2e report); still no instrumentation.
            cflags: &["-DHEADER_READ", "-fno-omit-frame-pointer"],
            // Node 2's reads: the hello header, then one header per job: the 6th is job 4's.
            fault: "read:errno=ECONNRESET,argv=--id 2 --nodes,nth=6",
            broken: 2,
            peer: 1,
            fn_entries: false,
        },
        tmp.path(),
    );
    check_show(&model, &faulty, &units[0]);
}
