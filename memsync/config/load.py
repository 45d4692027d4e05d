"""Loading the configuration file into a validated `Config` (finding and reading it: `paths`).

YAML is composed into a node tree first, so every problem carries the line of the key it is
about, and duplicate keys (which PyYAML would silently collapse) are caught. All problems,
from YAML, the models and the cross-field checks, are raised together as one `ConfigError`
whose `problems` are `Located(location, message, line)`; `location` is dotted
(`roots.personal.sync.interval`, `roots.personal.publish[0].token`) and empty for
problems with the whole document.

A config file is also untrusted input that every command reads, so what YAML could make
expensive is refused before anything is built: files over `MAX_CONFIG_BYTES`, anchors and
aliases (a few hundred bytes of nested aliases expand to billions of nodes; a memsync
config has no use for them), nesting deeper than `MAX_DEPTH`, and explicit tags other than
the core ones (`!!python/...` and friends would be refused by safe loading anyway).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from memsync.config.paths import MAX_CONFIG_BYTES, find_config_path, read_config
from memsync.config.schema import TAGS, Config, Loc, reference_problems
from memsync.configproblem import Located
from memsync.errors import ConfigError, format_problem

MAX_DEPTH = 32  # the schema nests 6 levels; PyYAML's composer recurses once per level
_CORE_TAGS = frozenset(
    f"tag:yaml.org,2002:{name}" for name in ("str", "int", "float", "bool", "null", "seq", "map")
)
_HINT = "`memsync config sample` prints a valid example"

Lines = dict[Loc, int]

__all__ = [
    "MAX_CONFIG_BYTES",
    "MAX_DEPTH",
    "find_config_path",
    "format_problem",
    "load_config",
    "load_config_bytes",
    "load_config_text",
]


def load_config(path: Path | str) -> Config:
    """Read and validate one config file; relative paths in it are relative to its directory."""
    path = Path(path).expanduser()
    return load_config_bytes(read_config(path), path)


def load_config_bytes(raw: bytes, path: Path) -> Config:
    """Validate the bytes read from `path` (see `paths.read_config`)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {path} is not UTF-8 text", source=str(path)) from exc
    return load_config_text(text, path.absolute().parent, str(path))


def load_config_text(text: str, base_dir: Path, source_name: str = "<config>") -> Config:
    """Validate YAML text; raise one ConfigError listing every problem."""
    data, lines, problems = _parse_yaml(text)
    if not problems and not isinstance(data, dict):
        empty = "the file is empty; start from `memsync config sample`"
        message = "expected a mapping of settings at the top level" if lines else empty
        problems.append(Located("", message, lines.get((), 1)))
    if not isinstance(data, dict):
        raise _error(problems, source_name)
    found: list[tuple[Loc, str]] = []
    config: Config | None = None
    try:
        config = Config.model_validate(data, context={"base_dir": base_dir})
    except ValidationError as exc:
        found.extend(_from_pydantic(exc.errors(include_url=False, include_input=False)))
    found.extend(reference_problems(data, base_dir))
    problems.extend(Located(_dotted(loc), message, _line(lines, loc)) for loc, message in found)
    if problems or config is None:
        raise _error(sorted(set(problems), key=_order), source_name)
    return config


def _order(problem: Located) -> tuple[int, str, str]:
    return (problem.line or 0, problem.location, problem.message)


def _error(problems: list[Located], source: str) -> ConfigError:
    count = len(problems)
    noun = "problem" if count == 1 else "problems"
    return ConfigError(
        f"{source}: {count} configuration {noun}", problems=problems, source=source, hint=_HINT
    )


class _Refused(Exception):
    """A construct the config loader does not accept, at a line."""

    def __init__(self, message: str, mark: object) -> None:
        super().__init__(message)
        self.message = message
        line = getattr(mark, "line", None)
        self.line = line + 1 if isinstance(line, int) else None


