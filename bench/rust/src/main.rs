//! Per-call cost of `x + 1` on a 1-element float32 array from Rust, against
//! the same call made from C (c_loop.c) in the same process and run.
//!
//!     cd bench/rust && cargo run --release --offline
//!
//! Rust is timed four ways, each result dropped (freed) at once, the time
//! including the Drop: the generated `ops::internal_plus_scalar` (a typed
//! f64 parameter, formatted per call), through an [`Op`] found once with a
//! string parameter (`invoke_one`, and `invoke`, which returns a Vec), and
//! `NDArray::call` (which finds the operator by name
//! each time). Rounds alternate; min and
//! median per call are printed, with the load average.
use deft::{ops, NDArray, Op};
use std::os::raw::c_int;
use std::time::Instant;

extern "C" {
    fn deft_bench_plus_scalar_calls(x: deft_sys::DeftNDArrayHandle, n: c_int) -> c_int;
}

const CALLS: usize = 200_000;
const ROUNDS: usize = 7;

fn per_call(start: Instant) -> f64 {
    start.elapsed().as_nanos() as f64 / CALLS as f64
}

fn c_loop(x: &NDArray) -> f64 {
    let start = Instant::now();
    assert_eq!(
        unsafe { deft_bench_plus_scalar_calls(x.as_raw(), CALLS as c_int) },
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

fn rust_typed(x: &NDArray) -> f64 {
    let opts = ops::InternalPlusScalarOpts {
        scalar: Some(1.0),
        ..Default::default()
    };
    let start = Instant::now();
    for _ in 0..CALLS {
        drop(ops::internal_plus_scalar(x, &opts).unwrap());
    }
    deft::wait_all().unwrap();
    per_call(start)
}

fn rust_op_one(x: &NDArray) -> f64 {
    let plus = Op::find("_plus_scalar").unwrap();
    let start = Instant::now();
    for _ in 0..CALLS {
        drop(plus.invoke_one(&[x], &[("scalar", "1")]).unwrap());
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
    type Variant = (&'static str, fn(&NDArray) -> f64);
    let variants: [Variant; 5] = [
        ("C", c_loop),
        ("Rust, ops:: typed + Drop", rust_typed),
        ("Rust, Op::invoke_one + Drop", rust_op_one),
        ("Rust, Op::invoke (Vec) + Drop", rust_op),
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
            "  {name:<30} {min:7.0} / {median:7.0} ns (min / median)  {:5.2}x C",
            median / c_median
        );
    }
}
