"""spec-kit: a task as the file writes it, turned into the draft specflux writes: a one-line title,
the whole text as requirements, criteria from its own checklist or validation line, and the
source's facts (phase, user story, files it names, priority, labels) in the metadata.
"""

from __future__ import annotations

import re

from specflux.format.render import one_line
from specflux.importers.drafts import TaskDraft
from specflux.importers.speckit_phrases import ID_ANYWHERE
from specflux.importers.speckit_scan import FIELD, Heading, Task

TITLE_MAX = 120

_PHASE = re.compile(r"^\W*(?:final\s+)?(?:phase|fase|wave|stage|etapa|milestone|sprint)\b", re.I)
_STORY = re.compile(r"\b(?:user\s+story|story|US)[\s-]?(\d+)\b", re.I)
_PRIORITY = re.compile(r"\((?:priority:\s*)?P(\d)\)", re.I)
_CHECK_FIELDS = {"expected", "verify", "verification", "validation", "validate", "acceptance",
                 "acceptance criteria", "done when", "test", "independent test", "check"}
_FILE_EXT = ("py|pyi|rs|ts|tsx|js|jsx|mjs|cjs|json|jsonl|toml|yaml|yml|md|mdx|txt|sh|bash|zsh|ps1|go|java|kt|"
             "swift|rb|php|cs|cpp|cc|c|h|hpp|css|scss|sass|less|html|htm|xml|sql|nix|lock|cfg|ini|conf|astro|"
             "vue|svelte|proto|graphql|gql|csv|svg|png|jpg|jpeg|gif|ico|webp|dart|ex|exs|lua|scala|gradle|tf|"
             "hcl|mk|ipynb|wasm|zip|bin|db|sqlite|tmpl|j2|rst|adoc|pdf|snap|kts|mod|sum")
_SEGMENT = r"[\w.@~*+\[\]-]+(?: [\w.@~*+\[\]-]+)*"  # a path's part, spaces allowed between words
_PATH = re.compile(rf"^(?:~?/|\.\.?/)?(?:{_SEGMENT}/)*{_SEGMENT}/?$")
_HAS_EXT = re.compile(rf"(?:^|/)(?:\.[\w.-]+|[\w.*\[\]-]*[\w\]]\.(?:{_FILE_EXT}))$", re.I)
_BACKTICKED = re.compile(r"`([^`\n]+)`")
_BARE = re.compile(r"(?<![\w`/])([\w.@~*\[\]-]*[/.][\w.@~*/\[\]-]+)")


def draft(task: Task, dependencies: list[str], path: str, file_done: bool) -> TaskDraft:
    """The task as specflux writes it: a one-line title, the whole text as requirements, the
    source's facts in the metadata."""
    description = " ".join(task.text).strip()
    criteria, checked = _criteria(task, description)
    if task.box is not None:
        done = task.box in "xX" or (task.kind == "heading" and bool(task.done))
    else:  # a paragraph or heading task: its own `Status:` line, else the file's
        done = task.done if task.done is not None else file_done
    return TaskDraft(
        task_id=task.raw_id,
        title=_title(description),
        requirements="\n".join([*task.text, *task.details]).strip(),
        criteria=criteria,
        checked=checked if checked else [done] * len(criteria),
        status="complete" if done else "pending",
        dependencies=dependencies,
        metadata=_metadata(task, path, description),
        line=task.line,
    )


def _metadata(task: Task, path: str, description: str) -> dict:
    """`source`, and where the file says so `phase`, `user_story`, `files`, `priority`, `labels`;
    `parallel` always (true for a `[P]` task)."""
    metadata: dict = {"source": {"path": path, "line": task.line}}
    if task.written:  # `t005` imported as T005, a second T001 as T001-2: write-back finds the line by it
        metadata["source"]["id"] = task.written
    phase = _phase(task.headings)
    story = task.story or next((f"US{m.group(1)}" for h in reversed(task.headings)
                                for m in [_STORY.search(h.text)] if m), None)
    priority = task.priority or next((int(m.group(1)) for h in reversed(task.headings)
                                      for m in [_PRIORITY.search(h.text)] if m), None)
    found = _files("\n".join([description, *task.details]))
    for key, value in (("phase", phase), ("user_story", story), ("parallel", task.parallel), ("files", found),
                       ("priority", priority), ("labels", list(dict.fromkeys(task.labels)))):
        if value or key == "parallel":
            metadata[key] = value
    return metadata


