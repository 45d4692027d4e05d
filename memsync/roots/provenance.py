"""Provenance: where an item of a root came from, and which items one signer introduced.

    item at HEAD (graph) -> blame its line: the commit that last changed it -> the commits
    that changed how often its id appears (`log -S`): the newest that holds the item while
    none of its parents does introduced it (a move holds it in a parent: not an intro)

Both are one git call over the history of the memory files (plus a scan of the few files
that hold the id in each commit checked), never a walk of the root's contents. A commit
is described from its object (author, committer, subject), its signature (the verified
signer's key fingerprint, `SHA256:…`, or "unsigned") and memsync's journal and run log:
the record of the operation whose published candidate is that commit (memsync made it;
a fast-forward sync admitted it) or the sync whose range held it. Only this machine's
journal counts (a `Memsync-Operation:` trailer is text anyone can copy); it keeps its
last `journal.KEEP_SETTLED` records, so older admissions are not known and say so by
their absence.

`signed_items` answers the question a team asks when a key leaks: every live item whose
introducing commit that key signed (optionally since a date). Candidates come from the
commits that key signed (ids their changed memory files gained), and each is confirmed by
the trace above, so an item another key introduced and the leaked key only edited or
moved is not listed. `revocation.revert_items` removes them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, cast

from memsync import timefmt
from memsync.errors import RootError
from memsync.roots import journal
from memsync.roots.layout import RootLayout
from memsync.transports import githistory
from memsync.transports.git import Git
from memsync.transports.githistory import CommitFacts
from memsync.validators.assembly import build_graph
from memsync.validators.blocks import Heading, Node
from memsync.validators.commitsig import signer_fingerprint
from memsync.validators.document import decode, scan
from memsync.validators.graphmodel import Item, MemoryGraph
from memsync.values import field, value

if TYPE_CHECKING:  # pydantic loads for the command's output only
    from memsync.wire.provenance import CommitModel, ItemModel

UNSIGNED = "unsigned"
TRAILER = "Memsync-Operation"
MEMORY_SPECS = (":(glob)MEMORY*.md", ":(glob)PURSUIT*.md")
MAX_STEPS = 10_000  # blame steps for one item (each one is a commit that changed its line)
RUNLOG_NAMES = ("cycles.log", "cycles.log.1")
RUNLOG_MAX = 4 << 20  # bytes read from one run log (its writer rotates at 1 MiB)
KINDS = frozenset({"sync", "autocommit", "prune", "insight", "repair", "revert"})
CHUNK = 1000  # commit objects read by one `cat-file --batch`
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


@value
class Admission:
    """memsync's record of the operation that made or admitted a commit."""

    operation_id: str
    kind: str  # sync | autocommit | prune | insight | repair | revert
    relation: str  # "made" (memsync wrote the commit) | "admitted" (a sync let it in)
    phase: str  # the journal record's phase (committed)
    role: str | None = None  # cycles: the role and its executor, from the run log
    executor: str | None = None


@value
class CommitRecord:
    commit: str
    author_name: str
    author_email: str
    authored_at: int
    committed_at: int
    subject: str
    signer: str  # "SHA256:…" or "unsigned"
    admission: Admission | None

    def model(self) -> CommitModel:
        """The commit as `memsync provenance --json` prints it."""
        from memsync.wire.provenance import AdmissionModel, CommitModel  # noqa: PLC0415

        admission = self.admission
        return CommitModel(
            commit=self.commit,
            author=self.author_name,
            author_email=self.author_email,
            authored_at=timefmt.rfc3339(timefmt.from_timestamp(self.authored_at)),
            committed_at=timefmt.rfc3339(timefmt.from_timestamp(self.committed_at)),
            subject=self.subject,
            signer=self.signer,
            admission=None
            if admission is None
            else AdmissionModel(
                operation_id=admission.operation_id,
                kind=admission.kind,
                relation=admission.relation,
                phase=admission.phase,
                role=admission.role,
                executor=admission.executor,
            ),
        )


