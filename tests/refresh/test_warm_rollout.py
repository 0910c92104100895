"""A new version of a node-cached model goes live without a cold pod, on documented behaviour only, while the
cluster moves: whole version changes driven through the refresh function and the workflow's steps
(``flow.on_rollout_step``) against the cluster model (cluster_model.py), with the objects as the caches construct
renders them and the RBAC as the refresh construct renders it.

What every path must leave: no pod of a version starts on a node without a complete copy of it; no copy is deleted
while a pod reads it; a node never holds more than two versions; the end is the old version serving or the new
one, with the record saying which; one letter per permanent failure (none for an abort).
"""

from __future__ import annotations

import functools
from typing import Any

import model_world as mw
import pytest
from cluster_model import HEALTH_TAINT, Crash
from warm_world import SETTINGS, TARGET, WarmWorld, cluster

from hyperwarm.functions.cache_refresh import contract, flow
from hyperwarm.functions.cache_refresh.config import Settings
from hyperwarm.functions.cache_refresh.errors import PermanentError, TransientError
from hyperwarm.functions.cache_refresh.state import StateTable
from hyperwarm.functions.node_cache import layout


def _volume_path(world: WarmWorld) -> str:
    return str(world.cluster.deployment["spec"]["kubernetes"]["volumes"][0]["hostPath"]["path"])


# -- the version change, as documented behaviour allows it -----------------------------------------------------

def test_a_new_version_is_staged_on_every_node_switched_without_a_cold_pod_and_the_old_copy_dropped() -> None:
    world = WarmWorld()
    assert world.upload("v2", 1)["targets"][TARGET.id]["status"] == "started"
    started = world.record()["pending"]["started"]
    assert world.executions == [("v2", contract.rollout_execution_name(TARGET.id, "v2", str(started)))]
    assert world.cluster.reads() == "v1", "nothing serving changes before the new version is staged"

    assert world.run("v2") == "done"

    assert world.cluster.reads() == "v2" and {p.version for p in world.cluster.pods} == {"v2"}
    assert world.cluster.kept() == ["v2"]
    world.cluster.tick(60)
    assert set().union(*world.cluster.copies().values()) == {"v2"}, "every node dropped v1's copy"
    world.assert_safe()
    assert world.letters == []
    record = world.record()
    assert record["current_version"] == "v2" and "pending" not in record and "lock_owner" not in record
    assert record["last_rollout"]["cold_pods"] == 0 and world.metric("RefreshColdPods") == [0.0]
    fill = world.cluster.fill_seconds
    assert fill <= world.metric("TimeToWarm")[0] <= fill + 2 * contract.ROLLOUT_POLL_SECONDS
    assert world.metric("StagingTargetNodes")[-1] == 4 and world.metric("RefreshSucceeded") == [1.0]


