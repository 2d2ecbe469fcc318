"""spark-llm weights fan-out, the schedule: what each worker lacks, whether its disk holds it, who feeds whom, and
which files go in one rsync. Pure (no process, no ssh): scripts/fanout.py runs what this decides.

Runs ON the head beside scripts/fanout.py (python3 standard library only).
"""

from __future__ import annotations

from dataclasses import dataclass

# Files below this size go in batches (one rsync per batch): a process per 64 KiB file costs more than its bytes.
SMALL_FILE = 16 << 20
BATCH_BYTES = 64 << 20


@dataclass
class Needs:
    """Each worker's part of the copy, by worker name, from the head's manifest and the workers'."""

    need: dict[str, list[dict]]
    """The head's files it lacks or has with other content, largest first."""
    whole: dict[str, set[str]]
    """Those it has with other content: sent whole (`--whole-file`), not as a delta."""
    extra: dict[str, list[str]]
    """Its files the head does not have: removed at the end."""
    have: dict[str, set[str]]
    """What each node (the head too) can serve onward now."""


def needs(head: str, files: dict[str, dict], targets: dict[str, dict]) -> Needs:
    """What each worker of `targets` (its manifest) lacks of the head's `files` (the head's manifest, by path)."""
    out = Needs({}, {}, {}, {head: set(files)})
    for name, target in targets.items():
        theirs = {f["path"]: f for f in target["files"]}
        out.need[name] = sorted(
            (f for p, f in files.items() if theirs.get(p, {}).get("sha256") != f["sha256"]),
            key=lambda f: -f["size"],
        )
        out.whole[name] = {f["path"] for f in out.need[name] if f["path"] in theirs}
        out.extra[name] = sorted(set(theirs) - set(files))
        out.have[name] = set(files) - {f["path"] for f in out.need[name]}
    return out


def short_of_space(path: str, need: dict[str, list[dict]], targets: dict[str, dict]) -> list[str]:
    """A line per worker whose disk cannot hold what it lacks (a partial file counts as sent). A file sent whole over
    an old copy needs its size again until the rename: counted in full."""
    short = []
    for name, files in need.items():
        needed = sum(f["size"] for f in files) - targets[name].get("partial", 0)
        free = targets[name].get("free")
        if free is not None and files and needed > free:
            short.append(f"{name}: {path} needs {human(needed)} ({needed} B), {human(free)} ({free} B) free")
    return short


def feeders(head: str, workers: list[str], need: dict[str, list[dict]], transport: str) -> dict[str, str]:
    """Who sends to each worker. A chain: the head, the workers that have every file, then those that need files,
    each fed by the one before it. Every node's uplink then carries the data once, file by file (a pipeline); a
    sender shared by two receivers would halve the rate of both. Over ssh the head feeds all (the workers hold no
    key to reach each other)."""
    chain = [head, *(w for w in workers if not need[w]), *(w for w in workers if need[w])]
    feeder = {name: chain[i - 1] for i, name in enumerate(chain) if i > 0}
    return dict.fromkeys(feeder, head) if transport == "ssh" else feeder


def next_batch(queue: list[dict], available: set[str]) -> list[dict]:
    """The next files of `queue` for one rsync, all `available` at the sender (removed from `queue`): the first it
    has, with the small ones after it up to BATCH_BYTES; [] while the sender has none of them yet."""
    for i, f in enumerate(queue):
        if f["path"] not in available:
            continue  # the feeder is still receiving it: take the next one it has
        batch = [f]
        if f["size"] < SMALL_FILE:
            size = f["size"]
            for g in queue[i + 1 :]:
                if g["size"] < SMALL_FILE and g["path"] in available and size + g["size"] <= BATCH_BYTES:
                    batch.append(g)
                    size += g["size"]
        for g in batch:
            queue.remove(g)
        return batch
    return []


def progress_line(name: str, moved: int, total: int, elapsed: float, sources: list[str]) -> str:
    """`weights NAME: PCT% MOVED of TOTAL, RATE, ETA left, from SOURCES`."""
    rate = moved / max(elapsed, 1e-3)
    left = (total - moved) / rate if rate > 0 else 0
    via = f", from {', '.join(sources)}" if sources else ""
    pct = 100 * moved // max(total, 1)
    return (
        f"weights {name}: {pct}% {human(moved)} of {human(total)}, {rate / 1e6:.0f} MB/s, "
        f"{int(left) // 60}:{int(left) % 60:02d} left{via}"
    )


def human(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1000
    return f"{n} B"
