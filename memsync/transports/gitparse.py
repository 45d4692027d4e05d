"""Pure parsers for git's machine output (`-z`, porcelain v2, batch formats), bytes in.

Paths are decoded as UTF-8 with `surrogateescape`, so a name that is not valid UTF-8
survives to the validators (which refuse it) instead of being dropped or mangled.
"""

from __future__ import annotations

from typing import NamedTuple

from memsync.lazypattern import lazy
from memsync.validators.tree import Change, Entry, Listing

_ZERO = lazy(rb"^0+$")  # compiled at the first listing, not as a cold process starts
MODE_TREE = 0o040000


def decode_path(raw: bytes) -> str:
    return raw.decode("utf-8", errors="surrogateescape")


def encode_path(path: str) -> bytes:
    return path.encode("utf-8", errors="surrogateescape")


_LS_TREE = lazy(r"([0-7]+) ([a-z]+) ([0-9a-f]+) +(-|[0-9]+)\t([^\0]*)\0")


def parse_ls_tree(raw: bytes) -> Listing:
    """`git ls-tree -r -z -l [-t]`: every leaf with mode, size and object id.

    A name the tree lists twice (two entries with one name, or a file and a directory of
    one name: git's object check calls both `duplicateEntries`) is kept once and named in
    the listing's `duplicates`. With `-t` the directories are listed too: they are not
    entries, but a directory listed twice, or listed as a file as well, is a duplicate.

    The output is decoded once (`surrogateescape`: every field but the path is ASCII, and
    the NUL and tab around a path end any byte sequence, so each path decodes as it would
    alone) and each entry is built as a plain tuple: a 10k-file tree is listed on every
    cold cycle.
    """
    entries: dict[str, Entry] = {}
    seen: set[str] = set()
    duplicates: list[str] = []
    modes: dict[str, int] = {}
    make = tuple.__new__
    for mode, kind, oid, size, path in _LS_TREE.findall(decode_path(raw)):
        if path in seen:
            duplicates.append(path)
        seen.add(path)
        if kind == "tree":
            continue
        number = modes.get(mode)
        if number is None:
            number = modes[mode] = int(mode, 8)
        entries[path] = make(Entry, (number, None if size == "-" else int(size), oid, None))
    listing = Listing((), duplicates)
    listing.update(entries)
    return listing


class RawChange(NamedTuple):
    """One record of `git log --raw`: a path one commit changed against one parent.

    `diff` counts the diffs git listed for the commit (a merge lists one per parent whose
    diff is not empty); `parents` is None when the log format did not name them. The new
    object id comes last (None for a deletion); the old one is None for an addition.
    """

    commit: str
    diff: int
    parents: tuple[str, ...] | None
    path: str
    old_mode: int
    mode: int
    status: str  # A, D, M or T
    old_oid: str | None
    oid: str | None  # last: readers take the new object id from the end

    @property
    def is_tree(self) -> bool:
        """A directory record (`-t`): neither side is a leaf."""
        return self.old_mode in (0, MODE_TREE) and self.mode in (0, MODE_TREE)

    def as_diff(self) -> DiffRecord:
        return DiffRecord(self.old_mode, self.mode, self.old_oid, self.oid, self.status, self.path)


def parse_log_raw(raw: bytes) -> list[RawChange]:
    """`git log --raw -m -z --no-abbrev --format=%x01%H` (or `--format=%x01%H %P`).

    A deletion has new mode 0 and oid None; an added path has old mode 0. Merges appear
    once per parent whose diff is not empty. With `%P` in the format (a space after the
    commit id) every record carries the commit's parents, so the gate can tell which
    parent each diff is against.
    """
    found: list[RawChange] = []
    tokens = raw.split(b"\0")
    commit = ""
    parents: tuple[str, ...] | None = None
    diffs: dict[str, int] = {}
    i = 0
    while i < len(tokens):
        token = tokens[i].lstrip(b"\n")
        i += 1
        if token.startswith(b"\x01"):
            header = token[1:].decode("ascii").rstrip("\n")
            commit, space, rest = header.partition(" ")
            parents = tuple(rest.split()) if space else None
            diffs[commit] = diffs.get(commit, -1) + 1
        elif token.startswith(b":"):
            fields = token[1:].split()
            old_mode, new_mode, new_oid = int(fields[0], 8), int(fields[1], 8), fields[3]
            path = decode_path(tokens[i])
            i += 1
            deleted = new_mode == 0 or _ZERO.match(new_oid) is not None
            oid = None if deleted else new_oid.decode("ascii")
            old_oid = None if old_mode == 0 else fields[2].decode("ascii")
            status = fields[4][:1].decode("ascii") if len(fields) > 4 else ""
            found.append(
                RawChange(
                    commit, diffs[commit], parents, path, old_mode, new_mode, status, old_oid, oid
                )
            )
    return found


