"""Where a test run's time went, from `make integration CMDLOG=FILE`'s lines.

    python tools/cmdlog_report.py /tmp/cmds.jsonl

Prints each sim worker's span (a worker that ends long after the others ran alone on the two cores), each test
file's time with the part of it spent outside the commands it ran (waits, polls, Python), and each kind of command's
count, wall and CPU seconds (the tier is CPU-bound: CPU is what a faster bed must cut).
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path


def _file_of(test: str) -> str:
    """tests/integration/test_x.py::test_y (call) -> test_x.py"""
    return test.split("::")[0].rsplit("/", 1)[-1]


def report(lines: list[dict]) -> str:
    phases = [line for line in lines if "phase" in line]
    commands = [line for line in lines if "cmd" in line]
    out: list[str] = []
    if phases:
        t0 = min(p["start"] for p in phases)
        spans: dict[str, list[float]] = defaultdict(list)
        for p in phases:
            spans[p["worker"] or "-"] += [p["start"] - t0, p["end"] - t0]
        out.append("worker   start    end")
        out += [f"{w:<8} {min(s):6.0f} {max(s):6.0f}" for w, s in sorted(spans.items())]
    per_file: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0])
    for p in phases:
        per_file[_file_of(p["test"])][0] += p["end"] - p["start"]
    for c in commands:
        row = per_file[_file_of(c["test"])]
        row[1] += c["wall_s"]
        row[2] += c["cpu_s"]
        row[3] += c["cmd"].startswith("pulumi up")
    out.append("\nfile                                  test_s  cmd_wall  cmd_cpu  outside  ups")
    for name, (test_s, wall, cpu, ups) in sorted(per_file.items(), key=lambda kv: -kv[1][0]):
        out.append(f"{name:<37} {test_s:6.0f} {wall:9.0f} {cpu:8.0f} {test_s - wall:8.0f} {ups:4d}")
    kinds: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    for c in commands:
        row = kinds[c["cmd"]]
        row[0] += 1
        row[1] += c["wall_s"]
        row[2] += c["cpu_s"]
    out.append("\ncommand                               count   wall_s    cpu_s")
    for cmd, (count, wall, cpu) in sorted(kinds.items(), key=lambda kv: -kv[1][2])[:25]:
        out.append(f"{cmd:<37} {count:5d} {wall:8.0f} {cpu:8.0f}")
    return "\n".join(out)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tools/cmdlog_report.py CMDLOG_FILE (written by `make integration CMDLOG=FILE`)")
    text = Path(sys.argv[1]).read_text().splitlines()
    print(report([json.loads(line) for line in text if line.strip()]))
