"""The MXNet 1.9.1 conformance corpus: graphs, parameters, inputs, and what
MXNet computes from them, for deft to match (tests/mxnet/test_corpus.py).

Run with the oracle (scripts/mxnet-oracle.sh). For each case, in corpus/:
  <name>-symbol.json    the graph, as MXNet saves it
  <name>-0000.params    its parameters, "arg:NAME" and "aux:NAME" (MXNet's format);
                        left out when large: corpus_values.py rebuilds it
  <name>-inputs.params  the data inputs, by argument name
  <name>-outputs.params MXNet's forward outputs (is_train=False), by output name
  <name>-grads.params   where the case has gradients: "head:<output>", the fixed
                        head gradients, and "grad:<argument>" for each input and
                        parameter that has one (backward after that forward)
and manifest.json, which lists the cases, their files and tolerances.
"""
import json
import os
import sys

import mxnet as mx
import numpy as np
from mxnet import gluon
from mxnet.gluon import nn, rnn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from corpus_values import data_values, param_values, quantize  # noqa: E402

S = mx.sym
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
COMMIT_PARAMS_BYTES = 256 * 1024  # larger parameter files are rebuilt from the seed
CASES = []


def case(name, sym, data, grad=True, nograd=(), rtol=1e-5, atol=1e-6, kind="op",
         grad_params=True):
    """data: argument name -> shape, or (shape, low, high), or a NumPy array.
    grad_params=False: gradients w.r.t. the data inputs only (large nets)."""
    CASES.append(dict(name=name, sym=sym, data=data, grad=grad, nograd=set(nograd), rtol=rtol,
                      atol=atol, kind=kind, grad_params=grad_params))


def v(name="data"):
    return S.var(name)


def operators_of(sym):
    return sorted({n["op"] for n in json.loads(sym.tojson())["nodes"] if n["op"] != "null"})


def make_inputs(seed, data):
    arrays = {}
    for name, spec in data.items():
        if isinstance(spec, np.ndarray):
            arrays[name] = spec
        elif len(spec) == 3 and isinstance(spec[0], tuple):
            arrays[name] = data_values(seed, name, spec[0], spec[1], spec[2])
        else:
            arrays[name] = data_values(seed, name, spec)
    return arrays