def log_headers(raw: bytes) -> list[tuple[str, tuple[str, ...]]]:
    """(commit, parents) of every header `parse_log_raw`'s input holds, in order (a merge
    shown once per parent is listed once per showing). Walked token by token like
    `parse_log_raw`, so a path that happens to hold `\\x01` and hex is never taken for one."""
    found: list[tuple[str, tuple[str, ...]]] = []
    tokens = raw.split(b"\0")
    i = 0
    while i < len(tokens):
        token = tokens[i].lstrip(b"\n")
        i += 1
        if token.startswith(b"\x01"):
            commit, _, rest = token[1:].decode("ascii").rstrip("\n").partition(" ")
            found.append((commit, tuple(rest.split())))
        elif token.startswith(b":"):
            i += 1  # the path
    return found


def changes_from(records: list[RawChange], sizes: dict[str, int]) -> list[Change]:
    return [
        Change(
            commit=r.commit,
            path=r.path,
            entry=None if r.oid is None else Entry(mode=r.mode, size=sizes.get(r.oid), oid=r.oid),
            diff=r.diff,
            parents=r.parents,
            created=r.old_mode == 0,
        )
        for r in records
    ]


class DiffRecord(NamedTuple):
    """One record of `git diff-tree -r -t -z --raw`: a leaf or (with `-t`) a directory.

    Modes are 0 on the missing side; object ids are None there.
    """

    old_mode: int
    mode: int
    old_oid: str | None
    oid: str | None
    status: str  # A, D, M or T
    path: str

    @property
    def is_tree(self) -> bool:
        """A directory record (`-t`): neither side is a leaf."""
        return self.old_mode in (0, MODE_TREE) and self.mode in (0, MODE_TREE)


def parse_diff_raw(raw: bytes) -> list[DiffRecord]:
    """`git diff-tree -r [-t] -z --raw --no-renames --no-abbrev`: every record, in git's order."""
    found: list[DiffRecord] = []
    tokens = raw.split(b"\0")
    i = 0
    while i + 1 < len(tokens):
        header = tokens[i]
        i += 1
        if not header.startswith(b":"):
            continue
        fields = header[1:].split()
        old_mode, new_mode = int(fields[0], 8), int(fields[1], 8)
        old_oid, new_oid = fields[2].decode("ascii"), fields[3].decode("ascii")
        found.append(
            DiffRecord(
                old_mode,
                new_mode,
                None if old_mode == 0 or _ZERO.match(fields[2]) else old_oid,
                None if new_mode == 0 or _ZERO.match(fields[3]) else new_oid,
                fields[4][:1].decode("ascii"),
                decode_path(tokens[i]),
            )
        )
        i += 1
    return found


def parse_batch_check_lines(raw: bytes) -> list[tuple[str, str, int] | None]:
    """`cat-file --batch-check=%(objectname) %(objecttype) %(objectsize)`, one answer per
    line asked, in order: (object id, type, size), or None for a missing object."""
    answers: list[tuple[str, str, int] | None] = []
    for line in raw.decode("ascii", "replace").splitlines():
        parts = line.split()
        ok = len(parts) == 3 and parts[2].isdigit()
        answers.append((parts[0], parts[1], int(parts[2])) if ok else None)
    return answers


def parse_batch_check(raw: bytes) -> dict[str, int]:
    """`cat-file --batch-check=%(objectname) %(objecttype) %(objectsize)`: blob sizes."""
    sizes: dict[str, int] = {}
    for line in raw.decode("ascii", "replace").splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] == "blob":
            sizes[parts[0]] = int(parts[2])
    return sizes


def parse_batch(raw: bytes, kind: bytes | None = None) -> dict[str, bytes]:
    """`cat-file --batch`: object id -> bytes (missing objects are left out, and with
    `kind`, objects of another type)."""
    blobs: dict[str, bytes] = {}
    pos = 0
    while pos < len(raw):
        eol = raw.index(b"\n", pos)
        header = raw[pos:eol].split()
        pos = eol + 1
        if len(header) != 3:  # "<oid> missing"
            continue
        size = int(header[2])
        if kind is None or header[1] == kind:
            blobs[header[0].decode("ascii")] = raw[pos : pos + size]
        pos += size + 1
    return blobs


def parse_refs(raw: bytes) -> dict[str, str]:
    """`for-each-ref --format=%(refname)%00%(objectname)` (one record per line)."""
    found: dict[str, str] = {}
    for line in raw.decode("utf-8", "surrogateescape").splitlines():
        name, _, oid = line.partition("\0")
        found[name] = oid
    return found