@value
class ItemProvenance:
    item: str
    kind: str  # heading | node
    anchor: str | None
    file: str
    line: int
    head: str
    last_changed: CommitRecord
    introduced: CommitRecord

    def model(self) -> ItemModel:
        """The item as `memsync provenance --json` prints it."""
        from memsync.wire.provenance import ItemModel  # noqa: PLC0415 - pydantic

        return ItemModel(
            item=self.item,
            kind=self.kind,
            anchor=self.anchor,
            file=self.file,
            line=self.line,
            introduced=self.introduced.model(),
            last_changed=self.last_changed.model(),
        )


class UnknownItem(LookupError):
    """The id names no item of the root's graph at HEAD."""


@value
class Located:
    rev: str
    path: str
    line: int


# -- signatures -------------------------------------------------------------------------------


def signer_of(raw_commit: bytes) -> str:
    """The signer's key fingerprint (`SHA256:…`) when the signature verifies against the key
    it embeds (commitsig), else "unsigned". Whether that key is trusted is the reader's call:
    provenance names keys, admission pins them."""
    return signer_fingerprint(raw_commit) or UNSIGNED


# -- memsync's own records --------------------------------------------------------------------


class Records:
    """The journal's settled records and the cycles' run log of one root, read once."""

    def __init__(self, layout: RootLayout) -> None:
        self.layout = layout
        self._journal: list[journal.Operation] | None = None
        self._runs: dict[str, tuple[str | None, str | None]] | None = None

    def operations(self) -> list[journal.Operation]:
        if self._journal is None:
            found: list[journal.Operation] = []
            directory = self.layout.journal_dir
            try:
                paths = sorted(directory.glob("*.json"))[-journal.KEEP_SETTLED * 2 :]
            except OSError:
                paths = []
            store = journal.Journal(directory)
            for path in paths:
                op = store.load(path.stem)
                if op is not None:
                    found.append(op)
            found.sort(key=lambda op: (op.created_at, op.id))
            self._journal = found
        return self._journal

    def run(self, operation_id: str) -> tuple[str | None, str | None]:
        """(role, executor) of the last run-log line for this operation."""
        if self._runs is None:
            runs: dict[str, tuple[str | None, str | None]] = {}
            for name in reversed(RUNLOG_NAMES):  # the older generation first
                for line in _bounded_lines(self.layout.base / name):
                    try:
                        entry = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(entry, dict) and isinstance(entry.get("operation_id"), str):
                        role, executor = entry.get("role"), entry.get("executor")
                        runs[entry["operation_id"]] = (
                            role if isinstance(role, str) else None,
                            executor if isinstance(executor, str) else None,
                        )
            self._runs = runs
        return self._runs.get(operation_id, (None, None))


def _bounded_lines(path: Path) -> list[str]:
    try:
        with path.open("rb") as handle:
            data = handle.read(RUNLOG_MAX)
    except OSError:
        return []
    return data.decode("utf-8", "replace").splitlines()


class AdmissionFinder:
    """Which memsync operation made or admitted a commit."""

    def __init__(self, git: Git, records: Records) -> None:
        self.git = git
        self.records = records
        self._ancestor: dict[tuple[str, str], bool] = {}

    def find(self, facts: CommitFacts) -> Admission | None:
        """Only this machine's journal counts: a record whose published candidate is this
        very commit (memsync made it; a fast-forward sync admitted it), else the sync whose
        range held it. A `Memsync-Operation:` trailer is text anyone can write (operation
        ids travel in pushed messages), so it is never taken as proof on its own."""
        ops = self.records.operations()
        for op in ops:
            if op.candidate == facts.commit and op.phase == journal.COMMITTED:
                relation = "admitted" if op.candidate == op.upstream else "made"
                return self._admission(op.id, op.kind, relation, op)
        return self._admitted_by_sync(facts.commit, ops)

    def _admitted_by_sync(self, commit: str, ops: Sequence[journal.Operation]) -> Admission | None:
        """The first committed sync whose candidate holds `commit` and whose start did not.
        Published candidates follow one another on the branch, so "holds" is monotone in
        time and found by bisection (each answer checked: a rewound branch finds none)."""
        syncs = [
            op
            for op in ops
            if op.kind == "sync" and op.phase == journal.COMMITTED and op.candidate is not None
        ]
        low, high = 0, len(syncs)
        while low < high:
            middle = (low + high) // 2
            if self._is_ancestor(commit, cast("str", syncs[middle].candidate)):
                high = middle
            else:
                low = middle + 1
        if low == len(syncs):
            return None
        op = syncs[low]
        if not self._is_ancestor(commit, cast("str", op.candidate)) or self._is_ancestor(
            commit, op.start
        ):
            return None
        return self._admission(op.id, op.kind, "admitted", op)

    def _is_ancestor(self, ancestor: str, descendant: str) -> bool:
        key = (ancestor, descendant)
        if key not in self._ancestor:
            self._ancestor[key] = self.git.descends(ancestor, descendant)
        return self._ancestor[key]

    def _admission(
        self, operation_id: str, kind: str, relation: str, op: journal.Operation
    ) -> Admission:
        role = executor = None
        if kind in ("prune", "insight", "repair"):
            role, executor = self.records.run(operation_id)
        return Admission(operation_id, kind, relation, op.phase, role, executor)


