"""The dependency graph between tasks, and chain wiring: upstream outputs into downstream inputs."""

from __future__ import annotations

import heapq
import re
from specflux.base.records import Factory, record
from typing import TYPE_CHECKING, Iterable

from specflux.format.document import TaskDocument
from specflux.format.edits import Edit, apply_edits
from specflux.format.regions import Region
from specflux.base.errors import NotFoundError, Refused, SpecfluxError, UsageError
from specflux.format.outline import content_end, line_end
from specflux.format.render import render_chain_input
from specflux.store.values import Outcome, TaskStore, TaskSummary
from specflux.store.workspace import natural_key

if TYPE_CHECKING:
    from specflux.base.files import ChangeSet

_LINK_LINE = re.compile(r"\[Full chain output\]\(")


@record(frozen=True)
class Upstream:
    task_id: str
    title: str
    summary: str
    downstream: str
    link: str  # relative to the downstream file (both live in task-states/)


STATUS_STYLES = {
    "pending": "fill:#FFFFFF,stroke:#9E9E9E",
    "in_progress": "fill:#FFF8E1,stroke:#F9A825",
    "review": "fill:#E3F2FD,stroke:#1565C0",
    "complete": "fill:#E8F5E9,stroke:#2E7D32",
    "failed": "fill:#FFEBEE,stroke:#C62828",
    "blocked": "fill:#FFEBEE,stroke:#C62828",
}


# --------------------------------------------------------------------- the graph


