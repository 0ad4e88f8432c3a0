"""Files every executor can reach: worker state, kept pairs and the events table under one URI.

A run's state lives under `state_uri` (`file:///...`, `hdfs://namenode/...`, `s3a://bucket/...`);
executors on other hosts read and write it through pyarrow's filesystems, so a multi-host cluster
needs no shared POSIX folder. Locations are plain URI strings (they pickle into Spark tasks as
they are); a filesystem is made once per process per scheme and authority.

pyarrow names S3 `s3://` where Hadoop (and so Spark's readers) name it `s3a://`: `arrow_uri` and
`spark_uri` translate, so one configured URI serves both. Paths without a scheme are local.
"""

from __future__ import annotations

import functools
import os
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

SCHEMES = ("file", "hdfs", "viewfs", "s3a", "s3", "gs")


class StoreError(ValueError):
    """A state URI that cannot be used (scheme unknown, filesystem unavailable)."""


def as_uri(location) -> str:
    """A URI for a URI or a local path (made absolute)."""
    text = str(location)
    if "://" in text:
        return text
    return "file://" + os.path.abspath(text)


def join(uri: str, *parts: str) -> str:
    return "/".join([as_uri(uri).rstrip("/"), *(str(p).strip("/") for p in parts)])


def arrow_uri(uri: str) -> str:
    uri = as_uri(uri)
    return "s3://" + uri[len("s3a://"):] if uri.startswith("s3a://") else uri


def spark_uri(uri: str) -> str:
    uri = as_uri(uri)
    return "s3a://" + uri[len("s3://"):] if uri.startswith("s3://") else uri


@functools.lru_cache(maxsize=16)
def _filesystem(root: str) -> pafs.FileSystem:
    return pafs.FileSystem.from_uri(root)[0]


def _resolve(uri: str) -> tuple[pafs.FileSystem, str]:
    parts = urlsplit(arrow_uri(uri))
    if parts.scheme not in SCHEMES:
        raise StoreError(f"state_uri={uri!r} has scheme {parts.scheme!r}; allowed: {', '.join(SCHEMES)}")
    try:
        fs = _filesystem(f"{parts.scheme}://{parts.netloc}/")
    except (pa.ArrowException, OSError) as exc:  # e.g. hdfs without libhdfs, s3 without credentials
        raise StoreError(f"state_uri={uri!r}: pyarrow cannot open that filesystem here ({exc})") from None
    # object stores address "bucket/key"; file and HDFS filesystems are bound to their host
    path = f"{parts.netloc}{parts.path}" if parts.scheme in ("s3", "gs") else parts.path
    return fs, path


def check(uri: str) -> str:
    """The URI, once it is known to be writable (a probe file is written and removed)."""
    fs, path = _resolve(uri)
    try:
        fs.create_dir(path, recursive=True)
        with fs.open_output_stream(f"{path}/.probe") as out:
            out.write(b"ok")
        fs.delete_file(f"{path}/.probe")
    except (pa.ArrowException, OSError) as exc:
        raise StoreError(f"state_uri={uri!r} is not writable: {exc}") from None
    return as_uri(uri)


def exists(uri: str) -> bool:
    fs, path = _resolve(uri)
    return fs.get_file_info(path).type != pafs.FileType.NotFound


def fresh_dir(uri: str) -> str:
    """An existing folder with no Parquet or Arrow files left from an earlier attempt (a retried stage)."""
    fs, path = _resolve(uri)
    fs.create_dir(path, recursive=True)
    for info in fs.get_file_info(pafs.FileSelector(path)):
        if info.type == pafs.FileType.File and info.path.endswith(STATE_SUFFIXES):
            fs.delete_file(info.path)
    return as_uri(uri)


STATE_SUFFIXES = (".parquet", ".arrow")


def write_table(uri: str, table: pa.Table) -> None:
    """Write Parquet, or an Arrow IPC file when `uri` ends in .arrow (state that lives one epoch:
    no encoding, several times faster to write and read than Parquet); a retried task's write
    replaces the earlier attempt's."""
    fs, path = _resolve(uri)
    fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
    if path.endswith(".arrow"):
        with fs.open_output_stream(path) as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
    else:
        pq.write_table(table, path, filesystem=fs)


def read_table(uri: str) -> pa.Table | None:
    """The table at `uri` (Parquet, or Arrow IPC for .arrow), or None when there is none."""
    fs, path = _resolve(uri)
    try:
        if path.endswith(".arrow"):
            with fs.open_input_file(path) as source:
                return pa.ipc.open_file(source).read_all()
        return pq.read_table(path, filesystem=fs)
    except FileNotFoundError:
        return None


def read_range(uri: str, column: str, lo: int, hi: int) -> pa.Table:
    """The rows of the Parquet table at `uri` with lo <= column < hi (row groups outside the range
    are skipped by their statistics)."""
    fs, path = _resolve(uri)
    return pq.read_table(path, filesystem=fs, filters=[(column, ">=", lo), (column, "<", hi)])


def put_file(local_path, uri: str) -> None:
    """Copy a local file to `uri` byte for byte, beside it first and renamed, so a reader never
    sees half a file."""
    fs, path = _resolve(uri)
    fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
    tmp = f"{path}.tmp-{os.getpid()}"
    pafs.copy_files(os.path.abspath(local_path), tmp, source_filesystem=pafs.LocalFileSystem(),
                    destination_filesystem=fs)
    fs.move(tmp, path)


def remove(uri: str) -> None:
    fs, path = _resolve(uri)
    try:
        fs.delete_file(path)
    except FileNotFoundError:
        pass


def remove_tree(uri: str) -> None:
    """Delete a folder and everything under it (nothing when it is not there)."""
    fs, path = _resolve(uri)
    if fs.get_file_info(path).type == pafs.FileType.Directory:
        fs.delete_dir(path)
