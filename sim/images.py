"""The engine and images on this machine and on the nodes: dockerd (sim/docker-engine.sh), the node image
(sim/node-image.sh), an image tarball `docker load`ed into nodes' own engines (`sim up --load-image`), and the
router's image (sim/router/build-image.sh) loaded into the head's (`sim up --load-router`)."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

from host import Progress, docker, run
from names import ClusterNames
from paths import SIM_DIR
from state import Node


def ensure_engine(progress: Progress) -> None:
    progress.step("ensuring the Docker engine runs (sim/docker-engine.sh)")
    subprocess.run([str(SIM_DIR / "docker-engine.sh"), "ensure"], check=True)


def ensure_node_image(progress: Progress) -> str:
    progress.step("ensuring the node image (sim/node-image.sh; a cold build takes about a minute)")
    result = subprocess.run([str(SIM_DIR / "node-image.sh"), "ensure"], check=True, stdout=subprocess.PIPE, text=True)
    return result.stdout.strip().splitlines()[-1]


def load_image_into(
    names: ClusterNames, nodes: Sequence[Node], tarball: Path, load_on: str, image_tag: str | None, progress: Progress
) -> None:
    """`docker load` the tarball into the head's engine ("head": as if the head had pulled it, the program moves it
    to the workers) or every node's ("all": already everywhere); tag it image_tag there too when given."""
    targets = [n for n in nodes if load_on == "all" or n.role == "head"]
    for node in targets:
        progress.step(f"loading {tarball} into {node.name}'s engine")
        result = run(["docker", "exec", "-i", names.container(node.name), "docker", "load"], stdin_file=tarball)
        loaded = result.stdout.strip().rsplit("Loaded image: ", 1)[-1].strip()
        if image_tag:
            docker("exec", names.container(node.name), "docker", "tag", loaded, image_tag)
        progress.step(f"{node.name}: {loaded}" + (f" (tagged {image_tag})" if image_tag else ""))


def _load_once(names: ClusterNames, node: Node, tag: str, tarball: Path, progress: Progress) -> None:
    """`docker load` the tarball into the node's engine unless the node has its tag already: the tag names the
    image's recipe hash (build-image.sh), so the same tag is the same image, and a second `sim up --load-...` on
    the same nodes (another test module) skips its 250 MB."""
    held = run(["docker", "exec", names.container(node.name), "docker", "image", "inspect", tag], check=False)
    if held.returncode == 0:
        progress.step(f"{node.name} has {tag} already")
        return
    progress.step(f"loading {tarball} into {node.name}'s engine")
    run(["docker", "exec", "-i", names.container(node.name), "docker", "load"], stdin_file=tarball)


def load_router_into(names: ClusterNames, head: Node, progress: Progress) -> str:
    """Build (or reuse) the router's image, `docker load` it into the head's engine, and return its image ID there:
    what spark-llm:router.image names on the sim (an ID is as immutable as a digest; a local image has no digest)."""
    progress.step("ensuring the router's image (sim/router/build-image.sh)")
    built = subprocess.run([str(SIM_DIR / "router" / "build-image.sh")], check=True, stdout=subprocess.PIPE, text=True)
    tag, tarball = built.stdout.strip().splitlines()[-2:]
    _load_once(names, head, tag, Path(tarball), progress)
    image_id = docker("exec", names.container(head.name), "docker", "image", "inspect", "-f", "{{.Id}}", tag).strip()
    progress.step(f"{head.name}: {tag} ({image_id})")
    return image_id


def load_monitoring_into(names: ClusterNames, nodes: Sequence[Node], progress: Progress) -> str:
    """Build (or reuse) the monitoring image (Prometheus, the node exporter and Alertmanager from Debian's packages),
    `docker load` it into every node's engine (an exporter runs on each), and return its image ID, the same
    everywhere."""
    progress.step("ensuring the monitoring image (sim/monitoring/build-image.sh)")
    script = SIM_DIR / "monitoring" / "build-image.sh"
    built = subprocess.run([str(script)], check=True, stdout=subprocess.PIPE, text=True)
    tag, tarball = built.stdout.strip().splitlines()[-2:]
    for node in nodes:
        _load_once(names, node, tag, Path(tarball), progress)
    image_id = docker("exec", names.container(nodes[0].name), "docker", "image", "inspect", "-f", "{{.Id}}", tag)
    progress.step(f"every node: {tag} ({image_id.strip()})")
    return image_id.strip()
