"""Reading a failed fetch or push: which kind it is and the words `cause` keeps.

The texts are what the real git and OpenSSH print (captured from `ssh` against a real
`sshd` whose host key no longer matches known_hosts, and from git over HTTP).
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memsync.roots.reach import unreachable
from memsync.roots.result import SyncStatus
from memsync.transports.gitenv import cause
from memsync.transports.gitfailure import Failure, failure_of, offered_key

FINGERPRINT = "SHA256:07AGlv3DK3CK1lKO3mhNbLHsVxChDoINN2WwxryR0n0"
KNOWN_HOSTS = "/home/operator/.config/memsync/ssh/known_hosts"
CHANGED = f"""\
@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@
@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @
@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@
IT IS POSSIBLE THAT SOMEONE IS DOING SOMETHING NASTY!
Someone could be eavesdropping on you right now (man-in-the-middle attack)!
It is also possible that a host key has just been changed.
The fingerprint for the ED25519 key sent by the remote host is
{FINGERPRINT}.
Please contact your system administrator.
Add correct host key in {KNOWN_HOSTS} to get rid of this message.
Offending ED25519 key in {KNOWN_HOSTS}:1
  remove with:
  ssh-keygen -f "{KNOWN_HOSTS}" -R "[git.example.org]:2222"
Host key for [git.example.org]:2222 has changed and you have requested strict checking.
Host key verification failed.
fatal: Could not read from remote repository.

Please make sure you have the correct access rights
and the repository exists.
"""
PUBLICKEY = """\
git@git.example.org: Permission denied (publickey).
fatal: Could not read from remote repository.

Please make sure you have the correct access rights
and the repository exists.
"""
HTTP_401 = "fatal: Authentication failed for 'http://127.0.0.1:4711/team.git/'\n"
HTTP_NO_PROMPT = (
    "fatal: could not read Username for 'http://127.0.0.1:4711': terminal prompts disabled\n"
)
HTTP_403 = (
    "remote: Permission to team/memory.git denied to bot.\n"
    "fatal: unable to access 'https://git.example.org/team/memory.git/': "
    "The requested URL returned error: 403\n"
)
REFUSED = (
    "fatal: unable to access 'http://127.0.0.1:9/nowhere.git/': Failed to connect to "
    "127.0.0.1 port 9 after 0 ms: Couldn't connect to server\n"
)
UNKNOWN_HOST_KEY = """\
No ED25519 host key is known for [127.0.0.1]:2222 and you have requested strict checking.
Host key verification failed.
fatal: Could not read from remote repository.
"""


def test_a_changed_host_key_keeps_the_offered_fingerprint() -> None:
    assert failure_of(CHANGED) is Failure.HOST_KEY_CHANGED
    assert offered_key(CHANGED) == f"ED25519 {FINGERPRINT}"
    said = cause(CHANGED)
    assert f"The fingerprint for the ED25519 key sent by the remote host is {FINGERPRINT}" in said
    assert f"Offending ED25519 key in {KNOWN_HOSTS}:1" in said
    assert "Host key verification failed." in said
    assert "@" not in said.split(";")[0] and "NASTY" not in said
    status, message = unreachable(CHANGED, "the upstream could not be reached")
    assert status is SyncStatus.HOST_KEY_CHANGED
    assert f"it offered ED25519 {FINGERPRINT}" in message


def test_refused_credentials_are_auth_failed() -> None:
    for text in (PUBLICKEY, HTTP_401, HTTP_NO_PROMPT, HTTP_403):
        assert failure_of(text) is Failure.AUTH_FAILED, text
        status, message = unreachable(text, "the upstream could not be reached")
        assert status is SyncStatus.AUTH_FAILED
        assert message.startswith("the upstream refused the credentials: ")
    assert "Permission denied (publickey)" in cause(PUBLICKEY)


def test_anything_else_is_offline() -> None:
    for text in (REFUSED, UNKNOWN_HOST_KEY, "", "fatal: early EOF\n"):
        assert failure_of(text) is Failure.UNREACHABLE, text
        status, message = unreachable(text, "the push did not reach the upstream")
        assert status is SyncStatus.OFFLINE
        assert message.startswith("the push did not reach the upstream: ")
    assert "No ED25519 host key is known" in cause(UNKNOWN_HOST_KEY)


_LINE = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs", "Cc", "Zl", "Zp")), max_size=120
)


@given(before=st.lists(_LINE, max_size=12), after=st.lists(_LINE, max_size=12))
def test_the_offered_fingerprint_survives_any_surrounding_text(
    before: list[str], after: list[str]
) -> None:
    text = "\n".join([*before, CHANGED, *after])
    said = cause(text)
    assert len(said) <= 400
    assert FINGERPRINT in said
    assert failure_of(text) is Failure.HOST_KEY_CHANGED
    assert offered_key(text) == f"ED25519 {FINGERPRINT}"
