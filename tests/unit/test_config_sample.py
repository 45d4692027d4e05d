"""The sample configuration and the README's key table are the schema written down
(issue 20, item 7): every key of every model, at its place, with its default; the README's
table is the generated one; a field the schema adds without a description fails here."""

from __future__ import annotations

import re
import typing
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

import pytest
import yaml
from pydantic import BaseModel, Field, TypeAdapter, ValidationError, create_model
from pydantic.fields import FieldInfo

from memsync.config import sample
from memsync.config.load import load_config_text
from memsync.config.model import Settings, default_root, root_settings, settings_from
from memsync.config.schema import TAGS, Config, Repair, Root
from memsync.config.settingsmemo import decode, encode
from memsync.errors import ConfigError

README = Path(__file__).resolve().parents[2] / "README.md"


def _all_models(model: type[BaseModel], seen: dict[type[BaseModel], None]) -> None:
    if model in seen:
        return
    seen[model] = None
    for field in model.model_fields.values():
        for member in sample._shape(field)[1]:
            _all_models(member, seen)


def models() -> list[type[BaseModel]]:
    seen: dict[type[BaseModel], None] = {}
    _all_models(Config, seen)
    return list(seen)


def test_the_walk_reaches_every_model_of_the_schema() -> None:
    found = set(models())
    assert set(TAGS.values()) <= found
    # every BaseModel the schema module defines is reachable from Config
    from memsync.config import schema  # noqa: PLC0415

    defined = {
        value
        for value in vars(schema).values()
        if isinstance(value, type)
        and issubclass(value, BaseModel)
        and value.__module__ == schema.__name__
        and not value.__name__.startswith("_")
    }
    assert defined == found


# --- the sample validates -------------------------------------------------------------


def test_the_sample_validates(tmp_path: Path) -> None:
    config = load_config_text(sample.SAMPLE, tmp_path / "config.yaml")
    assert set(config.roots) == {"personal"}
    assert {type(view.source).__name__ for view in config.views.values()} == {
        "HttpSource",
        "GitSource",
    }
    assert {type(role).__name__ for role in config.roles.values()} == {
        "CommandRole",
        "OpenAIRole",
    }
    assert config.hub is not None and config.http is not None and config.hooks


def test_the_sample_is_commented_and_readable() -> None:
    lines = sample.SAMPLE.splitlines()
    assert lines[0].startswith("# memsync configuration")
    long = [line for line in lines if len(line) > sample.WIDTH and "#" in line]
    assert not long
    assert sum("#" in line for line in lines) > len(lines) // 2


# --- every key, at its place, with its default ---------------------------------------


def _comment_at(lines: list[str], line: int) -> str:
    """The inline comment on `line` and the comment block right above it, as one text."""
    parts: list[str] = []
    above = line - 1
    while above >= 0 and lines[above].lstrip().startswith("#"):
        parts.insert(0, lines[above].lstrip()[1:].strip())
        above -= 1
    if "  # " in lines[line]:
        parts.append(lines[line].split("  # ", 1)[1])
    return " ".join(parts)


def _dump(field: FieldInfo, value: object) -> object:
    annotation: Any = field.annotation
    if field.metadata:
        annotation = typing.Annotated[annotation, *field.metadata]
    return TypeAdapter(annotation).dump_python(value, mode="json")


Place = tuple[type[BaseModel], str, yaml.Node, yaml.Node]


def _places(model: type[BaseModel], node: yaml.Node) -> Iterator[Place]:
    """Each (model, field, key node, value node) of the composed sample, walking the
    schema and the YAML together; a model's field missing at its place fails here."""
    assert isinstance(node, yaml.MappingNode), (model.__name__, node.start_mark)
    keys = {"on" if k.value == "on" else k.value: (k, v) for k, v in node.value}
    assert set(keys) == set(model.model_fields), (model.__name__, node.start_mark)
    for name, field in model.model_fields.items():
        key, value = keys[name]
        yield model, name, key, value
        shape, members = sample._shape(field)
        data = yaml.safe_load(yaml.serialize(value))
        if shape == "model" and data is not None:
            yield from _places(sample._pick(members, data), value)
        elif shape == "list":
            assert isinstance(value, yaml.SequenceNode) and value.value
            for item, item_data in zip(value.value, data, strict=True):
                yield from _places(sample._pick(members, item_data), item)
        elif shape == "dict":
            assert isinstance(value, yaml.MappingNode) and value.value
            for (_, entry), entry_data in zip(value.value, data.values(), strict=True):
                yield from _places(sample._pick(members, entry_data), entry)


