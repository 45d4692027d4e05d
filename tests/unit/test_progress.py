"""git's progress lines (`parse_git_line`): the real formats parse, junk never raises and
never passes, nothing but the fixed shapes reaches a terminal; the process box's stderr
line splitter under any chunking and its cap; the progress chosen for a command."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsync.gitprogress import MAX_LINE, GitLine, GitLines, parse_git_line, without_progress
from memsync.progress import NO_PROGRESS, size_text, wanted
from memsync.transports.process import MAX_STREAMED_LINE, _Lines, run_process
from tests.conftest import Team
from tests.helpers import commit, git, push

# Lines git 2.39 printed while the 20k-file upstream was joined over HTTP (trailing
# spaces are git's own, written to erase a longer line before them).
REAL = {
    "remote: Enumerating objects: 20006, done.        ": GitLine(
        "Enumerating objects", 20006, None, finished=True, remote=True
    ),
    "remote: Counting objects:   4% (13/302)        ": GitLine(
        "Counting objects", 13, 302, remote=True
    ),
    "Receiving objects:  45% (9000/20000), 1.20 MiB | 2.30 MiB/s": GitLine(
        "Receiving objects", 9000, 20000, "1.20 MiB", "2.30 MiB/s"
    ),
    "Receiving objects: 100% (20006/20006), 1.84 MiB | 3.49 MiB/s, done.": GitLine(
        "Receiving objects", 20006, 20006, "1.84 MiB", "3.49 MiB/s", finished=True
    ),
    "Receiving objects:  12% (2401/20006), 244.00 KiB | 480.00 KiB/s": GitLine(
        "Receiving objects", 2401, 20006, "244.00 KiB", "480.00 KiB/s"
    ),
    "Resolving deltas: 100% (17188/17188), done.": GitLine(
        "Resolving deltas", 17188, 17188, finished=True
    ),
    "Updating files:  16% (3374/20003)": GitLine("Updating files", 3374, 20003),
    "Checking connectivity: 20006, done.": GitLine(
        "Checking connectivity", 20006, None, finished=True
    ),
    "remote: Compressing objects: 100% (2/2), done.\x1b[K": GitLine(
        "Compressing objects", 2, 2, finished=True, remote=True
    ),
}

NOT_PROGRESS = [
    "",
    "fatal: repository 'http://127.0.0.1/x.git/' not found",
    "remote: Total 302 (delta 0), reused 302 (delta 0), pack-reused 0",
    "error: RPC failed; HTTP 401 curl 22",
    "Receiving objects: lots",
    "remote: \x1b]0;owned\x07Counting objects: 1% (1/2)",
    "Receiving objects:  45% (9000/20000)\x1b[31m",
    "Receiving objects:  45% (9000/20000), 1.2 MiB | 2.3 MiB/s\nfatal: x",
]


@pytest.mark.parametrize("line", sorted(REAL))
def test_the_real_formats_parse(line: str) -> None:
    assert parse_git_line(line) == REAL[line]


@pytest.mark.parametrize("line", NOT_PROGRESS)
def test_other_lines_are_not_progress(line: str) -> None:
    assert parse_git_line(line) is None


@given(st.text(max_size=300))
def test_junk_never_raises_and_what_passes_is_plain(line: str) -> None:
    parsed = parse_git_line(line)
    if parsed is None:
        return
    shown = " ".join(str(part) for part in (parsed.phase, parsed.size or "", parsed.rate or ""))
    assert re.fullmatch(r"[A-Za-z0-9 .|/]*", shown), shown  # no control bytes reach a terminal
    assert len(line) <= MAX_LINE


@given(st.binary(max_size=300))
def test_junk_bytes_never_raise_through_the_callback(raw: bytes) -> None:
    seen: list[tuple[str, int]] = []

    class Record:
        enabled = True

        def show(self, phase: str, done: int, total: int | None = None, **_: str) -> None:
            seen.append((phase, done))

    GitLines(Record())(raw)
    assert all(phase.isprintable() for phase, _ in seen)


_PHASES = st.sampled_from(
    ["Receiving objects", "Resolving deltas", "Updating files", "Counting objects"]
)


@given(
    phase=_PHASES,
    total=st.integers(1, 10**9),
    data=st.data(),
    remote=st.booleans(),
    finished=st.booleans(),
    throughput=st.booleans(),
)
def test_every_line_git_can_print_parses(
    phase: str, total: int, data: st.DataObject, remote: bool, finished: bool, throughput: bool
) -> None:
    # git's progress.c: "%s: %3u%% (%"PRIuMAX"/%"PRIuMAX")%s" then ", %s | %s/s", ", done."
    done = data.draw(st.integers(0, total))
    size = data.draw(st.integers(0, 2**40)) if throughput else None
    line = f"{phase}: {done * 100 // total:3d}% ({done}/{total})"
    if size is not None:
        line += f", {size_text(size)} | {size_text(size / 3)}/s"
    if finished:
        line += ", done."
    if remote:
        line = "remote: " + line + " " * 8
    parsed = parse_git_line(line)
    assert parsed is not None
    assert (parsed.phase, parsed.done, parsed.total) == (phase, done, total)
    assert (parsed.finished, parsed.remote) == (finished, remote)
    assert parsed.size == (size_text(size) if size is not None else None)


def test_without_progress_keeps_what_failed() -> None:
    text = (
        "remote: Counting objects:  50% (1/2)        \rremote: Counting objects: 100% (2/2)"
        "\nReceiving objects:  45% (9000/20000), 1.20 MiB | 2.30 MiB/s\r"
        "error: RPC failed; curl 18 transfer closed\nfatal: early EOF"
    )
    assert without_progress(text) == "error: RPC failed; curl 18 transfer closed\nfatal: early EOF"


# -- the process box's line callback -----------------------------------------------------------


def _streamed(chunks: list[bytes]) -> list[bytes]:
    """The lines the box hands a callback for a child that writes `chunks` to stderr."""
    lines: list[bytes] = []
    script = "import sys\nfor c in sys.argv[1:]:\n    sys.stderr.buffer.write(bytes.fromhex(c))\n"
    script += "    sys.stderr.buffer.flush()\n"
    done = run_process(
        [sys.executable, "-c", script, *(c.hex() for c in chunks)],
        cwd=Path.cwd(),
        env={},
        seconds=30,
        on_stderr_line=lines.append,
    )
    assert done.returncode == 0
    assert done.stderr == b"".join(chunks)  # the whole stderr is still returned
    return lines


def test_the_box_streams_stderr_lines_split_on_cr_and_lf() -> None:
    chunks = [b"Counting: 1% (1/9)\rCoun", b"ting: 100% (9/9), done.\n", b"fatal: x"]
    assert _streamed(chunks) == [
        b"Counting: 1% (1/9)",
        b"Counting: 100% (9/9), done.",
        b"fatal: x",
    ]


def test_a_streamed_line_is_cut_at_the_cap() -> None:
    lines = _streamed([b"x" * (3 * MAX_STREAMED_LINE), b"\nshort\n"])
    assert lines == [b"x" * MAX_STREAMED_LINE, b"short"]


def test_the_deadline_still_holds_while_lines_stream() -> None:
    lines: list[bytes] = []
    script = "import sys, time\nsys.stderr.write('Counting: 1% (1/99)\\r')\n"
    script += "sys.stderr.flush()\ntime.sleep(60)\n"
    started = time.monotonic()
    done = run_process(
        [sys.executable, "-c", script],
        cwd=Path.cwd(),
        env={},
        seconds=1.0,
        on_stderr_line=lines.append,
    )
    assert done.expired and time.monotonic() - started < 30
    assert lines == [b"Counting: 1% (1/99)"]


@given(st.binary(max_size=3 * MAX_STREAMED_LINE), st.data())
def test_any_chunking_gives_the_same_lines_each_within_the_cap(
    stream: bytes, data: st.DataObject
) -> None:
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=20)))
    chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    lines: list[bytes] = []
    splitter = _Lines(lines.append)
    for chunk in chunks:
        splitter.feed(chunk)
    splitter.close()
    whole = [piece[:MAX_STREAMED_LINE] for piece in re.split(rb"[\r\n]", stream) if piece]
    assert lines == whole


def test_nothing_shows_progress_when_piped_or_json(monkeypatch: pytest.MonkeyPatch) -> None:
    # Under pytest, stdout and stderr are not terminals.
    assert not wanted(False)
    assert not wanted(True)
    assert NO_PROGRESS.enabled is False


def test_a_fetch_shown_on_a_terminal_reports_what_git_said(team: Team) -> None:
    """The progress lines' parser loads when a call shows progress (issue 18): a fetch
    and a checkout with progress enabled still report git's own lines."""
    from memsync.transports.git import FetchOutcome, Git  # noqa: PLC0415

    seen: list[str] = []

    class Record:
        enabled = True

        def show(self, phase: str, done: int, total: int | None = None, **_: str) -> None:
            seen.append(phase)

    files = {f"MEMORY_p{i:03d}.md": f"# P {i}\n\n{'x' * 4000} {i}\n" for i in range(60)}
    commit(team.alice.path, files, "many")
    push(team.alice.path)
    box = Git(team.bob.path)
    outcome, _ = box.fetch("origin", "main", "refs/remotes/origin/main", progress=Record())
    assert outcome is FetchOutcome.OK
    head = git(team.bob.path, "rev-parse", "refs/remotes/origin/main")
    box.checkout_new_branch("shown", head, progress=Record())
    assert seen and all(phase.isprintable() for phase in seen), seen
