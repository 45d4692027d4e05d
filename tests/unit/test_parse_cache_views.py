"""Package checks through the parse cache: a new revision that changes one file of a view
parses that file only, keyed by the SHA-256 the extractor computed, and the verdict is the
uncached one (valid and broken packages alike)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from memsync.validators.cache import ParseCache, Uncached
from memsync.views.archive import ArchiveLimits, write_zip
from memsync.views.consumer import Checked, check_package

META = {
    "view.md": b"# Bench\n",
    "recipe.toml": b'version = 1\nview_id = "v"\nkind = "file"\n',
    "rightmemory-shared-view.toml": b'version = 2\nview_id = "v"\nkind = "file"\n',
    "dist/manifest.toml": b'version = 2\nview_id = "v"\ndocument_kind = "rightmemory-memory"\n',
}


def package(parts: dict[int, str]) -> dict[str, bytes]:
    files = dict(META)
    files["dist/MEMORY.md"] = "".join(f"## Part {p} {{F#part{p}}}\n" for p in parts).encode()
    for part, body in parts.items():
        files[f"dist/MEMORY_part{part}.md"] = body.encode()
    return files


def check(tmp: Path, name: str, files: dict[str, bytes], cache: ParseCache | Uncached) -> Checked:
    archive = write_zip(files)
    path = tmp / f"{name}.zip"
    path.write_bytes(archive)
    return check_package(
        path,
        tmp / name,
        manifest=None,
        length=len(archive),
        sha256=hashlib.sha256(archive).hexdigest(),
        view_id="v",
        heading="v",
        limits=ArchiveLimits(),
        cache=cache,
    )


def test_a_revision_changing_one_file_parses_that_file_only(tmp_path: Path) -> None:
    parts = {
        p: "".join(f"- `p{p}-{n}` fact → [dep:p{p}-{(n + 1) % 30}]\n" for n in range(30))
        for p in range(5)
    }
    cache = ParseCache()
    first = check(tmp_path, "r1", package(parts), cache)
    assert first.ok and first.items == 5 * 30 + 5  # 30 nodes per part, 5 F# headings
    assert cache.misses == 6  # dist/MEMORY.md and five detail files
    parts[3] += "- `p3-new` a new fact → [dep:gone]\n"
    second = check(tmp_path, "r2", package(parts), cache)
    assert cache.misses == 7  # only the changed file was parsed
    assert second == check(tmp_path, "r2-plain", package(parts), Uncached())
    assert [p.code for p in second.problems] == ["dangling-edge"]
    assert second.reason == "the package failed validation"