# -- commits ----------------------------------------------------------------------------------


@value(frozen=False)
class History:
    """Commit objects of one root, read through the git box and kept for one command."""

    git: Git
    admissions: AdmissionFinder
    raw: dict[str, bytes] = field(default_factory=dict)
    _records: dict[str, CommitRecord] = field(default_factory=dict)

    def load(self, commits: Iterable[str]) -> None:
        missing = [c for c in commits if c not in self.raw]
        if missing:
            self.raw.update(githistory.raw_commits(self.git, missing))

    def facts(self, commit: str) -> CommitFacts:
        self.load([commit])
        return githistory.parse_commit(commit, self.raw.get(commit, b""))

    def signed_by(self, commits: Sequence[str], signer: str) -> list[str]:
        """The commits `signer` signed, read CHUNK at a time (memory bounded by a chunk)."""
        found: list[str] = []
        for start in range(0, len(commits), CHUNK):
            part = commits[start : start + CHUNK]
            raw = githistory.raw_commits(self.git, part)
            found += [c for c in part if signer_of(raw.get(c, b"")) == signer]
        return found

    def signer(self, commit: str) -> str:
        self.load([commit])
        return signer_of(self.raw.get(commit, b""))

    def record(self, commit: str) -> CommitRecord:
        if commit not in self._records:
            facts = self.facts(commit)
            author, committer = facts.author, facts.committer
            self._records[commit] = CommitRecord(
                commit=commit,
                author_name=author.name if author else "",
                author_email=author.email if author else "",
                authored_at=author.time if author else 0,
                committed_at=committer.time if committer else 0,
                subject=facts.subject,
                signer=self.signer(commit),
                admission=self.admissions.find(facts),
            )
        return self._records[commit]


# -- items ------------------------------------------------------------------------------------


def item_lines(text: str, path: str) -> dict[str, int]:
    """id -> line of every addressable heading and node of one document."""
    doc = scan(text, path, pursuit=path.startswith("PURSUIT"))
    found: dict[str, int] = {}
    for block in doc.blocks:
        if isinstance(block, Heading | Node) and block.item_id is not None:
            found.setdefault(block.item_id, block.line)
    return found


def _line_in(git: Git, rev: str, path: str, item_id: str) -> int | None:
    data = githistory.file_at(git, rev, path)
    text = None if data is None else decode(data)
    return None if text is None else item_lines(text, path).get(item_id)


def find_item(git: Git, rev: str, item_id: str, near: str | None = None) -> Located | None:
    """Where `item_id` stands at `rev`: in `near` when it is there, else in the first
    memory file (by path) that holds it; None when no memory file does."""
    if near is not None:
        line = _line_in(git, rev, near, item_id)
        if line is not None:
            return Located(rev, near, line)
    for path in sorted(githistory.files_holding(git, rev, item_id, MEMORY_SPECS)):
        if path == near:
            continue
        line = _line_in(git, rev, path, item_id)
        if line is not None:
            return Located(rev, path, line)
    return None


# A line that defines an item, with its diff sign: a node bullet or an anchored heading.
_DEFINES = re.compile(
    r"[+-](?:[ \t]*-[ \t]+`([A-Za-z0-9_.-]+)`(?=[ \t]|$)"
    r"|#+[ \t].*?\{(?:MF|MQ|F|M|S)?#([A-Za-z0-9_.-]+)\})"
)
IDS_PER_SEARCH = 200  # ids in one `log -G` pattern


