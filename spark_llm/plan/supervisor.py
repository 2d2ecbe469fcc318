"""Pure: the stack's supervisor (scripts/supervisor.py in one container on the head), as data and bash.

components/supervisor.py declares it unless spark-llm:supervisor.enabled is false: per group, a files step on the
head (the program, the group's spec, its workers' pinned host keys), its own ssh key (spark_llm.plan.supervisor_key:
what it may run on a worker) and a step that stops the supervisor before `pulumi up` touches the group; once for the
stack, the container, which mounts every group's files and runs one watch per group (each with its own budget and
state file) and keeps the router.
What it did (its state file on the head) is read back by spark_llm.plan.supervisor_report.
"""

from __future__ import annotations

import hashlib
import shlex
from pathlib import Path

import spark_llm.group
from spark_llm.config.metric_catalog import Role, load_metrics
from spark_llm.group.agent_metrics import CONTAINER_TEXTFILE_DIR
from spark_llm.group.records import SpecMember, SupervisorSpec, dumps
from spark_llm.group.wedge import METRICS_PATH as ENGINE_METRICS_PATH
from spark_llm.plan import supervisor_key
from spark_llm.plan.container import Mount
from spark_llm.plan.deployment import DeploymentPlan
from spark_llm.plan.fabric import FABRIC_SSH_OPTIONS
from spark_llm.plan.node_files import file_script, sha256_text
from spark_llm.plan.nodes import TEXTFILE_SUBDIR, NodePlan, monitoring_dir
from spark_llm.plan.observation import TOKENS_DIR
from spark_llm.plan.router import RouterPlan
from spark_llm.plan.scripts import SCRIPTS_DIR, bash_lib
from spark_llm.plan.weights.steps import DRIFT_STEP as WEIGHTS_STEP

CONTAINER_NAME = "spark-llm-supervisor"
PROGRAM = SCRIPTS_DIR / "supervisor.py"
NODE_MODULE = SCRIPTS_DIR / "supervisor_node.py"
GROUP_PACKAGE = Path(spark_llm.group.__file__).parent
# Where the container sees the first group's files (the head's supervisor dir, read-only) and its state dir
# (read-write); another group's are beside them under its own name (`in_container`).
CONTAINER_DIR = "/spark-llm-supervisor"
CONTAINER_STATE_DIR = "/spark-llm-supervisor-state"
# The head's drift records (`<remote_dir>/state`, read-only): its weights record, read before the group is started.
# The directory, not the file: a step replaces a record by renaming a new file over it, which a file's bind mount
# would never see (it keeps the old inode).
CONTAINER_RECORDS_DIR = "/spark-llm-supervisor-records"
CONTAINER_MEMINFO = "/spark-llm-supervisor-meminfo"
# The head's /sys, read-only: its fabric interfaces' MTUs and RoCE devices as the node shows them (a container's own
# /sys/class does not show what the host mounted over it, as the sim's RoCE devices are).
CONTAINER_SYSFS = "/spark-llm-supervisor-sys"
# The head's history of starts (read-write: the supervisor's restarts are lines of it too; a directory, as the gate
# rewrites the file by renaming a new one over it).
CONTAINER_HISTORY_DIR = "/spark-llm-supervisor-history"
# The engine's API key file (its `--config`), read-only: the supervisor's completion sends the key the clients send.
CONTAINER_API_CONFIG = "/spark-llm-supervisor-api/api-key.yaml"
DOCKER_SOCKET = "/var/run/docker.sock"
STATE_FILE = "state.json"
# The probe section (spark_llm.plan.observation: `supervisor<TAB>JSON`) that carries the state file, and the one
# that carries its container's state and label (`supervisor_container<TAB>STATUS LABEL`).
PROBE_SECTION = "supervisor"
CONTAINER_SECTION = "supervisor_container"
# The container's label: its files' digest (a new program or spec replaces it), and a repair suffix when it was
# found gone or stopped (spark_llm.plan.drift's way: a value the node keeps, so a repair is followed by a no-op).
LABEL = "spark-llm.supervises"
LABEL_OWNER = "spark-llm.supervisor.owner"
"""The state that made the container (components.state_identity): a container another state made holds the name."""