def test_the_pods_read_the_staged_directory_and_may_only_run_where_it_is_complete() -> None:
    """The documented NVMe source: ``kubernetesVolume`` with a hostPath volume named as the model volume mount, no
    ``modelLocation``; the required affinity names the version's ready label, set only by the filler."""
    world = WarmWorld()
    world.upload("v2", 1)
    world.run("v2")
    spec = world.cluster.deployment["spec"]
    assert spec["modelSourceConfig"] == {"modelSourceType": "kubernetesVolume"}
    assert _volume_path(world) == layout.version_dir(layout.DEFAULT_HOST_PATH, "llama", "v2")
    assert spec["worker"]["modelVolumeMount"]["name"] == spec["kubernetes"]["volumes"][0]["name"]
    terms = spec["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert {"key": layout.ready_label("llama", "v2"), "operator": "Exists"} in terms[0]["matchExpressions"]
    assert spec["modelVersion"] == "v2"


def test_the_next_version_stages_beside_the_one_that_serves() -> None:
    world = WarmWorld()
    world.upload("v2", 1)
    world.run("v2")
    world.upload("v3", 2)
    assert world.run("v3") == "done"
    assert world.cluster.kept() == ["v3"] and world.cluster.reads() == "v3"
    world.assert_safe()


def test_a_newer_version_during_staging_waits_and_then_changes_warm() -> None:
    world = WarmWorld()
    world.upload("v2", 1)
    world.step("v2")
    assert world.upload("v3", 2)["targets"][TARGET.id]["status"] == "queued"
    assert world.run("v2") == "done", "the version staged first finishes (the queue rules are unchanged)"
    assert world.executions[-1][0] == "v3", "its end started v3"
    assert world.run("v3") == "done"
    assert world.cluster.reads() == "v3"
    world.assert_safe()
    assert world.letters == []


def test_a_duplicate_upload_during_the_rollout_is_skipped_and_starts_the_same_execution_again() -> None:
    world = WarmWorld()
    world.upload("v2", 1)
    assert world.upload("v2", 1)["status"] == "skipped"
    assert len(world.executions) == 2 and len(set(world.executions)) == 1


def test_without_a_workflow_a_node_cached_target_is_never_repointed_in_place() -> None:
    """A node-cached deployment reads a kubernetesVolume: only a warm change may move it (no S3 location to patch)."""
    world = WarmWorld()
    ports = world.ports()
    ports.start_workflow = None
    ports.apply_hyperpod = lambda target, created: (_ for _ in ()).throw(
        PermanentError("target-rejected", "model source is 'kubernetesVolume', not s3"))
    assert flow.handle(ports, mw.manifest_event("v2", 1))["targets"][TARGET.id]["status"] == "failed"
    assert world.cluster.reads() == "v1"


# -- failures of the new version --------------------------------------------------------------------------------

def test_a_version_the_filler_cannot_verify_is_dead_lettered_and_its_partial_copy_dropped() -> None:
    world = WarmWorld()
    world.cluster.fail_fill["v2"] = "config.json: size or SHA-256 differs from the manifest"
    world.upload("v2", 1)
    assert world.run("v2") == "failed"
    assert world.cluster.reads() == "v1" and world.cluster.kept() == ["v1"]
    assert [(letter["reason"], letter["targets"]) for letter in world.letters] == [("staging-failed", [TARGET.id])]
    assert "SHA-256 differs" in world.letters[0]["message"] and "node-0" in world.letters[0]["message"]
    assert world.letters[0]["event"] == mw.manifest_event("v2", 1), "the letter replays the upload"
    world.cluster.tick(60)
    assert set().union(*world.cluster.copies().values()) == {"v1"}
    world.assert_safe()
    record = world.record()
    assert record.get("current_version") is None and record["failed"]["version"] == "v2"


def test_a_node_without_room_for_the_new_version_fails_the_staging_with_the_reason() -> None:
    world = WarmWorld()
    for node in world.cluster.nodes.values():
        node.nvme_gb = 150.0  # 100 GB serving + 100 GB staged > 90 % of 150 GB
    world.upload("v2", 1)
    assert world.run("v2") == "failed"
    assert [letter["reason"] for letter in world.letters] == ["staging-failed"]
    assert "no room" in world.letters[0]["message"]
    assert world.cluster.reads() == "v1"
    world.assert_safe()


def test_a_staging_past_its_timeout_fails_and_the_old_version_serves() -> None:
    world = WarmWorld(cluster(fill_seconds=3600))
    world.upload("v2", 1)
    assert world.run("v2") == "failed"
    assert [letter["reason"] for letter in world.letters] == ["staging-timeout"]
    assert "ready on 0 of 4 nodes that can host its pods" in world.letters[0]["message"]
    assert world.cluster.reads() == "v1" and world.cluster.kept() == ["v1"]
    world.assert_safe()


def test_a_failed_deployment_rollout_points_back_at_the_old_version_which_was_kept() -> None:
    world = WarmWorld()
    world.cluster.crash_versions.add("v2")
    world.upload("v2", 1)
    assert world.run("v2") == "failed"
    assert world.cluster.reads() == "v1"
    assert {p.version for p in world.cluster.pods} == {"v1"}
    assert world.cluster.kept() == ["v1"], "the staged copy goes once no pod reads it"
    assert [letter["reason"] for letter in world.letters] == ["switch-failed"]
    world.assert_safe()


def test_a_switch_past_its_timeout_points_back() -> None:
    world = WarmWorld(cluster(progress_deadline=100_000))  # the operator never says failed: only the timeout ends it
    world.cluster.crash_versions.add("v2")
    world.upload("v2", 1)
    assert world.run("v2") == "failed"
    assert [letter["reason"] for letter in world.letters] == ["switch-timeout"]
    assert world.cluster.reads() == "v1"
    world.assert_safe()


# -- the cluster moves under the rollout ------------------------------------------------------------------------

def test_a_node_joining_during_staging_is_filled_before_the_switch() -> None:
    world = WarmWorld()
    world.upload("v2", 1)
    world.step("v2")
    world.cluster.add_node("node-new")
    assert world.run("v2") == "done"
    world.cluster.tick(60)
    assert world.cluster.copies()["node-new"] == {"v2"}
    world.assert_safe()


def test_a_node_replaced_during_staging_is_filled_again_and_no_pod_lands_there_before() -> None:
    world = WarmWorld()
    world.upload("v2", 1)
    world.step("v2")
    world.cluster.tick(60)
    world.cluster.replace_node("node-1")
    assert world.run("v2") == "done"
    world.cluster.tick(60)
    assert world.cluster.copies()["node-1-r"] == {"v2"}
    world.assert_safe()


def test_a_node_leaving_during_staging_does_not_hold_it_back() -> None:
    world = WarmWorld()
    world.upload("v2", 1)
    world.step("v2")
    world.cluster.remove_node("node-3")
    assert world.run("v2") == "done"
    world.assert_safe()


@pytest.mark.parametrize("change", ["cordoned", "not-ready", "health-check-taint"])
def test_a_node_that_cannot_host_pods_is_not_waited_for(change: str) -> None:
    """A node whose filler cannot finish (it is NotReady), or where no pod may run (cordoned, tainted by HyperPod's
    deep health check), does not count: staging is ready when every node that can host pods holds the version."""
    world = WarmWorld()
    node = world.cluster.nodes["node-3"]
    world.upload("v2", 1)
    world.step("v2")
    if change == "cordoned":
        node.unschedulable, node.ready = True, False  # cordoned, and its filler stalled with it
    elif change == "not-ready":
        node.ready = False
    else:
        node.taints.append(HEALTH_TAINT)
        node.ready = False
    assert world.run("v2") == "done"
    assert world.metric("StagingTargetNodes")[-1] == 3
    world.assert_safe()


def test_a_node_lost_during_the_switch_moves_its_pods_to_nodes_that_hold_the_version() -> None:
    world = WarmWorld()
    world.upload("v2", 1)
    seen = {"done": False}

    def lose_a_node(number: int) -> None:
        if not seen["done"] and world.record()["pending"]["phase"] == "switching":
            seen["done"] = True
            world.cluster.nodes["node-0"].ready = False
    assert world.run("v2", each=lose_a_node) == "done"
    assert seen["done"]
    world.assert_safe()


def test_a_node_replaced_during_the_switch_gets_no_pod_of_a_version_before_it_holds_it() -> None:
    """The new node is empty and the least allocated: the scheduler would pick it first, but the required affinity
    on the version's ready label keeps every pod off it until its filler has verified the copy."""
    world = WarmWorld()
    world.upload("v2", 1)
    replaced = {"done": False}

    def replace(number: int) -> None:
        if not replaced["done"] and world.record()["pending"].get("generation") is not None:
            replaced["done"] = True
            world.cluster.replace_node("node-0")
    assert world.run("v2", each=replace) == "done"
    assert replaced["done"]
    world.assert_safe()


def test_a_node_tainted_during_the_switch_gets_no_new_pod() -> None:
    world = WarmWorld()
    world.upload("v2", 1)
    tainted = {"done": False}

    def taint(number: int) -> None:
        if not tainted["done"] and world.record()["pending"]["phase"] == "switching":
            tainted["done"] = True
            world.cluster.nodes["node-2"].taints.append(HEALTH_TAINT)
    assert world.run("v2", each=taint) == "done"
    assert not any(p.node == "node-2" and p.version == "v2" for p in world.cluster.pods)
    world.assert_safe()


def test_nodes_that_cannot_hold_every_replica_keep_the_staging_waiting_then_failing() -> None:
    """Two nodes of four leave: 2 x 2 pods fit, but the deployment runs 6 (its autoscaler says so)."""
    world = WarmWorld()
    world.cluster.replicas_override = 6
    world.upload("v2", 1)
    world.step("v2")
    world.cluster.remove_node("node-2")
    world.cluster.remove_node("node-3")
    assert world.run("v2") == "failed"
    assert "cannot hold every replica" in world.letters[0]["message"]
    assert world.cluster.reads() == "v1"
    world.assert_safe()


# -- the operator's status: absent, stale, late ----------------------------------------------------------------

@pytest.mark.parametrize("status", ["absent", "stale"])
def test_a_status_absent_or_stuck_on_an_old_generation_does_not_decide_the_rollout(status: str) -> None:
    world = WarmWorld(cluster(status=status))
    world.upload("v2", 1)
    assert world.run("v2") == "done", "the pods say when the rollout is complete"
    world.assert_safe()


def test_a_status_of_the_previous_generation_saying_failed_is_not_taken_for_this_switch() -> None:
    world = WarmWorld(cluster(status="stale"))
    world.cluster.deployment["status"] = {"state": "DeploymentFailed", "observedGeneration": 1}
    world.upload("v2", 1)
    assert world.run("v2") == "done"
    world.assert_safe()


def test_a_late_status_never_retires_a_copy_a_pod_still_reads() -> None:
    """The filler's own check is off here: only the function's reading of the pods keeps v1's copy while pods
    (terminating ones too) read it, whatever the operator's status says."""
    world = WarmWorld(cluster(filler_guards_mounts=False, observe_seconds=300, terminate_seconds=120))
    world.upload("v2", 1)
    assert world.run("v2") == "done"
    world.assert_safe()


def test_terminating_pods_hold_the_old_copy_though_the_status_reports_none() -> None:
    """Before Kubernetes 1.35 ``terminatingReplicas`` is absent (EKS 1.30-1.34): the function reads the pods,
    and a pod with a ``deletionTimestamp`` still reads its version until it is gone."""
    world = WarmWorld(cluster(filler_guards_mounts=False, terminate_seconds=600))
    world.upload("v2", 1)
    assert world.run("v2") == "done"
    assert "terminatingReplicas" not in str(world.cluster.deployment.get("status"))
    world.assert_safe()


# -- objects being deleted ----------------------------------------------------------------------------------------

def test_a_deployment_being_deleted_ends_the_rollout_without_touching_it() -> None:
    world = WarmWorld()
    world.upload("v2", 1)
    world.step("v2")
    world.cluster.delete_deployment()
    generation = world.cluster.deployment["metadata"]["generation"]
    assert world.run("v2") == "failed"
    assert world.cluster.deployment["metadata"]["generation"] == generation, "no patch of a deployment being deleted"
    assert "being deleted" in world.letters[0]["message"]
    assert "pending" not in world.record()


def test_a_filler_being_deleted_ends_the_staging() -> None:
    world = WarmWorld()
    world.upload("v2", 1)
    world.cluster.filler["metadata"]["deletionTimestamp"] = "2026-12-03T00:00:00Z"
    assert world.run("v2") == "failed"
    assert world.cluster.reads() == "v1"
    assert "being deleted" in world.letters[0]["message"]


# -- what earlier rollouts left ------------------------------------------------------------------------------------

def test_a_copy_a_failed_rollout_left_is_dropped_before_the_next_version_stages() -> None:
    """A revert that timed out leaves v2 listed beside v1; the next version's staging lists v1 and v3 only (the
    node never holds three versions: the capacity guard's two)."""
    world = WarmWorld()
    world.cluster.apply(world.cluster.deployment, {**world.cluster.filler, "spec": {
        **world.cluster.filler["spec"], "template": {**world.cluster.filler["spec"]["template"], "metadata": {
            **world.cluster.filler["spec"]["template"]["metadata"], "annotations": {
                layout.VERSIONS_ANNOTATION: layout.versions_json([
                    layout.Version("v1", mw.BUCKET, f"{mw.PREFIX}/v1"),
                    layout.Version("v0", mw.BUCKET, f"{mw.PREFIX}/v0")])}}}}})
    world.cluster.tick(600)
    world.upload("v3", 1)
    assert world.run("v3") == "done"
    assert world.cluster.kept() == ["v3"]
    world.assert_safe()


def test_a_cluster_that_refuses_after_the_switch_records_that_the_new_version_serves_and_the_sweep_drops_the_old() -> None:
    """Access revoked once the deployment was switched: past the switch timeout the rollout ends as failed, and
    the record says v2 serves (the deployment reads it). When access is back, the reconciliation drops v1."""
    world = WarmWorld()
    world.upload("v2", 1)
    switched = {"done": False}

    def revoke(number: int) -> None:
        if not switched["done"] and world.record()["pending"].get("generation") is not None:
            switched["done"] = True
            world.refuse = lambda what: PermanentError("target-forbidden", f"{what}: HTTP 403") \
                if "Pod" in what or "DaemonSet" in what else None
    assert world.run("v2", each=revoke) == "failed"
    record = world.record()
    assert record["current_version"] == "v2" and record["last_rollout"]["outcome"] == "failed"
    assert "refuses" in world.letters[0]["message"]
    world.refuse = None
    world.cluster.tick(600)
    world.reconcile()
    assert world.cluster.kept() == ["v2"]
    world.assert_safe()


def test_transient_cluster_errors_are_retried_until_the_phase_deadline() -> None:
    """The API server answers 503 for ten minutes during staging: the rollout waits and goes on."""
    world = WarmWorld()
    world.upload("v2", 1)
    until = world.cluster.now + 600
    world.refuse = lambda what: TransientError("target-unavailable", f"{what}: HTTP 503") \
        if world.cluster.now < until else None
    assert world.run("v2") == "done"
    assert world.letters == []
    world.assert_safe()


def test_transient_errors_past_the_deadline_fail_the_phase() -> None:
    world = WarmWorld()
    world.upload("v2", 1)
    world.refuse = lambda what: TransientError("target-unavailable", f"{what}: HTTP 503")
    assert world.run("v2") == "failed"
    assert [letter["reason"] for letter in world.letters] == ["staging-failed"]
    world.refuse = None
    assert world.cluster.reads() == "v1"


# -- abort --------------------------------------------------------------------------------------------------

def _abort(world: WarmWorld) -> None:
    table = StateTable(world.store, lambda: world.cluster.now)
    table.request_abort(TARGET.id, by="arn:aws:iam::111122223333:role/oncall")


def test_an_abort_while_staging_leaves_the_old_version_serving_and_no_staged_copy() -> None:
    world = WarmWorld()
    world.upload("v2", 1)
    world.step("v2")
    _abort(world)
    assert world.run("v2") == "failed"
    assert world.cluster.reads() == "v1" and world.cluster.kept() == ["v1"]
    assert world.letters == [], "a person asked for it: no letter"
    assert world.metric("RolloutAborted") == [1.0]
    record = world.record()
    assert record["last_rollout"]["reason"] == "aborted" and "pending" not in record


def test_an_abort_after_the_switch_points_back_and_drops_the_new_copy() -> None:
    world = WarmWorld()
    world.upload("v2", 1)

    def abort_once_switched(number: int) -> None:
        pending = world.record().get("pending") or {}
        if pending.get("generation") is not None and not pending.get("abort"):
            _abort(world)
    assert world.run("v2", each=abort_once_switched) == "failed"
    assert world.cluster.reads() == "v1" and world.cluster.kept() == ["v1"]
    assert {p.version for p in world.cluster.pods} == {"v1"}
    world.assert_safe()


def test_the_reconciliation_finishes_an_abort_whose_execution_was_stopped() -> None:
    world = WarmWorld()
    world.upload("v2", 1)
    world.step("v2")
    _abort(world)  # and the execution is stopped: no step runs again
    world.cluster.tick(60)
    world.reconcile(times=3)
    assert world.cluster.reads() == "v1" and world.cluster.kept() == ["v1"]
    assert "pending" not in world.record()


def test_an_abort_with_no_rollout_in_flight_is_refused() -> None:
    world = WarmWorld()
    with pytest.raises(ValueError, match="no rollout in flight"):
        _abort(world)


# -- the workflow giving up, lost executions, dry run ------------------------------------------------------------

def test_the_workflow_giving_up_while_switching_points_back_and_the_reconciliation_finishes() -> None:
    world = WarmWorld()
    world.upload("v2", 1)
    while world.step("v2")["phase"] == "staging":
        world.cluster.tick(60)
    assert world.step("v2", abandon=True)["phase"] == "failed"
    assert [letter["reason"] for letter in world.letters] == ["switch-failed"]
    world.reconcile(times=10, every=60)
    assert world.cluster.reads() == "v1" and {p.version for p in world.cluster.pods} == {"v1"}
    assert "pending" not in world.record()
    world.assert_safe()


def test_a_lost_execution_is_settled_by_the_reconciliation() -> None:
    world = WarmWorld()
    world.upload("v2", 1)
    world.reconcile(times=40, every=60)
    assert world.cluster.reads() == "v2" and world.record()["current_version"] == "v2"
    world.assert_safe()


def test_a_step_under_dry_run_changes_nothing_and_asks_to_wait() -> None:
    world = WarmWorld()
    world.upload("v2", 1)
    before = (dict(world.store.items), list(world.calls))
    answer = flow.on_rollout_step(world.ports(Settings(targets=SETTINGS.targets, state_table="t",
                                                       allowed_buckets=SETTINGS.allowed_buckets, dlq_url="q",
                                                       dry_run=True)),
                                  contract.RolloutStep(TARGET.id, "v2").to_json())
    assert answer["phase"] == "staging" and answer["wait_seconds"] == contract.ROLLOUT_POLL_SECONDS
    assert dict(world.store.items) == before[0]
    assert [c for c in world.calls[len(before[1]):] if not c.startswith("state.get")] == []


def test_the_step_decides_its_wait_and_ignores_phase_and_wait_given_in_its_input() -> None:
    world = WarmWorld()
    world.upload("v2", 1)
    answer = flow.on_rollout_step(world.ports(), {"target": TARGET.id, "version": "v2", "phase": "switching",
                                                  "wait_seconds": 1, "execution": world.executions[-1][1]})
    assert (answer["phase"], answer["wait_seconds"]) == ("staging", contract.poll_seconds(1800))
    assert world.cluster.reads() == "v1"


@pytest.mark.parametrize("execution", ["", "someone-elses-execution"])
def test_a_step_of_an_execution_the_rollout_did_not_start_acts_on_nothing(execution: str) -> None:
    """Whoever may start the workflow (or invoke its step) with a crafted input, abandon included, moves nothing:
    the step acts only for the execution its rollout record names."""
    world = WarmWorld()
    world.upload("v2", 1)
    before = (world.record()["pending"], world.cluster.kept())
    answer = flow.on_rollout_step(world.ports(), {"target": TARGET.id, "version": "v2", "abandon": True,
                                                  "execution": execution})
    assert answer["phase"] == "failed"
    assert (world.record()["pending"], world.cluster.kept()) == before and world.letters == []
    assert world.run("v2") == "done" and world.cluster.reads() == "v2"  # the rollout's own execution goes on


# -- a crash at every call ---------------------------------------------------------------------------------------

SCENARIOS = {
    # what the cluster does -> (what serves at the end, the versions the filler keeps, the letters' reasons)
    "succeeds": (lambda c: None, "v2", ["v2"], []),
    "fill-fails": (lambda c: c.fail_fill.update(v2="sha256 differs"), "v1", ["v1"], ["staging-failed"]),
    "rollout-fails": (lambda c: c.crash_versions.add("v2"), "v1", ["v1"], ["switch-failed"]),
}


def _drive(world: WarmWorld, step: int | None = None) -> None:
    """Lambda's retries of the upload and the workflow's steps, each retried when it dies; ``step``: the step
    attempt to go on from (the upload is done)."""
    if step is None:
        for _ in range(30):  # a dead invocation's lock lapses after HYPERWARM_LOCK_SECONDS
            try:
                world.upload("v2", 1)
                break
            except (Crash, TransientError):
                world.cluster.tick(60)
    for attempt in range(step or 0, 300):  # a step that dies is retried (Retry); one that finds the lock held waits
        mw.mark(world, len(world.calls), attempt)
        try:
            answer = world.step("v2")
        except (Crash, TransientError):
            world.cluster.tick(60)
            continue
        if answer["phase"] in ("done", "failed"):
            return
        world.cluster.tick(answer["wait_seconds"])


@functools.cache
def _uncrashed(scenario: str) -> WarmWorld:
    """The scenario's whole rollout without a crash: what every crashed run must end as (marked before each step)."""
    world = WarmWorld(marks=[])
    SCENARIOS[scenario][0](world.cluster)
    _drive(world)
    return world


@pytest.mark.parametrize(("scenario", "crash_at", "when"), [
    (scenario, n, when) for scenario in SCENARIOS for n in range(len(_uncrashed(scenario).calls))
    for when in ("before", "after")])
def test_a_crash_at_any_call_of_any_port_ends_as_the_same_rollout_without_one(scenario: str, crash_at: int,
                                                                             when: str) -> None:
    """The process dies at one call of a Kubernetes, state-table, dead-letter or StartExecution port, before
    it runs or after it went through; the retries carry on. The end is the one the scenario has without a
    crash: v2 serving alone, or v1 serving with its copy alone, and one letter id per failure."""
    setup, serves, kept, reasons = SCENARIOS[scenario]
    resumed = mw.resume(_uncrashed(scenario).marks or [], crash_at)
    if resumed is None:  # it dies in the upload: from the start
        world, step = WarmWorld(), None
        setup(world.cluster)
    else:
        world, step = resumed
    world.crash = (crash_at, when)
    _drive(world, step)
    assert world.cluster.reads() == serves, world.letters
    assert {p.version for p in world.cluster.pods} == {serves}
    assert world.cluster.kept() == kept
    assert sorted({(letter["letter_id"], letter["reason"]) for letter in world.letters}) == sorted(
        {(letter["letter_id"], letter["reason"]) for letter in _uncrashed(scenario).letters}), world.letters
    assert list(dict.fromkeys(letter["reason"] for letter in world.letters)) == reasons
    assert "pending" not in world.record()
    world.assert_safe()


# -- each guard alone ----------------------------------------------------------------------------------------------

def test_the_filler_never_drops_a_version_a_pod_still_mounts_even_a_terminating_one() -> None:
    """``warm.keep`` on its own: asked to keep v2 alone while a terminating pod reads v1, it keeps v1 too."""
    from cluster_model import ClusterKube

    from hyperwarm.functions.cache_refresh.targets import warm

    world = WarmWorld(cluster(terminate_seconds=600))
    new = layout.Version("v2", mw.BUCKET, f"{mw.PREFIX}/v2")
    world.cluster.replicas_override = 0  # the deployment scales in: its pods terminate, reading v1 till they end
    world.cluster.tick(5)
    assert world.cluster.pods and all(p.terminating_until for p in world.cluster.pods)
    assert warm.keep(ClusterKube(world.cluster), TARGET, [new]) == ["v1"]
    assert world.cluster.kept() == ["v1", "v2"]
    world.cluster.tick(700)  # the pod is gone
    assert warm.keep(ClusterKube(world.cluster), TARGET, [new]) == []
    assert world.cluster.kept() == ["v2"]


def test_a_rollout_is_not_complete_while_a_pod_of_another_version_remains_whatever_the_status_says() -> None:
    from cluster_model import ClusterKube

    from hyperwarm.functions.cache_refresh.targets import warm

    world = WarmWorld(cluster(terminate_seconds=600))
    world.upload("v2", 1)
    while world.record()["pending"]["phase"] == "staging":
        world.cluster.tick(world.step("v2")["wait_seconds"])
    world.step("v2")
    generation = world.record()["pending"]["generation"]
    while sum(1 for p in world.cluster.pods if p.version == "v2" and world.cluster._ready(p)) < 4:
        world.cluster.tick(5)
    assert any(p.version == "v1" and p.terminating_until for p in world.cluster.pods), "an old pod still terminates"
    world.cluster.deployment["status"] = {"state": "DeploymentComplete", "observedGeneration": generation,
                                          "replicas": 4}
    progress = warm.rollout(ClusterKube(world.cluster), TARGET, "v2", generation)
    assert progress.state == "running" and "of other versions left" in progress.words


def test_pods_placed_where_their_version_is_not_ready_are_counted_cold_in_the_record_and_metric() -> None:
    """Someone edits the deployment's affinity mid-switch (the ready label no longer required) and an empty node
    joins: pods land there cold. The function counts each such pod once."""
    world = WarmWorld()
    world.upload("v2", 1)
    edited = {"done": False}

    def edit(number: int) -> None:
        pending = world.record()["pending"]
        if not edited["done"] and pending.get("generation") is not None:
            edited["done"] = True
            spec = world.cluster.deployment["spec"]
            terms = spec["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
            terms[0]["matchExpressions"] = [e for e in terms[0]["matchExpressions"]
                                            if not e["key"].startswith(layout.LABEL_DOMAIN)]
            for name in list(world.cluster.nodes):
                world.cluster.remove_node(name) if name != "node-0" else None
            world.cluster.add_node("node-empty")
            world.cluster.nodes["node-empty"].filler_running = False
    assert world.run("v2", each=edit) in ("done", "failed")
    assert world.cluster.cold_starts
    cold = world.record()["last_rollout"]["cold_pods"]
    assert cold >= 1 and world.metric("RefreshColdPods") == [float(cold)]


@pytest.mark.parametrize("field, value", [
    ("location", "models/other/v2"), ("bucket", "attacker-bucket"), ("version", "v2; rm -rf"),
    ("serving", {"version": "v1", "bucket": "attacker-bucket", "location": "models/llama/v1"}),
    ("event", "{}"),
])
def test_a_rollout_record_rewritten_in_the_table_moves_nothing(field: str, value: Any) -> None:
    """A table writer points the rollout in flight elsewhere: the step checks the record it reads back as the gate
    checks an upload, ends the rollout without acting on anything it names, and says so in a letter."""
    world = WarmWorld()
    world.upload("v2", 1)
    world.step("v2")
    item = world.record()
    world.store.write(StateTable.key(TARGET.id), {**item, "pending": {**item["pending"], field: value}})
    world.run("v2")  # the rollout's own execution steps on (a record of another version: it ends at once)
    world.reconcile(2)  # which settles what the execution left, and sweeps
    assert world.cluster.reads() == "v1" and world.cluster.kept() == ["v1"]
    assert [letter["reason"] for letter in world.letters] == ["refused-record"]
    record = world.record()
    assert record["last_rollout"]["reason"] == "refused-record" and record.get("current_version") != "v2"
    assert world.cluster.sources <= {(mw.BUCKET, f"{mw.PREFIX}/v1"), (mw.BUCKET, f"{mw.PREFIX}/v2")}
    world.assert_safe()


@pytest.mark.parametrize("pin", [None, "", "not-a-digest"])
def test_a_rollout_record_without_its_manifest_pin_fills_nothing(pin: str | None) -> None:
    """A table writer drops the pin from the rollout in flight (so the filler would fill whatever manifest the bucket
    holds by then): the next step refuses the record, and no filler is ever told to keep the version unpinned."""
    world = WarmWorld()
    world.upload("v2", 1)
    world.step("v2")
    item = world.record()
    pending = {k: v for k, v in item["pending"].items() if k != "manifest_sha256"}
    world.store.write(StateTable.key(TARGET.id), {**item, "pending": {
        **pending, **({} if pin is None else {"manifest_sha256": pin})}})
    world.run("v2")
    world.reconcile(2)
    assert world.cluster.reads() == "v1" and world.cluster.kept() == ["v1"]
    assert "v2" not in world.cluster.unpinned
    assert [letter["reason"] for letter in world.letters] == ["refused-record"]
    assert "pins no admitted manifest" in world.letters[0]["message"]
    world.assert_safe()


def test_a_manifest_changed_between_staging_and_the_switch_is_not_switched_to() -> None:
    """The bucket writer rewrites the staged version's manifest (or its signature fails now): before the deployment
    moves, the version passes the whole gate again, and its manifest must be the one the filler was pinned to."""
    world = WarmWorld()
    world.upload("v2", 1)
    world.gate = lambda version: "0" * 64
    assert world.run("v2") == "failed"
    assert world.cluster.reads() == "v1" and world.cluster.kept() == ["v1"]
    assert [letter["reason"] for letter in world.letters] == ["refused-record"]
    assert "changed since it was admitted" in world.letters[0]["message"]
    world.assert_safe()


def test_a_rollout_an_earlier_release_began_ends_with_a_letter_and_the_cluster_untouched() -> None:
    """An unversioned item (an earlier release's) with a warm rollout in flight, staged in stand-alone caches: this
    release cannot continue it (tests/formats/state/unversioned.hyperpod-warm-rollout.json)."""
    import json
    from pathlib import Path

    sample = json.loads((Path(__file__).parents[1] / "formats" / "state" /
                         "unversioned.hyperpod-warm-rollout.json").read_text())
    world = WarmWorld()
    world.store.write(StateTable.key(TARGET.id), {**sample, "pk": StateTable.key(TARGET.id), "rev": 0,
                                                  "lock_expires": int(world.cluster.now) - 1})
    before = (world.cluster.deployment, world.cluster.filler)
    assert world.step("v4")["phase"] == "failed"  # its execution (the earlier release's) names none of ours
    assert world.letters == []
    world.reconcile()  # the reconciliation ends it
    assert [(letter["reason"], letter["event"]["id"]) for letter in world.letters] == [("rollout-superseded", "s3-v4")]
    assert "replay this letter" in world.letters[0]["message"]
    assert (world.cluster.deployment, world.cluster.filler) == before and not [
        c for c in world.cluster.calls if c.startswith("patch")]
    record = world.record()
    assert "pending" not in record and record["current_version"] == "v3"
