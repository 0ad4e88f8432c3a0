"""The event stream's data model: one Arrow schema for every query family, and a numpy view of it.

A workload is one ordered stream of events (DESIGN.md, data model). Every event carries the same
columns so that objects, subscriptions of any family and snapshot queries travel through Spark in
one table; columns a kind does not use are null/NaN. Terms are a list<int32> column whose Arrow
layout (offsets + values) is already the CSR form the routers and worker kernels want, so the
numpy view below is zero-copy where Arrow allows it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from harness.core.kernels import csr_gather

# kind of event
OBJECT, INSERT, DELETE, SNAPSHOT = 0, 1, 2, 3
KIND_NAMES = {OBJECT: "object", INSERT: "insert", DELETE: "delete", SNAPSHOT: "snapshot"}

# Query family: the predicate or ranking (DESIGN.md, query families); objects carry -1. The kind
# above is the lifetime (insert/delete: continuous, snapshot: one-shot), an independent axis:
# SSTD's SRQ is (range, snapshot), its CKQ (knn, insert), its STQ (frequent_terms, snapshot). These are
# the built-in families' codes; a plugin family declares its own code (harness.families.registry).
RANGE, KNN, TOPK, TERMS = 0, 1, 2, 3
FAMILY_NAMES = {RANGE: "range", KNN: "knn", TOPK: "topk", TERMS: "frequent_terms"}
# a family's former name -> its name, so a config or an event file that uses it gets a clear error
# ("terms" was also the keyword column's name)
FORMER_FAMILY_NAMES = {"terms": "frequent_terms"}
FAMILY_IDS = {v: k for k, v in FAMILY_NAMES.items()}

# keyword operator of a subscription (range; kNN: OR as DkM-SKS, AND as SSTD's CKQ)
AND, OR = 0, 1

EVENT_FIELDS = [
    ("seq", pa.int64()),  # global order of the stream
    ("ts", pa.float64()),  # event time, seconds
    ("kind", pa.int8()),  # OBJECT / INSERT / DELETE / SNAPSHOT
    ("family", pa.int8()),  # query family, -1 for objects
    ("id", pa.int64()),  # oid for objects, qid for queries
    ("x", pa.float64()),  # object location, or query point (centre), km
    ("y", pa.float64()),
    ("xmin", pa.float64()),  # query rectangle, km (NaN for objects)
    ("ymin", pa.float64()),
    ("xmax", pa.float64()),
    ("ymax", pa.float64()),
    ("terms", pa.list_(pa.int32())),  # term ids, sorted ascending, distinct
    ("op", pa.int8()),  # AND / OR of a query's keywords
    ("k", pa.int32()),  # kNN / top-k / top-k terms result size
    ("alpha", pa.float32()),  # top-k spatial weight
    ("tau", pa.float64()),  # snapshot look-back, or a continuous query's lifetime (seconds; NaN: none)
    ("win", pa.float64()),  # continuous top-k terms (CTQ): window T (seconds; NaN when unused)
    ("step", pa.float64()),  # CTQ: report period delta (seconds); on a CTQ's report event, the report's number
]
EVENT_SCHEMA = pa.schema(EVENT_FIELDS)
NUMERIC_FIELDS = [name for name, _ in EVENT_FIELDS if name != "terms"]
NUMPY_DTYPES = {name: t.to_pandas_dtype() for name, t in EVENT_FIELDS if name != "terms"}
# what a column holds for an event that does not use it
BLANK = {**{name: 0 for name in NUMERIC_FIELDS}, "family": -1, "xmin": np.nan, "ymin": np.nan, "xmax": np.nan,
         "ymax": np.nan, "tau": np.nan, "win": np.nan, "step": np.nan}

# Objects of a prepared dataset (before they become events).
OBJECT_SCHEMA = pa.schema(
    [
        ("oid", pa.int64()),
        ("ts", pa.float64()),
        ("lon", pa.float64()),
        ("lat", pa.float64()),
        ("x", pa.float64()),
        ("y", pa.float64()),
        ("terms", pa.list_(pa.int32())),
    ]
)


def list_to_csr(arr: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """Offsets (int64, len n+1, starting at 0) and flat values (int32) of a list<int32> column."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    if arr.null_count:
        arr = arr.fill_null(pa.scalar([], type=arr.type))
    offsets = np.asarray(arr.offsets, dtype=np.int64)
    values = np.asarray(arr.values, dtype=np.int32)
    if len(offsets) and offsets[0] != 0:
        values = values[offsets[0] : offsets[-1]]
        offsets = offsets - offsets[0]
    else:
        values = values[: offsets[-1] if len(offsets) else 0]
    return offsets, values


