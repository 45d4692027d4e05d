"""Pause records (issue 17, item 11): any bytes in the file parse to well-formed records or
none, records survive a write and a read, expiry is decided on read; a paused view is not
fetched at all and reads `paused` in `status`."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from memsync import timefmt
from memsync.config import load_config_text
from memsync.config.model import settings_from
from memsync.names import NAME_PATTERN
from memsync.roots import pause
from memsync.status import view_status
from memsync.views.pull import pull_views
from tests.unit.test_readiness import CONFIG

times = st.integers(0, 2**33).map(lambda s: timefmt.rfc3339(timefmt.from_timestamp(s)))
records = st.builds(
    pause.Pause,
    kind=st.sampled_from(pause.KINDS),
    name=st.from_regex(NAME_PATTERN, fullmatch=True),
    since=times,
    until=st.none() | times,
)


@given(st.binary(max_size=512))
def test_any_bytes_parse_to_records_or_none(raw: bytes) -> None:
    for (kind, name), held in pause.parse(raw).items():
        assert (held.kind, held.name) == (kind, name) and kind in pause.KINDS


@given(st.lists(records, max_size=8))
def test_records_survive_a_write_and_a_read(written: list[pause.Pause]) -> None:
    keyed = {(p.kind, p.name): p for p in written}
    assert pause.parse(pause.render(keyed)) == keyed


def test_junk_records_hold_nothing_and_expiry_is_decided_on_read(tmp_path: Path) -> None:
    now = timefmt.now()
    pause.pause_file(tmp_path).write_text(
        '{"version": 1, "pauses": [{"kind": "root", "name": "../x", "since": "x"}, 7,'
        ' {"kind": "root", "name": "bob", "since": "2026-01-01T00:00:00Z",'
        f' "until": "{timefmt.rfc3339(now + timedelta(seconds=30))}"}}]}}'
    )
    assert set(pause.load(tmp_path)) == {("root", "bob")}
    assert pause.holding(tmp_path, "root", "bob", now) is not None
    assert pause.holding(tmp_path, "root", "bob", now + timedelta(seconds=31)) is None
    assert pause.until_after(timedelta(milliseconds=1500), now.replace(microsecond=1)) == (
        timefmt.rfc3339(now.replace(microsecond=0) + timedelta(seconds=2))
    )


def test_a_paused_view_is_not_fetched_and_reads_paused(tmp_path: Path) -> None:
    state = tmp_path / "state"
    text = CONFIG.format(state=state, root=tmp_path / "bob")
    settings = settings_from(load_config_text(text, tmp_path), tmp_path / "config.yaml")
    view = next(v for v in settings.views if v.name == "old")
    pause.pause(state, "view", "old", None)
    # hub.example does not resolve: any fetch would end `unavailable`, not `paused`.
    (result,) = asyncio.run(pull_views([view], state))
    assert result.status == "paused" and "memsync resume old" in result.message
    seen = view_status(view, state)
    assert (seen.status, seen.paused, seen.paused_until) == ("paused", True, None)
    assert pause.resume(state, "view", "old") is not None
    assert view_status(view, state).status == "unavailable"
