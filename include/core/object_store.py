"""Where one task hands a file to the next: a folder of this machine's ``var/``, or an object store every machine
reaches (S3 or any S3-compatible server).

On one machine the landed TLC/NOAA files and the trained models live under ``var/`` (``Paths.landing``,
``Paths.models``). Once tasks of one DAG run may run on different machines (Airflow's CeleryExecutor, workers that
share no disk), they go to the object store named by ``PIPELINE_LANDING_URI`` / ``PIPELINE_MODELS_URI``
(``s3://bucket/prefix``), reached at ``S3_ENDPOINT`` with the standard AWS variables, as the ``s3://`` warehouse is.
A location is then a URI, ``s3://bucket/key``: the same string names the object for Python (pyarrow's S3 filesystem,
here), for Spark (hadoop-aws's S3A filesystem, registered for ``s3://`` too: :func:`spark_properties`) and for
lineage (``naming.storage_id``: namespace ``s3://bucket``, name the key, which is also how the OpenLineage Spark
listener names what Spark read or wrote there).

Objects are written whole: a file is uploaded from a complete local copy, and an object appears only when its upload
completed, so a reader never sees half a file. Nothing here does I/O at import.
"""

from __future__ import annotations

import functools
import posixpath
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from include.core import settings

S3_SCHEMES = ("s3", "s3a", "s3n")
S3A_FILESYSTEM = "org.apache.hadoop.fs.s3a.S3AFileSystem"


def is_remote(location: str | Path) -> bool:
    """Whether ``location`` is an object-store URI (``s3://``, ``s3a://``, ``s3n://``), not a local path."""
    return urlparse(str(location)).scheme in S3_SCHEMES


def join(root: str, *parts: str) -> str:
    """``root`` (a local folder or a URI) and ``parts``, joined with ``/``."""
    return "/".join([str(root).rstrip("/"), *(part.strip("/") for part in parts)])


def _bucket_key(uri: str) -> str:
    """``bucket/key``: how pyarrow's S3 filesystem names the object of ``s3://bucket/key``."""
    parsed = urlparse(uri)
    return f"{parsed.netloc}/{parsed.path.lstrip('/')}".rstrip("/")


def _uri(bucket_key: str) -> str:
    return f"s3://{bucket_key}"


@functools.lru_cache(maxsize=1)
def _filesystem(endpoint: str | None):
    from pyarrow import fs

    # Credentials and region come from the standard AWS variables (or files), as for every other client of the store.
    return fs.S3FileSystem(endpoint_override=endpoint) if endpoint else fs.S3FileSystem()


def filesystem():
    """pyarrow's S3 filesystem at ``S3_ENDPOINT`` (AWS itself when unset), made once per process."""
    return _filesystem(settings.S3_ENDPOINT.raw())


def exists(location: str | Path) -> bool:
    if not is_remote(location):
        return Path(location).exists()
    from pyarrow import fs

    return filesystem().get_file_info(_bucket_key(str(location))).type != fs.FileType.NotFound


def size(location: str | Path) -> int:
    """Bytes of the file or object."""
    if not is_remote(location):
        return Path(location).stat().st_size
    return filesystem().get_file_info(_bucket_key(str(location))).size


def open_input(location: str | Path):
    """A seekable binary stream of the file or object (for pyarrow's readers too); the caller closes it."""
    if not is_remote(location):
        return Path(location).open("rb")
    return filesystem().open_input_file(_bucket_key(str(location)))


def readable(location: str | Path):
    """What pyarrow's readers (``pq.read_schema``, ``pq.ParquetFile``) take for ``location``: a local path as it is,
    an object opened on the store (pyarrow would otherwise resolve ``s3://`` on its own, without ``S3_ENDPOINT``)."""
    return open_input(location) if is_remote(location) else location


def read_bytes(location: str | Path) -> bytes:
    with open_input(location) as stream:
        return stream.read()


def write_bytes(location: str | Path, data: bytes) -> None:
    """Write ``data`` whole: on the store, one PUT (the object appears complete or not at all)."""
    if not is_remote(location):
        Path(location).parent.mkdir(parents=True, exist_ok=True)
        Path(location).write_bytes(data)
        return
    with filesystem().open_output_stream(_bucket_key(str(location))) as stream:
        stream.write(data)


