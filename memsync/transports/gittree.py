"""Tree reads: listings, diffs, commit logs and blobs of a repository (see `git.py`).

A sync pays for what changed. A listing asked by object id is kept (`gitmemo`), and the
next one in the same work tree is derived from it with git's own diff between the two
trees (`diff-tree -r -t`, one process, no full listing parsed): the derived listing says
so (`tree_oid`, `base_oid`, `delta`, and the base's own listing `base_entries`), which
lets the gate derive its whole-tree verdict the same way. A diff whose records do not fit
the base listing (a path added twice, a directory added where one is, a file where a
directory is: trees git's object check refuses) is not trusted: the tree is listed in full.
Diffs, blob sizes and small blobs are kept too, so the diff a cycle asks three times
(admission, validation, the fence) and the blob it reads twice run git once.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from memsync.errors import GitError
from memsync.transports import gitmemo, gitparse
from memsync.transports.gitcore import GitCore
from memsync.transports.gitenv import OID
from memsync.transports.gitmemo import KeptListing
from memsync.transports.gitparse import DiffRecord
from memsync.transports.gitread import HANDLES, Read
from memsync.validators.tree import BlobSource, Change, Entry, Listing, TreeView

if TYPE_CHECKING:  # a resident box's in-process reads (gitdb) load it
    from memsync.transports.gitobjects import ObjectFiles
    from memsync.transports.process import Session
    from memsync.validators.listingstore import ListingStore

MODE_GITLINK = 0o160000
# Up to this many objects are read from the object files in-process; more ask `cat-file`.
IN_PROCESS_OBJECTS = 64
_BATCH_CHECK = "--batch-check=%(objectname) %(objecttype) %(objectsize)"
# Through a cycle's object session: a commit of up to this many bytes is read for its tree,
# and a blob of up to this many for its bytes; a bigger one ends the session unread (its
# bytes are never streamed just to learn a size) and a one-shot call asks for it.
SESSION_COMMIT_MAX = 1 << 20
# Commits read up from a descendant before ancestry is asked of `merge-base` instead.
WALK_COMMITS = 16
SESSION_BLOB_MAX = 1 << 24
# Seconds a listing started ahead waits at most for what it runs beside to start.
AHEAD_WAIT = 1.0
# The longest answer header `cat-file --batch` gives (`<id> <type> <size>`, or `missing`).
_HEADER_MAX = 256


class _SessionFailed(Exception):
    """The object session ended or answered unexpectedly: a one-shot call asks instead."""


class GitListing(Listing):
    """A tree's listing, saying which tree it is and (when derived) from which tree and diff."""

    def __init__(
        self,
        entries: Mapping[str, Entry],
        duplicates: Iterable[str] = (),
        *,
        tree_oid: str | None = None,
        base_oid: str | None = None,
        delta: tuple[tuple[str, Entry | None], ...] | None = None,
        base_entries: Mapping[str, Entry] | None = None,
    ) -> None:
        super().__init__((), duplicates)
        self.update(entries)  # one C-level copy (a listing of pairs would be rebuilt)
        self.tree_oid = tree_oid
        self.base_oid = base_oid
        self.delta = delta
        self.base_entries = base_entries  # tree `base_oid`'s listing (kept: never changed)


class GitTreeView(TreeView):
    """A TreeView of a listing that carries its tree's identity (see `GitListing`)."""

    def __init__(self, listing: GitListing, source: BlobSource) -> None:
        super().__init__(listing, source)
        self.tree_oid = listing.tree_oid
        self.base_oid = listing.base_oid
        self.delta = listing.delta
        self.base_entries = listing.base_entries


