//! ops.rs is what the generator makes from the registry now, and the
//! generated functions run.
#[path = "../examples/gen_ops.rs"]
mod gen_ops;

use deft::ops::{self, SplitOpts};
use deft::NDArray;

#[test]
fn generated_ops_are_current() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/ops.rs");
    let committed = std::fs::read_to_string(&path).unwrap();
    let now = gen_ops::generate(&deft::operators().unwrap());
    assert!(
        committed == now,
        "src/ops.rs differs from the registry: run `cargo run --offline --example gen_ops > deft/src/ops.rs`"
    );
}

#[test]
fn typed_functions_run() {
    let x = NDArray::from_slice(&[-1.0f32, 2.0, 3.0, -4.0], &[4]).unwrap();
    assert_eq!(
        ops::relu(&x).unwrap().to_vec::<f32>().unwrap(),
        vec![0.0, 2.0, 3.0, 0.0]
    );
    let y = ops::internal_plus_scalar(
        &x,
        &ops::InternalPlusScalarOpts {
            scalar: Some(1.5),
            ..Default::default()
        },
    );
    assert_eq!(
        y.unwrap().to_vec::<f32>().unwrap(),
        vec![0.5, 3.5, 4.5, -2.5]
    );
    let parts = ops::split(
        &x,
        2,
        &SplitOpts {
            axis: Some(0),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(parts.len(), 2);
    assert_eq!(parts[1].to_vec::<f32>().unwrap(), vec![3.0, -4.0]);
    // A tuple parameter and an error from the registry's check.
    let m = ops::reshape(&x, &[2, 2], &ops::ReshapeOpts::default()).unwrap();
    assert_eq!(m.shape().unwrap(), vec![2, 2]);
    let err = ops::split(
        &x,
        3,
        &SplitOpts {
            axis: Some(0),
            ..Default::default()
        },
    )
    .err()
    .unwrap();
    assert!(err.message.contains("split"), "{}", err.message);
}
