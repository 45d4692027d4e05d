"""`memsync.lazylog`: a process that makes no record never loads `logging`; one that does
writes every record as the configuration it deferred says, whoever loaded `logging`.

Each case runs in a fresh interpreter (pytest itself has `logging` loaded).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

TOKEN = "msk_abcdefSECRET0123456789"

# A command's start as `cli.plain` runs it, then `BODY`; prints what loaded, on stdout.
PROBE = """
import sys
from memsync.cli.app import setup_logging
from memsync import lazylog
setup_logging({debug}, "text")
log = lazylog.logger("memsync.roots.example")
def caller():
{body}
caller()
print(repr(("logging" in sys.modules, "traceback" in sys.modules)))
"""


def _run(body: str, debug: bool = False) -> tuple[tuple[bool, bool], list[str]]:
    """(whether `logging` and `traceback` loaded, stderr's lines) of PROBE with `body`."""
    source = PROBE.format(debug=debug, body="\n".join(f"    {line}" for line in body.split("\n")))
    done = subprocess.run(
        [sys.executable, "-c", source],
        capture_output=True,
        text=True,
        cwd=Path(__file__).parents[2],
        timeout=60,
        check=True,
    )
    return eval(done.stdout), done.stderr.splitlines()  # noqa: S307 - our own repr


def test_records_below_the_configured_level_load_nothing() -> None:
    loaded, err = _run('log.debug("quiet %s", 1)\nlog.info("quiet")')
    assert loaded == (False, False) and err == []


def test_a_warning_loads_logging_and_is_written_as_configured_and_redacted() -> None:
    loaded, err = _run(f'log.warning("push to https://x:{TOKEN}@host/r failed: %s", "{TOKEN}")')
    assert loaded[0]
    assert len(err) == 1 and err[0].startswith("memsync: WARNING push to https://"), err
    assert TOKEN not in err[0]


def test_debug_records_are_written_when_the_command_asked_for_them() -> None:
    _loaded, err = _run('log.debug("shown %s", 1)', debug=True)
    assert err == ["memsync: DEBUG shown 1"]


def test_a_record_names_its_caller_not_the_stand_in() -> None:
    body = (
        "import logging\n"
        "seen = []\n"
        "handler = logging.getLogger('memsync').handlers[0]\n"
        "handler.addFilter(lambda r: seen.append((r.funcName, r.filename)))\n"
        'log.warning("where")\n'
        "print(seen, file=sys.stderr)"
    )
    _loaded, err = _run(body)
    assert err[-1] == "[('caller', '<string>')]", err


def test_logging_loaded_by_anyone_is_configured_before_its_importer_goes_on() -> None:
    """A library (or a module of memsync not using the stand-in) that imports `logging`
    and logs at once: its record goes through memsync's redacting handler too."""
    body = (
        "import logging\n"
        f'logging.getLogger("some.library").warning("token {TOKEN}")\n'
        'logging.getLogger("memsync.cycles.x").error("also %s", 1)\n'
        "kinds = [type(h).__name__ for h in logging.getLogger().handlers]\n"
        "print(__import__('json').dumps(kinds), file=sys.stderr)"
    )
    loaded, err = _run(body)
    assert loaded[0]
    assert err[0].startswith("memsync: WARNING token ") and TOKEN not in err[0], err
    assert err[1] == "memsync: ERROR also 1"
    assert json.loads(err[2]) == ["StreamHandler"]
    import logging  # noqa: PLC0415 - pytest's: the loader the module now names is the real one

    assert type(logging.__spec__.loader).__name__ == "SourceFileLoader"


def test_the_configuration_runs_when_its_own_module_is_what_loads_logging() -> None:
    """`logsetup` (whose code the deferred configuration runs) imported first, as the click
    group does: the configuration waits until it has loaded, then runs (no circular import)."""
    body = (
        "import memsync.logsetup\n"
        "import logging\n"
        'log.warning("after %s", "logsetup")\n'
        "kinds = [type(h).__name__ for h in logging.getLogger('memsync').handlers]\n"
        "print(kinds, file=sys.stderr)"
    )
    loaded, err = _run(body)
    assert loaded[0]
    assert err == ["memsync: WARNING after logsetup", "['StreamHandler']"], err


def test_a_look_for_logging_before_it_loads_leaves_the_configuration_deferred() -> None:
    """A plugin loader or a feature check asks where `logging` is (`find_spec`) and loads it
    later: the import that follows is still configured, and the record still redacted."""
    body = (
        "import importlib.util\n"
        "assert importlib.util.find_spec('logging') is not None\n"
        "import logging\n"
        f'logging.getLogger("some.library").warning("token {TOKEN}")'
    )
    loaded, err = _run(body)
    assert loaded[0]
    assert len(err) == 1 and err[0].startswith("memsync: WARNING token ") and TOKEN not in err[0]


def test_the_configs_log_format_holds_whoever_loads_logging() -> None:
    """The config's `log.format: json` (deferred after the command's own configuration, as
    `App.settings` does) holds when a library, not `logsetup`, loads `logging` first."""
    body = (
        "import functools\n"
        "from memsync.cli import app\n"
        "app.when_loaded(functools.partial(app._use_format, 'json'))\n"
        "import logging\n"
        'log.warning("in %s", "json")'
    )
    _loaded, err = _run(body)
    assert len(err) == 1 and json.loads(err[0])["message"] == "in json", err