class TreeReads(GitCore):
    """The box's reads of trees, commits and blobs."""

    _objects: Session | None = None  # the open object session (`object_session`)
    _batching = False
    # Listings started ahead (`list_ahead`), by revision: the thread and what it found.
    _ahead: dict[str, tuple[threading.Thread, list[Listing | BaseException]]] | None = None

    @contextlib.contextmanager
    def object_session(self) -> Iterator[None]:
        """Within it, a box that is not `resident` reads the few objects a cycle asks for
        (blob sizes and bytes, a commit's tree) through one `git cat-file --batch` kept
        open, instead of a process per read; at its end that git is killed and reaped.
        A resident box reads them in-process (gitdb) and needs none."""
        if self.resident or self._batching:
            yield
            return
        self._batching = True
        try:
            yield
        finally:
            self._batching = False
            ahead, self._ahead = self._ahead, None
            for thread, _found in (ahead or {}).values():
                thread.join()  # no listing outlives the session (nor the cycle's lock)
            session, self._objects = self._objects, None
            if session is not None:
                session.close()

    def list_ahead(self, rev: str, after: threading.Event | None = None) -> None:
        """Start listing commit `rev`'s tree in full on a thread of its own, for a later
        `ls_tree(rev)` that would list it (a one-shot box in its object session, with no
        listing kept: the start of a fast-forward, listed while git logs what comes in),
        or for the `ls_tree` of another commit that finds no listing to derive its own from
        (the candidate's, when the history check needed no tree: it derives from this one).
        The listing is what `ls_tree` would run itself, so nothing else changes; it is
        waited for by that call or at the end of the session. With `after`, the thread
        starts its work once that is set (the log it runs beside has started: a listing
        read from a record would otherwise hold the interpreter while the log is started),
        or after `AHEAD_WAIT` seconds at most."""
        if self.resident or not self._batching or OID.fullmatch(rev) is None:
            return
        tree = rev if gitmemo.LISTINGS.get(rev) is not None else gitmemo.TREES.get(rev)
        if (tree is not None and gitmemo.LISTINGS.get(tree) is not None) or (
            gitmemo.LAST.get(self.cwd) is not None  # derived from it instead
        ):
            return
        if self._ahead is None:
            self._ahead = {}
        if rev in self._ahead:
            return
        found: list[Listing | BaseException] = []

        def listing() -> None:
            try:
                if after is not None:
                    after.wait(AHEAD_WAIT)
                found.append(self._full(rev, tree))
            except BaseException as exc:  # raised by the `ls_tree` that takes it
                found.append(exc)

        thread = threading.Thread(target=listing, name="memsync-list-ahead", daemon=True)
        self._ahead[rev] = (thread, found)
        thread.start()

    def read_ahead(self, rev: str) -> str | None:
        """In a fresh process that keeps listing records, learn commit `rev`'s tree through
        the object session and start reading its listing (`list_ahead`, at once): what a
        one-shot cycle does while its fetch still runs, for the start of a fast-forward.
        The tree id, or None when nothing was started."""
        if _records() is None:
            return None
        tree = self.session_tree(rev)
        if tree is not None:
            self.list_ahead(rev)
        return tree

    def _listed_ahead(self, rev: str) -> Listing | None:
        """The listing `list_ahead(rev)` started (waited for), or None when none was."""
        started = self._ahead.pop(rev, None) if self._ahead is not None else None
        if started is None:
            return None
        thread, found = started
        thread.join()
        if not found:
            raise RuntimeError("a listing ended without an answer")
        if isinstance(found[0], BaseException):
            raise found[0]
        return found[0]

    def _session_for(self, count: int) -> bool:
        return self._batching and 0 < count <= IN_PROCESS_OBJECTS

    def _ask(self, oid: str, limit: int) -> tuple[str, int, bytes | None] | None:
        """(type, size, bytes) of an object through the session; bytes None when it is
        bigger than `limit` (the session is then ended unread); None when git says it is
        missing. `_SessionFailed` when the session cannot answer."""
        if OID.fullmatch(oid) is None:
            raise _SessionFailed(oid)
        session = self._objects
        try:
            if session is None:
                session = self._objects = self.session("cat-file", "--batch")
            session.ask(oid.encode("ascii") + b"\n")
            header = session.read_line(_HEADER_MAX).split()
            if len(header) == 2 and header[0] == oid.encode("ascii") and header[1] == b"missing":
                return None
            if len(header) != 3 or header[0] != oid.encode("ascii") or not header[2].isdigit():
                raise _SessionFailed(oid)
            kind, size = header[1].decode("ascii"), int(header[2])
            if size > limit:
                self._end_session()
                return kind, size, None
            data = session.read_exact(size)
            if session.read_exact(1) != b"\n":
                raise _SessionFailed(oid)
            return kind, size, data
        except (EOFError, OSError, UnicodeDecodeError) as exc:
            self._end_session()
            raise _SessionFailed(oid) from exc
        except _SessionFailed:
            self._end_session()
            raise

    def parents_reach(self, ancestor: str, descendant: str) -> bool:
        """True when `ancestor` is among the parents of the commits a breadth-first walk of
        at most `WALK_COMMITS` commits up from `descendant` reads, through the object
        session (a commit's parents are its ancestors: a True is certain). False means only
        "not found so": git decides. Never in a shallow repository (git there hides the
        parents of its boundary commits); replacements are off for every call of the box
        (`GIT_NO_REPLACE_OBJECTS`), grafts refuse the root."""
        if not self._batching or OID.fullmatch(ancestor) is None:
            return False
        common = self.common_dir()
        if common is None or (common / "shallow").exists():
            return False
        queue, seen = [descendant], {descendant}
        try:
            for _ in range(WALK_COMMITS):
                if not queue:
                    return False
                commit = queue.pop(0)
                got = self._ask(commit, SESSION_COMMIT_MAX)
                parents = _commit_parents(got)
                if parents is None:
                    return False
                tree = _commit_tree(got)
                if tree is not None:
                    gitmemo.TREES.put(commit, tree)
                if ancestor in parents:  # and a commit itself, as git would insist
                    found = self._ask(ancestor, SESSION_COMMIT_MAX)
                    if found is None or _commit_parents(found) is None:
                        return False
                    tree = _commit_tree(found)
                    if tree is not None:
                        gitmemo.TREES.put(ancestor, tree)
                    return True
                for parent in parents:
                    if parent not in seen:
                        seen.add(parent)
                        queue.append(parent)
        except _SessionFailed:
            return False
        return False

    def _end_session(self) -> None:
        session, self._objects = self._objects, None
        if session is not None:
            session.close()

    def tree_of(self, rev: str) -> str:
        return self.out("rev-parse", "--verify", f"{rev}^{{tree}}")

    def known_tree(self, rev: str) -> str | None:
        """The tree id of commit `rev` when this process learnt it already (no git run)."""
        return gitmemo.TREES.get(rev) if OID.fullmatch(rev) else None

    def session_tree(self, rev: str) -> str | None:
        """The tree id of commit `rev`: known, or read through the object session (its
        `cat-file --batch`, opened if need be); None outside a session, or when the session
        cannot say (a caller that needs it then asks `tree_of`)."""
        known = self.known_tree(rev)
        if known is not None or not self._batching or self.resident or OID.fullmatch(rev) is None:
            return known
        try:
            tree = _commit_tree(self._ask(rev, SESSION_COMMIT_MAX))
        except _SessionFailed:
            return None
        if tree is not None:
            gitmemo.TREES.put(rev, tree)
        return tree

    def ls_tree(self, rev: str) -> GitListing:
        """Every leaf of a commit's (or tree's) tree with mode, size and object id.

        By object id: kept, derived from the last listing made here, or listed in full
        (and kept). Any other revision is listed in full. Each call returns a new listing.
        """
        if OID.fullmatch(rev) is None:
            return GitListing(self._list(rev))
        tree = rev if gitmemo.LISTINGS.get(rev) is not None else gitmemo.TREES.get(rev)
        kept = gitmemo.LISTINGS.get(tree) if tree is not None else None
        base_oid: str | None = None
        delta: tuple[tuple[str, Entry | None], ...] | None = None
        base_entries: Mapping[str, Entry] | None = None
        if kept is None or tree is None:
            if self._ahead and rev not in self._ahead and gitmemo.LAST.get(self.cwd) is None:
                with contextlib.suppress(GitError):  # else listed in full, as without it
                    self.ls_tree(next(iter(self._ahead)))  # listed ahead, to derive this from
            derived = self._derive(rev, tree)
            if derived is not None:
                tree, kept, base_oid, delta, base_entries = derived
            else:
                tree = tree or self.tree_of(rev)
                entries = self._listed_ahead(rev) or self._full(rev, tree)
                kept = KeptListing(entries, gitmemo.count_dirs(entries))
            recorded_from = None if base_oid is None or delta is None else (base_oid, delta)
            _record(tree, kept.entries, recorded_from)
            gitmemo.TREES.put(rev, tree)
            gitmemo.LISTINGS.put(tree, kept)
        gitmemo.LAST.put(self.cwd, (rev, tree))
        return GitListing(
            kept.entries,
            kept.entries.duplicates,
            tree_oid=tree,
            base_oid=base_oid,
            delta=delta,
            base_entries=base_entries,
        )

    def _full(self, rev: str, tree: str | None) -> Listing:
        """Commit (or tree) `rev`'s listing in full: read from its record when this process
        keeps listing records and one of tree `tree` hashes to that id (`listingstore`),
        else listed by git."""
        recorded = _recorded(tree)
        return recorded if recorded is not None else self._list(rev)

    def _list(self, rev: str) -> Listing:
        return gitparse.parse_ls_tree(
            self.run("ls-tree", "-r", "-t", "-z", "-l", "--full-tree", rev).stdout
        )

    def _derive(
        self, rev: str, tree: str | None
    ) -> tuple[str, KeptListing, str, tuple[tuple[str, Entry | None], ...], Listing] | None:
        """`rev`'s listing from the last one kept in this work tree and git's diff between
        them; None when there is none, or when the diff does not fit it."""
        last = gitmemo.LAST.get(self.cwd)
        base = gitmemo.LISTINGS.get(last[1]) if last is not None else None
        if last is None or base is None or base.entries.duplicates:
            return None
        try:
            records = self.diff_records(last[0], rev)
        except GitError:  # the last listing's commit is gone (a gc, a new clone here)
            gitmemo.LAST.drop(self.cwd)
            return None
        leaves = [r for r in records if not r.is_tree]
        wanted = [r.oid for r in leaves if r.oid is not None and r.mode != MODE_GITLINK]
        sizes = {oid: size for oid in wanted if (size := gitmemo.SIZES.get(oid)) is not None}
        missing = sorted({oid for oid in wanted if oid not in sizes})
        asked = ([] if tree is not None else [f"{rev}^{{tree}}"]) + missing
        if asked:
            answers = gitparse.parse_batch_check_lines(
                self.run("cat-file", _BATCH_CHECK, input=_lines(asked)).stdout
            )
            if len(answers) != len(asked) or any(a is None for a in answers):
                return None
            if tree is None:
                first = answers.pop(0)
                if first is None or first[1] != "tree":
                    return None
                tree = first[0]
            for oid, answer in zip(missing, answers, strict=True):
                if answer is not None:
                    sizes[oid] = answer[2]
                    gitmemo.SIZES.put(oid, answer[2])
        applied = apply_diff(base, records, sizes)
        if applied is None:
            return None
        if tree is None:
            return None
        kept, delta = applied
        return tree, kept, last[1], delta, base.entries

    def diff_records(self, old: str, new: str) -> tuple[DiffRecord, ...]:
        """git's diff between two commits or trees, leaves and directories (`-t`); kept when
        both are named by object id."""
        key = (old, new)
        cacheable = OID.fullmatch(old) is not None and OID.fullmatch(new) is not None
        kept = gitmemo.DIFFS.get(key) if cacheable else None
        if kept is not None:
            return kept
        raw = self.run(
            "diff-tree",
            "-r",
            "-t",
            "-z",
            "--raw",
            "--no-abbrev",
            "--no-renames",
            "--no-ext-diff",
            "--no-textconv",
            old,
            new,
        ).stdout
        records = tuple(gitparse.parse_diff_raw(raw))
        if cacheable:
            gitmemo.DIFFS.put(key, records)
        return records

    def tree_view(self, rev: str) -> TreeView:
        return GitTreeView(self.ls_tree(rev), GitBlobs(self))

    def changes(
        self,
        include: str,
        exclude: str | None,
        *,
        started: threading.Event | None = None,
        logged: Callable[[], None] | None = None,
    ) -> tuple[int, list[Change]]:
        """(commit count, every path changed by every commit in `include ^exclude`).

        Each parent of a merge counts; the new side carries mode, size and object id.
        `started` is set once the log's git has started (and when it could not be).
        `logged` is called once the log's diffs are kept (`diff_records`), before the sizes.
        """
        args = [
            "log",
            "--reverse",
            "-m",  # each parent of a merge (log.diffMerges is forced to `separate`)
            "--ignore-submodules=none",  # nor a .gitmodules' `ignore` hides a gitlink
            "--raw",
            "-z",
            "--no-renames",
            "--no-abbrev",
            "--no-ext-diff",
            "--no-textconv",
            "-t",
            "--format=%x01%H %P",
            include,
        ]
        if exclude:
            args.append(f"^{exclude}")
        try:
            raw = self.run(*args, on_start=None if started is None else _setter(started)).stdout
        finally:
            if started is not None:
                started.set()
        listed = gitparse.parse_log_raw(raw)
        _keep_diffs(raw, listed)
        if logged is not None:
            logged()
        records = [r for r in listed if not r.is_tree]
        commits = len({commit for commit, _parents in gitparse.log_headers(raw)})
        sizes = self.blob_sizes(
            [r.oid for r in records if r.oid is not None],
            trees_of=[rev for rev in (include, exclude) if rev and OID.fullmatch(rev)],
        )
        return commits, gitparse.changes_from(records, sizes)

    def changed_paths(self, old: str, new: str) -> tuple[str, ...]:
        """Every path (leaf) that differs between two commits or trees, sorted."""
        return tuple(sorted(r.path for r in self.diff_records(old, new) if not r.is_tree))

    def tree_diff(self, old: str, new: str) -> list[tuple[str, str]]:
        """(status letter, path) for every path that differs: A added, D deleted, M, T."""
        return [(r.status, r.path) for r in self.diff_records(old, new) if not r.is_tree]

    def blob_sizes(self, oids: Sequence[str], *, trees_of: Sequence[str] = ()) -> dict[str, int]:
        """Blob sizes (kept); the tree ids of the commits `trees_of` names are learnt too
        (the commits a listing is asked of next: no `rev-parse` for their trees)."""
        wanted = sorted(set(oids))
        sizes = {oid: size for oid in wanted if (size := gitmemo.SIZES.get(oid)) is not None}
        missing = [oid for oid in wanted if oid not in sizes]
        commits = [rev for rev in dict.fromkeys(trees_of) if gitmemo.TREES.get(rev) is None]
        objects = self._object_files(len(missing) + len(commits))
        if objects is not None:  # a few objects: read in-process
            with objects:
                for oid in missing:
                    found = objects.header(oid)
                    if found is not None and found[0] == "blob":
                        sizes[oid] = found[1]
                        gitmemo.SIZES.put(oid, found[1])
                for commit in commits:
                    tree = objects.commit_tree(commit)
                    if tree is not None:
                        gitmemo.TREES.put(commit, tree)
            missing = [oid for oid in missing if oid not in sizes]
            commits = [rev for rev in commits if gitmemo.TREES.get(rev) is None]
        if self._session_for(len(missing) + len(commits)):
            gone: set[str] = set()  # git said so: not asked again
            with contextlib.suppress(_SessionFailed):
                for oid in missing:
                    got = self._ask(oid, gitmemo.BLOB_KEPT)
                    if got is None:
                        gone.add(oid)
                    elif got[0] == "blob":
                        sizes[oid] = got[1]
                        gitmemo.SIZES.put(oid, got[1])
                        if got[2] is not None:  # read whole: the gate asks for it next
                            gitmemo.BLOBS.put(oid, got[2])
                for commit in commits:
                    got = self._ask(commit, SESSION_COMMIT_MAX)
                    tree = _commit_tree(got)
                    if tree is not None:
                        gitmemo.TREES.put(commit, tree)
                    elif got is None:
                        gone.add(commit)
            missing = [oid for oid in missing if oid not in sizes and oid not in gone]
            commits = [c for c in commits if gitmemo.TREES.get(c) is None and c not in gone]
        asked = missing + [f"{rev}^{{tree}}" for rev in commits]
        if not asked:
            return sizes
        answers = gitparse.parse_batch_check_lines(
            self.run("cat-file", _BATCH_CHECK, input=_lines(asked)).stdout
        )
        for question, answer in zip(asked, answers, strict=False):
            if answer is None:
                continue
            oid, kind, size = answer
            if kind == "blob" and question == oid:
                sizes[oid] = size
                gitmemo.SIZES.put(oid, size)
            elif kind == "tree" and question.endswith("^{tree}"):
                gitmemo.TREES.put(question.removesuffix("^{tree}"), oid)
        return sizes

    def read_blobs(self, oids: Sequence[str]) -> dict[str, bytes]:
        """Blob bytes by id (missing objects left out); small blobs are kept."""
        wanted = sorted(set(oids))
        blobs = {oid: data for oid in wanted if (data := gitmemo.BLOBS.get(oid)) is not None}
        missing = [oid for oid in wanted if oid not in blobs]
        objects = self._object_files(len(missing))
        if objects is not None:
            with objects:
                for oid in missing:
                    found = objects.read(oid, gitmemo.BLOB_KEPT)
                    if found is not None and found[0] == "blob":
                        blobs[oid] = found[1]
                        gitmemo.BLOBS.put(oid, found[1])
            missing = [oid for oid in missing if oid not in blobs]
        if self._session_for(len(missing)):
            gone: set[str] = set()  # missing, as git says: not asked again
            with contextlib.suppress(_SessionFailed):
                for oid in missing:
                    got = self._ask(oid, SESSION_BLOB_MAX)
                    if got is None:
                        gone.add(oid)
                    elif got[2] is not None:  # whatever git gives for the id, as `--batch`
                        blobs[oid] = got[2]
                        if got[1] <= gitmemo.BLOB_KEPT:
                            gitmemo.BLOBS.put(oid, got[2])
            missing = [oid for oid in missing if oid not in blobs and oid not in gone]
        if missing:
            raw = self.run("cat-file", "--batch", input=_lines(missing)).stdout
            for oid, data in gitparse.parse_batch(raw).items():
                blobs[oid] = data
                if len(data) <= gitmemo.BLOB_KEPT:
                    gitmemo.BLOBS.put(oid, data)
        return blobs

    def _object_files(self, count: int) -> ObjectFiles | None:
        """The repository's object files, for `count` objects (a few: many are one
        `cat-file` process's work), when they can be read without git in a `resident`
        box."""
        if not self.resident or not 0 < count <= IN_PROCESS_OBJECTS:
            return None  # a one-shot process: gitdb's import costs more than `cat-file`
        if isinstance(HANDLES.open(self.cwd), Read):
            return None  # not a plain repository, or GitPython cannot tell: git decides
        common = self.common_dir()
        if common is None:
            return None
        from memsync.transports.gitobjects import ObjectFiles  # noqa: PLC0415

        return ObjectFiles(common / "objects")

    def hash_files(self, paths: Sequence[str]) -> dict[str, str]:
        """Blob ids of work-tree files as they are on disk (no filters applied)."""
        if not paths:
            return {}
        raw = self.run(
            "hash-object",
            "--no-filters",
            "--stdin-paths",
            input=b"".join(gitparse.encode_path(p) + b"\n" for p in paths),
        ).stdout
        return dict(zip(paths, raw.decode("ascii").split(), strict=True))

    def list_files(self) -> list[str]:
        """Work-tree paths git would consider: tracked ones and untracked ones not ignored."""
        raw = self.run(
            "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--deduplicate"
        ).stdout
        return sorted({gitparse.decode_path(p) for p in raw.split(b"\0") if p})


