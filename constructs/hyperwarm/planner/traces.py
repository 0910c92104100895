"""Trace files: the hyperwarm JSONL trace format, Mooncake traces and
SageMaker data-capture files.

Why a trace format of its own: users validate routing against *their*
prompt overlap.  Raw bodies are the most faithful input (PrefixLength
counts bytes of the body) but are often sensitive, so a trace may carry
content ids instead of text.  All readers stream line by line.

hyperwarm trace format (JSON Lines, one request per line)::

    {"timestamp": 12.5, "input_tokens": 9000, "output_tokens": 256,
     "body": "{\\"messages\\": ...}"}

``timestamp``
    arrival time in seconds (any origin, non-decreasing).
``input_tokens``
    prompt tokens; optional with ``body`` (estimated as bytes / 4).
``output_tokens``
    completion tokens (default 256).
and exactly one description of the prompt:

``body`` / ``body_b64``
    the serialised request body (UTF-8 text / base64).  Routing keys hash
    the exact bytes; the KV cache sees it as consecutive 64-token chunks
    of 256 bytes.
``hash_ids`` (+ optional ``block_tokens``, default 512)
    one id per fixed-size token block, Mooncake style; equal leading ids
    mean a shared prefix.
``segments``
    ``[[id, tokens], ...]``: runs of the prompt (system prompt, document,
    message), each an id of the run's content and its length in tokens;
    plus optional ``output_id``: id under which the reply is cached (the
    next chat turn sends it back as a segment with that id).

Ids are ints or strings; they are chained (each key hashes the previous
key and the id), so an id only needs to identify the run's own content.

A Mooncake trace line (``timestamp`` in ms, ``input_length``,
``output_length``, ``hash_ids`` of 512-token blocks) is read as is.
"""
from __future__ import annotations

import base64
import binascii
import glob
import hashlib
import json
import math
import os
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from .workloads import BYTES_PER_TOKEN, HEADER_BYTES, Request, Segments, Workload

Line = tuple[int, str, int, int, bytes]
"""``(file index, path, line number, byte offset, text)`` of one trace line."""
Order = tuple[float, int, int, int]
"""``(time, file index, byte offset, line number)`` of one record."""

BODY_CHUNK_BYTES = 256  # 64 tokens of ~4 bytes: KV granularity for raw bodies
DEFAULT_OUTPUT_TOKENS = 256


class TraceError(ValueError):
    """A trace line that cannot be read; names the file, line and field."""


def _stable_id(v: object) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise TypeError(f"id {v!r} must be an int or a string")
    if isinstance(v, int):
        return v
    return int.from_bytes(hashlib.blake2b(v.encode(), digest_size=8).digest(), "big")


def _chain(prev: int, v: int) -> int:
    return hash((prev, v))


def body_segments(body: bytes, bytes_per_token: float = BYTES_PER_TOKEN) -> Segments:
    """Segments of a raw body: one per ``BODY_CHUNK_BYTES`` chunk, keyed by
    the running CRC/Adler of the whole prefix up to the chunk's end."""
    segs = []
    crc, adl = 0, 1
    n = len(body)
    for start in range(0, n, BODY_CHUNK_BYTES):
        chunk = body[start:start + BODY_CHUNK_BYTES]
        crc = zlib.crc32(chunk, crc)
        adl = zlib.adler32(chunk, adl)
        end = start + len(chunk)
        # same value as strategies.body_key(body[:end]), computed incrementally
        # (tests check the two agree)
        segs.append((hash((crc, adl, end)), max(1, int(end / bytes_per_token))))
    return tuple(segs)


def _body_request(t: float, body: bytes, inp: int | None, out: int) -> Request:
    segs = body_segments(body) if body else ((0, 1),)
    tokens = inp if inp else max(1, int(len(body) / BYTES_PER_TOKEN))
    # rescale segment ends if the true token count is known
    if inp and segs:
        scale = inp / segs[-1][1]
        segs = tuple((k, max(1, int(e * scale))) for k, e in segs)
    return (t, tokens, out, segs, None, body)


def _num(rec: dict[str, Any], field: str, where: str, scale: float = 1.0) -> float:
    """A finite, non-negative time stamp (JSON allows NaN/Infinity in Python's reader)."""
    v = rec.get(field)
    if v is None or isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TraceError(f"{where}: {field}={v!r} is not a number -- every request needs its arrival time")
    if not math.isfinite(v) or v < 0:
        raise TraceError(
            f"{where}: {field}={v!r} is not a finite number >= 0 -- arrival times are seconds "
            "(Mooncake: milliseconds) from any origin; shift the trace so none is negative"
        )
    return v * scale


