"""`specflux board`: one self-contained HTML page of the workspace (tasks by status, the dependency
graph, each task's full state and git history, workflow runs), written to a file or served locally
with live refresh.

The page is `board_page.html` (inline CSS and JS, nothing loaded from anywhere) with the data put
in as JSON. Task text is written by people and agents, so it is data only: the JSON is escaped so
that nothing in it can end its `<script>` element, the page renders every string with
`textContent`, and a Content-Security-Policy lets no script run but the page's own (by hash).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import os
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specflux.store.chain import Graph, cycle_groups
from specflux.base.errors import SpecfluxError, UsageError
from specflux.surface.views import error_json, task_json
from specflux.store.workspace import check_folder, natural_key

if TYPE_CHECKING:
    from specflux.store.manager import TaskStateManager
    from specflux.store.workspace import Workspace

DATA_MARK = "__SPECFLUX_BOARD_DATA__"
HASH_MARK = "__SPECFLUX_SCRIPT_HASH__"
HISTORY_KEEP = 30  # newest commits per task on the page; the rest is counted
NARRATIVE_KEEP = 400  # newest narrative lines per run


# --------------------------------------------------------------------- the data


def gather(manager: "TaskStateManager", cache: dict[str, Any] | None = None) -> dict[str, Any]:
    """Everything the page shows, as plain JSON values. `cache` (kept by `--serve` between
    regenerations) holds each file's parsed task by its stat, so that only changed files are read,
    and the history by git's HEAD."""
    ws = manager.ws
    tasks, broken = [], []
    for task_id in ws.task_ids():
        entry = _task_entry(manager, task_id, None if cache is None else cache.setdefault("tasks", {}))
        (broken if "error" in entry else tasks).append(entry)
    tasks = [dict(t) for t in tasks]  # copies: the cached ones stay as parsed
    graph = Graph({t["id"]: t["dependencies"] for t in tasks}, {t["id"]: t["status"] for t in tasks},
                  {t["id"]: t["title"] for t in tasks}, unreadable={b["id"] for b in broken})
    problems = [b["text"] for b in broken] + graph.problems()
    for task in tasks:
        task["dependents"] = []
    by_id = {t["id"]: t for t in tasks}
    for task in tasks:
        for dep in task["dependencies"]:
            if dep in by_id:
                by_id[dep]["dependents"].append(task["id"])
    history, history_more = histories(manager, cache)
    for task in tasks:
        task["history"] = history.get(task["id"], [])
        task["history_more"] = history_more.get(task["id"], 0)
    return {
        "workspace": ws.root.name,  # the name only: the page may be shared
        "tasks": tasks,
        "broken": broken,
        "problems": problems,
        "graph": layout(graph),
        "runs": runs(ws, None if cache is None else cache.setdefault("runs", {})),
        "git": manager.git is not None,
    }


def _task_entry(manager: "TaskStateManager", task_id: str, cache: dict[str, tuple] | None) -> dict[str, Any]:
    """One task as `show --json` gives it (with `done` and criteria depths), or a broken file's
    error, from `cache` when the file's stat is unchanged (and was not written in the last 2 s,
    when a change could keep the same mtime)."""
    rel = manager.ws.task_rel(task_id)
    key = None
    if cache is not None:
        try:
            st = os.stat(manager.path(task_id))
            key = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
        except OSError:
            key = None
        if key is not None and cache.get(task_id, (None,))[0] == key:
            return cache[task_id][1]
    try:
        doc = manager.load(task_id)
        state = doc.to_state(task_id)
    except SpecfluxError as e:
        return {"id": task_id, "path": rel, "error": error_json(e.located(rel)), "text": str(e)}
    task = task_json(state, rel, len(doc.text.encode("utf-8")))
    task["done"] = state.done
    task["sha"] = file_version(doc.text)  # an edit from the page names the file it was made on
    for shown, criterion in zip(task["criteria"], state.criteria):
        shown["depth"] = criterion.depth
    if cache is not None and key is not None and time.time_ns() - key[1] > 2_000_000_000:
        cache[task_id] = (key, task)
    return task


def file_version(text: str) -> str:
    """A task file's version as the page knows it: a hash of its text."""
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]


