# shellcheck shell=bash
# The supervisor's own ssh key (docs/security.md): made on the head, allowed on each worker to run only what
# scripts/supervisor_allow.sh allows. Run by the supervisor's key step on the head and its authorize step on each
# worker (components/supervisor.py); spark_llm.plan.supervisor_key gives the arguments.
# Not run on its own: the plan reads it as text (spark_llm.plan.scripts.bash_lib drops this header).
# `supervisor_key_make DIR COMMENT`: a new ed25519 key pair in DIR (0700), the old one gone; prints the public line.
# `supervisor_key_allow LINE`: LINE in ~/.ssh/authorized_keys once; with $SPARK_LLM_PHASE=delete, that line removed
# (and only that line: the file's other keys, the operator's and the fabric key, are left as they were).
# `supervisor_key_live ALLOW OPTIONS`: the digest of what the worker's step leaves there, read-only (the step records
# it, the probe reads it again: spark_llm.plan.drift): the authorized_keys lines that start with OPTIONS (the key's
# `restrict,command="..."`) and the allow script at ALLOW.

supervisor_key_make() {
  local dir=$1 comment=$2
  if ! command -v ssh-keygen >/dev/null; then
    echo "the supervisor makes its own ssh key on the head with ssh-keygen, and the head has none: install" \
      "openssh-client there (it comes with openssh-server), or set spark-llm:supervisor.enabled to false" >&2
    return 1
  fi
  # The private key is made here and never leaves the head: no copy in a command line, stdout or Pulumi state.
  umask 077
  mkdir -p "$dir"
  chmod 0700 "$dir"
  rm -f "$dir/id_ed25519" "$dir/id_ed25519.pub"
  ssh-keygen -q -t ed25519 -N '' -C "$comment" -f "$dir/id_ed25519" </dev/null >/dev/null
  chmod 0600 "$dir/id_ed25519"
  cat "$dir/id_ed25519.pub"
}

supervisor_key_allow() {
  local line=$1 file="$HOME/.ssh/authorized_keys" target tmp
  if [ "${SPARK_LLM_PHASE:-create}" = delete ]; then
    [ -f "$file" ] || return 0
    # The file a link points to is edited in its place; a temp file renamed over it, so sshd never reads half a file
    # (another step may be logging in on this node at that moment).
    target=$(readlink -f "$file")
    grep -qxF -- "$line" "$target" || { echo "the supervisor's key was not in $file (nothing to remove)"; return 0; }
    tmp=$(mktemp "$(dirname "$target")/.spark-llm.XXXXXX")
    grep -vxF -- "$line" "$target" >"$tmp" || [ $? -eq 1 ]
    chmod --reference="$target" "$tmp"
    mv -f "$tmp" "$target"
    echo "the supervisor's key removed from $file"
    return 0
  fi
  mkdir -p "$HOME/.ssh"
  chmod 0700 "$HOME/.ssh"
  if [ -f "$file" ] && grep -qxF -- "$line" "$file"; then
    echo "the supervisor's key is in $file"
    return 0
  fi
  if [ ! -e "$file" ]; then
    (umask 077 && touch "$file")
  fi
  # A file whose last line has no newline would glue the key to it.
  if [ -s "$file" ] && [ -n "$(tail -c1 "$file")" ]; then
    echo >>"$file"
  fi
  printf '%s\n' "$line" >>"$file"
  echo "the supervisor's key added to $file (it may run only docker inspect/start/stop/logs on the engine)"
}

supervisor_key_live() {
  local allow=$1 options=$2
  # ENVIRON, not `awk -v`: -v would read backslash escapes in the value.
  {
    OPTIONS="$options " awk 'index($0, ENVIRON["OPTIONS"]) == 1' "$HOME/.ssh/authorized_keys" 2>/dev/null || true
    cat "$allow" 2>/dev/null || true
  } | sha256sum | cut -d' ' -f1
}
