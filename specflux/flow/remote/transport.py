"""Talking to the remote: fetch and push through the git CLI, telling a refusal (the remote said
no: a ref moved, a lease did not match) from an unreachable remote (no answer at all), and waiting
between tries with capped exponential backoff and jitter.

A refusal is an answer, to be acted on at once; an unreachable remote is waited out: the caller
keeps its work where it is and tries again, until `give_up_s` has gone by.

A round trip to the remote is what a worker waits on most (tens of milliseconds on loopback, more
over a network), so each is made to count: one fetch brings the branch, the claims and the records
in one snapshot, which one `for-each-ref` then reads (`refs()`, kept until the next fetch or push);
a fetch starts no `git maintenance` (a worker runs it once, when it stops: `maintain`) and writes no
FETCH_HEAD. Over `git://` a fetch speaks protocol v0: git's protocol v2 sends its request in small
writes that wait on TCP's delayed ACK, ~40 ms a fetch against `git daemon` (measured: 52 ms
against 4-8 ms on loopback); v0 sends one and costs the same refs here (a worker fetches every claim
and record anyway). A push speaks v0 on every transport already.
"""

from __future__ import annotations

import hashlib
import random
import re
import time
from pathlib import Path
from typing import Callable

from specflux.base.errors import GitError
from specflux.base.records import record
from specflux.vcs.process import run_git

CLAIMS = "refs/specflux/claims/"
DONE = "refs/specflux/done/"  # a completion record per task: what integrated (or a person confirmed) it
RELEASED = "refs/specflux/released/"  # the last claim released by hand (or cleared) per task
_REFUSED = ("[rejected]", "[remote rejected]", "stale info", "non-fast-forward", "fetch first", "atomic push failed",
            "already exists")
_WHOLE = ("atomic push failed", "atomic transaction failed")  # a ref refused only with the push as a whole
_LOCKED = re.compile(r"cannot lock ref '([^']+)': .*")  # the remote's word on a ref that moved under the push
# The identity of the claim commits a worker makes: they are markers, not anyone's work.
IDENTITY = {"GIT_AUTHOR_NAME": "specflux", "GIT_AUTHOR_EMAIL": "specflux@localhost",
            "GIT_COMMITTER_NAME": "specflux", "GIT_COMMITTER_EMAIL": "specflux@localhost"}


class Unreachable(GitError):
    """The remote did not answer (and went on not answering until the caller gave up)."""


@record(frozen=True)
class Pushed:
    ok: bool
    text: str  # git's porcelain report, or its error

    @property
    def refused(self) -> bool:
        return not self.ok

    def rejected(self) -> dict[str, str]:
        """{ref: why} for each ref the push was refused on for a reason of its own (`stale info`:
        its lease did not match; `fetch first`, ...); refs refused only because an atomic push as a
        whole failed are left out: they were as the lease said. Git says which ref failed in two
        ways: its own check, before sending (the others `atomic push failed`), or, when another
        push moved a ref between the remote's advertisement and this update (two workers pushing
        at once), the remote's `cannot lock ref '<ref>': ...`, every ref of the push reported as
        `atomic transaction failed`."""
        out = {}
        for line in self.text.splitlines():
            flag, _, rest = line.partition("\t")
            if flag == "!":
                spec, _, summary = rest.partition("\t")
                if not any(whole in summary for whole in _WHOLE):
                    out[spec.rpartition(":")[2]] = summary.strip()
            elif (locked := _LOCKED.search(line)) is not None:
                out[locked[1]] = locked[0].strip()
        return out


def backoff(attempt: int, base: float = 0.2, cap: float = 10.0) -> float:
    """Seconds to wait before try `attempt` (1-based): doubling from `base`, capped, with full
    jitter (a random point between half and all of it), so that workers refused together do not
    come back together."""
    top = min(cap, base * (2 ** max(0, attempt - 1)))
    return random.uniform(top / 2, top)


