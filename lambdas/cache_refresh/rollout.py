"""Warm rollout of a HyperPod target: stage, wait, switch, wait, retire, one idempotent step at a time.

A target with stand-alone weight caches (and a state machine to drive it) does not repoint its
deployment at once. The refresh function records the rollout in the target's ``pending`` record (the
lock passes to the rollout, as for an endpoint's blue/green update; a newer version queues behind it)
and starts the Step Functions execution of the target and version. Each workflow step (and the
scheduled reconciliation, which so settles an execution that was lost) calls :func:`advance` under the
lock, which reads the cluster and moves the record on:

- ``staging``: the version's caches exist (created if not); ready on every node -> switch the
  deployment (``switching``); a cache ``Failed`` or the staging timeout -> delete the staged caches,
  dead-letter, the old version serves (``staging-failed``, ``staging-timeout``).
- ``switching``: the deployment's rollout complete -> delete the previous version's caches (no pod reads
  them any more), commit the version; failed or past the switch timeout -> point the deployment back at
  the previous version, dead-letter (``switch-failed``, ``switch-timeout``) and go on ``reverting``.
- ``reverting``: the rollout back complete (or its own timeout) -> delete the staged caches (the
  timeout keeps them as ``leftover_caches``: a pod may still read them; the next rollout that completes
  retires them) and record the failure.

The serving version's caches are never deleted: retirement runs only after the deployment's rollout
reports every replica on the new version, and never touches a cache the record says serves.
"""

from __future__ import annotations

import json
from typing import Any

from . import contract, letters
from .config import HyperPodTarget, Target
from .errors import PermanentError
from .events import parse_manifest_created
from .ports import Ports
from .targets import warm

PHASE_ANSWER = {"staging": "staging", "switching": "switching", "reverting": "switching"}
"""The workflow's view of a record's phase: reverting is a deployment rollout too (waits, then ends failed)."""


def is_warm(ports: Ports, target: Target) -> bool:
    """Does this target roll out warm? Stand-alone caches, an InferenceEndpointConfig, a workflow to drive it."""
    return (isinstance(target, HyperPodTarget) and bool(target.caches) and ports.start_workflow is not None
            and target.resource == "InferenceEndpointConfig")


def lock_seconds(target: HyperPodTarget) -> int:
    """How long the rollout holds the target's lock unseen: every phase's timeout, and a few polls more."""
    return target.staging_timeout_seconds + 2 * target.switch_timeout_seconds + 5 * contract.ROLLOUT_POLL_SECONDS


def start(ports: Ports, target: HyperPodTarget, created: Any, event: dict[str, Any], owner: str,
          item: dict[str, Any]) -> None:
    """Record the rollout (the lock passes to it), then start its execution. The caches are created by
    its first step, so a crash after the record loses nothing: the reconciliation steps it."""
    kube = ports.kube(target)
    previous = warm.source_of(kube.get(target.resource, target.namespace, target.name))
    pending = {"kind": "hyperpod", "config": contract.rollout_execution_name(target.id, created.version),
               "created_models": [], "version": created.version, "sequencer": created.sequencer,
               "location": created.location, "bucket": created.bucket, "event": json.dumps(event),
               "started": int(ports.state.clock()), "phase": "staging",
               "serving": _serving(target, item),
               # Every other cache a rollout of this target left (retired when this one completes).
               "leftovers": sorted({*(item.get("leftover_caches") or []), *(item.get("current_caches") or [])}
                                   - set(_serving(target, item))),
               "staged": warm.staged_names(target, created.version), "previous": previous}
    ports.state.start_rollout(target.id, owner, pending, lock_seconds(target))
    assert ports.start_workflow is not None  # is_warm said so
    ports.start_workflow(target, created.version)
    ports.log("warm rollout started", target=target.id, version=created.version, staged=pending["staged"])


def _serving(target: HyperPodTarget, item: dict[str, Any]) -> list[str]:
    """The caches the pods use now, in the order of ``target.caches``: the record's (a previous warm
    rollout's), unless the target's caches changed since (then the deployed ones)."""
    current = list(item.get("current_caches") or [])
    return current if len(current) == len(target.caches) else list(target.caches)


def advance(ports: Ports, target: HyperPodTarget, item: dict[str, Any], owner: str, *,
            abandon: bool = False) -> dict[str, Any]:
    """One step of the rollout in ``item["pending"]``, under ``owner``'s lock. Returns the item; one whose
    rollout ended carries ``settled`` (as :func:`.flow._settle` does) and no ``pending``, the lock kept."""
    pending = item["pending"]
    step = {"staging": _staging, "switching": _switching, "reverting": _reverting}[pending["phase"]]
    ports.metric("RolloutInProgress", target=target.id)
    return step(ports, target, item, owner, abandon)


def _now(ports: Ports) -> float:
    return float(ports.state.clock())


