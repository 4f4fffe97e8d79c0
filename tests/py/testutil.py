"""Small helpers shared by the Python tests (standard library only)."""

import os
import socket

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def repo_path(p):
    """p as given when absolute, else relative to the repository root."""
    return p if os.path.isabs(p) else os.path.join(REPO, p)
