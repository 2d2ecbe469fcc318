#!/usr/bin/env bash
# make demo: a simulated dual-Spark cluster, `pulumi up --stack sim`, and one completion from the endpoint.
#
# Usage:   tools/demo.sh            (after `. tools/env.sh`; `make demo` does both)
# Env:     WORKERS (default 1)      number of simulated workers
# Outputs: the pulumi up log, then the completion the stand-in engine served across head and workers.
# Nothing here talks to anything but loopback and the sim's own containers.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
say() { printf '\n==> %s\n' "$*"; }

say "stand-in engine image (a simulator: no model, no GPU)"
# Not a process substitution: a failed build must stop the demo here, with the build's own error above.
built=$(sim/engine/build-image.sh)
image_tar=$(tail -n 1 <<<"$built")

say "simulated cluster: 1 head + ${WORKERS:-1} worker(s)"
# The image spark-llm/standin-engine:sim goes on the head only; `pulumi up` transfers it to the workers.
sim/sim up --workers "${WORKERS:-1}" --load-image "$image_tar" --load-on head --image-tag spark-llm/standin-engine:sim

say "pulumi up --stack sim"
pulumi stack select sim --create --non-interactive >/dev/null
pulumi up --stack sim --yes --non-interactive --skip-preview

endpoint=$(pulumi stack output endpoint --stack sim)
model=$(pulumi stack output model --stack sim)
say "one completion from $endpoint (model $model)"
curl -fsS -m 30 "$endpoint/v1/completions" -H 'Content-Type: application/json' \
  -d "{\"model\": \"$model\", \"prompt\": \"Two DGX Sparks walk into a rack\", \"max_tokens\": 24}"
echo
say "done: 'pulumi destroy --stack sim' stops the engines; 'make sim-down' removes the cluster"
