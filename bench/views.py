"""B5 and B6 (design/BENCHMARKS.md): view refresh cost and the hub under load.

B5: a refresh with no change (conditional GET -> 304, the stored manifest verified again)
against a plain `curl` of the same URL; and a pull of a changed ~5 MiB package against
`curl` downloading it plus `unzip` (Python's zipfile) extracting it.
B6: 200 concurrent clients doing conditional GETs of a manifest with `wrk`, against the
hub (`hub serve --workers N`, N the core count) and against nginx serving the same files
with as many worker processes (nginx from Debian's packages when installed; otherwise the
row says it was skipped). wrk runs on the same cores.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import random
import shutil
import statistics
import subprocess
import tempfile
import time
import urllib.request
import zipfile
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from memsync import timefmt
from memsync.config.sections import HttpSourceSettings, ViewSettings
from memsync.roots.create import init_root
from memsync.secrets import SecretRef
from memsync.views.keys import public_key_text
from memsync.views.pull import pull_views
from tests.kit import free_port, hub_process, signed_release

KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
RUNS = 15
PACKAGE_META = {  # what every `bench` view package holds besides its memory
    "view.md": b"# Bench\n",
    "recipe.toml": b'version = 1\nview_id = "bench"\nkind = "file"\n',
    "rightmemory-shared-view.toml": b'version = 2\nview_id = "bench"\nkind = "file"\n',
    "dist/manifest.toml": b'version = 2\nview_id = "bench"\ndocument_kind = "rightmemory-memory"\n',
}
CORES = len(os.sched_getaffinity(0))


def package_files(revision: int, size: int) -> dict[str, bytes]:
    """A valid view package of about `size` bytes of hard-to-compress Markdown."""
    rng = random.Random(revision)
    words = [hashlib.sha256(str(i).encode()).hexdigest()[:8] for i in range(4096)]
    memory = ["# Bench {#bench}", ""]
    files: dict[str, bytes] = {}
    part, total = 0, 0
    while total < size:
        lines = []
        for n in range(4000):
            text = " ".join(rng.choice(words) for _ in range(24))
            lines.append(f"- `p{part}-n{n}` {text} → []")
        body = ("\n".join(lines) + "\n").encode()
        files[f"dist/MEMORY_part{part}.md"] = body
        memory.append(f"## Part {part} {{F#part{part}}}")
        total += len(body)
        part += 1
    files["dist/MEMORY.md"] = ("\n".join(memory) + "\n").encode()
    return {**files, **PACKAGE_META}


def publish(static: Path, revision: int, files: dict[str, bytes]) -> Path:
    """Sign revision `revision` of `files` into `static/v1/views/bench/` (manifest and
    package, as `views build --out` lays them out); the directory."""
    now = timefmt.now()
    manifest, archive = signed_release(
        "bench", revision, files, KEY, published_at=now, expires=now + timedelta(days=1)
    )
    target = static / "v1" / "views" / "bench"
    target.mkdir(parents=True, exist_ok=True)
    (target / "package").write_bytes(archive)
    (target / "manifest").write_bytes(manifest)
    return target


class Nginx:
    def __init__(self, root: Path, base: Path) -> None:
        self.port = free_port()
        self.conf = base / "nginx.conf"
        # As root, nginx's workers would drop to `nobody`, who cannot read a private
        # temporary directory: keep them as the current user.
        user = "user root;\n" if os.geteuid() == 0 else ""
        self.conf.write_text(
            user + f"daemon off; worker_processes {CORES}; pid {base}/nginx.pid; "
            f"error_log {base}/err.log;\n"
            "events { worker_connections 4096; }\n"
            f"http {{ access_log off; client_body_temp_path {base}/tmp; "
            f"proxy_temp_path {base}/tmp; fastcgi_temp_path {base}/tmp; "
            f"uwsgi_temp_path {base}/tmp; scgi_temp_path {base}/tmp; "
            f"server {{ listen 127.0.0.1:{self.port}; root {root}; "
            "location / { default_type application/octet-stream; } } }\n"
        )
        self.proc = subprocess.Popen(
            ["nginx", "-c", str(self.conf), "-p", str(base)], stderr=subprocess.DEVNULL
        )
        _wait_http(f"http://127.0.0.1:{self.port}/v1/views/bench/manifest")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


class Hub:
    """`hub serve` with one worker per core and an admin token, holding the revision in
    `static` (stored through the hub's own upload path); `stop()` ends it."""

    def __init__(self, base: Path, static: Path) -> None:
        from memsync.hub.tokens import hub_init, open_store

        self.data = base / "hub"
        hub_init(self.data)
        store = open_store(self.data)
        _id, self.token = store.create(["admin"], label="bench", expires=None)
        store.close()
        self._served = contextlib.ExitStack()
        served = self._served.enter_context(hub_process(self.data, "--workers", str(CORES)))
        self.url = served.url
        try:
            self.upload(static / "v1" / "views" / "bench")
        except BaseException:
            self.stop()
            raise

    def upload(self, view: Path) -> None:
        """Upload the revision `publish` wrote into `view`."""
        subprocess.run(
            [
                "curl",
                "-s",
                "-f",
                "-o",
                "/dev/null",
                "-H",
                f"Authorization: Bearer {self.token}",
                "-F",
                f"manifest=@{view / 'manifest'}",
                "-F",
                f"package=@{view / 'package'}",
                f"{self.url}/v1/views/bench/revisions",
            ],
            check=True,
        )

    def raw_pull(self, base: Path, scratch: Path) -> float:
        """Milliseconds `curl` takes to download the package and zipfile to extract it into
        `scratch` (removed again)."""
        started = time.perf_counter()
        subprocess.run(
            [
                "curl",
                "-s",
                "-f",
                "-o",
                str(base / "pkg.zip"),
                "-H",
                f"Authorization: Bearer {self.token}",
                f"{self.url}/v1/views/bench/package",
            ],
            check=True,
        )
        with zipfile.ZipFile(base / "pkg.zip") as archive:
            archive.extractall(scratch)
        elapsed = (time.perf_counter() - started) * 1000
        shutil.rmtree(scratch)
        return elapsed

    def pull_new(
        self,
        base: Path,
        static: Path,
        revision: int,
        files: dict[str, bytes],
        pull: Callable[[], str],
    ) -> tuple[float, float]:
        """Publish and upload revision `revision` of `files`, then time `pull` (which must
        answer `pulled`) and the raw download and extraction: (ms, raw ms)."""
        self.upload(publish(static, revision, files))
        started = time.perf_counter()
        status = pull()
        mine = (time.perf_counter() - started) * 1000
        if status != "pulled":
            raise RuntimeError(f"pull of revision {revision}: {status}")
        return mine, self.raw_pull(base, base / f"raw-{revision}")

    def stop(self) -> None:
        """SIGTERM, then as long as the hub's own grace for its workers, then SIGKILL."""
        self._served.close()

    def view(self, base: Path) -> ViewSettings:
        """A consumer root `base/consumer` and a view of this hub's `bench` into it."""
        root = base / "consumer"
        init_root(root)
        os.environ["BENCH_TOKEN"] = self.token
        return ViewSettings(
            name="bench",
            root="consumer",
            root_path=root,
            heading="bench",
            view_id="bench",
            source=HttpSourceSettings(
                f"{self.url}/v1/views/bench",
                token=SecretRef.parse({"env": "BENCH_TOKEN"}),
                allow_http=False,
            ),
            keys=(public_key_text(KEY),),
            threshold=1,
            allow_unsigned=False,
            refresh=timedelta(minutes=5),
            max_stale=timedelta(days=7),
            max_file_size=1024 * 1024,
        )


def _wait_http(url: str) -> None:
    deadline = time.monotonic() + 20
    while True:
        try:
            urllib.request.urlopen(url, timeout=1).read()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _etag(url: str, token: str | None = None) -> str:
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=5) as answer:
        return str(answer.headers["ETag"])


