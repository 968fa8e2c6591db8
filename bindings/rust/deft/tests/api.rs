//! The safe API: export, autograd, errors, and memory that follows ownership.
use deft::{
    backward, export, gpu_count, grad, invoke, live_arrays, live_bytes, wait_all, CachedOp,
    DeferredCompute, ErrorKind, NDArray, Op, Recording, Symbol,
};
use std::sync::Mutex;

/// The tests run one at a time: the leak tests read process-wide counters.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn plus(x: &NDArray, s: &str) -> NDArray {
    x.call("_plus_scalar", &[], &[("scalar", s)]).unwrap()
}

#[test]
fn deferred_compute_export_and_executor() {
    let _one = serial();
    let x = NDArray::from_slice(&[1.0f32, 2.0, 3.0], &[3]).unwrap();
    let (y, z) = {
        let _scope = DeferredCompute::enter().unwrap();
        let a = plus(&x, "5");
        let y = a.call("elemwise_mul", &[&a], &[]).unwrap(); // (x+5)*(x+5)
        let z = x.call("elemwise_mul", &[&x], &[]).unwrap(); // x*x
        (y, z)
    };
    assert!(y.is_lazy().unwrap() && z.is_lazy().unwrap());
    assert_eq!(y.shape().unwrap(), vec![3]);
    let sym = export(&[("x", &x)], &[("y", &y), ("z", &z)]).unwrap();
    assert_eq!(sym.list_inputs().unwrap(), vec!["x"]);
    assert_eq!(sym.list_outputs().unwrap().len(), 2);
    assert_eq!(y.to_vec::<f32>().unwrap(), vec![36.0, 49.0, 64.0]);
    let again = Symbol::from_json(&sym.to_json().unwrap()).unwrap();
    let run = CachedOp::new(&again).unwrap();
    let x2 = NDArray::from_slice(&[0.0f32, 1.0, 2.0], &[3]).unwrap();
    let outs = run.call(&[&x2]).unwrap();
    assert_eq!(outs[0].to_vec::<f32>().unwrap(), vec![25.0, 36.0, 49.0]);
    assert_eq!(outs[1].to_vec::<f32>().unwrap(), vec![0.0, 1.0, 4.0]);
}

#[test]
fn autograd_of_a_small_function() {
    let _one = serial();
    let x = NDArray::from_slice(&[1.0f64, 2.0, 3.0], &[3]).unwrap();
    let g = x.attach_grad().unwrap();
    let y = {
        let _rec = Recording::enter().unwrap();
        let sq = x.call("elemwise_mul", &[&x], &[]).unwrap();
        let cube = sq.call("elemwise_mul", &[&x], &[]).unwrap();
        cube.call("sum", &[], &[]).unwrap() // sum(x^3)
    };
    backward(&[&y]).unwrap();
    assert_eq!(g.to_vec::<f64>().unwrap(), vec![3.0, 12.0, 27.0]);
    let y2 = {
        let _rec = Recording::enter().unwrap();
        x.call("_mul_scalar", &[], &[("scalar", "4")])
            .unwrap()
            .call("sum", &[], &[])
            .unwrap()
    };
    let dx = grad(&[&y2], &[&x]).unwrap();
    assert_eq!(dx[0].to_vec::<f64>().unwrap(), vec![4.0, 4.0, 4.0]);
}

#[test]
fn errors_carry_the_c_message_and_kind() {
    let _one = serial();
    let err = NDArray::zeros::<f32>(&[2, -3]).err().unwrap();
    assert_eq!(err.kind, ErrorKind::Value);
    assert!(err.message.contains("shape[1] is -3"), "{}", err.message);
    let err = Op::find("no_such_op").err().unwrap();
    assert!(
        err.message.contains("unknown operator 'no_such_op'"),
        "{}",
        err.message
    );
    let x = NDArray::zeros::<f32>(&[2, 2]).unwrap();
    let err = invoke("sum", &[&x], &[("axis", "5")]).err().unwrap();
    assert_eq!(err.kind, ErrorKind::Index);
    let err = invoke("sum", &[&x], &[("axis", "a\0b")]).err().unwrap();
    assert_eq!(err.kind, ErrorKind::Argument);
    let err = x.to_vec::<f64>().err().unwrap(); // wrong element type
    assert_eq!(err.kind, ErrorKind::Type);
    assert_eq!(err.message, "the array is float32, not f64");
    let err = x.to_vec::<i32>().err().unwrap(); // same size, still refused
    assert_eq!(err.message, "the array is float32, not i32");
    assert_eq!(x.to_bools().err().unwrap().kind, ErrorKind::Type);
    let lazy = {
        let _scope = DeferredCompute::enter().unwrap();
        plus(&x, "1")
    };
    let err = lazy.copy_from(&[1.0f32; 4]).err().unwrap();
    assert!(err.message.contains("lazy"), "{}", err.message);
    assert!(Op::list().unwrap().len() > 100);
}

