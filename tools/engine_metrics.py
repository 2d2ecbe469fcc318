"""Write one engine release's Prometheus metric catalog from its own sources (run by hand; the output is committed
as spark_llm/config/engine_catalogs/<engine>-<version>.metrics.json, provenance in that directory's README).

    python tools/engine_metrics.py vllm 0.33.0 SOURCE_DIR ARTIFACT > vllm-0.33.0.metrics.json

SOURCE_DIR is the release's unpacked wheel or sdist (the directory holding `vllm/` or `sglang/`); ARTIFACT is the
file it was unpacked from (its name and sha256 go in the catalog). Nothing is imported or run: the sources are
read as Python syntax trees, so a release installs nothing here.

What is read, per metric, from the call that defines it (`Gauge(name="vllm:...", labelnames=...)` and the
engines' aliases of it, `self._gauge_cls(...)`):
- its name and type (the class called);
- its label names, where the call spells them: a list, `labelnames` built earlier in the same function (`+` and
  `*` of lists), or, in SGLang, `labels.keys()`: the collector's labels, found where the engine builds the dict it
  hands the collector (`SchedulerMetricsCollector(labels=labels)` and its `resolve_collector_class` spelling);
- whether it is defined under an `if` (a feature or an option turns it on: `conditional`);
- a rename the engine itself announces: documentation saying `DEPRECATED: Use <new name> instead`, with the
  `Deprecated in X.Y` comment above the call when there is one.
The documentation text itself is not copied (no engine text in the catalog beyond names).
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

# The files of each engine's main stat loggers, by release layout (the first that exists is read). Spec decoding,
# KV connectors and the like keep metrics of their own, for features spark-llm does not turn on: left out.
SOURCES = {
    "vllm": [("vllm/v1/metrics/loggers.py",)],
    "sglang": [("sglang/srt/observability/metrics_collector.py", "sglang/srt/metrics/collector.py")],
}
PREFIX = {"vllm": "vllm:", "sglang": "sglang:"}
# Where SGLang builds its collectors' labels (searched for `labels=labels` calls naming the collector).
SGLANG_TREES = ("sglang/srt",)
COLLECTOR_ROLES = {"SchedulerMetricsCollector": "scheduler", "TokenizerMetricsCollector": "tokenizer"}

TYPES = {"Gauge": "gauge", "Counter": "counter", "Histogram": "histogram", "Summary": "summary"}
ALIASES = {"_gauge_cls": "gauge", "_counter_cls": "counter", "_histogram_cls": "histogram"}
RENAMED_TO = re.compile(r"DEPRECATED: Use (\S+?) instead")
DEPRECATED_IN = re.compile(r"[Dd]eprecated in (\d+\.\d+(?:\.\d+)?)")


class UnresolvedError(Exception):
    """A label list the call does not spell in a way this reader follows."""


@dataclass
class Found:
    name: str
    type: str
    labels: list[str] | None
    collector: str | None
    conditional: bool
    source: str
    line: int
    renamed_to: str | None
    deprecated_in: str | None


def _callee(node: ast.Call) -> str:
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _kind(node: ast.Call) -> str | None:
    callee = _callee(node)
    if callee in ALIASES:
        return ALIASES[callee]
    for cls, kind in TYPES.items():
        if callee in (cls, f"_Prom{cls}", f"Prom{cls}"):
            return kind
    return None


def _keyword(node: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in node.keywords if k.arg == name), None)


def _text(node: ast.expr | None) -> str | None:
    """A string the source spells (implicit concatenation and `+` of literals included)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _text(node.left), _text(node.right)
        return None if left is None or right is None else left + right
    return None


