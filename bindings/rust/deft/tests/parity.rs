//! What every binding reaches: autograd modes, CachedOp flags, the profiler,
//! DLPack and device selection.
use deft::ops::{self, DropoutOpts};
use deft::{
    profiler, CachedOp, CachedOpFlags, DeferredCompute, Device, ErrorKind, NDArray, Recording,
};

/// One test at a time: the profiler and the live-array count are process-wide.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn plus(x: &NDArray, s: f64) -> NDArray {
    ops::internal_plus_scalar(
        x,
        &ops::InternalPlusScalarOpts {
            scalar: Some(s),
            ..Default::default()
        },
    )
    .unwrap()
}

#[test]
fn no_grad_and_train_predict_modes() {
    let _one = serial();
    let x = NDArray::from_slice(&[1.0f32, 2.0], &[2]).unwrap();
    let _g = x.attach_grad().unwrap();
    let _rec = Recording::enter().unwrap();
    assert!(deft::is_recording().unwrap() && deft::is_training().unwrap());
    let unrecorded = {
        let _off = deft::no_grad().unwrap();
        // As Python's pause(): neither recording nor training.
        assert!(!deft::is_recording().unwrap() && !deft::is_training().unwrap());
        ops::elemwise_mul(&x, &x).unwrap()
    };
    assert!(
        deft::is_recording().unwrap() && deft::is_training().unwrap(),
        "the guard puts both back"
    );
    // Not recorded: nothing to differentiate.
    assert!(deft::backward(&[&unrecorded]).is_err());
    let recorded = ops::elemwise_mul(&x, &x).unwrap();
    deft::backward(&[&recorded]).unwrap();

    let ones = NDArray::from_slice(&[1.0f32; 1000], &[1000]).unwrap();
    let dropped = |y: NDArray| {
        y.to_vec::<f32>()
            .unwrap()
            .iter()
            .filter(|&&v| v == 0.0)
            .count()
    };
    {
        let _predict = deft::predict_mode().unwrap();
        assert!(!deft::is_training().unwrap());
        assert_eq!(
            dropped(ops::dropout(&ones, &DropoutOpts::default()).unwrap()),
            0
        );
    }
    let _train = deft::train_mode().unwrap();
    assert!(dropped(ops::dropout(&ones, &DropoutOpts::default()).unwrap()) > 100);
}

/// y = x * x + 1 as a symbol.
fn square_plus_one() -> deft::Symbol {
    let x = NDArray::from_slice(&[0.0f32; 3], &[3]).unwrap();
    let y = {
        let _dc = DeferredCompute::enter().unwrap();
        plus(&ops::elemwise_mul(&x, &x).unwrap(), 1.0)
    };
    deft::export(&[("x", &x)], &[("y", &y)]).unwrap()
}

#[test]
fn cached_op_flags() {
    let _one = serial();
    let sym = square_plus_one();
    let x = NDArray::from_slice(&[1.0f32, 2.0, 3.0], &[3]).unwrap();
    for flags in [
        CachedOpFlags::default(),
        CachedOpFlags::NO_MEMORY_PLAN,
        CachedOpFlags::FUSE,
    ] {
        let y = CachedOp::with_flags(&sym, flags)
            .unwrap()
            .call(&[&x])
            .unwrap();
        assert_eq!(
            y[0].to_vec::<f32>().unwrap(),
            vec![2.0, 5.0, 10.0],
            "{flags:?}"
        );
    }
    // Forward and backward: inputs x and y's head gradient; outputs y, dy/dx.
    let both = CachedOp::with_flags(&sym, CachedOpFlags::BACKWARD | CachedOpFlags::FUSE).unwrap();
    let head = NDArray::from_slice(&[1.0f32, 1.0, 0.5], &[3]).unwrap();
    let out = both.call(&[&x, &head]).unwrap();
    assert_eq!(out.len(), 2);
    assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![2.0, 5.0, 10.0]);
    assert_eq!(out[1].to_vec::<f32>().unwrap(), vec![2.0, 4.0, 3.0]);
}

