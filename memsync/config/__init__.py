"""Configuration: one schema, loaded from YAML with every problem located, secrets by reference.

`load_config` validates a file into the pydantic `Config`; `settings_from` turns that into
the frozen `Settings` (`config.model`) the core uses; `resolve` reads a `SecretRef` when it
is needed.
"""

from memsync.config.load import find_config_path, format_problem, load_config, load_config_text
from memsync.config.model import settings_from
from memsync.config.sample import SAMPLE
from memsync.config.schema import Config
from memsync.config.secrets import SecretRef, resolve

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
