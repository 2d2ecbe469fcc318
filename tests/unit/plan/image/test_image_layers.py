"""A worker's image step sends only the layers the worker lacks: `docker save` on the head through LAYER_FILTER into
`docker load` on the worker, the whole archive when the worker holds none of them.

Against the stub nodes (tests/unit/image_stubs.py, whose head image has two layers): what reaches the worker's
`docker load` for a worker with no layer, with the bottom layer, with every layer, with the head's image untagged;
the filter itself on a real archive; the progress lines.
"""

from __future__ import annotations

import io
import subprocess
import tarfile
from pathlib import Path

import pytest

from spark_llm.config import parse
from spark_llm.config.group import groups
from spark_llm.plan import deployment as plan
from spark_llm.plan.image import layers as image_layers
from spark_llm.plan.image import steps as image
from spark_llm.plan.scripts import bash_lib
from tests.unit.image_stubs import HEAD_ID, LAYER_TARS, LAYERS, OTHER_ID, save_tar, stub_nodes

TEMPLATE = plan.LAUNCH_TEMPLATE.read_text()
REF = "lmsysorg/sglang:spark"


@pytest.fixture
def stub(tmp_path: Path):
    return stub_nodes(tmp_path)


def worker_step(raw) -> str:
    raw["image"] = dict(raw["image"], mode="transfer", source="head")
    steps = {s.node: s for s in image.image_steps(plan.build_plan(groups(parse(raw))[0], TEMPLATE))}
    return steps["spark-2"].script


def calls(stub) -> str:
    return (stub.state / "calls.log").read_text()


def loaded(stub) -> dict[str, bytes]:
    """The archive the worker's `docker load` read: member name -> content."""
    with tarfile.open(fileobj=io.BytesIO((stub.state / "worker.loaded").read_bytes())) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}  # type: ignore[union-attr]


def layer_tars(archive: dict[str, bytes]) -> list[bytes]:
    return sorted(data for name, data in archive.items() if name.endswith("/layer.tar"))


def test_worker_with_the_bottom_layer_gets_only_the_top_one(raw_config, stub):
    # An older image on the worker, under no tag now: the head's bottom layer, then one of its own.
    (stub.state / "worker.others").write_text(f"{OTHER_ID} {LAYERS[0]} sha256:{'9' * 64}\n")
    out = stub(worker_step(raw_config))
    assert out.returncode == 0, out.stderr
    assert "spark-2 holds 1 of the image's 2 layers: sending the other 1" in out.stdout
    assert "spark-2: sending 1 layers of lmsysorg/sglang:spark (at most 123 MB unpacked)" in out.stdout
    archive = loaded(stub)
    assert layer_tars(archive) == [LAYER_TARS[1]]
    # Everything else docker save wrote goes along: the manifest lists both layers, docker load finds the bottom one.
    assert "manifest.json" in archive and HEAD_ID.removeprefix("sha256:") + ".json" in archive
    assert (stub.state / "worker.image").read_text() == f"{HEAD_ID} linux/arm64\n"
    assert out.stdout.splitlines()[-1] == f"image {HEAD_ID} linux/arm64"


def test_worker_with_no_layer_of_the_image_gets_all_of_it_unfiltered(raw_config, stub):
    (stub.state / "worker.others").write_text(f"{OTHER_ID} sha256:{'9' * 64} {LAYERS[1]}\n")  # same top, other base
    out = stub(worker_step(raw_config))
    assert out.returncode == 0, out.stderr
    assert "spark-2 holds none of the image's 2 layers: sending all of it" in out.stdout
    assert (stub.state / "worker.loaded").read_bytes() == save_tar()  # no filter in the way
    # The stream takes the bulk cipher (AES-GCM); the short calls ride the step's connection with ssh's defaults.
    assert calls(stub).count("ssh cipher aes128-gcm@openssh.com\n") == 1


def test_worker_with_every_layer_but_another_config_gets_no_layer(raw_config, stub):
    (stub.state / "worker.image").write_text(f"{OTHER_ID} linux/arm64\n")
    (stub.state / "worker.layers").write_text(" ".join(LAYERS) + "\n")
    out = stub(worker_step(raw_config))
    assert out.returncode == 0, out.stderr
    assert "spark-2 holds 2 of the image's 2 layers: sending the other 0" in out.stdout
    assert layer_tars(loaded(stub)) == []
    assert (stub.state / "worker.image").read_text() == f"{HEAD_ID} linux/arm64\n"


