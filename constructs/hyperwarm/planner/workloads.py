"""Request streams for the routing simulator.

Why this shape: the simulator must push a million requests per strategy
through a Python loop in well under a minute, with memory bounded by the
KV-cache sizes rather than by the trace length.  So a workload is a
*re-iterable stream* (every ``iter()`` starts the same deterministic
sequence again, one pass per strategy) of plain tuples, never a list of
objects.

A request is the tuple ``(t, input_tokens, output_tokens, segs, out_key, body)``:

``t``
    arrival time in seconds (non-decreasing).
``input_tokens`` / ``output_tokens``
    prompt and completion length in tokens.
``segs``
    the prompt as consecutive runs ("segments"), a tuple of
    ``(key, end_token)`` pairs.  ``key`` is an int that identifies the run's
    content *together with everything before it* (a cumulative hash, like
    vLLM's chained block hashes); ``end_token`` is the token offset where the
    run ends.  Two requests share a KV prefix exactly as far as their
    leading keys are equal.  A segment is the unit of sharing (a system
    prompt, a document, one chat message), so a request has a handful of
    segments instead of hundreds of 16-token blocks; the simulator turns
    them into block counts (see :mod:`planner.sim`).
``out_key``
    key under which the engine caches the generated tokens (the assistant
    reply that the next chat turn will send back), or ``None``.
``body``
    the serialised request body as ``bytes`` when known (imported traces);
    ``None`` for synthetic requests, whose body is described by
    ``Workload.header_bytes`` + ``bytes_per_token`` per token.

Prefix-aware routing hashes the first ``PrefixLength`` *bytes* of the body.
With a ``body`` that is exact; without one, the byte offset is converted to a
token offset and the key of the segment containing it is used (the first L
bytes of two requests are equal exactly when they share that segment).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

Segments = tuple[tuple[int, int], ...]
"""A prompt's ``(key, end token)`` runs, in order."""
Request = tuple[float, int, int, Segments, int | None, bytes | None]
"""``(arrival s, input tokens, output tokens, segments, output key, body)``: see the module docstring."""

#: Bytes of serialised JSON per prompt token (English text is ~4 characters
#: per Llama-3 token; JSON escaping adds little for plain prose).
BYTES_PER_TOKEN = 4.0
#: Bytes before the prompt text in a typical body, e.g.
#: ``{"messages": [{"role": "system", "content": "``.
HEADER_BYTES = 45

_CHUNK = 16384  # numpy draws per batch: amortises RNG cost, bounds memory

# Salts keep keys of different kinds of content apart.  Tuple hashes of ints
# are deterministic across processes (str/bytes hashes are not), so every
# key below is built from ints only.
_S_PREFIX, _S_QUESTION, _S_SYSTEM, _S_USER, _S_ASSIST = 11, 13, 17, 19, 23


class Workload:
    """A named, re-iterable stream of request tuples.

    ``factory`` returns a fresh iterator each call; ``n_requests`` is the
    stream length when known (for progress bars), else ``None``.  ``notes``
    are normalisations applied while reading a trace (e.g. records sorted
    into timestamp order), which every report shows.
    """

    def __init__(
        self,
        name: str,
        factory: Callable[[], Iterable[Request]],
        *,
        n_requests: int | None = None,
        bytes_per_token: float = BYTES_PER_TOKEN,
        header_bytes: int = HEADER_BYTES,
        description: str = "",
        notes: Sequence[str] = (),
    ) -> None:
        self.name = name
        self.notes = list(notes)
        self._factory = factory
        self.n_requests = n_requests
        self.bytes_per_token = float(bytes_per_token)
        self.header_bytes = int(header_bytes)
        self.description = description

    def __iter__(self) -> Iterator[Request]:
        return iter(self._factory())

    def limit(self, n: int | None) -> Workload:
        """The first ``n`` requests only (``None`` = unchanged)."""
        if n is None:
            return self
        if n < 1:
            raise ValueError(f"requests={n} must be >= 1")
        import itertools

        src = self._factory
        total = n if self.n_requests is None else min(n, self.n_requests)
        return Workload(
            self.name,
            lambda: itertools.islice(src(), n),
            n_requests=total,
            bytes_per_token=self.bytes_per_token,
            header_bytes=self.header_bytes,
            description=self.description,
            notes=self.notes,
        )


def _check(name: str, value: float | None, lo: float, hi: float | None = None) -> None:
    if value is None or value < lo or (hi is not None and value > hi):
        rng = f"{lo}..{hi}" if hi is not None else f">= {lo}"
        raise ValueError(f"{name}={value!r} is outside the allowed range {rng}")


def _arrivals(rng: np.random.Generator, rate_rps: float, n: int, t0: float) -> list[float]:
    """Poisson arrivals: ``n`` timestamps after ``t0``."""
    times = np.cumsum(rng.exponential(1.0 / rate_rps, n)) + t0
    arrivals: list[float] = times.tolist()  # tolist: one C call, not one per element
    return arrivals