class Remote:
    """The remote `name` as seen from the clone at `root`, whose branch `branch` is the queue's."""

    def __init__(self, root: Path, name: str, branch: str, *, give_up_s: float = 3600.0,
                 say: Callable[[str], None] = lambda line: None, sleep: Callable[[float], None] = time.sleep,
                 on_wait: Callable[[float | None], None] = lambda since: None, track_as: str | None = None):
        self.root, self.name, self.branch, self.track_as = root, name, branch, track_as
        self.give_up_s, self.say, self.sleep, self.on_wait = give_up_s, say, sleep, on_wait
        self.waiting_since: float | None = None  # when the remote stopped answering, while it does not
        self._refs: dict[str, tuple[str, str]] | None = None  # the last fetch's snapshot, read once (`refs`)
        self._local: dict[str, str] | None = None  # this clone's config, as `remote.*`/`merge.specflux.*` read once
        self._empty_tree: str | None = None
        self.merges_beside = True  # `git merge-tree --write-tree` (git 2.38 and later) until git says it has none

    @property
    def tracking(self) -> str:
        """The local ref that follows the remote branch (one of its own for each of the workers that
        share a clone, `track_as`, so that their fetches never lock each other's refs)."""
        if self.track_as:
            return f"refs/specflux/track/{self.track_as}/{self.branch}"
        return f"refs/remotes/{self.name}/{self.branch}"

    @property
    def seen_claims(self) -> str:
        """Where the claims last fetched are kept locally."""
        return f"refs/specflux/seen/{self.track_as or self.name}/claims/"

    @property
    def seen_done(self) -> str:
        """Where the completion records last fetched are kept locally."""
        return f"refs/specflux/seen/{self.track_as or self.name}/done/"

    def git(self, *args: str, input: bytes | None = None, env: dict | None = None):
        return run_git(args, self.root, env=env, input=input)

    def config(self) -> dict[str, str]:
        """The clone's settings a worker needs (the remote's URL, the merge driver, the object format),
        read in one `git config` and kept; `set_config` writes through."""
        if self._local is None:
            listed = self.git("config", "-z", "--get-regexp", r"^(remote\..*\.url|merge\.specflux\..*|extensions\.objectformat)$")
            pairs = (entry.partition("\n") for entry in listed.stdout.split("\0") if entry)
            self._local = {key.lower(): value for key, _, value in pairs}
        return self._local

    def set_config(self, key: str, value: str) -> None:
        """Write one local setting. Git locks the config file for a write and fails at once when
        another git holds it (a worktree's worker, the user's own `git config`): tried again for up
        to two seconds before that is an error."""
        from specflux.vcs.process import check, run_git_waiting

        check(run_git_waiting(("config", "--local", key, value), self.root, 2.0), f"config {key}")
        self.config()[key.lower()] = value

    def url(self) -> str | None:
        """The remote's URL as configured here; None when there is no such remote."""
        return self.config().get(f"remote.{self.name.lower()}.url")

    def empty_tree(self) -> str:
        """The empty tree's id, which every repository has without storing it (sha1 or sha256)."""
        if self._empty_tree is None:
            kind = self.config().get("extensions.objectformat", "sha1").lower()
            self._empty_tree = hashlib.new("sha256" if kind == "sha256" else "sha1", b"tree 0\0").hexdigest()
        return self._empty_tree

    def _speed(self) -> tuple[str, ...]:
        """Protocol v0 over `git://` (see the module's note)."""
        return ("-c", "protocol.version=0") if (self.url() or "").startswith("git://") else ()

    def _fetch_args(self) -> tuple[str, ...]:
        return (*self._speed(), "fetch", "-q", "--prune", "--no-tags", "--no-auto-maintenance", "--no-write-fetch-head")

    def refs(self) -> dict[str, tuple[str, str]]:
        """{ref: (sha, subject)} of the remote branch's tracking ref, the claims and the records as the
        last fetch left them (one `for-each-ref`, kept until the next fetch or push)."""
        if self._refs is None:
            done = self.git("for-each-ref", "--format=%(objectname)%00%(refname)%00%(contents:subject)",
                            self.tracking, self.seen_claims, self.seen_done)
            found = {}
            for line in done.stdout.splitlines():
                sha, ref, subject = (line.split("\0") + ["", ""])[:3]
                found[ref] = (sha, subject)
            self._refs = found
        return self._refs

    def forget(self) -> None:
        """The refs changed under the snapshot (a fetch of one ref by hand): read them again next time."""
        self._refs = None

    def tip(self) -> str | None:
        """The remote branch as last fetched."""
        found = self.refs().get(self.tracking)
        return found[0] if found else None

    def moved(self) -> bool:
        """Whether the remote's branch, claims or records differ from what the last fetch brought
        (one `ls-remote`: a round trip that reads nothing into this clone). Waits while the remote
        is unreachable, as a fetch would."""
        def once():
            done = self.git(*self._speed(), "ls-remote", self.name, f"refs/heads/{self.branch}",
                            f"{CLAIMS}*", f"{DONE}*")
            return done.returncode == 0, done.stdout
        theirs = {}
        for line in self._patiently("ls-remote", once).splitlines():
            sha, _, ref = line.partition("\t")
            if ref == f"refs/heads/{self.branch}" or ref.startswith((CLAIMS, DONE)):
                theirs[ref] = sha
        mine = {}
        for ref, (sha, _) in self.refs().items():
            if ref == self.tracking:
                mine[f"refs/heads/{self.branch}"] = sha
            elif ref.startswith(self.seen_claims):
                mine[CLAIMS + ref[len(self.seen_claims):]] = sha
            elif ref.startswith(self.seen_done):
                mine[DONE + ref[len(self.seen_done):]] = sha
        return theirs != mine

    def maintain(self) -> None:
        """What the fetches left undone: `git maintenance run --auto`, once (a worker, when it stops)."""
        self.git("maintenance", "run", "--auto", "--quiet")

    def _patiently(self, what: str, attempt_once: Callable[[], tuple[bool, str]]) -> str:
        """Run `attempt_once` (-> answered, text) until the remote answers; back off meanwhile."""
        began, attempt = time.monotonic(), 0
        while True:
            answered, text = attempt_once()
            if answered:
                if self.waiting_since is not None:
                    self.say(f"the remote {self.name} answers again")
                    self.waiting_since = None
                    self.on_wait(None)
                return text
            attempt += 1
            if self.waiting_since is None:
                self.waiting_since = time.time()
                self.on_wait(self.waiting_since)
                self.say(f"waiting for the remote {self.name} ({what}: {_last_line(text)}); work is kept locally")
            if time.monotonic() - began > self.give_up_s:
                waited = f" for {self.give_up_s:g} s" if self.give_up_s > 0 else ""
                raise Unreachable(f"the remote {self.name} did not answer{waited} ({what}): {_last_line(text)}")
            self.sleep(backoff(attempt, base=0.5, cap=10.0))

    def fetch(self) -> None:
        """The queue's branch, every claim and every completion record, as the remote has them now
        (in one fetch: one snapshot of the remote's refs; those it no longer has are pruned). Waits
        while the remote is unreachable."""
        def once():
            done = self.git(*self._fetch_args(), self.name,
                            f"+refs/heads/{self.branch}:{self.tracking}", f"+{CLAIMS}*:{self.seen_claims}*",
                            f"+{DONE}*:{self.seen_done}*")
            if done.returncode and "unknown option" in done.stderr:  # not a remote to wait for: say it now
                raise GitError(f"git fetch does not know its options here (--no-auto-maintenance and "
                               f"--no-write-fetch-head need git 2.29 or later): {_last_line(done.stderr)}")
            return done.returncode == 0, done.stderr
        self._refs = None
        try:
            self._patiently("fetch", once)
        finally:
            self._refs = None

    def push(self, *args: str, patient: bool = True) -> Pushed:
        """`git push --porcelain ARGS`: Pushed(ok) when every ref went through, Pushed(refused) when the
        remote said no to one; an unreachable remote is waited for (or, not `patient`, raised)."""
        self._refs = None  # a push moves the tracking ref of the branch it pushes

        def once():
            done = self.git("push", "--porcelain", self.name, *args)
            text = done.stdout + done.stderr
            if done.returncode == 0:
                return True, "ok\n" + text
            if any(mark in text for mark in _REFUSED):
                return True, "refused\n" + text
            return False, text
        if patient:
            text = self._patiently("push", once)
        else:
            answered, text = once()
            if not answered:
                raise Unreachable(f"the remote {self.name} did not answer (push): {_last_line(text)}")
        status, _, rest = text.partition("\n")
        return Pushed(status == "ok", rest)

    def remote_ref(self, ref: str) -> str | None:
        """What `ref` is on the remote right now (ls-remote), None when it does not exist."""
        def once():
            done = self.git(*self._speed(), "ls-remote", self.name, ref)
            return done.returncode == 0, done.stdout
        for line in self._patiently("ls-remote", once).splitlines():
            sha, _, name = line.partition("\t")
            if name == ref:
                return sha
        return None

    def rev(self, ref: str) -> str | None:
        if ref == self.tracking:
            return self.tip()
        done = self.git("rev-parse", "--verify", "-q", ref)
        return done.stdout.strip() or None


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else "no answer"
