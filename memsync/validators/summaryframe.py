"""A file's summary as stored bytes: a header naming the format and the parser, a keyed
BLAKE2b checksum over the key and the payload, then the summary as JSON.

Reading an entry cannot run code, and one that is truncated, corrupt, from another format or
another parser, or not shaped like a summary decodes to None (the file is parsed again),
never trusted over the bytes. The parse cache's SQLite store (`cachestore.py`) and the
lineage records (`lineagestore.py`) keep summaries so; a sync reads only the records, so it
loads this framing without SQLite (issue 18).
"""

from __future__ import annotations

import json
import sys
from array import array
from collections.abc import Iterable
from importlib.machinery import PathFinder
from pathlib import Path
from typing import Any

from memsync import validators
from memsync.memodigest import blake2b
from memsync.validators.filesummary import KIND_CHARS, NODE, UNDECODABLE, FileSummary

FORMAT = b"MSPC1"
# The per-file pass's modules (under `memsync.validators`): their sources name the parser.
PARSER = (
    "document",
    "blocks",
    "headings",
    "nodelines",
    "edgelists",
    "summary",
    "runedges",
    "scanwords",
    "problems",
    "filesummary",
)
_KINDS = frozenset({NODE, *KIND_CHARS.values()})


def parser_digest() -> bytes:
    """Names the per-file pass that made an entry: a change to the source of any module a
    summary depends on (or to the Python version) makes every stored entry foreign, so an
    upgrade never reuses an old verdict."""
    digest = blake2b(FORMAT, digest_size=8)
    digest.update(repr(sys.version_info[:2]).encode())
    source_digest(digest, PARSER)
    return digest.digest()


def source_digest(digest: Any, names: Iterable[str]) -> None:
    """Feed `digest` the source of each `memsync.validators` module named: a loaded module's
    file, else the file importing it would load, found without running it (a sync whose
    lineage record covers its change parses nothing, so it loads no parser, issue 18)."""
    for name in names:
        full = f"{__package__}.{name}"
        module = sys.modules.get(full)
        if module is not None:
            source = module.__file__
        else:
            spec = PathFinder.find_spec(full, validators.__path__)
            source = spec.origin if spec is not None else None
        digest.update(Path(source).read_bytes() if source else full.encode())


def encode(key: str, made: FileSummary, header: bytes) -> bytes:
    body = [
        made.decoded,
        list(made.ids),
        made.lines.tolist(),
        made.parents.tolist(),
        made.kinds,
        list(made.specials),
        [list(x) for x in made.pending],
        [list(x) for x in made.item_problems],
        [list(x) for x in made.problems],
        [list(x) for x in made.orphans],
        [list(x) for x in made.focus],
    ]
    payload = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
    check = blake2b(payload, key=key.encode()[:64], digest_size=16).digest()
    return header + check + payload


def decode(key: str, value: bytes, header: bytes) -> FileSummary | None:
    """The summary in a stored value, or None when it is not one this process trusts."""
    if not value.startswith(header) or len(value) < len(header) + 16:
        return None
    check, payload = value[len(header) : len(header) + 16], value[len(header) + 16 :]
    if blake2b(payload, key=key.encode()[:64], digest_size=16).digest() != check:
        return None
    try:
        return _shaped(json.loads(payload))
    except (ValueError, TypeError, IndexError, KeyError, OverflowError, RecursionError):
        return None


def _ints(raw: Any, low: int, high: int) -> list[int]:
    if not isinstance(raw, list) or not all(type(x) is int and low <= x < high for x in raw):
        raise ValueError("not integers in range")
    return raw


def _strs(raw: Any) -> list[str]:
    if not isinstance(raw, list) or not all(type(x) is str for x in raw):
        raise ValueError("not strings")
    return raw


def _rows(raw: Any, shape: str, items: int) -> tuple[tuple[Any, ...], ...]:
    """Rows of a shape like "iss" (item index, str, str); `i` is an item index, `l` a line,
    `b` a bool, `s` a string."""
    out: list[tuple[Any, ...]] = []
    for row in raw:
        if not isinstance(row, list) or len(row) != len(shape):
            raise ValueError("bad row")
        for kind, value in zip(shape, row, strict=True):
            ok = {
                "i": type(value) is int and 0 <= value < items,
                "l": type(value) is int and 0 <= value < 2**32,
                "b": type(value) is bool,
                "s": type(value) is str,
            }[kind]
            if not ok:
                raise ValueError("bad value")
        out.append(tuple(row))
    return tuple(out)


def _shaped(body: Any) -> FileSummary:
    if not isinstance(body, list) or len(body) != 11 or type(body[0]) is not bool:
        raise ValueError("not a summary")
    if not body[0]:
        return UNDECODABLE
    ids = tuple(_strs(body[1]))
    count = len(ids)
    lines = _ints(body[2], 0, 2**32)
    parents = _ints(body[3], -1, max(count, 1))
    kinds = body[4]
    if not (type(kinds) is str and len(kinds) == count and set(kinds) <= _KINDS):
        raise ValueError("bad kinds")
    if len(lines) != count or len(parents) != count or any(p >= i for i, p in enumerate(parents)):
        raise ValueError("bad items")
    specials = tuple(_ints(body[5], 0, count))
    if any(kinds[i] in (NODE, "#") for i in specials):
        raise ValueError("bad specials")
    return FileSummary(
        ids=tuple(_intern(ids)),
        lines=array("I", lines),
        parents=array("i", parents),
        kinds=kinds,
        specials=specials,
        pending=_rows(body[6], "iss", count),
        item_problems=_rows(body[7], "iss", count),
        problems=_rows(body[8], "sls", count),
        orphans=_rows(body[9], "lb", count),
        focus=_rows(body[10], "sl", count),
    )


def _intern(ids: Iterable[str]) -> Iterable[str]:
    return (sys.intern(x) for x in ids)
