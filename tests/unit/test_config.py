"""The configuration: schema, YAML loading with located problems, secrets, lookup, settings."""

from __future__ import annotations

import errno
import os
import stat
import textwrap
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest

from memsync.config import (
    SAMPLE,
    Config,
    SecretRef,
    find_config_path,
    format_problem,
    load_config,
    load_config_text,
    resolve,
    settings_from,
)
from memsync.config.model import root_settings
from memsync.config.schema import CommandRole, GitSource
from memsync.config.statedir import as_state_dir_error, check_state_dir, ensure_state_dir
from memsync.configproblem import Located
from memsync.cycles.runner import cycle_settings
from memsync.errors import ConfigError, SecretError, StateDirError

KEY = "ed25519:AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA"
KEY2 = "ed25519:" + "A" * 42 + "E"


def load(text: str, base: Path = Path("/cfg")) -> Config:
    return load_config_text(textwrap.dedent(text), base, "config.yaml")


def problems(text: str, base: Path = Path("/cfg")) -> list[Located]:
    with pytest.raises(ConfigError) as caught:
        load(text, base)
    assert caught.value.source == "config.yaml"
    assert caught.value.problems
    return list(caught.value.problems)


def where(found: list[Located]) -> set[tuple[int | None, str]]:
    return {(p.line, p.location) for p in found}


def only(found: list[Located]) -> Located:
    assert len(found) == 1, found
    return found[0]


# --- the sample (itself: tests/unit/test_config_sample.py) ---------------------------


def test_model_dump_round_trips_units_and_hides_value_secrets() -> None:
    config = load(
        """\
        version: 1
        roots:
          a:
            path: /a
            sync: {interval: 90s, events_token: {value: hunter2}}
        """
    )
    dumped = config.model_dump(mode="json")
    root = dumped["roots"]["a"]
    assert root["sync"]["interval"] == "90s"
    assert root["max_file_size"] == "4MiB"
    assert "hunter2" not in repr(dumped)
    assert "hunter2" not in repr(config)
    again = Config.model_validate(load(SAMPLE).model_dump(mode="json"))
    assert again == load(SAMPLE)


# --- defaults -----------------------------------------------------------------------


def test_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", "/state")
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/run/user/7")
    config = load(
        """\
        version: 1
        roots: {personal: {path: /m}}
        views:
          shared: {root: personal, source: {kind: git, url: /srv/team.git, path: shares/a},
                   trust: {allow_unsigned: true}}
        roles: {r: {executor: command, command: [x]}}
        """
    )
    root = config.roots["personal"]
    assert config.state_dir == Path("/state/memsync")
    assert config.control_socket == Path("/run/user/7/memsync.sock")
    assert config.http is None
    assert config.hub is None
    assert root.branch is None
    assert root.max_file_size == 4 * 1024 * 1024
    assert root.watch is True
    assert (root.sync.enabled, root.sync.remote, root.sync.push, root.sync.autocommit) == (
        True,
        "origin",
        True,
        False,
    )
    assert root.sync.interval == timedelta(seconds=60)
    assert root.sync.timeout == timedelta(seconds=120)
    assert (root.prune.enabled, root.prune.role, root.prune.generation_commits) == (
        False,
        "pruner",
        70,
    )
    assert root.prune.check_every == timedelta(hours=2)
    assert root.prune.revival_grace == 2
    assert (root.insight.role, root.insight.trigger_points, root.insight.points_per_commit) == (
        "insight",
        150,
        1,
    )
    assert root.insight.check_every == timedelta(minutes=50)
    assert root.repair is None
    assert root.publish == ()
    view = config.views["shared"]
    assert view.heading is None
    assert isinstance(view.source, GitSource)
    assert view.source.branch == "main"
    assert view.trust.threshold == 1
    assert view.refresh == timedelta(minutes=5)
    assert view.max_stale == timedelta(days=7)
    role = config.roles["r"]
    assert isinstance(role, CommandRole)
    assert role.timeout == timedelta(minutes=15)


def test_default_state_dir_and_socket_fallbacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    config = load("version: 1\n")
    assert config.state_dir == tmp_path / ".local/state/memsync"
    assert config.control_socket == tmp_path / ".local/state/memsync/memsync.sock"
    monkeypatch.setenv("XDG_STATE_HOME", "relative/ignored")
    assert load("version: 1\n").state_dir == tmp_path / ".local/state/memsync"


def test_root_at_finds_the_root_configured_at_a_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What `memsync init PATH` takes a root's credentials and signing key from."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    config = load(
        """\
        version: 1
        state_dir: /s
        roots:
          home: {path: ~/mem}
          other: {path: /x}
        """
    )
    settings = settings_from(config, Path("/cfg/config.yaml"))
    for given in (tmp_path / "mem", Path("~/mem"), Path("mem")):
        found = settings.root_at(given)
        assert found is not None and found.name == "home", given
    found = settings.root_at(Path("/x"))
    assert found is not None and found.name == "other"
    assert settings.root_at(Path("/y")) is None


