"""Discrete-event model of one SageMaker endpoint variant.

Why this model: prefix-aware routing pays off only through the prefill work
it saves, so the model keeps exactly what decides that -- which instance
holds which prompt prefix, how much prefill each request still has to do,
and how queues build up -- and nothing else.

* **KV prefix cache** per instance: capacity in tokens, counted in whole
  blocks of ``block_tokens`` (vLLM caches full blocks only; a trailing
  partial block is recomputed).  Eviction is LRU.  The unit kept in the LRU
  is a run of blocks that always travel together (one prompt segment, see
  :mod:`planner.workloads`); blocks are touched child-first so a shared
  parent is always more recent than its children and leaves are evicted
  first, as vLLM frees blocks in reverse order.  This equals block-level
  LRU except that a run is evicted whole instead of block by block.
* **Prefill** is compute-bound and serialised per instance (FIFO, one
  prefill at a time): service time = ``overhead_ms`` + uncached tokens /
  ``prefill_tokens_per_s``.  TTFT = queueing + prefill (+ the router's own
  overhead).  Cached tokens cost nothing; vLLM always recomputes at least
  the last prompt token.
* **Decode** runs concurrently after prefill; time per output token grows
  with the number of in-flight sequences on the instance:
  ``tpot_ms x (1 + inflight / decode_knee)``.  A request is *in flight*
  from routing until its last token; that count drives
  LEAST_OUTSTANDING_REQUESTS, the prefix-aware spill threshold and
  KV_AWARE's load term.
* **Prefill/decode interference** (``prefill_chunk_tokens``, 8,192 by
  default as in vLLM V1; 0 turns it off): the engine runs steps of at most
  that many tokens, each mixing a prefill chunk with the decode batch, and
  a step lasts as long as the slower of the two (roofline: chunk compute vs
  the decode step).  So a prefill is slowed by decode load where a chunk
  before its last is shorter than the decode step (the last step's floor is
  the one step inside ``overhead_ms``, the TTFT of a fully cached prompt),
  and a decode, which advances one token per step, loses the part of each
  prefill step beyond its own step: its time per token is divided by 1 -
  that lost share of the last ``busy_window_s`` before its decode starts.
  Its own prefill is not in that share: it ends before its decode begins.
* Arrivals are open-loop (the trace's timestamps), or closed-loop with
  ``clients=K`` fixed-concurrency users.  The cache is updated when the
  request is routed.

Memory is bounded by the caches, the in-flight heap and a fixed TTFT
histogram (log bins, 1 % wide), never by the trace length.
"""
from __future__ import annotations

import heapq
import math
from collections import OrderedDict
from collections.abc import Callable, Generator, Sequence
from dataclasses import asdict, dataclass, field, replace

from .strategies import PrefixAware, Strategy
from .workloads import Request, Workload

Running = tuple[float, int, int]
"""An in-flight request on the heap: ``(completion time, instance, KV tokens it holds)``."""


