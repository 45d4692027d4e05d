"""The git box: the only module that runs git.

Every call runs the real `git` binary with a clean environment (no system or global
config, no hooks, no prompts, no pager, no external diff or ssh command from the
repository's config), object checking on fetch, a timeout that kills git's whole process
group, and `-z` output parsed as bytes. Credentials in URLs are redacted from every message
this module produces.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from memsync.errors import GitError, GitMissing, GitTimeout
from memsync.validators.tree import Change, Entry, TreeView

DEFAULT_TIMEOUT = 120.0
ZERO_OID = re.compile(rb"^0+$")

# Daemon-owned configuration, applied to every call after the repository's own config so
# that nothing a root or an upstream carries can run code or change what we parse.
_FORCED_CONFIG: tuple[tuple[str, str], ...] = (
    ("core.hooksPath", os.devnull),
    ("core.fsmonitor", "false"),
    ("core.quotePath", "false"),
    ("core.attributesFile", os.devnull),
    ("core.sshCommand", "ssh -o BatchMode=yes"),
    ("core.pager", "cat"),
    ("core.editor", "true"),
    ("credential.helper", ""),
    ("protocol.ext.allow", "never"),
    ("protocol.file.allow", "always"),
    ("fetch.fsckObjects", "true"),
    ("transfer.fsckObjects", "true"),
    ("fetch.recurseSubmodules", "false"),
    ("submodule.recurse", "false"),
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("merge.verifySignatures", "false"),
    ("merge.ff", "true"),
    ("pull.rebase", "false"),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
    ("advice.detachedHead", "false"),
    ("init.defaultBranch", "main"),
)

_KEEP_ENV = ("PATH", "HOME", "TMPDIR", "SSH_AUTH_SOCK", "SYSTEMROOT", "LD_LIBRARY_PATH")

_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/@\s]+)@")


def redact(text: str) -> str:
    """Hide the user-info part (`user:password@`) of every URL in `text`."""
    return _URL_USERINFO.sub(lambda m: f"{m.group('scheme')}***@", text)


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment every git process gets: only what git needs, nothing it may obey."""
    env = {key: os.environ[key] for key in _KEEP_ENV if key in os.environ}
    env.update(
        {
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_ATTR_NOSYSTEM": "1",
            "GIT_NO_REPLACE_OBJECTS": "1",
            "GIT_OPTIONAL_LOCKS": "0",
            "GIT_EDITOR": "true",
            "GIT_PAGER": "cat",
            "LC_ALL": "C",
            "LANGUAGE": "C",
        }
    )
    if extra:
        env.update(extra)
    return env


@dataclass(frozen=True)
class GitResult:
    returncode: int
    stdout: bytes
    stderr: str


class FetchOutcome(Enum):
    OK = "ok"
    MISSING_BRANCH = "missing-branch"
    UNREACHABLE = "unreachable"
    BAD_OBJECTS = "bad-objects"  # object checking refused what the upstream sent


# git's fsck message ids for tree entry names, mapped to our problem codes.
_FSCK_NAME_CODES = {
    "hasdotgit": "dotgit-path",
    "hasdot": "unsafe-path",
    "hasdotdot": "unsafe-path",
    "emptyname": "unsafe-path",
    "fullpathname": "unsafe-path",
}
_FSCK_LINE = re.compile(r"object ([0-9a-f]{40,64}): (\w+): (.*)")


def fsck_findings(text: str) -> list[tuple[str, str]]:
    """(problem code, message) for each name problem git's object check reported."""
    found: list[tuple[str, str]] = []
    for line in text.splitlines():
        match = _FSCK_LINE.search(line)
        if match is None:
            continue
        oid, msg_id, detail = match.groups()
        code = _FSCK_NAME_CODES.get(msg_id.lower())
        if code is not None:
            found.append((code, f"tree {oid[:12]}: {detail} (refused by git's object check)"))
    return found


class PushOutcome(Enum):
    OK = "ok"
    REJECTED = "rejected"
    UNREACHABLE = "unreachable"


@dataclass(frozen=True)
class StatusEntry:
    """One `git status --porcelain -z` record: two status letters and the path."""

    xy: str
    path: str

    @property
    def unmerged(self) -> bool:
        return self.xy in {"DD", "AU", "UD", "UA", "DU", "AA", "UU"}

    @property
    def untracked(self) -> bool:
        return self.xy == "??"


def decode_path(raw: bytes) -> str:
    """A path from git's bytes; invalid UTF-8 survives as lone surrogates for the validators."""
    return raw.decode("utf-8", errors="surrogateescape")


def encode_path(path: str) -> bytes:
    return path.encode("utf-8", errors="surrogateescape")