def run(c, seed):
    sym, name = c["sym"], c["name"]
    inputs = make_inputs(seed, c["data"])
    shapes = {k: a.shape for k, a in inputs.items()}
    arg_shapes, _, aux_shapes = sym.infer_shape(**shapes)
    arg_names, aux_names = sym.list_arguments(), sym.list_auxiliary_states()
    params = {k: param_values(seed, k, s) for k, s in zip(arg_names, arg_shapes) if k not in inputs}
    aux = {k: param_values(seed, k, s) for k, s in zip(aux_names, aux_shapes)}
    args = {k: mx.nd.array(inputs[k] if k in inputs else params[k],
                           dtype=(inputs[k].dtype if k in inputs else "float32"))
            for k in arg_names}
    aux_nd = {k: mx.nd.array(a) for k, a in aux.items()}
    wants_grad = [k for k in arg_names if c["grad"] and k not in c["nograd"]
                  and (c["grad_params"] or k in inputs) and np.dtype(args[k].dtype).kind == "f"]
    grads = {k: mx.nd.zeros(args[k].shape) for k in wants_grad}
    req = {k: ("write" if k in grads else "null") for k in arg_names}
    exe = sym.bind(mx.cpu(), args, args_grad=grads, grad_req=req, aux_states=aux_nd)
    outs = [o.copy() for o in exe.forward(is_train=False)]
    out_names = sym.list_outputs()
    # MKL-DNN keeps no max-pooling workspace in a forward with is_train=False
    # and its backward then reads garbage: gradients come from a training
    # forward, except where training changes the graph's function
    # (BatchNorm without global statistics, Dropout), whose backward is sound.
    grad_is_train = not {"BatchNorm", "Dropout"} & set(operators_of(sym))
    files = {"symbol": f"{name}-symbol.json", "params": f"{name}-0000.params",
             "inputs": f"{name}-inputs.params", "outputs": f"{name}-outputs.params"}
    sym.save(os.path.join(OUT, files["symbol"]))
    stored = {**{"arg:" + k: mx.nd.array(a) for k, a in params.items()},
              **{"aux:" + k: mx.nd.array(a) for k, a in aux.items()}}
    params_bytes = sum(a.size * 4 for a in stored.values())
    params_committed = params_bytes <= COMMIT_PARAMS_BYTES
    if params_committed:
        mx.nd.save(os.path.join(OUT, files["params"]), stored)
    mx.nd.save(os.path.join(OUT, files["inputs"]), {k: args[k] for k in inputs})
    mx.nd.save(os.path.join(OUT, files["outputs"]), dict(zip(out_names, outs)))
    if grads:
        heads = {o: mx.nd.array(data_values(seed, "head:" + o, x.shape)) for o, x in
                 zip(out_names, outs)}
        if grad_is_train:
            exe.forward(is_train=True)
        # the backward in the forward's mode: a training backward after a predict
        # forward would read BatchNorm's batch statistics, which that forward never wrote
        exe.backward([heads[o] for o in out_names], is_train=grad_is_train)
        files["grads"] = f"{name}-grads.params"
        mx.nd.save(os.path.join(OUT, files["grads"]),
                   {**{"head:" + o: h for o, h in heads.items()},
                    **{"grad:" + k: g for k, g in grads.items()}})
    return {
        "name": name, "kind": c["kind"], "files": files, "seed": seed,
        "params_committed": params_committed,
        "data": list(inputs), "params": {k: list(a.shape) for k, a in params.items()},
        "aux": {k: list(a.shape) for k, a in aux.items()},
        "outputs": out_names, "operators": operators_of(sym),
        "grad": sorted(grads), "is_train": False, "grad_is_train": bool(grads) and grad_is_train,
        "rtol": c["rtol"], "atol": c["atol"],
    }


# ---- (a) one graph per operator variant ----

