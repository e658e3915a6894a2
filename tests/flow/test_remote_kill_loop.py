"""Workers `kill -9`ed at random moments, one after another, each in a fresh clone: at every moment
the remote is whole (a task complete on the remote has no claim, and no task is completed twice),
and a last worker finishes the queue with each task complete exactly once."""

from __future__ import annotations

import os
import random
import signal
import time

from remote_kit import claims_on, clone, coder, completions, env_for, log_of, make_origin, remote_status, worker

TASKS = "123"


def test_workers_killed_at_random_moments_never_complete_a_task_twice(tmp_path):
    bare = make_origin(tmp_path, [("One", []), ("Two", ["1"]), ("Three", [])], lease_s=1.5, skew_s=0.3, poll_s=0.2)
    env = env_for(tmp_path, {f"coder:{t}": [coder(t, 0.4)] for t in TASKS})
    rng = random.Random(int(os.environ.get("SPECFLUX_KILL_SEED", "19")))
    for i in range(6):
        repo = clone(str(bare), tmp_path / f"k{i}")
        proc = worker(repo, f"k{i}", env)
        time.sleep(rng.uniform(0.5, 3.5))
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        claimed = {r.rsplit("/", 1)[1] for r in claims_on(bare)}
        for task in TASKS:
            done = completions(bare, task)
            assert done <= 1, (i, task, log_of(repo, f"k{i}"))
            assert not (done and task in claimed), f"task {task} complete and still claimed after kill {i}"
    last = clone(str(bare), tmp_path / "last")
    proc = worker(last, "last", env)
    assert proc.wait(timeout=120) == 0, log_of(last, "last")
    for task in TASKS:
        assert remote_status(bare, task) == "complete" and completions(bare, task) == 1, log_of(last, "last")
    assert claims_on(bare) == []