def _int(rec: dict[str, Any], field: str, where: str, default: int | None = None, lo: int = 1, why: str = "") -> int:
    v = rec.get(field, default)
    if v is None or isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise TraceError(f"{where}: {field}={v!r} is not an integer >= {lo}" + (f" -- {why}" if why else ""))
    return v


def _id(v: object, where: str, what: str) -> int:
    try:
        return _stable_id(v)
    except TypeError:
        raise TraceError(
            f"{where}: {what}={v!r} is not an int or a string -- ids name the content of a run of the prompt"
        ) from None


def _b64(data: object, where: str, field: str) -> bytes:
    if not isinstance(data, str):
        raise TraceError(f"{where}: {field} must be a base64 string, got {type(data).__name__}")
    try:
        return base64.b64decode(data, validate=True)
    except (ValueError, binascii.Error) as e:
        raise TraceError(f"{where}: {field} is not valid base64 ({e})") from None


def _check_context(inp: int, out: int, where: str, context_tokens: int | None) -> None:
    if context_tokens is not None and inp + out > context_tokens:
        raise TraceError(
            f"{where}: input {inp:,} + output {out:,} tokens = {inp + out:,} exceed the model's context "
            f"length of {context_tokens:,} tokens -- the engine would reject this request "
            "(set --context-length for another model)"
        )


def parse_line(rec: dict[str, Any], where: str = "trace", context_tokens: int | None = None) -> Request:
    """One trace record (hyperwarm or Mooncake) as a request tuple; every
    problem is a :class:`TraceError` naming ``where`` (``FILE:LINE``), the
    field, its value and why it is wrong."""
    if not isinstance(rec, dict):
        raise TraceError(f"{where}: expected a JSON object, got {type(rec).__name__}")
    if "input_length" in rec:
        return _mooncake_request(rec, where, context_tokens)
    t = _num(rec, "timestamp", where)
    out = _int(rec, "output_tokens", where, DEFAULT_OUTPUT_TOKENS, why="a request generates at least one token")
    inp = rec.get("input_tokens")
    if inp is not None:
        inp = _int(rec, "input_tokens", where, why="a prompt has at least one token")
    if "body" in rec or "body_b64" in rec:
        req = _body_request(t, _body(rec, where), inp, out)
        _check_context(req[1], out, where, context_tokens)
        return req
    if "hash_ids" in rec:
        bt = _int(rec, "block_tokens", where, 512)
        ids = rec["hash_ids"]
        if not isinstance(ids, list) or not ids:
            raise TraceError(f"{where}: hash_ids={ids!r} is not a non-empty list of block ids")
        if inp is None:
            inp = bt * len(ids)
        _check_context(inp, out, where, context_tokens)
        return _hash_ids_request(t, ids, bt, inp, out, where)
    if "segments" in rec:
        return _segments_request(rec, t, inp, out, where, context_tokens)
    raise TraceError(f"{where}: needs one of 'body', 'body_b64', 'hash_ids', 'segments'")


def _mooncake_request(rec: dict[str, Any], where: str, context_tokens: int | None) -> Request:
    """A Mooncake line: ``timestamp`` in ms, ``input_length``, ``output_length``, 512-token ``hash_ids``."""
    t = _num(rec, "timestamp", where, 1 / 1000.0)
    inp = _int(rec, "input_length", where, why="a prompt has at least one token")
    out = _int(rec, "output_length", where, DEFAULT_OUTPUT_TOKENS, why="a request generates at least one token")
    _check_context(inp, out, where, context_tokens)
    ids = rec.get("hash_ids") or []
    if not isinstance(ids, list):
        raise TraceError(f"{where}: hash_ids={ids!r} is not a list of block ids")
    return _hash_ids_request(t, ids, 512, inp, out, where)


def _body(rec: dict[str, Any], where: str) -> bytes:
    """The bytes of exactly one of ``body`` (UTF-8 text) and ``body_b64``."""
    if "body" in rec and "body_b64" in rec:
        raise TraceError(f"{where}: give one of 'body' and 'body_b64', not both")
    if "body" not in rec:
        return _b64(rec["body_b64"], where, "body_b64")
    if not isinstance(rec["body"], str):
        raise TraceError(f"{where}: field 'body' must be a string, got {type(rec['body']).__name__}")
    return rec["body"].encode("utf-8")


