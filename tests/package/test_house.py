"""The house's shape (ARCHITECTURE.md): no two modules of specflux import each other, directly or
round a circle, counting imports inside functions and under `if TYPE_CHECKING:`; no module is over
500 lines without a comment at its top saying why; the public names load from `specflux`."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "specflux"
MAX_LINES = 500
REASON = "# Over 500 lines:"  # the comment that says why a module is longer


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package.split(".")[: len(package.split(".")) - node.level + 1], *filter(None, [node.module])])
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name and target.startswith("specflux"):
                out.add(target)
    return out


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_no_module_imports_itself_round_a_circle():
    found = modules()
    # a package's __init__ is where its submodules live, not an import of them
    graph = {name: {t for t in imports_of(name, path, set(found)) if not name.startswith(t + ".")}
             for name, path in found.items()}
    assert circles(graph) == []


def test_no_module_over_500_lines_without_a_reason_at_its_top():
    long = []
    for name, path in modules().items():
        lines = path.read_text(encoding="utf-8").splitlines()
        if len(lines) > MAX_LINES and not any(line.startswith(REASON) for line in lines[:30]):
            long.append(f"{name}: {len(lines)} lines")
    assert long == []


def test_the_public_names_load_from_specflux_on_first_use():
    code = ("import sys, specflux; assert not [m for m in sys.modules if m.startswith('specflux.')], sys.modules; "
            "from specflux import TaskStateManager, TaskDocument, Workspace, SpecfluxError; "
            "print(TaskStateManager.__module__, TaskDocument.__module__, Workspace.__module__, SpecfluxError.__module__)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert done.stdout.split() == ["specflux.store.manager", "specflux.format.document", "specflux.store.workspace",
                                   "specflux.base.errors"]
