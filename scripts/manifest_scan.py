#!/usr/bin/env python3
"""spark-llm weights manifest, its files: what a manifest is made of (the walk, the hashing, the cache, the digest).

scripts/manifest.py is the program (its commands); this file is its first half. The nodes get both as one stream
(`python3 - scan DIR` reads one file: spark_llm.plan.scripts.manifest_tool joins them, this file first), and a run
on this machine (`python3 scripts/manifest.py`) imports it from beside the program.

Skipped while scanning: names starting with `.spark-llm` at any depth (this manifest, rsync's partial dir)
and the top-level `.cache` directory (`hf download --local-dir` keeps its resume metadata there).

Cache: one JSON file per directory under ${XDG_CACHE_HOME:-~/.cache}/spark-llm/manifests/, entries keyed by
(path, size, mtime_ns, inode, ctime_ns). mtime alone is not enough: `rsync -a` restores the source's mtime on
a copy, so a re-copied (or corrupted then re-copied) file would look unchanged; its inode and ctime do change.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import os
import sys
import tempfile
import threading
import time

FORMAT = "spark-llm-manifest/1"
MANIFEST_NAME = ".spark-llm-manifest.json"
VERSIONS_DIR = ".spark-llm-versions"
SKIP_PREFIX = ".spark-llm"
TOP_LEVEL_SKIP = {".cache"}
CHUNK = 8 << 20
PROGRESS_SECONDS = 5.0
CACHE_SAVE_SECONDS = 30.0

LOG_PREFIX = "manifest"


def log(message: str) -> None:
    sys.stderr.write(f"{LOG_PREFIX}: {message}\n")
    sys.stderr.flush()


def human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    raise AssertionError("unreachable")


def digest_of(files: list[dict]) -> str:
    canonical = [[f["path"], f["size"], f["sha256"]] for f in sorted(files, key=lambda f: f["path"])]
    return hashlib.sha256(json.dumps(canonical, separators=(",", ":")).encode()).hexdigest()


def walk(root: str) -> list[tuple[str, os.stat_result]]:
    """(relative path, stat) of every regular file under root (symlinks followed for files, not directories)."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        dirnames[:] = sorted(
            d for d in dirnames if not d.startswith(SKIP_PREFIX) and not (rel_dir == "." and d in TOP_LEVEL_SKIP)
        )
        for name in sorted(filenames):
            if name.startswith(SKIP_PREFIX):
                continue
            full = os.path.join(dirpath, name)
            try:
                st = os.stat(full)
            except FileNotFoundError:  # a dangling symlink, or removed while we walk
                continue
            if not os.path.isfile(full):
                continue
            rel = os.path.normpath(os.path.join(rel_dir, name)).replace(os.sep, "/")
            out.append((rel, st))
    return out


def cache_path(root: str) -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    key = hashlib.sha256(os.path.realpath(root).encode()).hexdigest()[:16]
    return os.path.join(base, "spark-llm", "manifests", key + ".json")


def load_cache(path: str, root: str) -> dict:
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    if data.get("format") != FORMAT or data.get("dir") != os.path.realpath(root):
        return {}
    return data.get("entries", {})


def write_json_atomic(path: str, data: object, *, unless_same: bool = False) -> None:
    """Write `data` to `path` atomically; with `unless_same`, leave a file that already says it untouched (a copy
    run again that changes nothing leaves the tree as it was, inodes and times included)."""
    if unless_same:
        text = json.dumps(data, separators=(",", ":"), sort_keys=True) + "\n"
        try:
            with open(path) as f:
                if f.read() == text:
                    return
        except OSError:
            pass
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".spark-llm-tmp.", dir=directory)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, separators=(",", ":"), sort_keys=True)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def stat_key(st: os.stat_result) -> list[int]:
    return [st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns]


