"""A peer's fused LSTM on bench_rnn.c's sizes (2 layers, input 128, hidden 256, 35 steps,
batch 32): min and median forward and forward+backward, and deft's forward+backward time over
the peer's. argv: peer (torch or mxnet), threads (0: the peer's default), rounds, deft's ms.
bench_rnn.c runs it with DEFT_TORCH_PYTHON's and DEFT_MXNET_PYTHON's interpreters."""
import os
import sys
import time

peer, threads, rounds, deft_ms = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
T, N, I, H, L = 35, 32, 128, 256, 2


def torch_step():
    import torch
    if threads > 0:
        torch.set_num_threads(threads)
    lstm = torch.nn.LSTM(I, H, L)
    x = torch.randn(T, N, I, requires_grad=True)
    h0, c0 = torch.randn(L, N, H), torch.randn(L, N, H)

    def step(backward):
        t0 = time.perf_counter()
        y, _ = lstm(x, (h0, c0))
        if backward:
            y.backward(torch.ones_like(y))
        return time.perf_counter() - t0
    return "PyTorch", step


def mxnet_step():
    if threads > 0:  # read when the library loads
        os.environ["OMP_NUM_THREADS"] = os.environ["MXNET_CPU_WORKER_NTHREADS"] = str(threads)
    import mxnet as mx
    lstm = mx.gluon.rnn.LSTM(H, L, input_size=I)
    lstm.initialize()
    x = mx.nd.random.uniform(shape=(T, N, I))
    x.attach_grad()
    state = [mx.nd.random.uniform(shape=(L, N, H)) for _ in range(2)]

    def step(backward):
        t0 = time.perf_counter()
        if backward:
            with mx.autograd.record():
                y = lstm(x, state)[0]
            y.backward()
        else:
            y = lstm(x, state)[0]
        mx.nd.waitall()
        return time.perf_counter() - t0
    return "MXNet", step


name, step = torch_step() if peer == "torch" else mxnet_step()
step(True)
fw = sorted(step(False) for _ in range(rounds))
fb = sorted(step(True) for _ in range(rounds))
print(f"{name:8} forward          min {fw[0] * 1e3:7.2f} ms  median {fw[rounds // 2] * 1e3:7.2f} ms")
print(f"{name:8} forward+backward min {fb[0] * 1e3:7.2f} ms  median {fb[rounds // 2] * 1e3:7.2f} ms"
      f"  (deft / {name}: {deft_ms / (fb[0] * 1e3):.2f})")
