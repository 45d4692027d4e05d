"""The parse cache never changes a verdict: with no cache, a cold cache, a warm cache (in
memory or on disk) and after random edits, the graph verdict of generated roots equals
`build_graph`'s, problem for problem (code, path, line, message), and so do the file and
item counts. Roots are drawn from a soup of valid and broken lines so that every rule
(duplicates across files, F# chains and cycles, kinds, Focus, MF prose, edges) fires.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from memsync.validators.assembly import build_graph
from memsync.validators.cache import ParseCache, Uncached
from memsync.validators.cachestore import PersistentStore
from memsync.validators.crossfile import GraphVerdict
from memsync.validators.graph import validate_graph
from memsync.validators.tree import MODE_FILE, MODE_SYMLINK, Entry, TreeView

IDS = ("a", "b", "c", "d", "rules", "Rules", "x.y", "A")
KINDS = ("#", "#", "F#", "F#", "M#", "S#", "MF#", "MQ#", "X#")
TYPES = ("dep", "rel", "rel", "ext", "up", "bogus")


class CountingBlobs:
    """A BlobSource over git-style blob ids that counts what it is asked for."""

    def __init__(self, blobs: Mapping[str, bytes]) -> None:
        self.blobs = dict(blobs)
        self.asked: list[str] = []

    def read_many(self, oids: Sequence[str]) -> Mapping[str, bytes]:
        self.asked += oids
        return {oid: self.blobs[oid] for oid in oids}


def blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def git_tree(files: Mapping[str, bytes | None]) -> tuple[TreeView, CountingBlobs]:
    """A tree like Git's: entries carry blob ids, bytes come from the source. A None file
    is a symbolic link."""
    entries: dict[str, Entry] = {}
    blobs: dict[str, bytes] = {}
    for path, data in files.items():
        if data is None:
            entries[path] = Entry(MODE_SYMLINK, 3, blob_id(b"elsewhere"))
            continue
        oid = blob_id(data)
        blobs[oid] = data
        entries[path] = Entry(MODE_FILE, len(data), oid)
    source = CountingBlobs(blobs)
    return TreeView(entries, source), source


def inline_tree(files: Mapping[str, bytes | None]) -> TreeView:
    """A tree whose entries carry their bytes and no content id (hashed by the cache)."""
    return TreeView(
        {
            path: Entry(MODE_SYMLINK, 3) if data is None else Entry(MODE_FILE, len(data), data=data)
            for path, data in files.items()
        }
    )


# The soup's strategies are made once, here: a composite strategy that makes them inside
# its loops (`st.sampled_from([...])`, `lines()`) pays Hypothesis's validation of each new
# one on every draw, which cost more than the checks. What is drawn is the same.
_TYPE = st.sampled_from(TYPES)
_ID = st.sampled_from(IDS)
_TOKENS = st.lists(
    st.one_of(
        st.tuples(_TYPE, _ID).map(":".join),
        st.sampled_from(["dep=a", "", " ", "rel:", ":a", "dep: b"]),
    ),
    max_size=4,
)
_ARROW = st.sampled_from([" → ", " -> ", " →"])
_KIND = st.sampled_from(KINDS)
_TAIL = st.sampled_from(["", "", " trailing", "{#bad id}"])
_INDENT = st.sampled_from(["", "  ", "\t"])
_OTHER_LINE = st.sampled_from(
    [
        "## Focus",
        "# Plain heading",
        "### Plain three",
        "```",
        "~~~",
        "prose line",
        "",
        "**Next:**",
        "**State:** going",
        "- `a` focus reason",
    ]
)
_ENDING = st.sampled_from(["\n", "\r\n"])
_BOOLEAN = st.booleans()
_SMALL = {high: st.integers(0, high) for high in (1, 3, 4, 5, 13, 20)}
_DEPTH = st.integers(1, 5)
_EDITS = st.integers(1, 3)
_SHOWN = {item: st.sampled_from([item, item, "bad id"]) for item in IDS}


@st.composite
def edge_lists(draw: st.DrawFn) -> str:
    tokens = draw(_TOKENS)
    arrow = draw(_ARROW)
    return f"{arrow}[{', '.join(tokens)}]"


_EDGE_LIST = edge_lists()


@st.composite
def lines(draw: st.DrawFn) -> str:
    item = draw(_ID)
    choice = draw(_SMALL[13])
    if choice <= 4:
        depth = draw(_DEPTH)
        kind = draw(_KIND)
        edges = draw(_EDGE_LIST) if draw(_BOOLEAN) else ""
        tail = draw(_TAIL)
        return f"{'#' * depth} Title {{{kind}{item}}}{edges}{tail}"
    if choice <= 8:
        indent = draw(_INDENT)
        edges = draw(_EDGE_LIST) if draw(_SMALL[4]) else ""
        shown = draw(_SHOWN[item])
        return f"{indent}- `{shown}` a fact{edges}"
    return draw(_OTHER_LINE)


_BODY = st.lists(lines(), max_size=12)


@st.composite
def documents(draw: st.DrawFn) -> bytes | None:
    kind = draw(_SMALL[20])
    if kind == 0:
        return None  # a symbolic link where a file is expected
    if kind == 1:
        return b"# Broken \xff\xfe {#a}\n"
    body = "\n".join(draw(_BODY))
    ending = draw(_ENDING)
    return body.replace("\n", ending).encode() + ending.encode() * draw(_SMALL[1])


_DOCUMENT = documents()
_PATHS: dict[str, st.SearchStrategy[str]] = {}
_FILES: dict[str, st.SearchStrategy[dict[str, bytes | None]]] = {}
_FOCUS = st.lists(_ID, max_size=4)


def paths(base: str) -> st.SearchStrategy[str]:
    if base not in _PATHS:
        _PATHS[base] = st.one_of(
            st.just(f"{base}MEMORY.md"),
            st.just("PURSUITS.md"),
            _ID.map(lambda i: f"{base}MEMORY_{i}.md"),
            _ID.map(lambda i: f"{base}PURSUIT_{i}.md"),
            _ID.map(lambda i: f"{base}MEMORY_SKILL_{i}.md"),
        )
    return _PATHS[base]


@st.composite
def roots(draw: st.DrawFn, base: str = "") -> dict[str, bytes | None]:
    if base not in _FILES:
        _FILES[base] = st.dictionaries(paths(base), _DOCUMENT, max_size=10)
    files = draw(_FILES[base])
    if draw(_SMALL[5]):
        files[f"{base}MEMORY.md"] = draw(_DOCUMENT) or b"# Memory\n"
    for path, data in sorted(files.items()):
        if data is not None and draw(_BOOLEAN):  # chains, cycles and shared owners
            link, up = draw(_ID), draw(_ID)
            files[path] = f"# Link {{F#{link}}} → [rel:{up}]\n".encode() + data
    if files.get("PURSUITS.md") and draw(_BOOLEAN):
        focus = draw(_FOCUS)
        head = "".join(f"- `{target}` matters\n" for target in focus)
        files["PURSUITS.md"] = f"## Focus\n{head}".encode() + (files["PURSUITS.md"] or b"")
    return files


_LINE = lines()


@st.composite
def edits(draw: st.DrawFn, files: dict[str, bytes | None], base: str) -> dict[str, bytes | None]:
    out = dict(files)
    for _ in range(draw(_EDITS)):
        path = draw(st.one_of(paths(base), st.sampled_from(sorted(out) or [f"{base}MEMORY.md"])))
        action = draw(_SMALL[3])
        old = out.get(path)
        if action == 0:
            out.pop(path, None)
        elif action == 1 and old:
            text = old.decode("utf-8", "replace").split("\n")
            at = draw(st.integers(0, len(text)))
            text.insert(at, draw(_LINE))
            out[path] = "\n".join(text).encode()
        else:
            out[path] = draw(_DOCUMENT)
    return out


def disk_cache(directory: Path) -> ParseCache:
    """A cache with its own (empty) memory over the disk store in `directory`."""
    return ParseCache(store=PersistentStore.open(directory, max_bytes=1 << 26))


def reference(tree: TreeView, profile: str, root: str | None) -> GraphVerdict:
    graph, problems = build_graph(tree, profile, root_path=root)
    return GraphVerdict(tuple(problems), graph.files, graph.evidence_files, len(graph.items))


def check(files: Mapping[str, bytes | None], profile: str, caches: Sequence[ParseCache]) -> None:
    root = "dist/MEMORY.md" if profile == "mf" else None
    tree, _ = git_tree(files)
    want = reference(tree, profile, root)
    assert validate_graph(tree, profile, root_path=root, cache=Uncached()) == want
    for cache in caches:
        for _ in range(2):  # cold (or carried over from before the edit), then warm
            tree, source = git_tree(files)
            misses, hits, steps = cache.misses, cache.hits, cache.steps
            assert validate_graph(tree, profile, root_path=root, cache=cache) == want
        assert cache.misses == misses  # warm: every summary came from this very cache
        # ... or the kept lineage of the same tree answered without asking for summaries
        assert cache.hits > hits or cache.steps > steps or not want.files
        assert source.asked == []  # and with blob ids known, no byte was read
        assert validate_graph(inline_tree(files), profile, root_path=root, cache=cache) == want


@given(st.sampled_from(["local", "mf"]).flatmap(lambda p: st.tuples(st.just(p), st.data())))
def test_cached_verdicts_equal_the_full_parse(case: tuple[str, st.DataObject]) -> None:
    profile, data = case
    base = "dist/" if profile == "mf" else ""
    files = data.draw(roots(base))
    with tempfile.TemporaryDirectory() as tmp:
        memory, disk = ParseCache(), disk_cache(Path(tmp))
        check(files, profile, [memory, disk])
        for _ in range(data.draw(st.integers(1, 3))):
            files = data.draw(edits(files, base))
            check(files, profile, [memory, disk])
        # A new process: an empty memory over the same disk store.
        fresh = disk_cache(Path(tmp))
        check(files, profile, [fresh])
        assert fresh.misses == 0  # every summary came from the disk store
        disk.close()
        fresh.close()
