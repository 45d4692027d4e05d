"""The git box: the only module that runs git.

Every call runs the real `git` binary on the process box (`process.py`: its own process
group, killed whole at the caller's deadline) with a clean environment (no system or
global config, no hooks, no prompts, no pager, and nothing the repository's own config or
attributes name: see `gitconfig.py`), object checking on fetch, and `-z` output parsed as
bytes (parsers in `gitparse`). Credentials in URLs are redacted from every message this
module produces.

A root's own credentials (`rootkeys.GitCredentials`: an HTTPS token, an SSH key and
`known_hosts`) are read at each network call (`fetch`, `push`, `ls-remote`) and handed to
git by memsync's own credential helper and a forced `core.sshCommand`: never on a command
line, in a file or in an environment (see `credentials.py`); whatever git prints is
scrubbed of the token too.

What can be read from the repository's files without a process is read without one: a
plain `.git` directory and a loose or packed ref directly (`gitread.plain_git_dir`,
`gitread.file_ref`); with GitPython, in a `resident` box (the daemon's), symbolic and
packed refs (`ref_value`, `current_branch`), where any other repository is (`git_dir`,
`common_dir`), its own config and remotes (`config_get`, `remote_url`; repository level
only, as git in the box sees it). A one-shot box (`resident=False`) asks git for those
instead: GitPython's import costs more than the processes it would save there. The rule
for GitPython here: **it never starts a process.** No `repo.git.*`, no `is_dirty()`, no
object reads (its object database would start `git cat-file`), nothing that calls `git`;
it is imported lazily (CLI start-up never pays for it) with its executable pointed at a
path that cannot exist, so a call that would run git fails instead of running git outside
the box. Whatever it cannot answer for certain (an unusual ref or value, an unreadable
file, an environment it would obey and git in the box would not) is asked of git, through
the box. One cheap `Repo` handle is kept per work tree and dropped when `.git` changes
identity; nothing else of GitPython's outlives a call.

The box is split by noun: `gitenv` (forced config, clean environment, credential pieces),
`gitcore` (running git, finding the repository), `gitguard` (the config guard), `gitread`
(GitPython), `gittree` (trees, diffs, logs and blobs), `gitfacts` (history, names, remotes
and the binary, asked by name), `gitcommits` (repositories, the index and commits made by
name), `gitstatus` (a work tree's `git status`), `gitfetch` (the fetch: with the runner and
the status, the box a cycle starts with); `Git` here adds the rest. Nothing outside
`transports/` runs git itself: it calls one of these named methods
(tests/test_git_box_only.py holds that).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from memsync.errors import GitError
from memsync.progress import NO_PROGRESS, Progress
from memsync.redaction import redact
from memsync.transports import gitparse
from memsync.transports.gitcommits import Attempt, Writes
from memsync.transports.gitconfig import ConfigEntry, split_key
from memsync.transports.gitenv import (
    FORCED_VALUES,
    FetchOutcome,
    GitResult,
    PushOutcome,
    cause,
    clean_env,
)
from memsync.transports.gitfacts import Facts, RemoteBranch, VersionAnswer
from memsync.transports.gitfetch import Fetches
from memsync.transports.gitguard import GUARD
from memsync.transports.gitread import (
    HANDLES,
    PER_WORKTREE,
    Read,
    config_value,
    file_ref,
    head_branch,
    plain_git_dir,
    read_ref,
)
from memsync.transports.gitrefsession import RefSession
from memsync.transports.gittree import GitBlobs
from memsync.transports.workstate import StatusEntry, WorkState

__all__ = [
    "Attempt",
    "FetchOutcome",
    "Git",
    "GitBlobs",
    "GitResult",
    "PushOutcome",
    "RemoteBranch",
    "StatusEntry",
    "VersionAnswer",
    "WorkState",
    "cause",
    "clean_env",
    "redact",
]


class Git(Writes, Facts, Fetches):
    """git for one repository (or work tree) directory."""

    # The ref transactions of the admission under way, in one process (`gitrefsession`);
    # set and closed by its owner (`roots.admit`), None otherwise.
    ref_session: RefSession | None = None

    def status(self) -> list[StatusEntry]:
        return list(self.work_state().entries)

    def merge_in_progress(self) -> bool:
        git_dir = self.git_dir()
        return git_dir is not None and (git_dir / "MERGE_HEAD").exists()

    def rev_parse(self, ref: str) -> str | None:
        """The commit `ref` names, or None when it does not resolve."""
        result = self.run(
            "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}", check=False
        )
        return result.stdout.decode("ascii").strip() if result.returncode == 0 else None

    def ref_value(self, ref: str) -> str | None:
        """The object a full ref name (or HEAD) points at, or None when it does not resolve.

        The loose ref file `git fetch` writes, or the `packed-refs` line a fresh clone lists,
        is read directly (`file_ref`); GitPython (in a `resident` box) follows symbolic
        refs: no process on every cycle. Anything else (a missing, per-worktree or unusual
        ref, an unreadable file, another ref backend) is asked of `rev-parse` through the box.
        """
        if ref.startswith("refs/") and not ref.startswith(PER_WORKTREE):
            plain = plain_git_dir(self.cwd)
            oid = file_ref(plain, ref) if plain is not None else None
            if oid is not None:
                return oid
        if not self.resident:
            return self.rev_parse(ref)
        if ref == "HEAD" or (ref.startswith("refs/") and not ref.startswith(PER_WORKTREE)):
            handle = HANDLES.open(self.cwd)
            if not isinstance(handle, Read):
                oid = read_ref(handle.repo, ref)
                if oid is not None:
                    return oid
        return self.rev_parse(ref)

    def current_branch(self) -> str | None:
        """The branch HEAD names (short), or None when HEAD is detached or unreadable."""
        handle = HANDLES.open(self.cwd) if self.resident else Read.ASK_GIT
        if not isinstance(handle, Read):
            branch = head_branch(handle.repo)
            if not isinstance(branch, Read):
                return branch
        result = self.run("symbolic-ref", "--quiet", "--short", "HEAD", check=False)
        if result.returncode != 0:
            return None
        return result.stdout.decode("utf-8", "surrogateescape").strip()

    def config_entries(self) -> tuple[ConfigEntry, ...]:
        """Every config entry git sees here (the repository's own files and includes)."""
        return GUARD.entries(self)

    def config_get(self, key: str) -> str | None:
        """The value `git config --get` gives here: the box's own for the keys it forces,
        else the repository's config (its own files and includes; never global or system).

        GitPython reads it; a key it does not find, and any value its parser might read
        differently from git's (quotes or backslashes in it, a `config.worktree`, a file
        it cannot decode), is asked of git through the box.
        """
        forced = FORCED_VALUES.get(split_key(key))
        if forced is not None:
            return forced
        handle = HANDLES.open(self.cwd) if self.resident else Read.ASK_GIT
        if not isinstance(handle, Read):
            repo = handle.repo
            section, subsection, name = split_key(key)
            header = section if subsection is None else f'{section} "{subsection}"'
            value = config_value(repo, lambda: repo.config_reader("repository").get(header, name))
            if value is not None:
                return value
        return self._config_by_git(key)

    def _config_by_git(self, key: str) -> str | None:
        result = self.run("config", "--get", key, check=False)
        if result.returncode != 0:
            return None
        return result.stdout.decode("utf-8", "surrogateescape").strip()

    def remote_url(self, remote: str) -> str | None:
        """The remote's URL (the last one configured, as `git config --get` says)."""
        handle = HANDLES.open(self.cwd) if self.resident else Read.ASK_GIT
        if not isinstance(handle, Read):
            repo = handle.repo
            url = config_value(repo, lambda: repo.remote(remote).url)
            if url is not None:
                return url
        return self._config_by_git(f"remote.{remote}.url")

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        """Whether `ancestor` is `descendant` or one of its ancestors: found among the
        parents of the first few commits read through a cycle's object session (one
        incoming commit on top of the local head: no process), else git's own answer
        (`merge-base --is-ancestor`)."""
        if self.parents_reach(ancestor, descendant):
            return True
        result = self.run("merge-base", "--is-ancestor", ancestor, descendant, check=False)
        if result.returncode in (0, 1):
            return result.returncode == 0
        raise GitError(f"cannot compare {ancestor[:12]} and {descendant[:12]}: {result.stderr}")

    def merge_base(self, a: str, b: str) -> str | None:
        result = self.run("merge-base", a, b, check=False)
        if result.returncode == 1:
            return None
        if result.returncode != 0:
            raise GitError(f"cannot find a merge base of {a[:12]} and {b[:12]}: {result.stderr}")
        return result.stdout.decode("ascii").strip()

    def rev_list(self, include: str, *excludes: str | None, no_merges: bool = False) -> list[str]:
        """Commits reachable from `include` but from none of `excludes`, oldest first."""
        args = ["rev-list", "--reverse", *(["--no-merges"] if no_merges else []), include]
        args += [f"^{exclude}" for exclude in excludes if exclude]
        return self.run(*args).stdout.decode("ascii").split()

    def read_stage(self, path: str, stage: int) -> bytes | None:
        """The bytes of `path` at an index stage (1 base, 2 ours, 3 theirs), None if absent."""
        result = self.run("cat-file", "blob", f":{stage}:{path}", check=False)
        return result.stdout if result.returncode == 0 else None

    def refs(self, prefix: str) -> dict[str, str]:
        raw = self.run("for-each-ref", "--format=%(refname)%00%(objectname)", prefix).stdout
        return gitparse.parse_refs(raw)

    def identity_config(self) -> list[tuple[str, str]]:
        """The committer for merge commits: the root's own identity, else memsync's."""
        name = self.config_get("user.name")
        email = self.config_get("user.email")
        return [("user.name", name or "memsync"), ("user.email", email or "memsync@localhost")]

    def unmerged_paths(self) -> list[str]:
        return sorted(e.path for e in self.status() if e.unmerged)

    # -- network (the fetch: `gitfetch.Fetches`) ----------------------------------------------

    def push(
        self, remote: str, commit: str, branch: str, timeout: float | None = None
    ) -> tuple[PushOutcome, str]:
        """Push one exact commit to the upstream branch, never forced."""
        result = self.run(
            "push",
            "--receive-pack=git-receive-pack",
            "--porcelain",
            "--no-verify",
            "--end-of-options",
            remote,
            f"{commit}:refs/heads/{branch}",
            timeout=timeout,
            check=False,
        )
        if result.returncode == 0:
            return PushOutcome.OK, ""
        text = redact((result.stderr + "\n" + result.stdout.decode("utf-8", "replace")).strip())
        lowered = text.lower()
        if "[rejected]" in lowered or "non-fast-forward" in lowered or "fetch first" in lowered:
            return PushOutcome.REJECTED, text
        return PushOutcome.UNREACHABLE, text

    # -- refs, worktrees, the work tree ------------------------------------------------------

    def update_ref(
        self, ref: str, new: str, old: str | None = None, reason: str = "memsync"
    ) -> None:
        """Move `ref` to `new`, only if it still points at `old` (compare-and-swap); in the
        box's open `ref_session` when its message is `reason`."""
        if self._in_ref_session(reason, [_update_line(ref, new, old)]):
            return
        self._update_ref_alone(ref, new, old, reason)

    def update_ref_ahead(
        self, ref: str, new: str, old: str | None = None, reason: str = "memsync"
    ) -> Callable[[], None]:
        """`update_ref`, started: in the box's open `ref_session` (of this reflog message)
        the transaction is handed to git and this returns at once; the callable it returns
        waits for git's answer (when the session could not commit it: the update by a
        process of its own, as `update_ref`, raising as it does) and is to be called before
        anything relies on the ref or uses the session again. Without such a session the
        update is made now, and the callable does nothing."""
        session = self.ref_session
        line = _update_line(ref, new, old)
        if session is None or session.reason != reason or not session.send([line]):
            self._update_ref_alone(ref, new, old, reason)
            return _done

        def answered() -> None:
            if not session.answered():
                self._update_ref_alone(ref, new, old, reason)

        return answered

    def _update_ref_alone(self, ref: str, new: str, old: str | None, reason: str) -> None:
        """`update_ref` by a git process of its own (no session, or one that could not)."""
        self.run("update-ref", "-m", reason, ref, new, *([old] if old is not None else []))

    def move_refs(
        self, updates: Sequence[tuple[str, str, str]], deletes: Sequence[str], reason: str
    ) -> None:
        """One atomic transaction: (ref, new, old) compare-and-swap updates, then deletions
        (in the box's open `ref_session` when its message is `reason`)."""
        lines = [f"update {ref} {new} {old}" for ref, new, old in updates]
        lines += [f"delete {ref}" for ref in deletes]
        if self._in_ref_session(reason, lines):
            return
        self.run(
            "update-ref",
            "-m",
            reason,
            "--stdin",
            input=("start\n" + "\n".join(lines) + "\nprepare\ncommit\n").encode(),
        )

    def _in_ref_session(self, reason: str, lines: Sequence[str]) -> bool:
        """Whether the open `ref_session` (of this reflog message) committed `lines`."""
        session = self.ref_session
        return session is not None and session.reason == reason and session.commit(lines)

    def delete_ref(self, ref: str) -> None:
        self.run("update-ref", "-d", ref, check=False)

    def checkout_new_branch(
        self, branch: str, commit: str, progress: Progress = NO_PROGRESS
    ) -> None:
        """Check out `commit` as the new branch `branch` (git's progress to `progress`)."""
        shown = progress.enabled
        if shown:
            from memsync.gitprogress import GitLines  # noqa: PLC0415 - on a terminal only
        self.run(
            "checkout",
            "--quiet",
            *(["--progress"] if shown else []),
            "-b",
            branch,
            commit,
            on_stderr_line=GitLines(progress) if shown else None,
        )

    def worktree_add(self, path: Path, commit: str) -> None:
        self.run("worktree", "add", "--detach", "--quiet", str(path), commit)

    def worktree_remove(self, path: Path) -> None:
        self.run("worktree", "remove", "--force", "--force", str(path), check=False)

    def worktree_prune(self) -> None:
        self.run("worktree", "prune", check=False)

    def read_tree_update(self, old: str, new: str) -> None:
        """Move index and work tree from `old` to `new` (two-tree merge: only changed files).

        Stale stat data in the index makes git think clean files changed; refresh and
        retry once before giving up.
        """
        first = self.run("read-tree", "-m", "-u", old, new, check=False)
        if first.returncode != 0:
            self.run("update-index", "-q", "--refresh", check=False)
            self.run("read-tree", "-m", "-u", old, new)

    def commit_paths(self, start: str, paths: Sequence[str], message: str, index: Path) -> str:
        """A commit on top of `start` holding the work tree's `paths` as they are now.

        Built in a private index file (`index`), so the root's own index and work tree are
        not touched; deleted paths are removed. Returns the new commit's id.
        """
        env = {"GIT_INDEX_FILE": str(index), "GIT_LITERAL_PATHSPECS": "1"}
        self.run("read-tree", start, env=env)
        self.run(
            "add", "--all", "--force", "--", *paths, env=env
        )  # --force: the allowlist .gitignore ignores everything first
        tree = self.run("write-tree", env=env).stdout.decode("ascii").strip()
        done = self.run(
            "commit-tree", tree, "-p", start, "-m", message, config=self.identity_config()
        )
        return done.stdout.decode("ascii").strip()

    def refresh_stat(self) -> bool:
        """Store fresh stat data in the index (`update-index -q --refresh`); True when git
        finished. Only stat data of entries whose content matches changes: no staged
        version, no work-tree file. git takes `index.lock` itself, exclusively, before it
        reads the index: when someone else holds it, git writes nothing and this answers
        at once (False when there was something to store; the lock is left alone)."""
        return self.run("update-index", "-q", "--refresh", check=False).returncode == 0

    def commit_objects(self, oids: Sequence[str]) -> dict[str, bytes]:
        """Raw commit objects by id (`cat-file commit` bytes; what is missing or not a
        commit is left out), for checking their signatures in process."""
        raw = self.run(
            "cat-file",
            "--batch=%(objectname) %(objecttype) %(objectsize)",
            input=b"".join(oid.encode("ascii") + b"\n" for oid in oids),
        ).stdout
        return gitparse.parse_batch(raw, kind=b"commit")


def _update_line(ref: str, new: str, old: str | None) -> str:
    """The `update-ref --stdin` line of a compare-and-swap update (`old` None: any value)."""
    return f"update {ref} {new}" + (f" {old}" if old is not None else "")


def _done() -> None:
    """What `update_ref_ahead` hands back for an update already made."""
