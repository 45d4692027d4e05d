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

from memsync.transports import gitparse
from memsync.transports.gitcore import GitCore
from memsync.values import value

# A root's config may name an ignore-revs file or a mailmap; provenance obeys neither.
_BLAME_CONFIG = (("blame.ignoreRevsFile", ""), ("blame.markIgnoredLines", "false"))
MAX_COMMIT_BYTES = 1 << 20
EARLIEST, LATEST = -62135596800, 253402300799  # 0001-01-01 .. 9999-12-31T23:59:59 UTC
_OID = re.compile(rb"[0-9a-f]{40}|[0-9a-f]{64}")
_NUMBER = re.compile(rb"[0-9]{1,12}")
_SECONDS = re.compile(r"-?[0-9]{1,18}")  # a commit object larger than this is read as far as that


@value
class BlameLine:
    """The commit that last changed a line, and where the line stood in that commit."""

    commit: str
    path: str
    line: int


@value
class Person:
    name: str
    email: str
    time: int  # seconds since the epoch
    offset: str  # "+0100"


@value
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


def blame_lines(git: GitCore, rev: str, path: str, lines: Sequence[int]) -> dict[int, BlameLine]:
    """For each line of `path` at `rev` asked (one `git blame --porcelain -M -C` with an
    `-L n,n` per line), the commit that last changed it; lines that are not there are
    left out (the whole answer is empty when git refuses)."""
    wanted = sorted(set(lines))
    if not wanted:
        return {}
    ranges = [arg for n in wanted for arg in ("-L", f"{n},{n}")]
    result = git.run(
        "blame",
        "--porcelain",
        "-M",
        "-C",
        *ranges,
        rev,
        "--",
        path,
        config=_BLAME_CONFIG,
        check=False,
    )
    if result.returncode != 0:
        return {}
    return parse_blame_porcelain(result.stdout, path)


def blame_line(git: GitCore, rev: str, path: str, line: int) -> BlameLine | None:
    """`blame_lines` for one line."""
    return blame_lines(git, rev, path, [line]).get(line)


def parse_blame_porcelain(raw: bytes, path: str) -> dict[int, BlameLine]:
    """`blame --porcelain` output: final line number -> (commit, original path and line).
    A group's first line names its file (`filename`); the lines after it share it."""
    found: dict[int, BlameLine] = {}
    pending: tuple[str, int, int] | None = None
    group_file = path
    for entry in raw.split(b"\n"):
        if entry.startswith(b"\t"):
            if pending is not None:
                commit, original, final = pending
                found[final] = BlameLine(commit, group_file, original)
            pending = None
            continue
        head = entry.split(b" ")
        if (
            len(head) in (3, 4)
            and _OID.fullmatch(head[0])
            and all(_NUMBER.fullmatch(h) for h in head[1:])
        ):
            if len(head) == 4:  # a new group: its `filename` line follows
                group_file = path
            pending = (head[0].decode("ascii"), int(head[1]), int(head[2]))
        elif entry.startswith(b"filename ") and pending is not None:
            group_file = entry[len(b"filename ") :].decode("utf-8", "surrogateescape")
    return found


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


def changed_files(
    git: GitCore, commits: Sequence[str], pathspecs: Sequence[str]
) -> dict[str, list[str]]:
    """Paths within `pathspecs` each commit changed against its first parent (or, for a
    root commit, added): one `diff-tree --stdin` for all of them (merges: none listed)."""
    if not commits:
        return {}
    raw = git.run(
        "diff-tree",
        "--stdin",
        "-r",
        "--root",
        "--name-only",
        "-z",
        "--no-renames",
        "--",
        *pathspecs,
        input=b"".join(c.encode("ascii") + b"\n" for c in commits),
    ).stdout
    return parse_changed_files(raw, set(commits))


def parse_changed_files(raw: bytes, commits: set[str]) -> dict[str, list[str]]:
    """`diff-tree --stdin -z --name-only`: each commit's id, then its paths (NUL-ended)."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for token in raw.split(b"\0"):
        if not token:
            continue
        text = gitparse.decode_path(token).strip("\n")
        if text in commits and _OID.fullmatch(token.strip()):
            current = found.setdefault(text, [])
        elif current is not None:
            current.append(text)
    return found


def read_named(git: GitCore, names: Sequence[str]) -> dict[str, bytes | None]:
    """Objects named `rev:path` (or any name git reads), in one `cat-file --batch`: the
    bytes of each, None for a name that names nothing."""
    wanted = list(dict.fromkeys(names))
    if not wanted:
        return {}
    raw = git.run("cat-file", "--batch", input=b"".join(n.encode() + b"\n" for n in wanted))
    return dict(zip(wanted, parse_batch_in_order(raw.stdout, len(wanted)), strict=False))


def parse_batch_in_order(raw: bytes, count: int) -> list[bytes | None]:
    """`cat-file --batch` answers in the order asked: the object's bytes, or None for a
    `missing` (or ambiguous) name."""
    answers: list[bytes | None] = []
    pos = 0
    while pos < len(raw) and len(answers) < count:
        eol = raw.find(b"\n", pos)
        if eol < 0:
            break
        header = raw[pos:eol].split()
        pos = eol + 1
        if len(header) == 3 and _NUMBER.fullmatch(header[2]):
            size = int(header[2])
            answers.append(raw[pos : pos + size])
            pos += size + 1
        else:
            answers.append(None)
    return answers


def id_events(
    git: GitCore, rev: str, pattern: str, pathspecs: Sequence[str]
) -> list[tuple[str, str, str]]:
    """Every changed line matching `pattern` (an extended regex, `log -G`) in the memory
    files' history from `rev`, newest commit first, as (commit, path, "+line" or "-line").
    One `git log -p -U0`; merges are not diffed."""
    raw = git.run(
        "log",
        "--no-show-signature",
        "--no-mailmap",
        "-p",
        "-U0",
        "--no-color",
        "--no-ext-diff",
        "--no-textconv",
        "--no-renames",
        "--format=%x00%H",
        f"-G{pattern}",
        rev,
        "--",
        *pathspecs,
    ).stdout
    return parse_patch_lines(raw)


def parse_patch_lines(raw: bytes) -> list[tuple[str, str, str]]:
    """The changed lines of `log -p -U0 --format=%x00%H` output (see `id_events`). File
    headers are read only between `diff --git` and the first `@@`, so a removed line that
    reads `-- x` is a line, not a header; a deleted file's lines carry its old path."""
    found: list[tuple[str, str, str]] = []
    commit = path = ""
    header = False
    for line in raw.split(b"\n"):
        if line.startswith(b"\0"):
            commit, path, header = line[1:].decode("ascii", "replace").strip(), "", False
        elif line.startswith(b"diff --git "):
            path, header = "", True
        elif header and line.startswith(b"@@"):
            header = False
        elif header:
            if line.startswith((b"--- a/", b"+++ b/")):
                path = gitparse.decode_path(line[6:])
        elif line[:1] in (b"+", b"-") and commit and path:
            found.append((commit, path, line.decode("utf-8", "replace")))
    return found