def defined_id(line: str) -> str | None:
    """The id a changed diff line (`+…`/`-…`) defines, if it is a node or heading line."""
    found = _DEFINES.match(line)
    return None if found is None else found.group(1) or found.group(2)


def id_pattern(ids: Sequence[str]) -> str:
    """An extended regex for git's `-G` matching a line that names any of `ids` as a node
    (`` `id` ``) or a heading anchor (`#id}`); edges (`dep:id`) do not match."""
    alternation = "|".join(i.replace(".", "[.]") for i in ids)
    return f"(`({alternation})`|#({alternation})[}}])"


def introductions(git: Git, rev: str, ids: Sequence[str]) -> dict[str, list[str]]:
    """For each id, newest first, the commits that changed how many lines define it in
    some memory file (added it, removed it, or moved it between files): where it can
    have been introduced. One `git log -G` per IDS_PER_SEARCH ids."""
    found: dict[str, list[str]] = {}
    wanted = sorted(set(ids))
    for start in range(0, len(wanted), IDS_PER_SEARCH):
        part = wanted[start : start + IDS_PER_SEARCH]
        chosen = set(part)
        net: dict[tuple[str, str, str], int] = {}
        order: dict[str, int] = {}
        for commit, path, line in githistory.id_events(git, rev, id_pattern(part), MEMORY_SPECS):
            item_id = defined_id(line)
            if item_id is None or item_id not in chosen:
                continue
            order.setdefault(commit, len(order))
            key = (item_id, commit, path)
            net[key] = net.get(key, 0) + (1 if line.startswith("+") else -1)
        for (item_id, commit, _path), count in net.items():
            if count and commit not in found.setdefault(item_id, []):
                found[item_id].append(commit)
        for commits in found.values():
            commits.sort(key=lambda c: order.get(c, len(order)))
    return found


def trace(
    git: Git,
    history: History,
    at: Located,
    item_id: str,
    candidates: Sequence[str] | None = None,
    last: str | None = None,
) -> tuple[str, str]:
    """(last changed, introduced): the commit that last changed the item's line at `at`
    (`last`, else one blame), and the newest commit that holds the item while none of its
    parents does, among `candidates` (default: `introductions` of its id)."""
    if last is None:
        blamed = githistory.blame_line(git, at.rev, at.path, at.line)
        if blamed is None:
            raise UnknownItem(f"no history for line {at.line} of {at.path}")
        last = blamed.commit
    if candidates is None:
        candidates = introductions(git, at.rev, [item_id]).get(item_id, [])
    for commit in candidates:
        if find_item(git, commit, item_id, near=at.path) is None:
            continue  # it went here (and came back later)
        parents = history.facts(commit).parents
        if all(find_item(git, p, item_id, near=at.path) is None for p in parents):
            return last, commit
    return last, _walk_back(git, history, at, item_id)


def _walk_back(git: Git, history: History, at: Located, item_id: str) -> str:
    """The introducing commit by blame steps (each a change of the item's line), for what
    the id search cannot see (an item that first stood in a merge's own changes)."""
    here = at
    found = None
    for _ in range(MAX_STEPS):
        blamed = githistory.blame_line(git, here.rev, here.path, here.line)
        if blamed is None:
            break
        found = blamed.commit
        before = None
        for parent in history.facts(blamed.commit).parents:
            before = find_item(git, parent, item_id, near=blamed.path)
            if before is not None:
                break
        if before is None:
            return blamed.commit
        here = before
    if found is None:
        raise UnknownItem(f"no history for line {at.line} of {at.path}")
    return found


def head_graph(git: Git, head: str) -> MemoryGraph:
    """The root's graph at `head` (the items that are live)."""
    graph, _problems = build_graph(git.tree_view(head))
    return graph


def describe(git: Git, history: History, head: str, item: Item) -> ItemProvenance:
    last, first = trace(git, history, Located(head, item.file, item.line), item.id)
    return _provenance(history, head, item, last, first)


def _provenance(history: History, head: str, item: Item, last: str, first: str) -> ItemProvenance:
    return ItemProvenance(
        item=item.id,
        kind=item.kind,
        anchor=item.anchor,
        file=item.file,
        line=item.line,
        head=head,
        last_changed=history.record(last),
        introduced=history.record(first),
    )


