"""The fault sweep: one scripted rollout, every boundary call x every fault kind, and two and three
invocations interleaved at every call; each run continued as AWS continues it to quiescence.

The script (on the in-memory stand-ins of model_world.py): a HyperPod target and an endpoint serve v1;
v2 lands and starts rolling out on the endpoint; v3 lands mid-rollout; a corrupt v4 lands; a deploy
guard reads the state; SageMaker ends v2's update. One planned fault per run, at call ``i`` of the run
(counted over every invocation): it fails before the call (``error``), the call goes through and the
client sees an error (``lost``), or the invocation crashes before or after it. Then Lambda's retries,
its failure destination, SageMaker's state changes, lock expiry, the scheduled reconciliation and
``hyperwarm refresh replay`` run until nothing changes, and:

- no lost version: every HyperPod object and endpoint variant serves v3;
- no rollback: nothing ever serves an older version than it did;
- one update in flight: no two invocations ever change one target at once, nothing in use is deleted;
- one letter id per permanent failure: v4's, and nothing else is left in the dead-letter queue;
- nothing leaked: no endpoint config or model exists beyond what CloudFormation made and what serves;
- the record equals what serves: no rollout, unrecorded update, waiting version or lock left.

By default a sample runs (rotated daily; ``HYPERWARM_SWEEP_SEED`` pins it); ``HYPERWARM_SWEEP=full``
runs every case (CI does).
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import model_world as mw
import pytest
from botocore.exceptions import ClientError

from hyperwarm.functions.cache_refresh import deploy_guard, versions
from hyperwarm.functions.cache_refresh.errors import TransientError
from hyperwarm.functions.cache_refresh.state import StateTable, lock_held

FULL = os.environ.get("HYPERWARM_SWEEP") == "full"
SEED = int(os.environ.get("HYPERWARM_SWEEP_SEED", str(int(time.time() // 86400))))
SAMPLE = {"fault": 48, "pair": 16, "triple": 8}
"""Cases per kind in the default run: together a few seconds."""


class _GuardTable:
    """The state table as the deploy guard reads it (boto3's Table), through the faulted store."""

    def __init__(self, world: mw.World) -> None:
        self.world = world

    def get_item(self, Key: dict[str, str], ConsistentRead: bool) -> dict[str, Any]:  # noqa: N803
        try:
            return {"Item": self.world.store.get(Key["pk"]) or None}
        except TransientError:
            raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}},
                              "GetItem") from None


@dataclass
class Run:
    world: mw.World
    aws: mw.AsyncLambda
    history: dict[str, list[str]]
    outcome: str
    marks: list[mw.Mark] | None = None
    """Recording the fault-free run: a mark before every script step and delivery (cases start from them)."""

    def mark(self, step: int) -> None:
        mw.mark(self, len(self.world.faults.calls), step)

    def observe(self) -> None:
        """After every invocation: nothing moved back, nothing changed twice at once, nothing in use deleted."""
        assert not self.world.violations, self.world.violations
        assert not self.world.sm.violations, self.world.sm.violations
        for obj, now in self.world.served_objects().items():
            before = self.history[obj][-1]
            assert versions.compare(now, before) >= 0, f"{obj} moved back {before} -> {now}"
            if now != before:
                self.history[obj].append(now)


def _concurrent(run: Run) -> None:
    """What happens meanwhile in another container: SageMaker ends an update and its state change
    arrives; else the next event in flight; else the scheduled reconciliation."""
    world, aws = run.world, run.aws
    if world.sm.status == "Updating":
        world.sm.settle(aws.next_outcome())
        changes, world.sm.emitted = world.sm.emitted, []
        for change in changes:
            aws.deliver(change)
    elif aws.inflight:
        aws.deliver_next()
    else:
        aws.reconcile()


def _send(version: str, sequencer: int) -> Callable[[Run, int], None]:
    return lambda run, step: run.aws.send(mw.manifest_event(version, sequencer))


def _drain(run: Run, step: int) -> None:
    """What is in flight is delivered (AsyncLambda.drain), the run marked before each delivery."""
    while run.aws.inflight:
        run.mark(step)
        run.aws.deliver_next()


def _guard(run: Run, step: int) -> None:
    try:  # a deploy of v1 during the rollout: the guard must still read and answer
        deploy_guard.stale_targets(_GuardTable(run.world), [{"Id": t, "Version": "v1", "Field": "f",
                                                             "Value": "{version}"} for t in (mw.HYPERPOD.id, mw.ENDPOINT.id)],
                                   deploy_guard.Patience(60))
    except mw.Crash:
        pass  # the guard's function died: CloudFormation's own timeout fails that deploy, nothing else


SCRIPT: tuple[Callable[[Run, int], None], ...] = (
    _send("v2", 0x102), _drain, _send("v3", 0x103), _drain, _send("v4", 0x104), _guard,
    lambda run, step: run.aws.settle(), _drain, lambda run, step: run.aws.quiesce())
"""The module's script, step by step; a step can be started again where the run was marked."""