class GitBlobs:
    """A BlobSource backed by `git cat-file --batch`."""

    def __init__(self, git: TreeReads) -> None:
        self._git = git

    def read_many(self, oids: Sequence[str]) -> Mapping[str, bytes]:
        return self._git.read_blobs(oids)


def _keep_diffs(raw: bytes, records: Sequence[gitparse.RawChange]) -> None:
    """A commit with one parent: its log diff is `diff-tree -r -t parent commit` exactly
    (the same diff, same order), so the box keeps it and need not ask again."""
    by_commit: dict[str, list[DiffRecord]] = {}
    for record in records:
        by_commit.setdefault(record.commit, []).append(record.as_diff())
    for commit, parents in gitparse.log_headers(raw):
        if len(parents) == 1:
            key = (parents[0], commit)
            gitmemo.DIFFS.put(key, tuple(by_commit.get(commit, ())))


def _commit_tree(answer: tuple[str, int, bytes | None] | None) -> str | None:
    """The tree a commit object's first line names (`tree <id>`)."""
    if answer is None or answer[0] != "commit" or answer[2] is None:
        return None
    first = answer[2].split(b"\n", 1)[0]
    if not first.startswith(b"tree "):
        return None
    tree = first[5:].decode("ascii", "replace")
    return tree if OID.fullmatch(tree) else None


