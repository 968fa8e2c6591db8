//! Per-call cost of `x + 1` on a 1-element float32 array from Rust, against
//! the same call made from C (c_loop.c) in the same process and run.
//!
//!     cd bench/rust && cargo run --release --offline
//!
//! Rust is timed two ways, each result dropped (freed) at once, the time
//! including the Drop: through an [`Op`] found once, and `NDArray::call`
//! (which finds the operator by name each time). Rounds alternate; min and
//! median per call are printed, with the load average.
use deft::{NDArray, Op};
use std::os::raw::c_int;
use std::time::Instant;

extern "C" {
    fn c_plus_scalar_calls(x: deft_sys::DeftNDArrayHandle, n: c_int) -> c_int;
}

const CALLS: usize = 200_000;
const ROUNDS: usize = 7;

fn per_call(start: Instant) -> f64 {
    start.elapsed().as_nanos() as f64 / CALLS as f64
}

fn c_loop(x: &NDArray) -> f64 {
    let start = Instant::now();
    assert_eq!(
        unsafe { c_plus_scalar_calls(x.as_raw(), CALLS as c_int) },
        0
    );
    per_call(start)
}

fn rust_op(x: &NDArray) -> f64 {
    let plus = Op::find("_plus_scalar").unwrap();
    let start = Instant::now();
    for _ in 0..CALLS {
        drop(plus.invoke(&[x], &[("scalar", "1")]).unwrap());
    }
    deft::wait_all().unwrap();
    per_call(start)
}

fn rust_call(x: &NDArray) -> f64 {
    let start = Instant::now();
    for _ in 0..CALLS {
        drop(x.call("_plus_scalar", &[], &[("scalar", "1")]).unwrap());
    }
    deft::wait_all().unwrap();
    per_call(start)
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|_| "unknown".into())
}

fn min_median(values: &[f64]) -> (f64, f64) {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    (sorted[0], sorted[sorted.len() / 2])
}

fn main() {
    let x = NDArray::from_slice(&[1.0f32], &[1]).unwrap();
    let variants: [(&str, fn(&NDArray) -> f64); 3] = [
        ("C", c_loop),
        ("Rust, Op::invoke + Drop", rust_op),
        ("Rust, NDArray::call + Drop", rust_call),
    ];
    let mut times = vec![Vec::new(); variants.len()];
    for _ in 0..ROUNDS {
        for (i, (_, run)) in variants.iter().enumerate() {
            times[i].push(run(&x));
        }
    }
    println!(
        "x + 1 on a 1-element float32 array, {CALLS} calls x {ROUNDS} rounds, load average {}",
        load_average()
    );
    let (_, c_median) = min_median(&times[0]);
    for ((name, _), t) in variants.iter().zip(&times) {
        let (min, median) = min_median(t);
        println!(
            "  {name:<28} {min:7.0} / {median:7.0} ns (min / median)  {:5.2}x C",
            median / c_median
        );
    }
}
