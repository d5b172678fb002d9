"""Java `.properties` text, both ways: the one codec for the node's configuration file.

Theory of operation. `parse` follows `java.util.Properties.load`: lines end at `\\n`, `\\r` or
`\\r\\n`; a line whose first non-blank character is `#` or `!` is a comment; a line that ends in an
odd number of backslashes continues on the next one, whose leading blanks are dropped; the key ends
at the first unescaped `=`, `:` or blank, and blanks plus one `=` or `:` separate it from the value;
then `\\t \\n \\r \\f \\uXXXX` decode and a backslash before any other character stands for that
character. A later duplicate key wins. Java strings are UTF-16, so a pair of `\\uXXXX` surrogates
decodes to the one character they encode.

`render` follows `Properties.store` to a byte stream: one `key=value` line per entry, in the given
order, with every character the parser would read differently escaped (`\\`, `=`, `:`, `#`, `!`,
blanks in keys and at the start of values, `\\t \\n \\r \\f`) and every character outside printable
ASCII written as `\\uXXXX` (UTF-16 units), so that the text is ASCII and reads the same as UTF-8 or
Latin-1. `parse(render(p)) == p` for every dict of strings; Java reads the text the same way.

The node reads its `server.properties` with `parse` (reference_node.config); the harness writes it
with `render` (harness/targets/reference.py).
"""

from __future__ import annotations

import re

BLANKS = " \t\f"
SEPARATORS = "=:"

_DECODE = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_ENCODE = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f",
           "=": "\\=", ":": "\\:", "#": "\\#", "!": "\\!"}
_LINE_END = re.compile(r"\r\n|\r|\n")
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")


def parse(text: str) -> dict[str, str]:
    """The entries of a `.properties` text, as `Properties.load` reads them."""
    out: dict[str, str] = {}
    for line in _logical_lines(text):
        key, value = _split_pair(line)
        out[_unescape(key)] = _unescape(value)
    return out


def render(props: dict[str, str]) -> str:
    """A `.properties` text (ASCII) that `parse` and Java read back as `props`, keys in order."""
    return "".join(f"{_escape(k, is_key=True)}={_escape(v, is_key=False)}\n"
                   for k, v in props.items())


def _logical_lines(text: str) -> list[str]:
    """Comments and blank lines dropped, continuations joined, escapes still in place."""
    logical: list[str] = []
    pending: str | None = None
    for raw in _LINE_END.split(text):
        line = raw.lstrip(BLANKS)
        if pending is None and (not line or line[0] in "#!"):
            continue
        joined = (pending or "") + line
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending = joined[:-1]
            continue
        logical.append(joined)
        pending = None
    if pending is not None:
        logical.append(pending)
    return logical


def _split_pair(line: str) -> tuple[str, str]:
    i = 0
    while i < len(line):
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c in SEPARATORS or c in BLANKS:
            break
        i += 1
    key = line[:i]
    rest = line[i:].lstrip(BLANKS)
    if rest[:1] and rest[0] in SEPARATORS:
        rest = rest[1:].lstrip(BLANKS)
    return key, rest


def _unescape(s: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            n = s[i + 1]
            if n == "u" and _HEX4.fullmatch(s, i + 2, i + 6):
                out.append(chr(int(s[i + 2 : i + 6], 16)))
                i += 6
                continue
            out.append(_DECODE.get(n, n))
            i += 2
            continue
        out.append(c)
        i += 1
    return _join_surrogates("".join(out))


def _join_surrogates(s: str) -> str:
    """Each high+low surrogate pair as the character it encodes; a lone surrogate stays."""
    if not any("\ud800" <= c <= "\udfff" for c in s):
        return s
    return s.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def _escape(s: str, *, is_key: bool) -> str:
    out: list[str] = []
    for i, c in enumerate(s):
        if c == " ":
            # A blank ends a key, and blanks before a value are separators.
            out.append("\\ " if is_key or i == 0 else " ")
        elif c in _ENCODE:
            out.append(_ENCODE[c])
        elif " " < c <= "~":
            out.append(c)
        else:
            out.append(_utf16_escapes(c))
    return "".join(out)


def _utf16_escapes(c: str) -> str:
    units = c.encode("utf-16-be", "surrogatepass")
    return "".join(f"\\u{units[j] << 8 | units[j + 1]:04X}" for j in range(0, len(units), 2))
