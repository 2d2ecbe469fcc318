#!/usr/bin/env python3
"""spark-llm weights manifest: relative path, size and sha256 of every file of a directory, each hashed once.

Runs on the nodes (python3 standard library only; DGX OS and the sim nodes have it) and on the operator's
machine. The Pulumi program sends it over stdin (`python3 - scan DIR`), so nothing needs installing first.

Usage:
  manifest.py scan DIR [--json] [--write] [--cache FILE] [--jobs N] [--node NAME]
      Hash DIR (a missing DIR is an empty manifest). Prints `spark-llm-manifest DIGEST FILES BYTES`, or the
      manifest as JSON with --json. --write also stores it as DIR/.spark-llm-manifest.json.
  manifest.py hash DIR [--cache FILE] [--jobs N] [--node NAME]
      Hash the files named on stdin (NUL-separated, relative to DIR) into DIR's cache as the names arrive, so a
      later scan finds them cached. The fan-out feeds each file as it lands on a worker: the worker's
      verification then hashes during the copy instead of after it.
  manifest.py diff SOURCE.json TARGET.json --send FILE --extra FILE
      Files of SOURCE missing from TARGET or different there (size or sha256) go to --send, files only in
      TARGET to --extra, NUL-separated (for `rsync --from0 --files-from`, `xargs -0`). Prints
      `SOURCE_DIGEST SOURCE_FILES SOURCE_BYTES SEND_FILES SEND_BYTES EXTRA_FILES`.
  manifest.py purge DIR
      Delete the files DIR's stored manifest lists, the manifest, rsync's partial files and the download
      metadata, then the directories left empty. Nothing else in DIR is touched.
  manifest.py keep DIR
      Keep DIR's verified version (its stored manifest, when the files still match it) as hard links under
      DIR/.spark-llm-versions/DIGEST: no byte copied, and a copy that then replaces a file (rsync writes a new one
      and renames it over the old) leaves the kept one whole. What a rollback puts back.
  manifest.py restore DIR DIGEST
      Make DIR the kept version DIGEST again (hard links back, files it did not have removed, its manifest
      stored); prints its digest line. Fails, changing nothing, when this node did not keep it.

Outputs: the result on stdout; progress and a summary on stderr (a progress line every PROGRESS_SECONDS).
The digest is the sha256 of the canonical JSON of the sorted [path, size, sha256] list.

Skipped while scanning: names starting with `.spark-llm` at any depth (this manifest, rsync's partial dir)
and the top-level `.cache` directory (`hf download --local-dir` keeps its resume metadata there).

Cache: one JSON file per directory under ${XDG_CACHE_HOME:-~/.cache}/spark-llm/manifests/, entries keyed by
(path, size, mtime_ns, inode, ctime_ns). mtime alone is not enough: `rsync -a` restores the source's mtime on
a copy, so a re-copied (or corrupted then re-copied) file would look unchanged; its inode and ctime do change.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import json
import os
import shutil
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


def cmd_hash(args: argparse.Namespace) -> int:
    global LOG_PREFIX
    if args.node:
        LOG_PREFIX = f"manifest ({args.node})"
    root = args.dir.rstrip("/") or "/"
    cache_file = args.cache or cache_path(root)
    hasher = Hasher(0)
    fresh: dict[str, list] = {}

    def one(rel: str) -> None:
        path = os.path.join(root, rel)
        try:
            st = os.stat(path)
            sha = hasher.file(path)
            after = os.stat(path)
        except OSError as exc:  # gone or unreadable: the final scan will say so
            log(f"{rel}: not hashed ({exc.strerror})")
            return
        if stat_key(after) == stat_key(st):  # changed while hashed: the final scan hashes it again
            fresh[rel] = [*stat_key(st), sha]

    buf = b""
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(args.jobs, 1)) as pool:
        while chunk := os.read(0, 1 << 16):
            *names, buf = (buf + chunk).split(b"\0")
            for name in names:
                if name:
                    pool.submit(one, os.fsdecode(name))
    cache = load_cache(cache_file, root)  # read now, not at the start: keep what others stored meanwhile
    if fresh:
        write_json_atomic(cache_file, {"format": FORMAT, "dir": os.path.realpath(root), "entries": {**cache, **fresh}})
    elapsed = time.monotonic() - hasher.started
    log(f"{root}: hashed {len(fresh)} files ({human(hasher.done)}) as they arrived, in {elapsed:.1f} s")
    return 0


def partial_bytes(root: str) -> int:
    """Bytes in rsync's partial dirs under root (an interrupted copy's files, which a resumed one finishes)."""
    total = 0
    for dirpath, _dirnames, filenames in os.walk(root):
        if os.path.basename(dirpath) == SKIP_PREFIX + "-partial":
            total += sum(os.lstat(os.path.join(dirpath, f)).st_size for f in filenames)
    return total


def manifest_document(files: list[dict]) -> dict:
    return {"format": FORMAT, "digest": digest_of(files), "files": files}


def cmd_scan(args: argparse.Namespace) -> int:
    global LOG_PREFIX
    if args.node:
        LOG_PREFIX = f"manifest ({args.node})"
    root = args.dir.rstrip("/") or "/"
    files, stats = scan(root, args.cache or cache_path(root), args.jobs)
    doc = manifest_document(files)
    total = sum(f["size"] for f in files)
    rate = f" at {human(stats['hashed_bytes'] / stats['seconds'])}/s" if stats["hashed_bytes"] else ""
    log(
        f"{root}: {len(files)} files, {human(total)}; hashed {stats['hashed_files']} "
        f"({human(stats['hashed_bytes'])}){rate}, {stats['cached_files']} from cache"
    )
    if args.write:
        if not os.path.isdir(root):
            raise SystemExit(f"manifest: {root} is not a directory")
        write_json_atomic(os.path.join(root, MANIFEST_NAME), doc, unless_same=True)
    if args.json:
        # Not part of the stored manifest: what a copy into DIR needs to know about its disk.
        space = {"free": None, "partial": 0}
        if os.path.isdir(root):
            vfs = os.statvfs(root)
            space = {"free": vfs.f_bavail * vfs.f_frsize, "partial": partial_bytes(root)}
        json.dump({**doc, **space}, sys.stdout, separators=(",", ":"), sort_keys=True)
        sys.stdout.write("\n")
    else:
        print(f"spark-llm-manifest {doc['digest']} {len(files)} {total}")
    return 0


def read_manifest(path: str) -> dict:
    with open(path) as f:
        doc = json.load(f)
    if doc.get("format") != FORMAT:
        raise SystemExit(f"manifest: {path} is not a {FORMAT} manifest")
    return doc


def cmd_diff(args: argparse.Namespace) -> int:
    source, target = read_manifest(args.source), read_manifest(args.target)
    have = {f["path"]: (f["size"], f["sha256"]) for f in target["files"]}
    send = [f for f in source["files"] if have.get(f["path"]) != (f["size"], f["sha256"])]
    wanted = {f["path"] for f in source["files"]}
    extra = [f["path"] for f in target["files"] if f["path"] not in wanted]
    with open(args.send, "wb") as out:
        out.write(b"".join(f["path"].encode() + b"\0" for f in send))
    with open(args.extra, "wb") as out:
        out.write(b"".join(p.encode() + b"\0" for p in extra))
    send_bytes = sum(f["size"] for f in send)
    total_bytes = sum(f["size"] for f in source["files"])
    print(f"{source['digest']} {len(source['files'])} {total_bytes} {len(send)} {send_bytes} {len(extra)}")
    return 0


def cmd_purge(args: argparse.Namespace) -> int:
    root = args.dir.rstrip("/") or "/"
    stored = os.path.join(root, MANIFEST_NAME)
    if not os.path.isfile(stored):
        log(f"{root}: no {MANIFEST_NAME}, nothing purged")
        return 0
    doc = read_manifest(stored)
    removed = 0
    for f in doc["files"]:
        path = os.path.normpath(os.path.join(root, f["path"]))
        if not path.startswith(root + os.sep):  # a manifest never names a path outside its directory
            raise SystemExit(f"manifest: refusing to delete {path}: outside {root}")
        try:
            os.unlink(path)
            removed += 1
        except FileNotFoundError:
            pass
    for dirpath, dirnames, filenames in os.walk(root, topdown=False):
        for name in filenames:
            if name.startswith(SKIP_PREFIX) and name != MANIFEST_NAME:
                os.unlink(os.path.join(dirpath, name))
        for name in dirnames:
            full = os.path.join(dirpath, name)
            if name.startswith(SKIP_PREFIX) or (dirpath == root and name == ".cache"):
                shutil.rmtree(full, ignore_errors=True)
            elif not os.listdir(full):
                os.rmdir(full)
    os.unlink(stored)
    left = os.listdir(root)
    if not left:
        os.rmdir(root)
    log(f"{root}: purged {removed} files" + (f"; {len(left)} other entries kept" if left else ", directory removed"))
    return 0


def _fresh_cache(root: str, cache_file: str, files: list[dict]) -> None:
    """A hard link changes its inode's ctime, which keys the cache: record the new keys with the known sha256, so
    the next scan does not hash the files again."""
    cache = load_cache(cache_file, root)
    for f in files:
        cache[f["path"]] = [*stat_key(os.stat(os.path.join(root, f["path"]))), f["sha256"]]
    write_json_atomic(cache_file, {"format": FORMAT, "dir": os.path.realpath(root), "entries": cache})


def cmd_keep(args: argparse.Namespace) -> int:
    root = args.dir.rstrip("/") or "/"
    stored = os.path.join(root, MANIFEST_NAME)
    if not os.path.isfile(stored):
        log(f"{root}: no {MANIFEST_NAME}: no version to keep")
        return 0
    doc = read_manifest(stored)
    dest = os.path.join(root, VERSIONS_DIR, doc["digest"])
    if os.path.isfile(os.path.join(dest, MANIFEST_NAME)):
        log(f"{root}: version {doc['digest'][:16]} already kept")
        return 0
    cache_file = args.cache or cache_path(root)
    files, _ = scan(root, cache_file, args.jobs)
    if digest_of(files) != doc["digest"]:
        log(f"{root}: the files are not the verified version {doc['digest'][:16]} (a copy cut short?): none kept")
        return 0
    tmp = dest + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    for f in doc["files"]:
        os.makedirs(os.path.dirname(os.path.join(tmp, f["path"])), exist_ok=True)
        os.link(os.path.join(root, f["path"]), os.path.join(tmp, f["path"]))
    write_json_atomic(os.path.join(tmp, MANIFEST_NAME), doc)
    os.replace(tmp, dest)
    _fresh_cache(root, cache_file, doc["files"])
    log(f"{root}: kept version {doc['digest'][:16]} ({len(doc['files'])} files as hard links, no byte copied)")
    return 0


def cmd_restore(args: argparse.Namespace) -> int:
    root = args.dir.rstrip("/") or "/"
    kept = os.path.join(root, VERSIONS_DIR, args.digest)
    current = os.path.join(root, MANIFEST_NAME)
    if os.path.isfile(current) and read_manifest(current)["digest"] == args.digest:
        doc = read_manifest(current)  # the kept version is the one there (nothing changed it since)
    elif os.path.isfile(os.path.join(kept, MANIFEST_NAME)):
        doc = read_manifest(os.path.join(kept, MANIFEST_NAME))
        for f in doc["files"]:
            target, source = os.path.join(root, f["path"]), os.path.join(kept, f["path"])
            if os.path.exists(target) and os.path.samefile(target, source):
                continue
            os.makedirs(os.path.dirname(target), exist_ok=True)
            tmp = os.path.join(os.path.dirname(target), ".spark-llm-restore-" + os.path.basename(target))
            if os.path.lexists(tmp):
                os.unlink(tmp)
            os.link(source, tmp)
            os.replace(tmp, target)
        wanted = {f["path"] for f in doc["files"]}
        for rel, _ in walk(root):
            if rel not in wanted:
                os.unlink(os.path.join(root, rel))
        write_json_atomic(current, doc)
        _fresh_cache(root, args.cache or cache_path(root), doc["files"])
    else:
        raise SystemExit(f"manifest: {root}: version {args.digest[:16]} is not kept on this node")
    total = sum(f["size"] for f in doc["files"])
    log(f"{root}: version {args.digest[:16]} restored ({len(doc['files'])} files, hard links: no byte copied)")
    print(f"spark-llm-manifest {doc['digest']} {len(doc['files'])} {total}")
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="manifest.py", description="Manifest of a weights directory.")
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("scan", help="hash a directory (cached) and print its digest or manifest")
    p.add_argument("dir")
    p.add_argument("--json", action="store_true", help="print the manifest JSON instead of the digest line")
    p.add_argument("--write", action="store_true", help=f"also store it as DIR/{MANIFEST_NAME}")
    p.add_argument("--cache", help="cache file (default: one per directory under ~/.cache/spark-llm/manifests)")
    p.add_argument("--jobs", type=int, default=min(4, os.cpu_count() or 1), help="files hashed at once")
    p.add_argument("--node", help="name in the progress lines (which node scans)")
    p.set_defaults(run=cmd_scan)
    p = commands.add_parser("hash", help="hash the files named on stdin into DIR's cache")
    p.add_argument("dir")
    p.add_argument("--cache", help="cache file (default: one per directory under ~/.cache/spark-llm/manifests)")
    p.add_argument("--jobs", type=int, default=min(4, os.cpu_count() or 1), help="files hashed at once")
    p.add_argument("--node", help="name in the progress lines (which node hashes)")
    p.set_defaults(run=cmd_hash)
    p = commands.add_parser("diff", help="what to send from SOURCE to make TARGET identical")
    p.add_argument("source")
    p.add_argument("target")
    p.add_argument("--send", required=True)
    p.add_argument("--extra", required=True)
    p.set_defaults(run=cmd_diff)
    p = commands.add_parser("purge", help="delete what DIR's stored manifest lists")
    p.add_argument("dir")
    p.set_defaults(run=cmd_purge)
    for name, run, help_text in (
        ("keep", cmd_keep, "keep DIR's verified version as hard links"),
        ("restore", cmd_restore, "make DIR a kept version again"),
    ):
        p = commands.add_parser(name, help=help_text)
        p.add_argument("dir")
        if name == "restore":
            p.add_argument("digest")
        p.add_argument("--cache", help="cache file (default: one per directory under ~/.cache/spark-llm/manifests)")
        p.add_argument("--jobs", type=int, default=min(4, os.cpu_count() or 1), help="files hashed at once")
        p.add_argument("--node", help="name in the progress lines")
        p.set_defaults(run=run)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