def _segments_request(
    rec: dict[str, Any], t: float, inp: int | None, out: int, where: str, context_tokens: int | None
) -> Request:
    """A ``segments`` record: chained keys of ``[id, tokens]`` runs, and the reply's key from ``output_id``."""
    segs = []
    prev = 0
    end = 0
    if not isinstance(rec["segments"], list):
        raise TraceError(f"{where}: segments={rec['segments']!r} is not a list of [id, tokens]")
    for j, s in enumerate(rec["segments"]):
        if not (
            isinstance(s, (list, tuple)) and len(s) == 2 and isinstance(s[1], int)
            and not isinstance(s[1], bool) and s[1] >= 1
        ):
            raise TraceError(f"{where}: segments[{j}]={s!r} must be [id, tokens >= 1]")
        prev = _chain(prev, _id(s[0], where, f"segments[{j}] id"))
        end += s[1]
        segs.append((prev, end))
    if not segs:
        raise TraceError(f"{where}: field 'segments' is empty")
    if inp is not None and inp != end:
        raise TraceError(f"{where}: input_tokens={inp} differs from the segments' total {end}")
    _check_context(end, out, where, context_tokens)
    ok = rec.get("output_id")
    out_key = _chain(prev, _id(ok, where, "output_id")) if ok is not None else None
    return (t, end, out, tuple(segs), out_key, None)


def _hash_ids_request(t: float, ids: Sequence[object], bt: int, inp: int, out: int, where: str) -> Request:
    segs = []
    prev = 0
    for j, h in enumerate(ids):
        prev = _chain(prev, _id(h, where, f"hash_ids[{j}]"))
        end = min((j + 1) * bt, inp)
        segs.append((prev, end))
        if end >= inp:
            break
    if not segs or segs[-1][1] < inp:
        segs.append((_chain(prev, hash((0x7A11, t, inp))), inp))
    return (t, inp, out, tuple(segs), None, None)


def _lines(paths: Sequence[str]) -> Iterator[Line]:
    """``(file index, path, line number, byte offset, text)`` of every non-empty line."""
    for fi, p in enumerate(paths):
        with open(p, "rb") as f:
            off = 0
            for no, raw in enumerate(f, 1):
                start = off
                off += len(raw)
                line = raw.strip()
                if line:
                    yield fi, p, no, start, line


def _load(line: bytes, where: str) -> Any:
    try:
        return json.loads(line)
    except ValueError as e:  # JSONDecodeError and UnicodeDecodeError
        raise TraceError(f"{where}: not valid JSON ({getattr(e, 'msg', e)})") from None


def _expand(paths: Iterable[str]) -> list[str]:
    out: list[str] = []
    for p in paths:
        if os.path.isdir(p):
            out.extend(sorted(glob.glob(os.path.join(p, "**", "*.jsonl"), recursive=True)))
        elif any(ch in p for ch in "*?["):
            out.extend(sorted(glob.glob(p, recursive=True)))
        else:
            out.append(p)
    for p in out:
        if not os.path.isfile(p):
            raise TraceError(f"trace file {p!r} does not exist")
    if not out:
        raise TraceError(f"no trace files match {list(paths)!r}")
    return out


def _scanned(
    files: list[str],
    to_request: Callable[[Any, str], Request],
    name: str,
    header_bytes: int,
    shift: bool,
    progress: Callable[[int], None] | None,
) -> Workload:
    """Read the trace once up front: every record is checked (errors come
    before any simulation, with ``FILE:LINE``), the requests are counted
    (progress bars), and records out of timestamp order are counted and
    sorted, which the reports then state.  ``shift`` moves the origin to
    the earliest record (data capture carries wall-clock times).

    An ordered trace is then streamed again per pass; a disordered one is
    read in sorted order by seeking to each record, so memory holds one
    ``(time, file, offset)`` entry per record, never the bodies."""
    scan = _scan(files, to_request, progress)
    t0 = scan.t_min if shift and scan.n else 0.0
    if not scan.late:
        return Workload(
            name, lambda: _requests(_lines(files), to_request, t0), n_requests=scan.n, header_bytes=header_bytes
        )
    order = _time_order(files, to_request)
    notes = [
        f"sorted {scan.late:,} of {scan.n:,} records that were out of timestamp order (first at {scan.first_late})"
    ]
    return Workload(
        name, lambda: _requests(_seek_lines(files, order), to_request, t0),
        n_requests=scan.n, header_bytes=header_bytes, notes=notes,
    )


