"""The package validator: one check for every path a view package comes in by.

A RightMemory file-view package v2 (see the shared-views reference): three metadata files
at the top (`view.md`, `recipe.toml`, `rightmemory-shared-view.toml`) and `dist/` holding
`MEMORY.md`, `manifest.toml` and the `MEMORY_<id>.md` / `MEMORY_SKILL_<id>.md` resources.
Every path a package comes in by (an import from any source, the hub's upload check,
`views verify`) reaches it through the one consumer check, `consumer.check_package`; the
publisher runs it before signing. It is pure over the package's bytes.

The package's graph is validated through the parse cache: a file whose SHA-256 the caller
knows (the extractor computes every file's) and whose summary is cached is not parsed
again, so a new revision that changes one file costs one file's parse.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from typing import Any

from memsync.validators.graph import CacheChoice, validate_graph
from memsync.validators.paths import check_text, printable
from memsync.validators.problems import ProblemList, Report
from memsync.validators.tree import MODE_FILE, Entry, TreeView

PACKAGE_META = "rightmemory-shared-view.toml"
RECIPE = "recipe.toml"
VIEW_DOC = "view.md"
DIST_MEMORY = "dist/MEMORY.md"
DIST_MANIFEST = "dist/manifest.toml"
REQUIRED = (VIEW_DOC, RECIPE, PACKAGE_META, DIST_MEMORY, DIST_MANIFEST)
_TOP = frozenset({VIEW_DOC, RECIPE, PACKAGE_META})
_TOML = frozenset({RECIPE, PACKAGE_META, DIST_MANIFEST})
_DIST = re.compile(r"dist/(?:MEMORY\.md|manifest\.toml|MEMORY_(?:SKILL_)?[A-Za-z0-9_.-]+\.md)")
_META_KEYS = frozenset({"version", "view_id", "kind", "ref", "title", "description"})
_DIST_KEYS = frozenset({"version", "view_id", "document_kind"})


def validate_package(
    files: Mapping[str, bytes],
    *,
    view_id: str,
    heading: str,
    hashes: Mapping[str, str] | None = None,
    cache: CacheChoice = None,
) -> Report:
    """Every problem of one package: layout, metadata, bytes, the MF graph, resources.

    `view_id` is the provider's view id the metadata must name; `heading` is the local
    heading id whose namespace (`MF#<heading>`) the package's graph is parsed under.
    `hashes` are the SHA-256 (hex) of the files' bytes when the caller has them: the parse
    cache (`cache`, None for the process's) then knows a file without hashing it again.
    """
    found = ProblemList()
    for path in sorted(files):
        if path not in _TOP and _DIST.fullmatch(path) is None:
            found.add(
                "package-layout",
                printable(path),
                f"'{printable(path)}' is not a file a view package may hold",
            )
    for path in REQUIRED:
        if path not in files:
            found.add("package-layout", path, f"the package has no '{path}'")
    texts: dict[str, str] = {}
    for path, data in files.items():
        problem = check_text(path, data)
        if problem is not None:
            found.items.append(problem)
        elif path in _TOML:  # the only texts read here; the graph decodes its own
            texts[path] = data.decode("utf-8")
    _metadata(texts, view_id, found)
    if DIST_MEMORY in files:
        known = hashes or {}
        tree = TreeView(
            {
                p: Entry(MODE_FILE, len(b), oid=known.get(p), data=b)
                for p, b in files.items()
                if p.startswith("dist/")
            },
            sha256_ids=True,
        )
        graph = validate_graph(
            tree, "mf", root_path=DIST_MEMORY, namespace=f"MF#{heading}", cache=cache
        )
        found.items.extend(graph.problems)
        used = {*graph.files, *graph.evidence_files, DIST_MANIFEST}
        for path in sorted(files):
            if path.startswith("dist/") and path not in used and _DIST.fullmatch(path):
                found.add(
                    "unreferenced-resource",
                    path,
                    f"'{path}' is not referenced by the package's memory graph",
                )
        return found.report(files=len(graph.files) + len(graph.evidence_files), items=graph.items)
    return found.report()


def _toml(texts: Mapping[str, str], path: str, found: ProblemList) -> dict[str, Any] | None:
    text = texts.get(path)
    if text is None:
        return None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        found.add("package-metadata", path, f"'{path}' is not valid TOML: {exc}")
        return None


def _metadata(texts: Mapping[str, str], view_id: str, found: ProblemList) -> None:
    recipe = _toml(texts, RECIPE, found)
    if recipe is not None:
        _expect(found, RECIPE, recipe, "version", 1)
        _expect(found, RECIPE, recipe, "view_id", view_id)
        _expect(found, RECIPE, recipe, "kind", "file")
    meta = _toml(texts, PACKAGE_META, found)
    if meta is not None:
        for key in sorted(set(meta) - _META_KEYS):
            found.add("package-metadata", PACKAGE_META, f"unknown key '{key}' in {PACKAGE_META}")
        _expect(found, PACKAGE_META, meta, "version", 2)
        _expect(found, PACKAGE_META, meta, "view_id", view_id)
        _expect(found, PACKAGE_META, meta, "kind", "file")
        for key in ("ref", "title", "description"):
            if key in meta and not isinstance(meta[key], str):
                found.add("package-metadata", PACKAGE_META, f"'{key}' must be a string")
    dist = _toml(texts, DIST_MANIFEST, found)
    if dist is not None:
        if set(dist) != _DIST_KEYS:
            keys = ", ".join(sorted(dist))
            found.add(
                "package-metadata",
                DIST_MANIFEST,
                f"{DIST_MANIFEST} must hold exactly version, view_id and document_kind "
                f"(has: {keys or 'nothing'})",
            )
        _expect(found, DIST_MANIFEST, dist, "version", 2)
        _expect(found, DIST_MANIFEST, dist, "view_id", view_id)
        _expect(found, DIST_MANIFEST, dist, "document_kind", "rightmemory-memory")


def _expect(
    found: ProblemList, path: str, table: Mapping[str, Any], key: str, wanted: object
) -> None:
    value = table.get(key)
    if value != wanted or type(value) is not type(wanted):
        found.add("package-metadata", path, f"{path}: '{key}' must be {wanted!r} (found {value!r})")
