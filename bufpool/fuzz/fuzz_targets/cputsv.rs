//! Fuzz target: a trace directory's `cpu.tsv` (the reader's CPU samples) of any bytes:
//! reading it and turning it into CPU time per interval never panics (lines that do not
//! parse are dropped) and gives no negative or non-finite time.
#![no_main]

use analyzer::demand::busy::Grid;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let dir = std::env::temp_dir().join(format!("culprit-fuzz-cpu-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(reader::cpustat::CPU_FILE), data).unwrap();
    let Ok(samples) = reader::cpustat::read_samples(&dir) else {
        return;
    };
    let grid = Grid {
        t0_ns: 0,
        len_ns: 1_000_000_000,
    };
    for v in analyzer::demand::cpu::per_interval(&samples, grid, 0, 64).into_iter().flatten() {
        assert!(v.is_finite() && v >= 0.0, "{v}");
    }
});