def csr_to_list(offsets: np.ndarray, values: np.ndarray) -> pa.ListArray:
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pa.array(values, pa.int32()))


def csr_take(offsets: np.ndarray, values: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Gather rows of a CSR array (compiled: `kernels.csr_gather`)."""
    return csr_gather(np.asarray(offsets, np.int64), values, np.asarray(rows, dtype=np.int64))


@dataclass
class Events:
    """Column arrays of an event batch; `terms` as CSR (`offsets`, `values`)."""

    cols: dict[str, np.ndarray]
    offsets: np.ndarray
    values: np.ndarray

    def __post_init__(self):
        if len(self.cols) < len(NUMERIC_FIELDS):  # a builder that does not use a column leaves it blank
            n = len(self.offsets) - 1
            for name in NUMERIC_FIELDS:
                if name not in self.cols:
                    self.cols[name] = np.full(n, BLANK[name], NUMPY_DTYPES[name])

    def __len__(self) -> int:
        return len(self.cols["seq"])

    def __getattr__(self, name: str) -> np.ndarray:
        cols = self.__dict__.get("cols")
        if cols is not None and name in cols:
            return cols[name]
        raise AttributeError(name)

    @classmethod
    def from_arrow(cls, data: pa.RecordBatch | pa.Table) -> "Events":
        cols = {}
        names = set(data.schema.names)
        for name in NUMERIC_FIELDS:
            if name not in names:  # written before the column existed: blank
                continue
            col = data.column(name)
            if isinstance(col, pa.ChunkedArray):
                col = col.combine_chunks()
            cols[name] = col.to_numpy(zero_copy_only=False).astype(NUMPY_DTYPES[name], copy=False)
        offsets, values = list_to_csr(data.column("terms"))
        return cls(cols, offsets, values)

    @classmethod
    def empty(cls) -> "Events":
        return cls({n: np.zeros(0, NUMPY_DTYPES[n]) for n in NUMERIC_FIELDS}, np.zeros(1, np.int64), np.zeros(0, np.int32))

    def to_arrow(self) -> pa.RecordBatch:
        arrays = [pa.array(self.cols[n]) if n != "terms" else None for n in EVENT_SCHEMA.names]
        arrays[EVENT_SCHEMA.names.index("terms")] = csr_to_list(self.offsets, self.values)
        return pa.RecordBatch.from_arrays(arrays, schema=EVENT_SCHEMA)

    def take(self, rows: np.ndarray) -> "Events":
        offsets, values = csr_take(self.offsets, self.values, rows)
        return Events({n: c[rows] for n, c in self.cols.items()}, offsets, values)

    def slice(self, lo: int, hi: int) -> "Events":
        """Rows lo..hi-1 as views of these columns (only the term offsets are rebased): a take of
        a contiguous range without copying every column."""
        offsets = self.offsets[lo:hi + 1]
        return Events({n: c[lo:hi] for n, c in self.cols.items()}, offsets - offsets[0],
                      self.values[offsets[0]:offsets[-1]])

    @staticmethod
    def concat(parts: list["Events"]) -> "Events":
        parts = [p for p in parts if len(p)]
        if not parts:
            return Events.empty()
        cols = {n: np.concatenate([p.cols[n] for p in parts]) for n in NUMERIC_FIELDS}
        lengths = np.concatenate([np.diff(p.offsets) for p in parts])
        offsets = np.zeros(len(lengths) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return Events(cols, offsets, np.concatenate([p.values for p in parts]))


# --- result pairs -------------------------------------------------------------------------------

def pair_keys(qids: np.ndarray, oids: np.ndarray) -> np.ndarray:
    """Pack (query id, object id) into one int64 so results shuffle and de-duplicate as integers."""
    return (np.asarray(qids, np.int64) << np.int64(32)) | np.asarray(oids, np.int64)


def term_keys(qids: np.ndarray, reports: np.ndarray, terms: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """One int64 per top-k-terms result row (query, report, term, count): a hash, since the four do
    not pack into 64 bits; distinct rows collide with probability ~ n^2 / 2^64."""
    a = splitmix64((np.asarray(qids, np.int64) << np.int64(32)) | np.asarray(terms, np.int64))
    b = splitmix64((np.asarray(reports, np.int64) << np.int64(32)) | np.asarray(counts, np.int64))
    with np.errstate(over="ignore"):
        return (a ^ (b * np.uint64(0x94D049BB133111EB))).view(np.int64)


def unpack_keys(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    keys = np.asarray(keys, np.int64)
    return keys >> np.int64(32), keys & np.int64(0xFFFFFFFF)


def sorted_unique(keys: np.ndarray) -> np.ndarray:
    """Distinct keys by sort plus a neighbour mask (much faster than np.unique on int64 millions).
    The default sort, not a stable one: equal integers need no order, and numpy's stable sort of
    int64 is a merge sort several times slower than its vectorised quicksort."""
    keys = np.sort(np.asarray(keys, np.int64))
    if len(keys) < 2:
        return keys
    keep = np.empty(len(keys), dtype=bool)
    keep[0] = True
    np.not_equal(keys[1:], keys[:-1], out=keep[1:])
    return keys[keep]


def seq_positions(known: np.ndarray, seq: np.ndarray) -> np.ndarray:
    """`np.searchsorted(known, seq)` for an ascending `known` of distinct ints, by subtraction when
    `known` is a run of consecutive seqs (a stream's are: one per event), so that finding millions
    of copies among the events is O(1) each, not a binary search. Positions past either end are
    clipped to [0, len(known)] as searchsorted would give them."""
    seq = np.asarray(seq)
    if len(known) and int(known[-1]) - int(known[0]) == len(known) - 1:
        return np.clip(seq.astype(np.int64) - int(known[0]), 0, len(known))
    return np.searchsorted(known, seq)


def csr_of(parts: list[np.ndarray], dtype=np.int64) -> tuple[np.ndarray, np.ndarray]:
    """Offsets (int64, len n+1) and concatenated values of a list of arrays."""
    offsets = np.zeros(len(parts) + 1, np.int64)
    np.cumsum([len(p) for p in parts], out=offsets[1:])
    return offsets, (np.concatenate(parts).astype(dtype, copy=False) if parts else np.zeros(0, dtype))


# bytes of an event's Arrow row: its fixed-width columns, its int32 list offset and 4 bytes per term
ROW_FIXED_BYTES = sum(t.byte_width for name, t in EVENT_FIELDS if name != "terms") + 4


def row_bytes(ev: "Events", rows: np.ndarray | None = None) -> np.ndarray:
    """Bytes each event (or each of `rows`) takes in an Arrow block: what a copy sent to a worker
    carries (the network model) and what a stored subscription moves in a migration."""
    rows = np.arange(len(ev)) if rows is None else np.asarray(rows, np.int64)
    return ROW_FIXED_BYTES + 4 * (ev.offsets[rows + 1] - ev.offsets[rows]).astype(np.int64)


def sorted_runs(values: np.ndarray) -> list[tuple[int, int]]:
    """(start, end) of each run of equal values in a sorted array, in order; none when it is empty."""
    if len(values) == 0:
        return []
    cuts = (np.flatnonzero(values[1:] != values[:-1]) + 1).tolist()
    return list(zip([0, *cuts], [*cuts, len(values)]))


def small_ints(values: np.ndarray, bound: int) -> np.ndarray:
    """Integers known to lie in [0, bound) as the narrowest unsigned type: numpy's stable sort of
    8- and 16-bit integers is a radix sort, several times faster than its merge sort of int64."""
    dtype = np.uint8 if bound <= 1 << 8 else np.uint16 if bound <= 1 << 16 else np.int64
    return np.asarray(values).astype(dtype, copy=False)


_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


def splitmix64(values: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser: a cheap, well-mixed 64-bit hash of integer ids or keys."""
    z = np.asarray(values, np.int64).view(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * _MIX1
        z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


def key_hash_sum(keys: np.ndarray) -> int:
    """Order-independent digest part: sum (mod 2^64) of splitmix64 hashes of distinct keys."""
    with np.errstate(over="ignore"):
        return int(splitmix64(keys).sum(dtype=np.uint64))


def format_digest(count: int, hash_sum: int) -> str:
    """Digest of a result set: its size and the hash sum; equal sets give equal digests."""
    return f"{count}:{hash_sum % (1 << 64):016x}"


def digest_of(keys: np.ndarray) -> str:
    uniq = sorted_unique(keys)
    return format_digest(len(uniq), key_hash_sum(uniq))
