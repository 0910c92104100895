"""Model-based tests: seeded random event histories through the real refresh flow on in-memory fakes.

Each history uploads versions (complete, incomplete, corrupt, unorderable), delivers their manifest
events and SageMaker's state changes duplicated, reordered, late or lost (to the dead-letter queue),
ends blue/green updates in success or rollback, runs a deploy's own endpoint update, lets locks expire,
toggles dry run, replays the dead-letter queue, and injects failures and crashes at every external call (before it, or after it
went through: a lost answer), including a second invocation run in the middle of one. After every step:

- I2: no target ever moves to an older version (but for a failed warm switch pointed back at the version the
  record names as the previous one);
- I3: a target only ever serves the version it started on or a complete version;
- I4: every failure the function decides is counted (RefreshFailed) and in the dead-letter queue with
  its event, every letter is replayable, and an invocation that gives up reaches the queue through
  Lambda's on-failure record; every live-answered manifest event of an incomplete, corrupt or
  unorderable upload (also a version that is no folder name, ``1.0.0+build``) ahead of what a target
  serves is in a dead letter or a failure record with its event;
- I5: no endpoint config or model is deleted while it serves or is being moved to;
- I6 (at the end): every endpoint config and model a refresh created serves, or the record names it
  (``owned_*``: deleted when the next refresh serves; a deploy may have replaced it meanwhile);
- I7 (odd seeds: the HyperPod target rolls out warm, on the operator model, stepped by its workflow's
  executions, which fail, are retried, give up and get lost): no pod of a new version starts on a node
  without that version cached, and no cache is deleted while a pod reads it;
- dry run changes nothing at all.

At the end the world quiesces (faults off, rollouts end, retries and the queue are replayed) and
- I1: every target serves the newest complete, orderable version that was delivered.

``HYPERWARM_MODEL_SEQUENCES`` sets how many histories run (default 10,000); a failure names its seed.
The first 500 run in ``make test-fast``; all of them, split over the workers, in ``make test``.
"""

from __future__ import annotations

import os
import random
import re
from typing import Any

import model_world as mw
import pytest
from cluster_model import HEALTH_TAINT

from hyperwarm.functions.cache_refresh import deploy_guard, versions
from hyperwarm.functions.cache_refresh.state import StateTable
from hyperwarm.refresh import cli as refresh_cli

SEQUENCES = int(os.environ.get("HYPERWARM_MODEL_SEQUENCES", "10000"))
FIRST_HISTORIES = 500
"""The histories ``make test-fast`` runs (the rest are ``slow``)."""
LONG_CHUNKS = 4
"""The long histories in this many tests, each its own xdist group: the workers split them."""
NUMERIC = [f"v{n}" for n in range(2, 9)] + ["v6rc1", "v6.0.1", "v10"]
ODD = ["latest", "2026-11-01", "1.0.0+build"]  # unorderable; not comparable with vN (the last not a folder name)