@dataclass(frozen=True)
class InstanceModel:
    """Performance model of one instance (defaults: Llama 3.1 70B in BF16,
    tensor-parallel over the 8 H100s of an ml.p5.48xlarge, vLLM).

    * ``kv_capacity_tokens``: (8 x 80 GB x 0.90 utilisation - 141 GB weights
      - ~15 GB activations/graphs) / 320 KiB of KV per token (80 layers x
      8 KV heads x 128 dims x 2 (K,V) x 2 bytes) = ~1.28 M tokens.
    * ``prefill_tokens_per_s`` and ``overhead_ms`` are calibrated to AWS's
      published TTFT range of 63..280 ms (see constructs/hyperwarm/planner/README.md): 280 ms is
      a full miss of the long-context test's median 8,800-token prompt, 63 ms
      a hit with its 800 uncached tokens, so 8,000 tokens take 217 ms
      (36,900 tokens/s: 2 x 70e9 FLOP per token at 65 % of the 8 x 989
      TFLOP/s dense BF16 peak) and the fixed part is 63 - 1.6 (router) -
      21.7 = 40 ms.
    * ``overhead_ms``: SageMaker front end, HTTP, scheduling and the first
      forward/decode step: TTFT of a fully cached prompt.
    * ``tpot_ms``: ~25 ms per output token at small batch, memory-bound.
    * ``context_tokens``: Llama 3.1's context length, 131,072 tokens; a
      trace request whose prompt plus output exceeds it is an error (the
      engine would reject it).
    * ``prefill_chunk_tokens``: the engine's token budget per step (vLLM V1's
      ``max_num_batched_tokens`` default on H100-class GPUs for the OpenAI
      server, 8,192); a prefill runs as steps of this many tokens mixed with
      the decode batch.  0 turns prefill/decode interference off (an engine
      without chunked prefill).
    * ``busy_window_s``: how far back a decode feels the prefill done on its
      instance: one request's decode, 256 tokens x 25 ms = 6.4 s.
    """

    kv_capacity_tokens: int = 1_280_000
    block_tokens: int = 16
    prefill_tokens_per_s: float = 36_900.0
    overhead_ms: float = 40.0
    tpot_ms: float = 25.0
    decode_knee: float = 64.0
    context_tokens: int = 131_072
    prefill_chunk_tokens: int = 8192
    busy_window_s: float = 6.4
    kv_limit: bool = True

    def describe(self) -> str:
        """One line stating what the run assumes (reports print it)."""
        steps = (
            f", prefill/decode interference in steps of {self.prefill_chunk_tokens:,} tokens "
            f"(window {self.busy_window_s:g} s)" if self.prefill_chunk_tokens else ", no prefill/decode interference"
        )
        return (
            f"KV cache {self.kv_capacity_tokens:,} tokens per instance, prefill "
            f"{self.prefill_tokens_per_s:,.0f} tokens/s, {self.overhead_ms:g} ms fixed TTFT, "
            f"{self.tpot_ms:g} ms per output token, context {self.context_tokens:,} tokens{steps}"
        )

    def __post_init__(self) -> None:
        for name, lo in (
            ("kv_capacity_tokens", 1),
            ("block_tokens", 1),
            ("prefill_tokens_per_s", 1e-9),
            ("overhead_ms", 0.0),
            ("tpot_ms", 0.0),
            ("decode_knee", 1e-9),
            ("context_tokens", 1),
            ("prefill_chunk_tokens", 0),
            ("busy_window_s", 1e-9),
        ):
            v = getattr(self, name)
            if v is None or v < lo:
                raise ValueError(f"{name}={v!r} is outside the allowed range >= {lo}")
        if self.kv_capacity_tokens < self.block_tokens:
            raise ValueError(
                f"kv_capacity_tokens={self.kv_capacity_tokens} is outside the allowed range "
                f">= block_tokens ({self.block_tokens})"
            )


# TTFT histogram: bin = int(ln(ms) * 100) + offset, i.e. 1 % relative width,
# covering 0.01 ms .. ~1e9 ms.
_BINS_PER_E = 100
_OFFSET = 461
_NBINS = 2600


def _percentile(hist: list[int], total: int, q: float) -> float:
    if total == 0:
        return float("nan")
    target = q * total
    acc = 0
    for idx, c in enumerate(hist):
        acc += c
        if acc >= target and c:
            return math.exp((idx - _OFFSET + 0.5) / _BINS_PER_E)
    return float("nan")


@dataclass
class StrategyResult:
    """What one strategy did on one workload."""

    strategy: str
    params: dict[str, object]
    requests: int
    kv_hit_rate: float
    ttft_ms: dict[str, float]
    ttft_mean_ms: float
    throughput_rps: float
    instance_share: list[float]
    spill_rate: float
    remap: dict[str, float] | None = None
    label: str = ""
    routing: dict[str, object] = field(default_factory=dict)
    #: each seed's KV hit rate when this is a mean over seeds (:func:`mean_over_seeds`); empty for one run
    seed_kv_hit_rates: list[float] = field(default_factory=list)

    @property
    def max_share_deviation(self) -> float:
        """Largest relative distance of any instance's share from fair."""
        n = len(self.instance_share)
        fair = 1.0 / n
        return max(abs(s - fair) for s in self.instance_share) / fair

    @property
    def cold_share(self) -> float:
        """Estimated share of requests sent to a newly added instance, whose KV cache is empty, at
        the start of a scale-out from n to n+1 instances: the routing keys the ring moves to it
        for PREFIX_AWARE, its fair share 1/(n+1) for the other strategies."""
        if self.remap is not None:
            return self.remap["scale_out"]
        return 1.0 / (len(self.instance_share) + 1)

    @property
    def hit_rate_scale_out(self) -> float:
        """Estimated KV hit rate at the start of that scale-out window: the steady hit rate on the
        requests that stay on warm instances, none on the new one (an estimate, not simulated)."""
        return self.kv_hit_rate * (1.0 - self.cold_share)

    def ttft_percentiles(self) -> dict[str, float]:
        """``ttft_p50_ms`` .. ``ttft_p99_ms``: the names the dashboard and ``plan cache`` use."""
        return {f"ttft_{q}_ms": v for q, v in self.ttft_ms.items()}

    def to_dict(self) -> dict[str, object]:
        d = asdict(self)
        d.pop("strategy")
        d.pop("label")
        return d


