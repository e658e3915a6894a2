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
import hashlib
import json
import os
import sys
import threading
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
        "runs": runs(ws),
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
    for shown, criterion in zip(task["criteria"], state.criteria):
        shown["depth"] = criterion.depth
    if cache is not None and key is not None and time.time_ns() - key[1] > 2_000_000_000:
        cache[task_id] = (key, task)
    return task


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


def runs(ws: "Workspace") -> list[dict[str, Any]]:
    """Each workflow run, newest first: its state as `flow status --json` gives it and its
    narrative as `flow log --json` gives it (the newest lines)."""
    if not (ws.dir / "runs").is_dir():
        return []
    from specflux.flow.record import narrative
    from specflux.flow.record.run import Run

    out = []
    for run_id in reversed(Run.ids(ws)):
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
    return out


# --------------------------------------------------------------------- the page


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


def render(data: dict[str, Any], *, live: bool = False) -> tuple[str, str]:
    """The page for `data`, and its version (a hash of the data, so that it changes only when
    something on the page would)."""
    body = embed(data)
    version = hashlib.sha1(body.encode("utf-8")).hexdigest()[:16]
    extra = embed({"version": version, "live": live, "generated": datetime.now().astimezone().isoformat(timespec="seconds")})
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


# --------------------------------------------------------------------- serving


class Board:
    """The served page: regenerated when a task, archive, run or git's HEAD changes (mtimes
    polled once a second); its version changes only when the data does."""

    def __init__(self, manager: "TaskStateManager", out: Path | None = None):
        self.manager = manager
        self.out = out
        self.page = b""
        self.version = ""
        self._signature: Any = None
        self._parsed: dict[str, Any] = {}  # parsed tasks by file stat, the history by HEAD: only what changed is read again
        self._gitdir: Path | None = None  # its HEAD and logs/HEAD: a commit changes the history shown
        if manager.git is not None:
            from specflux.vcs.process import run_git as _run

            done = _run(("rev-parse", "--absolute-git-dir"), manager.git.root)
            self._gitdir = Path(done.stdout.strip()) if done.returncode == 0 else None

    def signature(self) -> tuple:
        """What the page depends on, cheaply: names, sizes and mtimes of the files it reads."""
        ws = self.manager.ws
        parts: list[Any] = []
        for folder in (ws.states_dir, ws.archives_dir, ws.dir / "runs"):
            try:
                with os.scandir(folder) as entries:
                    found = list(entries)
            except OSError:
                parts.append((str(folder), None))
                continue
            for e in found:
                try:
                    st = os.stat(os.path.join(e.path, "events.jsonl")) if e.is_dir() else e.stat()
                    parts.append((e.name, st.st_size, st.st_mtime_ns, st.st_ino))
                except OSError:
                    parts.append((e.name, None))
        for name in ("HEAD", "logs/HEAD") if self._gitdir is not None else ():
            try:
                st = (self._gitdir / name).stat()
                parts.append((name, st.st_size, st.st_mtime_ns))
            except OSError:
                parts.append((name, None))
        parts.sort(key=repr)
        return tuple(parts)

    def refresh(self) -> bool:
        """Regenerate if the files changed; whether the page did."""
        signature = self.signature()
        if signature == self._signature:
            return False
        self._signature = signature
        data = gather(self.manager, self._parsed)
        html, version = render(data, live=True)
        if version == self.version:
            return False
        self.page, self.version = html.encode("utf-8"), version  # one assignment each: readers see old or new
        if self.out is not None:
            from specflux.base.files import atomic_write

            atomic_write(self.out, render(data)[0])
        return True

    def watch(self, stop: threading.Event, every: float = 1.0) -> None:
        while not stop.wait(every):
            try:
                self.refresh()
            except Exception as e:  # noqa: BLE001 - whatever it was, say so and keep serving the last page
                print(f"specflux: board not refreshed: {e if isinstance(e, SpecfluxError) else repr(e)}", file=sys.stderr)


def _handler(board: Board):
    """Answers `/` (the page) and `/version`; on a loopback address only to this machine's names
    (`server.hosts`), so that a page elsewhere cannot rebind a name of its own to the board."""
    from http.server import BaseHTTPRequestHandler

    class Handler(BaseHTTPRequestHandler):
        server_version = "specflux-board"

        def do_GET(self) -> None:
            self._answer(body=True)

        def do_HEAD(self) -> None:
            self._answer(body=False)

        def _answer(self, body: bool) -> None:
            hosts = self.server.hosts  # type: ignore[attr-defined]
            if hosts is not None and (self.headers.get("Host") or "").lower() not in hosts:
                return self._send(403, "text/plain", b"forbidden host\n", body)
            path = self.path.split("?", 1)[0]
            if path == "/":
                return self._send(200, "text/html; charset=utf-8", board.page, body)
            if path == "/version":
                return self._send(200, "application/json", json.dumps({"version": board.version}).encode(), body)
            return self._send(404, "text/plain", b"not found\n", body)

        def _send(self, code: int, kind: str, data: bytes, body: bool) -> None:
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.end_headers()
            if body:
                self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # quiet: the page polls every 2 s

    return Handler


def serve(manager: "TaskStateManager", host: str, port: int, out: Path | None = None) -> int:
    """Serve the page on http://HOST:PORT/ until Ctrl-C; the page reloads itself on a change."""
    import ipaddress
    import socket
    from http.server import ThreadingHTTPServer

    board = Board(manager, out)
    board.refresh()

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

        def handle_error(self, request, client_address) -> None:
            if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
                super().handle_error(request, client_address)

    try:
        server = Server((host, port), _handler(board))
    except OSError as e:
        raise SpecfluxError(f"cannot serve on {host}:{port}: {e.strerror or e} (another --port?)") from None
    bound = server.server_address[1]
    shown = f"[{host}]" if ":" in host else host
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    names = {"localhost", "127.0.0.1", "[::1]", shown.lower()}
    server.hosts = {f"{n}:{bound}" for n in names} if loopback else None  # type: ignore[attr-defined]
    stop = threading.Event()
    watcher = threading.Thread(target=board.watch, args=(stop,), daemon=True)
    watcher.start()
    print(f"serving http://{shown}:{bound}/ (Ctrl-C stops)", flush=True)
    try:
        server.serve_forever(poll_interval=0.25)
    except KeyboardInterrupt:
        print("stopped", flush=True)
    finally:
        stop.set()
        server.server_close()
    return 0


def run_board(args) -> int:
    from specflux.base.escape import safe
    from specflux.store.manager import TaskStateManager
    from specflux.store.workspace import Workspace, ensure_ignored

    ws = Workspace.find(explicit=args.root)
    manager = TaskStateManager(ws, git=True)  # git for the history; the board never commits
    if args.serve:
        return serve(manager, args.host, args.port, Path(args.out) if args.out else None)
    out = Path(args.out) if args.out else ws.dir / "board.html"
    data = write_board(manager, out)
    if not args.out:
        ensure_ignored(ws.dir)
    print(safe(str(out.resolve())))
    for line in data["problems"]:
        print(f"specflux: {safe(line)}", file=sys.stderr)
    return 1 if data["problems"] else 0