def _staging(ports: Ports, target: HyperPodTarget, item: dict[str, Any], owner: str, abandon: bool) -> dict[str, Any]:
    pending, kube = item["pending"], ports.kube(target)
    if abandon:
        return _fail_staging(ports, target, item, owner, "staging-failed", "the workflow gave up on a failing step")
    created = parse_manifest_created(json.loads(pending["event"]))
    try:
        warm.stage(kube, target, created, list(pending["serving"]))
        deployment = kube.get(target.resource, target.namespace, target.name)
        progress = warm.staging(kube, target, list(pending["staged"]), (deployment.get("spec") or {}).get("instanceType"))
    except PermanentError as exc:
        return _fail_staging(ports, target, item, owner, "staging-failed", exc.message)
    ports.metric("StagingReadyNodes", target=target.id, value=progress.ready_nodes)
    ports.metric("StagingTargetNodes", target=target.id, value=progress.target_nodes)
    elapsed = _now(ports) - float(pending["started"])
    if progress.failed:
        return _fail_staging(ports, target, item, owner, "staging-failed", progress.failed)
    if not progress.ready:
        if elapsed > target.staging_timeout_seconds:
            return _fail_staging(ports, target, item, owner, "staging-timeout",
                                 f"ready on {progress.ready_nodes} of {progress.target_nodes} nodes after "
                                 f"{int(elapsed)} s (timeout {target.staging_timeout_seconds} s)")
        return item
    ports.metric("TimeToWarm", target=target.id, value=elapsed, unit="Seconds")
    generation = warm.switch(kube, target, created)
    ports.log("staged on every node: deployment switched", target=target.id, version=pending["version"],
              nodes=progress.target_nodes, generation=generation)
    return ports.state.update_rollout(target.id, owner, phase="switching", switched=int(_now(ports)),
                                      generation=generation)


def _switching(ports: Ports, target: HyperPodTarget, item: dict[str, Any], owner: str, abandon: bool) -> dict[str, Any]:
    pending, kube = item["pending"], ports.kube(target)
    state, words = warm.rollout(kube, target, int(pending["generation"]))
    elapsed = _now(ports) - float(pending["switched"])
    if state == "complete":
        # The deployed cache objects too: a deploy re-creates them under their own names after a rollout.
        retire = dict.fromkeys([*pending["serving"], *pending.get("leftovers", []), *target.caches])
        retired = warm.retire(kube, target.namespace, list(retire), keep=list(pending["staged"]))
        item = ports.state.finish_rollout(target.id, owner, succeeded=True, keep_lock=True)
        ports.metric("TimeToSwitch", target=target.id, value=elapsed, unit="Seconds")
        ports.metric("RefreshSucceeded", target=target.id)
        ports.metric("TimeToRefresh", value=max(0.0, _now(ports) - float(pending["started"])), unit="Seconds")
        ports.log("warm rollout done", target=target.id, version=pending["version"], retired=retired)
        return {**item, "settled": ("refreshed", "", retired)}
    if state == "running" and elapsed <= target.switch_timeout_seconds and not abandon:
        return item
    reason = "switch-failed" if state == "failed" or abandon else "switch-timeout"
    message = (f"{target.id}: rollout of {pending['version']} " + (
        f"failed: {words}" if state == "failed" else "abandoned by its workflow" if abandon else
        f"not finished after {int(elapsed)} s (timeout {target.switch_timeout_seconds} s)")
        + f"; pointed back at {pending['previous'].get('version') or pending['previous'].get('location')}")
    generation = warm.point_back(kube, target, pending["previous"])
    _letter(ports, target, pending, reason, message)
    ports.log("warm rollout failed; pointed back at the previous version", target=target.id, reason=reason)
    return ports.state.update_rollout(target.id, owner, phase="reverting", reason=reason, generation=generation,
                                      switched=int(_now(ports)))


def _reverting(ports: Ports, target: HyperPodTarget, item: dict[str, Any], owner: str, abandon: bool) -> dict[str, Any]:
    pending, kube = item["pending"], ports.kube(target)
    state, _ = warm.rollout(kube, target, int(pending["generation"]))
    timed_out = _now(ports) - float(pending["switched"]) > target.switch_timeout_seconds
    if state == "running" and not timed_out:
        return item
    # Back on the old version: nothing reads the staged caches. Otherwise a pod may: keep them for the next rollout.
    deleted = warm.retire(kube, target.namespace, list(pending["staged"]), keep=list(pending["serving"])) \
        if state == "complete" else []
    item = ports.state.finish_rollout(target.id, owner, succeeded=False, reason=pending["reason"], keep_lock=True,
                                      leftovers=None if state == "complete" else list(pending["staged"]))
    return {**item, "settled": ("rollout-failed", pending["reason"], deleted)}


def _fail_staging(ports: Ports, target: HyperPodTarget, item: dict[str, Any], owner: str, reason: str,
                  message: str) -> dict[str, Any]:
    """Nothing switched: no pod reads the staged caches; delete them, letter, the old version serves."""
    pending = item["pending"]
    deleted = warm.retire(ports.kube(target), target.namespace, list(pending["staged"]), keep=list(pending["serving"]))
    _letter(ports, target, pending, reason, f"{target.id}: staging of {pending['version']}: {message}")
    item = ports.state.finish_rollout(target.id, owner, succeeded=False, reason=reason, keep_lock=True)
    return {**item, "settled": ("rollout-failed", reason, deleted)}


def _letter(ports: Ports, target: HyperPodTarget, pending: dict[str, Any], reason: str, message: str) -> None:
    """The permanent failure, once: its letter id is the upload's and the reason's (a rerun's letter is the same)."""
    ports.metric("RefreshFailed", reason=reason, target=target.id)
    ports.dead_letter(letters.envelope(json.loads(pending["event"]), reason, message, [target.id],
                                       request_id=ports.request_id, failed_at=ports.state.clock()))

