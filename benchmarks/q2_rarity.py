"""How rare STS-Q2's forced keyword is on a prepared dataset (PS2Stream: "at least one keyword that
is not in the top 1% most frequent terms", ps2stream.txt l.290): the document frequency at the
top-1% cut and the share of term occurrences the top 1% hold. Reads `vocab.parquet` only. Usage,
from the repository root:

    python benchmarks/q2_rarity.py results/cache/datasets/synthetic-*
"""

from __future__ import annotations

import sys

import numpy as np
import pyarrow.parquet as pq


def rarity(path: str, fraction: float = 0.01) -> dict:
    v = pq.read_table(f"{path}/vocab.parquet").to_pandas().sort_values("term_id")
    n_obj = pq.read_metadata(f"{path}/objects.parquet").num_rows
    df = v["df"].to_numpy()
    cut = max(1, int(np.ceil(fraction * len(df))))
    return {"dataset": path.rstrip("/").split("/")[-1], "objects": n_obj, "terms": len(df),
            "ids_ranked_by_df": bool(np.all(np.diff(df) <= 0)), "cut_rank": cut,
            "df_at_cut": int(df[cut]), "df_at_cut_share_of_objects": float(df[cut] / n_obj),
            "top_share_of_occurrences": float(df[:cut].sum() / df.sum()),
            "median_df_outside_top": float(np.median(df[cut:]))}


if __name__ == "__main__":
    for p in sys.argv[1:]:
        print(rarity(p))