class _Scan(NamedTuple):
    n: int  # records
    late: int  # records earlier than one before them
    first_late: str  # FILE:LINE of the first of those
    t_min: float  # earliest timestamp


def _scan(
    files: list[str], to_request: Callable[[Any, str], Request], progress: Callable[[int], None] | None
) -> _Scan:
    """Check and count every record, reporting progress every 65,536."""
    n = 0
    late = 0
    first_late = ""
    prev = -math.inf
    t_min = math.inf
    for _, p, no, _, line in _lines(files):
        where = f"{p}:{no}"
        t = to_request(_load(line, where), where)[0]
        if t < prev:
            late += 1
            first_late = first_late or where
        else:
            prev = t
        t_min = min(t_min, t)
        n += 1
        if progress is not None and n % 65536 == 0:
            progress(65536)
    if progress is not None and n % 65536:
        progress(n % 65536)
    return _Scan(n, late, first_late, t_min)


def _requests(items: Iterable[Line], to_request: Callable[[Any, str], Request], t0: float) -> Iterator[Request]:
    """The request of each line of ``items`` (as :func:`_lines` yields them), timed from ``t0``."""
    for _, p, no, _, line in items:
        where = f"{p}:{no}"
        req = to_request(_load(line, where), where)
        yield (req[0] - t0,) + req[1:] if t0 else req


def _time_order(files: list[str], to_request: Callable[[Any, str], Request]) -> list[Order]:
    """``(time, file index, byte offset, line number)`` of every record in
    time order; stable, so equal times keep file order."""
    return sorted(
        ((to_request(_load(line, f"{p}:{no}"), f"{p}:{no}")[0], fi, off, no) for fi, p, no, off, line in _lines(files)),
        key=lambda e: e[0],
    )


def _seek_lines(files: list[str], order: list[Order]) -> Iterator[Line]:
    """The lines of ``files`` in ``order`` (see :func:`_time_order`), read by seeking, as :func:`_lines` yields them."""
    handles = [open(f, "rb") for f in files]
    try:
        for _, fi, off, no in order:
            h = handles[fi]
            h.seek(off)
            yield fi, files[fi], no, off, h.readline().strip()
    finally:
        for h in handles:
            h.close()


