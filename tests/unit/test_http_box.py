"""Every HTTP request the product makes goes through the HTTP box, and every hub URL is the
hub client's (issue 20 item 3).

Read from the source: outside `memsync/transports/` no module names aiohttp's client (a
session, a connector, `aiohttp.request`, …) or another HTTP client library, and outside the
hub client (and the hub server, which serves these routes) no module builds a hub URL: no
path constant under `/v1/` other than the control socket's, no f-string or concatenation
naming `/v1/`, `/manifest`, `/package`, `/revisions` or `/notify`. Also the hub client's
URLs themselves, and that importing it loads no aiohttp.
"""

from __future__ import annotations

import ast
import functools
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import memsync
from memsync.transports.hubclient import (
    events_name_root,
    notify_url,
    view_events_url,
    view_url,
)

PACKAGE = Path(memsync.__file__).parent
BOX = PACKAGE / "transports"
HUB_CLIENT = BOX / "hubclient.py"
HUB_SERVER = PACKAGE / "hub"

# What a module outside the box may take from aiohttp: the server side (the hub, the
# daemon's `http.listen`), header names, and the stream type a caller reads a body from.
SERVER_SIDE = frozenset(
    {
        "web",
        "hdrs",
        "abc",
        "http",
        "http_exceptions",
        "web_protocol",
        "web_server",
        "web_request",
        "web_response",
        "BodyPartReader",
        "MultipartReader",
        "StreamReader",
    }
)
OTHER_CLIENTS = ("http.client", "urllib.request", "requests", "httpx", "urllib3", "aiohttp.client")
# The control socket's paths (a unix socket, not a hub): these `/v1/` constants are not URLs.
CONTROL = re.compile(r"/v1/(status|daemon|sync|views/pull|pause|resume|cycles/)")
HUB_URL = re.compile(r"/v1/|/(manifest|package|revisions|notify)\b")


def _outside(*skip: Path) -> Iterator[tuple[Path, list[str], list[str]]]:
    """Each module but those under `skip`, with its client uses and its hub URLs."""
    for path, (uses, urls) in _scanned().items():
        if not any(path == s or s in path.parents for s in skip):
            yield path, uses, urls


@functools.cache
def _scanned() -> dict[Path, tuple[list[str], list[str]]]:
    """Every module's client uses and hub URLs, from one parse of it per process: both
    scans read the whole package (each parse of it ~1 s of CPU)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        found[path] = (sorted(set(_client_uses(tree))), sorted(set(_hub_urls(tree))))
    return found


def _client_uses(tree: ast.Module) -> Iterator[str]:
    """Every aiohttp name outside `SERVER_SIDE`, and every other HTTP client, `tree` uses."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(OTHER_CLIENTS):
                    yield f"import {alias.name}"
                head, _, rest = alias.name.partition(".")
                if head == "aiohttp" and rest and rest.split(".")[0] not in SERVER_SIDE:
                    yield f"import {alias.name}"
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module.startswith(OTHER_CLIENTS):
                yield f"from {node.module} import …"
            head, _, rest = node.module.partition(".")
            if head == "aiohttp":
                sub = rest.split(".")[0]
                if sub and sub not in SERVER_SIDE:
                    yield f"from {node.module} import …"
                for alias in node.names:
                    if not sub and alias.name not in SERVER_SIDE:
                        yield f"from aiohttp import {alias.name}"
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "aiohttp"
            and node.attr not in SERVER_SIDE
        ):
            yield f"aiohttp.{node.attr}"


def _docstrings(tree: ast.Module) -> set[int]:
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _rendered(node: ast.JoinedStr) -> str:
    return "".join(
        str(part.value) if isinstance(part, ast.Constant) else "{}" for part in node.values
    )


def _hub_urls(tree: ast.Module) -> Iterator[str]:
    """Hub URLs `tree` builds: f-strings and `+` naming a hub path, `/v1/` path constants."""
    docs = _docstrings(tree)
    inside_fstrings = {
        id(part)
        for node in ast.walk(tree)
        if isinstance(node, ast.JoinedStr)
        for part in node.values
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            text = _rendered(node)
            if HUB_URL.search(text) and not CONTROL.search(text):
                yield text
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            for side in (node.left, node.right):
                text = side.value if isinstance(side, ast.Constant) else None
                if isinstance(text, str) and HUB_URL.search(text) and not CONTROL.search(text):
                    yield f"… + {text!r}"
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docs
            and id(node) not in inside_fstrings
            and node.value.startswith("/v1/")
            and not CONTROL.match(node.value)
        ):
            yield node.value


def test_no_module_outside_the_box_uses_an_http_client() -> None:
    found = {str(path.relative_to(PACKAGE)): uses for path, uses, _ in _outside(BOX) if uses}
    assert found == {}


def test_no_module_but_the_hub_client_builds_a_hub_url() -> None:
    found = {
        str(path.relative_to(PACKAGE)): urls
        for path, _, urls in _outside(HUB_CLIENT, HUB_SERVER)
        if urls
    }
    assert found == {}


def test_the_guards_see_what_they_guard() -> None:
    """The two scans catch the shapes the old callers had."""
    old = ast.parse(
        "import aiohttp\n"
        "from aiohttp import ClientSession\n"
        "s = aiohttp.ClientSession()\n"
        "url = f'{hub}/v1/roots/{root}/notify'\n"
        "marker = '/v1/views/'\n"
        "m = f'{self.url}/manifest'\n"
        "p = base + '/package'\n"
        "c = f'/v1/cycles/{kind}'\n"
    )
    assert set(_client_uses(old)) == {
        "aiohttp.ClientSession",
        "from aiohttp import ClientSession",
    }
    assert set(_hub_urls(old)) == {
        "/v1/views/",
        "… + '/package'",
        "{}/manifest",
        "{}/v1/roots/{}/notify",
    }


@pytest.mark.parametrize(
    ("url", "events"),
    [
        ("https://hub.example/v1/views/auth", "https://hub.example/v1/events?view=auth"),
        ("https://hub.example/v1/views/auth/", "https://hub.example/v1/events?view=auth"),
        ("http://127.0.0.1:8080/pre/v1/views/a.b", "http://127.0.0.1:8080/pre/v1/events?view=a.b"),
        ("https://static.example/exports/auth", None),
    ],
)
def test_a_views_events_come_from_the_hub_serving_it(url: str, events: str | None) -> None:
    assert view_events_url(url) == events


def test_the_hub_clients_urls() -> None:
    assert view_url("https://hub.example/", "auth") == "https://hub.example/v1/views/auth"
    assert notify_url("https://hub.example", "team") == "https://hub.example/v1/roots/team/notify"
    assert events_name_root("https://h/v1/events?root=team", "team")
    assert not events_name_root("https://h/v1/events?root=other", "team")
    assert events_name_root("https://h/v1/events", "team")


def test_importing_the_hub_client_loads_no_http_stack() -> None:
    """The daemon works out its event URLs at rest: the hub client's import is cheap."""
    probe = (
        "import sys, memsync.transports.hubclient\n"
        "heavy = [m for m in ('aiohttp', 'yarl', 'multidict', 'memsync.transports.http')"
        " if m in sys.modules]\n"
        "print(heavy)\n"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "[]"
