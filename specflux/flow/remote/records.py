"""Completion records: the evidence that a task was completed on the queue's branch the way the
queue completes tasks, and not by a push that went round it (an agent that cloned the remote and
pushed "task 2 complete", a person's `specflux complete` pushed by hand, a tool).

`refs/specflux/done/<task>` on the remote points at a commit with the empty tree whose first parent
is the branch commit it vouches for, and whose message is one line of JSON:

- an integration: `{"task", "worker", "run", "claim", "at"}`; its second parent is the claim commit
  the worker held (so the claim's history stays with the record). It is pushed in the same atomic
  push that moves the branch and deletes the claim: there is no integration without its record.
- a person's confirmation (`specflux claims confirm ID`): `{"task", "confirmedBy", "at"}`.

A task `complete` at the branch's tip is *confirmed* when its record's commit is on the branch, the
task is complete there, and every commit since that changed the task's file left it complete.
Anything else is *unconfirmed*: named by `claims` and `flow status --remote`, and the task's
dependents wait until a person looks and confirms it. What this does not stop: someone with push
rights who writes a record by hand on purpose (the remote's own permissions are the guard there).
"""

from __future__ import annotations

import json
import time
from typing import Any

from specflux.flow.remote.history import History
from specflux.flow.remote.marker import iso, marker
from specflux.flow.remote.transport import DONE, Remote
from specflux.flow.remote.tree import read_blobs, status_of, task_files


def records(remote: Remote) -> dict[str, tuple[str, dict[str, Any]]]:
    """{task: (record sha, its fields)} as the last `Remote.fetch` saw them."""
    prefix = remote.seen_done
    found = {}
    for ref, (sha, subject) in remote.refs().items():
        if not ref.startswith(prefix):
            continue
        try:
            fields = json.loads(subject)
        except ValueError:
            fields = {}
        found[ref[len(prefix):]] = (sha, fields if isinstance(fields, dict) else {})
    return found


def who(fields: dict[str, Any]) -> str:
    """Who made a record, in words."""
    if fields.get("confirmedBy"):
        return f"confirmed by {fields['confirmedBy']}"
    return f"integrated by {fields.get('worker', '?')} (run {fields.get('run', '?')})"


