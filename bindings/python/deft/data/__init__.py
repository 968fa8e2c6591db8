"""Data loading, as MXNet Gluon's ``gluon.data``: datasets, samplers, a DataLoader
with worker threads, and array transforms (``deft.data.transforms``).

    dataset = deft.data.ArrayDataset(images, labels).transform_first(
        transforms.Compose([transforms.ToTensor(), transforms.Normalize(0.5, 0.25)]))
    loader = deft.data.DataLoader(dataset, batch_size=64, shuffle=True, seed=0,
                                  num_workers=2)
    for data, label in deft.progress(loader, desc="epoch 1"):
        ...
"""
from .dataset import ArrayDataset, Dataset, SimpleDataset  # noqa: F401
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler  # noqa: F401
from .dataloader import DataLoader, default_batchify_fn  # noqa: F401
from . import transforms  # noqa: F401

default_collate = default_batchify_fn  # PyTorch's name
