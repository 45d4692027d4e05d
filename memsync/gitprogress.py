"""git's own progress lines (`Receiving objects:  45% (9000/20000)`): `parse_git_line`
reads them from git's stderr as the process box streams it (fetch and checkout run with
`--progress` only when a terminal shows progress), and only text made of the fixed shapes
below ever reaches the terminal, never raw bytes an upstream sent; `without_progress`
takes them out of what a failed call said. Loaded only when a call streamed its stderr
(issue 18: a cold `sync-now` with no terminal never does).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memsync.lazypattern import lazy

TYPE_CHECKING = False
if TYPE_CHECKING:
    from memsync.progress import Progress

MAX_LINE = 200  # a longer line is not progress (git's are short); it is not parsed

_SIZE = r"\d{1,9}(?:\.\d{1,3})? (?:[KMGT]i)?B"
_GIT_LINE = lazy(
    r"(?P<remote>remote: )?"
    r"(?P<phase>[A-Z][a-z]{1,20}(?: [a-z]{1,20}){0,3}): +"
    r"(?:(?P<percent>\d{1,3})% \((?P<done>\d{1,12})/(?P<total>\d{1,12})\)|(?P<count>\d{1,12}))"
    rf"(?:, (?P<size>{_SIZE})(?: \| (?P<rate>{_SIZE}/s))?)?"
    r"(?P<finished>, done\.)?"
    r"(?:\x1b\[K)? *"
)


@dataclass(frozen=True)
class GitLine:
    """One of git's progress lines: `Receiving objects:  45% (9000/20000), 1.2 MiB | 2.3
    MiB/s`, `Resolving deltas: 100% (5/5), done.`, `remote: Enumerating objects: 20006`."""

    phase: str
    done: int
    total: int | None
    size: str | None = None
    rate: str | None = None
    finished: bool = False
    remote: bool = False

    @property
    def detail(self) -> str:
        return " | ".join(part for part in (self.size, self.rate) if part)


def parse_git_line(line: str) -> GitLine | None:
    """The progress a line of git's stderr reports, or None when it is anything else
    (pure; never raises)."""
    if len(line) > MAX_LINE:
        return None
    found = _GIT_LINE.fullmatch(line)
    if found is None:
        return None
    total = found["total"]
    return GitLine(
        phase=found["phase"],
        done=int(found["done"] if found["done"] is not None else found["count"]),
        total=int(total) if total is not None else None,
        size=found["size"],
        rate=found["rate"],
        finished=found["finished"] is not None,
        remote=found["remote"] is not None,
    )


def without_progress(text: str) -> str:
    """git's stderr with its progress lines taken out (what is left says what went wrong)."""
    pieces = re.split(r"[\r\n]", text)
    return "\n".join(piece for piece in pieces if piece and parse_git_line(piece) is None)


class GitLines:
    """The box's stderr line callback for a git call run with `--progress`."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress

    def __call__(self, raw: bytes) -> None:
        parsed = parse_git_line(raw.decode("utf-8", "replace"))
        if parsed is not None and self.progress.enabled:
            self._show(parsed)

    def _show(self, parsed: GitLine) -> None:
        unit = "files" if parsed.phase.endswith("files") else "objects"
        if parsed.phase.startswith("Resolving"):
            unit = "deltas"
        phase = f"upstream: {parsed.phase}" if parsed.remote else parsed.phase
        # A count without a total ("Enumerating objects: 20006, done.") is whole once done.
        total = parsed.done if parsed.total is None and parsed.finished else parsed.total
        self.progress.show(phase, parsed.done, total, unit=unit, detail=parsed.detail)
