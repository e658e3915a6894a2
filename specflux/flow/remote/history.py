"""The queue branch's history as data, read in two git calls, so that checking a hundred tasks'
completions costs what checking one does: every commit with its parents and generation number
(`rev-list --topo-order --reverse --parents`), and which commits changed which task files
(`log -m --full-history --name-only`: merges too, against each parent). Ancestry is then a walk in
memory from the newer commit down, no lower than the older one's generation."""

from __future__ import annotations

from pathlib import PurePosixPath

from specflux.flow.remote.transport import Remote


class History:
    def __init__(self, remote: Remote, tip: str):
        self.remote, self.tip = remote, tip
        self.parents: dict[str, list[str]] = {}
        self.gen: dict[str, int] = {}
        for line in remote.git("rev-list", "--topo-order", "--reverse", "--parents", tip).stdout.splitlines():
            commit, *parents = line.split()
            self.parents[commit] = parents
            self.gen[commit] = 1 + max((self.gen.get(p, 0) for p in parents), default=0)

    def __contains__(self, commit: str) -> bool:
        return commit in self.gen

    def is_ancestor(self, old: str, new: str) -> bool:
        """Whether `old` is `new` or reachable from it."""
        if old == new:
            return True
        floor = self.gen.get(old)
        if floor is None or floor >= self.gen.get(new, 0):
            return False
        stack, seen = [new], {new}
        while stack:
            for parent in self.parents.get(stack.pop(), ()):
                if parent == old:
                    return True
                if parent not in seen and self.gen.get(parent, 0) > floor:
                    seen.add(parent)
                    stack.append(parent)
        return False

    def changes(self, paths: list[str]) -> dict[str, list[str]]:
        """{path: the commits on the branch that changed it (against any parent)}, newest first."""
        wanted = set(paths)
        folders = sorted({str(PurePosixPath(p).parent) for p in paths})
        out: dict[str, list[str]] = {p: [] for p in paths}
        listed = self.remote.git("log", "-m", "--full-history", "--format=%x01%H", "--name-only", self.tip, "--",
                                 *folders).stdout
        commit = ""
        for line in listed.splitlines():
            if line.startswith("\x01"):
                commit = line[1:].strip()
            elif line in wanted and (not out[line] or out[line][-1] != commit):
                out[line].append(commit)
        return out