def test_settings_from(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    config = load(
        """\
        version: 1
        state_dir: /s
        http: {listen: "127.0.0.1:9464"}
        roots:
          b: {path: /b, branch: dev, max_file_size: 1KiB, watch: false,
              sync: {enabled: false, remote: up, interval: 5m, push: false, autocommit: true,
                     timeout: 1h, events: "https://hub/v1/events?root=b",
                     events_token: {env: HUB_TOKEN}}}
          a: {path: /a}
        """
    )
    settings = settings_from(config, Path("/cfg/config.yaml"))
    assert settings.state_dir == Path("/s")
    assert settings.control_socket == Path("/s/memsync.sock")
    assert settings.config_path == Path("/cfg/config.yaml")
    assert settings.http_listen == "127.0.0.1:9464"
    assert [root.name for root in settings.roots] == ["b", "a"]
    b = settings.root("b")
    assert b is not None
    assert (b.path, b.branch, b.max_file_size, b.watch) == (Path("/b"), "dev", 1024, False)
    assert (b.sync_enabled, b.remote, b.push, b.autocommit) == (False, "up", False, True)
    assert (b.interval, b.timeout) == (timedelta(minutes=5), timedelta(hours=1))
    assert b.events_token == SecretRef("env", "HUB_TOKEN")
    assert settings.root("nope") is None


# --- paths ----------------------------------------------------------------------------


def test_relative_paths_resolve_against_the_config_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    cfg = tmp_path / "etc" / "config.yaml"
    cfg.parent.mkdir()
    cfg.write_text(
        textwrap.dedent(
            """\
            version: 1
            state_dir: state
            control: {socket: ./run/../memsync.sock}
            roots:
              rel: {path: ../memory}
              home: {path: ~/notes}
              abs: {path: /srv/m}
              pub:
                path: p
                publish: [{view: v, hub: "https://h", token: {env: T}, key: {file: keys/v.key}}]
            views:
              g: {root: rel, source: {kind: git, url: ../team.git, path: .},
                  trust: {allow_unsigned: true}}
            hub: {data_dir: hub}
            """
        )
    )
    config = load_config(cfg)
    assert config.state_dir == tmp_path / "etc/state"
    assert config.control.socket == tmp_path / "etc/memsync.sock"
    assert config.roots["rel"].path == tmp_path / "memory"
    assert config.roots["home"].path == tmp_path / "home/notes"
    assert config.roots["abs"].path == Path("/srv/m")
    assert config.roots["pub"].publish[0].key == SecretRef("file", str(tmp_path / "etc/keys/v.key"))
    source = config.views["g"].source
    assert isinstance(source, GitSource)
    assert source.url == str(tmp_path / "team.git")
    assert config.hub is not None
    assert config.hub.data_dir == tmp_path / "etc/hub"


# --- problems, all at once, with locations and lines --------------------------------------

MISTAKES = """\
version: 1
state_dir: 5
roots:
  personal:
    path: ~/memory
    max_file_size: 4MB
    sync:
      interval: 60x
      intervall: 5s
      events_token: plain-secret-text
    prune: {enabled: true, role: nope}
    publish:
      - view: auth
        hub: https://hub.example
        token: {env: HUB_TOKEN}
  other:
    watch: maybe
views:
  team:
    root: missing
    source: {kind: ftp}
roles:
  r: {executor: command, command: []}
http: {listen: localhost}
"""


def test_every_problem_is_reported_with_location_and_line() -> None:
    found = problems(MISTAKES)
    assert where(found) == {
        (2, "state_dir"),
        (6, "roots.personal.max_file_size"),
        (8, "roots.personal.sync.interval"),
        (9, "roots.personal.sync.intervall"),
        (10, "roots.personal.sync.events_token"),
        (11, "roots.personal.prune.role"),
        (13, "roots.personal.publish[0].key"),
        (16, "roots.other.path"),
        (17, "roots.other.watch"),
        (20, "views.team.root"),
        (21, "views.team.source"),
        (19, "views.team.trust.threshold"),
        (23, "roles.r.command"),
        (24, "http.listen"),
    }
    by_location = {p.location: p.message for p in found}
    assert by_location["roots.personal.sync.interval"] == (
        "invalid duration '60x' (use <int><ms|s|m|h|d>, e.g. 60s)"
    )
    assert "invalid size '4MB'" in by_location["roots.personal.max_file_size"]
    assert "did you mean interval?" in by_location["roots.personal.sync.intervall"]
    assert "required key is missing" in by_location["roots.personal.publish[0].key"]
    assert "role 'nope' is not defined" in by_location["roots.personal.prune.role"]
    assert "root 'missing' is not configured" in by_location["views.team.root"]
    assert "kind: http or kind: git" in by_location["views.team.source"]
    assert "true or false" in by_location["roots.other.watch"]
    assert "HOST:PORT" in by_location["http.listen"]
    lines = [p.line or 0 for p in found]
    assert lines == sorted(lines)


def test_problems_render_as_one_line_each() -> None:
    found = problems(MISTAKES)
    rendered = [format_problem(p, "config.yaml") for p in found]
    assert (
        "config.yaml:8: roots.personal.sync.interval: invalid duration '60x' "
        "(use <int><ms|s|m|h|d>, e.g. 60s)"
    ) in rendered
    assert format_problem(Located("", "bad", None)) == "bad"
    assert format_problem(Located("x", "bad", 3), "c.yaml") == "c.yaml:3: x: bad"


def test_error_message_counts_problems() -> None:
    with pytest.raises(ConfigError) as caught:
        load(MISTAKES)
    assert (
        caught.value.message == f"config.yaml: {len(caught.value.problems)} configuration problems"
    )
    assert caught.value.exit_code == 2


@pytest.mark.parametrize(
    ("text", "location", "allowed"),
    [
        ("version: 1\nverbose: true\n", "verbose", "version, state_dir, control"),
        ("version: 1\nroots: {a: {path: /a, colour: red}}\n", "roots.a.colour", "path, branch"),
        ("version: 1\nroots: {a: {path: /a, prune: {every: 1h}}}\n", "roots.a.prune.every", "role"),
        (
            "version: 1\nroots: {a: {path: /a, publish: [{view: v, hub: 'http://h', x: 1}]}}\n",
            "roots.a.publish[0].x",
            "view, hub, token, key",
        ),
        (
            "version: 1\nroles: {r: {executor: openai, base_url: 'http://h', model: m, temp: 1}}\n",
            "roles.r.temp",
            "executor, base_url, model, api_key, timeout",
        ),
        (
            "version: 1\nviews: {v: {root: a, source: {kind: http, url: 'http://h', ref: x}}}\n",
            "views.v.source.ref",
            "kind, url, token",
        ),
    ],
)
def test_unknown_keys_name_the_allowed_ones(text: str, location: str, allowed: str) -> None:
    found = [p for p in problems(text) if "unknown key" in p.message]
    problem = only(found)
    assert problem.location == location
    assert allowed in problem.message


def test_duplicate_keys_are_errors() -> None:
    found = problems(
        """\
        version: 1
        roots:
          a:
            path: /a
            sync:
              push: true
              push: false
          a:
            path: /b
        """
    )
    assert where(found) == {(7, "roots.a.sync.push"), (8, "roots.a")}
    assert {p.message for p in found} == {
        "duplicate key (first at line 6)",
        "duplicate key (first at line 3)",
    }


def test_merge_keys_are_not_duplicates() -> None:
    # Without anchors (refused: tests/unit/test_config_bombs.py) a merge key can only merge
    # an inline mapping; its keys give way to the mapping's own.
    config = load(
        """\
        version: 1
        roots:
          b:
            <<: {path: /a, watch: false}
            path: /b
        """
    )
    assert config.roots["b"].path == Path("/b")
    assert config.roots["b"].watch is False


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("version: 1\nroots: {a: {path: x}\n", 3, "YAML syntax error"),
        ("version: 1\nroots:\n  a:\n    path: x\n   bad: 1\n", 5, "YAML syntax error"),
        ("version: 1\n---\nversion: 1\n", 2, "single document"),
        ("version: 1\nx: !!python/object:os.system y\n", 2, "tag !!python/object:os.system"),
        ("", 1, "empty"),
        ("# only a comment\n", 1, "empty"),
        ("- version: 1\n", 1, "mapping"),
        ("just text\n", 1, "mapping"),
        ("# comment\n~\n", 2, "mapping"),
    ],
)
def test_document_problems(text: str, line: int, words: str) -> None:
    problem = only(problems(text))
    assert problem.location == ""
    assert problem.line == line
    assert words in problem.message