def nn_ops():
    x = v()
    case("conv1d_stride_pad_dilate", S.Convolution(x, kernel=(3,), num_filter=4, stride=(2,),
         pad=(1,), dilate=(2,), name="c"), {"data": (2, 3, 11)})
    case("conv2d_basic", S.Convolution(x, kernel=(3, 3), num_filter=4, name="c"),
         {"data": (2, 3, 6, 6)})
    case("conv2d_stride_pad_dilate", S.Convolution(x, kernel=(3, 2), num_filter=3, stride=(2, 1),
         pad=(1, 2), dilate=(1, 2), name="c"), {"data": (1, 2, 7, 6)})
    case("conv2d_groups_nobias", S.Convolution(x, kernel=(3, 3), num_filter=6, num_group=2,
         no_bias=True, pad=(1, 1), name="c"), {"data": (2, 4, 5, 5)})
    case("conv2d_depthwise", S.Convolution(x, kernel=(3, 3), num_filter=4, num_group=4,
         stride=(2, 2), pad=(1, 1), name="c"), {"data": (1, 4, 6, 6)})
    case("conv3d", S.Convolution(x, kernel=(2, 3, 2), num_filter=2, stride=(1, 2, 1),
         pad=(1, 0, 1), name="c"), {"data": (1, 2, 4, 5, 4)})
    case("deconv1d", S.Deconvolution(x, kernel=(3,), num_filter=2, stride=(2,), name="d"),
         {"data": (2, 3, 5)})
    case("deconv2d_stride_pad_adj", S.Deconvolution(x, kernel=(3, 3), num_filter=3, stride=(2, 2),
         pad=(1, 1), adj=(1, 1), name="d"), {"data": (1, 2, 4, 4)})
    case("deconv2d_groups_target", S.Deconvolution(x, kernel=(4, 4), num_filter=4, num_group=2,
         stride=(2, 2), pad=(1, 1), target_shape=(8, 8), no_bias=True, name="d"),
         {"data": (1, 4, 4, 4)})
    case("deconv2d_dilate", S.Deconvolution(x, kernel=(2, 2), num_filter=2, dilate=(2, 2),
         name="d"), {"data": (1, 2, 3, 3)})
    case("deconv3d", S.Deconvolution(x, kernel=(2, 2, 2), num_filter=2, stride=(2, 2, 2),
         name="d"), {"data": (1, 2, 2, 3, 2)})
    for pool in ["max", "avg", "sum", "lp"]:
        for conv in ["valid", "full"]:  # "same": 1-D max only, which fails in 1.9.1
            extra = {"p_value": 2} if pool == "lp" else {}
            case(f"pool2d_{pool}_{conv}", S.Pooling(x, kernel=(3, 3), stride=(2, 2),
                 pool_type=pool, pooling_convention=conv, **extra), {"data": (1, 2, 7, 6)},
                 grad=pool != "max")
    case("pool2d_max_pad", S.Pooling(x, kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="max"),
         {"data": (2, 2, 6, 6)})
    case("pool2d_avg_pad_exclude", S.Pooling(x, kernel=(3, 3), stride=(2, 2), pad=(1, 1),
         pool_type="avg", count_include_pad=False), {"data": (1, 2, 6, 6)})
    case("pool2d_avg_pad_include", S.Pooling(x, kernel=(3, 3), stride=(2, 2), pad=(1, 1),
         pool_type="avg", count_include_pad=True), {"data": (1, 2, 6, 6)})
    case("pool_global_avg", S.Pooling(x, kernel=(1, 1), global_pool=True, pool_type="avg"),
         {"data": (2, 3, 4, 5)})
    case("pool_global_max", S.Pooling(x, kernel=(1, 1), global_pool=True, pool_type="max"),
         {"data": (2, 3, 4, 5)})
    case("pool1d_max", S.Pooling(x, kernel=(2,), stride=(2,), pool_type="max"), {"data": (2, 3, 8)})
    case("pool3d_avg", S.Pooling(x, kernel=(2, 2, 2), stride=(1, 2, 2), pool_type="avg"),
         {"data": (1, 2, 3, 4, 4)})
    case("batchnorm_fix_gamma", S.BatchNorm(x, name="bn"), {"data": (2, 3, 4, 4)})
    case("batchnorm", S.BatchNorm(x, fix_gamma=False, name="bn"), {"data": (2, 3, 4, 4)})
    case("batchnorm_global_stats", S.BatchNorm(x, fix_gamma=False, use_global_stats=True,
         name="bn"), {"data": (2, 3, 4)})
    case("batchnorm_axis_last", S.BatchNorm(x, fix_gamma=False, axis=-1, eps=1e-3, name="bn"),
         {"data": (2, 4, 3)})
    case("layernorm", S.LayerNorm(x, name="ln"), {"data": (2, 3, 5)})
    case("layernorm_axis1", S.LayerNorm(x, axis=1, eps=1e-3, name="ln"), {"data": (2, 4, 3)})
    case("instancenorm", S.InstanceNorm(x, name="in"), {"data": (2, 3, 5, 2)})
    case("groupnorm", S.GroupNorm(x, num_groups=2, name="gn"), {"data": (2, 4, 3, 2)})
    for mode in ["instance", "channel", "spatial"]:
        case(f"l2normalization_{mode}", S.L2Normalization(x, mode=mode), {"data": (2, 3, 4)})
    case("lrn", S.LRN(x, nsize=3, alpha=0.001, beta=0.75, knorm=2), {"data": (1, 5, 3, 3)})
    case("dropout_predict", S.Dropout(x, p=0.5), {"data": (2, 5)})
    for act in ["leaky", "elu", "selu", "gelu", "prelu"]:  # rrelu: its mask output is left unset
        sym = S.LeakyReLU(x, act_type=act, slope=0.2, name="act")
        case(f"leakyrelu_{act}", sym, {"data": (2, 3, 4)})
    for act in ["relu", "sigmoid", "tanh", "softrelu", "softsign"]:  # all of 1.9.1's
        case(f"activation_{act}", S.Activation(x, act_type=act), {"data": (2, 7)})
    for fn in ["softmax", "log_softmax", "softmin"]:
        case(f"{fn}", getattr(S, fn)(x), {"data": (2, 5)})
        case(f"{fn}_axis0_temperature", getattr(S, fn)(x, axis=0, temperature=2.5),
             {"data": (3, 4)})
    case("softmax_length", S.softmax(x, v("length"), axis=1, use_length=True),
         {"data": (2, 5), "length": np.array([3, 5], np.int32)}, nograd=["length"])
    case("softmaxactivation_instance", S.SoftmaxActivation(x), {"data": (2, 5)})
    case("softmaxactivation_channel", S.SoftmaxActivation(x, mode="channel"),
         {"data": (2, 3, 2, 2)})
    idx = np.array([[1, 0, 9], [3, 3, 7]], np.float32)
    case("embedding", S.Embedding(x, input_dim=10, output_dim=4, name="emb"), {"data": idx},
         nograd=["data"])
    case("fullyconnected", S.FullyConnected(x, num_hidden=5, name="fc"), {"data": (2, 3, 2)})
    case("fullyconnected_noflatten_nobias", S.FullyConnected(x, num_hidden=4, flatten=False,
         no_bias=True, name="fc"), {"data": (2, 3, 5)})


