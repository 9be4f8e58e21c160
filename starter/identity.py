"""Who an operator's decision is recorded as: the identity that made it, never
text the sender typed (issue 42).

The CLI records the OS account that runs it, as ``user@host``; the web
console records the name of the token a request carried (starter/console/
auth.py), or this same OS identity of the process serving a loopback console
without tokens. Anyone with access to the Temporal namespace can still send
any payload: this names who used *our* tools, it is not a login
(docs/operations/talk.md, "Who decided").
"""

from __future__ import annotations

import getpass
import os
import socket

__all__ = ["MAX_IDENTITY", "os_identity"]

#: The shortest `author` any payload accepts (approvals and freezes: 100).
MAX_IDENTITY = 100


def _user() -> str:
    # The account of the real uid, not $USER/$LOGNAME (which getpass reads
    # first): an environment variable is free text too.
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_name
    except (ImportError, KeyError, AttributeError):  # not POSIX, or a uid with no entry
        pass
    try:
        return getpass.getuser()
    except OSError:
        return f"uid{os.getuid()}" if hasattr(os, "getuid") else "unknown"


def os_identity() -> str:
    """``user@host`` of this process, cut to `MAX_IDENTITY` characters."""
    host = socket.gethostname() or "localhost"
    return f"{_user() or 'unknown'}@{host}"[:MAX_IDENTITY]