class Verifier:
    """Which completions on the branch have no record to vouch for them (answers kept per record and
    tip: a worker asks again every poll)."""

    def __init__(self, remote: Remote):
        self.remote = remote
        self._known: dict[tuple[str, str, str], str | None] = {}
        self._files: tuple[str, dict[str, str]] = ("", {})  # (tip, its task files)

    def unconfirmed(self, tip: str, tasks: list[str], statuses: dict[str, str] | None = None) -> dict[str, str]:
        """{task: why} for each of `tasks` that is complete at `tip` without a record vouching for it
        (`statuses`: the tasks' statuses at `tip`, when the caller has them; tasks not complete are skipped)."""
        if self._files[0] != tip:
            self._files = (tip, task_files(self.remote, tip))
        files = self._files[1]
        if statuses is None:
            texts = read_blobs(self.remote, [f"{tip}:{files[t]}" for t in tasks if t in files])
            statuses = {t: status_of(texts.get(f"{tip}:{files[t]}"), files[t]) for t in tasks if t in files}
        found = records(self.remote)
        asked = [t for t in tasks if statuses.get(t) == "complete" and t in files]
        keys = {t: (t, found.get(t, ("", {}))[0], tip) for t in asked}
        new = [t for t in asked if keys[t] not in self._known]
        if new:
            for task, why in self._judge(tip, new, files, found).items():
                self._known[keys[task]] = why
        return {t: self._known[keys[t]] for t in asked if self._known[keys[t]]}

    def _judge(self, tip: str, tasks: list[str], files: dict[str, str],
               found: dict[str, tuple[str, dict[str, Any]]]) -> dict[str, str | None]:
        """{task: why it is unconfirmed, or None} for tasks complete at `tip`, in a handful of git calls."""
        out: dict[str, str | None] = {}
        for task in [t for t in tasks if t not in found]:
            out[task] = f"no integration that held its claim completed it; {self._last_change(tip, files[task])}"
        tasks = [t for t in tasks if t in found]
        if not tasks:
            return out
        vouched = _first_parents(self.remote, [found[t][0] for t in tasks])
        history = History(self.remote, tip)
        changed = history.changes([files[t] for t in tasks])
        plans: dict[str, tuple[str, list[str]]] = {}
        for task in tasks:
            base = vouched.get(found[task][0], "")
            if base not in history:
                out[task] = f"its completion record ({who(found[task][1])}) vouches for a commit not on the branch; " \
                            f"{self._last_change(tip, files[task])}"
                continue
            since = [c for c in changed[files[task]] if not history.is_ancestor(c, base)]
            plans[task] = (base, sorted(since, key=lambda c: history.gen[c]))  # oldest first
        texts = read_blobs(self.remote, [f"{c}:{files[t]}" for t, (base, since) in plans.items() for c in [base, *since]])
        for task, (base, since) in plans.items():
            path, fields = files[task], found[task][1]
            state = status_of(texts.get(f"{base}:{path}"), path)
            out[task] = None
            if state != "complete":
                out[task] = f"its last completion record ({who(fields)}) left it {state}; {self._last_change(tip, path)}"
                continue
            for commit in since:
                state = status_of(texts.get(f"{commit}:{path}"), path)
                if state != "complete":
                    out[task] = f"it was {state} after its completion record ({who(fields)}), at {commit[:12]}; " \
                                f"{self._last_change(tip, path)}"
                    break
        return out

    def _last_change(self, tip: str, path: str) -> str:
        line = self.remote.git("log", "-1", "--format=%h%x00%an <%ae>%x00%s", tip, "--", path).stdout.strip()
        short, author, subject = (line.split("\0") + ["", "", ""])[:3]
        return f"its file was last changed by commit {short} ({author}: {subject!r})" if short else "its file has no history"


def _first_parents(remote: Remote, commits: list[str]) -> dict[str, str]:
    """{commit: its first parent} for each of `commits` that has one (one `cat-file --batch-check`)."""
    import subprocess

    done = subprocess.run(["git", "cat-file", "--batch-check=%(objectname)"], cwd=remote.root, capture_output=True,
                          text=True, input="".join(f"{c}^1\n" for c in commits))
    answers = done.stdout.splitlines()
    return {c: a.strip() for c, a in zip(commits, answers) if a.strip() and " " not in a.strip()}


def confirm(remote: Remote, task: str, by: str) -> dict[str, Any]:
    """Record a person's confirmation of `task`'s completion at the fetched tip (a push that names
    the record as it was seen: two people confirming at once, one wins and the other is told)."""
    from specflux.base.errors import SpecfluxError

    tip = remote.rev(remote.tracking)
    files = task_files(remote, tip) if tip else {}
    if task not in files:
        raise SpecfluxError(f"no task {task} on {remote.name}/{remote.branch}")
    state = status_of(read_blobs(remote, [f"{tip}:{files[task]}"]).get(f"{tip}:{files[task]}"), files[task])
    if state != "complete":
        raise SpecfluxError(f"task {task} is {state} on {remote.name}/{remote.branch}: there is no completion to confirm")
    fields = {"task": task, "confirmedBy": by, "at": iso(time.time())}
    sha = marker(remote, fields, (tip,))
    old = records(remote).get(task, ("", {}))[0]
    pushed = remote.push(f"--force-with-lease={DONE}{task}:{old}", f"{sha}:{DONE}{task}")
    if not pushed.ok:
        raise SpecfluxError(f"task {task}'s completion record changed on {remote.name} while confirming it; look again "
                            "(`specflux claims`)")
    return {**fields, "commit": tip}
