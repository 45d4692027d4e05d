"""The plain forms of the commands a timer, a hook or a shell runs most (`status`,
`sync-now`, `cycle`) and of the daemon systemd starts (`run`), read and run without click:
`__main__` runs them here, so that those processes never import click and the command
group.

Only the plainest forms are taken: `--config PATH` or `--config=PATH` (once, and a PATH
that does not look like an option), then the command, then its own flags (each at most
once) and, for `sync-now`, root names (anything not starting with `-`), in any order; for
`cycle`, its two arguments: the kind (`prune` or `insight`), then the root.
Anything else (another global option, `--debug`, `--`, `-h`, a repeated flag) goes to
click, which parses it as always; a test holds every short argument list this takes to
what click reads from it. What runs is the same function the click command runs, errors
are worded by the same code (`cli.group.fail_unparsed`, which loads click only then), and lines
are printed as `click.echo` prints them (`cli.app.echo`).
"""

from __future__ import annotations

import contextlib
import os
import sys

from memsync.cli.app import App, setup_logging
from memsync.values import value

TYPE_CHECKING = False  # `typing` costs more to import than this module
if TYPE_CHECKING:
    from typing import NoReturn

# Each command taken here: its flags (click's option names), whether it takes root names.
COMMANDS: dict[str, tuple[frozenset[str], bool]] = {
    "status": (frozenset({"--json"}), False),
    "sync-now": (frozenset({"--json", "--accept-rewrite", "--no-push", "--dry-run"}), True),
    "run": (frozenset(), False),
    "cycle": (frozenset({"--force", "--json"}), True),  # and KIND ROOT (`KINDS`)
}
KINDS = ("prune", "insight")  # `cycle`'s first argument, as click's choice takes it


@value
class Plain:
    """A plain command line: the command, `--config`'s value, its flags, its names."""

    command: str
    config: str | None
    flags: frozenset[str]
    names: tuple[str, ...]


def parse(args: list[str]) -> Plain | None:
    """The plain form `args` spell; None for anything else (click decides)."""
    config: str | None = None
    rest = args
    if rest and rest[0].startswith("--config="):
        config, rest = rest[0].removeprefix("--config="), rest[1:]
        if not config or config.startswith("-"):
            return None
    elif rest and rest[0] == "--config":
        if len(rest) < 2 or not rest[1] or rest[1].startswith("-"):
            return None
        config, rest = rest[1], rest[2:]
    if not rest or rest[0] not in COMMANDS:
        return None
    command, rest = rest[0], rest[1:]
    allowed, takes_names = COMMANDS[command]
    flags = [a for a in rest if a.startswith("-")]
    names = tuple(a for a in rest if not a.startswith("-"))
    if any(f not in allowed for f in flags) or len(set(flags)) != len(flags):
        return None
    if names and not takes_names:
        return None
    if command == "cycle" and (len(names) != 2 or names[0] not in KINDS):
        return None
    return Plain(command, config, frozenset(flags), names)


def run(plain: Plain) -> NoReturn:
    """What `memsync ARGS` does through click for these plain ARGS, without click."""
    setup_logging(False, "text")  # the group's callback, as click runs it
    # The command's name as click's context gives it (`cycle insight`: it writes state).
    name = " ".join((plain.command, *plain.names[:1])) if plain.command == "cycle" else None
    app = App(config_path=plain.config, command=name or plain.command)
    as_json = "--json" in plain.flags
    try:
        code = _dispatch(app, plain, as_json)
    except (KeyboardInterrupt, Exception) as exc:
        from memsync.cli.group import fail_unparsed  # noqa: PLC0415 - click words errors, as always

        code = fail_unparsed(exc, app, as_json=as_json)
    sys.stdout.flush()
    if plain.command in ("run", "cycle"):  # these end as under click: the exit tears down
        import gc  # noqa: PLC0415 - built in

        gc.freeze()  # the exit's collections would walk all the command loaded (~50 ms)
        sys.exit(code)
    with contextlib.suppress(OSError, ValueError):  # as the interpreter's own exit would
        sys.stderr.flush()
    # The command is done: the process ends here. Tearing down what it loaded (every module,
    # a last full collection) would cost a cold `status` a fifth of its time, and nothing
    # memsync holds needs it: no atexit hook or finalizer of ours, files closed and children
    # reaped by now, and the only threads are daemons, which an exit never waits for.
    os._exit(code)


def _dispatch(app: App, plain: Plain, as_json: bool) -> int:
    if plain.command == "status":
        from memsync.cli.statusrun import report  # noqa: PLC0415

        return report(app, as_json)
    if plain.command == "run":
        from memsync.cli.daemonrun import serve  # noqa: PLC0415

        return serve(app)
    if plain.command == "cycle":
        from memsync.cli.cyclerun import turn  # noqa: PLC0415

        kind, root = plain.names
        return turn(app, kind, root, "--force" in plain.flags, as_json)
    from memsync.cli.syncrun import sync_now  # noqa: PLC0415

    flags = plain.flags
    return sync_now(
        app,
        plain.names,
        as_json,
        accept_rewrite="--accept-rewrite" in flags,
        no_push="--no-push" in flags,
        dry_run="--dry-run" in flags,
    )
