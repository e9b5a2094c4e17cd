"""Request bodies of ``lineage serve``, read within limits: hostile input is answered with a 4xx, never a 500 and
never by growing the server without bound.

- the body on the wire: at most ``LINEAGE_MAX_BODY_BYTES`` (413 beyond), counted while it streams in;
- ``Content-Encoding: gzip``: decompressed incrementally, at most ``LINEAGE_MAX_DECOMPRESSED_BYTES`` (413 beyond);
  a truncated stream or a body that is not gzip is a 400;
- JSON nesting: at most ``LINEAGE_MAX_JSON_DEPTH`` levels (400 beyond), checked by a linear scan before parsing, so
  the parser's recursion limit is never reached;
- ``Content-Type`` must be ``application/json`` (415 otherwise): a web page can send a cross-site ``text/plain``
  form post to a loopback server without asking, but not a JSON one;
- decompression and parsing run in a worker thread, off the event loop, at most ``_DECODERS`` bodies at once (the
  others wait, holding no thread), so large bodies neither stall health checks or small posts nor multiply memory.
"""

from __future__ import annotations

import asyncio
import itertools
import weakref
import zlib

import anyio.to_thread
from fastapi import HTTPException, Request

from include.core import settings
from include.core.jsontext import loads

_CHUNK = 64 * 1024
_DECODERS = 2  # bodies decompressed and parsed at once, per event loop
_limiters: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _decode_limiter() -> anyio.CapacityLimiter:
    loop = asyncio.get_running_loop()
    limiter = _limiters.get(loop)
    if limiter is None:
        limiter = _limiters[loop] = anyio.CapacityLimiter(_DECODERS)
    return limiter


def require_json(request: Request) -> None:
    """415 unless the request says its body is JSON (``application/json``, parameters allowed)."""
    media_type = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media_type != "application/json":
        shown = media_type or "none"
        raise HTTPException(status_code=415, detail=f"Content-Type {shown!r}: lineage is posted as application/json")


async def read_limited(request: Request, limit: int | None = None) -> bytes:
    """The raw body, refused with 413 as soon as it passes ``limit`` bytes (a declared Content-Length too)."""
    limit = limit or settings.LINEAGE_MAX_BODY_BYTES.integer()
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise HTTPException(status_code=413, detail=f"the body is {int(declared):,} bytes; the limit is {limit:,}")
    parts, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise HTTPException(status_code=413, detail=f"the body passed the limit of {limit:,} bytes")
        parts.append(chunk)
    return b"".join(parts)


def gunzip_limited(body: bytes, limit: int | None = None) -> bytes:
    """The decompressed body; 413 past ``limit`` bytes, 400 when it is not (whole) gzip."""
    limit = limit or settings.LINEAGE_MAX_DECOMPRESSED_BYTES.integer()
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)  # gzip header and trailer required
    out, size, pending = [], 0, body
    try:
        while pending:
            piece = inflater.decompress(pending, _CHUNK)
            size += len(piece)
            if size > limit:
                raise HTTPException(status_code=413, detail=f"the body decompresses past the limit of {limit:,} bytes")
            out.append(piece)
            pending = inflater.unconsumed_tail
        if not inflater.eof:
            raise HTTPException(status_code=400, detail="the gzip body is truncated")
    except zlib.error as error:
        raise HTTPException(status_code=400, detail=f"the body is not valid gzip: {error}") from None
    return b"".join(out)


_KEEP = bytes(b for b in range(256) if b not in b'[]{}"')
_STEP = {0x5B: 1, 0x7B: 1, 0x5D: -1, 0x7D: -1}


def nesting_depth(text: bytes) -> int:
    """The deepest nesting of ``[``/``{`` in a JSON text, strings skipped; linear, no recursion, in C but the last
    count: escaped backslashes go, then escaped quotes (what is left of a backslash escapes neither), then all but
    brackets and quotes, then the strings; the brackets left are counted."""
    bare = text.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _KEEP)
    brackets = b"".join(bare.split(b'"')[::2])  # outside the strings (an unclosed one: not JSON, the parser says)
    return max(itertools.accumulate(map(_STEP.__getitem__, brackets), initial=0))


def _not_json(constant: str):
    raise ValueError(f"{constant} is not a JSON number")  # Python's json reads NaN and Infinity; JSON has neither


def parse_json(body: bytes, max_depth: int | None = None):
    max_depth = max_depth or settings.LINEAGE_MAX_JSON_DEPTH.integer()
    depth = nesting_depth(body)
    if depth > max_depth:
        raise HTTPException(status_code=400, detail=f"the JSON nests {depth} levels deep; the limit is {max_depth}")
    try:
        return loads(body, parse_constant=_not_json)
    except (ValueError, RecursionError) as error:
        raise HTTPException(status_code=400, detail=f"the body is not JSON: {error}") from None


async def json_body(request: Request):
    """The request's JSON within every limit above; decompression and parsing in a worker thread."""
    require_json(request)
    return await decode_json(request, await read_limited(request))


async def decode_json(request: Request, body: bytes):
    """``body`` (read by :func:`read_limited`) decompressed as its ``Content-Encoding`` says and parsed, in a
    worker thread, at most ``_DECODERS`` at once."""
    gzipped = request.headers.get("content-encoding", "").strip().lower() == "gzip"

    def decode():
        return parse_json(gunzip_limited(body) if gzipped else body)

    return await anyio.to_thread.run_sync(decode, limiter=_decode_limiter())