def files_dir(head: NodePlan) -> str:
    return f"{head.remote_dir}/supervisor"


def state_dir(head: NodePlan) -> str:
    return f"{head.remote_dir}/supervisor-state"


def state_path(head: NodePlan) -> str:
    return f"{state_dir(head)}/{STATE_FILE}"


def in_container(plan: DeploymentPlan, path: str) -> str:
    """Where the stack's one container sees one of this group's dirs: the first group's where the one-model stack
    always had them (so its spec, and a deployed supervisor, stay as they were), another's under its own name."""
    return plan.own(path)


def known_hosts(plan: DeploymentPlan) -> str:
    """The workers' pinned host keys (stack config), as the fabric ssh reads them: `ADDRESS KEY`, `[ADDRESS]:PORT`."""
    lines = []
    for worker in plan.workers:
        host = worker.fabric_address if worker.ssh.port == 22 else f"[{worker.fabric_address}]:{worker.ssh.port}"
        lines.append(f"{host} {worker.ssh.host_key}\n")
    return "".join(lines)


def spec(
    plan: DeploymentPlan, container_ids: dict[str, str], router: RouterPlan | None = None, stack: str = ""
) -> SupervisorSpec:
    """What scripts/supervisor.py reads: the members in rank order (head first), how to reach each, the budget.

    `container_ids`: each member's engine container as `pulumi up` created it. Their digest is the deployment's
    identity: a new group (any replacement) starts a new budget, and a container that is not one of these is
    left alone (only `pulumi up` puts the deployment's back). `router`: spark-llm:router's, which it keeps up too
    (absent from the spec without one: a stack without a router keeps the spec, and so the supervisor, it had).
    """
    cfg = plan.supervisor
    if cfg is None:
        raise ValueError("spark-llm:supervisor.enabled is false: the stack has no supervisor to write a spec for")
    members: list[SpecMember] = [
        {
            "name": n.name,
            "role": n.role,
            "address": n.fabric_address,
            "user": n.ssh.user,
            "port": n.ssh.port,
            "container_id": container_ids.get(n.name, ""),
        }
        for n in plan.nodes
    ]
    ids = ",".join(f"{m['name']}={m['container_id']}" for m in members)
    out: SupervisorSpec = {
        "deployment": hashlib.sha256(f"{plan.group_revision}\0{ids}".encode()).hexdigest()[:16],
        "revision": plan.group_revision,
        "container": plan.container,
        "members": members,
        "docker_socket": DOCKER_SOCKET,
        # Its own key, which may only run docker inspect/start/stop/logs on the engine (not the head's fabric key).
        "key_path": f"{in_container(plan, supervisor_key.CONTAINER_KEY_DIR)}/{supervisor_key.KEY_NAME}",
        "known_hosts": f"{in_container(plan, CONTAINER_DIR)}/known_hosts",
        "ssh_options": list(FABRIC_SSH_OPTIONS),
        "api_host": plan.api_address.strip("[]"),
        "api_port": plan.port,
        "model": plan.model_name,
        "api_key_file": api_config_in_container(plan) if plan.api_config_path else "",
        "ready_seconds": plan.ready_timeout,
        "startup_grace": plan.startup_grace,
        "poll_seconds": cfg.poll_seconds,
        "wedge_seconds": cfg.wedge_seconds,
        "budget": {
            "max_restarts": cfg.max_restarts,
            "window_seconds": cfg.window_seconds,
            "backoff_seconds": cfg.backoff_seconds,
        },
        "state_path": f"{in_container(plan, CONTAINER_STATE_DIR)}/{STATE_FILE}",
        "weights_record": f"{in_container(plan, CONTAINER_RECORDS_DIR)}/{WEIGHTS_STEP}",
        "memory": {
            "engine": plan.engine,
            "version": plan.engine_version,
            "flags": list(plan.config.engine.flags),
            "container": plan.container,
            "ranks": len(plan.nodes),
        },
        "meminfo": CONTAINER_MEMINFO,
        "history_path": f"{in_container(plan, CONTAINER_HISTORY_DIR)}/{Path(plan.history_path).name}",
        "profile": plan.profile,
    }
    if plan.roce_devices and len(plan.nodes) > 1:
        out["fabric"] = {
            "roce_devices": list(plan.roce_devices),
            "addresses": {n.name: n.fabric_address for n in plan.nodes},
        }
    if len(plan.nodes) > 1:
        # Read before each restart of its own, as preview reads it before `up` (issue 41, 2): the head's through its
        # /sys mounted read-only (`mounts`), a worker's with the one request its key may make for it.
        out["fabric_ready"] = {
            "roce_devices": list(plan.roce_devices) if plan.rdma else [],
            "interfaces": list(plan.fabric_interfaces),
            "mtu": plan.fabric_mtu,
            "sysfs": CONTAINER_SYSFS,
            "stack": stack,
        }
    if router is not None:
        out["router"] = router.supervisor_spec()
    if plan.config.monitoring is not None:
        out["textfile"] = CONTAINER_TEXTFILE_DIR
        # The wedge alert's own signal (rank 0 serves its metrics with monitoring on: SGLang with --enable-metrics),
        # read beside the probes: the alert and the restart name one cause.
        catalog = load_metrics(plan.config.engine.kind, plan.config.engine.version)
        out["tokens"] = {
            "path": ENGINE_METRICS_PATH,
            "running": catalog.metric(Role.RUNNING).samples[0],
            "generated": catalog.metric(Role.GENERATION_TOKENS).samples[0],
        }
    return out