@record
class Graph:
    deps: dict[str, list[str]]  # task -> its dependencies, as written
    status: dict[str, str]
    titles: dict[str, str]
    broken: list[SpecfluxError] = Factory(list)  # files that could not be read
    rows: dict[str, TaskSummary] = Factory(dict)  # each readable task's `list` row
    unreadable: set[str] = Factory(set)  # the ids of the broken files: they exist

    @classmethod
    def load(cls, store: TaskStore) -> Graph:
        """Every readable task's dependencies. A broken file is kept in `broken` (to be reported),
        never a reason to show nothing of the healthy tasks."""
        deps, status, titles, broken, rows, unreadable = {}, {}, {}, [], {}, set()
        for row in store.summaries():
            if row.error is not None:
                broken.append(row.error)
                unreadable.add(row.id)
                continue
            deps[row.id], status[row.id], titles[row.id], rows[row.id] = row.dependencies, row.status, row.title, row
        return cls(deps, status, titles, broken, rows, unreadable)

    def dependents(self, task_id: str) -> list[str]:
        """The tasks that depend on `task_id`, in id order."""
        return [t for t in sorted(self.deps, key=natural_key) if task_id in self.deps[t]]

    def path_between(self, start: str, goal: str) -> list[str]:
        """A chain `start -> ... -> goal` following dependencies, or [] when there is none."""
        seen: set[str] = set()
        stack = [(start, [start])]
        while stack:
            node, path = stack.pop()
            if node == goal:
                return path
            if node in seen:
                continue
            seen.add(node)
            for dep in reversed(self.deps.get(node, [])):
                if dep not in seen:
                    stack.append((dep, [*path, dep]))
        return []

    def unknown(self) -> list[tuple[str, str]]:
        """(task, dependency) pairs naming a task that does not exist (a broken file exists: it is
        reported once, as itself, not again as every dependent's missing dependency)."""
        return [(t, d) for t, ds in self.deps.items() for d in ds if d not in self.deps and d not in self.unreadable]

    def cycles(self) -> list[list[str]]:
        """Each dependency cycle once, as the list of tasks around it. A depth-first search with
        its own stack: a chain of thousands of tasks must not exhaust Python's recursion."""
        found: list[list[str]] = []
        seen_in_cycle: set[str] = set()
        state: dict[str, int] = {}  # 1 visiting, 2 done
        for root in sorted(self.deps, key=natural_key):
            if root in state:
                continue
            path: list[str] = [root]
            state[root] = 1
            stack = [iter(self.deps.get(root, []))]
            while stack:
                dep = next(stack[-1], None)
                if dep is None:
                    stack.pop()
                    state[path.pop()] = 2
                    continue
                if dep not in self.deps:
                    continue
                if state.get(dep) == 1:
                    cycle = path[path.index(dep) :]
                    if not seen_in_cycle.issuperset(cycle):
                        found.append(cycle)
                        seen_in_cycle.update(cycle)
                elif state.get(dep) is None:
                    state[dep] = 1
                    path.append(dep)
                    stack.append(iter(self.deps.get(dep, [])))
        return found

    def problems(self) -> list[str]:
        """One sentence per unreadable file, unknown dependency and cycle."""
        out = [str(e) for e in self.broken]
        out += [f"task {t} depends on task {d}, which does not exist" for t, d in self.unknown()]
        out += ["dependency cycle: " + " -> ".join(c + [c[0]]) for c in self.cycles()]
        return out

    def order(self) -> list[str]:
        """All tasks, every dependency before its dependents, otherwise in natural id order.
        Tasks caught in a cycle (and what waits on them) come last, in id order."""
        waiting = {t: {d for d in ds if d in self.deps} for t, ds in self.deps.items()}
        dependents: dict[str, list[str]] = {t: [] for t in self.deps}
        for t, ds in waiting.items():
            for d in ds:
                dependents[d].append(t)
        heap = [(natural_key(t), t) for t, ds in waiting.items() if not ds]
        heapq.heapify(heap)
        out: list[str] = []
        while heap:
            _, t = heapq.heappop(heap)
            out.append(t)
            for child in dependents[t]:
                waiting[child].discard(t)
                if not waiting[child]:
                    heapq.heappush(heap, (natural_key(child), child))
        if len(out) < len(self.deps):
            placed = set(out)
            out += sorted((t for t in self.deps if t not in placed), key=natural_key)
        return out

    def ready(self) -> list[str]:
        """Tasks to work on now: neither complete nor blocked, their dependencies all complete, in
        dependency order."""
        return [
            t
            for t in self.order()
            if self.status[t] not in ("complete", "blocked") and all(self.status.get(d) == "complete" for d in self.deps[t])
        ]

    def mermaid(self) -> str:
        """The graph as a Mermaid flowchart. A cycle is drawn with its edges in red and named in a
        comment; a dependency on a task that does not exist is drawn as a dashed "missing" node."""
        lines = ["flowchart TD"]
        for t in sorted(self.deps, key=natural_key):
            label = _label(f"#{t} {self.titles[t]}")
            lines.append(f'    {node_id(t)}["{label}<br/>{self.status[t]}"]:::{self.status[t]}')
        missing = sorted({d for _, d in self.unknown()}, key=natural_key)
        for d in missing:
            lines.append(f'    {node_id(d)}["{_label("#" + d)}<br/>missing"]:::missing')
        for d in sorted({d for ds in self.deps.values() for d in ds} & self.unreadable, key=natural_key):
            lines.append(f'    {node_id(d)}["{_label("#" + d)}<br/>unreadable"]:::missing')
            missing.append(d)
        in_cycle = {(c[i], c[(i + 1) % len(c)]) for c in self.cycles() for i in range(len(c))}
        red, n = [], 0
        for t in sorted(self.deps, key=natural_key):
            for d in self.deps[t]:
                lines.append(f"    {node_id(d)} --> {node_id(t)}")
                if (t, d) in in_cycle:
                    red.append(str(n))
                n += 1
        for cycle in self.cycles():
            lines.append("    %% dependency cycle: " + " -> ".join(cycle + [cycle[0]]))
        if red:
            lines.append(f"    linkStyle {','.join(red)} stroke:#C62828,stroke-width:3px")
        for status, style in STATUS_STYLES.items():
            lines.append(f"    classDef {status} {style}")
        if missing:
            lines.append("    classDef missing fill:#FFFFFF,stroke:#C62828,stroke-dasharray:4 3")
        return "\n".join(lines)


def _label(text: str) -> str:
    """Text safe inside a Mermaid `["..."]` label."""
    return text.replace('"', "'").replace("<", "&lt;").replace(">", "&gt;")


def node_id(task_id: str) -> str:
    return "t_" + re.sub(r"[^A-Za-z0-9_]", "_", task_id)


# --------------------------------------------------------------------- wiring