#[test]
fn dropping_100k_arrays_returns_the_counters_to_baseline() {
    let _one = serial();
    wait_all().unwrap();
    let (arrays, bytes) = (live_arrays().unwrap(), live_bytes().unwrap());
    {
        let x = NDArray::from_slice(&[1.0f32; 4], &[4]).unwrap();
        for _ in 0..100_000 {
            let y = plus(&x, "1");
            drop(y);
        }
        let w = NDArray::from_slice(&[1.0f32; 4], &[4]).unwrap();
        let _g = w.attach_grad().unwrap();
        for _ in 0..1000 {
            let _rec = Recording::enter().unwrap();
            let _lazy = {
                let _scope = DeferredCompute::enter().unwrap();
                plus(&w, "2")
            };
        }
    }
    wait_all().unwrap();
    assert_eq!(live_arrays().unwrap(), arrays);
    assert_eq!(live_bytes().unwrap(), bytes);
}

#[test]
fn arrays_freed_on_other_threads_while_this_one_computes() {
    let _one = serial();
    wait_all().unwrap();
    let arrays = live_arrays().unwrap();
    let x = NDArray::from_slice(&vec![1.0f32; 4096], &[4096]).unwrap();
    let made: Vec<NDArray> = (0..2000).map(|_| plus(&x, "3")).collect();
    let dropper = std::thread::spawn(move || drop(made)); // a "finalizer" thread
    let mut acc = plus(&x, "0");
    for _ in 0..200 {
        acc = acc.call("elemwise_add", &[&x], &[]).unwrap();
    }
    dropper.join().unwrap();
    assert_eq!(acc.to_vec::<f32>().unwrap()[0], 201.0);
    drop((acc, x));
    wait_all().unwrap();
    assert_eq!(live_arrays().unwrap(), arrays);
}

struct Cube;

impl deft::CustomOp for Cube {
    fn infer_shape(
        &self,
        in_shapes: &[Vec<i64>],
        in_dtypes: &[i32],
    ) -> deft::Result<(Vec<i64>, i32)> {
        Ok((in_shapes[0].clone(), in_dtypes[0]))
    }
    fn forward(&self, inputs: &[&NDArray], output: &NDArray, _is_train: bool) -> deft::Result<()> {
        let x = inputs[0];
        let cube = x
            .call("elemwise_mul", &[x], &[])?
            .call("elemwise_mul", &[x], &[])?;
        deft::Op::find("_copyto")?.invoke_into(&[&cube], &[output], &[])
    }
    fn backward(
        &self,
        dy: &NDArray,
        inputs: &[&NDArray],
        _y: &NDArray,
        dx: &[&NDArray],
    ) -> deft::Result<()> {
        let x = inputs[0];
        let three =
            x.call("elemwise_mul", &[x], &[])?
                .call("_mul_scalar", &[], &[("scalar", "3")])?;
        deft::Op::find("elemwise_mul")?.invoke_into(&[&three, dy], &[dx[0]], &[])
    }
    fn has_backward(&self) -> bool {
        true
    }
}

struct Failing;

impl deft::CustomOp for Failing {
    fn infer_shape(&self, s: &[Vec<i64>], d: &[i32]) -> deft::Result<(Vec<i64>, i32)> {
        Ok((s[0].clone(), d[0]))
    }
    fn forward(&self, _: &[&NDArray], _: &NDArray, _: bool) -> deft::Result<()> {
        panic!("a bug in the callback")
    }
}

