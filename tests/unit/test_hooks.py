"""Hooks: which transitions a hook wants, the environment a command gets, the bounded
queue that keeps them off the cycle path."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from pathlib import Path

import pytest

from memsync.config.sections import HookSettings
from memsync.daemon.hooks import QUEUE_SIZE, Hooks, hook_env
from memsync.daemon.transitions import Transitions


def hook(roots: set[str] | None = None, views: set[str] | None = None) -> HookSettings:
    return HookSettings(
        on=frozenset({"synced", "stale"}),
        roots=frozenset(roots) if roots is not None else None,
        views=frozenset(views) if views is not None else None,
        command=("/bin/true",),
        webhook=None,
        timeout=timedelta(seconds=5),
    )


def test_a_hook_is_narrowed_by_roots_and_views() -> None:
    assert hook().wants("root", "a", "synced") and hook().wants("view", "v", "stale")
    assert not hook().wants("root", "a", "current")
    assert hook(roots={"a"}).wants("root", "a", "synced")
    assert not hook(roots={"a"}).wants("view", "v", "stale")
    assert hook(views={"v"}).wants("view", "v", "stale")
    assert not hook(views={"v"}).wants("root", "a", "synced")
    both = hook(roots={"a"}, views={"v"})
    assert both.wants("root", "a", "synced") and both.wants("view", "v", "stale")
    assert not both.wants("root", "b", "synced")


def test_a_command_gets_what_happened_and_none_of_the_daemons_secrets() -> None:
    change = Transitions().observe("view", "team", "stale", "m", {"view": "team"})
    assert change is not None
    env = hook_env(change, {"PATH": "/bin", "HUB_TOKEN": "msk_x", "OPENAI_API_KEY": "k"})
    assert env == {
        "PATH": "/bin",
        "MEMSYNC_HOOK_VIEW": "team",
        "MEMSYNC_HOOK_STATUS": "stale",
        "MEMSYNC_HOOK_PREVIOUS_STATUS": "",
        "MEMSYNC_HOOK_EVENT": "first",
    }


def test_a_full_queue_drops_with_a_warning_and_never_waits(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="memsync.daemon.hooks")

    async def flood() -> Hooks:
        hooks = Hooks((hook(),), tmp_path)  # not served: nothing leaves the queue
        seen = Transitions()
        for index in range(QUEUE_SIZE + 3):
            change = seen.observe("root", "a", "synced", "m", {"head": f"{index:040x}"})
            assert change is not None
            hooks.offer(change)
        return hooks

    logger = logging.getLogger("memsync.daemon.hooks")
    logger.addHandler(caplog.handler)  # whatever an in-process CLI run did to propagation
    try:
        hooks = asyncio.run(flood())
    finally:
        logger.removeHandler(caplog.handler)
    assert hooks.queue.qsize() == QUEUE_SIZE and hooks.dropped == 3
    assert len({id(r) for r in caplog.records if "dropped" in r.getMessage()}) == 3
