"""The scale oracle for range subscriptions: a tiled spatial join on Spark, per tile by brute force.

The brute-force oracle (oracle.py) checks every object against every subscription on the driver;
past `oracle.max_checks` that no longer fits. This one is a different join algorithm with nothing
of GI2 or of any strategy in it: a uniform grid of `tiles` x `tiles` over the extent; every object
goes to the one tile holding its point, every subscription to each tile its rectangle overlaps
(Spark's `sequence` + `explode`, no Python per row); the tiles are shuffled to tasks, and each
task checks its tiles' objects against their subscriptions with the brute-force kernel (liveness,
rectangle, keywords, all in `_brute_force_match`). The object's point is the reference point: a
pair meets in exactly one tile, so each task's count and hash sum add up to the digest of the
distinct pairs with no shuffle of pairs. Coordinates outside the extent are clamped to the border
tiles, the same monotone map for points and rectangles, so no pair is lost there.

A subscription's deletion is found with a join on its id (the first DELETE after its insertion,
as `deletion_seqs` defines lifetimes after the stream is normalised).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from harness.core.events import DELETE, INSERT, OBJECT, RANGE, Events, format_digest, key_hash_sum
from harness.families.base import NEVER
from harness.families.range.oracle import _brute_force_match

_OUT = "count long, hash string, checks long"


def _tile(col, lo: float, size: float, tiles: int):
    from pyspark.sql import functions as F

    return F.least(F.greatest(F.floor((col - F.lit(lo)) / F.lit(size)), F.lit(0)), F.lit(tiles - 1)).cast("long")


def _check_tiles(batches, fields: list[str]):
    """mapInArrow body: every tile of this task, its objects against its live subscriptions."""
    parts = [b for b in batches if b.num_rows]
    count = hashed = checks = 0
    if parts:
        table = pa.Table.from_batches(parts).sort_by([("tile", "ascending")])
        tile = table.column("tile").to_numpy()
        ins, dele = table.column("ins").to_numpy(), table.column("del").to_numpy()
        ev = Events.from_arrow(table.select(fields))
        bounds = np.flatnonzero(np.diff(tile)) + 1
        for rows in np.split(np.arange(len(tile)), bounds):
            objs = rows[ev.kind[rows] == OBJECT]
            subs = rows[ev.kind[rows] == INSERT]
            if not len(objs) or not len(subs):
                continue
            o, q = ev.take(objs), ev.take(subs)
            work = np.ones(len(o), np.int64)
            keys = _brute_force_match(o.seq, o.id, o.x, o.y, o.offsets, o.values, q.id, q.xmin, q.ymin, q.xmax,
                                      q.ymax, q.op, q.offsets, q.values, ins[subs], dele[subs], work)
            count += len(keys)
            hashed = (hashed + key_hash_sum(keys)) % (1 << 64)
            checks += int(work.sum()) - len(o)
    yield pa.RecordBatch.from_pydict({"count": [count], "hash": [str(hashed)], "checks": [checks]})


def tiled_oracle_digest(spark, events_df, extent: tuple[float, float, float, float], tiles: int = 64,
                        partitions: int | None = None) -> tuple[str, int]:
    """(digest, subscription checks) of every range pair in the stream, computed on Spark."""
    from pyspark.sql import functions as F

    if tiles < 1:
        raise ValueError(f"oracle.tiles={tiles} is invalid: allowed is an integer >= 1")
    x0, y0, x1, y1 = extent
    w, h = max(x1 - x0, 1e-12) / tiles, max(y1 - y0, 1e-12) / tiles
    fields = events_df.columns
    objects = (events_df.where(F.col("kind") == OBJECT)
               .withColumn("tile", _tile(F.col("y"), y0, h, tiles) * tiles + _tile(F.col("x"), x0, w, tiles))
               .withColumn("ins", F.lit(-1).cast("long")).withColumn("del", F.lit(NEVER).cast("long")))
    inserts = events_df.where((F.col("kind") == INSERT) & (F.col("family") == RANGE))
    deletes = events_df.where(F.col("kind") == DELETE).select("id", F.col("seq").alias("del"))
    ends = (inserts.select("id", F.col("seq").alias("ins")).join(deletes, "id")
            .where(F.col("del") > F.col("ins")).groupBy("id", "ins").agg(F.min("del").alias("del")))
    subs = (inserts.withColumn("ins", F.col("seq")).join(ends, ["id", "ins"], "left")
            .withColumn("del", F.coalesce(F.col("del"), F.lit(NEVER).cast("long")))
            .withColumn("tx", F.explode(F.sequence(_tile(F.col("xmin"), x0, w, tiles),
                                                   _tile(F.col("xmax"), x0, w, tiles))))
            .withColumn("ty", F.explode(F.sequence(_tile(F.col("ymin"), y0, h, tiles),
                                                   _tile(F.col("ymax"), y0, h, tiles))))
            .withColumn("tile", F.col("ty") * tiles + F.col("tx")).drop("tx", "ty"))
    cols = [*fields, "tile", "ins", "del"]
    both = objects.select(cols).unionByName(subs.select(cols))
    n = partitions or max(2 * spark.sparkContext.defaultParallelism, 8)
    out = both.repartition(n, "tile").mapInArrow(lambda it: _check_tiles(it, fields), _OUT).toArrow()
    count = int(np.sum(out.column("count").to_numpy()))
    hashed = sum(int(v) for v in out.column("hash").to_pylist()) % (1 << 64)
    return format_digest(count, hashed), int(np.sum(out.column("checks").to_numpy()))
