"""History reads for provenance: who last changed a line, what a commit object says.

Named git calls over the box (`GitCore.run`: clean environment, no hooks, no pager) and
the pure parsers of their output. Nothing here writes. `blame_line` asks for one line of
one file, so its cost is the history of that file (plus, with `-C`, the files changed in
the same commits, so a move between memory files is followed); `.git-blame-ignore-revs`
and the like are switched off, since a root's config must not hide who wrote a line.
Authors come from the commit objects themselves (never a `.mailmap` a commit could ship).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from memsync.transports import gitparse
from memsync.transports.gitcore import GitCore

# A root's config may name an ignore-revs file or a mailmap; provenance obeys neither.
_BLAME_CONFIG = (("blame.ignoreRevsFile", ""), ("blame.markIgnoredLines", "false"))
MAX_COMMIT_BYTES = 1 << 20
EARLIEST, LATEST = -62135596800, 253402300799  # 0001-01-01 .. 9999-12-31T23:59:59 UTC
_OID = re.compile(rb"[0-9a-f]{40}|[0-9a-f]{64}")
_NUMBER = re.compile(rb"[0-9]{1,12}")
_SECONDS = re.compile(r"-?[0-9]{1,18}")  # a commit object larger than this is read as far as that


@dataclass(frozen=True)
class BlameLine:
    """The commit that last changed a line, and where the line stood in that commit."""

    commit: str
    path: str
    line: int


@dataclass(frozen=True)
class Person:
    name: str
    email: str
    time: int  # seconds since the epoch
    offset: str  # "+0100"


@dataclass(frozen=True)
class CommitFacts:
    """What a commit object's headers and message say (parsed, never verified)."""

    commit: str
    parents: tuple[str, ...]
    author: Person | None
    committer: Person | None
    signed: bool  # it carries a gpgsig header (whether it verifies is commitsig's)
    message: str

    @property
    def subject(self) -> str:
        return self.message.split("\n", 1)[0].strip()

    def trailer(self, key: str) -> str | None:
        """The last `Key: value` line of the message with that key (case-insensitive)."""
        wanted = key.casefold() + ":"
        found = None
        for line in self.message.splitlines():
            if line.casefold().startswith(wanted):
                found = line[len(wanted) :].strip() or None
        return found


def blame_line(git: GitCore, rev: str, path: str, line: int) -> BlameLine | None:
    """`git blame --porcelain -M -C -L line,line rev -- path`; None if the line is not there."""
    result = git.run(
        "blame",
        "--porcelain",
        "-M",
        "-C",
        "-L",
        f"{line},{line}",
        rev,
        "--",
        path,
        config=_BLAME_CONFIG,
        check=False,
    )
    if result.returncode != 0:
        return None
    return parse_blame_porcelain(result.stdout, path)


def parse_blame_porcelain(raw: bytes, path: str) -> BlameLine | None:
    """The first entry of `blame --porcelain` output: commit, original path and line."""
    lines = raw.split(b"\n")
    if not lines or not lines[0]:
        return None
    head = lines[0].split()
    if len(head) < 3 or not _OID.fullmatch(head[0]) or not _NUMBER.fullmatch(head[1]):
        return None
    commit = head[0].decode("ascii")
    original = path
    for entry in lines[1:]:
        if entry.startswith(b"\t"):
            break
        if entry.startswith(b"filename "):
            original = entry[len(b"filename ") :].decode("utf-8", "surrogateescape")
    return BlameLine(commit, original, int(head[1]))


def raw_commits(git: GitCore, commits: Sequence[str]) -> dict[str, bytes]:
    """Commit objects by id (`cat-file --batch`, one process); missing ones left out."""
    wanted = sorted(set(commits))
    if not wanted:
        return {}
    raw = git.run("cat-file", "--batch", input=b"".join(c.encode() + b"\n" for c in wanted))
    return gitparse.parse_batch(raw.stdout)


def parse_commit(commit: str, raw: bytes) -> CommitFacts:
    """The headers git writes (`parent`, `author`, `committer`, `gpgsig`) and the message."""
    head, _, body = raw[:MAX_COMMIT_BYTES].partition(b"\n\n")
    parents: list[str] = []
    author = committer = None
    signed = False
    for line in head.split(b"\n"):
        if line.startswith(b" "):  # a continuation line of a multi-line header
            continue
        key, _, value = line.partition(b" ")
        if key == b"parent":
            parents.append(value.decode("ascii", "replace").strip())
        elif key == b"author":
            author = parse_person(value)
        elif key == b"committer":
            committer = parse_person(value)
        elif key in (b"gpgsig", b"gpgsig-sha256"):
            signed = True
    message = body.decode("utf-8", "replace")
    return CommitFacts(commit, tuple(parents), author, committer, signed, message)


def parse_person(value: bytes) -> Person | None:
    """`Name <email> 1700000000 +0100`, or None when it does not read so."""
    text = value.decode("utf-8", "replace")
    name, lt, rest = text.partition("<")
    email, gt, when = rest.partition(">")
    if not lt or not gt:
        return None
    parts = when.split()
    seconds = int(parts[0]) if parts and _SECONDS.fullmatch(parts[0]) else 0
    seconds = max(EARLIEST, min(LATEST, seconds))  # what a date can print as
    offset = parts[1] if len(parts) > 1 else "+0000"
    return Person(name.strip(), email.strip(), seconds, offset)


def files_holding(git: GitCore, rev: str, token: str, pathspecs: Sequence[str]) -> list[str]:
    """Paths at `rev` (within `pathspecs`) whose bytes contain `token` (`git grep -l -F`)."""
    result = git.run(
        "grep",
        "-l",
        "-z",
        "-F",
        "-I",
        "--no-color",
        "--no-textconv",
        "-e",
        token,
        rev,
        "--",
        *pathspecs,
        check=False,
    )
    if result.returncode == 1:
        return []
    if result.returncode != 0:
        from memsync.errors import GitError  # noqa: PLC0415 - only on failure

        raise GitError(f"cannot search {rev[:12]}: {result.stderr}", argv=["git grep"])
    prefix = f"{rev}:"
    found = []
    for raw in result.stdout.split(b"\0"):
        if not raw:
            continue
        path = gitparse.decode_path(raw)
        found.append(path[len(prefix) :] if path.startswith(prefix) else path)
    return found


def file_at(git: GitCore, rev: str, path: str) -> bytes | None:
    """The bytes of `path` at `rev`, None when it is not a file there."""
    result = git.run("cat-file", "blob", f"{rev}:{path}", check=False)
    return result.stdout if result.returncode == 0 else None


def commits_touching(
    git: GitCore, rev: str, pathspecs: Sequence[str], since: str | None = None
) -> list[str]:
    """Commits reachable from `rev` that change a path in `pathspecs`, newest first
    (`rev-list`, merges included; `since` limits by committer date as git reads it)."""
    args = ["rev-list", *([f"--since={since}"] if since else []), rev, "--", *pathspecs]
    return git.run(*args).stdout.decode("ascii").split()


def count_changes(git: GitCore, rev: str, pattern: str, pathspecs: Sequence[str]) -> list[str]:
    """Commits reachable from `rev` whose diff changes how often `pattern` (an extended
    regular expression) occurs in a file of `pathspecs`, newest first: where a text was
    added, removed or moved (`log -S --pickaxe-regex`, merges not diffed)."""
    result = git.run(
        "log",
        "--no-show-signature",
        "--no-mailmap",
        "--format=%H",
        "--pickaxe-regex",
        f"-S{pattern}",
        rev,
        "--",
        *pathspecs,
    )
    return result.stdout.decode("ascii").split()
