# shellcheck shell=bash
# download_progress: the download step's progress line (spark_llm.plan.weights.render_obtain, kind huggingface).
# Not run on its own: the plan reads it as text (spark_llm.plan.scripts.bash_lib, which drops this header up to
# the first empty line) after weights.sh, whose say, human and PROGRESS_SECONDS it uses.
# Uses: WHAT, MODEL_PATH and last_bytes (the size at the previous line), set by the step.

download_progress() {
  local bytes
  bytes=$(du -sb --exclude=.cache "$MODEL_PATH" | cut -f1)
  say "$WHAT: $(human "$bytes") in $MODEL_PATH (+$(human $(( (bytes - last_bytes) / PROGRESS_SECONDS )))/s)"
  last_bytes=$bytes
}
