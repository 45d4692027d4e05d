"""Configuration: one schema, loaded from YAML with every problem located, secrets by reference.

`load_config` validates a file into the pydantic `Config`; `settings_from` turns that into
the frozen `Settings` the core uses; `resolve` reads a `SecretRef` when it is needed.
"""

from memsync.config.load import find_config_path, format_problem, load_config, load_config_text
from memsync.config.model import RootSettings, Settings, settings_from
from memsync.config.sample import SAMPLE
from memsync.config.schema import Config
from memsync.config.secrets import SecretRef, resolve
from memsync.config.units import format_duration, format_size, parse_duration, parse_size

__all__ = [
    "SAMPLE",
    "Config",
    "RootSettings",
    "SecretRef",
    "Settings",
    "find_config_path",
    "format_duration",
    "format_problem",
    "format_size",
    "load_config",
    "load_config_text",
    "parse_duration",
    "parse_size",
    "resolve",
    "settings_from",
]
