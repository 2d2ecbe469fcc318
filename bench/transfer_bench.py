"""Weights head -> workers on the sim: plain rsync over ssh against the project's fan-out, side by side, one run.

Same data for every method (7 x 320 MiB of random bytes + 100 x 64 KiB: 2.2 GiB), written on the head once.
- weights: head -> worker-1, fresh copy each time, rounds interleaved: `rsync -a -e ssh` (default cipher, one
  stream: the seeds' way) against the project's step (scripts/fanout.py with the plan the ModelWeights component
  renders, manifest verification included), uncapped.
- fanout: the project's step to one worker, then to three, with every node's fabric egress capped
  (`sim/sim link`), so the head's uplink is the limit a real cable would be.
- image: the engine image head -> worker-1 by the project's step against a bare docker save |
  load, and the bytes one changed 20 MiB layer moves (bench/image_transfer.py).
Writes bench/results/transfer-<UTC>.json. Needs the sim (brought up here with 3 workers) and `make tools`.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import yaml  # noqa: E402

from bench import image_transfer  # noqa: E402
from bench.simbench import REPO, STACK_FILE, CpuMeter, sh, sim_up, write_result  # noqa: E402
from spark_llm import config  # noqa: E402
from spark_llm.config.group import GroupConfig, groups  # noqa: E402
from spark_llm.plan import deployment as plan  # noqa: E402
from spark_llm.plan.weights import steps as weights  # noqa: E402
from spark_llm.plan.weights.fanout import fanout_sources, render_fanout  # noqa: E402

DATA = "/srv/models/bench-transfer"
BIG_FILES, BIG_MIB, SMALL_FILES, SMALL_KIB = 7, 320, 100, 64
SSH_CONFIG = REPO / ".sim" / "ssh_config"


def on(node: str, script: str, check: bool = True):
    """A bash script on a sim node as the stack's user, over the sim's own ssh (the product's path)."""
    cmd = ["ssh", "-F", str(SSH_CONFIG), "-o", "BatchMode=yes", node, "bash", "-s"]
    return sh_in(cmd, script, check)


def sh_in(cmd: list[str], stdin: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(cmd, input=stdin, capture_output=True, text=True, cwd=REPO)
    if check and result.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result


def stack() -> tuple[GroupConfig, plan.DeploymentPlan]:
    raw = yaml.safe_load(STACK_FILE.read_text())["config"]
    values = {k.split(":", 1)[1]: v for k, v in raw.items() if k.startswith("spark-llm:")}
    values["model"] = dict(values["model"], path=DATA, source={"kind": "head", "path": DATA})
    cfg = groups(config.parse(values))[0]
    return cfg, plan.build_plan(cfg, plan.LAUNCH_TEMPLATE.read_text())


def link(rate: str) -> None:
    sh([str(REPO / "sim/sim"), "link", rate], dict(os.environ))


def clear(workers: list[str], path: str) -> None:
    for w in workers:
        on(w, f"rm -rf {path}")


def baseline(cfg: GroupConfig, worker: plan.NodePlan) -> float:
    """Plain rsync over ssh, one stream, OpenSSH's default cipher, from the head: the seeds' way."""
    dst = "/srv/models/bench-baseline"
    kh = f"{worker.fabric_address} {worker.ssh.host_key}"
    script = (
        f"set -e; kh=$(mktemp); echo {kh!r} > $kh\n"
        f'rsync -a --mkpath -e "ssh -i {cfg.network.fabric_key_path} -o UserKnownHostsFile=$kh -o BatchMode=yes" '
        f"{DATA}/ {worker.ssh.user}@{worker.fabric_address}:{dst}/\n"
    )
    start = time.perf_counter()
    on("head", script)
    elapsed = time.perf_counter() - start
    clear([worker.name], dst)
    return elapsed


def project(cfg: GroupConfig, p: plan.DeploymentPlan, workers: list[plan.NodePlan]) -> tuple[float, str]:
    """The product's fan-out step, as the ModelWeights component renders it, run on the head."""
    tokens = {w.name: "bench" for w in workers}
    script = render_fanout(cfg, p.head, workers, weights.manifest_tool(), fanout_sources(), tokens, "bench")
    start = time.perf_counter()
    out = on("head", script).stdout
    return time.perf_counter() - start, out


def p_streams(cfg: GroupConfig) -> int:
    """The streams per link the fan-out uses with this config (its default: the head's cores, at most 4)."""
    return cfg.transfer.streams or min(4, os.cpu_count() or 1)


def sent_seconds(out: str) -> dict[str, float]:
    """Each worker's transfer time, from the fan-out's `fanout: W: sent N files in S s` lines."""
    return {w: float(s) for w, s in re.findall(r"fanout: (worker-\d+): sent \d+ files in ([\d.]+) s", out)}


def profiled(run, *args):
    """run(*args) under a CpuMeter: (its result, the profile)."""
    with CpuMeter() as meter:
        result = run(*args)
    return result, meter.result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--cap-mbit", type=int, default=400, help="fabric egress cap for the fan-out runs")
    parser.add_argument("--image-only", action="store_true", help="only the image section (1 worker)")
    args = parser.parse_args()
    if args.image_only:
        sim_up(1)
        link("off")
        write_result("transfer", {"image": image_transfer.measure(on)})
        return
    sim_up(3)
    link("off")
    cfg, p = stack()
    names = [w.name for w in p.workers]
    clear(names, DATA)
    on(
        "head",
        f"set -e; rm -rf {DATA}; mkdir -p {DATA}; cd {DATA}\n"
        f"for i in $(seq 1 {BIG_FILES}); do head -c {BIG_MIB}M /dev/urandom > model-$i.safetensors; done\n"
        f"for i in $(seq 1 {SMALL_FILES}); do head -c {SMALL_KIB}K /dev/urandom > small-$i.json; done\n",
    )
    total = BIG_FILES * (BIG_MIB << 20) + SMALL_FILES * (SMALL_KIB << 10)
    # The head's manifest exists before any copy in real use (the head's own step writes it): hash it once here.
    sh_in(["ssh", "-F", str(SSH_CONFIG), "head", f"python3 - scan {DATA} --write"], weights.manifest_tool())

    w1 = p.workers[0]
    base_s, proj_s = [], []
    for _ in range(args.rounds):
        elapsed, base_profile = profiled(baseline, cfg, w1)
        base_s.append(elapsed)
        clear([w1.name], DATA)
        (elapsed, out), proj_profile = profiled(project, cfg, p, [w1])
        proj_s.append(elapsed)
        # Where the project's time went: the copy itself, and the rest (manifest scans before, the verification
        # that waits for the last files' hashes after).
        proj_profile["transfer_s"] = sent_seconds(out)[w1.name]
        proj_profile["scan_and_verify_s"] = round(elapsed - proj_profile["transfer_s"], 2)
        print(f"round: baseline {base_s[-1]:.1f} s, project {elapsed:.1f} s", flush=True)
    # The verification's share: worker-1 hashing its copy again with an empty cache (page cache warm, as after
    # a copy), alone on the machine's cores.
    (_, hash_profile) = profiled(
        sh_in,
        ["ssh", "-F", str(SSH_CONFIG), w1.name, f"XDG_CACHE_HOME=$(mktemp -d) python3 - scan {DATA}"],
        weights.manifest_tool(),
    )
    clear([w1.name], DATA)
    mb = total / 1e6
    baseline_mb_s = mb / statistics.median(base_s)
    project_mb_s = mb / statistics.median(proj_s)

    link(str(args.cap_mbit))
    try:
        (one_s, _), _ = profiled(project, cfg, p, [w1])
        clear([w1.name], DATA)
        (three_s, out3), three_profile = profiled(project, cfg, p, list(p.workers))
    finally:
        link("off")
    sources = re.findall(r"fanout: (worker-\d) received (\d+) files from (\S+)", out3)
    clear(names, DATA)
    image_result = image_transfer.measure(on)
    print(f"image: {image_result}", flush=True)

    write_result(
        "transfer",
        {
            "weights": {
                "data": {
                    "files": BIG_FILES + SMALL_FILES,
                    "bytes": total,
                    "big": f"{BIG_FILES} x {BIG_MIB} MiB",
                    "small": f"{SMALL_FILES} x {SMALL_KIB} KiB",
                },  # fmt: skip
                "baseline": "rsync -a -e ssh (default cipher), one stream, head -> worker-1",
                "baseline_s": [round(s, 2) for s in base_s],
                "project_s": [round(s, 2) for s in proj_s],
                "baseline_mb_s": round(baseline_mb_s, 1),
                "project_mb_s": round(project_mb_s, 1),
                "ratio": round(project_mb_s / baseline_mb_s, 2),
                "streams": p_streams(cfg),
                "profile_last_round": {"baseline": base_profile, "project": proj_profile},
                "profile_sha256_rehash_worker": hash_profile,
            },
            "fanout": {
                "cap_mbit_per_interface": args.cap_mbit,
                "one_worker_s": round(one_s, 2),
                "three_workers_s": round(three_s, 2),
                "ratio": round(three_s / one_s, 2),
                "sources": [{"target": t, "files": int(n), "source": s} for t, n, s in sources],
                # When each worker had every file (s from the start): the chain's per-hop delay is the difference.
                "worker_done_s": sent_seconds(out3),
                "profile_three": three_profile,
            },
            "image": image_result,
        },
    )


if __name__ == "__main__":
    main()