#[test]
fn custom_operators_in_rust() {
    let _one = serial();
    deft::register_custom_op("rust_cube", 1, Cube).unwrap();
    let x = NDArray::from_slice(&[1.0f64, -2.0, 0.5], &[3]).unwrap();
    let y = invoke("rust_cube", &[&x], &[]).unwrap().remove(0);
    assert_eq!(y.to_vec::<f64>().unwrap(), vec![1.0, -8.0, 0.125]);
    let g = x.attach_grad().unwrap();
    let s = {
        let _rec = Recording::enter().unwrap();
        invoke("rust_cube", &[&x], &[])
            .unwrap()
            .remove(0)
            .call("sum", &[], &[])
            .unwrap()
    };
    backward(&[&s]).unwrap();
    assert_eq!(g.to_vec::<f64>().unwrap(), vec![3.0, 12.0, 0.75]);
    deft::register_custom_op("rust_failing", 1, Failing).unwrap();
    let z = invoke("rust_failing", &[&x], &[]).unwrap().remove(0);
    let err = z.to_vec::<f64>().err().unwrap();
    assert!(
        err.message
            .contains("the Rust callback panicked: a bug in the callback"),
        "{}",
        err.message
    );
    let _ = wait_all(); // reports this thread's failure; z keeps it
    let err = deft::register_custom_op("a::b", 1, Cube).err().unwrap();
    assert!(err.message.contains("'::'"), "{}", err.message);
}

#[test]
fn gpus_are_counted_and_a_missing_one_is_named() {
    let n = gpu_count().unwrap();
    assert!(n >= 0);
    let ctx = format!("gpu({})", n);
    match Op::find("_zeros")
        .unwrap()
        .invoke(&[], &[("shape", "(2,)"), ("ctx", &ctx)])
    {
        Err(err) => assert!(err.message.contains(&ctx), "{}", err.message),
        Ok(_) => panic!("an array on {} that does not exist", ctx),
    }
}

#[test]
fn every_dtype_has_a_reader() {
    let _one = serial();
    let cast = |x: &NDArray, dtype: &str| x.call("cast", &[], &[("dtype", dtype)]).unwrap();
    let x = NDArray::from_slice(&[0.0f32, 1.5, -2.0], &[3]).unwrap();
    assert_eq!(
        cast(&x, "float64").to_vec::<f64>().unwrap(),
        vec![0.0, 1.5, -2.0]
    );
    assert_eq!(cast(&x, "int32").to_vec::<i32>().unwrap(), vec![0, 1, -2]);
    assert_eq!(cast(&x, "int64").to_vec::<i64>().unwrap(), vec![0, 1, -2]);
    assert_eq!(cast(&x, "int8").to_vec::<i8>().unwrap(), vec![0, 1, -2]);
    assert_eq!(cast(&x, "uint8").to_vec::<u8>().unwrap()[..2], [0, 1]);
    assert_eq!(
        cast(&x, "bool").to_bools().unwrap(),
        vec![false, true, true]
    );
    // 1.5 and -2.0 are exact in both 16-bit formats.
    assert_eq!(
        cast(&x, "float16").to_f16_bits().unwrap(),
        vec![0x0000, 0x3e00, 0xc000]
    );
    assert_eq!(
        cast(&x, "bfloat16").to_bf16_bits().unwrap(),
        vec![0x0000, 0x3fc0, 0xc000]
    );
    let err = cast(&x, "float16").to_bf16_bits().err().unwrap();
    assert_eq!(err.message, "the array is float16, not bf16 bits");
}

#[test]
fn many_outputs_up_to_the_c_limit() {
    let _one = serial();
    let x = NDArray::from_slice(&(0..40).map(|i| i as f32).collect::<Vec<_>>(), &[40]).unwrap();
    let parts = invoke("split", &[&x], &[("num_outputs", "20"), ("axis", "0")]).unwrap();
    assert_eq!(parts.len(), 20);
    assert_eq!(parts[19].to_vec::<f32>().unwrap(), vec![38.0, 39.0]);
    let x = NDArray::zeros::<f32>(&[deft::MAX_OUTPUTS as i64]).unwrap();
    let n = deft::MAX_OUTPUTS.to_string();
    assert_eq!(
        invoke("split", &[&x], &[("num_outputs", &n), ("axis", "0")])
            .unwrap()
            .len(),
        64
    );
}
