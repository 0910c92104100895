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
import glob
import hashlib
import json
import os
import zlib
from datetime import datetime
from typing import Iterable, Iterator, List, Optional, Sequence

from .workloads import BYTES_PER_TOKEN, Request, Workload

BODY_CHUNK_BYTES = 256  # 64 tokens of ~4 bytes: KV granularity for raw bodies
DEFAULT_OUTPUT_TOKENS = 256


class TraceError(ValueError):
    """A trace line that cannot be read; names the file, line and field."""


def _stable_id(v) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise TypeError(f"id {v!r} must be an int or a string")
    if isinstance(v, int):
        return v
    return int.from_bytes(hashlib.blake2b(v.encode(), digest_size=8).digest(), "big")


def _chain(prev: int, v: int) -> int:
    return hash((prev, v))


def body_segments(body: bytes, bytes_per_token: float = BYTES_PER_TOKEN) -> tuple:
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


def _body_request(t: float, body: bytes, inp: Optional[int], out: int) -> Request:
    segs = body_segments(body) if body else ((0, 1),)
    tokens = inp if inp else max(1, int(len(body) / BYTES_PER_TOKEN))
    # rescale segment ends if the true token count is known
    if inp and segs:
        scale = inp / segs[-1][1]
        segs = tuple((k, max(1, int(e * scale))) for k, e in segs)
    return (t, tokens, out, segs, None, body)


def _need(rec: dict, field: str, where: str, kind=(int, float)):
    v = rec.get(field)
    if v is None or isinstance(v, bool) or not isinstance(v, kind):
        raise TraceError(f"{where}: field {field!r} is missing or not a number (got {v!r})")
    return v


def parse_line(rec: dict, where: str = "trace") -> Request:
    """One trace record (hyperwarm or Mooncake) as a request tuple."""
    if not isinstance(rec, dict):
        raise TraceError(f"{where}: expected a JSON object, got {type(rec).__name__}")
    if "input_length" in rec:  # Mooncake
        t = _need(rec, "timestamp", where) / 1000.0
        inp = int(_need(rec, "input_length", where))
        out = int(rec.get("output_length", DEFAULT_OUTPUT_TOKENS))
        return _hash_ids_request(t, rec.get("hash_ids") or [], 512, inp, out, where)
    t = float(_need(rec, "timestamp", where))
    out = int(rec.get("output_tokens", DEFAULT_OUTPUT_TOKENS))
    if out < 0:
        raise TraceError(f"{where}: output_tokens={out} is outside the allowed range >= 0")
    inp = rec.get("input_tokens")
    if inp is not None and (isinstance(inp, bool) or not isinstance(inp, int) or inp < 1):
        raise TraceError(f"{where}: input_tokens={inp!r} is outside the allowed range >= 1")
    if "body" in rec or "body_b64" in rec:
        if "body" in rec:
            if not isinstance(rec["body"], str):
                raise TraceError(f"{where}: field 'body' must be a string")
            body = rec["body"].encode("utf-8")
        else:
            body = base64.b64decode(rec["body_b64"])
        return _body_request(t, body, inp, out)
    if "hash_ids" in rec:
        bt = int(rec.get("block_tokens", 512))
        if bt < 1:
            raise TraceError(f"{where}: block_tokens={bt} is outside the allowed range >= 1")
        if inp is None:
            inp = bt * len(rec["hash_ids"])
        return _hash_ids_request(t, rec["hash_ids"], bt, inp, out, where)
    if "segments" in rec:
        segs = []
        prev = 0
        end = 0
        for j, s in enumerate(rec["segments"]):
            if not (isinstance(s, (list, tuple)) and len(s) == 2 and isinstance(s[1], int) and s[1] >= 1):
                raise TraceError(f"{where}: segments[{j}]={s!r} must be [id, tokens >= 1]")
            prev = _chain(prev, _stable_id(s[0]))
            end += s[1]
            segs.append((prev, end))
        if not segs:
            raise TraceError(f"{where}: field 'segments' is empty")
        if inp is not None and inp != end:
            raise TraceError(f"{where}: input_tokens={inp} differs from the segments' total {end}")
        ok = rec.get("output_id")
        out_key = _chain(prev, _stable_id(ok)) if ok is not None else None
        return (t, end, out, tuple(segs), out_key, None)
    raise TraceError(f"{where}: needs one of 'body', 'body_b64', 'hash_ids', 'segments'")


def _hash_ids_request(t, ids, bt, inp, out, where) -> Request:
    if inp < 1:
        raise TraceError(f"{where}: input tokens={inp} is outside the allowed range >= 1")
    segs = []
    prev = 0
    for j, h in enumerate(ids):
        prev = _chain(prev, _stable_id(h))
        end = min((j + 1) * bt, inp)
        segs.append((prev, end))
        if end >= inp:
            break
    if not segs or segs[-1][1] < inp:
        segs.append((_chain(prev, hash((0x7A11, t, inp))), inp))
    return (t, inp, out, tuple(segs), None, None)


def _lines(paths: Sequence[str]) -> Iterator[tuple]:
    for p in paths:
        with open(p, "r", encoding="utf-8") as f:
            for no, line in enumerate(f, 1):
                line = line.strip()
                if line:
                    yield p, no, line


