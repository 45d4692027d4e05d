"""Configuration: one schema, loaded from YAML with every problem located, secrets by reference.

`load_config` validates a file into the pydantic `Config`; `settings_from` turns that into
the frozen `Settings` (`config.model`) the core uses; `resolve` reads a `SecretRef` when it
is needed.

The names below load on first use: `memsync --version` and `memsync status` import
`config.paths` and `config.statedir` without the schema, YAML and pydantic.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # `typing` is not loaded by a cold status (issue 18)
if TYPE_CHECKING:
    from typing import Any

    from memsync.config.load import (
        find_config_path,
        format_problem,
        load_config,
        load_config_text,
    )
    from memsync.config.model import settings_from
    from memsync.config.sample import SAMPLE
    from memsync.config.schema import Config
    from memsync.secrets import SecretRef, resolve

_HOME = {
    "SAMPLE": "memsync.config.sample",
    "Config": "memsync.config.schema",
    "SecretRef": "memsync.secrets",
    "find_config_path": "memsync.config.load",
    "format_problem": "memsync.config.load",
    "load_config": "memsync.config.load",
    "load_config_text": "memsync.config.load",
    "resolve": "memsync.secrets",
    "settings_from": "memsync.config.model",
}

__all__ = [
    "SAMPLE",
    "Config",
    "SecretRef",
    "find_config_path",
    "format_problem",
    "load_config",
    "load_config_text",
    "resolve",
    "settings_from",
]


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
