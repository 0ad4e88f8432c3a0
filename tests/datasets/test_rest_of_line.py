"""Issue 42: CSV text that holds the delimiter. A header-less tweets-like file of 5,000 rows (made
here, deterministically) whose text has unquoted commas in about 12% of its rows: loaded the
README's header-less way those rows are field_count_mismatch; with dataset.text_rest_of_line=true
the text takes the rest of the line, the rows are read whole and counted (`rescued_rows`), and
only the rows bad for another reason are still skipped, each under its reason."""

from __future__ import annotations

import numpy as np
import pytest

from datasets.config import DatasetConfig
from datasets.prepare import prepare_dataset

WORDS = ("coffee", "rain", "traffic", "game", "concert", "lunch", "beach", "snow", "train", "music", "party", "sunset")


def tweets(path, n=5000, seed=42) -> dict:
    """id, ts, lat, lon, user, text, no header; returns how many rows of each kind it wrote."""
    rng = np.random.default_rng(seed)
    kinds = rng.choice(["plain", "comma", "quoted", "short", "no_lat", "bad_lat"], size=n,
                       p=[0.84, 0.12, 0.02, 0.004, 0.01, 0.006])
    lines = []
    for i, kind in enumerate(kinds):
        lat, lon = 40 + rng.uniform(-2, 2), -100 + rng.uniform(-2, 2)
        words = " ".join(rng.choice(WORDS, size=3))
        text = f"{words}, zq{i:04d} again, and again" if kind == "comma" else words
        if kind == "quoted":
            text = f'"{words}, quoted"'
        lat_s = "" if kind == "no_lat" else (f"{lat + 100:.5f}" if kind == "bad_lat" else f"{lat:.5f}")
        line = f"{i},{1_600_000_000 + i},{lat_s},{lon:.5f},user{i % 97},{text}"
        if kind == "short":
            line = f"{i},{1_600_000_000 + i},{lat:.5f}"
        lines.append(line)
    path.write_text("\n".join(lines) + "\n")
    return {k: int((kinds == k).sum()) for k in ("plain", "comma", "quoted", "short", "no_lat", "bad_lat")}


def _cfg(path, **kw):
    return DatasetConfig(name="file", path=str(path), size=0, header=False, lat_col="2", lon_col="3", text_col="5",
                         ts_col="1", **kw)


@pytest.mark.spark
def test_the_text_takes_the_rest_of_the_line(spark, tmp_path, capsys):
    path = tmp_path / "tweets.csv"
    made = tweets(path)
    assert 500 < made["comma"] < 700 and made["short"] and made["no_lat"] and made["bad_lat"]
    before = prepare_dataset(_cfg(path), spark, tmp_path / "cache")
    assert before.bad_rows["field_count_mismatch"] == made["comma"] + made["short"]
    assert before.rescued_rows == 0
    after = prepare_dataset(_cfg(path, text_rest_of_line=True), spark, tmp_path / "cache")
    assert after.n_input_rows == before.n_input_rows == 5000
    assert after.rescued_rows == made["comma"]
    still = {k: v for k, v in after.bad_rows.items() if v}
    assert still == {"field_count_mismatch": made["short"], "missing_coordinate": made["no_lat"],
                     "latitude_out_of_range": made["bad_lat"]}
    assert after.objects.num_rows == 5000 - made["short"] - made["no_lat"] - made["bad_lat"]
    # the rescued rows' text after the comma was kept: each one's own word is in the vocabulary
    vocab = set(after.vocab.column("term").to_pylist())
    assert sum(1 for t in vocab if t.startswith("zq")) == made["comma"]
    assert "quoted" in vocab  # a quoted text with a comma reads as before, unquoted, not counted as rescued
    with capsys.disabled():
        print(f"\ntweets.csv: {after.n_input_rows} rows read; without text_rest_of_line "
              f"{sum(before.bad_rows.values())} skipped ({ {k: v for k, v in before.bad_rows.items() if v} }); with it "
              f"{after.rescued_rows} rescued, {sum(still.values())} still skipped ({still}), "
              f"{after.objects.num_rows} objects")


def test_the_text_must_be_the_last_field(tmp_path):
    from datasets.files import check_file

    path = tmp_path / "t.csv"
    path.write_text("1,2,40.0,-100.0,u,hello world\n" * 3)
    with pytest.raises(ValueError, match=r"dataset.text_col='4' is field 4 of 6 in .*; allowed with "
                                         r"dataset.text_rest_of_line=true: the last field \(5\)"):
        check_file(DatasetConfig(name="file", path=str(path), header=False, lat_col="2", lon_col="3", text_col="4",
                                 ts_col="1", text_rest_of_line=True))
    from datasets.config import validate_dataset_config

    with pytest.raises(ValueError, match=r"dataset.encoding='latin-1' is invalid; allowed: utf-8 \(or ascii\) with "
                                         r"dataset.text_rest_of_line=true"):
        validate_dataset_config(_cfg(path, text_rest_of_line=True, encoding="latin-1"))