class Hasher:
    """sha256 of files on a few threads (hashlib releases the GIL), with a progress line every few seconds."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.done = 0
        self.lock = threading.Lock()
        self.started = time.monotonic()
        self.last_report = self.started

    def file(self, path: str) -> str:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            while True:
                block = f.read(CHUNK)
                if not block:
                    break
                h.update(block)
                self.advance(len(block))
        return h.hexdigest()

    def advance(self, n: int) -> None:
        with self.lock:
            self.done += n
            now = time.monotonic()
            if self.total and now - self.last_report >= PROGRESS_SECONDS:  # total 0: `hash`, told no total
                self.last_report = now
                rate = self.done / max(now - self.started, 1e-9)
                log(f"hashing {human(self.done)} of {human(self.total)} ({human(rate)}/s)")


def scan(root: str, cache_file: str, jobs: int) -> tuple[list[dict], dict]:
    """The manifest entries of root, and what the scan cost."""
    entries = walk(root) if os.path.isdir(root) else []
    cache = load_cache(cache_file, root)
    files: dict[str, dict] = {}
    todo = []
    for rel, st in entries:
        hit = cache.get(rel)
        if hit and hit[:4] == stat_key(st):
            files[rel] = {"path": rel, "size": st.st_size, "sha256": hit[4]}
        else:
            todo.append((rel, st))
    hasher = Hasher(sum(st.st_size for _, st in todo))
    fresh: dict[str, list] = {}
    last_save = time.monotonic()

    def save() -> None:
        kept = {rel: cache[rel] for rel, _ in entries if rel in cache and rel not in fresh}
        write_json_atomic(cache_file, {"format": FORMAT, "dir": os.path.realpath(root), "entries": {**kept, **fresh}})

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(jobs, 1)) as pool:
        futures = {pool.submit(hasher.file, os.path.join(root, rel)): (rel, st) for rel, st in todo}
        for future in concurrent.futures.as_completed(futures):
            rel, st = futures[future]
            sha = future.result()
            after = os.stat(os.path.join(root, rel))
            if stat_key(after) != stat_key(st):
                raise SystemExit(f"manifest: {rel} changed while it was hashed; run again when nothing writes it")
            fresh[rel] = [*stat_key(st), sha]
            files[rel] = {"path": rel, "size": st.st_size, "sha256": sha}
            if time.monotonic() - last_save >= CACHE_SAVE_SECONDS:  # a long first scan keeps what it hashed
                save()
                last_save = time.monotonic()
    if todo or set(cache) != {rel for rel, _ in entries}:
        save()
    elapsed = time.monotonic() - hasher.started
    stats: dict = {"hashed_files": len(todo), "hashed_bytes": hasher.done, "cached_files": len(entries) - len(todo)}
    stats["seconds"] = elapsed
    return [files[rel] for rel in sorted(files)], stats


def set_node(name: str | None) -> None:
    """Name the node in every progress line (`--node`)."""
    global LOG_PREFIX
    if name:
        LOG_PREFIX = f"manifest ({name})"


def partial_bytes(root: str) -> int:
    """Bytes in rsync's partial dirs under root (an interrupted copy's files, which a resumed one finishes)."""
    total = 0
    for dirpath, _dirnames, filenames in os.walk(root):
        if os.path.basename(dirpath) == SKIP_PREFIX + "-partial":
            total += sum(os.lstat(os.path.join(dirpath, f)).st_size for f in filenames)
    return total


def manifest_document(files: list[dict]) -> dict:
    return {"format": FORMAT, "digest": digest_of(files), "files": files}


def read_manifest(path: str) -> dict:
    with open(path) as f:
        doc = json.load(f)
    if doc.get("format") != FORMAT:
        raise SystemExit(f"manifest: {path} is not a {FORMAT} manifest")
    return doc


def fresh_cache(root: str, cache_file: str, files: list[dict]) -> None:
    """A hard link changes its inode's ctime, which keys the cache: record the new keys with the known sha256, so
    the next scan does not hash the files again."""
    cache = load_cache(cache_file, root)
    for f in files:
        cache[f["path"]] = [*stat_key(os.stat(os.path.join(root, f["path"]))), f["sha256"]]
    write_json_atomic(cache_file, {"format": FORMAT, "dir": os.path.realpath(root), "entries": cache})
