//! The in-place encoders of the writer (`append_fn`, `append_ret`) write exactly the
//! bytes of `encode_fn`/`encode_ret`, across sub-buffer boundaries.

use bufpool::format::{encode_fn, encode_ret, Kind};
use bufpool::{sys, Consumer, Pool, PoolConfig, WriterState};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn in_place_encoding_matches_the_encoder(
        events in proptest::collection::vec((any::<bool>(), any::<u64>(), any::<u64>(), any::<u64>(), any::<u16>()), 1..2000),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let cfg = PoolConfig { n_subbufs: 8, subbuf_size: 8192,
                               calibration: std::time::Duration::from_millis(1), ..Default::default() };
        let pool = Pool::create(dir.path().join("p"), &cfg).unwrap();
        let me = pool.holder();
        let mut w = WriterState::new();
        w.attach(&pool, me.pid, sys::proc_stat(me.pid).unwrap().2, sys::gettid());
        let c = Consumer::new(&pool);
        let (mut want, mut got) = (Vec::new(), Vec::new());
        for (i, &(call, tsc, a, b, aux)) in events.iter().enumerate() {
            if call {
                let k = [Kind::FnEnter, Kind::PyCall, Kind::PyCCall, Kind::PyExc][i % 4];
                want.extend_from_slice(encode_fn(k, tsc, a, b).as_bytes());
                prop_assert!(w.append_fn(&pool, k, tsc, a, b));
            } else {
                let k = [Kind::FnExit, Kind::PyReturn, Kind::PyCReturn][i % 3];
                want.extend_from_slice(encode_ret(k, tsc, b, aux).as_bytes());
                prop_assert!(w.append_ret(&pool, k, tsc, b, aux));
            }
            // Drain as we go so the writer never runs out.
            if i % 256 == 0 {
                while let Some(t) = c.take() { got.push((t.info().seq, t.data().to_vec())); t.release(); }
            }
        }
        w.flush(&pool, 0);
        while let Some(t) = c.take() { got.push((t.info().seq, t.data().to_vec())); t.release(); }
        prop_assert_eq!(w.lost_total, 0);
        got.sort();
        let got: Vec<u8> = got.into_iter().flat_map(|(_, d)| d).collect();
        prop_assert_eq!(got, want);
    }
}

#[test]
fn re_attaching_publishes_the_held_sub_buffer_and_a_forked_copy_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = PoolConfig {
        n_subbufs: 4,
        subbuf_size: 8192,
        calibration: std::time::Duration::from_millis(1),
        ..Default::default()
    };
    let pool = Pool::create(dir.path().join("p"), &cfg).unwrap();
    let me = pool.holder();
    let start = sys::proc_stat(me.pid).unwrap().2;
    let mut w = WriterState::new();
    w.attach(&pool, me.pid, start, sys::gettid());
    assert!(w.append_fn(&pool, Kind::FnEnter, 1, 2, 3));
    // A forked child re-attaches its copy under its own pid: the parent's sub-buffer
    // must stay the parent's.
    let mut child_copy = WriterState { ..w };
    child_copy.attach(&pool, me.pid + 1, 5, 77);
    assert_eq!(
        pool.slots().census(),
        [3 + pool.meta_area().len(), 1, 0, 0, 0]
    );
    assert!(!child_copy.holds());
    // The same thread re-attaching publishes what it held.
    w.attach(&pool, me.pid, start, sys::gettid());
    assert_eq!(
        pool.slots().census(),
        [3 + pool.meta_area().len(), 0, 1, 0, 0]
    );
}
