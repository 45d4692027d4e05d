"""Log formats: JSON lines for shippers, stamped text unless stderr is the journal's."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsync.cli.kit import App, setup_logging
from memsync.logsetup import JsonFormatter, TextFormatter, journald_stderr

TOKEN = "msk_abcdefSECRET0123456789"


def record(message: str, context: dict[str, object] | None = None) -> logging.LogRecord:
    made = logging.LogRecord("memsync.daemon", logging.WARNING, __file__, 1, message, (), None)
    if context is not None:
        made.memsync = context
    return made


def test_json_is_one_object_a_line_with_context_and_redacted_fields() -> None:
    line = JsonFormatter().format(
        record(
            f"root bob: current -> offline: https://u:{TOKEN}@host/x",
            {"root": "bob", "event": "status-changed", "fields": {"url": f"?t={TOKEN}"}},
        )
    )
    assert "\n" not in line and TOKEN not in line and "SECRET" not in line
    document = json.loads(line)
    assert set(document) == {"time", "level", "logger", "root", "event", "message", "fields"}
    assert document["level"] == "warning" and document["logger"] == "memsync.daemon"
    assert document["root"] == "bob" and document["event"] == "status-changed"
    assert document["time"].endswith("Z") and "T" in document["time"]


@given(st.text(max_size=200), st.dictionaries(st.text(max_size=10), st.text(max_size=50)))
def test_json_always_parses_and_never_spans_lines(message: str, fields: dict[str, str]) -> None:
    line = JsonFormatter().format(record(message, {"fields": fields}))
    assert "\n" not in line
    assert json.loads(line)["message"] is not None


def test_text_is_stamped_off_the_journal_and_prioritised_on_it() -> None:
    assert TextFormatter(journald=False).format(record("a\nb")).endswith("memsync: WARNING a b")
    assert TextFormatter(journald=False).format(record("x"))[:4].isdigit()
    assert TextFormatter(journald=True).format(record("x")) == "<4>x"


def test_the_journal_is_recognised_by_the_device_and_inode_of_stderr(tmp_path: Path) -> None:
    with (tmp_path / "err").open("w") as stream:
        stat = os.fstat(stream.fileno())
        mine = f"{stat.st_dev}:{stat.st_ino}"
        assert journald_stderr({"JOURNAL_STREAM": mine}, stream.fileno())
        # Inherited by a process whose stderr is elsewhere: not the journal.
        assert not journald_stderr(
            {"JOURNAL_STREAM": f"{stat.st_dev}:{stat.st_ino + 1}"}, stream.fileno()
        )
        assert not journald_stderr({"JOURNAL_STREAM": "junk"}, stream.fileno())
        assert not journald_stderr({}, stream.fileno())


def test_the_command_line_format_wins_over_the_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    config = tmp_path / "config.yaml"
    config.write_text(f"version: 1\nstate_dir: {tmp_path / 'state'}\nlog: {{format: json}}\n")
    ours, root = logging.getLogger("memsync"), logging.getLogger()
    saved = (ours.handlers[:], ours.level, ours.propagate, root.handlers[:], root.level)
    try:
        found = []
        for chosen in (None, "text", "json"):
            setup_logging(False, chosen or "text")
            App(config_path=str(config), log_format=chosen).settings()
            found.append(type(ours.handlers[0].formatter))
        assert found == [JsonFormatter, TextFormatter, JsonFormatter]
        assert root.handlers == ours.handlers  # libraries' records: the same redacting handler
    finally:
        ours.handlers[:], ours.level, ours.propagate = saved[0], saved[1], saved[2]
        root.handlers[:], root.level = saved[3], saved[4]


def test_a_huge_field_is_cut_so_a_line_stays_bounded() -> None:
    files = [f"insight_logs/{i}.md" for i in range(20_000)]
    line = JsonFormatter().format(record("x", {"fields": {"files": files, "t": "y" * 10**6}}))
    assert len(line) < 20_000
    assert json.loads(line)["fields"]["files"][-1] == "… 19900 more"
