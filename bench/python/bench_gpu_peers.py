"""PyTorch's times for bench_gpu's reduction and softmax cases on the same GPU.

Prints one line per case, `name<TAB>milliseconds` (the best of several
rounds of CUDA-event-timed loops), which bench_gpu reads from the file named
by DEFT_GPU_PEERS to print its ratios. The case names match bench_gpu's.
Needs only torch with CUDA; prints nothing and exits 0 without them.
"""
import sys

CASES = [  # name, shape, op, axis
    ("sum_4096x4096_a1", (4096, 4096), "sum", 1),
    ("sum_4096x4096_a0", (4096, 4096), "sum", 0),
    ("sum_64x262144_a0", (64, 262144), "sum", 0),
    ("sum_64x262144_a1", (64, 262144), "sum", 1),
    ("sum_262144x64_a1", (262144, 64), "sum", 1),
    ("sum_262144x64_a0", (262144, 64), "sum", 0),
    ("max_4096x4096_a1", (4096, 4096), "max", 1),
    ("argmax_4096x4096_a1", (4096, 4096), "argmax", 1),
    ("softmax_4096x4096", (4096, 4096), "softmax", -1),
    ("softmax_64x262144", (64, 262144), "softmax", -1),
    ("softmax_262144x64", (262144, 64), "softmax", -1),
    ("softmax_32x50000", (32, 50000), "softmax", -1),
    ("softmax_50000x32", (50000, 32), "softmax", -1),
    ("log_softmax_4096x4096", (4096, 4096), "log_softmax", -1),
    ("softmax_4096x4096_a0", (4096, 4096), "softmax", 0),
]


def main():
    try:
        import torch
    except ImportError:
        return
    if not torch.cuda.is_available():
        return
    ops = {
        "sum": lambda x, a: x.sum(a),
        "max": lambda x, a: x.amax(a),
        "argmax": lambda x, a: x.argmax(a),
        "softmax": lambda x, a: torch.softmax(x, a),
        "log_softmax": lambda x, a: torch.log_softmax(x, a),
    }
    for name, shape, op, axis in CASES:
        x = torch.randn(*shape, device="cuda")
        f = ops[op]
        for _ in range(5):
            f(x, axis)
        best = float("inf")
        for _ in range(5):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(20):
                f(x, axis)
            end.record()
            torch.cuda.synchronize()
            best = min(best, start.elapsed_time(end) / 20)
        print(f"{name}\t{best:.5f}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