class Git:
    """git for one repository (or work tree) directory."""

    def __init__(
        self,
        cwd: Path,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.cwd = cwd
        self.timeout = timeout
        self._env = clean_env(env)

    def at(self, cwd: Path) -> Git:
        """The same box for another directory (a candidate worktree)."""
        clone = Git(cwd, timeout=self.timeout)
        clone._env = dict(self._env)
        return clone

    # -- running -----------------------------------------------------------------------

    def run(
        self,
        *args: str,
        input: bytes | None = None,  # noqa: A002 - mirrors subprocess
        timeout: float | None = None,
        check: bool = True,
        config: Sequence[tuple[str, str]] = (),
    ) -> GitResult:
        argv = ["git"]
        for key, value in (*_FORCED_CONFIG, *config):
            argv += ["-c", f"{key}={value}"]
        argv += list(args)
        limit = self.timeout if timeout is None else timeout
        shown = redact(" ".join(["git", *args]))
        try:
            proc = subprocess.Popen(
                argv,
                cwd=self.cwd,
                env=self._env,
                stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except FileNotFoundError as exc:
            raise GitMissing(
                "git is not installed or not on PATH", hint="install git 2.30 or newer"
            ) from exc
        try:
            out, err = proc.communicate(input, timeout=limit)
        except subprocess.TimeoutExpired as exc:
            _kill_group(proc)
            raise GitTimeout(
                f"`{shown}` did not finish within {limit:g}s and was stopped",
                argv=[shown],
                hint="raise the root's sync.timeout or check the network",
            ) from exc
        except BaseException:
            _kill_group(proc)
            raise
        stderr = redact(err.decode("utf-8", errors="replace").strip())
        if check and proc.returncode != 0:
            first = stderr.splitlines()[-1] if stderr else f"exit status {proc.returncode}"
            raise GitError(
                f"`{shown}` failed: {first}",
                argv=[shown],
                returncode=proc.returncode,
                detail=stderr,
            )
        return GitResult(proc.returncode, out, stderr)

    def out(self, *args: str, **kwargs: float | None) -> str:
        """Run and return stdout as text, stripped (for single-value answers like rev-parse)."""
        timeout = kwargs.get("timeout")
        return self.run(*args, timeout=timeout).stdout.decode("utf-8", "surrogateescape").strip()

    # -- repository facts ---------------------------------------------------------------

    def toplevel(self) -> Path | None:
        """The work tree's top level, or None when `cwd` is not inside a non-bare work tree."""
        result = self.run("rev-parse", "--is-bare-repository", "--show-toplevel", check=False)
        if result.returncode != 0:
            return None
        lines = result.stdout.decode("utf-8", "surrogateescape").splitlines()
        if len(lines) < 2 or lines[0].strip() != "false":
            return None
        return Path(lines[1].strip())

    def rev_parse(self, ref: str) -> str | None:
        """The commit `ref` names, or None when it does not resolve."""
        result = self.run("rev-parse", "--verify", "--quiet", "--end-of-options",
                          f"{ref}^{{commit}}", check=False)
        if result.returncode != 0:
            return None
        return result.stdout.decode("ascii").strip()

    def current_branch(self) -> str | None:
        result = self.run("symbolic-ref", "--quiet", "--short", "HEAD", check=False)
        if result.returncode != 0:
            return None
        return result.stdout.decode("utf-8", "surrogateescape").strip()

    def config_get(self, key: str) -> str | None:
        result = self.run("config", "--get", key, check=False)
        if result.returncode != 0:
            return None
        return result.stdout.decode("utf-8", "surrogateescape").strip()

    def upstream_branch(self, branch: str, remote: str) -> str:
        """The upstream branch `branch` tracks on `remote` (its own name when not configured)."""
        merge_ref = self.config_get(f"branch.{branch}.merge")
        if merge_ref and self.config_get(f"branch.{branch}.remote") == remote:
            return merge_ref.removeprefix("refs/heads/")
        return branch

    def remote_url(self, remote: str) -> str | None:
        result = self.run("remote", "get-url", "--", remote, check=False)
        if result.returncode != 0:
            return None
        return result.stdout.decode("utf-8", "surrogateescape").strip()

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
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

    def rev_list(self, include: str, exclude: str | None = None) -> list[str]:
        """Commits reachable from `include` but not `exclude`, oldest first."""
        args = ["rev-list", "--reverse", include]
        if exclude:
            args.append(f"^{exclude}")
        return self.run(*args).stdout.decode("ascii").split()

    def count(self, include: str, exclude: str) -> int:
        return int(self.out("rev-list", "--count", include, f"^{exclude}"))

    def tree_of(self, rev: str) -> str:
        return self.out("rev-parse", "--verify", f"{rev}^{{tree}}")

    def status(self) -> list[StatusEntry]:
        """Every changed, unmerged or untracked (not ignored) path of the work tree."""
        raw = self.run(
            "status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames",
            "--ignore-submodules=none",
        ).stdout
        entries: list[StatusEntry] = []
        for record in raw.split(b"\0"):
            if len(record) < 4:
                continue
            entries.append(StatusEntry(record[:2].decode("ascii"), decode_path(record[3:])))
        return entries

    def merge_in_progress(self) -> bool:
        return self.rev_parse("MERGE_HEAD") is not None

    def ls_tree(self, rev: str) -> dict[str, Entry]:
        """Every leaf of a commit's tree with mode, size and object id."""
        raw = self.run("ls-tree", "-r", "-z", "-l", "--full-tree", rev).stdout
        entries: dict[str, Entry] = {}
        for record in raw.split(b"\0"):
            if not record:
                continue
            meta, _, path = record.partition(b"\t")
            mode, _kind, oid, size = meta.split()
            entries[decode_path(path)] = Entry(
                mode=int(mode, 8),
                size=None if size == b"-" else int(size),
                oid=oid.decode("ascii"),
            )
        return entries

    def tree_view(self, rev: str) -> TreeView:
        return TreeView(self.ls_tree(rev), GitBlobs(self))

    def commit_changes(self, commits: Sequence[str]) -> list[Change]:
        """The changed paths of every commit (each parent of a merge), new side with sizes."""
        if not commits:
            return []
        raw = self.run(
            "diff-tree", "--stdin", "-m", "-r", "--root", "--raw", "-z", "--no-renames",
            "--no-ext-diff", input=("\n".join(commits) + "\n").encode("ascii"),
        ).stdout
        pending: list[tuple[str, str, int, str | None]] = []
        tokens = raw.split(b"\0")
        commit = ""
        i = 0
        while i < len(tokens):
            token = tokens[i]
            if token.startswith(b":"):
                fields = token[1:].split()
                new_mode, new_oid = int(fields[1], 8), fields[3]
                path = decode_path(tokens[i + 1])
                deleted = new_mode == 0 or ZERO_OID.match(new_oid) is not None
                oid = None if deleted else new_oid.decode("ascii")
                pending.append((commit, path, new_mode, oid))
                i += 2
                continue
            if token:
                commit = token.decode("ascii").strip()
            i += 1
        sizes = self.blob_sizes([oid for *_, oid in pending if oid is not None])
        return [
            Change(commit=c, path=p, entry=None if oid is None else Entry(
                mode=mode, size=sizes.get(oid), oid=oid))
            for c, p, mode, oid in pending
        ]

    def blob_sizes(self, oids: Iterable[str]) -> dict[str, int]:
        wanted = sorted(set(oids))
        if not wanted:
            return {}
        raw = self.run(
            "cat-file", "--batch-check=%(objectname) %(objecttype) %(objectsize)",
            input=("\n".join(wanted) + "\n").encode("ascii"),
        ).stdout
        sizes: dict[str, int] = {}
        for line in raw.decode("ascii").splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] == "blob":
                sizes[parts[0]] = int(parts[2])
        return sizes

    def read_blobs(self, oids: Sequence[str]) -> dict[str, bytes]:
        wanted = sorted(set(oids))
        if not wanted:
            return {}
        raw = self.run("cat-file", "--batch", input=("\n".join(wanted) + "\n").encode("ascii")
                       ).stdout
        blobs: dict[str, bytes] = {}
        pos = 0
        while pos < len(raw):
            eol = raw.index(b"\n", pos)
            header = raw[pos:eol].split()
            pos = eol + 1
            if len(header) != 3:  # "<oid> missing"
                continue
            size = int(header[2])
            blobs[header[0].decode("ascii")] = raw[pos:pos + size]
            pos += size + 1
        return blobs

    def hash_files(self, paths: Sequence[str]) -> dict[str, str]:
        """Blob ids of work-tree files as they are on disk (no filters applied)."""
        if not paths:
            return {}
        raw = self.run("hash-object", "--no-filters", "--stdin-paths",
                       input=b"".join(encode_path(p) + b"\n" for p in paths)).stdout
        return dict(zip(paths, raw.decode("ascii").split(), strict=True))

    def list_files(self) -> list[str]:
        """Work-tree paths git would consider: tracked ones and untracked ones not ignored."""
        raw = self.run("ls-files", "-z", "--cached", "--others", "--exclude-standard",
                       "--deduplicate").stdout
        return sorted({decode_path(p) for p in raw.split(b"\0") if p})

    def write_tree(self) -> str:
        return self.out("write-tree")

    # -- network -----------------------------------------------------------------------

    def fetch(self, remote: str, branch: str, into: str, timeout: float | None = None
              ) -> tuple[FetchOutcome, str]:
        """Fetch one upstream branch into `into` (forced: the planner judges rewinds)."""
        result = self.run(
            "fetch", "--no-tags", "--no-write-fetch-head", "--no-recurse-submodules",
            "--quiet", "--end-of-options", remote, f"+refs/heads/{branch}:{into}",
            timeout=timeout, check=False,
        )
        if result.returncode == 0:
            return FetchOutcome.OK, ""
        text = result.stderr
        if "couldn't find remote ref" in text.lower():
            return FetchOutcome.MISSING_BRANCH, text
        if _looks_like_bad_objects(text):
            return FetchOutcome.BAD_OBJECTS, text
        return FetchOutcome.UNREACHABLE, text

    def push(self, remote: str, commit: str, branch: str, timeout: float | None = None
             ) -> tuple[PushOutcome, str]:
        """Push one exact commit to the upstream branch, never forced."""
        result = self.run(
            "push", "--porcelain", "--no-verify", "--end-of-options", remote,
            f"{commit}:refs/heads/{branch}", timeout=timeout, check=False,
        )
        if result.returncode == 0:
            return PushOutcome.OK, ""
        text = result.stderr + "\n" + result.stdout.decode("utf-8", "replace")
        lowered = text.lower()
        if "[rejected]" in lowered or "non-fast-forward" in lowered or "fetch first" in lowered:
            return PushOutcome.REJECTED, redact(text.strip())
        return PushOutcome.UNREACHABLE, redact(text.strip())

    # -- refs, worktrees, merges ------------------------------------------------------------

    def update_ref(self, ref: str, new: str, old: str | None = None, reason: str = "memsync"
                   ) -> None:
        """Move `ref` to `new`, only if it still points at `old` (compare-and-swap)."""
        args = ["update-ref", "-m", reason, ref, new]
        if old is not None:
            args.append(old)
        self.run(*args)

    def delete_ref(self, ref: str) -> None:
        self.run("update-ref", "-d", ref, check=False)

    def refs(self, prefix: str) -> dict[str, str]:
        raw = self.run("for-each-ref", "--format=%(refname)%00%(objectname)", prefix).stdout
        found: dict[str, str] = {}
        for line in raw.decode("utf-8", "surrogateescape").splitlines():
            name, _, oid = line.partition("\0")
            found[name] = oid
        return found

    def worktree_add(self, path: Path, commit: str) -> None:
        self.run("worktree", "add", "--detach", "--quiet", str(path), commit)

    def worktree_remove(self, path: Path) -> None:
        self.run("worktree", "remove", "--force", "--force", str(path), check=False)

    def worktree_prune(self) -> None:
        self.run("worktree", "prune", check=False)

    def worktrees(self) -> list[Path]:
        raw = self.run("worktree", "list", "--porcelain", "-z").stdout
        return [Path(decode_path(t[len(b"worktree "):])) for t in raw.split(b"\0")
                if t.startswith(b"worktree ")]

    def identity_config(self) -> list[tuple[str, str]]:
        """The committer for merge commits: the root's own identity, else memsync's."""
        name = self.config_get("user.name")
        email = self.config_get("user.email")
        return [("user.name", name or "memsync"), ("user.email", email or "memsync@localhost")]

    def unmerged_paths(self) -> list[str]:
        raw = self.run("diff", "--name-only", "--diff-filter=U", "-z", "--no-ext-diff").stdout
        return sorted({decode_path(p) for p in raw.split(b"\0") if p})

    def read_tree_update(self, old: str, new: str) -> None:
        """Move index and work tree from `old` to `new` (two-tree merge: only changed files)."""
        self.run("read-tree", "-m", "-u", old, new)

    def reset_to(self, commit: str) -> None:
        """Force index and work tree to `commit` (recovery of our own interrupted write)."""
        self.run("read-tree", "--reset", "-u", commit)


class GitBlobs:
    """A BlobSource backed by `git cat-file --batch`."""

    def __init__(self, git: Git) -> None:
        self._git = git

    def read_many(self, oids: Sequence[str]) -> Mapping[str, bytes]:
        return self._git.read_blobs(oids)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.communicate()


def _looks_like_bad_objects(text: str) -> bool:
    lowered = text.lower()
    return any(k in lowered for k in ("fsck error", "fsckobjects", "error in object",
                                      "did not send all necessary objects", "bad object"))


def last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "no answer"
