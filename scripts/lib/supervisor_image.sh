# shellcheck shell=bash
# Whether an image can run the group's supervisor (scripts/supervisor.py): python3 to run it and, when the group has
# workers, an ssh client to reach them. Run on the head by the supervisor's image-check step (components/supervisor.py)
# before `pulumi up` stops anything, once per image; spark_llm.plan.supervisor.image_check_script gives the arguments.
# Not run on its own: the plan reads it as text (spark_llm.plan.scripts.bash_lib drops this header).
# `supervisor_image_check IMAGE NEEDS_SSH WHAT` prints what the image has, or fails naming what it lacks (WHAT: the
# image as the operator named it, and by which key).

supervisor_image_check() {
  local image=$1 needs_ssh=$2 what=$3 missing err
  # docker's own warnings (a platform mismatch) go to stderr: kept apart from the list of what is missing.
  err=$(mktemp)
  # The image's own shell, nothing pulled, no network: only what is inside the image counts.
  # shellcheck disable=SC2016 # $1 is the inner shell's
  if ! missing=$(docker run --rm --pull never --network none --entrypoint sh "$image" -c \
    'command -v python3 >/dev/null || printf "python3 "; [ "$1" = 0 ] || command -v ssh >/dev/null || printf "ssh "' \
    sh "$needs_ssh" 2>"$err"); then
    echo "spark-llm:supervisor.image: could not run a shell in the supervisor's image $what on the head:" >&2
    sed 's/^/  /' "$err" >&2
    rm -f "$err"
    echo "Name an image with sh, python3 and an ssh client, or set spark-llm:supervisor.enabled to false." >&2
    echo "Nothing on the nodes was stopped." >&2
    return 1
  fi
  rm -f "$err"
  if [ -n "$missing" ]; then
    missing=${missing% }
    echo "spark-llm:supervisor.image: the supervisor's image $what has no ${missing// / and } (the supervisor runs" \
      "scripts/supervisor.py with python3 and reaches the workers with ssh)." >&2
    echo "Name an image that has both, e.g. \`pulumi config set --path supervisor.image" \
      "registry.example/engine-with-ssh:1\` (the engine image with openssh-client added), or set" \
      "spark-llm:supervisor.enabled to false. Nothing on the nodes was stopped." >&2
    return 1
  fi
  echo "supervisor image $what: python3$([ "$needs_ssh" = 0 ] || echo ' and ssh') found"
}
