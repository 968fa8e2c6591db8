//! Native memory follows ownership: an array's storage goes back when its
//! NDArray drops (or when the last queued operation reading it finishes),
//! so Rust needs no collector bound like Go's DEFT_GO_GC_BYTES or Java's.
//! The loop (arrays made and dropped without any explicit free)
//! must peak under 64 MiB of native storage. The peak counter is
//! process-wide and the engine's queue bound is read once, so each case
//! runs in a child process: this test binary, re-run on one test.
use deft::{peak_bytes, wait_all, NDArray};
use std::process::Command;

const CHILD: &str = "DEFT_RUST_PRESSURE";

/// `loops` times: y = x + 1 on `size` floats, y dropped at once.
fn pressure_loop(loops: usize, size: usize) {
    let x = NDArray::from_slice(&vec![1.0f32; size], &[size as i64]).unwrap();
    for _ in 0..loops {
        let y = x.call("_plus_scalar", &[], &[("scalar", "1")]).unwrap();
        drop(y);
    }
    wait_all().unwrap();
}

#[test]
fn pressure_child() {
    let Ok(spec) = std::env::var(CHILD) else {
        return; // run by dropped_arrays_peak_under_64_mib in a child process
    };
    let (loops, size) = spec.split_once(',').unwrap();
    pressure_loop(loops.parse().unwrap(), size.parse().unwrap());
    println!("native peak {} bytes", peak_bytes().unwrap());
}

fn child_peak(loops: usize, size: usize, env: &[(&str, &str)]) -> i64 {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "pressure_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, format!("{loops},{size}"))
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "child failed:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text.lines()
        .find_map(|l| {
            l.split("native peak ")
                .nth(1)?
                .strip_suffix(" bytes")?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("child printed no peak:\n{text}"))
}

/// Calls on 16 KiB run on the calling thread (their input and output are
/// under the engine's 64 KiB inline size), so each result is freed as it
/// drops: 20,000 of them would be 312 MiB. Calls on 1 MiB run on the
/// engine's threads, and the bytes of work queued there are bounded by
/// DEFT_ENGINE_MAX_PENDING_BYTES (default 1 GiB), not by ownership: a
/// dropped result lives until the queued operation that writes it is done.
/// That case sets the bound to 16 MiB, as Go's test does.
#[test]
fn dropped_arrays_peak_under_64_mib() {
    const LIMIT: i64 = 64 << 20;
    let cases: [(&str, usize, usize, &[(&str, &str)]); 2] = [
        ("20000 x 16 KiB", 20000, 1 << 12, &[]),
        (
            "1000 x 1 MiB, engine queue 16 MiB",
            1000,
            1 << 18,
            &[("DEFT_ENGINE_MAX_PENDING_BYTES", "16777216")],
        ),
    ];
    for (name, loops, size, env) in cases {
        let peak = child_peak(loops, size, env);
        eprintln!(
            "{name}: native peak {:.1} MiB",
            peak as f64 / (1 << 20) as f64
        );
        assert!(
            peak < LIMIT,
            "{name}: native peak {peak} bytes, want < {LIMIT}"
        );
        // The loop really allocated: at least x and one result.
        assert!(
            peak >= 2 * 4 * size as i64,
            "{name}: peak {peak} is below two arrays"
        );
    }
}
