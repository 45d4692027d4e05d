"""The history parsers: whatever bytes git (or a hostile commit object) hands them, they
answer or say "nothing", and never raise."""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from memsync import timefmt
from memsync.transports.githistory import (
    parse_blame_porcelain,
    parse_commit,
    parse_person,
)
from memsync.wire.provenance import ItemProvenanceReport, SignerReport

SHA = "a" * 40
RAW = (
    f"tree {'b' * 40}\nparent {'c' * 40}\nparent {'d' * 40}\n"
    "author Alice Example <alice@example.org> 1700000000 +0100\n"
    "committer memsync <memsync@localhost> 1700000100 -0000\n"
    "gpgsig -----BEGIN SSH SIGNATURE-----\n U1NIU0lH\n -----END SSH SIGNATURE-----\n"
    "\nsubject line\n\nbody\nMemsync-Operation: 20260101T000000-prune-abc\n"
).encode()


def test_a_commit_object_reads_as_git_wrote_it() -> None:
    facts = parse_commit(SHA, RAW)
    assert facts.parents == ("c" * 40, "d" * 40)
    assert facts.author is not None and facts.author.name == "Alice Example"
    assert (facts.author.email, facts.author.time) == ("alice@example.org", 1700000000)
    assert facts.committer is not None and facts.committer.time == 1700000100
    assert facts.signed and facts.subject == "subject line"
    assert facts.trailer("memsync-operation") == "20260101T000000-prune-abc"


def test_blame_porcelain_names_the_original_file_and_line() -> None:
    other = "b" * 40
    raw = (
        f"{SHA} 7 5 2\nauthor X\nfilename MEMORY_old.md\n\t- `x` y\n"
        f"{SHA} 8 6\n\t- `z` y\n"
        f"{other} 1 9 1\nfilename MEMORY.md\n\t- `w` y\n"
    ).encode()
    found = parse_blame_porcelain(raw, "MEMORY.md")
    assert {n: (b.commit, b.path, b.line) for n, b in found.items()} == {
        5: (SHA, "MEMORY_old.md", 7),
        6: (SHA, "MEMORY_old.md", 8),
        9: (other, "MEMORY.md", 1),
    }
    assert parse_blame_porcelain(b"", "MEMORY.md") == {}


@given(st.binary(max_size=400))
@example(("é" * 20 + " 1 1 1\n").encode())  # 40 bytes that are not an object id
@example(b"author N <e> \xc2\xb2 +0000\n")
def test_parsers_never_raise(data: bytes) -> None:
    parse_commit(SHA, data)
    parse_commit(SHA, RAW[: len(data) % len(RAW)] + data)
    parse_person(data)
    parse_blame_porcelain(data, "MEMORY.md")
    parse_blame_porcelain(SHA.encode()[: len(data) % 41] + data, "MEMORY.md")


def test_a_date_past_any_calendar_still_prints() -> None:
    for text in (b"N <e> 99999999999999999 +0000", b"N <e> -99999999999999999 +0000"):
        person = parse_person(text)
        assert person is not None
        timefmt.rfc3339(timefmt.from_timestamp(person.time))


@given(st.text(max_size=80))
@example("² +0000")  # a digit to str.isdigit, not to int()
@example("-")
def test_people_never_raise(text: str) -> None:
    parse_person(text.encode("utf-8", "surrogatepass"))
    parse_person(f"Name <e@x> {text}".encode("utf-8", "surrogatepass"))


def test_the_documents_have_json_schemas() -> None:
    item = ItemProvenanceReport.model_json_schema()
    assert {"root", "head", "item"} <= set(item["required"])
    signer = SignerReport.model_json_schema()
    assert signer["properties"]["signer"]["pattern"].startswith("^(SHA256:")