def test_every_schema_key_appears_at_its_place_with_its_default() -> None:
    lines = sample.SAMPLE.splitlines()
    root = yaml.compose(sample.SAMPLE)
    assert root is not None
    said: dict[tuple[type[BaseModel], str], bool] = {}
    for model, name, key, value in _places(Config, root):
        field = model.model_fields[name]
        comment = _comment_at(lines, key.start_mark.line)
        shown = sample.default_text(field)
        if shown is None:  # required: the comment says so
            ok = "(required)" in comment
        elif shown == "":  # a section: its keys say their defaults
            ok = True
        elif isinstance(sample._extra(field).get("shown"), str) or shown == "none":
            ok = f"default {shown}" in comment
        else:
            default = _dump(field, field.get_default(call_default_factory=True))
            ok = yaml.safe_load(yaml.serialize(value)) == default or (
                f"default {sample.flow(default)}" in comment
            )
        said[model, name] = said.get((model, name), False) or ok
    missing = {f"{m.__name__}.{n}" for m in models() for n in m.model_fields} - {
        f"{m.__name__}.{n}" for m, n in said
    }
    assert not missing
    unsaid = sorted(f"{m.__name__}.{n}" for (m, n), ok in said.items() if not ok)
    assert not unsaid


def test_every_field_says_what_it_does() -> None:
    bare = [
        f"{model.__name__}.{name}"
        for model in models()
        for name, field in model.model_fields.items()
        if not (field.description and field.description.strip())
    ]
    assert not bare


def test_a_field_without_a_description_cannot_be_written() -> None:
    bare = create_model("Bare", said=(int, Field(1, description="it")), unsaid=(int, 2))
    with pytest.raises(sample.SchemaGap, match=r"Bare\.unsaid has no description"):
        list(sample.every_key(bare))
    with pytest.raises(sample.SchemaGap):
        sample._Writer().model(bare, {}, 0)
    # a required key needs a value to show
    shown = create_model("Shown", needed=(int, Field(description="it", examples=[3])))
    sample._Writer().model(shown, {}, 0)
    unshown = create_model("Unshown", needed=(int, Field(description="it")))
    with pytest.raises(sample.SchemaGap, match="needed is required and has no example"):
        sample._Writer().model(unshown, {}, 0)


# --- the README's table ----------------------------------------------------------------


def test_the_readme_table_is_the_generated_one() -> None:
    text = README.read_text(encoding="utf-8")
    assert text.count(sample.BEGIN) == 1 and text.count(sample.END) == 1
    assert sample.with_table(text) == text, (
        "README.md's configuration key table differs from the schema: run "
        "`python -m memsync.config.sample --readme`"
    )


def test_the_table_lists_every_key_once() -> None:
    paths = [key.path for key in sample.every_key()]
    assert len(paths) == len(set(paths))
    table = sample.readme_table()
    for path in (
        "roots.<name>.sync.interval",
        "hooks[].on",
        "views.<name>.source.(kind: git).path",
    ):
        assert f"| `{path}` |" in table
    assert re.search(r"\| `roots\.<name>\.repair\.attempts` \| `3` \|", table)


