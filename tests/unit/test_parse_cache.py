"""The parse cache's stores: the disk store ignores what it cannot trust (truncated,
corrupt, foreign, forged entries; a file that is no database), stays within its bound and
may be deleted at any time; the memory LRU stays within its bound. Every case ends with
the verdict of a real validation, which must equal the uncached one."""

from __future__ import annotations

import ast
import hashlib
import importlib
import json
import sqlite3
from pathlib import Path
from types import ModuleType

import pytest

from memsync.validators import summaryframe
from memsync.validators.cache import ParseCache, Uncached, cache_key, content_id
from memsync.validators.cachestore import FILE_NAME, PersistentStore
from memsync.validators.graph import validate_graph
from memsync.validators.rightmemory import default_graph_validator
from memsync.validators.summary import summarize_bytes
from memsync.validators.summaryframe import FORMAT, encode
from memsync.validators.tree import MODE_FILE, Entry, TreeView
from tests.unit.test_validator_equivalence import git_tree

FILES: dict[str, bytes | None] = {
    "MEMORY.md": b"# Topic {F#topic}\n\n# Other {#other} -> [dep:gone]\n- `a` x -> [dep:b]\n",
    "MEMORY_topic.md": b"- `b` y -> [dep:a, rel:topic]\n- `a` again -> []\n",
    "PURSUITS.md": b"## Focus\n- `other` why\n",
}


def open_store(directory: Path, max_bytes: int = 1 << 26) -> PersistentStore:
    store = PersistentStore.open(directory, max_bytes=max_bytes)
    assert store is not None
    return store


def warm(directory: Path) -> None:
    """Fill the store in `directory` with the summaries of FILES."""
    store = open_store(directory)
    cache = ParseCache(store=store)
    tree, _ = git_tree(FILES)
    validate_graph(tree, cache=cache)
    store.close()


def rows(directory: Path) -> list[tuple[str, bytes]]:
    with sqlite3.connect(directory / FILE_NAME) as db:
        return db.execute("SELECT key, value FROM entries ORDER BY key").fetchall()


def rewrite(directory: Path, change: dict[str, bytes]) -> None:
    with sqlite3.connect(directory / FILE_NAME) as db:
        db.executemany(
            "UPDATE entries SET value = ? WHERE key = ?", [(v, k) for k, v in change.items()]
        )


def cold_verdict_from(directory: Path) -> tuple[object, ParseCache, int]:
    """The verdict through a fresh memory over the store, the cache, and the bytes read."""
    store = open_store(directory)
    cache = ParseCache(store=store)
    tree, source = git_tree(FILES)
    verdict = validate_graph(tree, cache=cache)
    store.close()
    return verdict, cache, len(source.asked)


def expected() -> object:
    return validate_graph(git_tree(FILES)[0], cache=Uncached())


def test_a_warm_store_serves_every_file_without_reading_bytes(tmp_path: Path) -> None:
    warm(tmp_path)
    assert len(rows(tmp_path)) == 3
    verdict, cache, read = cold_verdict_from(tmp_path)
    assert verdict == expected()
    assert (cache.misses, read) == (0, 0)
    codes = {p.code for p in verdict.problems}  # type: ignore[attr-defined]
    assert {"dangling-edge", "duplicate-id", "containment-edge", "focus-not-heading"} <= codes


