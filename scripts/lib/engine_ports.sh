# shellcheck shell=bash
# A new engine group's first step on each of its nodes (components/engine_group.py, `take-ports`), before its memory
# admission: another spark-llm engine on this node that holds this group's ports goes first. A model renamed (other
# than the first) is a new group on the old model's ports, and Pulumi deletes the old group only after the new one
# started: its engine would find the ports taken ("Address already in use"), and its admission would count the old
# engine's memory as taken. The stack's models never share a port on a node (spark_llm.config.models), so an engine
# that holds one of them belongs to a model the stack no longer lists. Removed, not only stopped: its supervisor
# leaves an absent member to `pulumi up`, and the docker provider's later delete of it tolerates it gone. Not run on
# its own: the plan reads it as text (spark_llm.plan.scripts.bash_lib drops this header up to the first empty line).
# `take_ports NODE OWN_CONTAINER PORT...`: each engine container (label spark-llm.role) but OWN_CONTAINER whose
# command line names one of the ports (`--port 30001`, `HOST:20001`, `--x=30001`) is stopped and removed, a line
# each; a last line says what was found.

take_ports() {
  local node=$1 own=$2 id name args port taken=""
  shift 2
  for id in $(docker ps -aq --filter label=spark-llm.role); do
    # Another group's container may be replaced or removed meanwhile (the steps of the stack's groups run at once):
    # one gone between the listing and its reading holds no port.
    name=$(docker inspect -f '{{.Name}}' "$id" 2>/dev/null) || continue
    name=${name#/}
    [ "$name" = "$own" ] && continue
    args=" $(docker inspect -f '{{join .Args " "}}' "$id" 2>/dev/null) " || continue
    for port in "$@"; do
      if [[ "$args" =~ [[:space:]:=]${port}[[:space:]] ]]; then
        docker stop -t 10 "$id" >/dev/null 2>&1 || true
        docker rm -f "$id" >/dev/null 2>&1 || true
        echo "removed $name on $node: the engine of a model the stack no longer lists, on port $port, which this model takes"
        taken="$taken $name"
        break
      fi
    done
  done
  [ -n "$taken" ] || echo "no other engine holds port(s) $* on $node"
}