class _ConfigLoader(yaml.SafeLoader):
    """Safe loading that refuses anchors, aliases, deep nesting and non-core tags while
    composing, so nothing is expanded or built from them."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, yaml.AliasEvent):
            raise _Refused(
                f"YAML alias *{event.anchor} is not allowed{_NO_ANCHORS}", event.start_mark
            )
        if isinstance(event, yaml.NodeEvent) and event.anchor is not None:
            raise _Refused(
                f"YAML anchor &{event.anchor} is not allowed{_NO_ANCHORS}", event.start_mark
            )
        tag = getattr(event, "tag", None)
        if tag is not None and tag != "!" and tag not in _CORE_TAGS:
            shown = tag.replace("tag:yaml.org,2002:", "!!", 1)
            raise _Refused(
                f"YAML tag {shown} is not allowed (a config holds plain values)", event.start_mark
            )
        if self._depth >= MAX_DEPTH:
            raise _Refused(f"nested more than {MAX_DEPTH} levels deep", event.start_mark)
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except (ValueError, OverflowError) as exc:  # `1` x 5000, `2024-13-45`
            reason = str(exc).split(";", 1)[0]
            raise _Refused(f"cannot read the value: {reason}", node.start_mark) from exc


_NO_ANCHORS = ": a memsync config has no use for anchors and aliases; write the value out"


def _parse_yaml(text: str) -> tuple[object, Lines, list[Located]]:
    """The data (None on a syntax error), the line of every location, duplicate keys."""
    loader = _ConfigLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, {}, []
        lines: Lines = {(): node.start_mark.line + 1}
        problems: list[Located] = []
        _walk(node, (), lines, problems, merged=False)
        return loader.construct_document(node), lines, problems
    except _Refused as exc:
        return None, {}, [Located("", exc.message, exc.line)]
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        what = ": ".join(part for part in (exc.context, exc.problem) if part) or "invalid YAML"
        line = mark.line + 1 if mark is not None else None
        return None, {}, [Located("", f"YAML syntax error: {what}", line)]
    except yaml.YAMLError as exc:
        return None, {}, [Located("", f"YAML error: {exc}", None)]
    finally:
        loader.dispose()


def _walk(
    node: yaml.Node,
    path: Loc,
    lines: Lines,
    problems: list[Located],
    *,
    merged: bool,
) -> None:
    """Record the line of every key and list item; report duplicate keys."""
    if isinstance(node, yaml.MappingNode):
        first: dict[str, int] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                continue
            if key_node.tag == "tag:yaml.org,2002:merge":
                merges = (
                    value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
                )
                for merge in merges:
                    _walk(merge, path, lines, problems, merged=True)
                continue
            key, line = key_node.value, key_node.start_mark.line + 1
            child = (*path, key)
            if key in first and not merged:
                problems.append(
                    Located(_dotted(child), f"duplicate key (first at line {first[key]})", line)
                )
            first[key] = line
            if merged:
                lines.setdefault(child, line)
            else:
                lines[child] = line
            _walk(value_node, child, lines, problems, merged=merged)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            child = (*path, index)
            lines[child] = item.start_mark.line + 1
            _walk(item, child, lines, problems, merged=merged)


def _line(lines: Lines, loc: Loc) -> int | None:
    key = loc
    while key not in lines and key:
        key = key[:-1]
    return lines.get(key)


def _dotted(loc: Iterable[str | int]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out


def _from_pydantic(errors: list[ErrorDetails]) -> list[tuple[Loc, str]]:
    found: list[tuple[Loc, str]] = []
    for error in errors:
        raw = tuple(error["loc"])
        loc = tuple(part for part in raw if not (isinstance(part, str) and part in TAGS))
        if loc and loc[-1] == "[key]":
            loc = loc[:-1]
        found.append((loc, _message(error, raw)))
    return found


def _message(error: ErrorDetails, raw: Loc) -> str:
    kind, ctx = error["type"], error.get("ctx") or {}
    if kind == "value_error":
        return str(ctx.get("error", error["msg"]))
    if kind == "missing":
        return "required key is missing" + (" (add `version: 1`)" if raw == ("version",) else "")
    if kind == "literal_error" and raw == ("version",):
        return "unsupported version (this memsync reads `version: 1`)"
    if kind == "extra_forbidden":
        allowed = _allowed_keys(raw[:-1])
        close = difflib.get_close_matches(str(raw[-1]), allowed, n=1, cutoff=0.75)
        guess = f"did you mean {close[0]}? " if close else ""
        return f"unknown key ({guess}allowed: {', '.join(allowed)})"
    simple = {
        "model_type": "expected a mapping",
        "dict_type": "expected a mapping",
        "model_attributes_type": "expected a mapping",
        "tuple_type": "expected a list",
        "list_type": "expected a list",
        "string_type": "expected a string",
        "bool_type": "expected true or false",
        "int_type": "expected a whole number",
        "too_short": "must not be empty",
        "string_too_short": "must not be empty",
    }
    if kind in simple:
        return simple[kind]
    if kind == "greater_than_equal":
        return f"must be at least {ctx.get('ge')}"
    if kind == "literal_error":
        return f"expected {ctx.get('expected')}"
    return error["msg"]


def _allowed_keys(loc: Loc) -> list[str]:
    """The field names of the model found by following `loc` (with tags) from Config."""
    current: Any = Config
    for part in loc:
        current = _unwrap(current)
        if isinstance(part, str) and part in TAGS:
            current = TAGS[part]
        elif isinstance(current, type) and issubclass(current, BaseModel):
            field = current.model_fields.get(str(part))
            if field is None:
                return []
            current = field.annotation
        elif get_origin(current) in {dict, tuple}:
            current = get_args(current)[1 if get_origin(current) is dict else 0]
        else:
            return []
    current = _unwrap(current)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return list(current.model_fields)
    return []


def _unwrap(annotation: Any) -> Any:
    while True:
        origin = get_origin(annotation)
        args = get_args(annotation)
        if origin is Annotated:
            annotation = args[0]
        elif (
            origin in {Union, UnionType}
            and len(options := [a for a in args if a is not type(None)]) == 1
        ):
            annotation = options[0]
        else:
            return annotation