def read_trace(
    paths: str | Sequence[str], name: str | None = None, *, context_tokens: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> Workload:
    """A hyperwarm/Mooncake JSONL trace (files, globs or directories),
    checked and counted up front (see :func:`_scanned`); requests longer
    than ``context_tokens`` (prompt + output) are errors."""
    files = _expand([paths] if isinstance(paths, str) else paths)
    # header_bytes applies to 'segments'/'hash_ids' lines; 'body' lines are exact
    return _scanned(
        files, lambda rec, where: parse_line(rec, where, context_tokens),
        name or os.path.basename(files[0]), HEADER_BYTES, False, progress,
    )


def write_trace(workload: Workload, path: str, progress: Callable[[int], None] | None = None) -> int:
    """Write a workload as a hyperwarm trace; returns the line count.

    Synthetic requests are written in the ``segments`` form: keys become
    segment ids, and chaining them again on read keeps exactly the same
    sharing structure.  Requests with a body (data capture) keep it, as
    text when it is UTF-8, else as base64."""
    n = 0
    with open(path, "w", encoding="utf-8") as f:
        for t, inp, out, segs, out_key, body in workload:
            rec: dict[str, Any] = {"timestamp": t, "input_tokens": inp, "output_tokens": out}
            if body is not None:
                try:
                    rec["body"] = body.decode("utf-8")
                except UnicodeDecodeError:
                    rec["body_b64"] = base64.b64encode(body).decode()
            else:
                prev = 0
                runs = []
                for k, e in segs:
                    runs.append([k, e - prev])
                    prev = e
                rec["segments"] = runs
                if out_key is not None:
                    rec["output_id"] = out_key
            f.write(json.dumps(rec, separators=(",", ":")) + "\n")
            n += 1
            if progress is not None and n % 65536 == 0:
                progress(65536)
    if progress is not None and n % 65536:
        progress(n % 65536)
    return n


# --- SageMaker data capture ------------------------------------------------


def _decode(payload: dict[str, Any], where: str, field: str) -> bytes:
    """The bytes of a captured payload; a missing or undecodable ``data``
    is an error, never an empty (1-token) request."""
    data = payload.get("data")
    if data is None or data == "":
        raise TraceError(
            f"{where}: field '{field}.data' is missing or empty -- data capture without the payload "
            "cannot be replayed (was the capture's content type excluded?)"
        )
    enc = payload.get("encoding") or "JSON"
    if not isinstance(enc, str) or enc.upper() not in ("JSON", "CSV", "BASE64"):
        raise TraceError(f"{where}: {field}.encoding={enc!r} is not one of JSON, CSV, BASE64")
    if enc.upper() == "BASE64":
        return _b64(data, where, f"{field}.data")
    return data.encode("utf-8") if isinstance(data, str) else json.dumps(data).encode()


def _output_tokens(body: bytes) -> int:
    """Best effort from a captured response: OpenAI ``usage``, else the
    generated text length / 4."""
    try:
        obj = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return max(1, int(len(body) / BYTES_PER_TOKEN))
    if isinstance(obj, list) and obj:
        obj = obj[0]
    if isinstance(obj, dict):
        usage = obj.get("usage")
        if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
            return max(1, int(usage["completion_tokens"]))
        text = obj.get("generated_text")
        if text is None and isinstance(obj.get("choices"), list) and obj["choices"]:
            ch = obj["choices"][0]
            text = (ch.get("message") or {}).get("content") if isinstance(ch, dict) else None
            if text is None and isinstance(ch, dict):
                text = ch.get("text")
        if isinstance(text, str):
            return max(1, int(len(text.encode()) / BYTES_PER_TOKEN))
    return DEFAULT_OUTPUT_TOKENS


def _input_tokens(body: bytes) -> int | None:
    try:
        obj = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    if isinstance(obj, dict):
        usage = obj.get("usage")
        if isinstance(usage, dict) and isinstance(usage.get("prompt_tokens"), int):
            return int(usage["prompt_tokens"])
    return None


def _capture_request(rec: Any, where: str) -> Request:
    """One data-capture record as a ``body`` request timed in epoch seconds."""
    cap = rec.get("captureData") if isinstance(rec, dict) else None
    if not isinstance(cap, dict) or not isinstance(cap.get("endpointInput"), dict):
        raise TraceError(f"{where}: field 'captureData.endpointInput' is missing -- not a data-capture record")
    meta = rec.get("eventMetadata")
    ts: Any = meta.get("inferenceTime") if isinstance(meta, dict) else None
    try:
        when = datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()
    except (AttributeError, ValueError):
        raise TraceError(
            f"{where}: field 'eventMetadata.inferenceTime'={ts!r} is not an ISO 8601 time"
        ) from None
    body = _decode(cap["endpointInput"], where, "captureData.endpointInput")
    out_payload = cap.get("endpointOutput")
    if isinstance(out_payload, dict) and out_payload.get("data"):
        resp = _decode(out_payload, where, "captureData.endpointOutput")
        out = _output_tokens(resp)
        inp = _input_tokens(resp)
    else:
        out, inp = DEFAULT_OUTPUT_TOKENS, None
    return _body_request(when, body, inp, out)


def read_data_capture(
    paths: str | Sequence[str], name: str | None = None, *, context_tokens: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> Workload:
    """SageMaker data-capture JSONL files (files, globs or directories, read
    in sorted order, which is time order for the S3 ``yyyy/mm/dd/hh``
    layout; records out of order are sorted and counted).  Each captured
    request becomes a ``body`` request timed by ``eventMetadata.inferenceTime``
    from the earliest one; output tokens come from the captured response
    when present."""
    files = _expand([paths] if isinstance(paths, str) else paths)

    def to_request(rec: Any, where: str) -> Request:
        req = _capture_request(rec, where)
        _check_context(req[1], req[2], where, context_tokens)
        return req

    return _scanned(files, to_request, name or "data-capture", 0, True, progress)


def is_data_capture(path: str) -> bool:
    """Sniff the first non-empty line of the first file."""
    files = _expand([path])
    for _, _, _, _, line in _lines(files[:1]):
        return b'"captureData"' in line
    return False


def open_trace(
    path: str, fmt: str = "auto", name: str | None = None, *, context_tokens: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> Workload:
    """``fmt``: 'auto', 'jsonl' (hyperwarm/Mooncake) or 'capture'."""
    if fmt not in ("auto", "jsonl", "capture"):
        raise ValueError(f"format={fmt!r} is not one of auto, jsonl, capture")
    reader = read_data_capture if fmt == "capture" or (fmt == "auto" and is_data_capture(path)) else read_trace
    return reader(path, name, context_tokens=context_tokens, progress=progress)