def test_truncated_and_corrupt_entries_are_ignored_and_parsed_again(tmp_path: Path) -> None:
    warm(tmp_path)
    (k1, v1), (k2, v2), _ = rows(tmp_path)
    start = len(FORMAT) + 8 + 16  # header, then checksum, then the JSON payload
    body = json.loads(v2[start:])
    body[2] = [line + 1 for line in body[2]]  # well-formed, but not what was written
    altered = v2[:start] + json.dumps(body).encode()
    rewrite(tmp_path, {k1: v1[: len(v1) // 2], k2: altered})
    verdict, cache, read = cold_verdict_from(tmp_path)
    assert verdict == expected()
    assert cache.misses == 2 and read == 2


def test_entries_of_another_format_or_parser_are_foreign(tmp_path: Path) -> None:
    warm(tmp_path)
    (k1, v1), (k2, v2), _ = rows(tmp_path)
    other_format = b"MSPC9" + v1[len(FORMAT) :]
    other_parser = v2[: len(FORMAT)] + bytes(8) + v2[len(FORMAT) + 8 :]
    rewrite(tmp_path, {k1: other_format, k2: other_parser})
    verdict, cache, _ = cold_verdict_from(tmp_path)
    assert verdict == expected()
    assert cache.misses == 2


def test_a_forged_entry_with_a_valid_checksum_but_no_summary_shape_is_ignored(
    tmp_path: Path,
) -> None:
    warm(tmp_path)
    store = open_store(tmp_path)
    key = cache_key(content_id(git_tree(FILES)[0], "MEMORY.md") or "", "MEMORY.md", pursuit=False)
    good = encode(
        key, summarize_bytes(FILES["MEMORY.md"] or b"", "MEMORY.md", pursuit=False), store.header
    )
    body = json.loads(good[len(store.header) + 16 :])
    body[3] = [len(body[3]) - 1] * len(body[3])  # in range, but the last is its own parent
    payload = json.dumps(body).encode()
    check = hashlib.blake2b(payload, key=key.encode()[:64], digest_size=16).digest()
    store.close()
    rewrite(tmp_path, {key: store.header + check + payload})
    verdict, cache, _ = cold_verdict_from(tmp_path)
    assert verdict == expected()
    assert cache.misses == 1


def test_a_file_that_is_no_database_is_replaced(tmp_path: Path) -> None:
    (tmp_path / FILE_NAME).write_bytes(b"not sqlite at all" * 100)
    warm(tmp_path)
    verdict, cache, _ = cold_verdict_from(tmp_path)
    assert verdict == expected()
    assert cache.misses == 0


def test_the_store_may_be_deleted_while_in_use(tmp_path: Path) -> None:
    store = open_store(tmp_path / "cache")
    cache = ParseCache(store=store)
    (tmp_path / "cache" / FILE_NAME).unlink()
    (tmp_path / "cache").rmdir()
    for _ in range(2):
        assert validate_graph(git_tree(FILES)[0], cache=cache) == expected()
    store.close()
    warm(tmp_path / "cache")  # and a later run starts a new one
    assert cold_verdict_from(tmp_path / "cache")[1].misses == 0


def test_the_disk_store_stays_within_its_bound(tmp_path: Path) -> None:
    bound = 20_000
    store = open_store(tmp_path, max_bytes=bound)
    cache = ParseCache(store=store)
    for n in range(150):
        lines = "".join(f"- `n{n}-{i}` fact {i} -> [dep:n{n}-{i + 1}]\n" for i in range(20))
        files: dict[str, bytes | None] = {"MEMORY.md": lines.encode()}
        validate_graph(git_tree(files)[0], cache=cache)
        assert store.size() <= bound
    assert 0 < len(rows(tmp_path)) < 100
    assert (tmp_path / FILE_NAME).stat().st_size <= 4 * bound  # pages are given back
    # The most recent entries are the ones kept.
    fresh = ParseCache(store=store)
    assert validate_graph(git_tree(files)[0], cache=fresh).items == 20
    assert fresh.misses == 0
    store.close()


def test_the_memory_lru_stays_within_its_bound() -> None:
    cache = ParseCache(max_bytes=20_000)
    for n in range(50):
        files: dict[str, bytes | None] = {"MEMORY.md": f"- `n{n}` fact -> []\n".encode() * 1}
        validate_graph(git_tree(files)[0], cache=cache)
        assert cache.weight <= 20_000
    assert 0 < len(cache) < 50
    last, source = git_tree(files)
    validate_graph(last, cache=cache)
    assert source.asked == []  # the most recent entry is still there


def test_the_root_validator_takes_the_cache(tmp_path: Path) -> None:
    cache = ParseCache()
    plain = default_graph_validator(cache=Uncached()).validate(git_tree(FILES)[0])
    for _ in range(2):
        assert default_graph_validator(cache=cache).validate(git_tree(FILES)[0]) == plain
    assert (cache.misses, cache.hits) == (3, 3)


def test_a_store_others_could_write_is_dropped_not_read(tmp_path: Path) -> None:
    warm(tmp_path)
    (tmp_path / FILE_NAME).chmod(0o666)  # rows another user could have forged
    verdict, cache, _ = cold_verdict_from(tmp_path)
    assert verdict == expected()
    assert cache.misses == 3  # nothing trusted from it
    assert oct((tmp_path / FILE_NAME).stat().st_mode & 0o777) == "0o600"  # made again


def test_a_store_that_is_a_symlink_is_never_followed(tmp_path: Path) -> None:
    (tmp_path / "cache").mkdir(mode=0o700)
    victim = tmp_path / "notes.txt"
    victim.write_bytes(b"")  # an empty file sqlite would happily turn into a database
    victim.chmod(0o644)
    (tmp_path / "cache" / FILE_NAME).symlink_to(victim)
    warm(tmp_path / "cache")
    assert victim.read_bytes() == b"" and oct(victim.stat().st_mode & 0o777) == "0o644"
    assert not (tmp_path / "cache" / FILE_NAME).is_symlink()
    assert cold_verdict_from(tmp_path / "cache")[1].misses == 0


def test_a_directory_others_may_write_has_no_store(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    assert PersistentStore.open(shared, max_bytes=1 << 20) is None
    assert list(shared.iterdir()) == []


def test_a_busy_store_is_left_alone(tmp_path: Path) -> None:
    warm(tmp_path)
    before = rows(tmp_path)
    holder = sqlite3.connect(tmp_path / FILE_NAME, isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        assert PersistentStore.open(tmp_path, max_bytes=1 << 26) is None  # busy: memory only
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert rows(tmp_path) == before


def validator_imports(name: str) -> list[ModuleType]:
    """`memsync.validators.<name>` and every validators module it imports, transitively
    (read from the source, so a module split in two is followed without a list to keep)."""
    seen: dict[str, ModuleType] = {}
    waiting = [name]
    while waiting:
        module = importlib.import_module(f"memsync.validators.{waiting.pop()}")
        if module.__name__ in seen:
            continue
        seen[module.__name__] = module
        for node in ast.walk(ast.parse(Path(str(module.__file__)).read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom) or node.module is None:
                continue
            if node.module == "memsync.validators":
                waiting += [alias.name for alias in node.names]
            elif node.module.startswith("memsync.validators."):
                waiting.append(node.module.rsplit(".", 1)[1])
    return list(seen.values())


def changed_source(module: ModuleType, tmp_path: Path, patch: pytest.MonkeyPatch) -> None:
    """`module` seen with one more line of source."""
    changed = tmp_path / f"{module.__name__}.py"
    changed.write_bytes(Path(str(module.__file__)).read_bytes() + b"\n# changed\n")
    patch.setattr(module, "__file__", str(changed))


def test_the_parser_digest_follows_every_module_a_summary_depends_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = summaryframe.parser_digest()
    modules = validator_imports("summary")
    assert {"memsync.validators.document", "memsync.validators.scanwords"} < {
        module.__name__ for module in modules
    }
    for module in modules:
        with monkeypatch.context() as patch:
            changed_source(module, tmp_path, patch)
            assert summaryframe.parser_digest() != before, module.__name__


def test_a_git_object_id_and_a_sha256_of_bytes_are_never_one_key() -> None:
    """Both can be 64 hex digits (a SHA-256 repository's blob id hashes a header and the
    bytes): the same digits name different bytes in a Git tree and in a view package."""
    same = "ab" * 32
    good = b"# Topic {#t}\n- `a` x -> [dep:t]\n"
    bad = b"# Topic {#t}\n- `a` x -> [dep:gone]\n"
    git_like = TreeView({"MEMORY.md": Entry(MODE_FILE, len(good), oid=same, data=good)})
    package = TreeView(
        {"MEMORY.md": Entry(MODE_FILE, len(bad), oid=same, data=bad)}, sha256_ids=True
    )
    cache = ParseCache()
    for tree in (git_like, package):
        assert validate_graph(tree, cache=cache) == validate_graph(tree, cache=Uncached())
