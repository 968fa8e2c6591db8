//! Arrays made, shared, read and dropped from many threads at once: every
//! value read must be the one computed, with inputs dropped while the work
//! reading them may still be queued, and arrays of the same size made and
//! freed alongside (so freed memory is reused at once). Run under
//! `cargo +nightly test -Zsanitizer=address` as well where available.
use deft::NDArray;
use std::sync::Arc;
use std::thread;

const ROUNDS: usize = 300;
const N: usize = 64;

/// y = (x · x) + 1 with x = [i, i, ...]; x is dropped before y is read.
fn dot_plus_one(i: usize) -> NDArray {
    let x = NDArray::from_slice(&vec![i as f32; N * N], &[N as i64, N as i64]).unwrap();
    let y = x.call("dot", &[&x], &[]).unwrap();
    drop(x);
    y.call("_plus_scalar", &[], &[("scalar", "1")]).unwrap()
}

#[test]
fn threads_make_drop_and_read_arrays() {
    let shared = Arc::new(NDArray::from_slice(&[3.0f32; N], &[N as i64]).unwrap());
    let mut workers = Vec::new();
    for t in 0..4 {
        let shared = Arc::clone(&shared);
        workers.push(thread::spawn(move || {
            let mut wrong = 0;
            for round in 0..ROUNDS {
                let i = (t * ROUNDS + round) % 7;
                let y = dot_plus_one(i);
                let want = (i * i * N) as f32 + 1.0;
                wrong += y
                    .to_vec::<f32>()
                    .unwrap()
                    .iter()
                    .filter(|&&v| v != want)
                    .count();
                // The shared array, read from all threads while others drop clones.
                let s = shared.call("_mul_scalar", &[], &[("scalar", "2")]).unwrap();
                wrong += s
                    .to_vec::<f32>()
                    .unwrap()
                    .iter()
                    .filter(|&&v| v != 6.0)
                    .count();
            }
            wrong
        }));
    }
    // Churn: same-sized arrays made and freed, so a freed buffer is reused.
    let churn = thread::spawn(|| {
        for _ in 0..ROUNDS * 4 {
            let junk = NDArray::from_slice(&vec![-1.0f32; N * N], &[N as i64, N as i64]).unwrap();
            drop(junk.call("_plus_scalar", &[], &[("scalar", "-1")]).unwrap());
        }
    });
    drop(shared); // the workers' clones keep it
    let wrong: usize = workers.into_iter().map(|w| w.join().unwrap()).sum();
    churn.join().unwrap();
    assert_eq!(wrong, 0, "values read wrong");
}

#[test]
fn arrays_move_to_other_threads_and_drop_there() {
    let (send, receive) = std::sync::mpsc::channel::<(usize, NDArray)>();
    let reader = thread::spawn(move || {
        let mut wrong = 0;
        for (i, y) in receive {
            let want = (i * i * N) as f32 + 1.0;
            wrong += y
                .to_vec::<f32>()
                .unwrap()
                .iter()
                .filter(|&&v| v != want)
                .count();
        }
        wrong
    });
    for i in 0..ROUNDS {
        send.send((i % 5, dot_plus_one(i % 5))).unwrap(); // queued work, read elsewhere
    }
    drop(send);
    assert_eq!(reader.join().unwrap(), 0);
}
