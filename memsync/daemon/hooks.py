"""Hooks: programs and webhooks from memsync's own config run on a status transition.

A transition (`daemon.transitions`) is offered to every hook that wants it; each (hook,
transition) pair waits in one bounded queue (full: dropped, with a warning) and a few
worker tasks run them, off the cycle path: a hook never blocks or delays a sync.

- `command`: the argv (never a shell) through the process box (`run_process`: a deadline,
  its group killed at it, outputs capped), the result document on stdin, a small clean
  environment plus `MEMSYNC_HOOK_ROOT` or `MEMSYNC_HOOK_VIEW`, `MEMSYNC_HOOK_STATUS`,
  `MEMSYNC_HOOK_PREVIOUS_STATUS` and `MEMSYNC_HOOK_EVENT`. It runs in the state dir.
- `webhook`: the document POSTed through the HTTP box (a token only over https or
  loopback http, no redirect), tried up to `TRIES` times on a transient failure (network,
  5xx, 429) with exponential back-off and jitter, all within the hook's `timeout`.

A failure is logged once per transition and hook; a root's content never names a hook.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from memsync.config.sections import HookSettings, WebhookSettings
from memsync.daemon.transitions import Transition
from memsync.errors import ConfigError
from memsync.redaction import redact_secrets
from memsync.secrets import resolve_header
from memsync.tlstrust import no_trust_store
from memsync.transports.process import run_process

log = logging.getLogger("memsync.daemon.hooks")

QUEUE_SIZE = 64  # pending hook runs; past it a run is dropped with a warning
WORKERS = 4  # hook runs at once
TRIES = 3  # a webhook's attempts
BACKOFF = 1.0  # seconds before the second attempt; doubled each time, with jitter
OUTPUT_KEPT = 4096  # bytes of a command's output kept (the tail of stderr is logged)
ENV_PASSED = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TZ", "XDG_RUNTIME_DIR")


class HookFailed(Exception):
    """This hook run failed; the message says why (logged once)."""


class Hooks:
    """The configured hooks and the queue of runs; `serve` is the daemon's task."""

    def __init__(self, hooks: tuple[HookSettings, ...], state_dir: Path) -> None:
        self.hooks = hooks
        self.state_dir = state_dir
        self.queue: asyncio.Queue[tuple[int, HookSettings, Transition]] = asyncio.Queue(QUEUE_SIZE)
        self.runs = 0  # runs finished (ok or not)
        self.dropped = 0

    def configure(self, hooks: tuple[HookSettings, ...], state_dir: Path) -> None:
        """A reload: transitions from now on go to these hooks (queued runs still run)."""
        self.hooks, self.state_dir = hooks, state_dir

    def offer(self, transition: Transition) -> None:
        """Queue a run of every hook that wants `transition`; never waits."""
        for index, hook in enumerate(self.hooks):
            if not hook.wants(transition.kind, transition.name, transition.status):
                continue
            try:
                self.queue.put_nowait((index, hook, transition))
            except asyncio.QueueFull:
                self.dropped += 1
                log.warning(
                    "hooks[%d]: %d hook run(s) waiting; dropped the one for %s %s -> %s",
                    index,
                    QUEUE_SIZE,
                    transition.kind,
                    transition.name,
                    transition.status,
                    extra={"memsync": {transition.kind: transition.name, "event": "hook-dropped"}},
                )

    async def serve(self) -> None:
        """Run queued hooks, `WORKERS` at a time, until cancelled."""
        async with asyncio.TaskGroup() as workers:
            for _ in range(WORKERS):
                workers.create_task(self._work())

    async def _work(self) -> None:
        while True:
            index, hook, transition = await self.queue.get()
            try:
                await run_hook(hook, transition, self.state_dir, index)
            except HookFailed as exc:
                log.warning(
                    "hooks[%d] for %s %s -> %s failed: %s",
                    index,
                    transition.kind,
                    transition.name,
                    transition.status,
                    exc,
                    extra={
                        "memsync": {
                            transition.kind: transition.name,
                            "event": "hook-failed",
                            "fields": {"hook": index, "status": transition.status},
                        }
                    },
                )
            except Exception:  # a bug in one run must not end the others
                log.exception("hooks[%d]: internal error", index)
            finally:
                self.runs += 1
                self.queue.task_done()


async def run_hook(
    hook: HookSettings, transition: Transition, state_dir: Path, index: int = 0
) -> None:
    """Run one hook for one transition: its command, then its webhook (both when both are
    set; the first failure is reported after both were tried)."""
    document = transition.document()
    failures: list[str] = []
    seconds = hook.timeout.total_seconds()
    if hook.command is not None:
        try:
            await asyncio.to_thread(
                _command, hook.command, transition, document, state_dir, seconds
            )
        except HookFailed as exc:
            failures.append(str(exc))
    if hook.webhook is not None:
        try:
            await _webhook(hook.webhook, document, seconds, f"hooks[{index}].webhook.token")
        except HookFailed as exc:
            failures.append(str(exc))
    if failures:
        raise HookFailed("; ".join(failures))


def hook_env(transition: Transition, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The command's environment: a few of the daemon's (no secrets), and what happened."""
    source = os.environ if environ is None else environ
    env = {key: source[key] for key in ENV_PASSED if key in source}
    env[f"MEMSYNC_HOOK_{transition.kind.upper()}"] = transition.name
    env["MEMSYNC_HOOK_STATUS"] = transition.status
    env["MEMSYNC_HOOK_PREVIOUS_STATUS"] = transition.previous or ""
    env["MEMSYNC_HOOK_EVENT"] = transition.event
    return env


def _command(
    argv: tuple[str, ...],
    transition: Transition,
    document: Mapping[str, Any],
    cwd: Path,
    seconds: float,
) -> None:
    body = json.dumps(document, ensure_ascii=False).encode() + b"\n"
    try:
        done = run_process(
            argv,
            cwd=cwd,
            env=hook_env(transition),
            seconds=seconds,
            input=body,
            keep=OUTPUT_KEPT,
        )
    except OSError as exc:  # the program is missing or not executable
        raise HookFailed(f"command {argv[0]!r} could not start: {exc.strerror}") from exc
    if done.expired:
        raise HookFailed(f"command {argv[0]!r} did not finish in {seconds:g}s and was killed")
    if done.returncode != 0:
        tail = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:]
        said = f": {redact_secrets(tail[0])[:200]}" if tail else ""
        raise HookFailed(f"command {argv[0]!r} exited {done.returncode}{said}")


async def _webhook(
    webhook: WebhookSettings, document: Mapping[str, Any], seconds: float, where: str
) -> None:
    with no_trust_store():  # (aiohttp's context for ssl=False: see tlstrust.py)
        from memsync.transports.http import HttpClient, HttpError  # noqa: PLC0415 - webhooks

    token: str | None = None
    if webhook.token is not None:
        try:
            token = resolve_header(webhook.token, where=where)
        except ConfigError as exc:
            raise HookFailed(exc.message) from exc
    deadline = asyncio.get_running_loop().time() + seconds
    try:
        async with HttpClient() as client:
            posted = await client.post_json_retrying(
                webhook.url,
                document=document,
                token=token,
                deadline=deadline,
                attempts=TRIES,
                backoff=BACKOFF,
            )
    except HttpError as exc:
        raise HookFailed(f"webhook: {exc.message} (after {exc.attempts} attempt(s))") from exc
    if posted.status >= 300:
        problem = f"the server answered {posted.status}"
        raise HookFailed(f"webhook: {problem} (after {posted.attempts} attempt(s))")