def test_worker_holding_the_heads_image_untagged_is_tagged_and_sent_nothing(raw_config, stub):
    """`docker rmi -f` while the engine runs: the image stays, under no tag."""
    (stub.state / "worker.others").write_text(f"{HEAD_ID} {' '.join(LAYERS)}\n")
    out = stub(worker_step(raw_config))
    assert out.returncode == 0, out.stderr
    assert f"spark-2 holds {HEAD_ID}, not as {REF}: tagged it, sent nothing" in out.stdout
    assert f"worker docker tag {HEAD_ID} {REF}" in calls(stub)
    assert " load" not in calls(stub)  # the early docker save on the head is stopped unread
    assert out.stdout.splitlines()[-1] == f"image {HEAD_ID} linux/arm64"
    assert calls(stub).endswith("ssh -O exit\n")  # the step's shared ssh connection ends with it


def test_a_worker_whose_images_cannot_be_listed_is_sent_nothing(raw_config, stub):
    script = worker_step(raw_config).replace("on_node sh -c 'ids=", "on_node false && on_node sh -c 'ids=")
    out = stub(script)
    assert out.returncode == 1
    assert "spark-2: listing its images (docker image ls, docker image inspect) failed; nothing was sent" in out.stderr
    assert " load" not in calls(stub)


# ---------- the filter ----------


def run_filter(archive: bytes, *keep: str) -> dict[str, bytes]:
    out = subprocess.run(
        ["python3", "-c", image_layers.LAYER_FILTER, *keep], input=archive, capture_output=True, check=True
    )
    with tarfile.open(fileobj=io.BytesIO(out.stdout)) as tar:
        return {m.name: (tar.extractfile(m).read() if m.isfile() else m.linkname.encode()) for m in tar}  # type: ignore[union-attr]


def test_the_filter_keeps_the_named_layers_and_everything_but_layers():
    full = run_filter(save_tar(), *LAYERS)
    assert layer_tars(full) == sorted(LAYER_TARS)
    top = run_filter(save_tar(), LAYERS[1])
    assert layer_tars(top) == [LAYER_TARS[1]]
    assert set(full) - set(top) == {"f1" + "0" * 62 + "/layer.tar"}  # the bottom layer's directory (image_stubs)
    assert layer_tars(run_filter(save_tar())) == []


def test_the_filter_passes_a_repeated_layers_symlink():
    """docker save writes a layer an image lists twice once, and a symlink to it for the second."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("a/layer.tar")
        info.size = len(LAYER_TARS[0])
        tar.addfile(info, io.BytesIO(LAYER_TARS[0]))
        link = tarfile.TarInfo("b/layer.tar")
        link.type, link.linkname = tarfile.SYMTYPE, "../a/layer.tar"
        tar.addfile(link)
    out = run_filter(buf.getvalue(), LAYERS[0])
    assert out == {"a/layer.tar": LAYER_TARS[0], "b/layer.tar": b"../a/layer.tar"}


# ---------- progress lines ----------


def progress(*args: str) -> str:
    script = "NODE=worker-1\n" + bash_lib("image_transfer") + 'progress_line "$@"\n'
    out = subprocess.run(["bash", "-c", script, "progress", *args], capture_output=True, text=True, check=True)
    return out.stdout.strip()


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ("docker save | docker load over the fabric", "12000000", "4", "51001500", "at most"),
            "image worker-1: 23% 12.0 MB of at most 51.0 MB, 3.0 MB/s, 0:13 left, docker save | docker load over the"
            " fabric",
        ),
        (
            ("docker save | docker load over the fabric", "1500000000", "100", "123000000000"),
            "image worker-1: 1% 1.5 GB of about 123.0 GB, 15.0 MB/s, 135:00 left, docker save | docker load over the"
            " fabric",
        ),
        (("sending", "21069014", "2"), "image worker-1: 21.0 MB, 10.5 MB/s, sending"),
        (("sending", "0", "3", "50", "at most"), "image worker-1: 0% 0 B of at most 50 B, 0 B/s, ?:?? left, sending"),
        (("sending", "0", "0"), "image worker-1: 0 B, 0 B/s, sending"),
        (
            ("sending", "60", "1", "50", "at most"),
            "image worker-1: 100% 60 B of at most 50 B, 60 B/s, all sent, sending",
        ),
    ],
)
def test_progress_line(args, line):
    assert progress(*args) == line
