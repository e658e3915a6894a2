"""Text from task files made safe to print: no terminal escape sequences, no bidi overrides.

A title such as `Fix \x1b]52;c;...\x07 login` could otherwise drive the terminal (set the
clipboard, retitle the window), and U+202E could make `list` show text reversed (Trojan Source).
"""

from __future__ import annotations

import re

# C0 controls (but tab and line breaks, which `keep` decides), DEL, C1 controls, and the Unicode
# bidirectional controls: embeddings, overrides, isolates and the marks.
_UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escaped(m: re.Match) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe(text: str, keep: str = "\n\t") -> str:
    """`text` with every control character and bidi control shown as `\\x1b` / `\\u202e`.
    Characters in `keep` (by default newline and tab) stay; a lone CR is escaped."""
    if text.isascii() and text.isprintable():
        return text
    out = _UNSAFE.sub(_escaped, text)
    if "\r" in out:
        out = out.replace("\r", "\\r")
    if "\t" not in keep:
        out = out.replace("\t", "\\t")
    return out


def safe_json(dumped: str) -> str:
    """JSON text with the bidi controls written as `\\uXXXX` escapes: the same JSON value, but a
    terminal shows it as it is (json.dumps already escapes the other control characters)."""
    return _BIDI.sub(_escaped, dumped)
