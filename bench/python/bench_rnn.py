"""PyTorch's nn.LSTM on bench_rnn.c's sizes: min forward and forward+backward, and the
ratio to deft's forward+backward (argv: threads (0: default), rounds, deft's ms)."""
import sys
import time

import torch

threads, rounds, deft_ms = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
if threads > 0:
    torch.set_num_threads(threads)
T, N, I, H, L = 35, 32, 128, 256, 2
lstm = torch.nn.LSTM(I, H, L)
x = torch.randn(T, N, I, requires_grad=True)
h0, c0 = torch.randn(L, N, H), torch.randn(L, N, H)


def step(backward):
    t0 = time.perf_counter()
    y, _ = lstm(x, (h0, c0))
    if backward:
        y.backward(torch.ones_like(y))
    return time.perf_counter() - t0


step(True)
fw = sorted(step(False) for _ in range(rounds))
fb = sorted(step(True) for _ in range(rounds))
print(f"PyTorch  forward          min {fw[0] * 1e3:7.2f} ms  median {fw[rounds // 2] * 1e3:7.2f} ms")
print(f"PyTorch  forward+backward min {fb[0] * 1e3:7.2f} ms  median {fb[rounds // 2] * 1e3:7.2f} ms"
      f"  (deft / PyTorch: {deft_ms / (fb[0] * 1e3):.2f})")