#[test]
fn profiler_statistics_domains_and_markers() {
    let _one = serial();
    let trace = std::env::temp_dir().join(format!("deft_rust_profile_{}.json", std::process::id()));
    let trace_name = trace.to_str().unwrap();
    profiler::set_config(&[
        ("profile_all", "true"),
        ("aggregate_stats", "true"),
        ("filename", trace_name),
    ])
    .unwrap();
    profiler::reset().unwrap();
    profiler::start().unwrap();
    let domain = profiler::Domain::new("rust_domain").unwrap();
    let task = domain.object(profiler::Kind::Task, "rust_task").unwrap();
    task.start().unwrap();
    let x = NDArray::from_slice(&[1.0f32], &[1]).unwrap();
    plus(&x, 1.0).wait_to_read().unwrap();
    task.stop().unwrap();
    let counter = domain
        .object(profiler::Kind::Counter, "rust_counter")
        .unwrap();
    counter.set_counter(5, false).unwrap();
    counter.set_counter(2, true).unwrap();
    domain.marker("rust_marker", "process").unwrap();
    assert_eq!(
        domain.marker("m", "galaxy").err().unwrap().kind,
        ErrorKind::Value
    );
    assert!(
        task.set_counter(1, false).is_err(),
        "a task is not a counter"
    );
    profiler::stop().unwrap();
    let stats = profiler::dumps(true, true).unwrap();
    assert!(stats.contains("_plus_scalar"), "{stats}");
    profiler::dump(true).unwrap();
    let events = std::fs::read_to_string(&trace).unwrap();
    std::fs::remove_file(&trace).unwrap();
    for name in ["rust_task", "rust_counter", "rust_marker", "rust_domain"] {
        assert!(events.contains(name), "{name} not in the trace:\n{events}");
    }
    assert!(profiler::set_config(&[("no_such_option", "1")]).is_err());
}

#[test]
fn dlpack_out_and_in() {
    let _one = serial();
    let x = NDArray::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    let lent = plus(&x, 1.0).to_dlpack().unwrap(); // the array is dropped at once
    assert_eq!(lent.shape(), &[2, 2]);
    assert_eq!(lent.to_vec::<f32>().unwrap(), vec![2.0, 3.0, 4.0, 5.0]);
    assert_eq!(lent.to_vec::<i32>().err().unwrap().kind, ErrorKind::Type);
    // Back in, without a copy: the new array reads the same memory.
    let address = lent.data_ptr();
    let y = NDArray::from_dlpack(lent).unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), vec![2.0, 3.0, 4.0, 5.0]);
    assert_eq!(y.to_dlpack().unwrap().data_ptr(), address);
    let before = deft::live_arrays().unwrap();
    drop(y);
    assert_eq!(deft::live_arrays().unwrap(), before - 1);
}

#[test]
fn devices_are_chosen_by_value() {
    let _one = serial();
    let a = NDArray::zeros_on::<f32>(&[2], Device::Cpu).unwrap();
    assert_eq!(a.device().unwrap(), Device::Cpu);
    let n = deft::gpu_count().unwrap();
    let missing = Device::Gpu(n);
    let err = NDArray::zeros_on::<f32>(&[2], missing).err().unwrap();
    assert!(
        err.message.contains(&missing.to_string()),
        "{}",
        err.message
    );
    if n > 0 {
        let x = NDArray::from_slice(&[1.0f32, -2.0], &[2]).unwrap();
        let on_gpu = x.copy_to(Device::Gpu(0)).unwrap();
        assert_eq!(on_gpu.device().unwrap(), Device::Gpu(0));
        let y = ops::relu(&on_gpu).unwrap();
        assert_eq!(
            y.copy_to(Device::Cpu).unwrap().to_vec::<f32>().unwrap(),
            vec![1.0, 0.0]
        );
    }
}
