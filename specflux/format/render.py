"""Text for the parts specflux writes: new task files, sessions, chain outputs and inputs.

Everything here returns text with "\\n" line endings; the document layer converts to the file's own.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from string import Template
from typing import Any, Iterable


_BREAK = re.compile(r"\r\n|\n|\r")
_HEADING_LINE = re.compile(r"^( {0,3})(?=#{1,6}(?:[ \t]|$))")
_FENCE_LINE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def inert(text: str) -> str:
    """Text from an agent or a command line, safe to put inside a section: it cannot start a
    heading (which would end the section), leave a code fence open or open an HTML comment that
    swallows the rest of the file. Balanced fences stay as they are."""
    lines = _BREAK.split(text.strip())
    opener: tuple[int, str] | None = None
    for i, line in enumerate(lines):
        fence = _FENCE_LINE.match(line)
        if opener is not None:
            marker = opener[1]
            if fence and fence.group(1)[0] == marker[0] and len(fence.group(1)) >= len(marker) and not line.strip(" \t`~"):
                opener = None
            continue
        if fence:
            opener = (i, fence.group(1))
            continue
        lines[i] = _HEADING_LINE.sub(r"\1\\", line)
    if opener is not None:  # never closed: make the opener plain text
        lines[opener[0]] = "\\" + lines[opener[0]].lstrip(" ")
    out = "\n".join(lines)
    if out.count("<!--") > out.count("-->"):
        out = out.replace("<!--", "&lt;!--")
    return out


def one_line(text: str) -> str:
    return " ".join(text.split())


def now_stamp() -> str:
    return datetime.now().strftime("%Y-%m-%d %H:%M")


def render_task(
    template: str,
    *,
    task_id: str,
    title: str,
    metadata: dict[str, Any],
    epic: str | None = None,
    repository: str | None = None,
    requirements: str = "",
    criteria: Iterable[str] = (),
    dependencies: Iterable[str] = (),
) -> str:
    fields = ""
    if epic:
        fields += f"**Epic:** {epic}\n"
    if repository:
        fields += f"**Repository:** {repository}\n"
    if fields:
        fields += "\n"
    deps = list(dependencies)
    chain_inputs = ""
    if deps:
        waiting = ", ".join(f"#{d}" for d in deps)
        chain_inputs = f"## 2. Chain Inputs\n\n(Filled in when {waiting} complete{'s' if len(deps) == 1 else ''})\n\n"
    items = "\n".join(f"- [ ] {one_line(c)}" for c in criteria if c.strip()) or "- [ ] (describe how to verify this task)"
    return Template(template).safe_substitute(
        id=task_id,
        title=one_line(title),
        metadata=metadata_json(metadata),
        context_fields=fields,
        requirements=inert(requirements) or "(describe the task in 2-5 sentences)",
        criteria=items,
        chain_inputs=chain_inputs,
    )


def metadata_json(metadata: dict[str, Any]) -> str:
    """One key per line, values compact: `"dependencies": [100, 101]`, as in the seed's examples."""
    members = [f"  {json.dumps(k, ensure_ascii=False)}: {json.dumps(v, ensure_ascii=False)}" for k, v in metadata.items()]
    return "{\n" + ",\n".join(members) + "\n}"


def _labelled(label: str, text: str) -> str:
    text = inert(text) or "None"
    if "\n" in text:
        return f"**{label}:**\n{text}"
    return f"**{label}:** {text}"


def render_session(number: int, timestamp: str, did: list[str], issues: str, next_steps: str, usage: str | None = None) -> str:
    lines = [f"### Session {number} - {timestamp}", "**Did:**"]
    lines += [_bullet(item) for item in did if item.strip()] or ["- (nothing recorded)"]
    lines += ["", _labelled("Issues", issues), "", _labelled("Next", next_steps)]
    if usage:
        lines += ["", f"**Usage:** {usage}"]
    return "\n".join(lines)


def _bullet(item: str) -> str:
    """A list item; its further lines are indented so that they stay part of it."""
    first, *rest = inert(item).split("\n")
    return "\n".join([f"- {first}", *(f"  {line}" if line.strip() else "" for line in rest)])


def render_chain_output(summary: str, downstream: str = "") -> str:
    parts = ["### Summary", inert(summary) or "(no summary)"]
    parts += ["", "### For Downstream Tasks", inert(downstream) or "None"]
    return "\n".join(parts)


def quote(text: str) -> str:
    return "\n".join(f"> {line}".rstrip() for line in re.split(r"\r\n|\n|\r", text.strip()))


def render_chain_input(task_id: str, title: str, summary: str, downstream: str, link: str) -> str:
    lines = [f"### From Task #{task_id}: {title}", quote(summary)]
    if downstream.strip() and downstream.strip().lower() != "none":
        lines += [">", quote(downstream)]
    lines += ["", f"[Full chain output]({link})"]
    return "\n".join(lines)
