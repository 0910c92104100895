"""Warm version change of a node-cached HyperPod deployment: stage, switch, retire, one idempotent step at a time.

A target whose model lies in hyperwarm's node cache (``node_cache``, and a state machine to drive it) is not
repointed at once. The refresh function records the rollout in the target's ``pending`` record (the lock passes to
the rollout, as for an endpoint's blue/green update; a newer version queues behind it) and starts the Step
Functions execution of the target and version. Each workflow step (and the scheduled reconciliation, which so
settles an execution that was lost) calls :func:`advance` under the lock, which reads the cluster and moves the
record on:

- ``staging``: the model's filler keeps the serving version and the new one (anything else is dropped from the
  nodes first, except a version a pod still mounts); once every node that can host the deployment's pods carries
  the new version's ready label and those nodes hold every replica -> ``switching`` is recorded, then the
  deployment is pointed at the new version's directory with required affinity on its label. A node where the
  filler reports the version cannot be filled (bad checksum, no room), or the staging timeout -> ``failing``
  (at the timeout, ready nodes that hold every replica are enough: a pod never lands on a node without the label).
- ``switching``: every pod of the deployment mounts the new version, enough of them ready, none of another left
  (read from the pods, not from a count the operator keeps) -> the filler drops the previous version, the version
  is committed; the operator reports the deployment failed, or past the switch timeout, or the deployment found
  pointing elsewhere (someone's deploy, a stack rollback) -> ``failing``.
- ``failing``: the failure is recorded before anything acts on it (so a rerun resumes it and never stages or
  switches again): point the deployment back at the previous version where it was switched, dead-letter the
  upload's event (``staging-failed``, ``staging-timeout``, ``switch-failed``, ``switch-timeout``; one letter id per
  upload and reason; an ``aborted`` rollout gets none: a person asked for it), then ``reverting``, or the end when
  nothing was switched (the staged copy, which no pod read, dropped).
- ``reverting``: every pod back on the previous version -> the staged copy dropped, the failure recorded.

Every pod of a new version is checked once: did its node carry the version's ready label (``cold_pods`` in the
record, ``RefreshColdPods`` per refresh). Transient errors (the API server or the table unavailable) and a
cluster that refuses (404, 403) are retried at the next poll until the phase's own deadline; then the rollout
ends as failed, and the record says what the deployment reads. A copy is only ever dropped through the filler's
list, which never drops a version some pod mounts; what a failed or given-up rollout leaves is swept by the
reconciliation (:func:`sweep`).
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..node_cache.layout import Version
from . import contract, gate, letters
from .config import HyperPodTarget, Target
from .errors import PermanentError, TransientError
from .ports import Ports
from .targets import warm

PHASE_ANSWER = {"staging": "staging", "switching": "switching", "failing": "switching", "reverting": "switching"}
"""The workflow's view of a record's phase: failing and reverting wait on a deployment rollout too."""
ABORTED = "aborted"
REFUSED = "refused-record"
"""A rollout record that fails the gate when read back (:func:`_refuse`)."""
SUPERSEDED = "rollout-superseded"
"""A warm rollout an earlier release began, in a shape this release cannot continue (:func:`.formats.state_item`)."""
_SHA256 = re.compile(r"[0-9a-f]{64}")
_SEEN_PODS = 200
"""Pods of one rollout remembered as checked for a cold start (a deployment runs far fewer)."""


def is_warm(ports: Ports, target: Target) -> bool:
    """Does this target change version warm? A node-cached model and a workflow to drive it."""
    return isinstance(target, HyperPodTarget) and target.node_cache is not None and ports.start_workflow is not None


def lock_seconds(target: HyperPodTarget) -> int:
    """How long the rollout holds the target's lock unseen: every phase's timeout, and a few polls more."""
    longest = max(target.staging_timeout_seconds, target.switch_timeout_seconds)
    return target.staging_timeout_seconds + 2 * target.switch_timeout_seconds + 5 * contract.poll_seconds(longest)


def wait_seconds(target: HyperPodTarget, phase: str) -> int:
    """How long the workflow waits before the next step of ``phase``."""
    return contract.poll_seconds(target.staging_timeout_seconds if phase == "staging" else target.switch_timeout_seconds)


def start(ports: Ports, target: HyperPodTarget, created: Any, event: dict[str, Any], owner: str,
          item: dict[str, Any], admitted: str) -> None:
    """Record the rollout of a version the gate admitted (``admitted``: its manifest's SHA-256, which the filler
    pins), then start its execution. The filler is changed by its first step, so a crash after the record loses
    nothing: the reconciliation steps it."""
    kube = ports.kube(target)
    previous = warm.served(target, kube.get(target.resource, target.namespace, target.name))
    serving = next((v for v in warm.kept(kube, target) if v.version == previous), None)
    if serving is None and previous:
        serving = Version(previous, created.bucket, f"{created.prefix}/{previous}")
    started = int(ports.state.clock())
    pending = {"kind": "hyperpod", "config": contract.rollout_execution_name(target.id, created.version, str(started)),
               "created_models": [], "version": created.version, "sequencer": created.sequencer,
               "location": created.location, "bucket": created.bucket, "manifest_sha256": admitted,
               "event": json.dumps(event),
               "started": started, "phase": "staging", "previous": previous,
               "serving": serving.to_json() if serving else None, "cold_pods": 0, "seen_pods": []}
    ports.state.start_rollout(target.id, owner, pending, lock_seconds(target))
    ensure_workflow(ports, target, pending)
    ports.log("warm rollout started", target=target.id, version=created.version, serving=previous)


def ensure_workflow(ports: Ports, target: HyperPodTarget, pending: dict[str, Any]) -> None:
    """Start the rollout's execution (its name is the record's: a second start of it is a no-op). Called when
    the rollout is recorded and again by a retry of its event and by the reconciliation, so a start whose
    answer was lost, or that failed after the record was written, is made up for."""
    assert ports.start_workflow is not None  # is_warm said so
    ports.start_workflow(target, pending["version"], pending["config"])


def advance(ports: Ports, target: HyperPodTarget, item: dict[str, Any], owner: str, *,
            abandon: bool = False) -> dict[str, Any]:
    """One step of the rollout in ``item["pending"]``, under ``owner``'s lock. Returns the item; one whose
    rollout ended carries ``settled`` (as :func:`.flow._settle` does) and no ``pending``, the lock kept."""
    pending = item["pending"]
    ports.metric("RolloutInProgress", target=target.id)
    if pending.get("legacy"):
        return _end_legacy(ports, target, owner)
    refused = _record_problem(ports, target, pending)
    if refused is not None:
        return _refuse(ports, target, owner, refused)
    try:
        if pending.get("abort") and pending["phase"] in ("staging", "switching"):
            return _fail(ports, target, owner, ABORTED, f"aborted by {pending['abort'].get('by', 'an operator')}",
                         revert=_switched(pending))
        step = {"staging": _staging, "switching": _switching, "failing": _failing, "reverting": _reverting}
        return step[pending["phase"]](ports, target, item, owner, abandon)
    except (TransientError, PermanentError) as exc:
        current = ports.state.get(target.id)
        if not current.get("pending") or current.get("lock_owner") != owner:
            raise  # ended meanwhile, or the lock is another's: the caller's retry looks again
        gone = isinstance(exc, PermanentError) and exc.reason == "target-deleting"
        if not gone and not abandon and _now(ports) <= _deadline(target, current["pending"]):
            ports.log("rollout step failed; the next poll tries again", target=target.id, reason=exc.reason,
                      error=exc.message)
            return current
        return _give_up(ports, target, owner, exc)


def _now(ports: Ports) -> float:
    return float(ports.state.clock())


def _deadline(target: HyperPodTarget, pending: dict[str, Any]) -> float:
    if pending["phase"] == "staging":
        return float(pending["started"]) + target.staging_timeout_seconds
    return float(pending.get("switched", pending["started"])) + target.switch_timeout_seconds


def _switched(pending: dict[str, Any]) -> bool:
    """The deployment was pointed at the new version (the patch landed: its generation is recorded)."""
    return pending.get("generation") is not None and "switched" in pending


def _versions(pending: dict[str, Any]) -> tuple[Version | None, Version]:
    serving = Version.from_json(pending["serving"]) if pending.get("serving") else None
    return serving, Version(pending["version"], pending["bucket"], pending["location"],
                            manifest=str(pending.get("manifest_sha256") or ""))


def _record_problem(ports: Ports, target: HyperPodTarget, pending: dict[str, Any]) -> str | None:
    """The rollout record is read back from the table, which is no authority: the versions it would have the filler
    fetch and the deployment read pass the gate's name rules at every step (:func:`.gate.record_problem`), and it
    carries the pin of the manifest the gate admitted (without it the filler would fill whatever manifest the
    bucket holds then). Every warm rollout this release's format records carries it; one begun in stand-alone caches
    (``legacy``) ends before this check."""
    pin = pending.get("manifest_sha256")
    if not isinstance(pin, str) or not _SHA256.fullmatch(pin):
        return f"the rollout record pins no admitted manifest (manifest_sha256 {pin!r})"
    prefix = ports.settings.prefix_of(target)
    problem = gate.record_problem(ports.settings, prefix, pending.get("version"), pending.get("bucket"),
                                  pending.get("location"))
    serving = pending.get("serving")
    if problem is None and serving is not None:
        try:
            held = Version.from_json(serving)
        except ValueError as exc:
            return f"serving version: {exc}"
        problem = gate.record_problem(ports.settings, prefix, held.version, held.bucket, held.location, new=False)
    previous = pending.get("previous")
    if problem is None and previous is not None:
        refusal = gate.version_problem(ports.settings, prefix, previous, new=False)
        problem = None if refusal is None else f"previous version: {refusal.message}"
    return problem


def _readmit(ports: Ports, target: HyperPodTarget, pending: dict[str, Any]) -> str | None:
    """Before the switch, the staged version passes the whole gate again (its upload read back from the record):
    signed and verified, and the same manifest the filler was pinned to. None, or why not."""
    try:
        created = gate.recorded_event(ports.settings, ports.settings.prefix_of(target), pending)
        admitted = ports.verify(created)
    except PermanentError as exc:
        return f"{exc.reason}: {exc.message}"
    if admitted != pending.get("manifest_sha256"):
        return f"the manifest of {pending['version']} changed since it was admitted and staged"
    return None


def _refuse(ports: Ports, target: HyperPodTarget, owner: str, why: str) -> dict[str, Any]:
    """A rollout record the gate refuses (written by someone else, or an upload changed since): end it as failed
    without acting on anything it names; what the deployment reads stays, and the reconciliation's sweep drops what
    nothing reads. One letter (reason ``refused-record``), the log names the target."""
    ports.log("rollout record refused by the gate; nothing it names is acted on", target=target.id, detail=why)
    item = ports.state.update_rollout(target.id, owner, reason=REFUSED, message=why)
    refused_letter(ports, target, item["pending"], why)
    item = ports.state.finish_rollout(target.id, owner, succeeded=False, reason=REFUSED, keep_lock=True)
    return {**item, "settled": ("rollout-failed", REFUSED, [])}


def refused_letter(ports: Ports, target: Target, record: Any, why: str) -> None:
    """The one letter (reason ``refused-record``) of a rollout record the gate refused, warm or endpoint: with the
    event the record names if it is one (its writer may have put anything there; the letter counts against the
    target's own prefix, never one its event names)."""
    try:
        event = json.loads(record["event"])
    except (KeyError, TypeError, ValueError):
        event = {}
    ports.metric("RefreshFailed", reason=REFUSED, target=target.id)
    ports.dead_letter(letters.envelope(event if isinstance(event, dict) else {}, REFUSED, f"{target.id}: {why}",
                                       [target.id], request_id=ports.request_id, failed_at=ports.state.clock()))


def _staging(ports: Ports, target: HyperPodTarget, item: dict[str, Any], owner: str, abandon: bool) -> dict[str, Any]:
    pending, kube = item["pending"], ports.kube(target)
    if abandon:
        return _fail(ports, target, owner, "staging-failed", "the workflow gave up on a failing step", revert=False)
    serving, new = _versions(pending)
    held = warm.keep(kube, target, [*([serving] if serving else []), new])
    progress = warm.staging(kube, target, new.version)
    ports.metric("StagingReadyNodes", target=target.id, value=len(progress.ready_nodes))
    ports.metric("StagingTargetNodes", target=target.id, value=len(progress.ready_nodes) + len(progress.waiting_nodes))
    if progress.failed:
        return _fail(ports, target, owner, "staging-failed",
                     "; ".join(f"{node}: {why}" for node, why in sorted(progress.failed.items())), revert=False)
    elapsed = _now(ports) - float(pending["started"])
    if held:
        ports.log("pods still read a version the filler must drop first", target=target.id, versions=held)
    if not progress.ready:
        enough = progress.room and progress.ready_nodes and not held
        if elapsed <= target.staging_timeout_seconds or not enough:
            if elapsed > target.staging_timeout_seconds:
                hosts = len(progress.ready_nodes) + len(progress.waiting_nodes)
                return _fail(ports, target, owner, "staging-timeout",
                             f"ready on {len(progress.ready_nodes)} of {hosts} nodes that can host its pods after "
                             f"{int(elapsed)} s (timeout {target.staging_timeout_seconds} s)" +
                             (f"; pods still read {', '.join(held)}" if held else "") +
                             ("" if progress.room or not progress.ready_nodes else
                              "; the ready nodes cannot hold every replica"), revert=False)
            return item
        ports.log("staging timeout: switching on the ready nodes, which hold every replica", target=target.id,
                  ready=progress.ready_nodes, waiting=progress.waiting_nodes)
    refused = _readmit(ports, target, pending)
    if refused is not None:
        return _fail(ports, target, owner, REFUSED, refused, revert=False)
    # The intent first: a step that dies after the patch is resumed as a switch, never failed as a staging.
    item = ports.state.update_rollout(target.id, owner, phase="switching", switched=int(_now(ports)), generation=None)
    ports.metric("TimeToWarm", target=target.id, value=elapsed, unit="Seconds")
    ports.log("staged on the nodes: switching", target=target.id, version=new.version, nodes=progress.ready_nodes)
    return _switching(ports, target, item, owner, abandon)


def _switching(ports: Ports, target: HyperPodTarget, item: dict[str, Any], owner: str, abandon: bool) -> dict[str, Any]:
    pending, kube = item["pending"], ports.kube(target)
    serving, new = _versions(pending)
    if pending.get("generation") is None:  # recorded, maybe patched: patch (a no-op if done) and note what to await
        generation = warm.point(kube, target, new.version)  # the switch timeout counts from the patch that landed
        return ports.state.update_rollout(target.id, owner, generation=generation, switched=int(_now(ports)))
    elapsed = _now(ports) - float(pending["switched"])
    reads = warm.served(target, kube.get(target.resource, target.namespace, target.name))
    if reads != new.version:  # a revert that died half-way, a stack rollback, someone's deploy
        return _fail(ports, target, owner, "switch-failed",
                     f"the deployment reads {reads or 'another source'}, not {new.version}",
                     revert=reads == pending.get("previous"))
    progress = warm.rollout(kube, target, new.version, int(pending["generation"]))
    item = _check_cold(ports, target, owner, item, progress.new_pods)
    if progress.state == "complete":
        warm.keep(kube, target, [new])  # no pod reads the previous version any more
        cold = int(item["pending"].get("cold_pods", 0))
        item = ports.state.finish_rollout(target.id, owner, succeeded=True, keep_lock=True)
        ports.metric("RefreshColdPods", target=target.id, value=float(cold))
        ports.metric("TimeToSwitch", target=target.id, value=elapsed, unit="Seconds")
        ports.metric("RefreshSucceeded", target=target.id)
        ports.metric("TimeToRefresh", value=max(0.0, _now(ports) - float(pending["started"])), unit="Seconds")
        ports.log("warm rollout done", target=target.id, version=new.version, cold_pods=cold)
        return {**item, "settled": ("refreshed", "", [serving.version] if serving else [])}
    if progress.state == "running" and elapsed <= target.switch_timeout_seconds and not abandon:
        return item
    reason = "switch-failed" if progress.state == "failed" or abandon else "switch-timeout"
    return _fail(ports, target, owner, reason, f"failed: {progress.words}" if progress.state == "failed" else
                 "abandoned by its workflow" if abandon else
                 f"not finished after {int(elapsed)} s (timeout {target.switch_timeout_seconds} s): {progress.words}",
                 revert=True)


def _check_cold(ports: Ports, target: HyperPodTarget, owner: str, item: dict[str, Any],
                pods: list[warm.Pod]) -> dict[str, Any]:
    """Look once at each new pod: was its node labelled ready for the version it mounts?"""
    pending = item["pending"]
    seen = set(pending.get("seen_pods") or [])
    uids, cold = warm.cold(ports.kube(target), target, pending["version"], pods, seen)
    if not uids:
        return item
    if cold:
        ports.log("a pod of the new version is on a node without its ready label", target=target.id, pods=cold)
    return ports.state.update_rollout(target.id, owner, seen_pods=[*pending.get("seen_pods", []), *uids][-_SEEN_PODS:],
                                      cold_pods=int(pending.get("cold_pods", 0)) + cold)


def _fail(ports: Ports, target: HyperPodTarget, owner: str, reason: str, message: str, *,
          revert: bool) -> dict[str, Any]:
    """Record the failure (``failing``), then act on it: what a rerun resumes."""
    ports.log("warm rollout failing", target=target.id, reason=reason, detail=message, revert=revert)
    item = ports.state.update_rollout(target.id, owner, phase="failing", reason=reason, message=message, revert=revert,
                                      failed_at=int(_now(ports)))
    return _failing(ports, target, item, owner, False)


def _failing(ports: Ports, target: HyperPodTarget, item: dict[str, Any], owner: str, abandon: bool) -> dict[str, Any]:
    pending, kube = item["pending"], ports.kube(target)
    serving, _ = _versions(pending)
    what = "staging" if not _switched(pending) else "rollout"
    message = f"{target.id}: {what} of {pending['version']}: {pending['message']}"
    if not pending["revert"] or not pending.get("previous"):
        # Not switched: no pod read the staged copy. Switched and moved elsewhere by someone: the filler keeps it
        # while a pod mounts it, and the reconciliation drops it once none does.
        reads = warm.served(target, kube.get(target.resource, target.namespace, target.name))
        keep = [v for v in (serving,) if v and (reads is None or v.version == reads)]
        if keep:
            warm.keep(kube, target, keep)
        _letter(ports, target, pending, pending["reason"], message)
        return _finish_failed(ports, target, owner, serves_new=reads == pending["version"])
    generation = warm.point(kube, target, pending["previous"])
    _letter(ports, target, pending, pending["reason"], f"{message}; pointed back at {pending['previous']}")
    ports.log("warm rollout failed; pointed back at the previous version", target=target.id, reason=pending["reason"])
    return ports.state.update_rollout(target.id, owner, phase="reverting", generation=generation,
                                      switched=int(_now(ports)))


def _reverting(ports: Ports, target: HyperPodTarget, item: dict[str, Any], owner: str, abandon: bool) -> dict[str, Any]:
    pending, kube = item["pending"], ports.kube(target)
    serving, _ = _versions(pending)
    progress = warm.rollout(kube, target, pending["previous"], int(pending["generation"]))
    timed_out = _now(ports) - float(pending["switched"]) > target.switch_timeout_seconds
    if progress.state == "running" and not timed_out and not abandon:
        return item
    if progress.state == "complete" and serving is not None:
        warm.keep(kube, target, [serving])  # every pod back on it: nothing reads the staged copy
    return _finish_failed(ports, target, owner, serves_new=False)


def _finish_failed(ports: Ports, target: HyperPodTarget, owner: str, *, serves_new: bool) -> dict[str, Any]:
    item = ports.state.get(target.id)
    pending = item["pending"]
    ports.metric("RefreshColdPods", target=target.id, value=float(pending.get("cold_pods", 0)))
    if pending["reason"] == ABORTED:
        ports.metric("RolloutAborted", target=target.id)
    item = ports.state.finish_rollout(target.id, owner, succeeded=False, reason=pending["reason"], keep_lock=True,
                                      serves_new=serves_new)
    return {**item, "settled": ("rollout-failed", pending["reason"], [])}


def _give_up(ports: Ports, target: HyperPodTarget, owner: str, exc: TransientError | PermanentError) -> dict[str, Any]:
    """The cluster keeps refusing past the phase's time (or the deployment is being deleted): end as failed without
    it. The record says what the deployment reads as far as the rollout knows: the new version once the switch
    landed and was not reverted; the copies are left to the reconciliation's sweep."""
    item = ports.state.get(target.id)
    pending = item["pending"]
    reason = pending.get("reason") or ("staging-failed" if pending["phase"] == "staging" else "switch-failed")
    if not pending.get("reason"):
        item = ports.state.update_rollout(target.id, owner, reason=reason, message=exc.message)
    _letter(ports, target, pending, reason, f"{target.id}: {pending['version']}: the cluster refuses: {exc.message}")
    return _finish_failed(ports, target, owner, serves_new=pending["phase"] == "switching" and _switched(pending))


def _end_legacy(ports: Ports, target: HyperPodTarget, owner: str) -> dict[str, Any]:
    """A rollout an earlier release began in stand-alone caches: this release cannot continue it. It ends as failed,
    without touching the cluster (what the deployment reads stays), and its letter replays the version through the
    node cache."""
    item = ports.state.update_rollout(target.id, owner, reason=SUPERSEDED, message="begun by an earlier release")
    pending = item["pending"]
    _letter(ports, target, pending, SUPERSEDED,
            f"{target.id}: the warm rollout of {pending['version']} was begun by an earlier hyperwarm release, which "
            "staged it in stand-alone ModelWeightsCacheConfig objects; this release cannot continue it. Delete those "
            "objects (kubectl get mwcc -l hyperwarm.io/staged-version) and replay this letter to stage the version "
            "in the node cache")
    item = ports.state.finish_rollout(target.id, owner, succeeded=False, reason=SUPERSEDED, keep_lock=True)
    return {**item, "settled": ("rollout-failed", SUPERSEDED, [])}


def _letter(ports: Ports, target: HyperPodTarget, pending: dict[str, Any], reason: str, message: str) -> None:
    """The permanent failure, once: its letter id is the upload's and the reason's (a rerun's letter is the same).
    An aborted rollout gets none: the person who aborted it knows, and replaying it is theirs to decide."""
    if reason == ABORTED:
        return
    ports.metric("RefreshFailed", reason=reason, target=target.id)
    ports.dead_letter(letters.envelope(json.loads(pending["event"]), reason, message, [target.id],
                                       request_id=ports.request_id, failed_at=ports.state.clock()))


def sweep(ports: Ports, target: HyperPodTarget) -> list[str]:
    """With no rollout in flight: the filler keeps what the deployment reads and nothing else (a failed, given-up
    or aborted rollout's leftovers), except a version a pod still mounts. Returns the versions dropped."""
    kube = ports.kube(target)
    reads = warm.served(target, kube.get(target.resource, target.namespace, target.name))
    kept = warm.kept(kube, target)
    serving = [v for v in kept if v.version == reads]
    if not serving or [v.version for v in kept] == [reads]:
        return []
    held = warm.keep(kube, target, serving)
    return [v.version for v in kept if v.version != reads and v.version not in held]