class History:
    def __init__(self, seed: int) -> None:
        self.rng = rng = random.Random(seed)
        initial = rng.choice(["v1", "v1", "v1", "v5"])
        self.world = mw.World(rng, fault_rate=rng.choice([0.0, 0.0, 0.05, 0.15, 0.3]), initial=initial,
                              interleave_share=rng.choice([0.3, 0.3, 0.8]), warm=seed % 2 == 1)
        self.world.faults.interleave = self._deliver_one
        self.inflight: list[tuple[dict[str, Any], int]] = []  # (event, attempts so far)
        self.delivered_live: set[str | None] = set()
        """Versions whose event a live invocation answered, or that went to the dead-letter queue."""
        self.history = {t: [v] for t, v in self.world.served_objects().items()}
        self.sequencer = 0x100
        self.trace: list[str] = []
        self._letter_events: dict[str, dict[str, Any]] = {}
        self._orders: dict[tuple[str, str], int] = {}

    # -- the environment ---------------------------------------------------------------------------

    def upload(self) -> None:
        pool = [v for v in NUMERIC + ODD if v not in self.world.files]
        if not pool:
            return
        version = self.rng.choice(pool)
        self.world.files[version] = self.rng.choices(["complete", "incomplete", "corrupt"], [8, 2, 1])[0]
        self.sequencer += 1
        self.inflight.append((mw.manifest_event(version, self.sequencer), 0))
        self.trace.append(f"upload {version} {self.world.files[version]}")

    def _pick(self) -> tuple[dict[str, Any], int] | None:
        if not self.inflight:
            return None
        return self.inflight.pop(self.rng.randrange(len(self.inflight)))

    def _deliver_one(self) -> None:
        picked = self._pick()
        if picked:
            self.deliver(*picked)

    def deliver(self, event: dict[str, Any], attempts: int) -> None:
        """One asynchronous invocation, as Lambda runs it: retried twice, then the on-failure record."""
        w = self.world
        version = event["detail"]["object"]["key"].split("/")[-2] if event["source"] == "aws.s3" else None
        self.trace.append(f"deliver {event['id']} try {attempts + 1}{' dry' if w.dry_run else ''}")
        before = w.snapshot() if w.dry_run else None
        ahead = self._ahead_of(version) if version is not None and not w.dry_run else set()
        try:
            number, result = w.invoke(event)
            self.trace.append(f"  -> {result}")
        except (Exception, mw.Crash) as exc:  # noqa: BLE001 - every way an invocation can end
            self.trace.append(f"  -> raised {exc!r}")
            if before is not None:
                assert w.snapshot() == before, "dry run changed something"
            if attempts < 2:
                self.inflight.append((event, attempts + 1))
            else:
                self.delivered_live.add(version)
                w.sqs.messages[f"f{len(w.sqs.messages)}-{event['id']}"] = {
                    "MessageId": f"f-{event['id']}-{len(w.sqs.sent)}", "ReceiptHandle": f"f{len(w.sqs.messages)}-{event['id']}",
                    "Body": mw.json.dumps(mw.on_failure_record(event, repr(exc))), "visible": True}
                w.metrics.append(("Errors", None, None, 0))  # Lambda's own metric, which the alarms watch
            return
        if before is not None:
            assert w.snapshot() == before, "dry run changed something"
        else:
            self.delivered_live.add(version)
            if ahead and (w.files.get(version) != "complete" or version in ODD):
                self.check_bad_upload_lettered(event, version, ahead & self._ahead_of(version))
        self.check_failures_recorded([m for m in w.metrics if m[3] == number],
                                     [letter for n, letter in w.sqs.sent if n == number])

    def operator_fails(self) -> None:
        """The cluster fails what a warm change waits on: a version's fill (a bad file) or its pods (they
        crash-loop until the deployment's progress deadline). Either is dead-lettered; the quiescence replays it,
        and it succeeds then (the fault is cured for the replay)."""
        cluster = self.world.kube.cluster
        if not self.world.executions:
            return
        version = self.rng.choice(sorted(self.world.executions))
        if self.rng.random() < 0.5:
            cluster.crash_versions.add(version)
            self.trace.append(f"cluster: the pods of {version} crash-loop")
        else:
            cluster.fail_fill[version] = "sha256 differs from the manifest"
            self.trace.append(f"cluster: {version} cannot be filled")

    def churn(self) -> None:
        """The cluster moves under a warm change: a node is replaced (a new one, its instance store empty), goes
        NotReady or comes back, is cordoned or uncordoned, gets or loses HyperPod's health-check taint."""
        cluster = self.world.kube.cluster
        name = self.rng.choice(sorted(cluster.nodes))
        node = cluster.nodes[name]
        change = self.rng.choice(["replace", "ready", "cordon", "taint"])
        if change == "replace":
            cluster.replace_node(name)
        elif change == "ready":
            node.ready = not node.ready
        elif change == "cordon":
            node.unschedulable = not node.unschedulable
        else:
            node.taints = [] if node.taints else [dict(HEALTH_TAINT)]
        self.trace.append(f"cluster: {change} {name}")

    def step_workflow(self) -> None:
        """Step Functions runs one step of a warm rollout's execution: retried when it raises, then its
        Catch gives up (the abandon step); an execution whose abandon step fails too is lost (the
        reconciliation settles its rollout)."""
        w = self.world
        if not w.executions:
            return
        version = self.rng.choice(sorted(w.executions))
        abandon = w.executions[version] >= 3
        try:
            number, phase = w.step(version, abandon=abandon)
        except (Exception, mw.Crash) as exc:  # noqa: BLE001 - every way a step can end
            self.trace.append(f"step {version}{' abandon' if abandon else ''} -> raised {exc!r}")
            w.executions[version] += 1
            if abandon:
                del w.executions[version]
            return
        self.trace.append(f"step {version}{' abandon' if abandon else ''} -> {phase}")
        w.executions[version] = 0
        if phase in ("done", "failed") or abandon:
            del w.executions[version]
        self.check_failures_recorded([m for m in w.metrics if m[3] == number],
                                     [letter for n, letter in w.sqs.sent if n == number])

    def deploy(self) -> None:
        if self.world.sm.status == "InService":
            self.sequencer += 1
            self.world.sm.deploy(self.sequencer)
            self.trace.append("deploy (same version, new config)")

    def settle(self) -> None:
        if self.world.sm.status == "Updating":
            succeed = self.rng.random() < 0.8
            self.world.sm.settle(succeed)
            self.trace.append(f"settle {'ok' if succeed else 'rollback'}")

    def flush_state_changes(self) -> None:
        """SageMaker's events reach EventBridge: delivered (maybe twice) or lost to the rule's DLQ."""
        for event in self.world.sm.emitted:
            fate = self.rng.random()
            if fate < 0.1:
                self.world.sqs.messages[f"lost-{event['id']}"] = {
                    "MessageId": f"lost-{event['id']}", "ReceiptHandle": f"lost-{event['id']}",
                    "Body": mw.json.dumps(event), "visible": True}
            else:
                self.inflight += [(event, 0)] * (2 if fate > 0.9 else 1)
        self.world.sm.emitted.clear()

    def lose(self) -> None:
        picked = self._pick()
        if picked and picked[0]["source"] == "aws.s3":
            event = picked[0]
            self.world.sqs.messages[f"lost-{event['id']}"] = {
                "MessageId": f"lost-{event['id']}-{self.sequencer}", "ReceiptHandle": f"lost-{event['id']}",
                "Body": mw.json.dumps(event), "visible": True}
            self.delivered_live.add(event["detail"]["object"]["key"].split("/")[-2])
            self.trace.append(f"lose {event['id']}")
        elif picked:
            self.inflight.append(picked)

    def duplicate(self) -> None:
        if self.inflight:
            self.inflight.append(self.rng.choice(self.inflight))

    def move_back(self) -> None:
        """Either a deploy failed after the guard passed (CloudFormation restores the version first deployed
        on every target, and the guard, called in the rollback, reports each target it may move back), or
        someone updates the endpoint by hand to its first config (no guard runs: only its state change)."""
        w = self.world
        record = w.store.item(StateTable.key(mw.ENDPOINT.id))
        if w.sm.status != "InService" or record.get("pending"):
            return  # the guard stops a deploy while a refresh rolls out; an Updating endpoint rejects it
        if self.rng.random() < 0.5:
            self.stack_rollback()
        else:
            w.sm.restore("cfn-config")
            self.trace.append("endpoint moved back by hand")
        for obj, version in w.served_objects().items():  # not the function's move: I2 starts again from here
            self.history[obj].append(version)

    def stack_rollback(self) -> None:
        w, initial = self.world, self.world.initial
        props = {"Targets": [{"Id": t, "Version": initial, "Field": "f", "Value": "{version}"}
                             for t in (mw.HYPERPOD.id, mw.ENDPOINT.id)]}
        for letter in deploy_guard.moved_back(_Table(w.store), props, "cfn-rollback"):
            w.metrics.append(("RefreshFailed", "moved-back", letter["targets"][0], 0))
            w.sqs.messages[f"guard-{len(w.sqs.messages)}"] = {
                "MessageId": f"guard-{len(w.sqs.messages)}", "ReceiptHandle": f"guard-{len(w.sqs.messages)}",
                "Body": mw.json.dumps(letter), "visible": True}
        w.kube.restore(initial)
        w.sm.restore("cfn-config")
        self.trace.append("stack rollback")

    def replay(self) -> bool:
        w = self.world
        if not w.dry_run:
            self.delivered_live |= {self._letter_event(m["Body"]).get("detail", {}).get("object", {})
                                    .get("key", "//").split("/")[-2] for m in w.sqs.messages.values()}
        self.trace.append("replay")
        results = w.replay()
        for result in results:
            self.trace.append(f"  replayed {result['message_id']}: {result['status']} {result.get('result')}")
        return all(r["status"] == "failed-again" for r in results)

    # -- invariants ------------------------------------------------------------------------------

    def _letter_event(self, body: str) -> dict[str, Any]:
        """The event in a dead-letter queue message (``hyperwarm refresh replay``'s reading): a message's
        body never changes, and the checks after every step read each one again; read-only."""
        if body not in self._letter_events:
            self._letter_events[body] = refresh_cli.original_event(body)
        return self._letter_events[body]

    def check_failures_recorded(self, metrics: list[tuple], letters: list[dict[str, Any]]) -> None:
        """I4 for an invocation that returned: failures counted <-> dead-lettered with the event."""
        failed = {t for name, _, t, _ in metrics if name == "RefreshFailed"}
        lettered = {t for letter in letters for t in letter["targets"]}
        assert failed <= lettered, f"failures {failed - lettered} not dead-lettered"
        assert lettered <= failed, f"letters for {lettered - failed} without a RefreshFailed metric"
        for letter in letters:
            assert refresh_cli.original_event(mw.json.dumps(letter))["source"] in ("aws.s3", "aws.sagemaker")

    def _ahead_of(self, version: str) -> set[str]:
        """Targets for which ``version`` is newer than (or not comparable with) what serves, what the
        record says serves and the version rolling out: an upload the function must act on there."""
        w, found = self.world, set()
        for target, served in w.served().items():
            item = w.store.item(StateTable.key(target))
            known = [served, item.get("current_version"), (item.get("pending") or {}).get("version")]
            try:
                if all(versions.compare(version, v) > 0 for v in known if v):
                    found.add(target)
            except versions.UnorderableVersion:
                found.add(target)
        return found

    def check_bad_upload_lettered(self, event: dict[str, Any], version: str, ahead: set[str]) -> None:
        """I4: a live-answered incomplete, corrupt or unorderable upload that is ahead of what a target
        serves (before and after the invocation) is in a dead letter, or a failure record, with its event."""
        if not ahead:
            return
        w = self.world
        if any(letter["event"].get("id") == event["id"] for _, letter in w.sqs.sent):
            return
        if any(self._letter_event(m["Body"]).get("id") == event["id"] for m in w.sqs.messages.values()):
            return
        raise AssertionError(f"I4: {w.files.get(version, 'unorderable')} upload {version} ({event['id']}) ahead of "
                             f"{sorted(ahead)} answered without a dead letter")

    def check(self) -> None:
        w = self.world
        assert not w.sm.violations, w.sm.violations  # I5
        if isinstance(w.kube, mw.ClusterWorldKube):  # I7: warm changes start no cold pod, delete no copy in use
            cluster = w.kube.cluster
            assert not cluster.violations, f"I7: {cluster.violations}"
            assert not cluster.cold_starts, f"I7: cold pods {[(p.node, p.version) for p in cluster.cold_starts]}"
        assert not w.violations, w.violations  # I0: one change of a target at a time
        for obj, now in w.served_objects().items():  # every HyperPod object, every endpoint variant
            previous = self.history[obj][-1]
            order = self._order(now, previous)
            assert order >= 0 or self._reverted(previous, now), f"I2: {obj} moved back {previous} -> {now}"  # I2
            assert now == self.history[obj][0] or w.files.get(now) == "complete", f"I3: {obj} serves {now}"
            self.history[obj].append(now)
        for message in w.sqs.messages.values():  # I4: every letter can be replayed
            assert self._letter_event(message["Body"])["source"] in ("aws.s3", "aws.sagemaker")

    def _order(self, now: str, previous: str) -> int:
        """versions.compare(now, previous), -1 when the order cannot place ``now`` after ``previous``: each pair
        once per history (the checks after every step compare what serves with what served, mostly the same)."""
        if (now, previous) not in self._orders:
            try:
                self._orders[now, previous] = versions.compare(now, previous)
            except versions.UnorderableVersion:
                self._orders[now, previous] = -1
        return self._orders[now, previous]

    def _reverted(self, failed: str, back_to: str) -> bool:
        """A warm switch to ``failed`` that failed points the deployment back at what it served before: the
        one move back a refresh makes, and only to the version its record names as the previous one."""
        item = self.world.store.item(StateTable.key(mw.HYPERPOD.id))
        return any(r.get("kind") == "hyperpod" and r.get("version") == failed and r.get("reason")
                   and r.get("previous") == back_to
                   for r in (item.get("pending") or {}, item.get("last_failed") or {}))

    # -- a whole history ---------------------------------------------------------------------------

    def run(self, steps: int) -> None:
        actions = [self.upload] * 3 + [self._deliver_one] * 5 + [self.settle] * 2 + [
            self.lose, self.duplicate, self.tick, self.replay, self.toggle, self.deploy, self.move_back]
        if self.world.warm:
            actions += [self.step_workflow] * 4 + [self.operator_fails, self.churn]
        for _ in range(steps):
            self.rng.choice(actions)()
            self.flush_state_changes()
            self.check()
        self.quiesce()

    def tick(self) -> None:
        self.world.clock.now += self.rng.choice([30, 600, 1000, 6000, 20000])

    def toggle(self) -> None:
        self.world.dry_run = not self.world.dry_run
        self.trace.append(f"dry run {self.world.dry_run}")

    def quiesce(self) -> None:
        w = self.world
        w.faults.on, w.dry_run = False, False
        if isinstance(w.kube, mw.ClusterWorldKube):  # a bad version is fixed and uploaded again: its replay works
            cluster = w.kube.cluster
            cluster.crash_versions.clear()
            cluster.fail_fill.clear()
            for node in cluster.nodes.values():  # and the nodes are healthy again
                node.ready, node.unschedulable, node.taints = True, False, []
        self.trace.append("quiesce")
        self._settle_all()
        if self.rng.random() < 0.3:  # once all is done, a move back is only undone by its letters
            self.move_back()
            self.flush_state_changes()
            self._settle_all()
        self.check_newest_serves()
        assert w.sm.status == "InService"

    def _finish_executions(self) -> None:
        """The workflow's executions run to their end, a Wait between steps (five polls' worth: the staging fills
        a node in 300 s); the schedule settles lost ones."""
        w = self.world
        for _ in range(200):
            if not w.executions:
                break
            w.clock.now += 300
            self.step_workflow()
            self.flush_state_changes()
            self.check()
        if w.warm:
            w.clock.now += 6000
            try:
                w.invoke(mw.scheduled_event(len(self.trace)))
            except (Exception, mw.Crash) as exc:  # noqa: BLE001 - the next schedule retries
                self.trace.append(f"reconcile -> raised {exc!r}")
            self.check()

    def _settle_all(self) -> None:
        w = self.world
        for _ in range(40):
            self._finish_executions()
            w.clock.now += 20_000  # locks of crashed invocations and lost rollouts expire
            while self.inflight:
                self._deliver_one()
                self.flush_state_changes()
                self.check()
            if w.sm.status == "Updating":
                w.sm.settle(True)
                self.flush_state_changes()
                self.check()
                continue
            letters = set(w.sqs.messages)
            settled = self.replay()
            self.flush_state_changes()
            self.check()
            # only letters that fail however often they are replayed, and no workflow execution still running
            if settled and not self.inflight and not w.executions and set(w.sqs.messages) == letters:
                break

    def check_newest_serves(self) -> None:
        w = self.world
        expected_versions = [v for v in self.delivered_live if w.files.get(v) == "complete"]
        for target, now in w.served_objects().items():
            start = self.history[target][0]
            newest = start
            for version in expected_versions:
                try:
                    if versions.compare(version, newest) > 0:
                        newest = version
                except versions.UnorderableVersion:
                    continue
            # a version a live attempt started before the event went dry may serve too: at least the newest
            assert versions.compare(now, newest) >= 0, f"I1: {target} serves {now}, newest complete is {newest}"
        assert w.sm.status == "InService"
        serving = w.sm.configs[w.sm.config]
        record = w.store.item(StateTable.key(mw.ENDPOINT.id))
        known = {record.get("owned_config"), *(record.get("owned_models") or [])}
        in_use = {w.sm.config, *(v["ModelName"] for v in serving["ProductionVariants"])} | known
        leaked = {n for n in [*w.sm.configs, *w.sm.models] if n not in in_use and not n.startswith("cfn-")}
        assert not leaked, f"I6: refresh-created {sorted(leaked)} serve nothing and no record names them"


