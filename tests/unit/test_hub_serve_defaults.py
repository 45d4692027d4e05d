"""`hub serve --data DIR` reads no configuration: its settings are the `hub:` section's
defaults, taken from the hub's own constants rather than the schema (issue 18), and they
are the schema's, field for field."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from memsync.cli.hub import Unconfigured
from memsync.config.model import default_hub


def test_the_hubs_defaults_are_the_schemas(tmp_path: Path) -> None:
    for data_dir in (tmp_path / "hub", Path("relative/hub"), Path("~/hub")):
        schema = default_hub(data_dir)
        plain = Unconfigured(data_dir)
        for field in dataclasses.fields(schema):
            value = getattr(plain, field.name)
            assert (value, type(value)) == (
                getattr(schema, field.name),
                type(getattr(schema, field.name)),
            ), field.name
        assert set(vars(plain)) == {field.name for field in dataclasses.fields(schema)}