def item_provenance(git: Git, layout: RootLayout, head: str, item_id: str) -> ItemProvenance:
    graph = head_graph(git, head)
    item = graph.items.get(item_id)
    if item is None:
        raise UnknownItem(f"no item `{item_id}` in the root at {head[:12]}")
    history = History(git, AdmissionFinder(git, Records(layout)))
    return describe(git, history, head, item)


# -- one signer's items -----------------------------------------------------------------------


def _is_memory_file(path: str) -> bool:
    return "/" not in path and path.endswith(".md") and path.startswith(("MEMORY", "PURSUIT"))


def gained_ids(git: Git, history: History, commits: Sequence[str]) -> set[str]:
    """Ids the commits' changed memory files hold that the same files in each one's first
    parent did not (a superset of what they introduced: a move also counts here). Two git
    calls for all of them: the changed paths, then every file's bytes on both sides."""
    history.load(commits)
    changed = githistory.changed_files(git, commits, MEMORY_SPECS)
    pairs: list[tuple[str, str | None, str]] = []
    for commit in commits:
        parents = history.facts(commit).parents
        parent = parents[0] if parents else None
        pairs += [(commit, parent, p) for p in changed.get(commit, ()) if _is_memory_file(p)]
    names = [f"{c}:{p}" for c, _, p in pairs] + [f"{q}:{p}" for _, q, p in pairs if q]
    blobs: dict[str, bytes | None] = {}
    for start in range(0, len(names), CHUNK):
        blobs.update(githistory.read_named(git, names[start : start + CHUNK]))

    def ids(name: str | None, path: str) -> set[str]:
        data = blobs.get(name) if name else None
        text = None if data is None else decode(data)
        return set() if text is None else set(item_lines(text, path))

    gained: set[str] = set()
    for commit, parent, path in pairs:
        before = ids(f"{parent}:{path}" if parent else None, path)
        gained |= ids(f"{commit}:{path}", path) - before
    return gained


@value
class SignerItems:
    head: str
    signer: str
    commits: tuple[str, ...]  # the commits (touching memory files) that key signed
    items: tuple[ItemProvenance, ...]


def signed_items(
    git: Git, layout: RootLayout, head: str, signer: str, since: str | None = None
) -> SignerItems:
    """Every live item whose introducing commit `signer` signed (and, with `since`, was
    committed since then)."""
    history = History(git, AdmissionFinder(git, Records(layout)))
    in_range = githistory.commits_touching(git, head, MEMORY_SPECS, since)
    theirs = history.signed_by(in_range, signer)
    allowed = set(in_range)
    candidates = gained_ids(git, history, theirs)
    graph = head_graph(git, head)
    live = sorted(i for i in candidates if i in graph.items)
    events = introductions(git, head, live)
    lines: dict[str, list[int]] = {}
    for item_id in live:
        lines.setdefault(graph.items[item_id].file, []).append(graph.items[item_id].line)
    blamed = {
        (path, n): b.commit
        for path, numbers in lines.items()
        for n, b in githistory.blame_lines(git, head, path, numbers).items()
    }
    found: list[ItemProvenance] = []
    for item_id in live:
        item = graph.items[item_id]
        at = Located(head, item.file, item.line)
        known = blamed.get((item.file, item.line))
        last, first = trace(git, history, at, item_id, events.get(item_id, []), known)
        if first in allowed and history.signer(first) == signer:
            found.append(_provenance(history, head, item, last, first))
    found.sort(key=lambda p: (p.file, p.line))
    return SignerItems(head, signer, tuple(theirs), tuple(found))


@value
class OpenRoot:
    """A root whose history is read: its git box, its layout and the HEAD it is read at."""

    name: str
    git: Git
    layout: RootLayout
    head: str


def open_root(name: str, path: Path, state_dir: Path, *, timeout: float) -> OpenRoot:
    """The root `name` at `path`, at its HEAD (RootError when it is no Git work tree with
    commits)."""
    git = Git(path, timeout=timeout)
    head = git.rev_parse("HEAD") if git.git_dir() is not None else None
    if head is None:
        raise RootError(
            f"root {name}: {path} is not a Git work tree with commits",
            hint="`memsync init` it, or fix `path` in the config",
        )
    return OpenRoot(name, git, RootLayout.for_root(state_dir, name), head)