def _script(run: Run, start: int = 0) -> None:
    for step in range(start, len(SCRIPT)):
        run.mark(step)
        SCRIPT[step](run, step)


OUTCOMES = {"v2-serves": (True,), "v2-rolls-back": (False,)}
"""How SageMaker ends v2's blue/green update: each script runs both ways (later updates serve)."""


def _new_run(plan: dict[int, str] | None = None, outcome: str = "v2-serves") -> Run:
    world = mw.World(random.Random(0))
    world.files.update({"v2": "complete", "v3": "complete", "v4": "corrupt"})
    run = Run(world, mw.AsyncLambda(world, OUTCOMES[outcome]),
              {obj: [v] for obj, v in world.served_objects().items()}, outcome)
    world.faults.plan = dict(plan or {})
    world.observer = run.observe
    return run


def _check_quiet(run: Run) -> None:
    world = run.world
    assert set(world.served_objects().values()) == {"v3"}, f"lost version: {world.served_objects()}"
    configs = {c for c in world.sm.configs if c != world.sm.config and not c.startswith("cfn-config")}
    in_use = {v["ModelName"] for v in world.sm.configs[world.sm.config]["ProductionVariants"]}
    models = {m for m in world.sm.models if m not in in_use and not m.startswith("cfn-")}
    assert (configs, models) == (set(), set()), f"leaked: {configs} {models}"
    # one letter id per permanent failure: the corrupt v4, and the first update's rollback where it rolled
    # back (v2's, or v3's when a fault delayed v2 until v3 was first to update)
    letters = [letter for _, letter in world.sqs.sent]
    ids = {(letter["event"]["detail"]["object"]["key"], letter["reason"]): set() for letter in letters}
    for letter in letters:
        ids[(letter["event"]["detail"]["object"]["key"], letter["reason"])].add(letter["letter_id"])
    rolled_back = [key for key, reason in ids if reason == "rolled-back"]
    assert len(rolled_back) == (run.outcome == "v2-rolls-back"), f"rollbacks lettered: {rolled_back}"
    assert set(ids) - {(k, "rolled-back") for k in rolled_back} == {(f"{mw.PREFIX}/v4/manifest.json",
                                                                     "corrupt-manifest")}, f"failures {sorted(ids)}"
    assert all(len(found) == 1 for found in ids.values()), f"one failure, several ids: {ids}"
    left = {json.loads(m["Body"]).get("letter_id") for m in world.sqs.messages.values()}
    assert left <= set().union(*ids.values()) and ids[(f"{mw.PREFIX}/v4/manifest.json", "corrupt-manifest")] <= left, \
        f"left in the queue: {left}"
    for target in (mw.HYPERPOD.id, mw.ENDPOINT.id):
        item = world.store.item(StateTable.key(target))
        assert item.get("current_version") == "v3", f"{target} recorded {item.get('current_version')}"
        assert not {"pending", "starting", "queued"} & set(item), f"{target} left {item}"
        assert not lock_held(item, world.clock.now), f"{target} still locked: {item}"


def _execute(run: Run, case: str, step: int = 0) -> None:
    try:
        _script(run, step)
        _check_quiet(run)
    except AssertionError as exc:
        answers = "\n".join(str(a)[:300] for a in run.aws.answers)
        raise AssertionError(f"{case} (HYPERWARM_SWEEP_SEED={SEED}): {exc}\nanswers:\n{answers}\n"
                             f"state: {dict(run.world.store.items)}") from None


def _fault_free(outcome: str) -> tuple[list[str], list[mw.Mark]]:
    """The script without a fault: its boundary calls (what the cases number) and its marks."""
    run = _new_run(outcome=outcome)
    run.marks = []
    _script(run)
    _check_quiet(run)
    return run.world.faults.calls, run.marks


FAULT_FREE = {outcome: _fault_free(outcome) for outcome in OUTCOMES}
CALLS = {outcome: calls for outcome, (calls, _) in FAULT_FREE.items()}


def _run_until(outcome: str, call: int) -> tuple[Run, int]:
    """The fault-free run of ``outcome`` at its last mark before call ``call`` (the first, before any call, is
    the script's start), and the step to go on with. The marks were made at import with the code unpatched: a
    test that patches the code under test starts from :func:`_new_run`."""
    resumed = mw.resume(FAULT_FREE[outcome][1], call)
    assert resumed is not None
    return resumed


def _cases() -> dict[str, list[tuple[Any, ...]]]:
    cases: dict[str, list[tuple[Any, ...]]] = {"fault": [], "pair": [], "triple": []}
    for outcome, calls in CALLS.items():
        n = len(calls)
        cases["fault"] += [(outcome, i, kind) for i in range(n) for kind in mw.FAULT_KINDS]
        cases["pair"] += [(outcome, i) for i in range(n)]
        cases["triple"] += [(outcome, i, j) for i in range(n) for j in range(0, 24, 3)]
    if FULL:
        return cases
    rng = random.Random(SEED)
    return {kind: sorted(rng.sample(found, min(SAMPLE[kind], len(found)))) for kind, found in cases.items()}