@pytest.mark.parametrize("version", ["2", "'1'", "true", "1.0", "null"])
def test_only_version_1(version: str) -> None:
    problem = only(problems(f"version: {version}\n"))
    assert problem.location == "version"
    assert "version: 1" in problem.message


def test_missing_version() -> None:
    problem = only(problems("state_dir: /s\n"))
    assert (problem.location, problem.line) == ("version", 1)
    assert "missing" in problem.message


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("sync: {interval: 60}", "roots.a.sync.interval", "no unit"),
        ("sync: {interval: 1.5m}", "roots.a.sync.interval", "invalid duration '1.5m'"),
        ("sync: {timeout: 0s}", "roots.a.sync.timeout", "more than 0"),
        ("sync: {timeout: -5s}", "roots.a.sync.timeout", "invalid duration"),
        ("prune: {check_every: 2 h}", "roots.a.prune.check_every", "invalid duration"),
        ("max_file_size: 4096", "roots.a.max_file_size", "no unit"),
        ("max_file_size: 4mb", "roots.a.max_file_size", "invalid size '4mb'"),
        ("max_file_size: 0B", "roots.a.max_file_size", "more than 0B"),
        ("prune: {generation_commits: 0}", "roots.a.prune.generation_commits", "at least 1"),
        ("prune: {generation_commits: '70'}", "roots.a.prune.generation_commits", "whole number"),
        ("watch: 'yes'", "roots.a.watch", "true or false"),
        ("branch: 'a..b'", "roots.a.branch", "invalid branch"),
        ("sync: {remote: 'a b'}", "roots.a.sync.remote", "invalid name"),
        ("sync: {events: 'ftp://x'}", "roots.a.sync.events", "http"),
        ("sync: []", "roots.a.sync", "expected a mapping"),
        ("publish: {view: x}", "roots.a.publish", "expected a list"),
    ],
)
def test_bad_values(field: str, value: str, words: str) -> None:
    problem = only(problems(f"version: 1\nroots:\n  a:\n    path: /a\n    {field}\n"))
    assert (problem.location, problem.line) == (value, 5)
    assert words in problem.message


