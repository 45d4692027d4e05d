"""memsync's git credential helper: git's side of `credentials.CredentialServer`.

Git runs it, per HTTPS request that needs a credential, as `python -I credhelper.py SOCKET
OPERATION` (the same Python; isolated mode: no current directory, no `PYTHON*` variables,
no user site). For `get` it relays git's request (protocol, host) over the unix socket and
prints the answer; `store` and `erase` do nothing (memsync keeps nothing). It runs from this
file alone and imports only the interpreter's built-in `_socket` and `sys`: a helper
costs git one bare interpreter start (~12 ms of CPU), not the ~50 ms of `credentials.py`'s
imports (`socket` alone pulls in `selectors` and `enum`).
"""

import sys
from _socket import AF_UNIX, SHUT_WR, SOCK_STREAM, socket

LIMIT = 64 * 1024  # a credential request or answer is a few lines
PEER_TIMEOUT = 10.0  # seconds one helper connection may take


def read_all(conn: socket) -> bytes:
    """What the peer sends until it closes its side, at most LIMIT bytes (both ends use it)."""
    chunks: list[bytes] = []
    size = 0
    while size < LIMIT:
        chunk = conn.recv(LIMIT - size)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def main(argv: list[str]) -> int:
    """`credhelper.py SOCKET OPERATION`, git's request on stdin, the answer on stdout."""
    if len(argv) != 2:
        print("usage: credhelper.py SOCKET get|store|erase", file=sys.stderr)
        return 2
    path, operation = argv
    request = sys.stdin.buffer.read(LIMIT)
    if operation != "get":
        return 0  # store and erase: memsync keeps nothing, so there is nothing to do
    conn = socket(AF_UNIX, SOCK_STREAM)
    try:
        conn.settimeout(PEER_TIMEOUT)
        conn.connect(path)
        conn.sendall(request)
        conn.shutdown(SHUT_WR)
        answer = read_all(conn)
    except OSError as exc:
        print(f"memsync credential helper: memsync did not answer: {exc}", file=sys.stderr)
        return 1
    finally:
        conn.close()
    sys.stdout.buffer.write(answer)
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
