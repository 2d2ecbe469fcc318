"""Pure: bash that moves the engine image head -> worker over the fabric: only the layers the worker lacks.

A worker's image step (spark_llm.plan.image) runs on the head. When the worker lacks the head's image ID, `send_image`:

1. asks the worker, in one ssh, for each image it holds (untagged ones too) its ID and its layer list (diff IDs,
   bottom first);
2. when one of them is the head's ID (its tag was removed while the running engine holds it), tags it: nothing
   moves;
3. else counts the image's layers the worker holds, bottom up (docker keeps a layer by its chain, the layers below
   it included, so the count is the longest prefix of the head's list that one of the worker's images starts with):
   - none (every first deployment): `docker save | docker load` of the whole image, one stream over the pinned
     fabric ssh (`transfer` in spark_llm.plan.image);
   - some: the same stream through LAYER_FILTER on the head (python3), which drops the `layer.tar` of every layer
     the worker holds. `docker load` takes an archive whose manifest lists layers it does not carry as long as
     the engine has them (it looks each layer up by its chain ID before it opens the file), so only the new
     layers cross the fabric. The filter knows a layer by the sha256 of its tar (the diff ID), so it spools one
     layer's tar at a time to a temp file on the head while hashing it, then sends it or drops it;
4. the step's verify then checks the worker's image ID is the head's (docker load checks every layer's diff ID
   against the image's config, whose digest is the ID).

Why not a registry (this module's first design): a `docker push` into a registry on the head and a
`docker pull` on the worker moved a changed layer alone too, but the push gzips every layer on one core: a first
deployment ran at 0.47x the speed of `docker save | docker load` (bench/results/transfer-20261202T030202Z.json).
Uploading the layers uncompressed into the registry (no gzip) still made the upload and the pull two passes, one
after the other: 18.0 s against 11.0 s for save | load on the sim (one pair, back to back, by hand). Sending the
first image by `docker load` and later ones through a registry fails on Debian's docker 20.10: a pull skips only
layers docker once pulled under the same digest, so the first changed image after a load pulled every layer
again. `docker load` of the filtered archive skips the layers a worker holds however they arrived.
"""

from __future__ import annotations

# Progress lines, shared with the `docker save | docker load` path. `watch_bytes PID WHAT COUNTER [TOTAL [HOW]]`
# waits for PID, printing every PROGRESS_SECONDS what COUNTER (a function printing bytes so far) says, with the
# percentage and time left when TOTAL is known (HOW: `about` or `at most`); returns PID's exit status.
PROGRESS_FUNCTIONS = r"""# 1234567 -> "1.2 MB" (decimal units, as the weights' progress lines).
human() {
  local n=$1 unit=B div=1
  if ((n >= 1000000000)); then unit=GB div=1000000000; elif ((n >= 1000000)); then unit=MB div=1000000
  elif ((n >= 1000)); then unit=kB div=1000; fi
  if ((div == 1)); then echo "$n B"; else echo "$((n / div)).$((n % div * 10 / div)) $unit"; fi
}

progress_line() {
  local what=$1 moved=$2 elapsed=$3 total=${4:-0} how=${5:-about} rate left
  ((elapsed > 0)) || elapsed=1
  rate=$((moved / elapsed))
  if ((total > 0)); then
    if ((moved >= total)); then
      left="all sent"  # the receiving docker still unpacks
    elif ((rate == 0)); then
      left="?:?? left"
    else
      left=$(((total - moved) / rate))
      left="$((left / 60)):$(printf '%02d' $((left % 60))) left"
    fi
    echo "image $NODE: $((moved >= total ? 100 : 100 * moved / total))% $(human "$moved") of $how" \
      "$(human "$total"), $(human "$rate")/s, $left, $what"
  else
    echo "image $NODE: $(human "$moved"), $(human "$rate")/s, $what"
  fi
}

watch_bytes() {
  local pid=$1 what=$2 counter=$3 total=${4:-0} how=${5:-about} start=$SECONDS printer status=0
  # The lines come from a side process: the wait below returns the moment PID ends (a polling loop would add up
  # to its period to every transfer). Its sleep holds no output: killed mid-sleep, the side process leaves
  # the sleep behind, which must not keep the step's output open.
  (
    while sleep "$PROGRESS_SECONDS" >/dev/null 2>&1; do
      progress_line "$what" "$("$counter")" $((SECONDS - start)) "$total" "$how"
    done
  ) &
  printer=$!
  wait "$pid" || status=$?
  kill "$printer" 2>/dev/null || true
  wait "$printer" 2>/dev/null || true
  return "$status"
}
"""


