"""Named scenarios: a workload, an instance model, a variant size and the
routing settings to compare.

Why named scenarios: users (and the fidelity tests) need a reproducible
way to check the simulator against published numbers before trusting it
on their own traces.  Every parameter below is either published (AWS,
SGLang, inference-perf) or physical; the workload details AWS did not
publish are stated as such.  Nothing here encodes a result: hit rates,
TTFTs and shares come out of :func:`planner.sim.simulate`.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .sim import InstanceModel
from .workloads import Workload, multi_turn_chat, shared_prefix

#: p5.48xlarge, Llama 3.1 70B BF16 weights with vLLM ``--kv-cache-dtype
#: fp8``: (576 GB usable - 141 GB weights - 15 GB activations) / 160 KiB of
#: FP8 KV per token = ~2.56 M tokens.
P5_70B_FP8KV = InstanceModel(kv_capacity_tokens=2_560_000)


@dataclass
class Scenario:
    name: str
    description: str
    workload: Callable[[int, int | None], Workload]  # (seed, n_requests) -> Workload
    instances: int = 7
    model: InstanceModel = field(default_factory=InstanceModel)
    prefix_length: int = 4096
    concurrency_threshold: int = 8
    notes: list[str] = field(default_factory=list)


def _aws_long(seed: int, n: int | None) -> Workload:
    return shared_prefix(
        groups=900,
        prompts_per_group=32,
        prefix_tokens=8000,
        question_tokens=800,
        question_jitter=0.5,
        output_tokens=256,
        rate_rps=8.0,
        n_requests=n if n is not None else 28800,
        seed=seed,
        name="aws-long-context",
    )


def _aws_short(seed: int, n: int | None) -> Workload:
    return multi_turn_chat(
        active_conversations=200,
        rounds=(2, 6),
        system_prompts=1,
        system_tokens=150,
        user_tokens=(80.0, 0.9),
        assistant_tokens=(150.0, 0.6),
        rate_rps=8.0,
        n_requests=n if n is not None else 28800,
        seed=seed,
        name="aws-short-context",
    )


def _hot(seed: int, n: int | None) -> Workload:
    return shared_prefix(
        groups=200,
        prefix_tokens=4000,
        question_tokens=400,
        question_jitter=0.5,
        output_tokens=256,
        rate_rps=8.0,
        hot_share=0.6,
        n_requests=n if n is not None else 20000,
        seed=seed,
        name="hot-prefix",
    )


def _sglang(seed: int, n: int | None) -> Workload:
    return shared_prefix(
        groups=64,
        prompts_per_group=16,
        prefix_tokens=2048,
        question_tokens=128,
        output_tokens=256,
        rate_rps=16.0,
        n_requests=n,
        seed=seed,
        name="sglang-generated-shared-prefix",
    )


def _ip(seed: int, n: int | None) -> Workload:
    return shared_prefix(
        groups=150,
        prompts_per_group=5,
        prefix_tokens=6000,
        question_tokens=1200,
        output_tokens=256,
        rate_rps=4.0,
        n_requests=n,
        seed=seed,
        name="inference-perf-shared-prefix",
    )


def _mrqa(seed: int, n: int | None) -> Workload:
    return multi_turn_chat(
        active_conversations=64,
        rounds=(5, 5),
        system_tokens=1000,
        user_tokens=(200.0, 0.3),
        assistant_tokens=(200.0, 0.3),
        rate_rps=8.0,
        n_requests=n if n is not None else 20000,
        seed=seed,
        name="multi-round-qa",
    )


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario(
            "aws-long-context",
            "AWS long-context test: 7 x ml.p5.48xlarge, Llama 3.1 70B, 8,000-token shared prefixes, 1 h",
            _aws_long,
            instances=7,
            model=P5_70B_FP8KV,
            prefix_length=4096,
            concurrency_threshold=12,
            notes=[
                "published: 7 instances, 8,000-token shared prefixes, 1 hour, vLLM prefix caching",
                "not published, chosen: 900 prefixes drawn uniformly, 400..1,200-token questions, "
                "256 output tokens, 8 req/s Poisson (28,800 requests = 1 h)",
                "PrefixLength 4096 bytes (~1,000 tokens, inside the shared prefix); ConcurrencyThreshold 12 "
                "(~1.5x the mean in-flight per instance)",
            ],
        ),
        Scenario(
            "aws-short-context",
            "AWS short-context test: 7 instances, variable ShareGPT-like multi-turn chat",
            _aws_short,
            instances=7,
            model=P5_70B_FP8KV,
            prefix_length=1024,
            concurrency_threshold=12,
            notes=[
                "published: 7 instances, variable-length ShareGPT-like prompts",
                "not published, chosen: 200 concurrent conversations of 2..6 turns, one 150-token system "
                "prompt, lognormal user (median 80) and assistant (median 150) messages, 8 req/s",
                "PrefixLength 1024 bytes covers the system prompt and the start of the first user message",
            ],
        ),
        Scenario(
            "hot-prefix",
            "One prefix carries 60 % of the traffic (failure mode: one hot prefix piling onto one instance)",
            _hot,
            instances=7,
            model=P5_70B_FP8KV,
            prefix_length=4096,
            concurrency_threshold=8,
        ),
        Scenario(
            "sglang-shared-prefix",
            "SGLang generated-shared-prefix: 64 groups x 16 prompts, 2,048-token prefix, 128-token question",
            _sglang,
            instances=4,
            prefix_length=4096,
            concurrency_threshold=16,
        ),
        Scenario(
            "inference-perf-shared-prefix",
            "inference-perf shared_prefix: 150 groups x 5, 6,000-token prefix, 1,200-token question",
            _ip,
            instances=4,
            prefix_length=8192,
            concurrency_threshold=16,
        ),
        Scenario(
            "multi-round-qa",
            "Multi-round QA: 64 users x 5 rounds, 1,000-token system prompt, growing history",
            _mrqa,
            instances=4,
            prefix_length=8192,
            concurrency_threshold=16,
        ),
    )
}


def get_scenario(name: str) -> Scenario:
    try:
        return SCENARIOS[name]
    except KeyError:
        raise ValueError(f"scenario={name!r} is not one of {', '.join(SCENARIOS)}") from None