def test_bad_names() -> None:
    found = problems(
        "version: 1\nroots:\n  'my root': {path: /a}\n"
        "views:\n  -v: {root: x}\nroles:\n  'a/b': {}\n"
    )
    names = {p.location: p for p in found if "invalid name" in p.message}
    assert set(names) == {"roots.my root", "views.-v", "roles.a/b"}
    assert names["roots.my root"].line == 3


def test_view_and_role_shapes() -> None:
    found = problems(
        f"""\
        version: 1
        roots: {{a: {{path: /a}}}}
        views:
          v:
            root: a
            heading: ""
            source: {{kind: git, url: "https://u:pw@host/x.git", path: /abs}}
            trust: {{keys: ["{KEY}", "{KEY}", "ed25519:short"], threshold: 0}}
        roles:
          c: {{executor: command, command: ["", x], timeout: 5}}
          o: {{executor: openai, base_url: "http://h"}}
          z: {{executor: shell}}
          y: [not, a, mapping]
        hub: {{listen: "127.0.0.1:8765"}}
        """
    )
    assert where(found) == {
        (6, "views.v.heading"),
        (7, "views.v.source.url"),
        (7, "views.v.source.path"),
        (8, "views.v.trust.keys[2]"),
        (8, "views.v.trust.threshold"),
        (10, "roles.c.command[0]"),
        (10, "roles.c.timeout"),
        (11, "roles.o.model"),
        (12, "roles.z"),
        (13, "roles.y"),
        (14, "hub.data_dir"),
    }
    assert not any("pw" in p.message for p in found)


def test_duplicate_trust_keys() -> None:
    text = f'version: 1\nviews: {{v: {{root: a, trust: {{keys: ["{KEY}", "{KEY}"]}}}}}}\n'
    found = [p for p in problems(text) if p.location == "views.v.trust.keys"]
    assert "listed twice" in only(found).message


# --- cross-field checks ------------------------------------------------------------------


def test_cross_field_checks() -> None:
    found = problems(
        f"""\
        version: 1
        roots:
          a:
            path: /m
            prune: {{enabled: true}}
            insight: {{enabled: true, role: thinker}}
            repair: {{role: fixer}}
          b:
            path: /x/../m
            prune: {{enabled: false, role: unknown-but-disabled}}
        views:
          v: {{root: c, source: {{kind: http, url: "http://h"}},
               trust: {{keys: ["{KEY}"], threshold: 2}}}}
          w: {{root: a, source: {{kind: http, url: "http://h"}}}}
          u: {{root: a, source: {{kind: http, url: "http://h"}}, trust: {{allow_unsigned: true}}}}
        roles:
          pruner: {{executor: command, command: [x]}}
        """
    )
    assert where(found) == {
        (6, "roots.a.insight.role"),
        (7, "roots.a.repair.role"),
        (9, "roots.b.path"),
        (12, "views.v.root"),
        (13, "views.v.trust.threshold"),
        (14, "views.w.trust.threshold"),
    }
    messages = {p.location: p.message for p in found}
    assert "(defined: pruner)" in messages["roots.a.insight.role"]
    assert "roots a and b share the path /m" in messages["roots.b.path"]
    assert "(roots: a, b)" in messages["views.v.root"]
    assert "needs at least 2 distinct trust.keys (has 1)" in messages["views.v.trust.threshold"]


def test_cross_checks_pass_when_references_exist() -> None:
    config = load(
        f"""\
        version: 1
        roots:
          a: {{path: /a, prune: {{enabled: true}}, insight: {{enabled: true}},
               repair: {{role: fix}}}}
        views:
          v: {{root: a, source: {{kind: http, url: "http://h"}},
               trust: {{keys: ["{KEY}", "{KEY2}"], threshold: 2}}}}
        roles:
          pruner: {{executor: command, command: [x]}}
          insight: {{executor: openai, base_url: "http://h/v1", model: m}}
          fix: {{executor: command, command: [y, "{{worktree}}"]}}
        """
    )
    assert config.views["v"].trust.threshold == 2


