"""The values `Git` hands out: a Commit read back, and an agent session's Baseline (each Dirty
path the user had changed before it) and SessionCommit (what its commit took and left out)."""

from __future__ import annotations

from collections.abc import Mapping

from specflux.base.records import Factory, record


@record(frozen=True)
class Dirty:
    """One path the user had changed before an agent session, as `Git.capture` saw it."""

    status: str  # porcelain v1 letters: " M", "M ", "MM", " D", "A ", "??", "UU", ...
    fingerprint: str  # as `status_snapshot` gives it
    mode: str  # working-tree mode as git records it: 100644, 100755, 120000, 160000, 000000
    content: bytes | None = None  # working-tree bytes of a tracked regular file, under the caps
    too_large: bool = False  # a tracked regular file whose bytes were not kept (over the caps)


@record(frozen=True)
class Baseline:
    """The work tree before an agent session: HEAD and every path the user had changed."""

    head: str  # "" on an unborn branch
    dirty: Mapping[str, Dirty]

    @property
    def fingerprints(self) -> dict[str, str]:
        """The `status_snapshot` of that moment (for `changed_paths`)."""
        return {path: d.fingerprint for path, d in self.dirty.items()}

    def to_json(self) -> dict:
        """A JSON-able copy (bytes in base64), so that a run can commit a crashed session's work
        after a restart exactly as the session would have."""
        import base64

        return {"head": self.head, "dirty": {
            path: {"status": d.status, "fingerprint": d.fingerprint, "mode": d.mode, "tooLarge": d.too_large,
                   "content": None if d.content is None else base64.b64encode(d.content).decode("ascii")}
            for path, d in self.dirty.items()}}

    @classmethod
    def from_json(cls, data: Mapping) -> "Baseline":
        import base64

        return cls(data["head"], {
            path: Dirty(d["status"], d["fingerprint"], d["mode"],
                        None if d["content"] is None else base64.b64decode(d["content"]), d["tooLarge"])
            for path, d in data["dirty"].items()})


@record(frozen=True)
class SessionCommit:
    """What `Git.commit_session` committed."""

    sha: str  # "" when there was nothing to commit
    paths: list[str] = Factory(list)  # root-relative paths the commit was built from
    notes: list[str] = Factory(list)  # a sentence per path left out or partly taken
    left_out: list[str] = Factory(list)
    partly: list[str] = Factory(list)
    # `git status` of the work tree right after the commit where it follows from the status the
    # commit was built from (path -> StatusEntry), else None: a caller need not ask git again
    after: "dict | None" = None


@record(frozen=True)
class Commit:
    """One commit as specflux reads it back."""

    sha: str
    short: str
    date: str  # ISO 8601 author date
    subject: str
    trailers: dict[str, str]