def mean_over_seeds(runs: Sequence[Sequence[StrategyResult]]) -> list[StrategyResult]:
    """One result per strategy from the same strategies run on several seeds (``runs[seed][strategy]``).

    Why: one seed's hit rate is noisy (aws-long-context's PREFIX_AWARE moved 2.5 points from seed to
    seed), so a report of one seed states a figure the next seed contradicts.  Every figure is the mean
    over the seeds; each seed's KV hit rate is kept so the report shows the spread.  Instance shares are
    sorted before averaging: instance 0 of one seed's ring is not instance 0 of another's."""
    if not runs:
        raise ValueError("runs: at least one seed is needed")
    out = []
    for per_seed in zip(*runs, strict=True):
        k = len(per_seed)
        first = per_seed[0]

        def mean(xs: Sequence[float], k: int = k) -> float:
            return sum(xs) / k

        shares = [sorted(r.instance_share) for r in per_seed]
        out.append(replace(
            first,
            kv_hit_rate=mean([r.kv_hit_rate for r in per_seed]),
            ttft_ms={q: mean([r.ttft_ms[q] for r in per_seed]) for q in first.ttft_ms},
            ttft_mean_ms=mean([r.ttft_mean_ms for r in per_seed]),
            throughput_rps=mean([r.throughput_rps for r in per_seed]),
            instance_share=[mean(col) for col in zip(*shares, strict=True)],
            spill_rate=mean([r.spill_rate for r in per_seed]),
            remap=({key: mean([r.remap[key] for r in per_seed if r.remap]) for key in first.remap}
                   if first.remap is not None else None),
            seed_kv_hit_rates=[r.kv_hit_rate for r in per_seed] if k > 1 else [],
        ))
    return out


def _kv_wait(heap: list[Running], i: int, excess: float, start: float) -> float:
    """When instance ``i`` has freed ``excess`` KV tokens: the completion
    time of its running requests, earliest first, that release them.  Rare
    (only when KV memory is full), so a scan of the heap is fine."""
    freed = 0
    for done, _, held in sorted(e for e in heap if e[1] == i):
        freed += held
        if freed >= excess:
            return max(done, start)
    # more than the whole cache: it runs alone, after all the others
    return max(max((e[0] for e in heap if e[1] == i), default=start), start)