def rnn_ops():
    seq, batch, inp, hidden = 3, 2, 4, 5
    for mode in ["lstm", "gru", "rnn_tanh", "rnn_relu"]:
        for layers, bidir in [(1, False), (2, False), (1, True), (2, True)]:
            dirs = 2 if bidir else 1
            names = ["data", "parameters", "state"] + (["state_cell"] if mode == "lstm" else [])
            sym = S.RNN(*[v(n) for n in names], state_size=hidden, num_layers=layers,
                        bidirectional=bidir, mode=mode, state_outputs=True, name="rnn")
            state = (layers * dirs, batch, hidden)
            data = {"data": (seq, batch, inp), "state": state}
            if mode == "lstm":
                data["state_cell"] = state
            case(f"rnn_{mode}_l{layers}{'_bidir' if bidir else ''}", sym, data)


def loss_ops():
    x = v()
    label = np.array([2, 0], np.float32)
    case("softmaxoutput", S.SoftmaxOutput(x, v("label"), name="sm"),
         {"data": (2, 4), "label": label}, nograd=["label"])
    case("softmaxoutput_normalization", S.SoftmaxOutput(x, v("label"), grad_scale=2.0,
         normalization="batch", name="sm"), {"data": (2, 4), "label": label}, nograd=["label"])
    case("softmaxoutput_multi_output", S.SoftmaxOutput(x, v("label"), multi_output=True, name="sm"),
         {"data": (2, 3, 4), "label": np.array([[0, 1, 2, 2], [1, 1, 0, 2]], np.float32)},
         nograd=["label"])
    for op in ["LinearRegressionOutput", "LogisticRegressionOutput", "MAERegressionOutput"]:
        case(op.lower(), getattr(S, op)(x, v("label"), name="reg"),
             {"data": (2, 3), "label": (2, 3)}, nograd=["label"])
    case("makeloss", S.MakeLoss(S.square(x), grad_scale=0.5), {"data": (2, 3)})
    case("blockgrad", S.BlockGrad(x) + x * 2, {"data": (2, 3)})
    case("smooth_l1", S.smooth_l1(x, scalar=1.5), {"data": (2, 5)})


