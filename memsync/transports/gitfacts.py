"""What a repository holds, asked of git by name: history (subjects, messages, counts,
ancestry), names in a tree, remotes, the git binary's version and an upstream's branch.

Each method is one git call in the box (`gitcore.GitCore.run`) with its arguments fixed
here, and answers a parsed value (parsers in `gitparse`); callers outside the box never
run git or parse its output themselves. `Git` (git.py) inherits these.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum
from typing import NamedTuple

from memsync.transports import gitparse
from memsync.transports.gittree import TreeReads


class RemoteBranch(Enum):
    """What `ls-remote --exit-code` said of one upstream branch."""

    PRESENT = "present"
    ABSENT = "absent"  # the upstream answered, and has no such branch
    UNREACHABLE = "unreachable"


class VersionAnswer(NamedTuple):
    """`git --version`: whether git answered, its first line (stripped) and its stderr."""

    ok: bool
    text: str
    detail: str


class Facts(TreeReads):
    """Named reads of history, trees, remotes and the binary (see the module docstring)."""

    # -- history ---------------------------------------------------------------------------

    def subjects(self, rev: str) -> list[tuple[str, str]]:
        """(commit, subject) of every commit reachable from `rev`, newest first."""
        return gitparse.parse_subjects(self.run("log", "--format=%H%x09%s", rev).stdout)

    def recent_subjects(self, count: int) -> list[str]:
        """The subjects of HEAD's last `count` commits, newest first."""
        return self.out("log", f"-{count}", "--format=%s").splitlines()

    def commit_message(self, rev: str) -> str:
        """The whole message of the commit `rev` names (stripped)."""
        return self.out("log", "-1", "--format=%B", rev)

    def commit_id(self, rev: str) -> str:
        """The object `rev` names (`rev-parse`); GitError when it names none."""
        return self.out("rev-parse", rev)

    def object_id(self, name: str) -> str | None:
        """The object `name` names (any type; `<rev>:<path>` too), None when none."""
        found = self.run("rev-parse", "--verify", "--quiet", "--end-of-options", name, check=False)
        return found.stdout.decode("ascii").strip() if found.returncode == 0 else None

    def file_at(self, rev: str, path: str) -> bytes | None:
        """The bytes of `path` at `rev`, None when it is not a file there."""
        result = self.run("cat-file", "blob", f"{rev}:{path}", check=False)
        return result.stdout if result.returncode == 0 else None

    def has_commit(self, commit: str) -> bool:
        """Whether the repository holds `commit`, as a commit."""
        return self.run("cat-file", "-e", f"{commit}^{{commit}}", check=False).returncode == 0

    def touching(self, rev: str, paths: Sequence[str]) -> list[str]:
        """Commits reachable from `rev` that change one of `paths`, oldest first."""
        return gitparse.parse_words(self.run("rev-list", "--reverse", rev, "--", *paths).stdout)

    def count_touching(self, rev: str, since: str | None, paths: Sequence[str]) -> int:
        """How many commits reachable from `rev` and not from `since` change one of `paths`."""
        args = ["rev-list", "--count", rev]
        if since:
            args.append(f"^{since}")
        return int(self.out(*args, "--", *paths) or 0)

    def root_commits(self, rev: str) -> list[str]:
        """The commits without parents reachable from `rev`, in git's order."""
        return gitparse.parse_words(self.run("rev-list", "--max-parents=0", rev).stdout)

    def first_parent_chain(self, start: str, end: str) -> list[str]:
        """`start..end` along first parents, newest first."""
        return gitparse.parse_words(
            self.run("rev-list", "--first-parent", f"{start}..{end}").stdout
        )

    def parents_of(self, commit: str) -> list[str]:
        """The parents of `commit`, in order."""
        return gitparse.parse_words(self.run("rev-list", "--parents", "-n1", commit).stdout)[1:]

    def merge_bases(self, a: str, b: str) -> list[str]:
        """Every best common ancestor of `a` and `b` (`merge-base --all`); none when git
        finds none or cannot tell."""
        return gitparse.parse_words(self.run("merge-base", "--all", a, b, check=False).stdout)

    def descends(self, ancestor: str, descendant: str) -> bool:
        """git's `merge-base --is-ancestor`, asked every time; False also when git cannot
        tell (an object it does not have). `Git.is_ancestor` raises then instead."""
        done = self.run("merge-base", "--is-ancestor", ancestor, descendant, check=False)
        return done.returncode == 0

    # -- trees and the index -----------------------------------------------------------------

    def tree_names(self, rev: str, *paths: str) -> list[str]:
        """The names `ls-tree --name-only` lists at the top of `rev` (only `paths` if given)."""
        return gitparse.parse_names(
            self.run("ls-tree", "--name-only", rev, *(["--", *paths] if paths else [])).stdout
        )

    def tracks_under(self, path: str) -> bool:
        """Whether the index holds a file at or under `path` (a literal path)."""
        listed = self.run("ls-files", "-z", "--", path, env={"GIT_LITERAL_PATHSPECS": "1"})
        return bool(listed.stdout)

    def object_format(self) -> str:
        """The repository's object format (`sha1`, `sha256`)."""
        return self.out("rev-parse", "--show-object-format") or "sha1"

    # -- remotes and the binary --------------------------------------------------------------

    def remotes(self) -> list[str]:
        """The names of the repository's remotes; none when git cannot list them."""
        done = self.run("remote", check=False)
        text = done.stdout.decode("utf-8", "surrogateescape") if done.returncode == 0 else ""
        return [line for line in text.splitlines() if line]

    def remote_branch(self, remote: str, branch: str, timeout: float) -> tuple[RemoteBranch, str]:
        """Whether `remote` answers and has `branch` (`ls-remote --exit-code`), with git's
        stderr when it does not answer; GitTimeout after `timeout` seconds."""
        done = self.run(
            "ls-remote",
            "--exit-code",
            "--end-of-options",
            remote,
            f"refs/heads/{branch}",
            timeout=timeout,
            check=False,
        )
        if done.returncode == 0:
            return RemoteBranch.PRESENT, ""
        if done.returncode == 2:
            return RemoteBranch.ABSENT, ""
        return RemoteBranch.UNREACHABLE, done.stderr

    def version(self) -> VersionAnswer:
        """What `git --version` answers (parse it with `gitparse.parse_version`)."""
        done = self.run("--version", check=False)
        text = done.stdout.decode("utf-8", "replace").strip()
        return VersionAnswer(done.returncode == 0, text, done.stderr)
