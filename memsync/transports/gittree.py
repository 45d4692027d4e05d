"""Tree reads: listings, diffs, commit logs and blobs of a repository (see `git.py`)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from memsync.transports import gitparse
from memsync.transports.gitcore import GitCore
from memsync.validators.tree import Change, Entry, TreeView


class TreeReads(GitCore):
    """The box's reads of trees, commits and blobs."""

    def tree_of(self, rev: str) -> str:
        return self.out("rev-parse", "--verify", f"{rev}^{{tree}}")

    def ls_tree(self, rev: str) -> dict[str, Entry]:
        """Every leaf of a commit's tree with mode, size and object id."""
        return gitparse.parse_ls_tree(
            self.run("ls-tree", "-r", "-t", "-z", "-l", "--full-tree", rev).stdout
        )

    def tree_view(self, rev: str) -> TreeView:
        return TreeView(self.ls_tree(rev), GitBlobs(self))

    def changes(self, include: str, exclude: str | None) -> tuple[int, list[Change]]:
        """(commit count, every path changed by every commit in `include ^exclude`).

        Each parent of a merge counts; the new side carries mode, size and object id.
        """
        args = [
            "log",
            "--reverse",
            "-m",
            "--raw",
            "-z",
            "--no-renames",
            "--no-abbrev",
            "--no-ext-diff",
            "--no-textconv",
            "--format=%x01%H %P",
            include,
        ]
        if exclude:
            args.append(f"^{exclude}")
        raw = self.run(*args).stdout
        records = gitparse.parse_log_raw(raw)
        commits = len(set(re.findall(rb"\x01([0-9a-f]+)", raw)))
        sizes = self.blob_sizes([oid for *_, oid in records if oid is not None])
        return commits, gitparse.changes_from(records, sizes)

    def changed_paths(self, old: str, new: str) -> tuple[str, ...]:
        raw = self.run(
            "diff-tree",
            "-r",
            "-z",
            "--name-only",
            "--no-renames",
            "--no-ext-diff",
            "--no-textconv",
            old,
            new,
        ).stdout
        return tuple(sorted(gitparse.decode_path(p) for p in raw.split(b"\0") if p))

    def tree_diff(self, old: str, new: str) -> list[tuple[str, str]]:
        """(status letter, path) for every path that differs: A added, D deleted, M, T."""
        raw = self.run(
            "diff-tree",
            "-r",
            "-z",
            "--name-status",
            "--no-renames",
            "--no-ext-diff",
            "--no-textconv",
            old,
            new,
        ).stdout
        fields = raw.split(b"\0")
        return [
            (fields[i].decode("ascii")[:1], gitparse.decode_path(fields[i + 1]))
            for i in range(0, len(fields) - 1, 2)
        ]

    def blob_sizes(self, oids: Sequence[str]) -> dict[str, int]:
        wanted = sorted(set(oids))
        if not wanted:
            return {}
        raw = self.run(
            "cat-file",
            "--batch-check=%(objectname) %(objecttype) %(objectsize)",
            input=("\n".join(wanted) + "\n").encode("ascii"),
        ).stdout
        return gitparse.parse_batch_check(raw)

    def read_blobs(self, oids: Sequence[str]) -> dict[str, bytes]:
        wanted = sorted(set(oids))
        if not wanted:
            return {}
        raw = self.run(
            "cat-file", "--batch", input=("\n".join(wanted) + "\n").encode("ascii")
        ).stdout
        return gitparse.parse_batch(raw)

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
