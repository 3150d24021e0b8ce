#!/usr/bin/python
"""Ansible module: keep one long-running process up (or down), tracked by a pid file.

Every platform service is a plain foreground process. This module starts it in its own session (so its
whole process group can be stopped at once), records ``<pid> <start-time> <spec-hash>`` in the pid file
(the start time guards against a recycled PID) and is idempotent: a live process started from the same
command line, environment and configuration files is left alone (changed=false); one started from
other ones is restarted. That is how a changed template restarts its service: no handler is needed.
``state=listening`` waits until the process accepts connections on ``port``, and fails at once, with its log's
tail, if it exits first (a readiness wait that only polls the port would wait out its whole timeout).
``state=alive`` checks a process that has no port the same way: it must have lived ``start_grace`` seconds (waited
for only if it has not yet), so a wait that comes after the other services' starts finds it long past that.

A process gets a minimal environment, never the one Ansible runs in (that of whoever ran `odin up`, with whatever
tokens or cloud keys their shell holds): PATH, a HOME of its own, LANG, USER/LOGNAME, the variables named in
``inherit`` that the caller has (settings the stack passes on purpose, e.g. JDK_JAVA_OPTIONS), then ``env``.
"""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import signal
import socket
import subprocess
import time
from typing import NamedTuple

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: odin_daemon
short_description: Start, stop or restart a foreground process tracked by a pid file
options:
  name: {description: Label used in messages, type: str, required: true}
  argv: {description: Command and arguments, type: list, elements: str}
  pidfile: {description: Pid file path (or pidfiles), type: path}
  pidfiles: {description: "state=stopped only: stop all of these processes at once", type: list, elements: path}
  logfile: {description: File receiving stdout and stderr (appended), type: path}
  chdir: {description: Working directory, type: path}
  env: {description: Environment variables of the process, over the minimal one, type: dict, default: {}}
  home: {description: The process's HOME (created if missing, owned by its user), type: path}
  inherit: {description: Variables passed on from Ansible's environment if set, type: list, elements: str, default: []}
  config_files: {description: Files whose content is part of the process spec, type: list, elements: path, default: []}
  user: {description: Run as this user (when Ansible runs as root), type: str}
  state: {description: "Desired state; listening: running and accepting connections on port; alive: running for
          start_grace seconds at least", type: str, choices: [started, stopped, restarted, listening, alive],
          default: started}
  host: {description: "state=listening: the address to connect to", type: str, default: 127.0.0.1}
  port: {description: "state=listening: the TCP port", type: int}
  timeout: {description: "state=listening: seconds to wait", type: float, default: 120}
  stop_timeout: {description: Seconds to wait after the stop signal before SIGKILL, type: float, default: 20}
  stop_signal: {description: "Signal that stops the process cleanly (recorded in its pid file, so a later stop uses
                it): INT for PostgreSQL, whose TERM waits for every client to leave", type: str, default: TERM,
                choices: [TERM, INT]}
  start_grace: {description: "Seconds the process must survive after start (state=started, restarted: 0 when a
                 state=listening or alive wait follows, which checks it then); state=alive: its age at least",
                 type: float, default: 1.0}
