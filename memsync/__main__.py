"""The `memsync` console script and `python -m memsync`: the command line.

`memsync --version` is answered here, before click and the commands load (the systemd timer
and people's shells start the CLI often); everything else is `memsync.cli.main`.
"""

from __future__ import annotations

import sys
from typing import NoReturn

from memsync import __version__


def main() -> NoReturn:
    if sys.argv[1:] == ["--version"]:  # what click's version option prints
        sys.stdout.write(f"memsync, version {__version__}\n")
        sys.exit(0)
    from memsync.cli import main as cli_main  # noqa: PLC0415 - click and the commands

    cli_main()


if __name__ == "__main__":
    main()
