"""The README and docs/ stand on their own in a clone: no link out of the repository (`../shared` is
not beside a clone), every relative link and anchor leads somewhere, and docs/reference.md names
what the code has (tools, statuses, settings, import formats) with examples the code accepts."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *sorted((ROOT / "docs").rglob("*.md"))]
REFERENCE = ROOT / "docs" / "reference.md"

LINK = re.compile(r"(?<!!)\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")


def prose(text: str) -> str:
    """`text` without fenced code blocks and inline code: links there are examples, not links."""
    out, fence = [], None
    for line in text.splitlines():
        match = FENCE.match(line)
        if fence is None and match:
            fence = match.group(1)
        elif fence is not None and match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence) \
                and not line.strip()[len(match.group(1)):]:
            fence = None
        elif fence is None:
            out.append(INLINE_CODE.sub("", line))
    return "\n".join(out)


def headings(text: str) -> list[str]:
    lines, fence = [], None
    for line in text.splitlines():
        match = FENCE.match(line)
        if match:
            if fence is None:
                fence = match.group(1)
            elif match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence):
                fence = None
        elif fence is None and re.match(r"#{1,6} ", line):
            lines.append(line.lstrip("#").strip())
    return lines


def anchors(text: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens, repeats numbered."""
    seen: dict[str, int] = {}
    out = set()
    for heading in headings(text):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def test_docs_exist():
    assert REFERENCE.is_file()
    assert "docs/reference.md" in (ROOT / "README.md").read_text()


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_link_leaves_the_repository(doc):
    text = doc.read_text(encoding="utf-8")
    assert "../shared" not in text, f"{doc.name} points at ../shared, which a clone does not have"
    assert "CONTRACT.md" not in text


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_leads_somewhere(doc):
    broken = []
    for target in LINK.findall(prose(doc.read_text(encoding="utf-8"))):
        if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = (doc.parent / path).resolve() if path else doc
        if not file.exists():
            broken.append(f"{target}: no such file")
            continue
        if not file.is_relative_to(ROOT):
            broken.append(f"{target}: outside the repository")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file.read_text(encoding="utf-8")):
            broken.append(f"{target}: no heading #{anchor} in {file.relative_to(ROOT)}")
    assert not broken, f"{doc.relative_to(ROOT)}: " + "; ".join(broken)


def test_the_link_checker_sees_links_and_skips_code():
    text = "see [a](a.md) and `[b](b.md)`\n```\n[c](c.md)\n```\n````md\n```\n[d](d.md)\n```\n````\n[e](e.md#x)"
    assert LINK.findall(prose(text)) == ["a.md", "e.md#x"]
    assert anchors("# Top\n## 6. Settings: `.specflux/config.toml`\n## Top\n") == {
        "top", "6-settings-specfluxconfigtoml", "top-1"}


# --- docs/reference.md against the code ----------------------------------------------------------

def reference() -> str:
    return REFERENCE.read_text(encoding="utf-8")


def section(title_start: str) -> str:
    text = reference()
    start = text.index(f"\n## {title_start}")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else None]


def test_reference_names_every_tool_status_and_format():
    from specflux.agent.tools import ROLE_SPECS
    from specflux.format.metadata import STATUSES
    from specflux.flow.state import RUN_STATUSES
    from specflux.flow.workflow.workflow_file import ROLES
    from specflux.importers.apply import FORMATS

    text = reference()
    tools = {spec["name"] for specs in ROLE_SPECS.values() for spec in specs}
    for name in sorted(tools):
        assert f"| `{name}` |" in section("4. Agent tools"), f"tool {name} is not in the reference's table"
    for status in STATUSES:
        assert f"`{status}`" in section("2. The task file"), status
    for status in RUN_STATUSES:
        assert f"`{status}`" in section("5. Workflow runs"), status
    for role in ROLES:
        assert f"`{role}`" in section("5. Workflow runs"), role
    for fmt in FORMATS:
        assert f"| `{fmt}` |" in section("8. Import formats"), fmt
    assert "exit" in text.lower()


def toml_blocks(part: str) -> list[str]:
    return re.findall(r"```toml\n(.*?)```", part, re.S)


def test_reference_settings_are_the_ones_config_toml_takes(tmp_path):
    from specflux.base.records import field_names
    from specflux.store.config import AgentConfig, ArchiveConfig, FlowConfig, RemoteConfig, load_config

    (example,) = toml_blocks(section("6. Settings"))
    path = tmp_path / "config.toml"
    path.write_text(example, encoding="utf-8")
    config = load_config(path)  # raises on an unknown key or a wrong type
    assert config.validate is not None and config.validate.junit_xml == ".specflux-junit.xml"
    for cls, name in ((ArchiveConfig, "archive"), (AgentConfig, "agent"), (FlowConfig, "flow"), (RemoteConfig, "remote")):
        documented = re.search(rf"\[{name}\]\n(.*?)\n\n", example, re.S).group(1)
        for field in field_names(cls):
            assert re.search(rf"^{field} = ", documented, re.M), f"[{name}] {field} is not in the reference"


def test_reference_workflow_example_loads():
    from specflux.flow.workflow.workflow_file import parse_workflow

    (example,) = toml_blocks(section("5. Workflow runs"))
    workflow = parse_workflow(example, "docs/reference.md")
    assert [e.id for e in workflow.edges] == ["coder-retry", "coder-to-reviewer", "next-task"]


def test_architecture_names_only_what_exists():
    """Every file, folder and name ARCHITECTURE.md points a reader to can be found: paths under
    specflux/ (or the repository), and each `name` written after a module as its function or class."""
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    missing = []
    for token in re.findall(r"`([^`\s]+)`", text):
        if re.fullmatch(r"[\w/.]+\.(py|md|toml)|[\w]+/", token):
            if not any((base / token).exists() for base in (ROOT / "specflux", ROOT)):
                missing.append(token)
    for module, name in re.findall(r"`([\w/]+\.py)` `([A-Za-z_][\w.]*)`", text):
        path = next(base / module for base in (ROOT / "specflux", ROOT) if (base / module).exists())
        for part in name.split("."):
            if not re.search(rf"^\s*(def|class) {re.escape(part)}\b", path.read_text(encoding="utf-8"), re.M):
                missing.append(f"{module} {name}")
    assert missing == []