def upstream_from(task_id: str, doc: TaskDocument) -> Upstream | None:
    """The chain output a completed task hands downstream, or None while it has none."""
    out = doc.chain_output()
    if out is None or doc.status != "complete":
        return None
    summary = out.summary or out.body
    return Upstream(task_id, doc.title[1], summary, out.downstream, f"task-{task_id}-state.md#{anchor(doc, 'chain_output')}")


def upstream_of(store: TaskStore, task_id: str) -> Upstream | None:
    return upstream_from(task_id, store.load(task_id))


def anchor(doc: TaskDocument, key: str) -> str:
    """The GitHub-style anchor of a section heading (`## 4. Chain Output` -> `4-chain-output`)."""
    text = doc.section_heading_for(key).lower()
    return re.sub(r"\s", "-", re.sub(r"[^\w\- ]", "", text).strip())


def dependents(store: TaskStore, task_id: str) -> list[str]:
    return Graph.load(store).dependents(task_id)


def upstream_outputs(store: TaskStore, deps: Iterable[str]) -> list[Upstream]:
    """The chain outputs the existing tasks among `deps` hand downstream (a new dependent's inputs)."""
    found = []
    for dep in deps:
        if store.path(dep).is_file():
            up = upstream_of(store, dep)
            if up is not None:
                found.append(up)
    return found


def refuse_unknown(store: TaskStore, deps: Iterable[str]) -> None:
    """Refuse dependencies on tasks that do not exist (`new --dep`, `set --add-dep`)."""
    unknown = [d for d in deps if not store.path(d).is_file()]
    if unknown:
        raise NotFoundError(f"no task {', '.join(unknown)}: a dependency must be an existing task")


def check_new_dependencies(store: TaskStore, task_id: str, new_deps: list[str], current: list[str]) -> None:
    """Refuse a dependency on the task itself, on a task that does not exist, or one that
    would close a cycle (named, e.g. `3 -> 1 -> 2 -> 3`)."""
    if not new_deps:
        return
    if task_id in new_deps:
        raise UsageError(f"task {task_id} cannot depend on itself")
    refuse_unknown(store, new_deps)
    graph = Graph.load(store)
    graph.deps[task_id] = [*current, *new_deps]
    for dep in new_deps:
        path = graph.path_between(dep, task_id)
        if path:
            loop = " -> ".join([task_id, *path])
            raise Refused(f"task {task_id} cannot depend on {dep}: that closes the cycle {loop}")


def _owned_span(doc: TaskDocument, region: Region) -> tuple[int, int, tuple[int, int] | None]:
    """The part of a `### From Task` subsection that wiring wrote: heading, quote, link line.

    Anything a person added below it stays where it is. When a person wrote something between
    the quote and the link line, the span ends with the quote and the link line's own span is
    returned third, so that a refresh updates it in place instead of adding a second one.
    """
    text = doc.text
    pos = region.body
    last = region.start
    state = "quote"
    linked = False
    while pos < region.end:
        line = text[pos : content_end(text, pos)]
        stripped = line.strip()
        if state == "quote" and stripped.startswith(">"):
            last = pos
        elif not stripped:
            state = "link" if last != region.start else state
        elif state == "link" and _LINK_LINE.match(stripped):
            last, linked = pos, True
            break
        else:
            break
        pos = line_end(text, pos)
    later = None
    while not linked and pos < region.end:
        if _LINK_LINE.match(text[pos : content_end(text, pos)].strip()) and not doc.outline.in_opaque(pos):
            later = (pos, content_end(text, pos))
            break
        pos = line_end(text, pos)
    return region.start, content_end(text, last), later