class Labels:
    """Label lists as one function spells them: literals, names assigned earlier in it, `+` and `*`."""

    def __init__(self, function: ast.AST, collector_labels: list[str] | None) -> None:
        self.assigned: dict[str, list[tuple[int, ast.expr]]] = {}
        for node in ast.walk(function):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        self.assigned.setdefault(target.id, []).append((node.lineno, node.value))
                    elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
                        key = f"{target.value.id}.{target.attr}"  # `self.labelname_x = "x"`
                        self.assigned.setdefault(key, []).append((node.lineno, node.value))
        self.collector_labels = collector_labels

    def of(self, node: ast.expr, line: int) -> list[str]:
        if isinstance(node, (ast.List, ast.Tuple)):
            out: list[str] = []
            for element in node.elts:
                if isinstance(element, ast.Starred):
                    out += self.of(element.value, line)
                elif (text := _text(element)) is not None:
                    out.append(text)
                else:
                    out += self.of(element, line)  # a name bound to one label: `self.labelname_x`
            return out
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self.of(node.left, line) + self.of(node.right, line)
        if isinstance(node, (ast.Name, ast.Attribute)):
            key = node.id if isinstance(node, ast.Name) else ast.unparse(node)
            earlier = [value for at, value in self.assigned.get(key, []) if at < line]
            if earlier:
                return self.of(earlier[-1], line)
        if isinstance(node, ast.Call) and _callee(node) in ("list", "tuple") and len(node.args) == 1:
            return self.of(node.args[0], line)
        if isinstance(node, ast.Call) and _callee(node) == "keys" and self.collector_labels is not None:
            return list(self.collector_labels)
        if (text := _text(node)) is not None:
            return [text]
        raise UnresolvedError(ast.unparse(node))


def _conditional(chain: list[ast.AST]) -> bool:
    """Under an `if` (or a conditional expression) inside its function."""
    inside = False
    for node in chain:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inside = True
        elif inside and isinstance(node, (ast.If, ast.IfExp, ast.For, ast.Try)):
            return True
    return False


def _comment_version(lines: list[str], line: int) -> str | None:
    """`Deprecated in X.Y` in the comment lines just above the call's statement."""
    for text in reversed(lines[max(0, line - 8) : line - 1]):
        stripped = text.strip()
        if stripped.startswith("#") and (match := DEPRECATED_IN.search(stripped)):
            return match[1]
        if stripped and not stripped.startswith(("#", "if ")):
            break
    return None


def metrics_of(path: Path, relative: str, prefix: str, collector_labels: dict[str, list[str]]) -> list[Found]:
    source = path.read_text()
    lines = source.splitlines()
    tree = ast.parse(source)
    found: list[Found] = []

    def visit(node: ast.AST, chain: list[ast.AST], cls: str | None, function: ast.AST | None) -> None:
        if isinstance(node, ast.ClassDef):
            cls = node.name
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function = node
        if isinstance(node, ast.Call) and (kind := _kind(node)):
            name = _text(_keyword(node, "name"))
            if name and name.startswith(prefix):
                labels_node = _keyword(node, "labelnames")
                # SGLang defines each collector's metrics in its class; vLLM's one logger needs no name.
                collector = cls if prefix == "sglang:" else None
                labels: list[str] | None = []
                if labels_node is not None:
                    reader = Labels(function or tree, collector_labels.get(collector or ""))
                    try:
                        labels = reader.of(labels_node, node.lineno)
                    except UnresolvedError:
                        labels = None
                doc = _text(_keyword(node, "documentation")) or ""
                renamed = RENAMED_TO.search(doc)
                found.append(
                    Found(
                        name=name,
                        type=kind,
                        labels=labels,
                        collector=collector,
                        conditional=_conditional(chain),
                        source=relative,
                        line=node.lineno,
                        renamed_to=renamed[1].rstrip(".") if renamed else None,
                        deprecated_in=_comment_version(lines, node.lineno) if renamed else None,
                    )
                )
        for child in ast.iter_child_nodes(node):
            visit(child, [*chain, node], cls, function)

    visit(tree, [], None, None)
    return found


def _dict_keys(node: ast.expr) -> list[str] | None:
    if isinstance(node, ast.Dict) and all(_text(k) is not None for k in node.keys if k is not None):
        return [_text(k) for k in node.keys if k is not None]  # type: ignore[misc]
    return None


