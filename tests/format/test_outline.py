"""The line scanner: byte-exact round trips on real files and generated ones, and headings that are
found exactly where CommonMark would find them (never inside code fences or HTML comments)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specflux.store.config import ArchiveConfig
from specflux.format.document import TaskDocument
from specflux.base.errors import ParseError
from specflux.store.lint import lint_document
from specflux.format.outline import line_number, scan, split_lines

FIXTURES = Path(__file__).parent.parent / "fixtures"
SEEDS = sorted(FIXTURES.glob("seed-example-*.md"))


def read_exact(path: Path) -> str:
    return path.read_bytes().decode("utf-8")


def variants(text: str) -> dict[str, str]:
    """The text as written, with CRLF endings, and without its final line ending (both ways)."""
    crlf = text.replace("\n", "\r\n")
    return {
        "lf": text,
        "crlf": crlf,
        "lf-no-final-newline": text[:-1] if text.endswith("\n") else text,
        "crlf-no-final-newline": crlf[:-2] if crlf.endswith("\r\n") else crlf,
    }


# --------------------------------------------------------------------- a reference scanner


def reference_headings(text: str) -> list[int]:
    """0-based indices of the lines CommonMark reads as ATX headings, written independently of
    `outline.scan`: fences (``` / ~~~, closed by the same character, at least as long, indented at
    most three spaces) and HTML comment blocks (`<!--` until a line holding `-->`) are opaque."""
    found = []
    fence: tuple[str, int] | None = None
    in_comment = False
    for i, line in enumerate(re.sub(r"(\r\n|\n|\r)$", "", ln) for ln in split_lines(text)):
        if fence is not None:
            char, length = fence
            if re.fullmatch(r" {0,3}" + re.escape(char) + "{" + str(length) + r",}[ \t]*", line):
                fence = None
            continue
        if in_comment:
            in_comment = "-->" not in line
            continue
        if re.match(r" {0,3}<!--", line):
            in_comment = "-->" not in line
            continue
        opener = re.match(r" {0,3}(`{3,}|~{3,})(.*)", line)
        if opener and not (opener.group(1)[0] == "`" and "`" in opener.group(2)):
            fence = (opener.group(1)[0], len(opener.group(1)))
            continue
        if re.match(r" {0,3}#{1,6}(?:[ \t]|$)", line):
            found.append(i)
    return found


def scanned_heading_lines(text: str) -> list[int]:
    return [len(split_lines(text[: h.start])) for h in scan(text).headings]


def heading_view(text: str) -> list[tuple[int, str, int]]:
    return [(h.level, h.text, line_number(text, h.start)) for h in scan(text).headings]


def assert_lossless(text: str) -> None:
    assert "".join(split_lines(text)) == text
    doc = TaskDocument(text, "x.md")
    assert str(doc) == text
    # reading never raises anything but a located ParseError, and never changes the text
    try:
        doc.to_state()
    except ParseError as e:
        assert e.path == "x.md"
    lint_document(doc, None, ArchiveConfig())
    assert str(doc) == text


# --------------------------------------------------------------------- real files


def test_corpus_is_read_losslessly(corpus_files):
    assert corpus_files, "the corpus folder is empty"
    for path in corpus_files:
        text = read_exact(path)
        for name, variant in variants(text).items():
            try:
                assert_lossless(variant)
            except AssertionError as e:  # pragma: no cover - a message that names the file
                raise AssertionError(f"{path.name} ({name}): {e}") from e


def test_corpus_headings_do_not_depend_on_line_endings(corpus_files):
    for path in corpus_files:
        text = read_exact(path)
        lf = heading_view(text)
        assert heading_view(text.replace("\n", "\r\n")) == lf, path.name
        assert heading_view(text.replace("\n", "\r")) == lf, path.name


def test_corpus_headings_match_the_reference_scanner(corpus_files):
    total = 0
    for path in corpus_files:
        text = read_exact(path)
        assert scanned_heading_lines(text) == reference_headings(text), path.name
        total += len(reference_headings(text))
    assert total > 100  # the corpus really has headings, so the comparison means something


def test_corpus_fenced_headings_are_text(corpus_files):
    """The corpus has `#` lines inside code fences (shell comments, templates); none is a heading."""
    fenced = 0
    for path in corpus_files:
        text = read_exact(path)
        outline = scan(text)
        for fence in outline.fences:
            for m in re.finditer(r"(?m)^ {0,3}#{1,6} ", text[fence.body : fence.close]):
                fenced += 1
                assert all(h.start != fence.body + m.start() for h in outline.headings), path.name
    assert fenced > 0


@pytest.mark.parametrize("path", SEEDS, ids=lambda p: p.stem)
def test_seed_examples_round_trip_in_every_variant(path):
    text = read_exact(path)
    lf = heading_view(text)
    assert [h[1] for h in lf if h[0] == 2][:2] == ["0. Metadata", "1. Context"]
    for name, variant in variants(text).items():
        assert_lossless(variant)
        assert heading_view(variant) == lf, name


def test_split_lines_only_breaks_on_cr_and_lf():
    text = "a\u2028b\x0cc\x85d\r\ne\rf\ng"
    assert split_lines(text) == ["a\u2028b\x0cc\x85d\r\n", "e\r", "f\n", "g"]
    assert split_lines("") == []
    assert split_lines("\n\n") == ["\n", "\n"]