def shape_ops():
    x, y = v(), v("rhs")
    case("slicechannel", S.SliceChannel(x, num_outputs=3, axis=1), {"data": (2, 6, 2)})
    case("split_squeeze", S.split(x, num_outputs=3, axis=2, squeeze_axis=True),
         {"data": (2, 2, 3)})
    case("swapaxis", S.SwapAxis(x, dim1=0, dim2=2), {"data": (2, 3, 4)})
    pick_idx = np.array([[0, 2, 1], [3, 0, 1]], np.float32)
    case("pick", S.pick(x, v("index"), axis=1), {"data": (2, 4, 3), "index": pick_idx},
         nograd=["index"])
    case("pick_wrap_keepdims", S.pick(x, v("index"), axis=-1, mode="wrap", keepdims=True),
         {"data": (2, 3), "index": np.array([4, -1], np.float32)}, nograd=["index"])
    case("tile", S.tile(x, reps=(2, 1, 3)), {"data": (2, 3)})
    case("repeat", S.repeat(x, repeats=2, axis=1), {"data": (2, 3)})
    case("repeat_flat", S.repeat(x, repeats=3), {"data": (2, 2)})
    case("reverse", S.reverse(x, axis=(0, 2)), {"data": (2, 3, 2)})
    case("broadcast_axis", S.broadcast_axis(x, axis=(0, 2), size=(3, 4)), {"data": (1, 2, 1)})
    gidx = np.array([[0, 1, 1], [2, 0, 1]], np.float32)
    case("gather_nd", S.gather_nd(x, v("indices")), {"data": (2, 3, 4), "indices": gidx},
         nograd=["indices"])
    case("scatter_nd", S.scatter_nd(x, v("indices"), shape=(3, 4)),
         {"data": (3,), "indices": np.array([[0, 2, 1], [1, 3, 0]], np.float32)},
         nograd=["indices"])
    case("slice_like", S.slice_like(x, y, axes=(0, 2)), {"data": (3, 4, 5), "rhs": (2, 7, 3)},
         nograd=["rhs"])
    for ret in ["value", "indices", "both", "mask"]:
        case(f"topk_{ret}", S.topk(x, k=2, axis=1, ret_typ=ret), {"data": (2, 5)},
             grad=ret in ("value",))
    case("topk_ascend_axis0", S.topk(x, k=1, axis=0, is_ascend=True), {"data": (3, 4)}, grad=False)
    case("sort", S.sort(x, axis=1), {"data": (2, 5)})
    case("sort_descend", S.sort(x, axis=0, is_ascend=False), {"data": (3, 2)})
    case("argsort", S.argsort(x, axis=-1), {"data": (2, 5)}, grad=False)
    lens = np.array([2, 3], np.float32)
    for op in ["SequenceMask", "SequenceLast", "SequenceReverse"]:
        case(op.lower(), getattr(S, op)(x, v("length"), use_sequence_length=True),
             {"data": (3, 2, 4), "length": lens}, nograd=["length"])
        case(op.lower() + "_nolength", getattr(S, op)(x), {"data": (3, 2, 4)})
    case("sequencemask_value_axis1", S.SequenceMask(x, v("length"), use_sequence_length=True,
         value=-1.0, axis=1), {"data": (2, 3, 2), "length": lens}, nograd=["length"])
    case("upsampling_nearest", S.UpSampling(x, scale=2, sample_type="nearest"),
         {"data": (1, 2, 3, 3)})
    case("upsampling_bilinear", S.UpSampling(x, v("weight"), scale=2, sample_type="bilinear",
         num_filter=2), {"data": (1, 2, 3, 3)})
    case("bilinearresize2d", S.contrib.BilinearResize2D(x, height=5, width=7),
         {"data": (1, 2, 3, 4)})
    case("bilinearresize2d_scale", S.contrib.BilinearResize2D(x, scale_height=2.0, scale_width=0.5,
         mode="like" if False else "size"), {"data": (1, 1, 3, 4)})
    for mode in ["constant", "edge", "reflect"]:
        case(f"pad_{mode}", S.Pad(x, mode=mode, pad_width=(0, 0, 0, 0, 1, 2, 2, 1),
             constant_value=1.5), {"data": (1, 2, 3, 4)})
    case("crop_hw_offset", S.Crop(x, h_w=(2, 3), offset=(1, 1), num_args=1), {"data": (1, 2, 4, 5)})
    case("crop_like_center", S.Crop(x, y, num_args=2, center_crop=True),
         {"data": (1, 2, 5, 6), "rhs": (1, 1, 3, 3)}, nograd=["rhs"])
    cond = np.array([[1, 0, 1], [0, 0, 1]], np.float32)
    case("where", S.where(v("cond"), x, y), {"cond": cond, "data": (2, 3), "rhs": (2, 3)},
         nograd=["cond"])
    case("arange_like", S.contrib.arange_like(x, start=1.0, step=0.5), {"data": (2, 3)}, grad=False)
    case("arange_like_axis", S.contrib.arange_like(x, axis=1), {"data": (2, 3)}, grad=False)
    case("concat", S.Concat(x, y, dim=1), {"data": (2, 3), "rhs": (2, 2)})
    for spec in [(0, -1), (-2,), (-3, 0), (0, -4, 2, -1, 0), (-1,), (2, 0, -1)]:
        label = "_".join(str(s).replace("-", "m") for s in spec)
        case(f"reshape_{label}", S.Reshape(x, shape=spec), {"data": (2, 4, 3)})
    case("reshape_reverse", S.Reshape(x, shape=(-1, 0), reverse=True), {"data": (2, 4, 3)})
    case("transpose", S.transpose(x, axes=(2, 0, 1)), {"data": (2, 3, 4)})
    case("expand_dims_flatten", S.flatten(S.expand_dims(x, axis=1)), {"data": (2, 3, 2)})
    case("slice", S.slice(x, begin=(0, 1), end=(2, None), step=(1, 2)), {"data": (3, 5)})
    case("slice_axis", S.slice_axis(x, axis=1, begin=1, end=-1), {"data": (2, 5)})
    case("take", S.take(x, v("indices"), axis=0),
         {"data": (4, 3), "indices": np.array([3, 0, 2], np.float32)}, nograd=["indices"])
    case("one_hot", S.one_hot(v("indices"), depth=4),
         {"indices": np.array([1, 3, 0], np.float32)}, grad=False)
    case("stack", S.stack(x, y, axis=1), {"data": (2, 3), "rhs": (2, 3)})
    case("squeeze", S.squeeze(x, axis=1), {"data": (2, 1, 3)})
    case("clip", S.clip(x, a_min=-0.5, a_max=0.5), {"data": (3, 4)})
    case("cast_float64", S.Cast(x, dtype="float64"), {"data": (2, 3)})


