"""`/readyz`'s view rule (CONTRACT §6): a view whose last good check is older than its
`max_stale` keeps the daemon unready, read from the view's trust record."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from memsync import timefmt
from memsync.config import load_config_text
from memsync.config.model import settings_from
from memsync.daemon.app import _past_max_stale
from memsync.views.trust import TrustState, trust_path

CONFIG = """\
version: 1
state_dir: {state}
roots:
  bob: {{path: {root}}}
views:
  fresh: {{root: bob, max_stale: 7d, source: {{kind: http, url: "https://hub.example/v1/views/a"}},
          trust: {{keys: ["ed25519:AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA"]}}}}
  old: {{root: bob, max_stale: 7d, source: {{kind: http, url: "https://hub.example/v1/views/b"}},
        trust: {{keys: ["ed25519:AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA"]}}}}
  never: {{root: bob, max_stale: 7d, source: {{kind: http, url: "https://hub.example/v1/views/c"}},
          trust: {{keys: ["ed25519:AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA"]}}}}
"""


def test_views_past_max_stale_are_named_with_their_age(tmp_path: Path) -> None:
    state = tmp_path / "state"
    text = CONFIG.format(state=state, root=tmp_path / "bob")
    settings = settings_from(load_config_text(text, tmp_path), tmp_path / "config.yaml")
    now = timefmt.now()
    for name, age in (("fresh", timedelta(days=6)), ("old", timedelta(days=8, hours=2))):
        checked = timefmt.rfc3339(now - age)
        TrustState(revision=3, checked_at=checked).save(trust_path(state, name))
    found = dict(_past_max_stale(list(settings.views), state))
    assert set(found) == {"old", "never"}
    assert found["old"].startswith("last checked 8 days, 2:00:")
    assert found["never"] == "never checked"
