"""Pure: bash that moves the engine image head -> worker over the fabric: only the layers the worker lacks.

A worker's image step (spark_llm.plan.image.steps) runs on the head. When the worker lacks the head's image ID,
`send_image`:

1. asks the worker, in one ssh, for each image it holds (untagged ones too) its ID and its layer list (diff IDs,
   bottom first);
2. when one of them is the head's ID (its tag was removed while the running engine holds it), tags it: nothing
   moves;
3. else counts the image's layers the worker holds, bottom up (docker keeps a layer by its chain, the layers below
   it included, so the count is the longest prefix of the head's list that one of the worker's images starts with):
   - none (every first deployment): `docker save | docker load` of the whole image, one stream over the pinned
     fabric ssh (`transfer` in scripts/lib/image_transfer.sh);
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

from spark_llm.plan.scripts import bash_lib

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


def send_functions() -> str:
    """Bash defining `send_image` (scripts/lib/image_layers.sh), for a worker's step on the head.

    Needs, defined before it: NODE, IMAGE_REF, HEAD_IMAGE_ID, fail, on_node, and `transfer` / `transfer_layers`
    (spark_llm.plan.image.steps: the whole image, or only the given layers, docker save | docker load).
    """
    return "LAYER_FILTER=" + _q(LAYER_FILTER) + "\n" + bash_lib("image_layers")


def _q(value: str) -> str:
    return "'" + value.replace("'", "'\\''") + "'"
