"""What a `pulumi` command line asks of the engine group (issue 31, 7): a `--target` into it refused, a `--replace`
of a member's container a restart of the whole group in order."""

from __future__ import annotations

from spark_llm.plan.cli_flags import engine_component, group_request

GROUP = "urn:pulumi:sim::spark-llm::spark-llm:components:SparkCluster$spark-llm:components:EngineGroup"
WORKER = f"{GROUP}$docker:index/container:Container::spark-engine-worker-1"
HEAD = f"{GROUP}$docker:index/container:Container::spark-engine-head"
STOP = f"{GROUP}$pulumi-command:remote:Command::spark-engine-stop-head"
WEIGHTS = "urn:pulumi:sim::spark-llm::spark-llm:components:SparkCluster$spark-llm:components:ModelWeights$x::w"
MEMBERS = ["head", "worker-1"]


def test_a_target_into_the_engine_group_or_a_pattern_is_refused_before_anything_runs():
    for argv in (
        ["pulumi", "up", "--yes", "--target", WORKER],
        ["pulumi", "preview", "-t", STOP],
        ["pulumi", "up", f"--target-replace={HEAD}"],
        ["pulumi", "up", "--target", "**spark-engine**"],
    ):
        request = group_request(argv, MEMBERS)
        assert request.refusal is not None, argv
        assert "one member would restart alone" in request.refusal and "`spark-llm restart`" in request.refusal
        assert request.refusal.startswith(f"`pulumi {argv[1]} --target ")


def test_a_replace_of_a_member_restarts_the_group_and_other_commands_ask_nothing():
    assert group_request(["pulumi", "up", "--replace", WORKER, "--replace", WORKER], MEMBERS).replaced == ("worker-1",)
    assert group_request(["pulumi", "up", "--replace", HEAD], MEMBERS).replaced == ("head",)
    # Outside the group: a target elsewhere is the user's business; a step of the group replaced is no member.
    assert group_request(["pulumi", "up", "--target", WEIGHTS], MEMBERS).refusal is None
    assert group_request(["pulumi", "up", "--replace", STOP], MEMBERS).replaced == ()
    assert group_request(["pulumi", "destroy", "--target", WORKER], MEMBERS).refusal is None
    assert group_request([], MEMBERS).refusal is None


def test_among_several_models_a_replace_restarts_the_group_whose_container_it_names_and_no_other():
    """`spark-llm restart --model embed` replaces `spark-embed-engine-head`: the embed group restarts in order;
    the big model's group, on the same head, is not asked to."""
    small = f"{GROUP}$docker:index/container:Container::{engine_component('embed')}-head"
    argv = ["pulumi", "up", "--replace", small]
    assert engine_component(None) == "spark-engine" and engine_component("embed") == "spark-embed-engine"
    assert group_request(argv, ["head"], engine_component("embed")).replaced == ("head",)
    assert group_request(argv, MEMBERS, engine_component("qwen")).replaced == ()
    assert group_request(argv, MEMBERS).replaced == ()
