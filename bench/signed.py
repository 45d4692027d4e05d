"""S1-S3: what signed admission (`admission.require: signed`) adds to a sync (issue 19).

An upstream gets N incoming commits, each SSH-signed the way `git commit -S` with
`gpg.format=ssh` signs (an SSHSIG in the namespace `git` in a `gpgsig` header; the tip is
checked with `git verify-commit` and an allowed-signers file, so they are real git
signatures), made here in process so that 10k of them take seconds, not 10k ssh-keygen
runs. A fresh copy of the same root then syncs them, once with admission off and once
with `signed`, interleaved, in the same run.

S1/S2: the signed sync against the same sync with admission off, at 1k and 10k commits
(the target is the time added per commit: one Ed25519 verification, about 0.05 ms on an
idle core and several times that on a loaded one, is most of it).
S3: the gate's own per-commit cost (`SignedAdmission.judge` over the range: rev-list,
batched cat-file, verification) at 10k against 1k commits: O(range) means about 1.

    python -m bench signed            # MEMSYNC_BENCH_RUNS=N for N runs per side (default 3)
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import statistics
import struct
import tempfile
import time
import zlib
from dataclasses import replace
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from bench.sync import clone, make_upstream, settings
from memsync.config.model import AdmissionSettings
from memsync.roots.admission import SignedAdmission
from memsync.roots.cycle import SyncOptions, sync_root
from memsync.transports.git import Git
from tests.kit import git

RUNS = int(os.environ.get("MEMSYNC_BENCH_RUNS", "3"))
SIZES = (1_000, 10_000)


def _string(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


class Signer:
    """An Ed25519 key that signs commit payloads as ssh-keygen -Y sign -n git does."""

    def __init__(self) -> None:
        self.key = Ed25519PrivateKey.generate()
        self.public = (
            self.key.public_key().public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH).decode()
        )
        self.blob = base64.b64decode(self.public.split()[1])

    def gpgsig(self, payload: bytes) -> bytes:
        digest = hashlib.sha512(payload).digest()
        signed = b"SSHSIG" + _string(b"git") + _string(b"") + _string(b"sha512") + _string(digest)
        signature = _string(b"ssh-ed25519") + _string(self.key.sign(signed))
        blob = (
            b"SSHSIG"
            + struct.pack(">I", 1)
            + _string(self.blob)
            + _string(b"git")
            + _string(b"")
            + _string(b"sha512")
            + _string(signature)
        )
        text = base64.b64encode(blob)
        lines = [b"-----BEGIN SSH SIGNATURE-----"]
        lines += [text[i : i + 70] for i in range(0, len(text), 70)]
        lines.append(b"-----END SSH SIGNATURE-----")
        return b"gpgsig " + b"\n ".join(lines) + b"\n"


def _write_loose(objects: Path, kind: bytes, body: bytes) -> str:
    framed = kind + b" %d\0" % len(body) + body
    oid = hashlib.sha1(framed).hexdigest()  # noqa: S324 - git's object ids
    target = objects / oid[:2] / oid[2:]
    target.parent.mkdir(exist_ok=True)
    if not target.exists():
        target.write_bytes(zlib.compress(framed, 1))
    return oid


def signed_history(upstream: Path, signer: Signer, count: int) -> tuple[str, str]:
    """`count` signed commits on the upstream's main, each toggling one memory file.
    Returns (base, tip)."""
    base = git(upstream, "rev-parse", "main")
    listing = git(upstream, "ls-tree", "main")
    blob = git(upstream, "hash-object", "-w", "--stdin", input=b"# Bench\n\nsigned fact\n")
    extra = f"100644 blob {blob}\tMEMORY_bench.md\n"
    trees = [
        git(upstream, "mktree", input=(listing + "\n").encode()),
        git(upstream, "mktree", input=(listing + "\n" + extra).encode()),
    ]
    objects = upstream / "objects"
    parent = base
    for i in range(count):
        when = b"%d +0000" % (1_700_000_000 + i)
        head = b"tree %s\nparent %s\n" % (trees[(i + 1) % 2].encode(), parent.encode())
        head += b"author Bench <b@e> " + when + b"\ncommitter Bench <b@e> " + when + b"\n"
        message = b"\nbench %d\n" % i
        raw = head + signer.gpgsig(head + message) + message
        parent = _write_loose(objects, b"commit", raw)
    git(upstream, "update-ref", "refs/heads/main", parent)
    allowed = upstream / "allowed_signers"
    allowed.write_text(f"bench@example.invalid {signer.public}\n")
    git(
        upstream,
        *("-c", "gpg.format=ssh", "-c", f"gpg.ssh.allowedSignersFile={allowed}"),
        *("verify-commit", parent),
    )  # git itself accepts the bench's signatures
    return base, parent


def _timed_sync(pristine: Path, run: Path, admission: AdmissionSettings) -> float:
    shutil.copytree(pristine, run, symlinks=True)
    cfg = replace(settings(run / "root"), admission=admission)
    started = time.perf_counter()
    result = sync_root(cfg, run / "state", SyncOptions(no_push=True))
    took = (time.perf_counter() - started) * 1000
    if result.status != "synced":
        raise RuntimeError(f"expected synced, got {result.status}: {result.message}")
    shutil.rmtree(run)
    return took


def scenario(base: Path, count: int) -> dict[str, Any]:
    upstream = make_upstream(base, 100)
    pristine = base / "pristine"
    pristine.mkdir()
    root = clone(upstream, pristine / "root")
    sync_root(settings(root), pristine / "state", SyncOptions())
    signer = Signer()
    first, tip = signed_history(upstream, signer, count)
    signed = AdmissionSettings("signed", (signer.public,))
    SignedAdmission.of("bench", signed)  # the import of cryptography: once, as in the daemon
    off, on = [], []
    for i in range(RUNS):
        order = [(off, AdmissionSettings("off", ())), (on, signed)]
        for times, admission in order if i % 2 == 0 else order[::-1]:
            times.append(_timed_sync(pristine, base / "run", admission))
    # The gate alone, over the fetched range of a root that has it.
    shutil.copytree(pristine, base / "judge", symlinks=True)
    judged = Git(base / "judge" / "root", timeout=600)
    judged.run("fetch", "-q", "origin")
    policy = SignedAdmission.of("bench", signed)
    assert policy is not None
    judge = []
    for _ in range(RUNS):
        started = time.perf_counter()
        problems = policy.judge(judged, tip, first)
        judge.append((time.perf_counter() - started) * 1000)
        assert not problems, problems
    return {"off": off, "on": on, "judge": judge, "count": count}


def run() -> list[dict[str, Any]]:
    found = []
    with tempfile.TemporaryDirectory(prefix="memsync-bench-signed-") as tmp:
        for count in SIZES:
            where = Path(tmp) / str(count)
            where.mkdir()
            found.append(scenario(where, count))
    rows = []
    for label, got in zip(("S1", "S2"), found, strict=True):
        on, off = statistics.median(got["on"]), statistics.median(got["off"])
        added = (on - off) / got["count"]
        rows.append(
            {
                "name": f"{label} sync of {got['count']} signed commits, signed (vs off): "
                f"+{added:.2f} ms/commit",
                "memsync_ms": on,
                "raw_ms": off,
                "ratio": on / off,
                "target": "added <= 0.5 ms/commit (ed25519 verification is the floor)",
                "runs": RUNS,
                "added_ms_per_commit": added,
                "judge_ms": statistics.median(got["judge"]),
            }
        )
    small, large = found
    per_small = statistics.median(small["judge"]) / small["count"]
    per_large = statistics.median(large["judge"]) / large["count"]
    rows.append(
        {
            "name": f"S3 gate per commit, {large['count']} vs {small['count']} (ms/commit)",
            "memsync_ms": per_large,
            "raw_ms": per_small,
            "ratio": per_large / per_small,
            "target": "<= 1.5 (O(range))",
            "runs": RUNS,
        }
    )
    return rows
