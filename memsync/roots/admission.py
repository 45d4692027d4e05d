"""Signed admission (`roots.*.admission`): who may write a root's history.

With `require: signed`, every commit a sync would admit (the range `upstream ^local`: each
one, merges included, not only the tip) and every local commit a cycle would push (`head
^upstream`) must carry an SSH signature (git's `gpg.format=ssh`) by a key in `signers`,
checked in process by `validators.commitsig`; otherwise the sync is refused with
`unsigned-commit`, `untrusted-signer` or `bad-signature`, one problem per commit naming it
(the first `MAX_NAMED`, then a count). Nothing runs gpg or ssh-keygen, and nothing reads a
root's `gpg.*` config: signers come only from memsync's config, inline or from files of
keys (one a line, blank lines and `#` comments allowed) read at each cycle, so a commit
can never add its own signer.

The trust anchor: what the root holds when the policy is turned on stays trusted (the
ranges above never reach it again), so turning it on over an unsigned history refuses
nothing old. `admission.json` beside the root's state records that moment and the
trusted upstream then (`anchor`), for `status` to say so (`roots.anchor`); turning the
policy off drops the record, so turning it on again anchors anew.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from memsync.config.model import AdmissionSettings
from memsync.errors import SecretError
from memsync.validators.problems import Problem
from memsync.values import value

if TYPE_CHECKING:  # cryptography loads only for a root that requires signatures
    from memsync.secrets import SecretRef
    from memsync.transports.git import Git
    from memsync.validators.commitsig import Signers

MAX_NAMED = 20  # commits named one by one in a refusal; the rest are counted
BATCH = 1000  # commit objects read per `cat-file` process (bounds what one read holds)


@value
class SignedAdmission:
    """The pinned signers of one root whose admission requires signatures."""

    root: str
    signers: Signers

    @classmethod
    def of(cls, root: str, settings: AdmissionSettings) -> SignedAdmission | None:
        """The policy (None when `require` is off); SecretError naming the file and line
        for a signer that cannot be read or is not a usable public key."""
        if settings.require != "signed":
            return None
        from memsync.validators.commitsig import Signers  # noqa: PLC0415 - cryptography

        lines = list(_signer_lines(root, settings.signers))
        try:
            return cls(root, Signers.of(line for _where, line in lines))
        except ValueError:
            pass
        for where, line in lines:  # the same parse, one by one, to name the bad one
            try:
                Signers.of([line])
            except ValueError as exc:
                raise SecretError(
                    f"roots.{root}.admission.signers: {where}: {exc}",
                    hint="list OpenSSH public keys (the .pub file's line), one a line",
                ) from None
        raise SecretError(f"roots.{root}.admission.signers: unreadable")  # pragma: no cover

    def judge(self, git: Git, include: str, exclude: str | None) -> tuple[Problem, ...]:
        """A problem for every commit in `include ^exclude` no pinned signer signed."""
        from memsync.validators.commitsig import verify  # noqa: PLC0415

        problems: list[Problem] = []
        refused = 0
        for oid, raw in _commits(git, git.rev_list(include, exclude)):
            verdict = verify(raw, self.signers) if raw is not None else None
            if verdict is not None and verdict.trusted:
                continue
            refused += 1
            if refused > MAX_NAMED:
                continue
            if verdict is None:
                problems.append(Problem("bad-signature", None, None, f"commit {oid}: unreadable"))
                continue
            code = verdict.code or "bad-signature"
            subject = _subject(raw or b"")
            problems.append(
                Problem(code, None, None, f"commit {oid} ({subject}): {verdict.detail}")
            )
        if refused > MAX_NAMED:
            more = refused - MAX_NAMED
            last = problems[-1].code
            message = f"and {more} more commit(s) without a pinned signer's valid signature"
            problems.append(Problem(last, None, None, message))
        return tuple(problems)


def _signer_lines(root: str, signers: Sequence[str | SecretRef]) -> Iterator[tuple[str, str]]:
    """(where, key line) for each listed key: inline, or each key line of a file."""
    for index, signer in enumerate(signers):
        if isinstance(signer, str):
            yield f"entry {index}", signer
            continue
        from memsync.secrets import resolve  # noqa: PLC0415 - a file of signers only

        try:
            text = resolve(signer)
            if signer.kind == "file":
                _not_writable_by_others(Path(signer.ref))
        except SecretError as exc:
            raise SecretError(f"roots.{root}.admission.signers: {exc.message}") from None
        for number, line in enumerate(text.splitlines(), 1):
            stripped = line.strip()
            if stripped and not stripped.startswith("#"):
                yield f"{signer.describe()} line {number}", stripped


def _not_writable_by_others(path: Path) -> None:
    """Whoever can write a signers file can add a signer: it must be ours (or root's) and
    writable by no one else (`memsync doctor` says the same, with the chmod to run)."""
    try:
        info = path.stat()
    except OSError as exc:
        raise SecretError(f"cannot stat {path}: {exc.strerror}") from None
    if info.st_uid not in (os.geteuid(), 0) or stat.S_IMODE(info.st_mode) & 0o022:
        raise SecretError(
            f"{path} can be changed by another user (owner uid {info.st_uid}, mode "
            f"{stat.S_IMODE(info.st_mode):04o}): whoever can write it can add a signer",
            hint=f"chmod go-w {path}",
        )


def _commits(git: Git, oids: Sequence[str]) -> Iterator[tuple[str, bytes | None]]:
    for start in range(0, len(oids), BATCH):
        chunk = oids[start : start + BATCH]
        found = git.commit_objects(chunk)
        for oid in chunk:
            yield oid, found.get(oid)


def _subject(raw: bytes) -> str:
    """The commit's first message line, printable and short (it is the author's text)."""
    _headers, _sep, message = raw.partition(b"\n\n")
    first = message.split(b"\n", 1)[0].decode("utf-8", "replace")
    shown = "".join(ch if ch.isprintable() else "?" for ch in first)
    return shown[:60] + ("…" if len(shown) > 60 else "")
