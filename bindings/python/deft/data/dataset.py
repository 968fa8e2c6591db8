"""Datasets, as MXNet Gluon's ``gluon.data``: indexable collections of samples."""
from typing import Any, Callable, List, Sequence

from ..ndarray import NDArray


class Dataset:
    """A collection of samples: subclasses define ``__getitem__(i)`` and ``__len__()``."""

    def __getitem__(self, idx: int) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__")

    def __len__(self) -> int:
        raise NotImplementedError(f"{type(self).__name__} must define __len__")

    def transform(self, fn: Callable, lazy: bool = True) -> "Dataset":
        """A dataset of fn(*sample) (a tuple sample is spread into fn's arguments);
        lazy: applied at each read, else once now for every sample."""
        transformed = _TransformDataset(self, fn)
        return transformed if lazy else SimpleDataset([transformed[i]
                                                       for i in range(len(transformed))])

    def transform_first(self, fn: Callable, lazy: bool = True) -> "Dataset":
        """fn applied to the first element of each sample only (the data, not the label)."""
        return self.transform(_First(fn), lazy)

    def filter(self, fn: Callable[[Any], bool]) -> "Dataset":
        """The samples for which fn(sample) is true (decided now, once)."""
        return _IndexedDataset(self, [i for i in range(len(self)) if fn(self[i])])

    def take(self, count: int) -> "Dataset":
        """The first `count` samples."""
        return _IndexedDataset(self, list(range(min(count, len(self)))))

    def shard(self, num_shards: int, index: int) -> "Dataset":
        """Part `index` of `num_shards` contiguous parts (the first ones one longer)."""
        if not 0 <= index < num_shards:
            raise ValueError(f"shard: index {index} is not in [0, {num_shards})")
        size, rest = divmod(len(self), num_shards)
        start = index * size + min(index, rest)
        return _IndexedDataset(self, list(range(start, start + size + (index < rest))))


class SimpleDataset(Dataset):
    """A dataset over any sequence (a list, a NumPy array, an NDArray)."""

    def __init__(self, data: Sequence[Any]) -> None:
        self._data = data

    def __len__(self) -> int:
        return len(self._data)

    def __getitem__(self, idx: int) -> Any:
        return self._data[idx]


class ArrayDataset(Dataset):
    """Samples zipped from several arrays of one length: ``ArrayDataset(x, y)[i]`` is
    ``(x[i], y[i])``; one array gives its rows themselves."""

    def __init__(self, *arrays: Any) -> None:
        if not arrays:
            raise ValueError("ArrayDataset needs at least one array")
        self._length = len(arrays[0])
        for i, a in enumerate(arrays):
            if len(a) != self._length:
                raise ValueError(f"ArrayDataset: array {i} has length {len(a)}, array 0 has "
                                 f"{self._length}: all must be as long")
        # an NDArray row read is an operator call: keep NumPy's views for speed
        self._data = [a.asnumpy() if isinstance(a, NDArray) else a for a in arrays]

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, idx: int) -> Any:
        if len(self._data) == 1:
            return self._data[0][idx]
        return tuple(a[idx] for a in self._data)


class _TransformDataset(Dataset):
    def __init__(self, data: Dataset, fn: Callable) -> None:
        self._data, self._fn = data, fn

    def __len__(self) -> int:
        return len(self._data)

    def __getitem__(self, idx: int) -> Any:
        item = self._data[idx]
        return self._fn(*item) if isinstance(item, tuple) else self._fn(item)


class _First:
    """fn on a sample's first element, the rest passed through."""

    def __init__(self, fn: Callable) -> None:
        self._fn = fn

    def __call__(self, first: Any, *rest: Any) -> Any:
        return (self._fn(first),) + rest if rest else self._fn(first)


class _IndexedDataset(Dataset):
    def __init__(self, data: Dataset, indices: List[int]) -> None:
        self._data, self._indices = data, indices

    def __len__(self) -> int:
        return len(self._indices)

    def __getitem__(self, idx: int) -> Any:
        return self._data[self._indices[idx]]
