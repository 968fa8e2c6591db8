"""Samplers: the order of a dataset's indices, and their grouping into batches."""
from typing import Iterator, List, Optional

import numpy as _np


class Sampler:
    """Yields indices of a dataset; subclasses define __iter__ and __len__."""

    def __iter__(self) -> Iterator[int]:
        raise NotImplementedError

    def __len__(self) -> int:
        raise NotImplementedError


class SequentialSampler(Sampler):
    """0, 1, ..., length - 1 (from `start`)."""

    def __init__(self, length: int, start: int = 0) -> None:
        self._length, self._start = length, start

    def __iter__(self) -> Iterator[int]:
        return iter(range(self._start, self._start + self._length))

    def __len__(self) -> int:
        return self._length


class RandomSampler(Sampler):
    """A new random permutation of range(length) at each pass. With a seed the passes
    repeat from run to run (pass k is the same permutation in every run)."""

    def __init__(self, length: int, seed: Optional[int] = None) -> None:
        self._length = length
        self._rng = _np.random.default_rng(seed)

    def __iter__(self) -> Iterator[int]:
        return iter(self._rng.permutation(self._length).tolist())

    def __len__(self) -> int:
        return self._length


LAST_BATCH = ("keep", "discard", "rollover")


class BatchSampler(Sampler):
    """Lists of `batch_size` indices from `sampler`. The last, shorter batch is kept
    ("keep"), dropped ("discard"), or its indices start the next pass ("rollover")."""

    def __init__(self, sampler: Sampler, batch_size: int, last_batch: str = "keep") -> None:
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size is {batch_size!r}, expected a positive int")
        if last_batch not in LAST_BATCH:
            raise ValueError(f"last_batch is {last_batch!r}, expected one of "
                             f"{', '.join(LAST_BATCH)}")
        self._sampler, self._batch_size, self._last_batch = sampler, batch_size, last_batch
        self._prev: List[int] = []  # rollover: the indices left from the last pass

    def __iter__(self) -> Iterator[List[int]]:
        batch, self._prev = self._prev, []
        for i in self._sampler:
            batch.append(i)
            if len(batch) == self._batch_size:
                yield batch
                batch = []
        if batch:
            if self._last_batch == "keep":
                yield batch
            elif self._last_batch == "rollover":
                self._prev = batch

    def __len__(self) -> int:
        n = len(self._sampler)
        if self._last_batch == "keep":
            return (n + self._batch_size - 1) // self._batch_size
        if self._last_batch == "discard":
            return n // self._batch_size
        return (len(self._prev) + n) // self._batch_size