def _core(
    workload: Workload, strategy: Strategy, n_instances: int, model: InstanceModel, seed: int,
    clients: int | None = None,
) -> Generator[None, Request | None, StrategyResult]:
    """One strategy's simulation as a coroutine: send it request tuples,
    then ``None``; it returns the :class:`StrategyResult` (StopIteration).
    A coroutine lets :func:`simulate_many` read a trace once for many
    strategies while every strategy keeps its loop state in fast locals."""
    if not isinstance(n_instances, int) or n_instances < 1:
        raise ValueError(f"instances={n_instances!r} is outside the allowed range >= 1")
    n = n_instances
    B = model.block_tokens
    ncache = 1 if strategy.shared_cache else n
    cap = (model.kv_capacity_tokens // B) * (n if strategy.shared_cache else 1)
    caches: list[OrderedDict[int, int]] = [OrderedDict() for _ in range(ncache)]  # block key -> blocks
    used = [0] * ncache
    inflight = [0] * n
    free_at = [0.0] * n
    counts = [0] * n
    heap: list[Running] = []
    hist = [0] * _NBINS
    route = strategy.bind(n, caches, inflight, workload, seed)

    per_tok = 1.0 / model.prefill_tokens_per_s
    ovh = model.overhead_ms / 1000.0
    tpot = model.tpot_ms / 1000.0
    knee = model.decode_knee
    r_ovh = strategy.routing_overhead_ms / 1000.0
    shared = strategy.shared_cache
    # closed loop: each of `clients` users sends its next request when the
    # previous one completes; the trace then supplies content, not times
    client_free = [0.0] * clients if clients else None
    log = math.log
    push, pop = heapq.heappush, heapq.heappop
    hi_bin = _NBINS - 1
    exp = math.exp
    chunk = model.prefill_chunk_tokens
    cf = chunk * per_tok  # compute of one full chunk
    inv_tau = 1.0 / model.busy_window_s
    work = [0.0] * n
    work_t = [0.0] * n
    # KV tokens held by running requests per instance (released when their
    # completion leaves `heap`); with kv_limit off the bound is never reached
    kv_used = [0] * n
    kv_tok = model.kv_capacity_tokens if model.kv_limit else math.inf

    total = 0
    tok_in = 0
    tok_hit = 0
    ttft_sum = 0.0
    t_first = None
    t_last = 0.0
    last_done = 0.0
    while True:
        req = yield
        if req is None:
            break
        t, inp, out, segs, out_key, _body = req
        if client_free is not None:
            t = pop(client_free)
        if t < t_last:
            t = t_last  # tolerate slightly unordered traces
        t_last = t
        if t_first is None:
            t_first = t
        while heap and heap[0][0] <= t:
            _, j, freed = pop(heap)
            inflight[j] -= 1
            kv_used[j] -= freed

        # prompt as (key, full blocks owned) runs
        sb = []
        pb = 0
        for key, end in segs:
            eb = end // B
            if eb > pb:
                sb.append((key, eb - pb))
                pb = eb

        i = route(req, sb)
        ci = 0 if shared else i
        c = caches[ci]

        hitb = 0
        for key, nb in sb:
            if key in c:
                hitb += nb
            else:
                break
        u = used[ci]
        if out_key is not None:
            ob = (inp + out) // B - pb
            if ob > 0:
                if out_key in c:
                    c.move_to_end(out_key)
                else:
                    c[out_key] = ob
                    u += ob
        for key, nb in reversed(sb):
            if key in c:
                c.move_to_end(key)
            else:
                c[key] = nb
                u += nb
        while u > cap and c:
            u -= c.popitem(last=False)[1]
        used[ci] = u

        hit = hitb * B
        if hit >= inp:
            hit = inp - 1 if inp > 0 else 0
        start = free_at[i]
        if start < t:
            start = t
        unc = inp - hit
        if chunk:
            # one engine step per chunk, as long as the slower of its prefill
            # compute and the decode batch's step (roofline, module docstring)
            step = tpot * (1.0 + inflight[i] / knee)
            full, rest = divmod(unc, chunk)
            rf = rest * per_tok
            svc = ovh + unc * per_tok
            if step > tpot:  # prefill slowed by decode load: no step is shorter than the decode step
                last = rf if rest else cf  # its last step, whose unloaded floor (tpot) ovh holds
                if step > last:
                    svc += step - (last if last > tpot else tpot)
                if step > cf and full:
                    svc += (full if rest else full - 1) * (step - cf)
            if step > cf:
                lost = 0.0  # no chunk outlasts the decode step (a rest is never longer than a chunk)
            else:
                lost = full * (cf - step) + (rf - step if rf > step else 0.0)
            # decode slowed by prefill: it advances one token per step, so it loses the part of
            # each prefill step beyond its own step. The share is the rate of prefill work routed
            # to the instance over the window before this request, an estimate of the rate while
            # it decodes; its own prefill joins the window after, for the requests that follow.
            w = work[i] * exp((work_t[i] - t) * inv_tau)
            busy = w * inv_tau
            dec = out * step / (1.0 - (busy if busy < 0.9 else 0.9))
            work[i] = w + lost
            work_t[i] = t
        else:
            svc = ovh + unc * per_tok
            dec = out * tpot * (1.0 + inflight[i] / knee)
        # KV-memory limit: a running request holds its uncached prompt and its
        # output; if they do not fit, it waits for running requests to finish
        need = unc + out
        held = kv_used[i] + need
        if held > kv_tok:
            start = _kv_wait(heap, i, held - kv_tok, start)
        kv_used[i] = held
        end_pf = start + svc
        free_at[i] = end_pf
        ttft = end_pf - t + r_ovh
        done = end_pf + dec
        if done > last_done:
            last_done = done
        push(heap, (done, i, need))
        if client_free is not None:
            push(client_free, done)
        inflight[i] += 1
        counts[i] += 1

        b = int(log(ttft * 1000.0) * _BINS_PER_E) + _OFFSET
        hist[b if 0 <= b < hi_bin else (0 if b < 0 else hi_bin)] += 1
        ttft_sum += ttft
        tok_in += inp
        tok_hit += hit
        total += 1

    span = (last_done - t_first) if total and t_first is not None else 0.0
    pct = {f"p{q}": _percentile(hist, total, q / 100) * 1.0 for q in (50, 90, 95, 99)}
    remap = strategy.remap(n) if isinstance(strategy, PrefixAware) and n > 1 else None
    return StrategyResult(
        strategy=strategy.name,
        params=strategy.params(),
        requests=total,
        kv_hit_rate=(tok_hit / tok_in) if tok_in else 0.0,
        ttft_ms=pct,
        ttft_mean_ms=(ttft_sum / total * 1000.0) if total else float("nan"),
        throughput_rps=(total / span) if span > 0 else 0.0,
        instance_share=[c / total if total else 0.0 for c in counts],
        spill_rate=(strategy.spills / total) if total else 0.0,
        remap=remap,
        label=strategy.label(),
        routing=strategy.routing_config(),
    )


def simulate(
    workload: Workload,
    strategy: Strategy,
    n_instances: int,
    model: InstanceModel = InstanceModel(),
    *,
    seed: int = 0,
    progress: Callable[[int], None] | None = None,
    clients: int | None = None,
) -> StrategyResult:
    """Run ``workload`` through ``strategy`` on ``n_instances`` instances.

    ``progress(k)`` is called with the number of new requests done every
    65,536 requests and at the end.  With ``clients=K`` the load is
    closed-loop: K users each send their next request (the trace's next
    one) the moment their previous request completes, as a benchmark
    client with fixed concurrency does; the trace's timestamps are ignored
    and throughput then shows what faster requests buy.
    """
    return simulate_many(
        workload, [strategy], n_instances, model, seed=seed, progress=progress, clients=clients
    )[0]


def simulate_many(
    workload: Workload,
    strategies: Sequence[Strategy],
    n_instances: int,
    model: InstanceModel = InstanceModel(),
    *,
    seed: int = 0,
    progress: Callable[[int], None] | None = None,
    clients: int | None = None,
) -> list[StrategyResult]:
    """Run several strategies in one pass over ``workload`` (each on its own
    fresh variant).  Memory grows with the number of strategies (one set of
    caches each), so callers batch long lists."""
    if not isinstance(n_instances, int) or n_instances < 1:
        raise ValueError(f"instances={n_instances!r} is outside the allowed range >= 1")
    if clients is not None and (isinstance(clients, bool) or not isinstance(clients, int) or clients < 1):
        raise ValueError(f"clients={clients!r} is outside the allowed range >= 1")
    cores = [_core(workload, s, n_instances, model, seed, clients) for s in strategies]
    for c in cores:
        next(c)
    sends = [c.send for c in cores]
    tick = 0
    for req in workload:
        for send in sends:
            send(req)
        tick += 1
        if tick == 65536:
            if progress is not None:
                progress(tick)
            tick = 0
    if progress is not None and tick:
        progress(tick)
    results = []
    for c in cores:
        try:
            c.send(None)
        except StopIteration as stop:
            results.append(stop.value)
        else:  # pragma: no cover - the core always returns on None
            raise RuntimeError("simulation core did not finish")
    if results and results[0].requests == 0:
        # An empty trace has no answer; recommending anything from it would mislead.
        raise ValueError(f"workload {workload.name!r} has no requests")
    return results
