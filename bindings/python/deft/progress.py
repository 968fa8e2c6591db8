"""A progress bar over an epoch and a training log.

    for data, label in deft.progress(loader, desc="epoch 1"): ...
    log = deft.TrainingLog("train.jsonl")
    log.log(epoch=1, loss=0.31, accuracy=0.9)   # prints "epoch 1  loss 0.3100  ..."

progress() is tqdm's bar when tqdm is installed, else a plain text bar with
the same everyday methods (set_postfix, set_description, update, write, close).
"""
import json
import os
import sys
import time
from typing import Any, Dict, IO, Iterable, Iterator, List, Optional

__all__ = ["progress", "TextProgress", "TrainingLog"]


def progress(iterable: Optional[Iterable] = None, desc: Optional[str] = None,
             total: Optional[int] = None, backend: str = "auto", **kwargs: Any) -> Any:
    """A progress bar over `iterable`: tqdm's when installed (backend "auto" or
    "tqdm"), else (or with backend "text") a plain text one. kwargs go to the bar
    (file, unit, disable, leave, mininterval, ...)."""
    if backend not in ("auto", "tqdm", "text"):
        raise ValueError(f"progress: backend is {backend!r}, expected 'auto', 'tqdm' or 'text'")
    if backend != "text":
        try:
            from tqdm.auto import tqdm
        except ImportError:
            if backend == "tqdm":
                raise ImportError("progress: backend 'tqdm' needs the tqdm package "
                                  "(pip install tqdm)") from None
        else:
            return tqdm(iterable, desc=desc, total=total, **kwargs)
    return TextProgress(iterable, desc=desc, total=total, **kwargs)


class TextProgress:
    """A text progress bar: "desc:  40%|####      | 4/10 [00:02<00:03, 2.00it/s, loss=0.5]".

    On a terminal it redraws one line at most every `mininterval` seconds; to a
    file or a pipe (a CI log) it writes only the final line, at close()."""

    def __init__(self, iterable: Optional[Iterable] = None, desc: Optional[str] = None,
                 total: Optional[int] = None, file: Optional[IO[str]] = None,
                 unit: str = "it", disable: bool = False, leave: bool = True,
                 mininterval: float = 0.1, **ignored: Any) -> None:
        self.iterable, self.desc, self.unit = iterable, desc, unit
        if total is None and iterable is not None and hasattr(iterable, "__len__"):
            total = len(iterable)
        self.total, self.n, self.disable, self.leave = total, 0, disable, leave
        self.file = file if file is not None else sys.stderr
        self.mininterval = mininterval
        self._postfix = ""
        self._start = self._last = time.monotonic()
        self._tty = bool(getattr(self.file, "isatty", lambda: False)())
        self._closed = False

    def __iter__(self) -> Iterator[Any]:
        if self.iterable is None:
            raise TypeError("TextProgress: no iterable to go over (use update())")
        try:
            for item in self.iterable:
                yield item
                self.update()
        finally:
            self.close()

    def __len__(self) -> int:
        if self.total is None:
            raise TypeError("TextProgress: the length is unknown")
        return self.total

    def __enter__(self) -> "TextProgress":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def update(self, n: int = 1) -> None:
        self.n += n
        now = time.monotonic()
        if self._tty and not self.disable and now - self._last >= self.mininterval:
            self._last = now
            self.file.write("\r" + self.format())
            self.file.flush()

    def set_postfix(self, ordered_dict: Optional[Dict[str, Any]] = None, **kwargs: Any) -> None:
        items = dict(ordered_dict or {}, **kwargs)
        self._postfix = ", ".join(f"{k}={_short(v)}" for k, v in items.items())

    def set_description(self, desc: Optional[str] = None) -> None:
        self.desc = desc

    def write(self, text: str) -> None:
        """A line of text above the bar."""
        self.file.write(("\r" if self._tty else "") + text + "\n")

    def format(self) -> str:
        elapsed = time.monotonic() - self._start
        rate = self.n / elapsed if elapsed > 0 else 0.0
        head = f"{self.desc}: " if self.desc else ""
        tail = f", {rate:.2f}{self.unit}/s" + (f", {self._postfix}" if self._postfix else "")
        if not self.total:
            return f"{head}{self.n}{self.unit} [{_clock(elapsed)}{tail}]"
        frac = min(self.n / self.total, 1.0)
        left = _clock((self.total - self.n) / rate) if rate > 0 else "?"
        return (f"{head}{frac * 100:3.0f}%|{'#' * int(frac * 10):<10}| {self.n}/{self.total} "
                f"[{_clock(elapsed)}<{left}{tail}]")

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if not self.disable and self.leave:
            self.file.write(("\r" if self._tty else "") + self.format() + "\n")
            self.file.flush()


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes:02d}:{secs:02d}"