def shared_prefix(
    *,
    groups: int = 64,
    prompts_per_group: int = 16,
    prefix_tokens: int = 2048,
    question_tokens: int = 128,
    question_jitter: float = 0.0,
    output_tokens: int = 256,
    rate_rps: float = 10.0,
    n_requests: int | None = None,
    hot_share: float = 0.0,
    seed: int = 0,
    name: str = "shared-prefix",
) -> Workload:
    """Shared-prefix groups (SGLang ``generated-shared-prefix``, inference-perf
    ``shared_prefix``): each request is one group's prefix followed by a
    unique question.  Groups are drawn uniformly at random; with
    ``hot_share`` > 0 that share of all requests uses group 0 (hot-prefix
    skew).  ``question_jitter`` varies question length uniformly by +-that
    fraction.  Default length is ``groups * prompts_per_group`` requests.
    """
    _check("groups", groups, 1)
    _check("prompts_per_group", prompts_per_group, 1)
    _check("prefix_tokens", prefix_tokens, 0)
    _check("question_tokens", question_tokens, 1)
    _check("question_jitter", question_jitter, 0.0, 1.0)
    _check("output_tokens", output_tokens, 1)
    _check("rate_rps", rate_rps, 1e-9)
    _check("hot_share", hot_share, 0.0, 1.0)
    total = n_requests if n_requests is not None else groups * prompts_per_group
    _check("n_requests", total, 1)
    return Workload(
        name,
        lambda: _shared_prefix_requests(
            seed, total, groups, prefix_tokens, question_tokens, question_jitter, output_tokens, rate_rps, hot_share
        ),
        n_requests=total,
        description=(
            f"{groups} groups x {prefix_tokens}-token prefix + {question_tokens}-token "
            f"question, {output_tokens} output tokens, {rate_rps:g} req/s"
            + (f", {hot_share:.0%} on one hot prefix" if hot_share else "")
        ),
    )


def _shared_prefix_requests(
    seed: int, total: int, groups: int, prefix_tokens: int, question_tokens: int, question_jitter: float,
    output_tokens: int, rate_rps: float, hot_share: float,
) -> Iterator[Request]:
    """The stream of :func:`shared_prefix`, drawn in chunks of :data:`_CHUNK`."""
    rng = np.random.default_rng(seed)
    pkeys = [hash((_S_PREFIX, seed, g)) for g in range(groups)]
    P = prefix_tokens
    t = 0.0
    i = 0
    while i < total:
        b = min(_CHUNK, total - i)
        times = _arrivals(rng, rate_rps, b, t)
        t = times[-1]
        grp = rng.integers(0, groups, b)
        if hot_share > 0:
            grp[rng.random(b) < hot_share] = 0
        qlen = _question_lengths(rng, question_tokens, question_jitter, b)
        for tt, g, q in zip(times, grp.tolist(), qlen, strict=True):
            inp = P + q
            segs: Segments = ((pkeys[g], P), (hash((_S_QUESTION, seed, i)), inp)) if P \
                else ((hash((_S_QUESTION, seed, i)), inp),)
            yield (tt, inp, output_tokens, segs, None, None)
            i += 1


def _question_lengths(rng: np.random.Generator, question_tokens: int, jitter: float, n: int) -> list[int]:
    """``n`` question lengths, uniform within +-``jitter`` of ``question_tokens``."""
    if jitter > 0:
        lo = max(1, int(question_tokens * (1 - jitter)))
        hi = int(question_tokens * (1 + jitter)) + 1
        lengths: list[int] = rng.integers(lo, hi, n).tolist()
        return lengths
    return [question_tokens] * n


def multi_turn_chat(
    *,
    active_conversations: int = 64,
    rounds: tuple[int, int] = (2, 8),
    system_prompts: int = 1,
    system_tokens: int = 200,
    user_tokens: tuple[float, float] = (120.0, 0.8),
    assistant_tokens: tuple[float, float] = (250.0, 0.6),
    max_context_tokens: int = 32768,
    rate_rps: float = 10.0,
    n_requests: int = 10000,
    seed: int = 0,
    name: str = "multi-turn-chat",
) -> Workload:
    """Multi-turn chat with growing history (multi-round QA, ShareGPT-like).

    ``active_conversations`` users talk at once; each arrival is the next
    turn of a random active conversation, whose prompt is the system prompt
    plus the whole history so far plus a new user message.  A conversation
    lasts a uniform number of ``rounds`` (inclusive range) and is then
    replaced by a new one.  User and assistant message lengths are lognormal
    with the given (median, sigma).  The reply of each turn is cached by the
    engine under ``out_key`` so the next turn can reuse it.  ``rounds=(1, 1)``
    gives single-turn variable-length chat.
    """
    _check("active_conversations", active_conversations, 1)
    _check("rounds[0]", rounds[0], 1)
    _check("rounds[1]", rounds[1], rounds[0])
    _check("system_prompts", system_prompts, 1)
    _check("system_tokens", system_tokens, 0)
    _check("rate_rps", rate_rps, 1e-9)
    _check("n_requests", n_requests, 1)
    _check("max_context_tokens", max_context_tokens, 64)
    return Workload(
        name,
        lambda: _chat_requests(
            seed, n_requests, active_conversations, rounds, system_prompts, system_tokens,
            user_tokens, assistant_tokens, max_context_tokens, rate_rps,
        ),
        n_requests=n_requests,
        description=(
            f"{active_conversations} concurrent conversations, {rounds[0]}-{rounds[1]} rounds, "
            f"{system_tokens}-token system prompt, user ~{user_tokens[0]:g} / assistant "
            f"~{assistant_tokens[0]:g} tokens, {rate_rps:g} req/s"
        ),
    )


