"""Airflow's CLI (`airflow.__main__.main`, what the `airflow` command runs) served by one long-lived process per test
module: each call is the command a person types, with its own output and exit code, without paying Airflow's import
and start-up again (~7 s of CPU per `airflow dags test`, a dozen times in tests/test_dags.py).

The client writes one JSON request per line on the server's stdin; the server runs the command with its file
descriptors 1 and 2 pointed at the request's output file, and answers with the exit code on the descriptor that was
its stdout."""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path
from typing import IO, Any

from odin.paths import BIN_DIR, REPO


class AirflowCli:
    """`run(["dags", "test", ...], odin_home)` as `airflow dags test ...` would, in the server's Airflow home."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env  # the environment of its Airflow home, for a command run as its own process
        self._outputs = Path(tempfile.mkdtemp(prefix="airflow-cli-"))  # each command's output; removed by close
        self._errors = (self._outputs / "server.err").open("wb")
        self._server = subprocess.Popen(
            [str(BIN_DIR / "python"), "-m", "tests.support.airflow_cli"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._errors,
            env=env,
            cwd=REPO,
            text=True,
        )
        self._calls = 0

    def run(self, args: list[str], odin_home: Path, timeout_s: float = 300) -> subprocess.CompletedProcess[str]:
        server = self._server
        assert server.stdin is not None and server.stdout is not None
        self._calls += 1
        output = self._outputs / f"{self._calls}.out"
        server.stdin.write(json.dumps({"args": args, "odin_home": str(odin_home), "output": str(output)}) + "\n")
        server.stdin.flush()
        ready, _, _ = select.select([server.stdout], [], [], timeout_s)
        if not ready:
            server.kill()
            raise subprocess.TimeoutExpired(["airflow", *args], timeout_s)
        reply = server.stdout.readline()  # one line per request: nothing is left buffered between calls
        if not reply:
            err = (self._outputs / "server.err").read_text(errors="replace")[-3000:]
            raise RuntimeError(f"the Airflow CLI server died (exit {server.wait(10)}): {err}")
        text = output.read_text(errors="replace")
        return subprocess.CompletedProcess(["airflow", *args], json.loads(reply)["returncode"], text, "")

    def close(self) -> None:
        if self._server.stdin is not None:
            self._server.stdin.close()
        try:
            self._server.wait(30)
        except subprocess.TimeoutExpired:
            self._server.kill()
            self._server.wait(10)
        finally:
            self._errors.close()
            shutil.rmtree(self._outputs, ignore_errors=True)


def _exit_code(e: SystemExit) -> int:
    if e.code is None or isinstance(e.code, int):
        return e.code or 0
    print(e.code, file=sys.stderr)  # `raise SystemExit("DagRun failed")`: the CLI prints the message
    return 1


def _serve(requests: IO[str], replies: IO[str]) -> None:
    from airflow.__main__ import main  # imported once: the point of this server

    for line in requests:
        request: dict[str, Any] = json.loads(line)
        os.environ["ODIN_HOME"] = request["odin_home"]
        sys.argv = ["airflow", *request["args"]]
        sys.stdout.flush()
        sys.stderr.flush()
        saved = os.dup(1), os.dup(2)
        with open(request["output"], "wb") as out:
            os.dup2(out.fileno(), 1)
            os.dup2(out.fileno(), 2)
            try:
                main()
                code = 0
            except SystemExit as e:
                code = _exit_code(e)
            except BaseException:  # the CLI's traceback, as the command prints it
                traceback.print_exc()
                code = 1
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                for fd, original in enumerate(saved, start=1):
                    os.dup2(original, fd)
                    os.close(original)
        replies.write(json.dumps({"returncode": code}) + "\n")
        replies.flush()


if __name__ == "__main__":
    # Replies go on a copy of the original stdout: descriptor 1 is the command's output while it runs.
    _serve(sys.stdin, os.fdopen(os.dup(1), "w"))
