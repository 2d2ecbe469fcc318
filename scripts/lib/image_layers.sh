# shellcheck shell=bash
# `send_image`: a worker's image step (spark_llm.plan.image) on the head moves only the layers the worker lacks;
# spark_llm/plan/image/layers.py says how and why. Not run on its own: the plan reads it as text
# (spark_llm.plan.scripts.bash_lib drops this header up to the first empty line).
# Uses: NODE, IMAGE_REF, HEAD_IMAGE_ID, and from scripts/lib/image.sh and image_transfer.sh: fail, on_node,
# transfer, transfer_layers.
# Each image on the node, one line: its ID, then its layers' diff IDs, bottom first.

node_images() {
  # shellcheck disable=SC2016  # expanded by the node's shell
  on_node sh -c 'ids=$(docker image ls -aq --no-trunc | sort -u); [ -z "$ids" ] ||
    docker image inspect --format "{{.Id}} {{range .RootFS.Layers}}{{.}} {{end}}" $ids'
}

send_image() {
  local images held_image n held=0 layers
  images=$(node_images) || fail "$NODE: listing its images (docker image ls, docker image inspect) failed;" \
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