def spec_json(
    plan: DeploymentPlan, container_ids: dict[str, str], router: RouterPlan | None = None, stack: str = ""
) -> str:
    return dumps(spec(plan, container_ids, router, stack))


def program_files() -> dict[str, str]:
    """The program and what it imports, by path under the supervisor's dir: scripts/supervisor.py, its
    supervisor_node.py, and the group's
    room (spark_llm/group, standard library only), so the supervisor judges the group with the very code `pulumi
    preview` and `spark-llm status` use. Python finds the package beside the program (its dir is first on sys.path)."""
    files = {"supervisor.py": PROGRAM.read_text(), "supervisor_node.py": NODE_MODULE.read_text()}
    for path in [GROUP_PACKAGE.parent / "__init__.py", *sorted(GROUP_PACKAGE.glob("*.py"))]:
        files[path.relative_to(GROUP_PACKAGE.parents[1]).as_posix()] = path.read_text()
    return files


def files_script(plan: DeploymentPlan, spec_text: str, program: dict[str, str]) -> str:
    """The step on the head that writes the program (`program_files`), its spec and the pinned host keys (0600, the
    dir 0700). The ssh key it reaches the workers with is its own key step's (spark_llm.plan.supervisor_key)."""
    directory = files_dir(plan.head)
    out = f"mkdir -p {shlex.quote(directory)}\nchmod 0700 {shlex.quote(directory)}\n"
    files = {**program, "spec.json": spec_text, "known_hosts": known_hosts(plan)}
    for name, content in files.items():
        out += file_script(f"{directory}/{name}", content, "0600")
    return out


def remove_files_command(plan: DeploymentPlan) -> str:
    """The files step's delete: the program, spec and pinned keys (a new group's spec replaces them)."""
    return f"rm -rf {shlex.quote(files_dir(plan.head))}"


def state_dir_script(plan: DeploymentPlan) -> str:
    """The step that makes the state dir: it lives as long as the supervisor is configured (the program resets a
    state of another deployment itself, so a new group or a new program keeps no stale budget, and the history of
    the running group survives an upgrade of the program)."""
    return f"mkdir -p {shlex.quote(state_dir(plan.head))}\necho 'supervisor state dir ready'\n"


