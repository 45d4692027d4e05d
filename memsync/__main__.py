"""The `memsync` console script and `python -m memsync`: the command line.

`memsync --version` is answered here, before click and the commands load (the systemd timer
and people's shells start the CLI often), and so is `--help` when click printed that very
help before under the same conditions (`cli.helpmemo`), and `memsync status`, `sync-now`,
`cycle` and `run` in their plain forms (`cli.plain`, without click); everything else is
`memsync.cli.group.main`.
"""

from __future__ import annotations

import sys

from memsync import __version__

TYPE_CHECKING = False  # `typing` costs more to import than the rest of this path
if TYPE_CHECKING:
    from typing import NoReturn


def main() -> NoReturn:
    args = sys.argv[1:]
    if args == ["--version"]:  # what click's version option prints
        sys.stdout.write(f"memsync, version {__version__}\n")
        sys.exit(0)
    if args and args[-1] in ("--help", "-h"):
        from memsync.cli import helpmemo  # noqa: PLC0415 - standard library only

        out = helpmemo.recall(args) if helpmemo.wanted(args) else None
        if out is not None:
            sys.exit(helpmemo.write(out))
    if any(command in args for command in ("status", "sync-now", "run", "cycle")):
        import gc  # noqa: PLC0415 - built in

        # Loading a command makes tens of thousands of objects (modules, functions, classes)
        # and no garbage cycles worth collecting: the collector, run every few hundred of
        # them, would walk them all again and again. It is off until the command's code is
        # loaded (`status` ends first; `cli.syncrun` turns it back on once a cycle has loaded
        # the gate, beside its first git processes; `cli.daemonrun` once the daemon loaded).
        gc.disable()
        from memsync.cli import plain  # noqa: PLC0415 - no click

        found = plain.parse(args)
        if found is not None:
            plain.run(found)
        gc.enable()  # click reads this command line, as always
    from memsync.cli.group import main as cli_main  # noqa: PLC0415 - click and the commands

    cli_main()


if __name__ == "__main__":
    main()
