"""The state store: URIs in, Parquet through pyarrow's filesystems, clear errors for what cannot work."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from harness.core import store


def test_paths_become_absolute_file_uris_and_join_with_slashes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert store.as_uri("rel/state") == f"file://{tmp_path}/rel/state"
    assert store.as_uri("hdfs://nn:8020/x") == "hdfs://nn:8020/x"
    assert store.join("s3a://bucket/root/", "runs", "/r1/", "f.parquet") == "s3a://bucket/root/runs/r1/f.parquet"


def test_s3_is_named_for_each_reader():
    assert store.arrow_uri("s3a://b/k/f.parquet") == "s3://b/k/f.parquet"  # pyarrow's name
    assert store.spark_uri("s3://b/k") == "s3a://b/k"  # Hadoop's name
    assert store.spark_uri("file:///x") == "file:///x"


def _files(folder):
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


@pytest.mark.parametrize("suffix", [".parquet", ".arrow"])
def test_write_read_remove_and_missing_files_read_as_none(tmp_path, suffix):
    root = store.as_uri(tmp_path / "st")
    f = store.join(root, "epoch=1", f"worker-00000-f1-queries{suffix}")
    assert store.read_table(f) is None
    table = pa.table({"key": np.arange(5, dtype=np.uint64), "terms": [[1, 2], [], [3], [4, 5, 6], []]})
    store.write_table(f, table)
    assert store.read_table(f).equals(table)
    magic = (tmp_path / "st" / "epoch=1" / f"worker-00000-f1-queries{suffix}").read_bytes()[:6]
    assert magic == (b"ARROW1" if suffix == ".arrow" else b"PAR1"[:4] + magic[4:])
    assert store.exists(store.join(root, "epoch=1"))
    store.remove(f)
    store.remove(f)  # removing what is not there is not an error
    assert store.read_table(f) is None and _files(tmp_path / "st") == []


def test_put_file_copies_bytes_and_leaves_no_temporary_file(tmp_path):
    src = tmp_path / "events.parquet"
    src.write_bytes(b"PAR1 not really parquet PAR1")
    store.put_file(src, store.as_uri(tmp_path / "shared" / "w" / "events.parquet"))
    assert (tmp_path / "shared" / "w" / "events.parquet").read_bytes() == src.read_bytes()
    assert _files(tmp_path / "shared") == ["w/events.parquet"]


def test_fresh_dir_drops_parquet_left_by_an_earlier_attempt_only(tmp_path):
    d = store.as_uri(tmp_path / "epoch=2")
    store.write_table(store.join(d, "a.parquet"), pa.table({"x": [1]}))
    store.write_table(store.join(d, "b.arrow"), pa.table({"x": [1]}))
    (tmp_path / "epoch=2" / "notes.txt").write_text("kept")
    assert store.fresh_dir(d) == d
    assert _files(tmp_path / "epoch=2") == ["notes.txt"]
    store.remove_tree(d)
    assert not (tmp_path / "epoch=2").exists()
    store.remove_tree(d)


def test_an_unknown_scheme_is_named_with_what_is_allowed():
    with pytest.raises(store.StoreError, match=r"state_uri='ftp://h/x' has scheme 'ftp'; allowed: file, hdfs"):
        store.check("ftp://h/x")


def test_a_filesystem_that_cannot_open_here_says_so():
    with pytest.raises(store.StoreError, match=r"state_uri='hdfs://127.0.0.1:1/x'"):
        store.check("hdfs://127.0.0.1:1/x")


def test_an_unwritable_folder_is_refused(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    with pytest.raises(store.StoreError, match="is not writable"):
        store.check(store.as_uri(blocked / "state"))
