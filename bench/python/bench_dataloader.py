"""DataLoader: an epoch with worker threads against the same epoch without them.

A CIFAR-sized epoch (uint8 32x32x3 images, ToTensor + Normalize per sample
in NumPy, batches of 64) feeds a small model (Flatten, Dense 3072 -> 256,
relu, Dense 256 -> 10, forward only). num_workers=0 prepares each batch in
the loop; num_workers=N prepares batches on N threads while the model runs
(deft and NumPy release the GIL). The rounds alternate between the loaders;
the best and median epoch times are printed, with the ratio of the
single-threaded time to each worker count's (above 1: the workers help).

    python bench/python/bench_dataloader.py [--images 4096] [--rounds 5] [--workers 1 2]
"""
import argparse
import os
import statistics
import time

import numpy as np

import deft
from deft import data, nn
from deft.data import transforms as T


def make_loader(images, labels, workers, batch_size):
    ds = data.ArrayDataset(images, labels).transform_first(
        T.Compose([T.ToTensor(), T.Normalize([0.49, 0.48, 0.45], [0.25, 0.24, 0.26])]))
    return data.DataLoader(ds, batch_size, shuffle=True, seed=0, num_workers=workers)


def epoch(loader, net):
    start = time.perf_counter()
    for x, _ in loader:
        net(x).wait_to_read()
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=4096)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (args.images, 32, 32, 3), dtype=np.uint8)
    labels = rng.integers(0, 10, args.images).astype(np.int32)
    net = nn.HybridSequential()
    net.add(nn.Flatten(), nn.Dense(256, activation="relu"), nn.Dense(10))
    net.initialize()
    net.hybridize()
    loaders = {w: make_loader(images, labels, w, args.batch_size) for w in [0] + args.workers}
    times = {w: [] for w in loaders}
    for w, loader in loaders.items():  # warm up: graphs compiled, threads started
        epoch(loader, net)
    for _ in range(args.rounds):  # alternate, so that load changes hit every loader
        for w, loader in loaders.items():
            times[w].append(epoch(loader, net))
    print(f"DataLoader epoch: {args.images} images of 32x32x3, batch {args.batch_size}, "
          f"{args.rounds} rounds, load average {os.getloadavg()[0]:.2f}")
    base = statistics.median(times[0])
    for w, ts in times.items():
        med = statistics.median(ts)
        print(f"  num_workers={w}: min {min(ts) * 1e3:8.1f} ms  median {med * 1e3:8.1f} ms  "
              f"ratio (workers 0 / this, median) {base / med:5.2f}x")
    for loader in loaders.values():
        loader.close()


if __name__ == "__main__":
    main()