def math_ops():
    x, y = v(), v("rhs")
    pos = ((2, 5), 0.25, 2.0)
    case("maximum", S._internal._maximum(x, y), {"data": (2, 5), "rhs": (2, 5)})
    case("minimum", S._internal._minimum(x, y), {"data": (2, 5), "rhs": (2, 5)})
    case("power", S._internal._power(x, y), {"data": pos, "rhs": (2, 5)})
    case("hypot", S._internal._hypot(x, y), {"data": (2, 5), "rhs": (2, 5)})
    case("maximum_scalar", S.maximum(x, 0.25), {"data": (2, 5)})
    case("power_scalar_rpower", S.pow(x, 2.0) + S.pow(2.0, x), {"data": (2, 5)})
    for op in ["_equal", "_not_equal", "_greater", "_greater_equal", "_lesser", "_lesser_equal"]:
        inputs = {"data": np.array([[1, 2, 3], [3, 2, 1]], np.float32),
                  "rhs": np.array([[2, 2, 2], [1, 2, 3]], np.float32)}
        case(f"compare{op}", getattr(S._internal, op)(x, y), inputs, grad=False)
    for op in ["broadcast_equal", "broadcast_greater", "broadcast_lesser_equal"]:
        case(op, getattr(S, op)(x, y), {"data": np.array([[1, 2, 3]], np.float32),
             "rhs": np.array([[2], [1]], np.float32)}, grad=False)
    for op in ["log1p", "expm1", "reciprocal", "exp", "log", "sqrt", "rsqrt", "square", "abs",
               "sign", "negative", "sin", "cos", "tanh", "sigmoid", "relu", "erf", "cbrt",
               "log2", "log10", "gamma", "gammaln", "arctan", "sinh"]:
        positive = op in ("log", "sqrt", "rsqrt", "log2", "log10", "gamma", "gammaln",
                          "reciprocal", "log1p")
        case(f"unary_{op}", getattr(S, op)(x), {"data": pos if positive else (2, 5)},
             grad=op not in ("sign",))
    frac = np.array([[-2.5, -1.5, -0.5, 0.5, 1.5, 2.5], [-1.7, -0.2, 0.0, 0.3, 1.49, 2.51]],
                    np.float32)
    for op in ["round", "floor", "ceil", "trunc", "rint", "fix"]:
        case(f"rounding_{op}", getattr(S, op)(x), {"data": frac}, grad=False)
    nan = np.array([[1.5, np.nan, 2.0], [np.nan, np.nan, -0.5]], np.float32)
    case("nansum", S.nansum(x, axis=1), {"data": nan}, grad=False)
    case("nanprod", S.nanprod(x, axis=0), {"data": nan}, grad=False)
    case("cumsum", S.cumsum(x, axis=1), {"data": (2, 4)})
    a, b, c = v("a"), v("b"), v("c")
    case("linalg_gemm", S.linalg.gemm(a, b, c, transpose_a=True, alpha=0.5, beta=2.0),
         {"a": (2, 3, 4), "b": (2, 3, 5), "c": (2, 4, 5)})
    case("linalg_gemm2", S.linalg.gemm2(a, b, transpose_b=True, alpha=1.5),
         {"a": (2, 4, 3), "b": (2, 5, 3)})
    case("elemwise_basics", S.elemwise_div(S.elemwise_add(x, y) * S.elemwise_sub(x, y),
         S.elemwise_mul(y, y) + 1.0), {"data": (2, 3), "rhs": (2, 3)})
    case("broadcast_basics", S.broadcast_div(S.broadcast_add(x, y) - S.broadcast_mul(x, y),
         S.broadcast_sub(y, -3.0 * y) + 4.0), {"data": (2, 1, 3), "rhs": (1, 4, 1)})
    case("scalar_arith", (2.0 - x) / 4.0 + 1.0 / (x * x + 1.0) - x % 0.75, {"data": (2, 5)})
    case("sum_all_axes", S.sum(x), {"data": (2, 3, 4)})
    case("sum_axis_keepdims", S.sum(x, axis=(0, 2), keepdims=True), {"data": (2, 3, 4)})
    case("mean_max_min_prod", S.mean(x, axis=1) + S.max(x, axis=1) + S.min(x, axis=1)
         + S.prod(x, axis=1), {"data": (2, 4)})
    case("norm", S.norm(x, ord=2, axis=1), {"data": (2, 4)})
    case("argmax", S.argmax(x, axis=1), {"data": (3, 5)}, grad=False)
    case("argmax_all", S.argmax(x), {"data": (3, 5)}, grad=False)
    case("argmin_keepdims", S.argmin(x, axis=0, keepdims=True), {"data": (3, 5)}, grad=False)
    case("dot", S.dot(x, y, transpose_b=True), {"data": (2, 3), "rhs": (4, 3)})
    case("batch_dot", S.batch_dot(x, y), {"data": (2, 3, 4), "rhs": (2, 4, 2)})
    case("add_n", S.add_n(x, y, x * y), {"data": (2, 3), "rhs": (2, 3)})


