"""Views and roots are separate scope namespaces: `read:team` reads view `team` and nothing
of root `team`; `root:team` follows root `team` and reads no view. A real hub on loopback
(the fixtures of `test_hub.py`) and the real CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from memsync.hub.tokens import hub_init
from memsync.wire.hub import ErrorBody, TokenCreated, ViewList
from tests.integration.test_hub import Hub, build, hub, subscribe

__all__ = ["hub"]  # the fixture of test_hub.py, which pytest finds here by name

SHA = "a" * 40


async def refusal(hub: Hub, token: str, query: str) -> tuple[int, str]:
    """The status and error code of a subscription expected to be refused (an accepted one
    is closed at once rather than read, since it would never end)."""
    url = f"{hub.url}/v1/events{query}"
    async with hub.session.get(url, headers={"Authorization": f"Bearer {token}"}) as resp:
        if resp.status == 200:
            return 200, "subscribed"
        return resp.status, ErrorBody.model_validate_json(await resp.read()).error.code


async def test_a_view_scope_does_not_reach_a_root_of_the_same_name(hub: Hub) -> None:
    assert (await hub.publish("team", *build("team", 1))).status == 201
    for scope in ("read:team", "read:*", "publish:team", "publish:*"):
        token = hub.token(scope)
        assert (await hub.get("/v1/views/team/manifest", token)).status == 200
        assert await refusal(hub, token, "?root=team") == (403, "forbidden"), scope
        assert (await hub.notify("team", {"commit": SHA}, token)).status == 403, scope
    stream, response = await subscribe(hub, hub.token("read:team"))  # all it may see
    assert (await hub.notify("team", {"commit": SHA})).status == 202
    assert (await hub.publish("team", *build("team", 2))).status == 201
    kind, data = await stream.next()  # root team's upstream event, sent first, never came
    assert kind == "revision" and json.loads(data)["view_id"] == "team"
    response.close()


async def test_a_root_scope_follows_its_root_and_reads_no_view(hub: Hub) -> None:
    assert (await hub.publish("team", *build("team", 1))).status == 201
    watcher, notifier = hub.token("root:team"), hub.token("notify:team")
    for token in (watcher, notifier):
        for suffix in ("manifest", "package", "revisions/1/manifest", "revisions/1/package"):
            hidden = await hub.get(f"/v1/views/team/{suffix}", token)
            absent = await hub.get(f"/v1/views/nothing/{suffix}", token)
            assert hidden.status == absent.status == 404
            assert hidden.body == absent.body
        listed = ViewList.model_validate_json((await hub.get("/v1/views", token)).body)
        assert listed.views == []
        assert (await hub.publish("team", *build("team", 2), token=token)).status == 404
        assert await refusal(hub, token, "?root=ops") == (403, "forbidden")
    assert (await hub.notify("team", {"commit": SHA}, watcher)).status == 403

    followers = [
        await subscribe(hub, token, "?root=team")
        for token in (watcher, notifier, hub.token("root:*"), hub.token("notify:*"), hub.admin)
    ]
    everything = await subscribe(hub, watcher)  # all it may see: root team, no view
    assert (await hub.notify("ops", {"commit": "b" * 40})).status == 202
    assert (await hub.publish("team", *build("team", 2))).status == 201
    assert (await hub.notify("team", {"commit": SHA}, notifier)).status == 202
    for stream, response in [*followers, everything]:
        kind, data = await stream.next()
        assert kind == "upstream" and json.loads(data) == {"root": "team", "commit": SHA}
        response.close()


def memsync(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memsync", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_cli_creates_and_lists_root_scopes(tmp_path: Path) -> None:
    data = tmp_path / "hub"
    hub_init(data)
    create = ("hub", "token", "create", "--data", str(data))
    made = memsync(*create, "--scope", "root:team", "--scope", "notify:ops", "--json")
    assert made.returncode == 0, made.stderr
    assert TokenCreated.model_validate_json(made.stdout).scopes == ["notify:ops", "root:team"]
    wrong = memsync(*create, "--scope", "roots:team")
    assert wrong.returncode != 0 and "root:<root>" in wrong.stderr
    helped = memsync("hub", "token", "create", "--help")
    assert helped.returncode == 0
    for word in ("read:<view>", "publish:<view>", "root:<root>", "notify:<root>", "admin"):
        assert word in helped.stdout, word