def test_revival_grace_reaches_the_prune_cycle() -> None:
    config = load("version: 1\nroots:\n  a: {path: /a, prune: {revival_grace: 0}}\n")
    assert cycle_settings(root_settings("a", config.roots["a"]), "prune").revival_grace == 0
    assert problems("version: 1\nroots:\n  a: {path: /a, prune: {revival_grace: -1}}\n")


def test_an_openai_role_cannot_repair() -> None:
    found = problems(
        """\
        version: 1
        roots:
          a: {path: /a, repair: {role: chat}}
        roles:
          chat: {executor: openai, base_url: "http://h/v1", model: m}
        """
    )
    assert where(found) == {(3, "roots.a.repair.role")}
    assert "needs executor: command" in found[0].message


# --- secrets -----------------------------------------------------------------------------


def secret_config(ref: str) -> str:
    return f"version: 1\nroots:\n  a:\n    path: /a\n    sync: {{events_token: {ref}}}\n"


@pytest.mark.parametrize(
    "ref",
    [
        "hunter2-is-my-token",
        "'{env: X}'",
        "[hunter2-is-my-token]",
        "{env: X, value: hunter2-is-my-token}",
    ],
)
def test_secret_shapes_refused_without_echo(ref: str) -> None:
    problem = only(problems(secret_config(ref)))
    assert problem.location == "roots.a.sync.events_token"
    assert "{env: NAME}, {file: PATH}, {credential: NAME}" in problem.message
    assert "hunter2" not in problem.message


def test_plain_string_secret_says_why() -> None:
    problem = only(problems(secret_config("ghp_plain")))
    assert "cannot be a plain string" in problem.message


@pytest.mark.parametrize(
    ("ref", "words"),
    [
        ("{env: 'sk-live-123'}", "invalid environment variable name"),
        ("{credential: 'a/b'}", "invalid credential name"),
        ("{value: ''}", "non-empty string"),
        ("{file: 12}", "non-empty string"),
        ("{token: x}", "unknown key(s) token"),
    ],
)
def test_bad_secret_references(ref: str, words: str) -> None:
    problem = only(problems(secret_config(ref)))
    assert words in problem.message
    assert "sk-live" not in problem.message


def test_resolve_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMSYNC_TEST_TOKEN", "tok-123")
    config = load(secret_config("{env: MEMSYNC_TEST_TOKEN}"))
    ref = config.roots["a"].sync.events_token
    assert ref is not None
    assert resolve(ref) == "tok-123"
    monkeypatch.delenv("MEMSYNC_TEST_TOKEN")
    with pytest.raises(SecretError, match="environment variable MEMSYNC_TEST_TOKEN is not set"):
        resolve(ref)
    monkeypatch.setenv("MEMSYNC_TEST_TOKEN", "")
    with pytest.raises(SecretError, match="is empty"):
        resolve(ref)
    assert resolve(ref, environ={"MEMSYNC_TEST_TOKEN": "other"}) == "other"


def test_resolve_file(tmp_path: Path) -> None:
    (tmp_path / "tok").write_text("file-secret\n\n")
    (tmp_path / "crlf").write_bytes(b"crlf-secret\r\n")
    (tmp_path / "empty").write_text("\n")
    (tmp_path / "binary").write_bytes(b"\xff\xfesecret-bytes")
    config = load(secret_config("{file: tok}"), tmp_path)
    ref = config.roots["a"].sync.events_token
    assert ref == SecretRef("file", str(tmp_path / "tok"))
    assert resolve(ref) == "file-secret\n"
    assert resolve(SecretRef("file", str(tmp_path / "crlf"))) == "crlf-secret"
    with pytest.raises(SecretError, match="does not exist"):
        resolve(SecretRef("file", str(tmp_path / "missing")))
    with pytest.raises(SecretError, match="is empty"):
        resolve(SecretRef("file", str(tmp_path / "empty")))
    with pytest.raises(SecretError, match="not UTF-8") as caught:
        resolve(SecretRef("file", str(tmp_path / "binary")))
    assert "secret-bytes" not in str(caught.value)
    with pytest.raises(SecretError, match="is a directory, not a regular file"):
        resolve(SecretRef("file", str(tmp_path)))


def test_resolve_credential(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "hub-token").write_text("cred-secret\n")
    ref = SecretRef.parse({"credential": "hub-token"})
    monkeypatch.delenv("CREDENTIALS_DIRECTORY", raising=False)
    with pytest.raises(SecretError, match=r"\$CREDENTIALS_DIRECTORY is not set") as caught:
        resolve(ref)
    assert caught.value.hint is not None
    assert "LoadCredential=hub-token" in caught.value.hint
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(tmp_path))
    assert resolve(ref) == "cred-secret"
    with pytest.raises(SecretError, match="systemd credential nope"):
        resolve(SecretRef.parse({"credential": "nope"}))