def _commit_parents(answer: tuple[str, int, bytes | None] | None) -> tuple[str, ...] | None:
    """The parents a commit object's header names (`parent <id>` lines), None when the
    answer is not a commit read whole or a header line is not what git writes."""
    if answer is None or answer[0] != "commit" or answer[2] is None:
        return None
    header = answer[2].split(b"\n\n", 1)[0].split(b"\n")
    parents = []
    for line in header[1:]:
        if not line.startswith(b"parent "):
            break  # parents follow the tree line, before everything else
        parent = line[7:].decode("ascii", "replace")
        if OID.fullmatch(parent) is None:
            return None
        parents.append(parent)
    return tuple(parents)


def _records() -> ListingStore | None:
    """The listing records of this process (a CLI process's, `cache.open_records`), if any
    (its module is loaded by whoever opens them: none is loaded here to learn there are none)."""
    module = sys.modules.get("memsync.validators.listingstore")
    return None if module is None else module.RECORDS


def _recorded(tree: str | None) -> Listing | None:
    """Tree `tree`'s recorded listing (see `ListingStore.load`), or None."""
    records = _records()
    return None if records is None or tree is None else records.load(tree)


def _record(
    tree: str, entries: Listing, base: tuple[str, tuple[tuple[str, Entry | None], ...]] | None
) -> None:
    """Record tree `tree`'s listing (a delta from tree `base[0]`'s when derived from it)."""
    records = _records()
    if records is not None:
        records.save(tree, entries, base)


