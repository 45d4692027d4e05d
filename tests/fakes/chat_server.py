"""A fake OpenAI-compatible provider on loopback: chat completions with scripted answers.

`serve_chat(state)` (an async context, on the test's loop) or `chat_server_thread(state)`
(a plain context with its own loop in a thread, for blocking code and daemons under
test) runs an aiohttp app on 127.0.0.1 with an ephemeral port. Each
`POST /v1/chat/completions` takes the next `Reply` from `state.replies` (then
`state.default`; with neither, a 503 that says the script ran out) and is recorded in
`state.requests` (path, headers, parsed JSON body), so a test can assert what the client
sent: the key in `Authorization`, `response_format`, the retry's quoted error.

    async with serve_chat(ChatState.of(answer({"action": "noop", "reason": "quiet"}))) as s:
        role = OpenAIRoleSettings("insight", s.base_url, "m", None, timedelta(seconds=5))
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections import deque
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

CHUNK = 16 * 1024  # a streamed body is written in pieces of this size
USAGE = {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150}


@dataclass(frozen=True)
class Reply:
    """One scripted answer. With `body`, those bytes are the whole HTTP body; otherwise a
    chat completion whose message is `content` (and `usage`, when not None) is built."""

    content: str | None = None
    status: int = 200
    body: bytes | None = None
    usage: Mapping[str, int] | None = field(default_factory=lambda: dict(USAGE))
    delay: float = 0.0  # seconds before answering
    hang: bool = False  # never finish (streamed: after the body so far); ends on hang-up
    chunked: bool = False  # no Content-Length: the body streams in chunks
    length: int | None = None  # a declared Content-Length (true or not); the body streams
    pause: float = 0.0  # seconds between the pieces of a streamed body (a slow network)


def streamed(reply: Reply) -> bool:
    return reply.chunked or reply.length is not None or reply.pause > 0


def answer(content: Mapping[str, Any] | str, **options: Any) -> Reply:
    """A 200 completion whose message is `content` (an object is sent as its JSON text)."""
    text = content if isinstance(content, str) else json.dumps(content)
    return Reply(content=text, **options)


def error(status: int, message: str = "scripted failure", **options: Any) -> Reply:
    """An error in the providers' usual shape: `{"error": {"message", "type"}}`."""
    body = json.dumps({"error": {"message": message, "type": "server_error"}}).encode()
    return Reply(status=status, body=body, **options)


def hang() -> Reply:
    return Reply(hang=True)


@dataclass(frozen=True)
class Received:
    path: str
    headers: Mapping[str, str]
    body: Any  # the parsed JSON body (None when it was not JSON)

    @property
    def messages(self) -> list[dict[str, Any]]:
        found = self.body.get("messages") if isinstance(self.body, dict) else None
        return list(found) if isinstance(found, list) else []

    @property
    def authorization(self) -> str | None:
        return self.headers.get("Authorization")


@dataclass
class ChatState:
    replies: deque[Reply] = field(default_factory=deque)
    default: Reply | None = None
    requests: list[Received] = field(default_factory=list)

    @classmethod
    def of(cls, *replies: Reply, default: Reply | None = None) -> ChatState:
        return cls(deque(replies), default)

    def script(self, *replies: Reply) -> None:
        """The next requests get these replies, in order."""
        self.replies.extend(replies)

    def next_reply(self) -> Reply | None:
        return self.replies.popleft() if self.replies else self.default


@dataclass(frozen=True)
class ChatServer:
    state: ChatState
    url: str  # http://127.0.0.1:<port>

    @property
    def base_url(self) -> str:
        """What a role's `base_url` names (the client adds `/chat/completions`)."""
        return f"{self.url}/v1"


def completion(reply: Reply) -> bytes:
    document: dict[str, Any] = {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "model": "fake",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": reply.content},
                "finish_reason": "stop",
            }
        ],
    }
    if reply.usage is not None:
        document["usage"] = dict(reply.usage)
    return json.dumps(document).encode()


def make_app(state: ChatState) -> web.Application:
    async def complete(request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        state.requests.append(Received(request.path, dict(request.headers), body))
        reply = state.next_reply()
        if reply is None:
            return web.json_response({"error": {"message": "no scripted reply left"}}, status=503)
        if reply.hang and not streamed(reply):
            await asyncio.Event().wait()
        if reply.delay:
            await asyncio.sleep(reply.delay)
        payload = reply.body if reply.body is not None else completion(reply)
        headers = {"Content-Type": "application/json"}
        if not streamed(reply):
            return web.Response(status=reply.status, body=payload, headers=headers)
        resp = web.StreamResponse(status=reply.status, headers=headers)
        if reply.length is not None:
            resp.content_length = reply.length
        else:
            resp.enable_chunked_encoding()
        await resp.prepare(request)
        for start in range(0, len(payload), CHUNK):
            if start and reply.pause:
                await asyncio.sleep(reply.pause)
            await resp.write(payload[start : start + CHUNK])
        if reply.hang:  # the body so far, then nothing more
            await asyncio.Event().wait()
        await resp.write_eof()
        return resp

    app = web.Application(client_max_size=16 * 1024 * 1024)
    app.router.add_post("/v1/chat/completions", complete)
    return app


@asynccontextmanager
async def serve_chat(state: ChatState | None = None) -> AsyncIterator[ChatServer]:
    """Run the fake on 127.0.0.1 (ephemeral port) on the running loop until the block ends."""
    state = state or ChatState()
    runner = web.AppRunner(
        make_app(state), handler_cancellation=True, shutdown_timeout=0.5, access_log=None
    )
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        host, port = runner.addresses[0][:2]
        yield ChatServer(state, f"http://{host}:{port}")
    finally:
        await runner.cleanup()


@contextlib.contextmanager
def chat_server_thread(state: ChatState | None = None) -> Iterator[ChatServer]:
    """`serve_chat` on its own event loop in a daemon thread, for synchronous tests."""
    state = state or ChatState()
    loop = asyncio.new_event_loop()
    started = threading.Event()
    stop = asyncio.Event()
    box: dict[str, ChatServer | BaseException] = {}

    async def main() -> None:
        try:
            async with serve_chat(state) as server:
                box["server"] = server
                started.set()
                await stop.wait()
        except BaseException as exc:
            box["error"] = exc
            started.set()

    thread = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True)
    thread.start()
    if not started.wait(10):
        raise RuntimeError("the fake chat server did not start within 10 s")
    found = box.get("server")
    if not isinstance(found, ChatServer):
        raise RuntimeError(f"the fake chat server failed to start: {box.get('error')!r}")
    try:
        yield found
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(10)
        loop.close()