CASES = _cases()


def test_the_script_without_faults_quiesces_and_its_calls_cover_every_boundary():
    for calls in CALLS.values():
        assert {"state.get", "state.put", "live.get", "apply.merge_patch", "live.describe_endpoint",
                "live.describe_endpoint_config", "live.describe_model", "start.create_model",
                "start.create_endpoint_config", "start.update_endpoint", "delete.delete_endpoint_config",
                "delete.delete_model", "dead_letter.send", "verify.verify"} == set(calls)


@pytest.mark.parametrize("outcome,index,kind", CASES["fault"])
def test_one_fault_at_any_call_loses_nothing(outcome: str, index: int, kind: str,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(deploy_guard, "_sleep", lambda seconds: None)
    run, step = _run_until(outcome, index)
    run.world.faults.plan = {index: kind}
    _execute(run, f"{outcome}: {kind} at call {index} ({CALLS[outcome][index]})", step)


def _pause(run: Run, index: int, then: Callable[[], None]) -> None:
    run.world.faults.pauses[index] = then


@pytest.mark.parametrize("outcome,index", CASES["pair"])
def test_a_second_container_at_any_call_loses_nothing(outcome: str, index: int) -> None:
    run, step = _run_until(outcome, index)
    _pause(run, index, lambda: _concurrent(run))
    _execute(run, f"{outcome}: second container before call {index} ({CALLS[outcome][index]})", step)


@pytest.mark.parametrize("outcome,index,inner", CASES["triple"])
def test_a_third_container_inside_the_second_loses_nothing(outcome: str, index: int, inner: int) -> None:
    run, step = _run_until(outcome, index)

    def second() -> None:
        _pause(run, len(run.world.faults.calls) + inner, lambda: _concurrent(run))
        _concurrent(run)
    _pause(run, index, second)
    _execute(run, f"{outcome}: second container before call {index}, third {inner} calls into it", step)


def test_the_sweep_catches_a_queue_write_that_ignores_its_lock_holder(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not blind: with the queue write unconditional again, some interleaving loses v3 (once the
    reconciliation, which would roll it within its period, is off)."""
    from hyperwarm.functions.cache_refresh import flow, state

    monkeypatch.setattr(flow, "reconcile", lambda ports: {"status": "reconciled", "repaired": {}})

    def unconditional(self: Any, target_id: str, version: str, sequencer: str, event: dict[str, Any], *,
                      behind: str) -> bool:
        queued = {"version": version, "sequencer": sequencer, "event": json.dumps(event)}
        self._change(target_id, lambda item: {**item, "queued": queued})
        return True
    monkeypatch.setattr(state.StateTable, "enqueue", unconditional)
    failures = []
    for index in range(len(CALLS["v2-serves"])):
        run = _new_run()
        _pause(run, index, lambda run=run: _concurrent(run))
        try:
            _execute(run, f"pair {index}")
        except AssertionError as exc:
            failures.append(str(exc).splitlines()[0])
    assert failures, "no interleaving found the lost version"


def test_the_sweep_catches_a_start_that_is_not_recorded_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not blind: without the names recorded before the update, some fault leaks a config or models."""
    from hyperwarm.functions.cache_refresh.targets import endpoint

    start = endpoint.start
    monkeypatch.setattr(endpoint, "start", lambda sm, target, event, reserve: start(sm, target, event))
    monkeypatch.setattr(deploy_guard, "_sleep", lambda seconds: None)
    failures = []
    for index in range(len(CALLS["v2-serves"])):
        try:
            _execute(_new_run({index: "lost"}), f"lost {index}")
        except AssertionError as exc:
            failures.append(str(exc).splitlines()[0])
    assert any("leaked" in f for f in failures), failures


def test_the_sweep_catches_an_unrecorded_update_taken_as_never_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not blind: an update whose answer was lost, then rolled back, taken for one that never ran (its
    config does not serve) is never reported, and rolls the bad version out again."""
    from hyperwarm.functions.cache_refresh import flow

    def config_only(ports: Any, target: Any, item: dict[str, Any], live: Any, owner: str) -> tuple[dict[str, Any], str]:
        starting = item["starting"]
        if live.status != "InService" or live.config == starting["config"]:
            return item, "starting" if live.config == starting["config"] else ""
        ports.delete_superseded(starting["config"], list(starting["created_models"]), live.config)
        return ports.state.drop_start(target.id, owner), ""
    monkeypatch.setattr(flow, "_settle_start", config_only)
    monkeypatch.setattr(deploy_guard, "_sleep", lambda seconds: None)
    failures = []
    for index, call in enumerate(CALLS["v2-rolls-back"]):
        if call == "start.update_endpoint":
            try:
                _execute(_new_run({index: "lost"}, "v2-rolls-back"), f"lost {index}")
            except AssertionError as exc:
                failures.append(str(exc).splitlines()[0])
    assert any("rollbacks lettered: []" in f for f in failures), failures
