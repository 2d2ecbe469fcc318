# shellcheck shell=bash
# The one reading of a container's state on a node (spark_llm.plan.observation.ENGINE_STATE_FUNCTION): the
# program's probe, `spark-llm status` and `spark-llm preflight` all carry it. Not run on its own: the plan reads it
# as text (spark_llm.plan.scripts.bash_lib drops this header up to the first empty line).
# `engine_state CONTAINER` prints `engine<TAB>JSON` (plan.observation.parse_probe reads it; status "absent" when
# there is no such container), or `docker<TAB>WHY` and returns 1 when the node's Docker engine does not answer.

engine_state() {
  local out
  # docker inspect prints an empty line before failing on a missing container: its exit code decides.
  if out=$(docker inspect -f '{"status": "{{.State.Status}}", "exit_code": {{.State.ExitCode}}, "container_id": "{{.Id}}", "image_id": "{{.Image}}", "started_at": "{{.State.StartedAt}}", "finished_at": "{{.State.FinishedAt}}", "oom_killed": {{.State.OOMKilled}}, "labels": {{json .Config.Labels}}}' "$1" 2>/dev/null); then
    printf "engine\t%s\n" "$out"
    return 0
  fi
  # No such container, or no Docker engine to ask: a stopped engine must not read as "no container, no image",
  # that is a fault, named as such. Asked only here: a node that runs the container answers with one docker call.
  if ! out=$(docker version -f '{{.Server.Version}}' 2>&1 >/dev/null); then
    printf "docker\t%s\n" "$(printf '%s' "$out" | tr -s '\t\n' '  ')"
    return 1
  fi
  printf 'engine\t{"status": "absent"}\n'
}