def test_the_readme_generator_rewrites_only_its_block(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\nbefore\n{sample.BEGIN}\nold | table\n{sample.END}\nafter\n")
    assert sample.main(["--readme", str(readme)]) == 0
    text = readme.read_text()
    assert text.startswith("# x\n\nbefore\n") and text.endswith("\nafter\n")
    assert sample.readme_table() in text and "old | table" not in text
    readme.write_text("no markers\n")
    with pytest.raises(ValueError, match="config-keys"):
        sample.main(["--readme", str(readme)])


# --- the runtime settings take the schema's defaults ----------------------------------


def test_repair_limits_are_settings_of_the_schema(tmp_path: Path) -> None:
    text = """\
version: 1
roots:
  a: {path: /a, repair: {role: fixer, attempts: 5, backoff: 90s}}
  b: {path: /b}
roles:
  fixer: {executor: command, command: [fix]}
"""
    config = load_config_text(text, tmp_path / "config.yaml")
    a = root_settings("a", config.roots["a"])
    b = root_settings("b", config.roots["b"])
    assert (a.repair_attempts, a.repair_backoff.total_seconds()) == (5, 90)
    assert b.repair_attempts == Repair.model_fields["attempts"].default
    assert b.repair_backoff == Repair.model_fields["backoff"].default
    bad = "version: 1\nroots:\n  a: {path: /a, repair: {role: fixer, attempts: 0}}\n"
    with pytest.raises(ConfigError):
        load_config_text(bad + "roles:\n  fixer: {executor: command, command: [fix]}\n", None)


def test_a_root_without_a_file_has_the_schemas_defaults() -> None:
    root = default_root("r", Path("/r"))
    assert root == root_settings("r", Root(path=Path("/r")))
    assert default_root("r", Path("/r"), push=False).push is False
    assert decode(encode(root)) == root  # the memo's allowlist still holds it


def test_settings_defaults_are_the_schemas() -> None:
    """The settings dataclasses carry no defaults of their own (`default_root` and
    `default_hub` build from the schema): only the type tags and empty collections a
    conversion fills in, and `log_format`, which is the schema's. A new default fails."""
    import dataclasses  # noqa: PLC0415

    from memsync.config import model, schema, sections  # noqa: PLC0415

    mirrors: dict[tuple[type, str], tuple[type[BaseModel], str]] = {
        (model.Settings, "log_format"): (schema.Log, "format"),
    }
    # not settings: what a conversion fills in, never a user's choice
    derived = {
        (sections.HttpSourceSettings, "kind"),
        (sections.GitSourceSettings, "kind"),
        (sections.CommandRoleSettings, "executor"),
        (sections.OpenAIRoleSettings, "executor"),
        (model.Settings, "http_listen"),
        (model.Settings, "views"),
        (model.Settings, "hub"),
        (model.Settings, "roles"),
        (model.Settings, "hooks"),
    }
    found: set[tuple[type, str]] = set()
    classes = [(cls, module) for module in (model, sections) for cls in vars(module).values()]
    for cls, module in classes:
        if not (dataclasses.is_dataclass(cls) and isinstance(cls, type)):
            continue
        if cls.__module__ != module.__name__:
            continue
        for field in dataclasses.fields(cls):
            if (
                field.default is dataclasses.MISSING
                and field.default_factory is dataclasses.MISSING
            ):
                continue
            found.add((cls, field.name))
            if (cls, field.name) in derived:
                continue
            assert (cls, field.name) in mirrors, f"{cls.__name__}.{field.name}: not the schema's"
            schema_model, schema_name = mirrors[cls, field.name]
            want = schema_model.model_fields[schema_name].get_default(call_default_factory=True)
            have = field.default
            if hasattr(want, "total_seconds") and isinstance(have, float):
                want = want.total_seconds()
            assert have == want, f"{cls.__name__}.{field.name}: {have!r} != {want!r}"
    assert found == set(mirrors) | derived


def _examples(model: type[BaseModel]) -> dict[str, Any]:
    """A mapping of `model` with every field's sample value (its example, where it has one)."""
    return {name: f.examples[0] for name, f in model.model_fields.items() if f.examples}


def _others(field: FieldInfo, value: Any) -> Iterator[Any]:
    """Values of `field` other than `value` (YAML data; None: the key left out), the
    likeliest to be valid first."""
    if field.examples and field.examples[0] != value:
        yield field.examples[0]
    default = field.get_default(call_default_factory=True)
    if not field.is_required():
        dumped = None if default is None else _dump(field, default)
        if dumped != value:
            yield dumped
        if isinstance(default, timedelta):
            yield _dump(field, default + timedelta(seconds=1))
        if isinstance(default, int) and not isinstance(default, bool):
            yield _dump(field, default + 1)
    shape, members = sample._shape(field)
    if shape == "list":
        yield [] if value else [_examples(members[0])]
    for literal in typing.get_args(field.annotation) if _is_literal(field) else ():
        if literal != value:
            yield literal
    if isinstance(value, bool):
        yield not value
    elif isinstance(value, int):
        yield value + 1
    elif isinstance(value, str):
        yield f"{value}x"  # `https://hub.examplex`, `/var/lib/memsync-hubx`
        if value[-1:].isdigit():  # `127.0.0.1:8766`
            yield value[:-1] + str((int(value[-1]) + 1) % 10)
    elif isinstance(value, list) and len(value) > 1:
        yield value[:1]
    elif isinstance(value, dict):
        yield {key: f"{inner}X" for key, inner in value.items()}  # a secret's other name
    elif value is None:
        yield from (100, "/elsewhere/memsync.sock")


def _is_literal(field: FieldInfo) -> bool:
    return typing.get_origin(field.annotation) is Literal


Where = tuple[str | int, ...]


def _data_leaves(
    model: type[BaseModel], data: dict[str, Any], at: Where = ()
) -> Iterator[tuple[Where, FieldInfo]]:
    """Each key of `data` (a mapping of `model`) that holds no model, with its field."""
    for name, field in model.model_fields.items():
        shape, members = sample._shape(field)
        value = data.get(name)
        if shape == "model" and isinstance(value, dict):
            yield from _data_leaves(sample._pick(members, value), value, (*at, name))
        elif shape == "list" and value:
            for index, item in enumerate(value):
                yield from _data_leaves(sample._pick(members, item), item, (*at, name, index))
        elif shape == "dict" and value:
            for key, entry in value.items():
                yield from _data_leaves(sample._pick(members, entry), entry, (*at, name, key))
        else:
            yield (*at, name), field


def _set(data: Any, where: Where, value: Any) -> Any:
    """A copy of `data` with the key at `where` set (None: left out)."""
    head, rest = where[0], where[1:]
    if isinstance(data, list):
        assert isinstance(head, int)
        return [_set(item, rest, value) if i == head else item for i, item in enumerate(data)]
    if not rest:
        return {k: v for k, v in data.items() if k != head} | (
            {} if value is None else {head: value}
        )
    return {**data, head: _set(data[head], rest, value)}


def _get(data: Any, where: Where) -> Any:
    for part in where:
        data = data.get(part) if isinstance(data, dict) else data[part]
    return data


def _settings(data: dict[str, Any]) -> Settings | None:
    try:
        config = Config.model_validate(data, context={"base_dir": Path("/")})
        return settings_from(config, None)
    except (ValidationError, KeyError):  # KeyError: a view of a root renamed away
        return None


def test_every_key_of_the_sample_reaches_the_runtime_settings() -> None:
    """A key of the schema that `settings_from` does not carry over into `Settings` fails
    here: each key of the sample is given other values (the first one the schema accepts
    must change the settings)."""
    data = yaml.safe_load(sample.sample())
    # YAML 1.1 reads a hook's bare `on` as true (the schema reads it back; here it is a key)
    data["hooks"] = [{"on" if k is True else k: v for k, v in h.items()} for h in data["hooks"]]
    leaves = list(_data_leaves(Config, data))
    data["roots"]["personalx"] = {"path": "/elsewhere"}  # what a view's `root` may name
    settings = _settings(data)
    assert settings is not None
    unused, tried = [], 0
    for where, field in leaves:
        if _is_literal(field) and len(typing.get_args(field.annotation)) == 1:
            continue  # `kind`, `executor`: which model a mapping is, not a setting
        value = _get(data, where)
        changed = (_settings(_set(data, where, other)) for other in _others(field, value))
        tried += 1
        if not any(other is not None and other != settings for other in changed):
            unused.append(".".join(map(str, where)))
    assert tried > 80
    assert not unused
