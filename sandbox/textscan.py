"""Linear-time scans of model text that regular expressions made super-linear.

`re` backtracks: `(.*?)` after `\\s*` retries every split of a run of spaces when no closing
fence follows, and several adjacent quantifiers that all match spaces (`[\\s*]*[A-Za-z ]+?\\s*:`)
try every way to share a run among them. A 600-space answer then took 36 s to read. These
helpers use `str.find` and `str.partition` instead, so their cost is linear in the text.
"""

import re

_LANG = re.compile(r"[A-Za-z]*")  # one quantifier over a class: linear


def code_fences(text: str, languages: tuple[str, ...] | None = None) -> list[str]:
    """The bodies of the closed ``` code fences of `text`, in order.

    After the opening ``` comes an optional language tag (letters; with `languages`, only those
    tags are taken as tags, others belong to the body) and an optional newline. An unclosed
    fence has no body.
    """
    bodies = []
    pos = 0
    while (start := text.find("```", pos)) >= 0:
        body = start + 3
        tag = _LANG.match(text, body).group()
        if tag and (languages is None or tag in languages):
            body += len(tag)
        end = text.find("```", body)
        if end < 0:
            break
        bodies.append(text[body:end])
        pos = end + 3
    return bodies


def split_field(line: str, prefix: re.Pattern, key_chars: re.Pattern) -> tuple[str, str] | None:
    """`(key, value)` of a "key: value" line, or None.

    The line may start with what `prefix` (one character class, starred) matches; the key (up to
    the first colon, trailing whitespace and `*` removed) must fully match `key_chars`; the value
    has surrounding whitespace and leading `*` removed (markdown bold: "**Key:** value").
    """
    body = line[prefix.match(line).end() :]
    key, colon, value = body.partition(":")
    if not colon:
        return None
    key = key.rstrip().rstrip("*").rstrip()
    if not key or not key_chars.fullmatch(key):
        return None
    return key, value.strip().lstrip("*").strip()