# git's object check (fsck.c) message ids, lower-cased, mapped to problem codes. Ids about
# a tree entry's name or mode map to the code the gate gives the same entry; ids about the
# content of a file git guards (`.gitmodules`, `.gitattributes`) map to `dotgit-path`, since
# the gate refuses those names outright. Every other id (commit, tag and tree encoding
# problems, and ids newer git versions add) is `malformed-object`.
FSCK_CODES: dict[str, str] = {
    "hasdotgit": "dotgit-path",
    "hasdot": "unsafe-path",
    "hasdotdot": "unsafe-path",
    "emptyname": "unsafe-path",
    "fullpathname": "unsafe-path",
    "largepathname": "unsafe-path",
    "duplicateentries": "duplicate-entry",
    "badfilemode": "special-file",
    "gitmodulessymlink": "symlink",
    "gitattributessymlink": "symlink",
    "gitignoresymlink": "symlink",
    "mailmapsymlink": "symlink",
    **{
        f"gitmodules{suffix}": "dotgit-path"
        for suffix in ("missing", "blob", "large", "name", "parse", "path", "url", "update")
    },
    **{
        f"gitattributes{suffix}": "dotgit-path"
        for suffix in ("missing", "blob", "large", "linelength")
    },
}
MALFORMED = "malformed-object"
_FSCK_LINE = lazy(
    r"(?:object|in (?:tree|commit|tag|blob)) ([0-9a-f]{40,64})(?: \([^)]*\))?: "
    r"([A-Za-z][A-Za-z0-9]*): (.*)"
)
_BAD_OBJECTS = (
    "fsck error",
    "error in object",
    "did not send all necessary objects",
    "bad object",
    # the upstream's own pack-objects refused to read a broken object (an empty name, ...)
    "possible repository corruption on the remote side",
)


def fsck_findings(text: str) -> list[tuple[str, str]]:
    """(problem code, message) for each refusal git's object check reported in `text`.

    Guarantees, for any `text`: every code is a value of `FSCK_CODES` or `malformed-object`;
    every line naming an object and a message id yields one finding (errors and warnings
    alike, each distinct finding once, in order); and when `looks_like_bad_objects(text)`
    holds the list is never empty (without a message id, one `malformed-object` finding
    quotes git's own words). Text without any of these yields [].
    """
    found: list[tuple[str, str]] = []
    for line in text.splitlines():
        match = _FSCK_LINE.search(line)
        if match is None:
            continue
        oid, msg_id, detail = match.groups()
        code = FSCK_CODES.get(msg_id.lower(), MALFORMED)
        finding = (code, f"object {oid[:12]}: {msg_id}: {detail} (refused by git's object check)")
        if finding not in found:
            found.append(finding)
    if not found and looks_like_bad_objects(text):
        message = f"git's object check refused what the upstream sent: {_first_error(text)}"
        found.append((MALFORMED, message))
    return found


def looks_like_bad_objects(text: str) -> bool:
    """Whether a failed fetch's stderr says the objects were refused, not the connection."""
    lowered = text.lower()
    if any(k in lowered for k in _BAD_OBJECTS):
        return True
    return any(
        "error" in line.lower() and _FSCK_LINE.search(line) is not None
        for line in text.splitlines()
    )


def _first_error(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in lines:
        lowered = line.lower()
        if "error" in lowered or "fatal" in lowered:
            return line
    return lines[-1] if lines else "no answer"


def last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "no answer"


# -- named answers (the git box's `gitfacts`) ---------------------------------------------------

_VERSION = lazy(r"git version (\d+)\.(\d+)")
_VERSION_TOKEN = lazy(r"git version ([0-9][0-9A-Za-z.+-]{0,40})")


def parse_subjects(raw: bytes) -> list[tuple[str, str]]:
    """`log --format=%H%x09%s` as (commit, subject) pairs, in git's order (newest first).

    A subject is one line; a line without a tab (none of git's) has an empty subject."""
    found: list[tuple[str, str]] = []
    for line in raw.splitlines():
        oid, _, subject = line.partition(b"\t")
        found.append((oid.decode("ascii", "replace"), subject.decode("utf-8", "replace")))
    return found


def parse_words(raw: bytes) -> list[str]:
    """Whitespace-separated words (object ids `rev-list` or `merge-base --all` prints)."""
    return raw.decode("utf-8", "surrogateescape").split()


def parse_names(raw: bytes) -> list[str]:
    """One name a line, `\n`-separated (`ls-tree --name-only`), empty lines left out."""
    return [line for line in raw.decode("utf-8", "surrogateescape").split("\n") if line]


def parse_version(text: str) -> tuple[int, int] | None:
    """(major, minor) of `git version 2.39.5`, None when the text is not git's version."""
    found = _VERSION.match(text)
    return (int(found.group(1)), int(found.group(2))) if found else None


def version_token(text: str) -> str | None:
    """`2.39.5` of `git version 2.39.5` (at most 41 characters), None when there is none."""
    found = _VERSION_TOKEN.match(text)
    return found.group(1) if found else None
