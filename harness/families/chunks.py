"""Brute-force oracles answer their queries (or scan their objects) in one chunk per core: the
work is embarrassingly parallel and the compiled kernels release the GIL (`nogil=True`), so plain
threads use every core without copying the stream into other processes."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import numpy as np

MIN_WORK_PER_CHUNK = 200_000  # pairs below which a second thread costs more than it saves


def in_chunks(call: Callable[[np.ndarray], np.ndarray], n_items: int, work: int | None = None) -> list[np.ndarray]:
    """`call(part)` over contiguous parts of range(n_items), one per core (fewer when the `work`,
    the pairs to examine, is small), in threads; the results in the parts' order."""
    work = n_items if work is None else work
    n_chunks = max(1, min(os.cpu_count() or 1, n_items, work // MIN_WORK_PER_CHUNK))
    parts = np.array_split(np.arange(n_items), n_chunks)
    if n_chunks == 1:
        return [call(parts[0])]
    with ThreadPoolExecutor(n_chunks) as pool:
        return list(pool.map(call, parts))