class _Table:
    """The state items as the deploy guard reads them (boto3's Table.get_item)."""

    def __init__(self, store: mw.MemStore) -> None:
        self.store = store

    def get_item(self, Key: dict[str, str], ConsistentRead: bool) -> dict[str, Any]:  # noqa: N803
        return {"Item": self.store.item(Key["pk"]) or None}


def _run(seed: int) -> None:
    history = History(seed)
    try:
        history.run(history.rng.randint(6, 16))
    except AssertionError as exc:
        w = history.world
        raise AssertionError(f"seed {seed}: {exc}\n" + "\n".join(history.trace[:80]) + f"\nstate: {dict(w.store.items)}"
                             f"\nqueue: {[m['Body'][:300] for m in w.sqs.messages.values()]}") from None


def _seed_chunks() -> list[Any]:
    """Every seed below SEQUENCES, once: the first FIRST_HISTORIES in the fast loop, the rest (the long
    histories, ``slow``) in chunks of their own so that ``make test``'s workers share them."""
    first = min(FIRST_HISTORIES, SEQUENCES)
    chunks = [pytest.param(range(first), id=f"seeds-0-{first}")]
    step = max(1, -(-(SEQUENCES - first) // LONG_CHUNKS))
    for start in range(first, SEQUENCES, step):
        stop = min(start + step, SEQUENCES)
        chunks.append(pytest.param(range(start, stop), id=f"seeds-{start}-{stop}",
                                   marks=[pytest.mark.slow, pytest.mark.xdist_group(f"model-histories-{start}")]))
    return chunks


@pytest.mark.parametrize("seeds", _seed_chunks())
def test_invariants_hold_over_random_event_histories(seeds: range) -> None:
    for seed in seeds:
        _run(seed)


def test_the_model_catches_a_flow_that_moves_a_target_back(monkeypatch):
    """The harness is not blind: with every version taken as newer (the old guessing order), it finds I2."""
    from hyperwarm.functions.cache_refresh import decide
    monkeypatch.setattr(decide, "compare", lambda a, b: 0 if a == b else 1)
    with pytest.raises(AssertionError, match=r"seed \d+: I2: .* moved back"):
        for seed in range(500):
            _run(seed)


def _first_failure(seeds: int) -> str:
    for seed in range(seeds):
        try:
            _run(seed)
        except AssertionError as exc:
            return str(exc).splitlines()[0]
    return "no invariant violation found"


def test_the_model_catches_a_flow_without_its_per_target_lock(monkeypatch):
    """The lock is the Busy answer of ``acquire`` and the owner check of every later write: without
    both, an invocation run in the middle of another changes the same target (I0)."""
    from hyperwarm.functions.cache_refresh import state

    def take_always(self, target_id, owner, seconds, *, over_rollout=False):
        now = self.clock()
        return self._change(target_id, lambda item: {**item, "lock_owner": owner, "lock_expires": int(now) + seconds})
    monkeypatch.setattr(state.StateTable, "acquire", take_always)
    monkeypatch.setattr(state.StateTable, "_owned", lambda self, target_id, owner, change: self._change(target_id, change))
    assert re.match(r"seed \d+: \['I0: invocations \d+ and \d+ change .* at once'\]", _first_failure(3000))


def test_the_model_catches_a_move_back_nobody_reports(monkeypatch):
    """Without the state-change handler's moved-back letter, an endpoint a stack rollback or a manual
    update moved back stays there (I1)."""
    from hyperwarm.functions.cache_refresh import flow
    from hyperwarm.functions.cache_refresh.errors import Skip

    def ignore(ports, target, item, change):
        raise Skip("no-rollout", "moved-back detection removed")
    monkeypatch.setattr(flow, "_moved_back", ignore)
    assert re.match(r"seed \d+: I1: endpoint:llama-prod#\w+ serves", _first_failure(1000))


def test_the_model_catches_decisions_taken_from_the_record_alone(monkeypatch):
    """With the first look deciding from the state record only (a record of v3 skips a replayed v3 as a
    duplicate), a target moved back is never moved forward again (I1)."""
    from hyperwarm.functions.cache_refresh import decide, flow

    def record_only(ports, target, created, replay):
        item = ports.state.get(target.id)
        return decide.manifest(created.version, item, decide.Live(None), sequencer=created.sequencer,
                               replay=replay), item
    monkeypatch.setattr(flow, "_first_look", record_only)
    assert re.match(r"seed \d+: I1: ", _first_failure(1000))


def test_the_model_catches_a_copy_dropped_at_the_switch_while_pods_read_it(monkeypatch):
    """With the previous version dropped from the filler's list as soon as the deployment is repointed, instead of
    once no pod reads it, the refresh drops a copy pods still read (I7)."""
    from hyperwarm.functions.cache_refresh import rollout
    from hyperwarm.functions.cache_refresh.targets import warm

    point = warm.point

    def point_and_drop(kube, target, version):
        generation = point(kube, target, version)
        drop = [v for v in warm.kept(kube, target) if v.version == version]
        if drop:
            name = warm.layout.filler_name(target.node_cache.model)
            obj = kube.get("DaemonSet", target.namespace, name)
            kube.merge_patch("DaemonSet", target.namespace, name, {
                "metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]}, **warm.layout.filler_patch(drop)})
        return generation
    monkeypatch.setattr(rollout.warm, "point", point_and_drop)
    assert re.match(r"seed \d+: I7: .*dropped .* while pods", _first_failure(200))