"""


def _stat_fields(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            raw = f.read()
    except OSError:
        return None
    # comm (field 2) may contain spaces: split after its closing parenthesis.
    return raw[raw.rindex(")") + 2 :].split()


def _start_time(pid: int) -> str | None:
    fields = _stat_fields(pid)
    if fields is None or fields[0] in ("Z", "X"):  # a zombie has exited
        return None
    return fields[19]


def _age(start_ticks: str) -> float:
    """Seconds since a process started, from its start time in clock ticks after boot (/proc/<pid>/stat)."""
    with open("/proc/uptime") as f:
        uptime = float(f.read().split()[0])
    return uptime - int(start_ticks) / os.sysconf("SC_CLK_TCK")


class Record(NamedTuple):
    """A pid file: ``<pid> <start-time> <spec-hash> <stop-signal>``."""

    pid: int
    start: str  # clock ticks after boot (/proc/<pid>/stat), against a recycled PID
    spec: str
    stop_signal: signal.Signals  # TERM for a file written before there was one


def _read_pidfile(path: str) -> Record | None:
    try:
        with open(path) as f:
            pid_s, start, *rest = f.read().split()
        stop_signal = signal.Signals.__members__.get(f"SIG{rest[1]}" if len(rest) > 1 else "", signal.SIGTERM)
        return Record(int(pid_s), start, rest[0] if rest else "", stop_signal)
    except (OSError, ValueError):
        return None


def running(pidfile: str) -> Record | None:
    """What ``pidfile`` records, if that very process is still alive."""
    rec = _read_pidfile(pidfile)
    return rec if rec is not None and _start_time(rec.pid) == rec.start else None


SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def environment(p: dict) -> dict[str, str]:
    """The process's whole environment: minimal and explicit, nothing else of Ansible's own."""
    account = pwd.getpwnam(p["user"]) if p["user"] else pwd.getpwuid(os.getuid())
    env = {
        "PATH": SYSTEM_PATH,
        "HOME": p["home"],
        "LANG": "C.UTF-8",
        "USER": account.pw_name,
        "LOGNAME": account.pw_name,
    }
    env.update({name: os.environ[name] for name in p["inherit"] if name in os.environ})
    env.update({k: str(v) for k, v in p["env"].items()})
    return env


def _make_home(p: dict) -> None:
    os.makedirs(p["home"], mode=0o700, exist_ok=True)
    if p["user"]:
        account = pwd.getpwnam(p["user"])
        os.chown(p["home"], account.pw_uid, account.pw_gid)


def spec_hash(p: dict) -> str:
    # Inherited values are left out: a converge run from another shell (or by Airflow's Odin) restarts nothing.
    spec = [p["argv"], sorted((k, str(v)) for k, v in p["env"].items()), p["chdir"], p["user"]]
    spec += [p["home"], sorted(p["inherit"])]
    h = hashlib.sha256(json.dumps(spec).encode())
    for path in p["config_files"]:
        with open(path, "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:16]


def _group_alive(pgid: int) -> bool:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat_fields(int(entry))
            if fields and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
                return True
    return False


def stop(pids: dict[int, signal.Signals], timeout: float) -> None:
    """Each process group its stop signal, then SIGKILL whatever is left after ``timeout`` seconds. The groups wind
    down side by side: a node's processes one after another took the sum of their shutdowns (Airflow's four, 11.6 s).
    """
    left = list(pids)
    for kill, wait in ((False, timeout), (True, 5.0)):
        for pid in list(left):
            try:
                os.killpg(pid, signal.SIGKILL if kill else pids[pid])
            except ProcessLookupError:
                left.remove(pid)
        deadline = time.monotonic() + wait
        while left and time.monotonic() < deadline:
            left = [pid for pid in left if _group_alive(pid)]
            if left:
                time.sleep(0.1)
        if not left:
            return


def _tail(path: str | None, lines: int = 25) -> str:
    if not path:
        return ""
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


def _every_cpu() -> set[int]:
    """The CPUs a daemon may run on: all of the machine's (the kernel keeps a cgroup's cpuset out of it).

    Mitogen pins Ansible's processes to CPUs and gives the children it starts every CPU but the one its multiplexer
    holds: on a 2-core machine, every service of the stack (Spark and the drivers it launches, Kafka, PostgreSQL,
    Airflow and its tasks) shared one core while the other idled (docs/decisions.md)."""
    return set(range(os.cpu_count() or 1))


def start(module: AnsibleModule) -> int:
    p = module.params
    env = environment(p)
    _make_home(p)
    log = open(p["logfile"], "ab") if p["logfile"] else subprocess.DEVNULL  # noqa: SIM115 - handed to the child
    pinned = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, _every_cpu())  # this thread's mask is what the forked child inherits
    except OSError:
        pinned = set()  # no CPU of the set is available to this process: leave the mask as it is
    try:
        proc = subprocess.Popen(
            p["argv"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=p["chdir"],
            env=env,
            user=p["user"],
            start_new_session=True,  # own session and process group: stop() signals the whole group
            close_fds=True,
        )
    except OSError as e:
        module.fail_json(msg=f"{p['name']}: cannot start {p['argv'][0]}: {e}")
    finally:
        if pinned:
            os.sched_setaffinity(0, pinned)  # the module's own process keeps Mitogen's placement
        if log is not subprocess.DEVNULL:
            log.close()
    start_time = _start_time(proc.pid)
    with open(p["pidfile"], "w") as f:
        f.write(f"{proc.pid} {start_time} {spec_hash(p)} {p['stop_signal']}\n")
    deadline = time.monotonic() + p["start_grace"]
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            os.unlink(p["pidfile"])
            module.fail_json(
                msg=f"{p['name']} exited with code {proc.returncode} right after start; log {p['logfile']}:\n"
                + _tail(p["logfile"])
            )
        time.sleep(0.05)
    return proc.pid


def wait_listening(module: AnsibleModule) -> None:
    """Until the process of ``pidfile`` accepts connections on host:port; fail at once if it is not running."""
    p = module.params
    deadline = time.monotonic() + p["timeout"]
    while True:
        rec = running(p["pidfile"])
        if rec is None:
            module.fail_json(msg=f"{p['name']} is not running; log {p['logfile']}:\n" + _tail(p["logfile"]))
        try:
            with socket.create_connection((p["host"], p["port"]), timeout=1.0):
                module.exit_json(changed=False, pid=rec.pid, msg=f"{p['name']} listening on {p['host']}:{p['port']}")
        except OSError:
            pass
        if time.monotonic() >= deadline:
            module.fail_json(
                msg=f"{p['name']} runs but does not accept connections on {p['host']}:{p['port']} after "
                f"{p['timeout']:.0f}s; log {p['logfile']}:\n" + _tail(p["logfile"])
            )
        time.sleep(0.1)


def wait_alive(module: AnsibleModule) -> None:
    """Until the process of ``pidfile`` has lived ``start_grace`` seconds; fail at once if it is not running."""
    p = module.params
    deadline = time.monotonic() + p["start_grace"]
    while True:
        rec = running(p["pidfile"])
        if rec is None:
            module.fail_json(msg=f"{p['name']} is not running; log {p['logfile']}:\n" + _tail(p["logfile"]))
        age = _age(rec.start)
        if age >= p["start_grace"] or time.monotonic() >= deadline:
            module.exit_json(changed=False, pid=rec.pid, msg=f"{p['name']} running for {age:.1f}s")
        time.sleep(0.05)


def stop_all(module: AnsibleModule) -> None:
    p = module.params
    if p["state"] != "stopped":
        module.fail_json(msg=f"{p['name']}: pidfiles: only with state=stopped, not {p['state']}")
    found = {path: running(path) for path in p["pidfiles"]}
    live = {path: rec for path, rec in found.items() if rec is not None}
    pids = sorted(rec.pid for rec in live.values())
    if module.check_mode:
        module.exit_json(changed=bool(live), pids=pids)
    stop({rec.pid: rec.stop_signal for rec in live.values()}, p["stop_timeout"])
    for path in p["pidfiles"]:
        if os.path.exists(path):
            os.unlink(path)  # also the stale pid file of a process that died on its own
    stopped = ", ".join(f"{os.path.basename(path)} (pid {rec.pid})" for path, rec in live.items())
    module.exit_json(changed=bool(live), pids=pids, msg=f"{p['name']}: stopped {stopped or 'nothing'}")


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type="str", required=True),
            argv=dict(type="list", elements="str"),
            pidfile=dict(type="path"),
            pidfiles=dict(type="list", elements="path"),
            logfile=dict(type="path"),
            chdir=dict(type="path"),
            env=dict(type="dict", default={}),
            home=dict(type="path"),
            inherit=dict(type="list", elements="str", default=[]),
            config_files=dict(type="list", elements="path", default=[]),
            user=dict(type="str"),
            state=dict(
                type="str", choices=["started", "stopped", "restarted", "listening", "alive"], default="started"
            ),
            host=dict(type="str", default="127.0.0.1"),
            port=dict(type="int"),
            timeout=dict(type="float", default=120.0),
            stop_timeout=dict(type="float", default=20.0),
            stop_signal=dict(type="str", default="TERM", choices=["TERM", "INT"]),
            start_grace=dict(type="float", default=1.0),
        ),
        required_if=[
            ("state", "started", ["argv", "home"]),
            ("state", "restarted", ["argv", "home"]),
            ("state", "listening", ["port"]),
        ],
        required_one_of=[("pidfile", "pidfiles")],
        mutually_exclusive=[("pidfile", "pidfiles")],
        supports_check_mode=True,
    )
    p = module.params
    if p["pidfiles"] is not None:
        stop_all(module)
    if p["state"] in ("listening", "alive"):
        if module.check_mode:  # a plan waits for nothing
            module.exit_json(changed=False)
        if p["state"] == "listening":
            wait_listening(module)
        wait_alive(module)
    rec = running(p["pidfile"])
    pid = rec.pid if rec else None
    want = p["state"]
    if want == "started" and rec is not None and rec.spec == spec_hash(p):
        module.exit_json(changed=False, pid=pid, msg=f"{p['name']} already running")
    if want == "stopped" and pid is None:
        if os.path.exists(p["pidfile"]):
            os.unlink(p["pidfile"])  # stale pid file of a process that died on its own
        module.exit_json(changed=False, pid=None, msg=f"{p['name']} not running")
    if module.check_mode:
        module.exit_json(changed=True, pid=pid)
    if rec is not None:
        stop({rec.pid: rec.stop_signal}, p["stop_timeout"])
    if want == "stopped":
        if os.path.exists(p["pidfile"]):
            os.unlink(p["pidfile"])
        module.exit_json(changed=True, pid=None, msg=f"{p['name']} stopped (was pid {pid})")
    new_pid = start(module)
    module.exit_json(changed=True, pid=new_pid, msg=f"{p['name']} started as pid {new_pid}")


if __name__ == "__main__":
    main()