def _conversations(rng: np.random.Generator, seed: int, rounds: tuple[int, int], system_prompts: int,
                   system_tokens: int) -> Callable[[int], list[Any]]:
    """``new(system prompt index)``: a fresh conversation, numbered in order, as
    the mutable list ``[conv id, turns done, turns total, segs, end tokens, pending reply]``."""
    sys_keys = [hash((_S_SYSTEM, seed, s)) for s in range(system_prompts)]
    next_conv = [0]

    def new(sys_choice: int) -> list[Any]:
        cid = next_conv[0]
        next_conv[0] += 1
        r = int(rng.integers(rounds[0], rounds[1] + 1))
        segs = [(sys_keys[sys_choice], system_tokens)] if system_tokens else []
        return [cid, 0, r, segs, system_tokens, None]

    return new


def _chat_requests(
    seed: int, n_requests: int, active_conversations: int, rounds: tuple[int, int], system_prompts: int,
    system_tokens: int, user_tokens: tuple[float, float], assistant_tokens: tuple[float, float],
    max_context_tokens: int, rate_rps: float,
) -> Iterator[Request]:
    """The stream of :func:`multi_turn_chat`, drawn in chunks of :data:`_CHUNK`."""
    rng = np.random.default_rng(seed)
    new_conv = _conversations(rng, seed, rounds, system_prompts, system_tokens)
    pool = [new_conv(int(rng.integers(0, system_prompts))) for _ in range(active_conversations)]
    t = 0.0
    i = 0
    mu_u, sg_u = math.log(user_tokens[0]), user_tokens[1]
    mu_a, sg_a = math.log(assistant_tokens[0]), assistant_tokens[1]
    while i < n_requests:
        b = min(_CHUNK, n_requests - i)
        times = _arrivals(rng, rate_rps, b, t)
        t = times[-1]
        slots = rng.integers(0, active_conversations, b).tolist()
        ulen = np.maximum(1, rng.lognormal(mu_u, sg_u, b)).astype(int).tolist()
        alen = np.maximum(1, rng.lognormal(mu_a, sg_a, b)).astype(int).tolist()
        syss = rng.integers(0, system_prompts, b).tolist()
        for tt, s, u, a, sc in zip(times, slots, ulen, alen, syss, strict=True):
            conv = pool[s]
            cid, done, _, segs, end, pending = conv
            if pending is not None:  # previous reply joins the history
                end += pending[1]
                segs.append((pending[0], end))
            end += u
            if end + a > max_context_tokens and done:
                conv = pool[s] = new_conv(sc)
                cid, done, _, segs, end, pending = conv
                end += u
            segs.append((hash((_S_USER, seed, cid, done)), end))
            out_key = hash((_S_ASSIST, seed, cid, done))
            yield (tt, end, a, tuple(segs), out_key, None)
            i += 1
            conv[1] = done + 1
            conv[4] = end
            conv[5] = (out_key, a)
            if conv[1] >= conv[2]:
                pool[s] = new_conv(sc)


def variable_chat(
    *,
    system_prompts: int = 4,
    system_tokens: int = 300,
    user_tokens: tuple[float, float] = (200.0, 1.0),
    output_tokens: tuple[float, float] = (200.0, 0.6),
    rate_rps: float = 10.0,
    n_requests: int = 10000,
    seed: int = 0,
    name: str = "variable-chat",
) -> Workload:
    """Single-turn chat with lognormal prompt lengths over a few shared
    system prompts (the ShareGPT single-turn shape)."""
    return multi_turn_chat(
        active_conversations=1,
        rounds=(1, 1),
        system_prompts=system_prompts,
        system_tokens=system_tokens,
        user_tokens=user_tokens,
        assistant_tokens=output_tokens,
        rate_rps=rate_rps,
        n_requests=n_requests,
        seed=seed,
        name=name,
    )