def layout(graph: Graph) -> dict[str, Any]:
    """A layered drawing of the graph: each task's layer is the length of the longest chain of
    dependencies below it; rows within a layer are ordered by a few barycentre sweeps. Cycles and
    unknown dependencies never stop it (a cycle's closing edge is drawn backwards, in red)."""
    missing = sorted({d for ds in graph.deps.values() for d in ds if d not in graph.deps}, key=natural_key)  # or unreadable
    layer: dict[str, int] = {d: 0 for d in missing}
    for t in graph.order():  # dependencies first; inside a cycle, one edge points backwards
        layer[t] = 1 + max((layer[d] for d in graph.deps[t] if d in layer), default=-1)
    group = cycle_groups(graph.deps)
    edges = [{"from": d, "to": t, "cycle": d in group and group[d] == group.get(t)}
             for t in sorted(graph.deps, key=natural_key) for d in graph.deps[t]]
    linked = {e["from"] for e in edges} | {e["to"] for e in edges}
    alone = [n for n in graph.order() if n not in linked]  # no dependency, nothing waits on it: a grid below
    layers: list[list[str]] = [[] for _ in range(max((layer[n] for n in linked), default=-1) + 1)]
    for node in [*missing, *graph.order()]:
        if node in linked:
            layers[layer[node]].append(node)
    ups: dict[str, list[str]] = {n: [] for n in layer}
    downs: dict[str, list[str]] = {n: [] for n in layer}
    for e in edges:
        if layer[e["from"]] < layer[e["to"]]:
            ups[e["to"]].append(e["from"])
            downs[e["from"]].append(e["to"])
    row = {n: i for nodes in layers for i, n in enumerate(nodes)}
    for _ in range(3):  # down, then up: a node moves towards the mean row of its neighbours
        for sweep, near in ((layers[1:], ups), (layers[-2::-1], downs)):
            for nodes in sweep:
                key = {n: sum(row[m] for m in near[n]) / len(near[n]) if near[n] else row[n] for n in nodes}
                nodes.sort(key=lambda n: key[n])
                row.update({n: i for i, n in enumerate(nodes)})
    rows = max((len(nodes) for nodes in layers), default=0)
    cols = max(len(layers), min(len(alone), 6), 1)
    first = rows + 1 if rows else 0
    nodes = [{"id": n, "layer": layer[n], "col": layer[n], "row": row[n], "missing": n in missing} for ns in layers for n in ns]
    nodes += [{"id": n, "layer": 0, "col": i % cols, "row": first + i // cols, "missing": False, "alone": True}
              for i, n in enumerate(alone)]
    return {"nodes": nodes, "edges": edges, "layers": len(layers), "rows": rows,
            "width": cols, "height": first + -(-len(alone) // cols)}


def histories(manager: "TaskStateManager", cache: dict[str, Any] | None = None) -> tuple[dict[str, list[dict[str, Any]]], dict[str, int]]:
    """Every task's history (`history.all_histories`, newest HISTORY_KEEP each); with `cache`, read
    again only when HEAD moved."""
    git = manager.git
    if git is None:
        return {}, {}
    from specflux.store.history import all_histories
    from specflux.vcs.process import run_git as _run

    if cache is None:
        return all_histories(manager, keep=HISTORY_KEEP)
    head = _run(("rev-parse", "-q", "--verify", "HEAD"), git.root).stdout.strip()
    if cache.get("history", (None,))[0] != head:
        cache["history"] = (head, all_histories(manager, keep=HISTORY_KEEP))
    return cache["history"][1]


def runs(ws: "Workspace", cache: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Each workflow run, newest first: its state as `flow status --json` gives it and its
    narrative as `flow log --json` gives it (the newest lines). With `cache` (kept by `--serve`),
    a run is read again only when its event log or state changed: a finished run never is."""
    if not (ws.dir / "runs").is_dir():
        return []
    from specflux.flow.record import narrative
    from specflux.flow.record.run import Run

    out = []
    for run_id in reversed(Run.ids(ws)):
        key = None
        if cache is not None:
            key = _run_key(ws.dir / "runs" / run_id)
            if key is not None and cache.get(run_id, (None,))[0] == key:
                out.append(cache[run_id][1])
                continue
        run = Run(ws, run_id)
        try:
            state = run.public_state()
            events = run.events.read()
        except (SpecfluxError, OSError, ValueError) as e:
            out.append({"runId": run_id, "error": str(e)})
            continue
        lines = [{"seq": e["seq"], "at": e.get("at"), "type": e["type"], "text": text}
                 for e in events if (text := narrative.line(e))]
        state.pop("artifacts", None)  # the agents' hand-ins, in full: the page shows the rest
        out.append({"runId": run_id, "state": state, "narrative": lines[-NARRATIVE_KEEP:],
                    "narrativeMore": max(0, len(lines) - NARRATIVE_KEEP)})
        if key is not None:
            cache[run_id] = (key, out[-1])
    return out


def _run_key(folder: Path) -> tuple | None:
    """What a run's entry depends on: its event log's and state's stats (None: unreadable)."""
    key = []
    for name in ("events.jsonl", "state.json"):
        try:
            st = os.stat(folder / name)
        except FileNotFoundError:
            key.append(None)
            continue
        except OSError:
            return None
        key.append((st.st_size, st.st_mtime_ns, st.st_ino))
    return tuple(key)


# --------------------------------------------------------------------- the page


@functools.lru_cache(maxsize=1)
def _template() -> str:
    """The page template with its script's hash in its Content-Security-Policy."""
    from importlib import resources

    page = resources.files("specflux.board").joinpath("board_page.html").read_text(encoding="utf-8")
    start = page.index("<script>") + len("<script>")
    script = page[start : page.index("</script>", start)]
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode()
    return page.replace(HASH_MARK, digest, 1)


def embed(data: Any) -> str:
    """JSON that cannot end the `<script>` element it sits in, nor open a comment there: every
    `<`, `>` and `&` is written as a `\\u` escape (the same JSON value)."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def embed_data(data: dict[str, Any], memo: dict[Any, Any] | None) -> str:
    """`embed(data)` of the page's data; with `memo` (kept by `--serve` between regenerations), a
    task or run whose entry has not changed is not encoded again: at 1,000 tasks encoding is most of
    a regeneration. `memo` keeps only what this call used."""
    if memo is None:
        return embed(data)
    used: dict[Any, Any] = {}

    def once(key: Any, value: Any) -> str:
        text = memo.get(key)
        if text is None or text[0] is not value and key[0] == "run":
            text = (value, embed(value))
        used[key] = text
        return text[1]

    parts = []
    for name, value in data.items():
        if name == "tasks":
            text = "[" + ",".join(once(("task", t["id"], t["sha"], tuple(t["dependents"]), t["history_more"],
                                        json.dumps(t["history"][:1]), len(t["history"])), t) for t in value) + "]"
        elif name == "runs":  # a run's entry is the same object while its files are unchanged
            text = "[" + ",".join(once(("run", r["runId"], id(r)), r) for r in value) + "]"
        else:
            text = embed(value)
        parts.append(embed(name) + ":" + text)
    memo.clear()
    memo.update(used)
    return "{" + ",".join(parts) + "}"


def render(data: dict[str, Any], *, live: bool = False, memo: dict[Any, Any] | None = None,
           **options: Any) -> tuple[str, str]:
    """The page for `data`, and its version (a hash of the data, so that it changes only when
    something on the page would). `options` tell a served page what it may do (`actions`, its
    `token`); `memo`: see `embed_data`."""
    body = embed_data(data, memo)
    version = hashlib.sha1(body.encode("utf-8")).hexdigest()[:16]
    extra = embed({"version": version, "live": live, "generated": datetime.now().astimezone().isoformat(timespec="seconds"),
                   **options})
    return _template().replace(DATA_MARK, body[:-1] + ("," if body != "{}" else "") + extra[1:], 1), version  # two objects made one


def write_board(manager: "TaskStateManager", out: Path) -> dict[str, Any]:
    """Write the page to `out` (atomically); returns the data it shows."""
    from specflux.base.files import atomic_write, os_error

    if out.is_dir():
        raise UsageError(f"{out} is a folder: give a file name for the page (e.g. {out / 'board.html'})")
    check_folder(out.parent)
    data = gather(manager)
    html, _ = render(data)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(out, html)
    except OSError as e:
        raise os_error(e, str(out), "write") from None
    return data