def _function_labels(function: ast.AST, functions: dict[str, ast.AST]) -> tuple[list[str], list[str]] | None:
    """(the labels a function's `labels` dict always has, those it adds under a condition)."""
    always: list[str] | None = None
    added: list[str] = []
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "labels" for t in node.targets):
            keys = _dict_keys(node.value)
            if keys is None and isinstance(node.value, ast.Call) and _callee(node.value) in functions:
                inner = _function_labels(functions[_callee(node.value)], functions)
                if inner:
                    keys, more = inner
                    added += more
            if keys is not None and always is None:
                always = keys
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if (
                    isinstance(target, ast.Subscript)
                    and isinstance(target.value, ast.Name)
                    and target.value.id == "labels"
                    and (key := _text(target.slice)) is not None
                ):
                    added.append(key)
    if always is None:
        return None
    return always, [k for k in dict.fromkeys(added) if k not in always]


def sglang_collector_labels(root: Path) -> tuple[dict[str, list[str]], dict[str, dict]]:
    """Each collector's labels, from the function that builds its `labels` dict and calls it with `labels=labels`."""
    labels: dict[str, list[str]] = {}
    described: dict[str, dict] = {}
    files = sorted(p for tree in SGLANG_TREES for p in (root / tree).rglob("*.py"))
    parsed = {}
    functions: dict[str, ast.AST] = {}
    for path in files:
        text = path.read_text(errors="replace")
        if "labels" not in text:
            continue
        try:
            parsed[path] = ast.parse(text)
        except SyntaxError:
            continue
        for node in ast.walk(parsed[path]):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions.setdefault(node.name, node)
    for path, tree in parsed.items():
        for function in ast.walk(tree):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                if not isinstance(node, ast.Call):
                    continue
                passed = _keyword(node, "labels")
                if not (isinstance(passed, ast.Name) and passed.id == "labels"):
                    continue
                callee = _callee(node).lower()
                for collector, role in COLLECTOR_ROLES.items():
                    if collector in described or role not in callee:
                        continue
                    result = _function_labels(function, functions)
                    if result is None:
                        continue
                    always, optional = result
                    labels[collector] = always
                    described[collector] = {
                        "labels": always,
                        "optional_labels": optional,
                        "source": str(path.relative_to(root)),
                        "line": node.lineno,
                    }
    return labels, described


def catalog(engine: str, version: str, root: Path, artifact: Path) -> dict:
    prefix = PREFIX[engine]
    collector_labels, collectors = sglang_collector_labels(root) if engine == "sglang" else ({}, {})
    files = []
    for choices in SOURCES[engine]:
        path = next((c for c in choices if (root / c).is_file()), None)
        if path is None:
            raise SystemExit(f"none of {', '.join(choices)} under {root}: not a {engine} release's sources?")
        files.append(path)
    found = [m for path in files for m in metrics_of(root / path, path, prefix, collector_labels)]
    metrics: dict[str, dict] = {}
    for m in found:
        entry = {
            "name": m.name,
            "type": m.type,
            "labels": m.labels,
            "conditional": m.conditional,
            "source": f"{m.source}:{m.line}",
        }
        if m.collector:
            entry["collector"] = m.collector
        if m.renamed_to:
            entry["renamed_to"] = m.renamed_to
            if m.deprecated_in:
                entry["deprecated_in"] = m.deprecated_in
        if m.name in metrics:  # the same metric defined on two paths (e.g. per engine mode): one entry
            metrics[m.name]["conditional"] = metrics[m.name]["conditional"] and m.conditional
            continue
        metrics[m.name] = entry
    return {
        "engine": engine,
        "version": version,
        "source_files": files,
        "extracted_from": {
            "artifact": artifact.name,
            "sha256": hashlib.sha256(artifact.read_bytes()).hexdigest(),
        },
        "collectors": collectors,
        "metrics": sorted(metrics.values(), key=lambda e: e["name"]),
    }


def main(argv: list[str]) -> int:
    if len(argv) != 5 or argv[1] not in SOURCES:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    engine, version, root, artifact = argv[1], argv[2], Path(argv[3]), Path(argv[4])
    if not artifact.is_file():
        print(f"{artifact}: no such file (the wheel or sdist SOURCE_DIR was unpacked from)", file=sys.stderr)
        return 2
    json.dump(catalog(engine, version, root, artifact), sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
