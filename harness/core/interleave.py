"""The order in which the repetitions of several compared cells run: interleaved, so that cells a
claim compares share the machine's state (issue 48, part 3).

A run times each measured epoch `measure.repeat` times from the same state, inside the worker's
task (harness/engine/worker_epoch.py); the runs of an invocation (the strategies and variants a
claim compares on the same input) are lanes of the same epoch job (harness/engine/lockstep.py), so
one task holds the (lane, worker) pairs of several runs. Run one after another, lane A's
repetitions all came before lane B's, and a burst of load from another process fell on one of
them; here repetition 1 of every cell runs, then repetition 2 of every cell, and so on.

The direction alternates with each repetition (A B C, C B A, A B C, ...): for a pair that is the
ABBA order (A B, B A, A B, ...), which cancels a linear drift of the machine's speed between the
two, and for more cells no cell is always first (the first after the discarded repetition pays
any cache the one before left cold).
"""

from __future__ import annotations


def rep_order(n_cells: int, repeat: int) -> list[tuple[int, int]]:
    """(repetition, cell) in the order they run: repetition by repetition, every cell in each,
    the direction alternating (ABBA for two cells)."""
    if n_cells < 0 or repeat < 0:
        raise ValueError(f"rep_order(n_cells={n_cells!r}, repeat={repeat!r}): both must be integers >= 0")
    out = []
    for r in range(repeat):
        cells = range(n_cells) if r % 2 == 0 else range(n_cells - 1, -1, -1)
        out.extend((r, c) for c in cells)
    return out
