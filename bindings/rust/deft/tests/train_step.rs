//! `Symbol::train_step`: a whole training step as one `CachedOp` call.
use deft::{export, CachedOp, DeferredCompute, ErrorKind, NDArray, Symbol};
use std::collections::HashMap;

/// loss = square(w * x), elementwise: with a head gradient of ones, the
/// gradient is 2 w x^2.
fn squared_loss(x: &NDArray, w: &NDArray) -> Symbol {
    let loss = {
        let _scope = DeferredCompute::enter().unwrap();
        let wx = w.call("elemwise_mul", &[x], &[]).unwrap();
        wx.call("square", &[], &[]).unwrap()
    };
    export(&[("x", x), ("w", w)], &[("loss", &loss)]).unwrap()
}

fn assert_near(got: &[f64], want: &[f64], what: &str) {
    let close = |(g, w): (&f64, &f64)| (g - w).abs() <= 1e-12 * (1.0 + w.abs());
    assert!(
        got.len() == want.len() && got.iter().zip(want).all(close),
        "{what}: {got:?}, want {want:?}"
    );
}

/// Three steps update w and its momentum in place as MXNet's SGD with
/// momentum does: mom = momentum mom - lr (rescale grad + wd w); w += mom.
/// Each step's loss is that of the weight before it.
#[test]
fn steps_follow_sgd_momentum() {
    let xs = [1.0, -2.0, 0.5];
    let mut want = vec![0.5, 0.25, -1.0];
    let mut want_mom = vec![0.0; 3];
    let (lr, wd, rescale, momentum) = (0.1, 0.01, 0.5, 0.9);
    let x = NDArray::from_slice(&xs, &[3]).unwrap();
    let w = NDArray::from_slice(&want, &[3]).unwrap();
    let hyper = NDArray::from_slice(&[lr, wd, rescale, -1.0, momentum, 0.0, 0.0], &[7]).unwrap();
    let mom = NDArray::zeros::<f64>(&[3]).unwrap();
    let step = squared_loss(&x, &w).train_step("sgd_mom", &["w"]).unwrap();
    let (args, aux) = (
        step.list_inputs().unwrap(),
        step.list_auxiliary_states().unwrap(),
    );
    assert_eq!(aux, vec!["w_mom"]);
    assert_eq!(args.len(), 3, "{args:?}");
    let given = HashMap::from([
        ("x", &x),
        ("w", &w),
        ("step_hyper", &hyper),
        ("w_mom", &mom),
    ]);
    let inputs: Vec<&NDArray> = args
        .iter()
        .chain(&aux)
        .map(|name| *given.get(name.as_str()).expect(name))
        .collect();
    let run = CachedOp::new(&step).unwrap();
    for s in 0..3 {
        let outs = run.call(&inputs).unwrap();
        assert_eq!(outs.len(), 2, "the loss, the updates' empty output");
        let mut want_loss = vec![0.0; 3];
        for i in 0..3 {
            want_loss[i] = (want[i] * xs[i]) * (want[i] * xs[i]);
            let grad = 2.0 * want[i] * xs[i] * xs[i];
            want_mom[i] = momentum * want_mom[i] - lr * (rescale * grad + wd * want[i]);
            want[i] += want_mom[i];
        }
        let loss = outs[0].to_vec::<f64>().unwrap();
        assert_near(&loss, &want_loss, &format!("loss, step {s}"));
        assert_near(&w.to_vec::<f64>().unwrap(), &want, &format!("w, step {s}"));
        assert_near(
            &mom.to_vec::<f64>().unwrap(),
            &want_mom,
            &format!("w_mom, step {s}"),
        );
    }
}

#[test]
fn bad_steps_name_what_is_wrong() {
    let x = NDArray::from_slice(&[1.0f64, 2.0], &[2]).unwrap();
    let w = NDArray::from_slice(&[3.0f64, 4.0], &[2]).unwrap();
    let loss = squared_loss(&x, &w);
    for (optimizer, param, want) in [
        (
            "lbfgs",
            "w",
            "optimizer is 'lbfgs', expected one of sgd, sgd_mom, adam, adamw",
        ),
        (
            "sgd_mom",
            "v",
            "params[0] is 'v', which is not an argument of the loss",
        ),
    ] {
        let err = loss.train_step(optimizer, &[param]).err().unwrap();
        assert_eq!(err.kind, ErrorKind::Value);
        assert!(err.message.contains(want), "{}", err.message);
    }
    let err = loss.train_step("sgd", &["w\0"]).err().unwrap();
    assert_eq!(err.kind, ErrorKind::Argument);
}