def _setter(event: threading.Event) -> Callable[[int], None]:
    """An `on_start` that sets `event` (git's pid is not needed)."""
    return lambda _pid: event.set()


def _lines(items: Sequence[str]) -> bytes:
    return ("\n".join(items) + "\n").encode("ascii")


def apply_diff(
    base: KeptListing, records: Sequence[DiffRecord], sizes: Mapping[str, int]
) -> tuple[KeptListing, tuple[tuple[str, Entry | None], ...]] | None:
    """`base` changed by git's diff records (`diff-tree -r -t`), and the leaf delta; None
    when a record does not fit (a path twice, a directory twice, a deletion of what is not
    there, an addition of what is, a directory added where one stands, a file where a
    directory is or under one): only a tree git's object check refuses gives such a diff,
    and it is listed in full.
    """
    trees = [r.path for r in records if r.is_tree]
    if len(set(trees)) != len(trees):  # a directory twice (say, added twice): list in full
        return None
    entries = dict(base.entries)
    dirs = dict(base.dirs)
    delta: list[tuple[str, Entry | None]] = []
    seen: set[str] = set()
    leaves = [r for r in records if not r.is_tree]
    for record in leaves:
        if record.path in seen or (record.old_mode == 0) == (record.path in entries):
            return None
        seen.add(record.path)
        if record.oid is None:
            del entries[record.path]
            _count(dirs, record.path, -1)
            delta.append((record.path, None))
    for record in records:
        if _added_dir(record) and dirs.get(record.path, 0) > 0:
            return None
    for record in leaves:
        if record.oid is None:
            continue
        size = None if record.mode == MODE_GITLINK else sizes.get(record.oid)
        if size is None and record.mode != MODE_GITLINK:
            return None
        entry = Entry(record.mode, size, record.oid)
        if record.old_mode == 0:
            _count(dirs, record.path, 1)
        entries[record.path] = entry
        delta.append((record.path, entry))
    if any(_added_dir(record) and record.path in entries for record in records):
        return None
    for path, new in delta:
        if new is not None and (path in dirs or any(p in entries for p in _parents(path))):
            return None
    listing = Listing()
    listing.update(entries)
    return KeptListing(listing, dirs), tuple(delta)


def _added_dir(record: DiffRecord) -> bool:
    return record.is_tree and record.status == "A" and record.oid is not None


def _parents(path: str) -> Iterable[str]:
    cut = path.rfind("/")
    while cut > 0:
        yield path[:cut]
        cut = path.rfind("/", 0, cut)


def _count(dirs: dict[str, int], path: str, step: int) -> None:
    for parent in _parents(path):
        left = dirs.get(parent, 0) + step
        if left > 0:
            dirs[parent] = left
        else:
            dirs.pop(parent, None)