def _wrk(url: str, etag: str, token: str | None) -> float:
    args = ["wrk", "-t2", "-c200", "-d8s", "-H", f"If-None-Match: {etag}"]
    if token:
        args += ["-H", f"Authorization: Bearer {token}"]
    out = subprocess.run([*args, url], capture_output=True, text=True, check=True).stdout
    line = next(line for line in out.splitlines() if line.startswith("Requests/sec"))
    return float(line.split()[1])


def _ms(fn: Any, runs: int = RUNS) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def b5(base: Path, hub: Hub, static: Path) -> list[dict[str, Any]]:
    view = hub.view(base)
    state = base / "state"

    def pull() -> str:
        return asyncio.run(pull_views([view], state))[0].status

    if pull() != "pulled":
        raise RuntimeError("the first pull failed")
    current = _ms(lambda: pull() == "current" or (_ for _ in ()).throw(RuntimeError("x")))
    manifest_url = f"{hub.url}/v1/views/bench/manifest"
    etag = _etag(manifest_url, hub.token)
    curl = _ms(
        lambda: subprocess.run(
            [
                "curl",
                "-s",
                "-o",
                "/dev/null",
                "-H",
                f"If-None-Match: {etag}",
                "-H",
                f"Authorization: Bearer {hub.token}",
                manifest_url,
            ],
            check=True,
        )
    )
    rows = [
        {
            "name": "B5 refresh, no change (304) per view (vs curl, 304)",
            "memsync_ms": current,
            "raw_ms": curl,
            "ratio": current / curl,
            "target": "<= 5 ms",
            "runs": RUNS,
        }
    ]
    # A changed ~5 MiB package: time a pull of each new revision.
    fulls, raws = [], []
    view_dir = static / "v1" / "views" / "bench"
    for revision in range(2, 7):
        files = package_files(revision, 5 * 1024 * 1024)
        mine, raw = hub.pull_new(base, static, revision, files, pull)
        fulls.append(mine)
        raws.append(raw)
    size = (view_dir / "package").stat().st_size
    rows.append(
        {
            "name": f"B5 pull of a changed {size / 2**20:.1f} MiB package (vs curl + unzip)",
            "memsync_ms": statistics.median(fulls),
            "raw_ms": statistics.median(raws),
            "ratio": statistics.median(fulls) / statistics.median(raws),
            "target": "<= 3x",
            "runs": len(fulls),
        }
    )
    return rows