def upload(local: Path, uri: str) -> None:
    """Copy the complete local file ``local`` to the object ``uri`` (a multipart upload for a large file: the object
    appears once the upload completed; an upload cut short, by a crash or a kill, leaves no object)."""
    from pyarrow import fs

    fs.copy_files(
        str(local),
        _bucket_key(uri),
        source_filesystem=fs.LocalFileSystem(),
        destination_filesystem=filesystem(),
    )


def list_files(uri: str) -> list[str]:
    """The URIs of every object under the prefix ``uri`` (a "folder"), in name order; none when it has none."""
    from pyarrow import fs

    selector = fs.FileSelector(_bucket_key(uri), recursive=True, allow_not_found=True)
    infos = filesystem().get_file_info(selector)
    return sorted(_uri(info.path) for info in infos if info.type == fs.FileType.File)


def delete_tree(uri: str) -> None:
    """Delete every object under the prefix ``uri`` (nothing when there is none). One recursive delete: deleting the
    objects one by one would leave pyarrow's empty "directory" markers behind them."""
    if exists(uri):
        filesystem().delete_dir(_bucket_key(uri))


def copy_tree(source: str, target: str) -> None:
    """Copy every object under the prefix ``source`` to the same relative key under ``target`` (server-side)."""
    store = filesystem()
    prefix = _bucket_key(source) + "/"
    for item in list_files(source):
        relative = _bucket_key(item).removeprefix(prefix)
        store.copy_file(_bucket_key(item), posixpath.join(_bucket_key(target), relative))


def replace_tree(staging: str, final: str) -> None:
    """Make the objects under ``final`` those under ``staging``, as a local save renames its staging folder over the
    old one: the old objects deleted, the staged ones copied (server-side), the staging deleted."""
    delete_tree(final)
    copy_tree(staging, final)
    delete_tree(staging)


@dataclass(frozen=True)
class StoredFile:
    """A file on the object store, with the part of ``pathlib.Path``'s interface the jobs use on a landed file:
    ``name``, ``exists()``, ``open("rb")``; ``str()`` is its URI, what Spark reads and lineage names."""

    uri: str

    @property
    def name(self) -> str:
        return posixpath.basename(urlparse(self.uri).path)

    def exists(self) -> bool:
        return exists(self.uri)

    def open(self, mode: str = "rb"):
        if mode != "rb":
            raise ValueError(f"{self.uri}: objects are read with open('rb') and written whole (upload, write_bytes)")
        return open_input(self.uri)

    def __str__(self) -> str:
        return self.uri


def located(root: str, *parts: str) -> Path | StoredFile:
    """The file ``parts`` under ``root``: a local ``Path``, or a ``StoredFile`` when ``root`` is on the object store."""
    if is_remote(root):
        return StoredFile(join(root, *parts))
    return Path(root).joinpath(*parts)


def spark_properties() -> dict[str, str]:
    """Spark properties to read and write ``s3://`` (and ``s3a://``) files with hadoop-aws's S3A filesystem, when a
    hand-off location is on the object store; none otherwise (one machine: nothing changes). Credentials come from
    the standard AWS variables (S3A's default providers read them); the endpoint is ``S3_ENDPOINT``."""
    if not any(is_remote(setting.raw() or "") for setting in (settings.LANDING_URI, settings.MODELS_URI)):
        return {}
    props = {"spark.hadoop.fs.s3.impl": S3A_FILESYSTEM, "spark.hadoop.fs.s3a.impl": S3A_FILESYSTEM}
    endpoint = settings.S3_ENDPOINT.raw()
    if endpoint:
        props.update(
            {
                "spark.hadoop.fs.s3a.endpoint": endpoint,
                "spark.hadoop.fs.s3a.path.style.access": "true",
                "spark.hadoop.fs.s3a.connection.ssl.enabled": str(endpoint.startswith("https")).lower(),
            }
        )
    return props