def wire_into(doc: TaskDocument, upstreams: Iterable[Upstream]) -> str:
    """The document's text with one `### From Task #<id>` subsection per upstream, refreshed.

    Idempotent: wiring the same output twice changes nothing.
    """
    for up in upstreams:
        block = render_chain_input(up.task_id, up.title, up.summary, up.downstream, up.link)
        existing = next((r for r in doc.subsections(doc.sections.get("chain_inputs")) if _is_from(r, up.task_id)), None)
        if existing is None:
            edits = [doc.append_to_section("chain_inputs", block)]
        else:
            start, end, later_link = _owned_span(doc, existing)
            if later_link is None:
                edits = [Edit(start, end, block)]
            else:  # heading and quote here, the link line refreshed where it stands
                head, _, link = block.rpartition("\n")
                edits = [Edit(start, end, head.rstrip("\n")), Edit(*later_link, link)]
            edits = [Edit(e.start, e.end, e.text.replace("\n", doc.newline)) for e in edits]
            if all(doc.text[e.start : e.end] == e.text for e in edits):
                continue
        written = TaskDocument(apply_edits(doc.text, edits), doc.path)
        if not any(c.task_id == up.task_id for c in written.chain_inputs()):
            at = min(e.start for e in edits)
            raise doc.hidden_by(at) or doc.error(f"the chain input from task {up.task_id} would not be readable "
                                                 "where it would be written", at)
        doc = written
    return doc.text


def _is_from(region: Region, task_id: str) -> bool:
    m = re.match(r"^from\s+task\s*#?\s*([A-Za-z0-9][A-Za-z0-9._-]*?)\s*(?:[:\-–—]|$)", region.heading.text, re.I)
    return bool(m) and m.group(1) == task_id


def wire_dependents(
    store: TaskStore,
    upstream: Upstream | None,
    targets: Iterable[str],
    changes: ChangeSet,
    outcome: Outcome | None = None,
) -> list[str]:
    """Write `upstream` into each target's chain inputs (archiving a target the write pushes past
    its size limit); returns the targets whose text changed."""
    if upstream is None:
        return []
    wired = []
    for target in targets:
        doc = store.load(target, changes)
        try:
            text = wire_into(doc, [upstream])
        except SpecfluxError as e:  # another task's hand edit never blocks this one; lint names it
            if outcome is not None:
                outcome.notices.append(f"{e} (task {target} was not wired; `specflux wire {upstream.task_id}` "
                                       "does it once that is fixed)")
            continue
        if text != doc.text:
            changes.write(store.path(target), _fit(store, target, TaskDocument(text, doc.path), changes, outcome))
            wired.append(target)
    return wired


def _fit(store: TaskStore, task_id: str, doc: TaskDocument, changes: ChangeSet, outcome: Outcome | None) -> str:
    from specflux.store.archive import fit

    return fit(task_id, doc, store, changes, outcome if outcome is not None else Outcome(task_id))


def wire(store: TaskStore, task_id: str | None = None) -> tuple[list[str], list[str]]:
    """Refresh the chain inputs of the tasks depending on `task_id` (or on any task).

    Returns the files changed and the problems met (unreadable tasks, unknown dependencies,
    cycles): every healthy task is wired whatever the others look like.
    """
    graph = Graph.load(store)
    if task_id is not None:
        store.load(task_id)  # an unknown or broken source is an error of its own
    sources = [task_id] if task_id else sorted(graph.deps, key=natural_key)
    targets = sorted({t for t, ds in graph.deps.items() for s in sources if s in ds}, key=natural_key)
    outcome = Outcome(task_id or "*")
    skipped: list[str] = []
    with store.changing([*targets, *sources], outcome) as pending:
        ups = {s: upstream_of(store, s) for s in sources}
        for target in targets:
            doc = store.load(target)
            wanted = [ups[d] for d in graph.deps[target] if d in ups and ups[d] is not None]
            try:
                text = wire_into(doc, wanted)
            except SpecfluxError as e:
                skipped.append(f"{e} (task {target} was not wired)")
                continue
            if text != doc.text:
                pending.files.write(store.path(target), _fit(store, target, TaskDocument(text, doc.path), pending.files, outcome))
    return [store.ws.relative(p) for p in outcome.changed], [*skipped, *graph.problems()]


def cycle_groups(deps: dict[str, list[str]]) -> dict[str, int]:
    """Each task caught in a dependency cycle -> the number of its strongly connected component
    (Tarjan's algorithm without recursion: a chain of thousands of tasks is fine). An edge lies
    on a cycle exactly when both its ends are in one component."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    group: dict[str, int] = {}
    for start in deps:
        if start in index:
            continue
        work = [(start, iter(deps[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in deps:
                    continue
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(deps[child])))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    members = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        members.append(member)
                        if member == node:
                            break
                    if len(members) > 1:
                        group.update(dict.fromkeys(members, len(group)))
    return group
