"""PyTorch's times for bench_gpu's reduction and softmax cases and for
bench_gpu_resnet's ResNet-18 cases, on the same GPU.

Prints one line per case, `name<TAB>milliseconds` (the best of several
rounds of CUDA-event-timed loops), which bench_gpu and bench_gpu_resnet read
from the file named by DEFT_GPU_PEERS to print their ratios. The case names
match theirs. ResNet-18 (bench_resnet.py's plain torch.nn network, next to
this file) runs three ways: without cuDNN ("nocudnn", PyTorch's own
convolution kernels), with cuDNN in strict float32 ("cudnn"), and with
PyTorch's defaults ("tf32": cuDNN convolutions in TF32). Needs only torch
with CUDA; prints nothing and exits 0 without them.
"""
import os
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
    resnet(torch)


def best_ms(torch, f, runs):
    """The best of 3 CUDA-event-timed rounds of `runs` calls, after a warm-up."""
    for _ in range(2):
        f()
    best = float("inf")
    for _ in range(3):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(runs):
            f()
        end.record()
        torch.cuda.synchronize()
        best = min(best, start.elapsed_time(end) / runs)
    return best


def resnet(torch):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench_resnet import torch_resnet18

    torch.manual_seed(0)
    net = torch_resnet18(torch.nn).cuda()
    cudnn, matmul = torch.backends.cudnn, torch.backends.cuda.matmul
    ways = {"nocudnn": (False, False), "cudnn": (True, False), "tf32": (True, True)}
    for way, (enabled, tf32) in ways.items():
        cudnn.enabled, cudnn.allow_tf32, matmul.allow_tf32 = enabled, tf32, False
        net.eval()
        for batch in (1, 32):
            x = torch.randn(batch, 3, 224, 224, device="cuda")
            with torch.no_grad():
                ms = best_ms(torch, lambda: net(x), 10)
            print(f"resnet18_inference_b{batch}_{way}\t{ms:.5f}")
        net.train()
        batch = 32
        x = torch.randn(batch, 3, 224, 224, device="cuda")
        labels = torch.randint(0, 1000, (batch,), device="cuda")
        optimizer = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
        loss_fn = torch.nn.CrossEntropyLoss()

        def step():
            optimizer.zero_grad(set_to_none=True)
            loss_fn(net(x), labels).backward()
            optimizer.step()

        print(f"resnet18_train_b{batch}_{way}\t{best_ms(torch, step, 10):.5f}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