def test_line_numbers_count_every_kind_of_line_ending():
    text = "one\r\ntwo\rthree\nfour"
    assert [line_number(text, text.index(w)) for w in ("one", "two", "three", "four")] == [1, 2, 3, 4]


def test_unclosed_fence_hides_everything_after_it():
    text = "# T\n\n```python\n## 3. Progress Log\n"
    outline = scan(text)
    assert [h.text for h in outline.headings] == ["T"]
    assert len(outline.fences) == 1 and not outline.fences[0].closed
    assert outline.in_opaque(text.index("## 3"))


def test_fence_closes_only_with_the_same_character_and_enough_of_it():
    text = "````\n## a\n```\n## b\n~~~~\n## c\n````\n## d\n"
    assert [h.text for h in scan(text).headings] == ["d"]
    text = "~~~\n## a\n```\n## b\n~~~\n## c\n"
    assert [h.text for h in scan(text).headings] == ["c"]


def test_backtick_info_string_with_a_backtick_is_not_a_fence():
    text = "``` a`b\n## real\n"
    assert [h.text for h in scan(text).headings] == ["real"]


def test_html_comment_blocks_hide_headings():
    text = "<!--\n## hidden\n-->\n## shown\n  <!-- one line -->\n## also shown\n<!-->\n## after an empty comment\n"
    assert [h.text for h in scan(text).headings] == ["shown", "also shown", "after an empty comment"]


def test_heading_text_drops_closing_hashes_and_padding():
    text = "##   Progress Log   ##  \n###\n#### #5\n####### seven\n#no-space\n    ## indented code\n"
    assert [(h.level, h.text) for h in scan(text).headings] == [(2, "Progress Log"), (3, ""), (4, "#5")]


# --------------------------------------------------------------------- generated documents

WORDS = st.lists(
    st.sampled_from(list("abcXYZ019 -_.:#`~<>![]()*+\t") + ["é", "中", "\u2028", "\x0c", "\x85", "→", "-->", "<!--", "```"]),
    max_size=12,
).map("".join)
ENDINGS = {"lf": "\n", "crlf": "\r\n", "cr": "\r"}


@st.composite
def heading_line(draw):
    hashes = "#" * draw(st.integers(1, 7))
    indent = " " * draw(st.integers(0, 4))
    number = draw(st.sampled_from(["", "3. ", "0. ", "2) "]))
    text = draw(st.sampled_from(["Progress Log", "PROGRESS LOG", "Metadata", "Session 1 - 2024-11-26 10:00", "Notes"]) | WORDS)
    closing = draw(st.sampled_from(["", " ##", " #"]))
    trailing = draw(st.sampled_from(["", "  ", "\t"]))
    sep = draw(st.sampled_from([" ", "\t", "  "]))
    return f"{indent}{hashes}{sep}{number}{text}{closing}{trailing}"


@st.composite
def fence_line(draw):
    char = draw(st.sampled_from("`~"))
    return " " * draw(st.integers(0, 4)) + char * draw(st.integers(3, 5)) + draw(st.sampled_from(["", "json", "python ", " ~~~", "a`b"])) + draw(st.sampled_from(["", "  "]))


TASK_LINE = st.builds(
    lambda indent, bullet, box, text: f"{indent}{bullet} [{box}] {text}",
    st.sampled_from(["", "  ", "    ", "\t"]),
    st.sampled_from(["-", "*", "+", "1.", "2)"]),
    st.sampled_from([" ", "x", "X"]),
    WORDS,
)
COMMENT_LINE = st.sampled_from(["<!--", "<!-- note", "<!-- one -->", "-->", "text -->", "<!-->", "  <!--", "<!--->"])
LINE = st.one_of(
    heading_line(),
    fence_line(),
    COMMENT_LINE,
    TASK_LINE,
    WORDS,
    st.just(""),
    st.sampled_from(["```json", "{", '  "status": "pending",', "}", "```", "**Did:** x", "(No sessions yet)", "> quote"]),
)


@st.composite
def markdown(draw):
    lines = draw(st.lists(LINE, max_size=40))
    style = draw(st.sampled_from(["lf", "crlf", "cr", "mixed"]))
    endings = [ENDINGS[style] if style != "mixed" else draw(st.sampled_from(list(ENDINGS.values()))) for _ in lines]
    text = "".join(line + end for line, end in zip(lines, endings))
    if lines and draw(st.booleans()):
        text = text[: -len(endings[-1])]  # no final line ending
    return text


@settings(max_examples=200, deadline=None)
@given(markdown())
def test_generated_documents_round_trip(text):
    assert_lossless(text)


@settings(max_examples=200, deadline=None)
@given(markdown())
def test_generated_headings_are_exactly_those_outside_fences_and_comments(text):
    assert scanned_heading_lines(text) == reference_headings(text)


@settings(max_examples=200, deadline=None)
@given(st.lists(LINE, max_size=40))
def test_generated_headings_do_not_depend_on_line_endings(lines):
    joined = {name: "".join(line + end for line in lines) for name, end in ENDINGS.items()}
    lf = heading_view(joined["lf"])
    assert heading_view(joined["crlf"]) == lf
    assert heading_view(joined["cr"]) == lf
