"""Integration: a finished task's commits into the remote branch, exactly once.

The worker's branch is merged with the remote branch as it is now (task files through the
task-file merge driver, `specflux merge-driver`), then one atomic push does three things or none:
moves the remote branch forward (a fast-forward of what was fetched), deletes the worker's claim
(named with its sha as the lease) and writes the task's completion record (records.py). So a worker
that lost its claim cannot integrate (its push is refused and it drops its result, saying so), a
task is completed on the remote once, every integration leaves its evidence, and a worker whose
machine disappears mid-push leaves the remote before or after, never half.

A push refused because the branch moved is fetched, merged and tried again at once (another
worker's result landed: workers finishing together take turns), and after QUICK_TRIES refusals in
a row with a backoff with jitter. A real conflict (code, or a task file the driver could not
merge) is never forced: nothing is merged, the work is pushed to `specflux/conflict/<task-id>`,
and the caller marks the task `blocked` on the remote with a note saying where the work is.
"""

from __future__ import annotations

import time
from typing import Callable, Literal

from specflux.base.records import Factory, record
from specflux.flow.remote.claims import Claim
from specflux.flow.remote.lease import Lease
from specflux.flow.remote.marker import iso, marker
from specflux.flow.remote.transport import DONE, Remote, backoff

CONFLICTS = "refs/heads/specflux/conflict/"
QUICK_TRIES = 8  # pushes refused because the branch moved that are tried again at once, before backing off


@record
class Integrated:
    outcome: Literal["pushed", "lost", "conflict"]
    detail: str = ""
    tries: int = 0
    conflicts: list[str] = Factory(list)
    seconds: float = 0.0


def ensure_driver(remote: Remote) -> None:
    """The task-file merge driver in this clone's git config (the attribute travels with the
    repository; the driver is config, which no clone carries). Read with the clone's other settings
    in one `git config`; written only when missing or changed. (The driver's module, with the
    task-file merge it runs, loads here: after a worker's first agent has started, not before.)"""
    from specflux.vcs.merge_driver import DRIVER_NAME, driver_command

    for key, value in (("merge.specflux.name", DRIVER_NAME), ("merge.specflux.driver", driver_command())):
        if remote.config().get(key) != value:
            remote.set_config(key, value)


def integrate(remote: Remote, lease: Lease, task: str, *, say: Callable[[str], None] = lambda line: None,
              sleep: Callable[[float], None] = time.sleep) -> Integrated:
    """Merge HEAD with the remote branch and push it, deleting the claim in the same push. HEAD
    stays where it is: the merge is made beside the work tree (`merge`), and the caller checks the
    remote branch out once it holds the result."""
    began = time.monotonic()
    ensure_driver(remote)  # here, not at the worker's start: two git processes fewer before its first agent
    ref = lease.claims.ref(task)
    head = remote.rev("HEAD") or "HEAD"  # what is pushed: the task's work, merged with the branch where it moved
    tries = 0
    while True:
        tries += 1
        remote.fetch()
        tip = remote.rev(remote.tracking)
        if tip and remote.git("merge-base", "--is-ancestor", tip, head).returncode:
            merged, conflicts = merge(remote, head, tip, f"Merge {remote.name}/{remote.branch} into task {task}'s work")
            if conflicts:
                return Integrated("conflict", f"merge conflict with {remote.name}/{remote.branch} in "
                                  f"{', '.join(conflicts)}", tries, conflicts, time.monotonic() - began)
            head = merged
        with lease.held() as claim:
            if lease.lost:
                return Integrated("lost", lease.lost, tries, seconds=time.monotonic() - began)
            record = integration_record(remote, lease, claim, head)
            pushed = remote.push("--atomic", f"--force-with-lease={ref}:{claim.sha}",
                                 f"{head}:refs/heads/{remote.branch}", f":{ref}", f"+{record}:{DONE}{task}")
            if pushed.ok:
                lease.stop_renewing()
                return Integrated("pushed", "", tries, seconds=time.monotonic() - began)
            rejected = pushed.rejected()
            if ref in rejected or not rejected:  # the claim is not as it was (or git did not say): look
                holder = remote.remote_ref(ref)
                if holder is None and lease.claim_again():
                    continue  # its ref was deleted by an unknown hand: claimed again, push again
                if holder != claim.sha:
                    lease.stop_renewing()
                    return Integrated("lost", lease.what_became(), tries, seconds=time.monotonic() - began)
        # the branch moved: another worker integrated first, and is done; merge with it and push at
        # once. Workers finishing together are refused in turn (each refusal is another's result
        # landing), and a wait would only add to the last one's; a crew larger than QUICK_TRIES
        # refused that often backs off, so that it does not keep the remote busy with refusals.
        wait = 0.0 if tries < QUICK_TRIES else backoff(tries - QUICK_TRIES + 1, base=0.1, cap=5.0)
        say(f"task {task}: the remote branch moved while pushing; merging again" + (f" in {wait:.1f} s" if wait else "")
            + f" (try {tries + 1})")
        if wait:
            sleep(wait)


