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
The manifest's files (walk, hash, cache, digest) are in scripts/manifest_scan.py; see there for the cache's keys.
"""

import argparse
import concurrent.futures
import json
import os
import shutil
import sys
import time

# The nodes get this program appended to manifest_scan.py as one stream (spark_llm.plan.scripts.manifest_tool
# leaves this import out there): these names are that file's.
from manifest_scan import (
    FORMAT,
    MANIFEST_NAME,
    SKIP_PREFIX,
    VERSIONS_DIR,
    Hasher,
    cache_path,
    digest_of,
    fresh_cache,
    human,
    load_cache,
    log,
    manifest_document,
    partial_bytes,
    read_manifest,
    scan,
    set_node,
    stat_key,
    walk,
    write_json_atomic,
)


def cmd_hash(args: argparse.Namespace) -> int:
    set_node(args.node)
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


def cmd_scan(args: argparse.Namespace) -> int:
    set_node(args.node)
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
    fresh_cache(root, cache_file, doc["files"])
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
        fresh_cache(root, args.cache or cache_path(root), doc["files"])
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