def remove_state_command(plan: DeploymentPlan) -> str:
    """The state step's delete (`pulumi destroy`, or the supervisor turned off): its state goes too."""
    return f"rm -rf {shlex.quote(state_dir(plan.head))}"


def stop_command() -> str:
    """Stops the stack's supervisor (if there is one) before `pulumi up` stops or replaces any member of a group: it
    must never restart what `up` is replacing (a group's relaunch stops the one container; the new one that `up`
    makes once every group served watches them all again). A stopped `unless-stopped` container stays stopped
    across the head's reboot too, so a failed `up` leaves it stopped until an `up` succeeds and starts a new one."""
    return f"docker stop -t 10 {CONTAINER_NAME} >/dev/null 2>&1 || true\necho 'supervisor stopped (if it ran)'\n"


def clear_command(state_id: str) -> str:
    """Removes, before `pulumi up` makes the stack's supervisor, one another state made (LABEL_OWNER set, and not
    `state_id`: another checkout's, a lost state's). It holds the name, so `up` failed on it while status said `up`
    starts the supervisor again; and it watches engines this state's `up` replaced. One without the label (made
    before spark-llm labelled it) is left to `pulumi up`, whose own it may be."""
    label = f'{{{{with index .Config.Labels "{LABEL_OWNER}"}}}}{{{{.}}}}{{{{end}}}}'
    return (
        f"for id in $(docker ps -aq --filter name=^{CONTAINER_NAME}$); do\n"
        f'  made=$(docker inspect -f {shlex.quote(label)} "$id")\n'
        f'  if [ -n "$made" ] && [ "$made" != {shlex.quote(state_id)} ]; then\n'
        '    docker rm -f "$id" >/dev/null\n'
        '    echo "removed supervisor ${id:0:12}: made by another state (owner $made)"\n'
        "  fi\n"
        "done\n"
        "echo 'no supervisor of another state left'\n"
    )


def image_check_script(plan: DeploymentPlan, image: str) -> str:
    """The step that proves, on the head, that the supervisor's image has python3 and (with workers) an ssh client
    (scripts/lib/supervisor_image.sh). `image`: what the container will run (the engine image's ID on the head, or
    the pulled spark-llm:supervisor.image). Without it the supervisor would start and never reach a worker (an
    engine image need not carry ssh), so `pulumi up` fails here, before it stops anything."""
    custom = plan.supervisor.image if plan.supervisor else None
    what = f"{custom} (spark-llm:supervisor.image)" if custom else f"{plan.image.ref} (the engine image)"
    needs_ssh = "1" if plan.workers else "0"
    call = shlex.join(["supervisor_image_check", image, needs_ssh, what])
    return bash_lib("supervisor_image") + call + "\n"


def api_config_in_container(plan: DeploymentPlan) -> str:
    directory, _, name = CONTAINER_API_CONFIG.rpartition("/")
    return f"{in_container(plan, directory)}/{name}"


def mounts(plan: DeploymentPlan) -> tuple[Mount, ...]:
    """One group's mounts (`stack_mounts`: every group's, in the one container)."""
    head = plan.head
    out = [
        # Root-equivalent on the head: it starts and stops the head's engine (docs/security.md).
        Mount(DOCKER_SOCKET, DOCKER_SOCKET, read_only=False),
        Mount(files_dir(head), in_container(plan, CONTAINER_DIR)),
        Mount(state_dir(head), in_container(plan, CONTAINER_STATE_DIR), read_only=False),
        # The head's weights record (spark_llm.group.weights): no group start on weights not verified there.
        Mount(f"{head.remote_dir}/{TOKENS_DIR}", in_container(plan, CONTAINER_RECORDS_DIR)),
        # The head's memory as the node reads it (spark_llm.group.memory): no restart into a node that cannot fit.
        Mount("/proc/meminfo", CONTAINER_MEMINFO),
        # The head's history of starts: each restart it makes is recorded there, as `up`'s are.
        Mount(str(Path(plan.history_path).parent), in_container(plan, CONTAINER_HISTORY_DIR), read_only=False),
    ]
    if plan.workers:
        # The head's fabric as a restart needs it (spark_llm.group.fabric_ready), read before each restart.
        out.append(Mount("/sys", CONTAINER_SYSFS))
        # Its own key's dir (read-only): the key runs only docker inspect/start/stop/logs on a worker's engine.
        out.append(Mount(supervisor_key.key_dir(head), in_container(plan, supervisor_key.CONTAINER_KEY_DIR)))
    if plan.api_config_path:
        out.append(Mount(plan.api_config_path, api_config_in_container(plan)))
    if plan.config.monitoring is not None:
        # Where it writes its metrics (the head's exporter reads them): the stack's directory, every group's.
        textfile = f"{monitoring_dir(head.ssh.user)}/{TEXTFILE_SUBDIR}"
        out.append(Mount(textfile, CONTAINER_TEXTFILE_DIR, read_only=False))
    return tuple(out)