def integration_record(remote: Remote, lease: Lease, claim: Claim, head: str) -> str:
    """The completion record of this integration (see records.py): it vouches for `head`, and keeps the claim."""
    return marker(remote, {"task": claim.task, "worker": lease.worker, "run": lease.run, "claim": claim.sha,
                           "at": iso(time.time())}, (head, claim.sha))


def merge(remote: Remote, head: str, tip: str, message: str) -> tuple[str, list[str]]:
    """Merge `tip` (the fetched remote branch) into `head`: (the merge commit, []) when clean, ("",
    the paths that conflict) when not. Made beside the work tree: `git merge-tree --write-tree`
    (task files through their merge driver, as `git merge` would) and `git commit-tree`; nothing in
    the work tree, the index or HEAD moves, so a conflict leaves nothing half-merged. (`git merge`
    would save the work tree first, with a `git stash create` that reads all of it, and write it
    twice; a worker checks the result out once, after the push.) Before git 2.38, which has no
    `merge-tree --write-tree`: `git merge`, into HEAD (which is `head`), aborted on a conflict."""
    if remote.merges_beside:
        done = remote.git("merge-tree", "--write-tree", "--name-only", "--no-messages", head, tip)
        tree, *listed = done.stdout.splitlines() or [""]
        if done.returncode == 0 and tree:
            made = remote.git("commit-tree", tree, "-p", head, "-p", tip, "-m", message)
            if made.returncode == 0:
                return made.stdout.strip(), []
            return "", [f"(the merge commit could not be written: {made.stderr.strip() or 'no reason given'})"]
        if done.returncode == 1 and listed:
            return "", list(dict.fromkeys(listed))
        if done.returncode != 129 and "usage:" not in done.stderr:
            return "", [_failed(done.stderr)]
        remote.merges_beside = False  # an older git: merge in the work tree from now on
    done = remote.git("-c", "maintenance.auto=false", "merge", "-q", "--no-ff", "--no-edit", "-m", message, tip)
    if done.returncode == 0:
        return remote.rev("HEAD") or "HEAD", []
    listed = remote.git("diff", "--name-only", "--diff-filter=U").stdout.split()
    remote.git("merge", "--abort")
    return "", listed or [_failed(done.stderr or done.stdout)]


def _failed(said: str) -> str:
    """A merge that failed for another reason than a conflict, as the paths' place in the answer says it."""
    return "(the merge failed: " + (said.strip() or "no reason given") + ")"


def keep_conflicted(remote: Remote, task: str) -> str:
    """Push HEAD (the task's work) to `specflux/conflict/<task>` on the remote; the branch's name."""
    branch = CONFLICTS + task
    remote.push(f"+HEAD:{branch}")
    return branch[len("refs/heads/"):]