def b6(base: Path, hub: Hub, static: Path) -> list[dict[str, Any]]:
    if shutil.which("wrk") is None:
        return [
            {
                "name": "B6 skipped: wrk is not installed (apt install wrk)",
                "memsync_ms": 0.0,
                "raw_ms": 0.0,
                "ratio": 0.0,
                "target": "-",
            }
        ]
    url = f"{hub.url}/v1/views/bench/manifest"
    hub_rps = _wrk(url, _etag(url, hub.token), hub.token)
    if shutil.which("nginx") is None:
        return [
            {
                "name": f"B6 hub ({CORES} workers), 200 clients, conditional GETs (req/s; "
                "nginx not installed)",
                "memsync_ms": hub_rps,
                "raw_ms": 0.0,
                "ratio": 0.0,
                "target": ">= 20000",
            }
        ]
    nginx = Nginx(static, base / "nginx")
    try:
        nurl = f"http://127.0.0.1:{nginx.port}/v1/views/bench/manifest"
        nginx_rps = _wrk(nurl, _etag(nurl), None)
    finally:
        nginx.stop()
    return [
        {
            "name": f"B6 req/s, 200 clients, conditional GETs: hub vs nginx, {CORES} workers each",
            "memsync_ms": hub_rps,
            "raw_ms": nginx_rps,
            "ratio": hub_rps / nginx_rps,
            "target": ">= 20000 req/s, >= 0.3x",
        }
    ]


def run() -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="memsync-views-bench-") as tmp:
        base = Path(tmp)
        (base / "nginx" / "tmp").mkdir(parents=True)
        static = base / "static"
        publish(static, 1, package_files(1, 64 * 1024))
        hub = Hub(base, static)
        try:
            return [*b5(base, hub, static), *b6(base, hub, static)]
        finally:
            hub.stop()