# ---- (b) models ----

def frozen_batchnorm(sym):
    """The graph with use_global_stats on every BatchNorm: a training forward
    (for gradients) then computes what inference does."""
    graph = json.loads(sym.tojson())
    for node in graph["nodes"]:
        if node["op"] == "BatchNorm":
            node.setdefault("attrs", {})["use_global_stats"] = "True"
    return mx.sym.load_json(json.dumps(graph))


def hybrid_sym(block, shape, warm=True):
    """The block's graph; `warm` runs it once first to settle deferred shapes."""
    block.initialize()
    block.hybridize()
    if warm:
        block(mx.nd.zeros(shape))
    out = block(S.var("data"))
    return frozen_batchnorm(S.Group(out) if isinstance(out, (list, tuple)) else out)


def models():
    from mxnet.gluon.model_zoo import vision
    from mxnet.gluon.model_zoo.vision.resnet import BasicBlockV1

    mlp = nn.HybridSequential(prefix="mlp_")
    with mlp.name_scope():
        mlp.add(nn.Dense(16, activation="relu"), nn.Dense(8, activation="tanh"), nn.Dense(4))
    case("model_mlp", hybrid_sym(mlp, (2, 10)), {"data": (2, 10)}, kind="model", rtol=1e-5,
         atol=1e-5)
    lenet = nn.HybridSequential(prefix="lenet_")
    with lenet.name_scope():
        lenet.add(nn.Conv2D(6, 5, activation="tanh"), nn.MaxPool2D(2, 2),
                  nn.Conv2D(16, 5, activation="tanh"), nn.MaxPool2D(2, 2), nn.Flatten(),
                  nn.Dense(32, activation="relu"), nn.Dense(10))
    case("model_lenet", hybrid_sym(lenet, (2, 1, 28, 28)), {"data": (2, 1, 28, 28)},
         kind="model", rtol=1e-4, atol=1e-5)
    block = BasicBlockV1(8, 2, downsample=True, in_channels=4, prefix="block_")
    case("model_resnet_block", hybrid_sym(block, (2, 4, 8, 8)), {"data": (2, 4, 8, 8)},
         kind="model", rtol=1e-4, atol=1e-5)
    r18 = vision.resnet18_v1(classes=10, prefix="resnet18_")
    case("model_resnet18_v1", hybrid_sym(r18, (1, 3, 64, 64)), {"data": (1, 3, 64, 64)},
         kind="model", rtol=1e-4, atol=1e-4, grad=False)  # its MXNet gradient varies run to run
    mob = vision.mobilenet0_25(classes=10, prefix="mobilenet_")
    case("model_mobilenet0_25", hybrid_sym(mob, (1, 3, 64, 64)), {"data": (1, 3, 64, 64)},
         kind="model", rtol=1e-4, atol=1e-4, grad_params=False)
    lstm = rnn.LSTM(6, num_layers=2, input_size=4, prefix="lstm_")
    case("model_lstm_2layer", hybrid_sym(lstm, (5, 2, 4), warm=False), {"data": (5, 2, 4)}, kind="model",
         rtol=1e-4, atol=1e-5)
    cell = rnn.LSTMCell(6, input_size=4, prefix="cell_")
    cell.initialize()
    outs, _ = cell.unroll(3, S.var("data"), layout="NTC", merge_outputs=True)
    case("model_lstmcell_unrolled", outs, {"data": (2, 3, 4)}, kind="model", rtol=1e-4, atol=1e-5)


def main():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        os.remove(os.path.join(OUT, f))
    for group in (nn_ops, rnn_ops, loss_ops, shape_ops, math_ops, models):
        group()
    manifest = []
    for seed, c in enumerate(CASES):
        try:
            manifest.append(run(c, seed))
        except mx.MXNetError as e:
            print(f"skip {c['name']}: {str(e).splitlines()[0]}")
            for f in os.listdir(OUT):
                if f.startswith(c["name"] + "-"):
                    os.remove(os.path.join(OUT, f))
    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump({"mxnet": mx.__version__, "cases": manifest}, f, indent=0)
    print(f"{len(manifest)} cases in {OUT}")


if __name__ == "__main__":
    main()
