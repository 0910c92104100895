"""Warm rollout of a HyperPod target: stage, wait, switch, wait, retire, one idempotent step at a time.

A target with stand-alone weight caches (and a state machine to drive it) does not repoint its
deployment at once. The refresh function records the rollout in the target's ``pending`` record (the
lock passes to the rollout, as for an endpoint's blue/green update; a newer version queues behind it)
and starts the Step Functions execution of the target and version. Each workflow step (and the
scheduled reconciliation, which so settles an execution that was lost) calls :func:`advance` under the
lock, which reads the cluster and moves the record on:

- ``staging``: the version's caches exist (created if not); ready on every node -> ``switching`` is
  recorded, then the deployment is patched; a cache ``Failed`` or the staging timeout -> ``failing``.
- ``switching``: the deployment points at the staged version and its rollout is complete -> delete the
  previous version's caches (no pod reads them any more), commit the version; its rollout failed, or
  past the switch timeout, or the deployment found pointing elsewhere (a crashed revert, a stack
  rollback) -> ``failing``.
- ``failing``: the failure is recorded before anything acts on it (so a rerun resumes it and never
  stages or switches again): point the deployment back at the previous version where it was switched,
  dead-letter the upload's event (``staging-failed``, ``staging-timeout``, ``switch-failed``,
  ``switch-timeout``; one letter id per upload and reason), then ``reverting``, or the end when nothing
  was switched (the staged caches, which no pod read, deleted).
- ``reverting``: the rollout back complete (or its own timeout) -> delete the staged caches (the
  timeout keeps them as ``leftover_caches``: a pod may still read them; the next rollout that completes
  retires them) and record the failure.

Every intent is written before the act (``switching`` before the patch, ``failing`` before a revert or a
letter), so a step that dies between two calls is resumed by the next from where it stood. The serving
version's caches are never deleted: retirement runs only once the deployment points at the new version and
its rollout reports every replica on it, and never touches a cache the record says serves. A cluster that
answers permanently (the deployment deleted, access revoked) ends the rollout as failed once its phase's
timeout has passed or the workflow gives up, without touching the cluster (the staged caches are kept as
leftovers).
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

PHASE_ANSWER = {"staging": "staging", "switching": "switching", "failing": "switching", "reverting": "switching"}
"""The workflow's view of a record's phase: failing and reverting wait on a deployment rollout too."""


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
    started = int(ports.state.clock())
    pending = {"kind": "hyperpod", "config": contract.rollout_execution_name(target.id, created.version, str(started)),
               "created_models": [], "version": created.version, "sequencer": created.sequencer,
               "location": created.location, "bucket": created.bucket, "event": json.dumps(event),
               "started": started, "phase": "staging",
               "serving": _serving(target, item),
               # Every other cache a rollout of this target left (retired when this one completes).
               "leftovers": sorted({*(item.get("leftover_caches") or []), *(item.get("current_caches") or [])}
                                   - set(_serving(target, item))),
               "staged": warm.staged_names(target, created.version), "previous": previous}
    ports.state.start_rollout(target.id, owner, pending, lock_seconds(target))
    ensure_workflow(ports, target, pending)
    ports.log("warm rollout started", target=target.id, version=created.version, staged=pending["staged"])


def ensure_workflow(ports: Ports, target: HyperPodTarget, pending: dict[str, Any]) -> None:
    """Start the rollout's execution (its name is the record's: a second start of it is a no-op). Called when
    the rollout is recorded and again by a retry of its event and by the reconciliation, so a start whose
    answer was lost, or that failed after the record was written, is made up for."""
    assert ports.start_workflow is not None  # is_warm said so
    ports.start_workflow(target, pending["version"], pending["config"])


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
    step = {"staging": _staging, "switching": _switching, "failing": _failing, "reverting": _reverting}[pending["phase"]]
    ports.metric("RolloutInProgress", target=target.id)
    try:
        return step(ports, target, item, owner, abandon)
    except PermanentError as exc:  # the cluster refuses (404, 403, 400): retried until the phase's time is up
        if not abandon and _now(ports) <= _deadline(target, pending):
            raise
        return _give_up(ports, target, item, owner, exc)


def _now(ports: Ports) -> float:
    return float(ports.state.clock())


def _deadline(target: HyperPodTarget, pending: dict[str, Any]) -> float:
    if pending["phase"] == "staging":
        return float(pending["started"]) + target.staging_timeout_seconds
    return float(pending.get("switched", pending["started"])) + target.switch_timeout_seconds


def _staging(ports: Ports, target: HyperPodTarget, item: dict[str, Any], owner: str, abandon: bool) -> dict[str, Any]:
    pending, kube = item["pending"], ports.kube(target)
    if abandon:
        return _fail(ports, target, owner, "staging-failed", "the workflow gave up on a failing step", revert=False)
    created = parse_manifest_created(json.loads(pending["event"]))
    try:
        warm.stage(kube, target, created, list(pending["serving"]))
        deployment = kube.get(target.resource, target.namespace, target.name)
        progress = warm.staging(kube, target, list(pending["staged"]), (deployment.get("spec") or {}).get("instanceType"))
    except PermanentError as exc:
        return _fail(ports, target, owner, "staging-failed", exc.message, revert=False)
    ports.metric("StagingReadyNodes", target=target.id, value=progress.ready_nodes)
    ports.metric("StagingTargetNodes", target=target.id, value=progress.target_nodes)
    elapsed = _now(ports) - float(pending["started"])
    if progress.failed:
        return _fail(ports, target, owner, "staging-failed", progress.failed, revert=False)
    if not progress.ready:
        if elapsed > target.staging_timeout_seconds:
            return _fail(ports, target, owner, "staging-timeout",
                         f"ready on {progress.ready_nodes} of {progress.target_nodes} nodes after {int(elapsed)} s "
                         f"(timeout {target.staging_timeout_seconds} s)", revert=False)
        return item
    # The intent first: a step that dies after the patch is resumed as a switch, never failed as a staging.
    item = ports.state.update_rollout(target.id, owner, phase="switching", switched=int(_now(ports)), generation=None)
    ports.metric("TimeToWarm", target=target.id, value=elapsed, unit="Seconds")
    ports.log("staged on every node: switching", target=target.id, version=pending["version"],
              nodes=progress.target_nodes)
    return _switching(ports, target, item, owner, abandon)


def _points_at(obj: dict[str, Any], pending: dict[str, Any]) -> bool:
    source = warm.source_of(obj)
    return bool(source["location"] == pending["location"] and source["bucket"] == pending["bucket"])


def _switching(ports: Ports, target: HyperPodTarget, item: dict[str, Any], owner: str, abandon: bool) -> dict[str, Any]:
    pending, kube = item["pending"], ports.kube(target)
    if pending.get("generation") is None:  # recorded, maybe patched: patch (a no-op if done) and note what to await
        created = parse_manifest_created(json.loads(pending["event"]))
        generation = warm.switch(kube, target, created)  # the switch timeout counts from the patch that landed
        return ports.state.update_rollout(target.id, owner, generation=generation, switched=int(_now(ports)))
    elapsed = _now(ports) - float(pending["switched"])
    deployment = kube.get(target.resource, target.namespace, target.name)
    if not _points_at(deployment, pending):  # a revert that died half-way, a stack rollback, someone's deploy
        back = warm.source_of(deployment) == pending["previous"]
        return _fail(ports, target, owner, "switch-failed",
                     f"the deployment points at {warm.source_of(deployment)['location'] or 'another source'}, not "
                     f"{pending['location']}", revert=back)
    state, words = warm.rollout(kube, target, int(pending["generation"]))
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
    return _fail(ports, target, owner, reason, f"failed: {words}" if state == "failed" else
                 "abandoned by its workflow" if abandon else
                 f"not finished after {int(elapsed)} s (timeout {target.switch_timeout_seconds} s)", revert=True)


def _fail(ports: Ports, target: HyperPodTarget, owner: str, reason: str, message: str, *,
          revert: bool) -> dict[str, Any]:
    """Record the failure (``failing``), then act on it: what a rerun resumes."""
    item = ports.state.update_rollout(target.id, owner, phase="failing", reason=reason, message=message, revert=revert,
                                      failed_at=int(_now(ports)))
    return _failing(ports, target, item, owner, False)


def _failing(ports: Ports, target: HyperPodTarget, item: dict[str, Any], owner: str, abandon: bool) -> dict[str, Any]:
    pending, kube = item["pending"], ports.kube(target)
    what = "staging" if not pending["revert"] else "rollout"
    message = f"{target.id}: {what} of {pending['version']}: {pending['message']}"
    if not pending["revert"]:
        # Never switched: no pod read the staged caches. Switched, then moved elsewhere by someone: a pod may still.
        switched = "switched" in pending
        deleted = [] if switched else warm.retire(kube, target.namespace, list(pending["staged"]),
                                                  keep=list(pending["serving"]))
        _letter(ports, target, pending, pending["reason"], message)
        item = ports.state.finish_rollout(target.id, owner, succeeded=False, reason=pending["reason"], keep_lock=True,
                                          leftovers=list(pending["staged"]) if switched else None)
        return {**item, "settled": ("rollout-failed", pending["reason"], deleted)}
    generation = warm.point_back(kube, target, pending["previous"])
    _letter(ports, target, pending, pending["reason"],
            f"{message}; pointed back at {pending['previous'].get('version') or pending['previous'].get('location')}")
    ports.log("warm rollout failed; pointed back at the previous version", target=target.id, reason=pending["reason"])
    return ports.state.update_rollout(target.id, owner, phase="reverting", generation=generation,
                                      switched=int(_now(ports)))


def _reverting(ports: Ports, target: HyperPodTarget, item: dict[str, Any], owner: str, abandon: bool) -> dict[str, Any]:
    pending, kube = item["pending"], ports.kube(target)
    back = warm.source_of(kube.get(target.resource, target.namespace, target.name)) == pending["previous"]
    state, _ = warm.rollout(kube, target, int(pending["generation"]))
    timed_out = _now(ports) - float(pending["switched"]) > target.switch_timeout_seconds
    if state == "running" and back and not timed_out:
        return item
    # Back on the old version: nothing reads the staged caches. Otherwise a pod may: keep them for the next rollout.
    done = state == "complete" and back
    deleted = warm.retire(kube, target.namespace, list(pending["staged"]), keep=list(pending["serving"])) if done else []
    item = ports.state.finish_rollout(target.id, owner, succeeded=False, reason=pending["reason"], keep_lock=True,
                                      leftovers=None if done else list(pending["staged"]))
    return {**item, "settled": ("rollout-failed", pending["reason"], deleted)}


def _give_up(ports: Ports, target: HyperPodTarget, item: dict[str, Any], owner: str,
             exc: PermanentError) -> dict[str, Any]:
    """The cluster keeps refusing past the phase's time: end as failed without it (staged caches kept as leftovers)."""
    pending = item["pending"]
    reason = pending.get("reason") or ("staging-failed" if pending["phase"] == "staging" else "switch-failed")
    _letter(ports, target, pending, reason, f"{target.id}: {pending['version']}: the cluster refuses: {exc.message}")
    item = ports.state.finish_rollout(target.id, owner, succeeded=False, reason=reason, keep_lock=True,
                                      leftovers=list(pending["staged"]))
    return {**item, "settled": ("rollout-failed", reason, [])}


def _letter(ports: Ports, target: HyperPodTarget, pending: dict[str, Any], reason: str, message: str) -> None:
    """The permanent failure, once: its letter id is the upload's and the reason's (a rerun's letter is the same)."""
    ports.metric("RefreshFailed", reason=reason, target=target.id)
    ports.dead_letter(letters.envelope(json.loads(pending["event"]), reason, message, [target.id],
                                       request_id=ports.request_id, failed_at=ports.state.clock()))