# python3 on the head, between `docker save` and the fabric: argv are the diff IDs to send; every other layer's
# `layer.tar` is dropped from the archive (the rest of it, small, passes through). A layer that appears twice in an
# image is a symlink to the first copy in the archive; it passes through, and the copy is sent if either is needed.
LAYER_FILTER = r"""import hashlib, sys, tarfile, tempfile
keep = set(sys.argv[1:])
src = tarfile.open(fileobj=sys.stdin.buffer, mode="r|")
out = tarfile.open(fileobj=sys.stdout.buffer, mode="w|", format=tarfile.PAX_FORMAT)
for member in src:
    data = src.extractfile(member) if member.isfile() else None
    if data is None or not member.name.endswith("/layer.tar"):
        out.addfile(member, data)
        continue
    with tempfile.TemporaryFile() as spool:
        digest = hashlib.sha256()
        while chunk := data.read(1 << 20):
            digest.update(chunk)
            spool.write(chunk)
        if "sha256:" + digest.hexdigest() in keep:
            spool.seek(0)
            out.addfile(member, spool)
out.close()
"""

# Runs on the head (the step's `on_node` reaches the worker over the fabric). Uses NODE, IMAGE_REF, HEAD_IMAGE_ID,
# die, on_node and `transfer`/`transfer_layers` (spark_llm.plan.image).
_SEND = r"""# Each image on the node, one line: its ID, then its layers' diff IDs, bottom first.
node_images() {
  # shellcheck disable=SC2016  # expanded by the node's shell
  on_node sh -c 'ids=$(docker image ls -aq --no-trunc | sort -u); [ -z "$ids" ] ||
    docker image inspect --format "{{.Id}} {{range .RootFS.Layers}}{{.}} {{end}}" $ids'
}

send_image() {
  local images held_image n held=0 layers
  images=$(node_images) || die "$NODE: listing its images (docker image ls, docker image inspect) failed;" \
    "nothing was sent. Run pulumi up again."
  read -ra layers <<<"$(docker image inspect --format '{{range .RootFS.Layers}}{{.}} {{end}}' "$IMAGE_REF")"
  while read -ra held_image; do
    ((${#held_image[@]})) || continue
    if [ "${held_image[0]}" = "$HEAD_IMAGE_ID" ]; then
      on_node docker tag "$HEAD_IMAGE_ID" "$IMAGE_REF"
      # e.g. untagged: its tag was removed while an engine ran it
      echo "$NODE holds $HEAD_IMAGE_ID, not as $IMAGE_REF: tagged it, sent nothing"
      return
    fi
    n=0
    while ((n < ${#layers[@]} && n + 1 < ${#held_image[@]})) && [ "${held_image[n + 1]}" = "${layers[n]}" ]; do
      n=$((n + 1))
    done
    ((n <= held)) || held=$n
  done <<<"$images"
  if ((held == 0)); then
    echo "$NODE holds none of the image's ${#layers[@]} layers: sending all of it"
    transfer
  else
    echo "$NODE holds $held of the image's ${#layers[@]} layers: sending the other $((${#layers[@]} - held))"
    transfer_layers "${layers[@]:held}"
  fi
}
"""


def send_functions() -> str:
    """Bash defining `send_image` (and what it uses), for a worker's step on the head.

    Needs, defined before it: NODE, IMAGE_REF, HEAD_IMAGE_ID, die, on_node, and `transfer` / `transfer_layers`
    (spark_llm.plan.image: the whole image, or only the given layers, docker save | docker load).
    """
    return "LAYER_FILTER=" + _q(LAYER_FILTER) + "\n" + _SEND


def _q(value: str) -> str:
    return "'" + value.replace("'", "'\\''") + "'"