def _criteria(task: Task, description: str) -> tuple[list[str], list[bool]]:
    """The task's own checklist where it has one; else its validation line ("Expected: ...",
    "Verify: ..."); else the task's text: one criterion, never none."""
    steps = [(m.group(2), m.group(1) in "xX") for d in task.details
             for m in [re.match(r"^\s*(?:[-*+]\s+|\d+[.)]\s+)?\[(.)\]\s+(.+)$", d)] if m]
    if steps:
        return [_safe(one_line(s)) for s, _ in steps], [c for _, c in steps]
    for detail in task.details:
        m = FIELD.match(detail)
        if m and m.group(1).strip().lower() in _CHECK_FIELDS and m.group(2).strip():
            return [_safe(one_line(m.group(2)))], []
    return [_safe(one_line(description))], []


def _title(description: str) -> str:
    """One line, a prefix of the source's text as written (bold and all): up to its first clause
    break when it is long, without a closing `:` or `.`."""
    text = _safe(one_line(description)).rstrip(" :")
    text = text[:-1] if text.endswith(".") and not text.endswith("..") else text
    if len(text) <= TITLE_MAX:
        return text
    breaks = [m.start() for m in re.finditer(r"\.\s|\s[—–]\s|;\s|:\s", text) if 20 <= m.start() <= TITLE_MAX]
    if breaks:
        return text[: breaks[0]].rstrip(" .")
    return text[: TITLE_MAX - 1].rsplit(" ", 1)[0].rstrip(" ,;:-–—") + "…"


def _safe(text: str) -> str:
    """A single line that cannot open an HTML comment in the task file."""
    return text.replace("<!--", "&lt;!--") if text.count("<!--") > text.count("-->") else text


def _phase(headings: tuple[Heading, ...]) -> str | None:
    """The nearest heading that names a phase (`## Phase 3: ...`, `## Fase 2 — ...`, `## Wave W2`),
    else the nearest `##` heading; without its priority and decorations."""
    chosen = next((h for h in reversed(headings) if _PHASE.match(h.text)), None)
    chosen = chosen or next((h for h in reversed(headings) if h.level == 2), None)
    if chosen is None:
        return None
    text = _PRIORITY.sub("", chosen.text.replace("**", ""))
    text = re.sub(r"[\U0001F300-\U0001FAFF\u2600-\u27BF\uFE0F]|\bMVP\b", "", text)
    return one_line(text).rstrip(" -–—:") or None


def _files(text: str) -> list[str]:
    """Paths the task names: in backticks, or bare with a `/` or a known extension."""
    found: list[str] = []
    for m in _BACKTICKED.finditer(text):
        candidate = m.group(1).strip()
        if _is_path(candidate) and ("/" in candidate or _HAS_EXT.search(candidate)):
            found.append(candidate)
    for m in _BARE.finditer(_BACKTICKED.sub(" ", text)):  # bare: `and/or`, `panel/seal/merge` are words
        candidate = m.group(1).rstrip(".,;:")
        if re.fullmatch(r"[A-Z][a-z]+\.js", candidate):  # Node.js, Next.js: names, not files
            continue
        if _is_path(candidate) and (_HAS_EXT.search(candidate) or candidate.endswith("/")):
            found.append(candidate)
    return list(dict.fromkeys(found))


def _is_path(candidate: str) -> bool:
    """Path-shaped: no URL, no command line (`npm run x`), no task id."""
    if "://" in candidate or not _PATH.match(candidate) or ID_ANYWHERE.fullmatch(candidate):
        return False
    words = candidate.split(" ")  # `Audio Trimmer/App/` is a path, `npm run db:migrate` is not
    beside_spaces = [w.rsplit("/", 1)[-1] for w in words[:-1]] + [w.split("/", 1)[0] for w in words[1:]]
    return not any(not w[:1].isupper() and not w[:1].isdigit() for w in beside_spaces)
