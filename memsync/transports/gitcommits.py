"""What memsync makes in a repository, through git by name: a new repository and its
config, the index (add, remove, two-tree merges), commits (from the index or from a tree),
merges and cherry-picks, refs set outside a transaction, and repacking.

Each method is one git call in the box (`gitcore.GitCore.run`) with its arguments fixed
here. A call that may fail as part of the flow answers an `Attempt` (did git do it, and
git's stderr when not); any other failure is a GitError. `Git` (git.py) inherits these.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from memsync.transports.gittree import TreeReads

Identity = Sequence[tuple[str, str]]  # `user.name` and `user.email` for the commit


class Attempt(NamedTuple):
    """A git call that may fail as part of the flow: whether it did what was asked, and
    git's stderr (why not) when it did not."""

    ok: bool
    detail: str


class Writes(TreeReads):
    """Named writes to a repository (see the module docstring)."""

    # -- a new repository --------------------------------------------------------------------

    def init(
        self,
        *,
        bare: bool = False,
        branch: str | None = None,
        empty_template: bool = False,
        object_format: str | None = None,
    ) -> None:
        """`git init` here: bare, or a work tree at `cwd` (on `branch`; without git's
        template files; in `object_format`)."""
        args = ["init", "--quiet"]
        if bare:
            args.append("--bare")
        if empty_template:
            args.append("--template=")
        if branch is not None:
            args.append(f"--initial-branch={branch}")
        if object_format is not None:
            args.append(f"--object-format={object_format}")
        self.run(*args, *([] if bare else ["."]))

    def set_config(self, key: str, value: str, *, local: bool = False) -> None:
        """Set `key` in the repository's own config file."""
        self.run("config", *(["--local"] if local else []), key, value)

    def add_remote(self, name: str, url: str) -> None:
        self.run("remote", "add", "--", name, url)

    def track(self, branch: str, remote: str) -> None:
        """`branch` follows the same-named branch of `remote` (pull and push defaults)."""
        self.set_config(f"branch.{branch}.remote", remote)
        self.set_config(f"branch.{branch}.merge", f"refs/heads/{branch}")

    def checkout_detached(self, commit: str) -> None:
        self.run("checkout", "--quiet", "--detach", commit)

    # -- the index ---------------------------------------------------------------------------

    def add(self, paths: Sequence[str], *, force: bool = False, every: bool = False) -> None:
        """Stage `paths` (`force`: ignored ones too; `every`: deletions too)."""
        flags = [*(["-f"] if force else []), *(["-A"] if every else [])]
        self.run("add", *flags, "--", *paths)

    def remove_cached(self, path: str) -> None:
        """Drop `path` from the index (the work-tree file is the caller's)."""
        self.run("rm", "-q", "--cached", "--", path)

    def write_tree(self) -> str:
        """The tree the index holds, written; its id."""
        return self.run("write-tree").stdout.decode("ascii").strip()

    def two_tree_merge(self, flags: Sequence[str], start: str, candidate: str) -> Attempt:
        """`read-tree <flags> start candidate`: git refuses under its index lock, before it
        writes anything, an entry that is neither side's."""
        done = self.run("read-tree", *flags, start, candidate, check=False)
        return Attempt(done.returncode == 0, done.stderr)

    def two_tree_merge_or_raise(self, flags: Sequence[str], start: str, candidate: str) -> None:
        """`two_tree_merge`, its failure a GitError that says why."""
        self.run("read-tree", *flags, start, candidate)

    # -- commits -----------------------------------------------------------------------------

    def commit_tree(
        self, tree: str, parents: Sequence[str], message: str, identity: Identity
    ) -> str:
        """A new commit of `tree` on `parents` (in order), committed as `identity`; its id."""
        args = ["commit-tree", tree]
        for parent in parents:
            args += ["-p", parent]
        made = self.run(*args, "-m", message, config=identity)
        return made.stdout.decode("ascii").strip()

    def commit_index(
        self, message: str, identity: Identity, *, allow_empty: bool = False, verify: bool = True
    ) -> None:
        """Commit what the index holds, with `message`, as `identity`."""
        args = ["commit", *(["--allow-empty"] if allow_empty else []), "-q"]
        args += [*([] if verify else ["--no-verify"]), "-m", message]
        self.run(*args, config=identity)

    def conclude_merge(self, identity: Identity) -> None:
        """Commit the merge in progress with git's own message."""
        self.run("commit", "--no-edit", "--quiet", config=identity)

    def merge(self, upstream: str, message: str, identity: Identity) -> Attempt:
        """A merge commit of `upstream` into HEAD (never a fast-forward); a conflict is
        left in the index and work tree for the caller."""
        done = self.run(
            "merge", "--no-edit", "--no-ff", "-m", message, upstream, check=False, config=identity
        )
        return Attempt(done.returncode == 0, done.stderr)

    def cherry_pick(self, commit: str, identity: Identity) -> Attempt:
        """`commit` replayed onto HEAD with its message (an empty one kept)."""
        done = self.run(
            "cherry-pick",
            "--no-edit",
            "--allow-empty-message",
            commit,
            check=False,
            config=identity,
        )
        return Attempt(done.returncode == 0, done.stderr)

    def cherry_pick_kept(self, commit: str, identity: Identity) -> None:
        """`commit` replayed onto HEAD even when it changes nothing there; GitError if not."""
        self.run(
            "cherry-pick",
            "--allow-empty",
            "--keep-redundant-commits",
            commit,
            config=identity,
        )

    def skip_cherry_pick(self) -> None:
        """Drop the cherry-pick in progress (best effort)."""
        self.run("cherry-pick", "--skip", check=False)

    # -- refs and objects --------------------------------------------------------------------

    def set_ref(self, ref: str, commit: str, reason: str) -> bool:
        """Point `ref` at `commit` whatever it held; True when git did."""
        return self.run("update-ref", "-m", reason, ref, commit, check=False).returncode == 0

    def repack(self, timeout: float) -> None:
        """Geometric repack of local objects, dropping the packs it replaces."""
        self.run("repack", "-d", "-l", "-q", "--geometric=2", timeout=timeout)