def test_value_secret_never_shown() -> None:
    config = load(secret_config('{value: "hunter2-value"}'))
    ref = config.roots["a"].sync.events_token
    assert ref is not None
    assert resolve(ref) == "hunter2-value"
    for text in (repr(ref), str(ref), ref.describe(), repr(config), str(config)):
        assert "hunter2" not in text
    assert str(ref) == "{value: ********}"
    assert repr(SecretRef("env", "X")) == "SecretRef(env='X')"
    assert str(SecretRef("env", "X")) == "{env: X}"


def test_secret_error_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        resolve(SecretRef("env", "MEMSYNC_SURELY_UNSET_VARIABLE"), environ={})


# --- lookup order --------------------------------------------------------------------------


@pytest.fixture
def clean_lookup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("MEMSYNC_CONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    return tmp_path


def test_lookup_order(clean_lookup: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    system = clean_lookup / "etc/memsync/config.yaml"
    xdg = clean_lookup / "xdg/memsync/config.yaml"
    assert find_config_path(None, system_path=system) is None
    system.parent.mkdir(parents=True)
    system.write_text("version: 1\n")
    assert find_config_path(None, system_path=system) == system
    xdg.parent.mkdir(parents=True)
    xdg.write_text("version: 1\n")
    assert find_config_path(None, system_path=system) == xdg
    monkeypatch.setenv("MEMSYNC_CONFIG", str(clean_lookup / "from-env.yaml"))
    assert find_config_path(None, system_path=system) == clean_lookup / "from-env.yaml"
    assert find_config_path("~/explicit.yaml", system_path=system) == (
        clean_lookup / "home/explicit.yaml"
    )


def test_lookup_defaults_to_dot_config(clean_lookup: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XDG_CONFIG_HOME")
    home_config = clean_lookup / "home/.config/memsync/config.yaml"
    home_config.parent.mkdir(parents=True)
    home_config.write_text("version: 1\n")
    assert find_config_path(None, system_path=clean_lookup / "none") == home_config
    monkeypatch.setenv("MEMSYNC_CONFIG", "")
    assert find_config_path(None, system_path=clean_lookup / "none") == home_config


# --- files ---------------------------------------------------------------------------------


def test_load_config_file_problems(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist") as caught:
        load_config(tmp_path / "missing.yaml")
    assert caught.value.hint is not None
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes(b"version: 1\n# caf\xe9\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config(bad)
    with pytest.raises(ConfigError, match="is a directory, not a regular file"):
        load_config(tmp_path)


def test_load_config_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("version: 1\nroots: {a: {path: /a, sync: {interval: 60x}}}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert caught.value.source == str(path)
    assert format_problem(caught.value.problems[0], caught.value.source) == (
        f"{path}:2: roots.a.sync.interval: invalid duration '60x' (use <int><ms|s|m|h|d>, e.g. 60s)"
    )


# --- the state dir ------------------------------------------------------------------------


def test_ensure_state_dir_creates_a_private_directory(tmp_path: Path) -> None:
    state = tmp_path / "a" / "b" / "state"
    assert ensure_state_dir(state) == state
    assert state.is_dir()
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    assert list(state.iterdir()) == []  # the probe file is gone
    loose = tmp_path / "loose"
    loose.mkdir(mode=0o755)
    loose.chmod(0o755)
    ensure_state_dir(loose)
    assert stat.S_IMODE(loose.stat().st_mode) == 0o700


@pytest.mark.parametrize("check", [ensure_state_dir, check_state_dir])
def test_state_dir_under_a_file_names_path_and_cause(
    tmp_path: Path, check: Callable[[Path], object]
) -> None:
    (tmp_path / "file").write_text("x")
    state = tmp_path / "file" / "state"
    with pytest.raises(StateDirError) as caught:
        check(state)
    assert caught.value.path == str(state)
    assert caught.value.exit_code == 2
    assert isinstance(caught.value, ConfigError)
    assert caught.value.message == (
        f"state dir {state} is unusable: it cannot be created: {tmp_path / 'file'} "
        "is not a directory"
    )
    assert caught.value.hint is not None and "state_dir" in caught.value.hint


@pytest.mark.parametrize("check", [ensure_state_dir, check_state_dir])
def test_state_dir_that_is_a_file_or_holds_a_file_for_roots(
    tmp_path: Path, check: Callable[[Path], object]
) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(StateDirError, match="it is not a directory"):
        check(tmp_path / "file")
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "roots").write_text("x")
    with pytest.raises(StateDirError, match=r"/state/roots is not a directory"):
        check(tmp_path / "state")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    with pytest.raises(StateDirError, match="symbolic link to nothing"):
        check(tmp_path / "dangling")


def test_check_state_dir_creates_nothing(tmp_path: Path) -> None:
    check_state_dir(tmp_path / "new" / "state")
    assert not (tmp_path / "new").exists()
    check_state_dir(tmp_path)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_state_dir_without_permission(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    try:
        with pytest.raises(StateDirError, match="this user may not create entries in"):
            check_state_dir(locked / "state")
        with pytest.raises(StateDirError, match="Permission denied"):
            ensure_state_dir(locked / "state")
        with pytest.raises(StateDirError, match="this user cannot write in it"):
            check_state_dir(locked)
    finally:
        locked.chmod(0o700)


def test_oserrors_inside_the_state_dir_become_config_errors(tmp_path: Path) -> None:
    state = tmp_path / "state"
    inside = str(state / "roots" / "a" / "state.json")
    full = OSError(errno.ENOSPC, "No space left on device", inside)
    found = as_state_dir_error(full, state)
    assert isinstance(found, StateDirError)
    assert found.message == f"state dir {state} is unusable: No space left on device ({inside})"
    renamed = OSError(errno.EACCES, "Permission denied", "/elsewhere", None, inside)
    assert isinstance(as_state_dir_error(renamed, state), StateDirError)
    # A missing file may be a bug, a path elsewhere is not the state dir's: both unchanged.
    assert as_state_dir_error(FileNotFoundError(errno.ENOENT, "gone", inside), state) is None
    elsewhere = OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "x"))
    assert as_state_dir_error(elsewhere, state) is None
    assert as_state_dir_error(ValueError("x"), state) is None


# --- upstream credentials (sync.https, sync.ssh) ----------------------------------------


def test_upstream_credentials_become_the_boxes_references() -> None:
    config = load(
        """\
        version: 1
        roots:
          laptop: {path: /a, sync: {https: {token: {env: GH_TOKEN}}}}
          server:
            path: /b
            sync:
              https: {username: deploy-user, token: {credential: git-token}}
              ssh: {key: {credential: deploy-key}, known_hosts: keys/known_hosts}
          agent: {path: /c, sync: {ssh: {}}}
          plain: {path: /d}
        """
    )
    settings = settings_from(config, None)
    laptop, server, agent, plain = (
        settings.root(n) for n in ("laptop", "server", "agent", "plain")
    )
    assert laptop is not None and server is not None and agent is not None and plain is not None
    creds = laptop.git_credentials
    assert creds is not None
    assert (creds.where, creds.username, creds.token) == (
        "roots.laptop.sync",
        "x-access-token",
        SecretRef("env", "GH_TOKEN"),
    )
    assert (creds.ssh, creds.ssh_key, creds.known_hosts) == (False, None, None)
    creds = server.git_credentials
    assert creds is not None
    assert (creds.username, creds.token) == ("deploy-user", SecretRef("credential", "git-token"))
    assert (creds.ssh, creds.ssh_key) == (True, SecretRef("credential", "deploy-key"))
    assert creds.known_hosts == Path("/cfg/keys/known_hosts")
    assert agent.git_credentials is not None and agent.git_credentials.ssh
    assert agent.git_credentials.ssh_key is None and agent.git_credentials.token is None
    assert plain.git_credentials is None


@pytest.mark.parametrize(
    ("sync", "location", "words"),
    [
        ("{https: {username: x}}", "roots.a.sync.https.token", "required key is missing"),
        ("{https: {token: hunter2-token}}", "roots.a.sync.https.token", "plain string"),
        ("{https: {username: 'a:b', token: {env: T}}}", "roots.a.sync.https.username", "':'"),
        ("{ssh: {key: {env: SSH_KEY}}}", "roots.a.sync.ssh.key", "{file: PATH} or {credential"),
        ("{ssh: {key: {value: hunter2-key}}}", "roots.a.sync.ssh.key", "an SSH key is a file"),
        ("{ssh: {key: {file: '/keys/my key'}}}", "roots.a.sync.ssh.key", "only letters"),
        ("{ssh: {key: {file: '/keys/%h'}}}", "roots.a.sync.ssh.key", "ssh expands %"),
        ("{ssh: {known_hosts: '/k/$HOME'}}", "roots.a.sync.ssh.known_hosts", "only letters"),
        ("{ssh: {agent: true}}", "roots.a.sync.ssh.agent", "key, known_hosts"),
    ],
)
def test_bad_upstream_credentials(sync: str, location: str, words: str) -> None:
    problem = only(problems(f"version: 1\nroots:\n  a: {{path: /a, sync: {sync}}}\n"))
    assert problem.location == location
    assert words in problem.message
    assert "hunter2" not in problem.message


def test_upstream_token_values_are_hidden_in_dumps() -> None:
    config = load(
        """\
        version: 1
        roots:
          a: {path: /a, sync: {https: {token: {value: hunter2-token}}}}
        """
    )
    assert "hunter2" not in repr(config.model_dump(mode="json"))
    settings = settings_from(config, None)
    assert "hunter2" not in repr(settings)


# --- where a token may go (hubrule): https, or plain http to loopback -------------------

TOKEN = "{env: HUB}"


@pytest.mark.parametrize(
    ("field", "location"),
    [
        (
            f"sync: {{events: 'http://192.0.2.7/v1/events?root=a', events_token: {TOKEN}}}",
            "roots.a.sync.events",
        ),
        (
            f"sync: {{notify: {{hub: 'http://hub.example', token: {TOKEN}}}}}",
            "roots.a.sync.notify.hub",
        ),
        (
            f"publish: [{{view: v, hub: 'http://10.1.2.3', token: {TOKEN}, key: {{file: /k}}}}]",
            "roots.a.publish[0].hub",
        ),
    ],
)
def test_a_token_over_plain_http_to_another_host_is_refused_at_load(
    field: str, location: str
) -> None:
    problem = only(problems(f"version: 1\nroots:\n  a:\n    path: /a\n    {field}\n"))
    assert (problem.location, problem.line) == (location, 5)
    assert "token goes only over https" in problem.message


def test_allow_http_never_lets_a_view_token_or_an_api_key_over_plain_http() -> None:
    found = problems(
        f"""\
        version: 1
        roots: {{a: {{path: /a}}}}
        views:
          v:
            root: a
            trust: {{allow_unsigned: true}}
            source:
              {{kind: http, url: "http://hub.example/v1/views/v", token: {TOKEN}, allow_http: true}}
        roles:
          r: {{executor: openai, base_url: "http://models.example/v1", model: m, api_key: {TOKEN}}}
        """
    )
    assert where(found) == {(8, "views.v.source.url"), (10, "roles.r.base_url")}


@pytest.mark.parametrize(
    "url", ["https://hub.example", "http://127.0.0.1:8765", "http://[::1]:8765", "http://localhost"]
)
def test_a_token_over_https_or_to_loopback_is_accepted(url: str) -> None:
    config = load(
        f"""\
        version: 1
        roots:
          a:
            path: /a
            sync:
              events: "{url}/v1/events?root=a"
              events_token: {TOKEN}
              notify: {{hub: "{url}", token: {TOKEN}}}
        views:
          v:
            root: a
            source: {{kind: http, url: "{url}/v1/views/v", token: {TOKEN}}}
            trust: {{allow_unsigned: true}}
        """
    )
    assert config.roots["a"].sync.events == f"{url}/v1/events?root=a"


def test_events_without_a_token_may_use_plain_http() -> None:
    config = load(
        "version: 1\nroots: {a: {path: /a, sync: {events: 'http://hub.example/v1/events'}}}\n"
    )
    assert config.roots["a"].sync.events == "http://hub.example/v1/events"


# --- hooks and log ----------------------------------------------------------------------

HOOKED = """\
version: 1
roots:
  a:
    path: /a
views:
  v:
    root: a
    source: {kind: http, url: "https://hub.example/v1/views/v"}
    trust: {keys: ["%s"]}
hooks:
%s
"""


def hooked(hooks: str) -> str:
    return HOOKED % (KEY, textwrap.indent(textwrap.dedent(hooks), "  "))


def test_a_hook_with_a_bare_on_key_loads_as_settings() -> None:
    text = hooked(
        """\
        - on: [synced, rejected]
          roots: [a]
          command: [/bin/true]
          webhook: {url: "https://alerts.example/x", token: {value: "t"}}
        """
    )
    settings = settings_from(load(text), None)
    (hook,) = settings.hooks
    assert hook.on == {"synced", "rejected"} and hook.command == ("/bin/true",)
    assert hook.timeout.total_seconds() == 30
    assert hook.wants("root", "a", "synced")
    assert not hook.wants("root", "a", "current")
    assert not hook.wants("view", "v", "synced")  # narrowed to roots: no view
    assert settings.log_format == "text"


def test_hook_problems_are_reported_with_their_location() -> None:
    text = hooked(
        """\
        - on: [synced, sinked]
          command: [/bin/true]
        - on: [rejected]
          roots: [nope]
          views: [v, gone]
          command: [/bin/true]
        - on: [error]
        - on: [error]
          webhook: {url: "http://alerts.example/x", token: {value: "t"}}
        - on: [error]
          command: []
          shell: "echo hi"
        - on: []
          command: [/bin/true]
        """
    )
    found = where(problems(text))
    locations = {loc for _, loc in found}
    assert "hooks[0].on[1]" in locations  # an unknown status word
    assert "hooks[0].on" not in locations  # one bad word is not an empty list
    assert {"hooks[1].roots[0]", "hooks[1].views[1]"} <= locations  # names not configured
    assert "hooks[1].views[0]" not in locations
    assert any(loc.startswith("hooks[2]") for loc in locations)  # neither command nor webhook
    assert "hooks[3].webhook.url" in locations  # a token over plain http
    assert {"hooks[4].command", "hooks[4].shell"} <= locations
    assert "hooks[5].on" in locations


def test_log_format_is_text_or_json() -> None:
    assert settings_from(load("version: 1\nlog: {format: json}\n"), None).log_format == "json"
    assert where(problems("version: 1\nlog: {format: xml}\n")) == {(2, "log.format")}
