//! The reader side: a taken sub-buffer that is not released goes back to the written
//! set (nothing is lost when saving fails), and release resets it for the next writer.

use bufpool::format::Kind;
use bufpool::{sys, Consumer, Pool, PoolConfig, State, WriterState};

#[test]
fn unreleased_sub_buffers_are_requeued_and_released_ones_reset() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = PoolConfig {
        n_subbufs: 2,
        subbuf_size: 8192,
        calibration: std::time::Duration::from_millis(1),
        ..Default::default()
    };
    let pool = Pool::create(dir.path().join("p"), &cfg).unwrap();
    let c = Consumer::new(&pool);
    assert!(c.take().is_none(), "nothing written yet");
    let me = pool.holder();
    let mut w = WriterState::new();
    w.attach(
        &pool,
        me.pid,
        sys::proc_stat(me.pid).unwrap().2,
        sys::gettid(),
    );
    assert!(w.append_fn(&pool, Kind::FnEnter, 7, 1, 2));
    w.flush(&pool, bufpool::layout::FLAG_THREAD_EXIT);
    let slot = {
        let t = c.take().unwrap();
        assert_eq!(pool.slots().load(t.slot()).unwrap().state, State::Reading);
        assert_eq!(t.info().seq, 0);
        assert_eq!(
            t.info().flags,
            bufpool::layout::FLAG_THREAD_EXIT | bufpool::layout::FLAG_FLUSH
        );
        t.slot()
        // dropped: saving "failed"
    };
    assert_eq!(pool.slots().load(slot).unwrap().state, State::Written);
    let t = c.take().unwrap();
    assert_eq!(t.slot(), slot);
    t.requeue();
    assert_eq!(pool.slots().load(slot).unwrap().state, State::Written);
    let t = c.take().unwrap();
    assert_eq!(t.data().len(), 20);
    t.release();
    assert_eq!(pool.slots().census(), [pool.n_subbufs(), 0, 0, 0, 0]);
    let h = pool.subbuf_info(slot);
    assert_eq!((h.bytes_used, h.pid, h.tid, h.flags), (0, 0, 0, 0));
    assert_eq!(h.magic, bufpool::layout::SUBBUF_MAGIC);
}