def _short(value: Any) -> str:
    if hasattr(value, "asnumpy"):
        value = value.asnumpy()
    if hasattr(value, "item") and getattr(value, "size", 1) == 1:
        value = value.item()
    return f"{value:.4g}" if isinstance(value, float) else str(value)


class TrainingLog:
    """Metrics of each epoch (or step): printed as one line, kept in `history` (name ->
    list of values, for plots) and, with `path`, appended to a JSON-lines file that
    TrainingLog.load reads back (a resumed run continues its curves)."""

    def __init__(self, path: Optional[str] = None, file: Optional[IO[str]] = None,
                 precision: int = 4) -> None:
        self.path, self.file, self.precision = path, file, precision
        self.records: List[Dict[str, Any]] = []

    def log(self, **metrics: Any) -> str:
        """Record one row (numbers, NDArrays of one element or text); print and
        return its line, e.g. "epoch 3  loss 0.1234  accuracy 0.9500"."""
        row = {k: _plain(v) for k, v in metrics.items()}
        self.records.append(row)
        if self.path is not None:
            with open(self.path, "a", encoding="utf-8") as out:
                out.write(json.dumps(row) + "\n")
        line = "  ".join(f"{k} {self._text(v)}" for k, v in row.items())
        print(line, file=self.file if self.file is not None else sys.stdout, flush=True)
        return line

    def _text(self, value: Any) -> str:
        return f"{value:.{self.precision}f}" if isinstance(value, float) else str(value)

    @property
    def history(self) -> Dict[str, List[Any]]:
        """name -> its values, in the order logged (rows without it are skipped)."""
        out: Dict[str, List[Any]] = {}
        for row in self.records:
            for k, v in row.items():
                out.setdefault(k, []).append(v)
        return out

    @classmethod
    def load(cls, path: str, **kwargs: Any) -> "TrainingLog":
        """The log of a JSON-lines file (later rows append to it)."""
        log = cls(path, **kwargs)
        if os.path.exists(path):
            with open(path, encoding="utf-8") as src:
                log.records = [json.loads(line) for line in src if line.strip()]
        return log

    def plot(self, path: str, x: str = "epoch", metrics: Optional[List[str]] = None) -> str:
        """Save the curves of `metrics` (all numeric ones but x by default) against x
        as an image (PNG by path's suffix) with matplotlib; returns the path."""
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            raise ImportError("TrainingLog.plot needs matplotlib (pip install matplotlib)") \
                from None
        history = self.history
        names = metrics or [k for k, v in history.items()
                            if k != x and all(isinstance(e, (int, float)) for e in v)]
        fig, axes = plt.subplots(len(names), 1, figsize=(6, 2.5 * len(names)), squeeze=False)
        for ax, name in zip(axes[:, 0], names):
            rows = [r for r in self.records if name in r]
            xs = [r.get(x, i) for i, r in enumerate(rows)]
            ax.plot(xs, [r[name] for r in rows], marker="o")
            ax.set_xlabel(x)
            ax.set_ylabel(name)
        fig.tight_layout()
        fig.savefig(path)
        plt.close(fig)
        return path


def _plain(value: Any) -> Any:
    """A metric as a JSON value: NDArrays and NumPy scalars as Python numbers."""
    if hasattr(value, "asnumpy"):
        value = value.asnumpy()
    if hasattr(value, "item") and getattr(value, "size", 1) == 1:
        return value.item()
    return value
