"""Who acts: established by the platform, never claimed. A CLI acts as the OS login that runs it; Airflow's tasks as
the run's triggering user. `--user NAME` lets a platform engineer act for someone else (a support case, a script run
on a team's behalf); it is recorded in the registry's history as an impersonation, and refused for anyone else."""

from __future__ import annotations

import os
import pwd

from odin.registry import Refused, Registry
from odin.teams.access import PLATFORM_TEAM


def login() -> str:
    """The OS user running this process (the real uid's name: `sudo -u` changes it, an environment variable does
    not, as `getpass.getuser()` would let LOGNAME or USER do)."""
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:  # a uid without a passwd entry (a container): its number, which no team member is named
        return f"uid-{os.getuid()}"


def acting_user(registry: Registry, claimed: str | None = None, *, action: str = "act") -> str:
    """The user a CLI acts as: the login, or `claimed` when the login is a platform engineer (recorded)."""
    me = login()
    if not claimed or claimed == me:
        return me
    if me not in registry.members(PLATFORM_TEAM):
        registry.record(me, action, f"user:{claimed}", "refused", f"{me} tried to act as {claimed}")
        raise Refused(
            f"--user {claimed}: only platform engineers may act for another user; you are {me}, and act as yourself "
            "(leave --user out)"
        )
    registry.record(me, "impersonate", f"user:{claimed}", "ok", f"{me} acts as {claimed} for {action}")
    return claimed
