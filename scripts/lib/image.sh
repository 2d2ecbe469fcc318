# shellcheck shell=bash
# The bash functions of every engine-image step (spark_llm.plan.image): where a command runs, the node's platform,
# the image's facts and the check that ends every step. Not run on its own: the plan reads it as text
# (spark_llm.plan.scripts.bash_lib, which drops this header up to the first empty line) and puts it in each step's
# script, which runs from stdin.
# Uses, set by the step before calling: NODE, IMAGE_REF, PLATFORM, ABSENT_HINT, MISMATCH_HINT, and NODE_SSH: empty
# when the step runs on the node, else the ssh (and its user@host) that reaches the node: over the fabric from
# the head (a worker's transfer), or over plain OpenSSH from the operator's machine (source operator).
# Its own error function is `fail`, not the weights' `die` (scripts/lib/weights.sh): an image error names no step.

fail() { echo "$*" >&2; exit 1; }

# `on_node CMD...` runs CMD on the node the step is about: here when NODE_SSH is empty, else through NODE_SSH (an
# ssh command and its user@host, set by the step). ssh joins its arguments into one command line for the remote
# shell: each word is quoted once more. Its stdin is /dev/null: the script itself arrives on bash's stdin, and a
# command that reads stdin (ssh does) would swallow the rest of it.
on_node() {
  if ((${#NODE_SSH[@]})); then
    "${NODE_SSH[@]}" "${*@Q}" </dev/null
  else
    "$@" </dev/null
  fi
}

# docker info says x86_64/aarch64 for a machine, docker image inspect amd64/arm64 for an image: compare the latter.
arch_name() {
  case "$1" in
    x86_64 | amd64) echo amd64 ;;
    aarch64 | arm64) echo arm64 ;;
    *) echo "$1" ;;
  esac
}

# The platform docker runs containers as on the node, e.g. linux/arm64.
node_platform() {
  local info
  info=$(on_node docker info --format '{{.OSType}}/{{.Architecture}}' 2>&1) \
    || fail "$NODE: \`docker info\` failed: $info. Is docker running there, and is the login user in the docker group?"
  echo "${info%%/*}/$(arch_name "${info#*/}")"
}

require_node_platform() {
  local found
  found=$(node_platform)
  [ "$found" = "$PLATFORM" ] || fail "$NODE is $found (docker info on $NODE), but spark-llm:image.platform is" \
    "$PLATFORM. Nothing was started. A DGX Spark is linux/arm64: set spark-llm:image.platform to the nodes'" \
    "platform ($found) if this cluster is meant to be $found, or deploy to nodes of the image's platform."
}

# "ID OS/ARCH" of IMAGE_REF on the node; nothing when the node does not have it.
image_facts() {
  on_node docker image inspect --format '{{.Id}} {{.Os}}/{{.Architecture}}' "$IMAGE_REF" 2>/dev/null || true
}

# The step's last line, "image ID OS/ARCH", once IMAGE_REF is on the node, is PLATFORM and has ID $1 (if given).
verify() {
  local expected=${1:-} facts id image_platform
  facts=$(image_facts)
  [ -n "$facts" ] || fail "$NODE: image $IMAGE_REF is not there. $ABSENT_HINT"
  id=${facts%% *}
  image_platform=${facts#* }
  [ "$image_platform" = "$PLATFORM" ] || fail "$NODE: image $IMAGE_REF ($id) is $image_platform, but" \
    "spark-llm:image.platform is $PLATFORM. Use an image built for $PLATFORM" \
    "(docker pull --platform $PLATFORM ...), or fix the platform."
  [ -z "$expected" ] || [ "$id" = "$expected" ] || fail "$NODE has $IMAGE_REF as $id, but the head has" \
    "$expected; every node must run the same image. $MISMATCH_HINT"
  echo "image $id $image_platform"
}