def _records(paths: Sequence[str]) -> Iterator[tuple]:
    """``(where, record)`` for every JSON line; ``where`` is ``file:line`` for error messages."""
    for p, no, line in _lines(paths):
        where = f"{p}:{no}"
        try:
            yield where, json.loads(line)
        except json.JSONDecodeError as e:
            raise TraceError(f"{where}: not valid JSON ({e.msg})") from None


def _expand(paths: Iterable[str]) -> List[str]:
    out: List[str] = []
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


def read_trace(paths, name: Optional[str] = None) -> Workload:
    """A hyperwarm/Mooncake JSONL trace (files, globs or directories)."""
    files = _expand([paths] if isinstance(paths, str) else paths)

    def gen() -> Iterator[Request]:
        for where, rec in _records(files):
            yield parse_line(rec, where)

    # header_bytes applies to 'segments'/'hash_ids' lines; 'body' lines are exact
    return Workload(name or os.path.basename(files[0]), gen)


def write_trace(workload: Workload, path: str) -> int:
    """Write a workload in the ``segments`` form; returns the line count.

    Keys are written as segment ids; chaining them again on read keeps
    exactly the same sharing structure."""
    n = 0
    with open(path, "w", encoding="utf-8") as f:
        for t, inp, out, segs, out_key, body in workload:
            rec = {"timestamp": t, "input_tokens": inp, "output_tokens": out}
            if body is not None:
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
    return n


# --- SageMaker data capture ------------------------------------------------


def _decode(payload: dict, where: str) -> bytes:
    data = payload.get("data", "")
    enc = (payload.get("encoding") or "JSON").upper()
    if enc == "BASE64":
        try:
            return base64.b64decode(data)
        except (ValueError, TypeError):
            raise TraceError(f"{where}: captureData data is not valid base64") from None
    if enc in ("JSON", "CSV"):
        return data.encode("utf-8") if isinstance(data, str) else json.dumps(data).encode()
    raise TraceError(f"{where}: encoding={enc!r} is not one of JSON, CSV, BASE64")


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
            return max(1, usage["completion_tokens"])
        text = obj.get("generated_text")
        if text is None and isinstance(obj.get("choices"), list) and obj["choices"]:
            ch = obj["choices"][0]
            text = (ch.get("message") or {}).get("content") if isinstance(ch, dict) else None
            if text is None and isinstance(ch, dict):
                text = ch.get("text")
        if isinstance(text, str):
            return max(1, int(len(text.encode()) / BYTES_PER_TOKEN))
    return DEFAULT_OUTPUT_TOKENS


def _input_tokens(body: bytes) -> Optional[int]:
    try:
        obj = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    if isinstance(obj, dict):
        usage = obj.get("usage")
        if isinstance(usage, dict) and isinstance(usage.get("prompt_tokens"), int):
            return usage["prompt_tokens"]
    return None


def read_data_capture(paths, name: Optional[str] = None) -> Workload:
    """SageMaker data-capture JSONL files (files, globs or directories, read
    in sorted order, which is time order for the S3 ``yyyy/mm/dd/hh``
    layout).  Each captured request becomes a ``body`` request timed by
    ``eventMetadata.inferenceTime``; output tokens come from the captured
    response when present."""
    files = _expand([paths] if isinstance(paths, str) else paths)

    def gen() -> Iterator[Request]:
        t0 = None
        for where, rec in _records(files):
            cap = rec.get("captureData") if isinstance(rec, dict) else None
            if not isinstance(cap, dict) or not isinstance(cap.get("endpointInput"), dict):
                raise TraceError(f"{where}: field 'captureData.endpointInput' is missing")
            ts = (rec.get("eventMetadata") or {}).get("inferenceTime")
            try:
                when = datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()
            except (AttributeError, ValueError):
                raise TraceError(
                    f"{where}: field 'eventMetadata.inferenceTime'={ts!r} is not an ISO 8601 time"
                ) from None
            if t0 is None:
                t0 = when
            body = _decode(cap["endpointInput"], where)
            out_payload = cap.get("endpointOutput")
            if isinstance(out_payload, dict) and out_payload.get("data"):
                resp = _decode(out_payload, where)
                out = _output_tokens(resp)
                inp = _input_tokens(resp)
            else:
                out, inp = DEFAULT_OUTPUT_TOKENS, None
            yield _body_request(when - t0, body, inp, out)

    return Workload(name or "data-capture", gen, header_bytes=0)


def is_data_capture(path: str) -> bool:
    """Sniff the first non-empty line of the first file."""
    files = _expand([path])
    for _, _, line in _lines(files[:1]):
        return '"captureData"' in line
    return False


def open_trace(path: str, fmt: str = "auto", name: Optional[str] = None) -> Workload:
    """``fmt``: 'auto', 'jsonl' (hyperwarm/Mooncake) or 'capture'."""
    if fmt not in ("auto", "jsonl", "capture"):
        raise ValueError(f"format={fmt!r} is not one of auto, jsonl, capture")
    if fmt == "capture" or (fmt == "auto" and is_data_capture(path)):
        return read_data_capture(path, name)
    return read_trace(path, name)
