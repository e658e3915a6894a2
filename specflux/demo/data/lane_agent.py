"""The demo's agent CLI for its parallel run: a scripted coder and reviewer, no model.

Run by `specflux flow start --agent command` in each lane's worktree. The coder writes its
module and adds one import line at the end of textkit/__init__.py, so that two lanes working at
once change the same lines and the second merge conflicts; the run's new attempt starts from the
merged branch, where adding the line again merges cleanly. So that the demo tells the same story
every time, task 7's first attempt takes as long as task 6 needs to be merged (it watches task 6's
file in the main worktree), and every session entry carries the same time.
"""

import json
import os
import re
import pathlib
import subprocess
import sys
import time

STAMP = "2026-01-07 11:00"
WORK = {
    "6": ("textkit/words.py", '"""Word counts."""\n\n\ndef wordcount(text: str) -> int:\n    return len(text.split())\n',
          "from .words import wordcount\n"),
    "7": ("textkit/initials.py", '"""Initials."""\n\n\ndef initials(text: str) -> str:\n'
                                 '    return "".join(word[:1].upper() for word in text.split())\n',
          "from .initials import initials\n"),
}


def wait_for_task_6() -> None:
    """Until task 6 is complete in the main worktree (at most 60 s)."""
    common = subprocess.run(["git", "rev-parse", "--path-format=absolute", "--git-common-dir"],
                            capture_output=True, text=True).stdout.strip()
    main_file = pathlib.Path(common).parent / ".specflux" / "task-states" / "task-6-state.md"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if '"status": "complete"' in main_file.read_text():
                return
        except OSError:  # an older git without --path-format: the story may just come out otherwise
            return
        time.sleep(0.1)

role, task = os.environ["SPECFLUX_ROLE"], os.environ["SPECFLUX_TASK_ID"]
context = sys.stdin.read()
if role == "reviewer":
    verdict = {"approved": True, "issues": [], "criteria_results": [{"criterion": "1", "met": True}]}
    done = subprocess.run([sys.executable, "-m", "specflux.cli", "submit-review", "--json", "-"],
                          input=json.dumps(verdict), text=True, capture_output=True)
    sys.exit(done.returncode)
path, code, export = WORK[task]
if task == "7" and not pathlib.Path(path).exists() and "conflicts in" not in context:
    wait_for_task_6()  # the agent "thinks"; the other lane works meanwhile
pathlib.Path(path).write_text(code)
init = pathlib.Path("textkit/__init__.py")
init.write_text(init.read_text() + export)
task_file = pathlib.Path(os.environ["SPECFLUX_TASK_FILE"])
text = task_file.read_text().replace("- [ ]", "- [x]")
name = export.split()[-1]
text = text.replace("(To be completed)", f"### Summary\n{name}() in {path}, exported by textkit.\n\n"
                                         f"### For Downstream Tasks\nfrom textkit import {name}")
# The protocol's hand-off: a session entry of its own in the progress log, before the chain output.
number = len(re.findall(r"^### Session \d+", text, re.M)) + 1
entry = (f"### Session {number} - {STAMP}\n**Did:**\n- Wrote {path} with {name}()\n"
         f"- Exported it from textkit/__init__.py\n\n**Issues:** None\n\n**Next:** Task complete\n\n")
text = text.replace("(No sessions yet)\n\n", "", 1)
cut = text.index("## 4. Chain Output")
task_file.write_text(text[:cut] + entry + text[cut:])
print(f"wrote {path} and exported {name}")
