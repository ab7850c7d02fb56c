"""A second local user of this host, for the tests that play a neighbour on a shared cluster: someone who can create
files in /tmp and /dev/shm before the Spark user does, and who must never read, inject or run anything of theirs.
The tests run as root (CI does), which can create the user and run commands as it."""
import os
import pwd
import subprocess

import pytest

NAME = "cpneighbour"


def neighbour():
    """The neighbour's passwd entry, the user created on first use; skips where the tests cannot create it."""
    if os.geteuid() != 0:
        pytest.skip("playing a second local user needs root (useradd, setpriv)")
    try:
        return pwd.getpwnam(NAME)
    except KeyError:
        subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", NAME], check=True)
        return pwd.getpwnam(NAME)


def as_neighbour(args, **kwargs):
    """Runs args (a list) as the neighbour, with no supplementary groups; returns the CompletedProcess."""
    user = neighbour()
    prefix = ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups", "--"]
    kwargs.setdefault("capture_output", True)
    kwargs.setdefault("text", True)
    kwargs.setdefault("timeout", 60)
    return subprocess.run(prefix + list(args), **kwargs)