def stack_mounts(plans: list[DeploymentPlan]) -> tuple[Mount, ...]:
    """Every group's mounts, each target once (the Docker socket and the head's meminfo are the stack's)."""
    out: dict[str, Mount] = {}
    for plan in plans:
        for mount in mounts(plan):
            out.setdefault(mount.target, mount)
    return tuple(out.values())


def command(plans: list[DeploymentPlan]) -> tuple[str, ...]:
    """The program (the first group's copy) with every group's spec: one watch each (scripts/supervisor.py)."""
    specs = [f"{in_container(plan, CONTAINER_DIR)}/spec.json" for plan in plans]
    return ("python3", f"{CONTAINER_DIR}/supervisor.py", *specs)


def files_digest(files_step_script: str) -> str:
    """The container's label: new files (a new group's spec, a new program, new pins) replace the container, so it
    never runs an old program against a new spec or mounts a directory that was replaced under it."""
    return sha256_text(files_step_script)[:16]


def probe(plan: DeploymentPlan, node: NodePlan) -> str:
    """The head's read-only probe section: the state file as one line (`supervisor<TAB>JSON`)."""
    if node.role != "head" or plan.supervisor is None:
        return ""
    path = shlex.quote(state_path(node))
    fmt = shlex.quote(f'{{{{.State.Status}}}} {{{{index .Config.Labels "{LABEL}"}}}}')
    return (
        f"if [ -f {path} ]; then printf '{PROBE_SECTION}\\t%s\\n' \"$(tr -d '\\n\\t' < {path})\"; fi\n"
        f"if s=$(docker inspect -f {fmt} {CONTAINER_NAME} 2>/dev/null); then\n"
        f"  printf '{CONTAINER_SECTION}\\t%s\\n' \"$s\"\nelse\n  printf '{CONTAINER_SECTION}\\tabsent\\n'\nfi\n"
    )


def container_label(digest: str, observed: str | None, run: str) -> str:
    """The supervisor container's label.

    `digest`: its files' digest (`files_digest`); `observed`: the head's CONTAINER_SECTION (`STATUS LABEL`, or
    `absent`; None when the nodes were not read); `run`: this program run's id (a repair's label is new each run).
    A running container whose label is of these files keeps it; one gone or stopped (`docker rm -f`, `docker kill`,
    which its restart policy treats as a manual stop) gets a new label: `up` replaces it, preview says so.
    """
    if observed is None:
        return digest
    status, _, label = observed.strip().partition(" ")
    if status == "running":
        return label if label.startswith(digest) else digest
    repair = hashlib.sha256(f"{digest}\0{observed}\0{run}".encode()).hexdigest()[:8]
    return f"{digest}-repair-{repair}"


def container_warning(observed: str | None, state: str | None) -> str | None:
    """What preview and `up` say when the supervisor's container is gone or stopped (None: it runs, or it never ran:
    no state file yet, a first deployment). `state`: the head's PROBE_SECTION (its state file)."""
    status = (observed or "").strip().partition(" ")[0]
    if observed is None or state is None or status == "running":
        return None
    return f"the supervisor's container on the head is {status}: `pulumi up` starts it again"
