"""The README as a newcomer follows it: every CLI command and option it shows exists, every repository path it names
is there, nothing points outside the repository, and its quickstart block runs as written against a stack."""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import typer

from odin.paths import BIN_DIR, REPO
from odin.teams.actor import login
from odin.traffic.generator import booking_logs
from tests.support.catalog import START, produce_to_stream
from tests.support.loki_runs import as_platform_engineer
from tests.support.services import Services, TeamCluster

README = REPO / "README.md"
TEXT = README.read_text()
BLOCK = re.compile(r"```(?:sh|bash)\n(.*?)```", re.S)
CLIS = {"dagger": "jobs.cli", "odin": "odin.cli", "loki": "loki.cli"}
QUICKSTART = "<!-- doc-test: quickstart"


def shell_lines(text: str = TEXT) -> Iterator[str]:
    """Each command line of the README's shell blocks, without its comment."""
    for block in BLOCK.findall(text):
        for line in block.splitlines():
            command = re.sub(r"\s+#.*$", "", line).strip()
            if command and not command.startswith("#"):
                yield command


def _command(cli: str) -> Any:
    return typer.main.get_command(importlib.import_module(CLIS[cli]).app)


def test_every_cli_command_and_option_the_readme_shows_exists() -> None:
    shown = 0
    for line in shell_lines():
        words = line.split()
        if not words[0].startswith(".venv/bin/") or words[0].removeprefix(".venv/bin/") not in CLIS:
            continue
        cmd: Any = _command(words[0].removeprefix(".venv/bin/"))
        path = [words[0]]
        for word in words[1:]:
            if not hasattr(cmd, "commands") or word.startswith("-"):  # typer's own click: no isinstance
                break
            sub = cmd.commands.get(word)
            assert sub is not None, f"README: `{line}`: {' '.join(path)} has no command {word!r}"
            cmd, path = sub, [*path, word]
        options = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)}
        for word in words[len(path) :]:
            flag = word.split("=", 1)[0]
            if flag.startswith("-") and flag not in ("-", "--"):
                assert flag in options, f"README: `{line}`: {' '.join(path)} has no option {flag} ({sorted(options)})"
        shown += 1
    assert shown >= 30  # the README shows the CLIs at work, not a few of them


def test_every_make_target_the_readme_shows_exists() -> None:
    targets = set(re.findall(r"^([a-z][\w-]*):", (REPO / "Makefile").read_text(), re.M))
    used = {line.split()[1] for line in shell_lines() if line.startswith("make ") and len(line.split()) > 1}
    used |= set(re.findall(r"`make ([a-z][\w-]*)", TEXT))
    assert used and used <= targets, sorted(used - targets)


def test_the_readme_names_paths_of_the_repository_only() -> None:
    assert "../" not in TEXT  # nothing outside the repository: a newcomer has only the clone
    named = set(
        re.findall(r"(?<![\w./-])((?:docs|odin|jobs|loki|dags|bench|terraform|ansible|protos|tests)/[\w./-]+)", TEXT)
    )
    missing = [p for p in sorted(named) if not any(REPO.glob(p.rstrip(".")))]
    assert not missing, f"the README names paths that are not in the repository: {missing}"


# -- the quickstart, run as written ---------------------------------------------------------------------------------


def quickstart() -> list[str]:
    """The lines of the shell block that follows the quickstart's marker, as the README has them."""
    at = TEXT.index(QUICKSTART)
    block = BLOCK.search(TEXT, at)
    assert block is not None and TEXT[at : block.start()].count("\n") <= 1, "the marker sits right above its block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def _ours(line: str, team: str, example: Path) -> str:
    """The README's line for the suite's stack: its team instead of `pricing` (the suite's team is its own), and the
    example spec as that team's."""
    line = line.replace("docs/examples/surge-demand.yaml", str(example))
    return re.sub(r"\bpricing\b", team, line)


def test_the_quickstart_runs_as_written(services: Services, team_cluster: TeamCluster, tmp_path: Path) -> None:
    registry, team = team_cluster.registry, team_cluster.team
    as_platform_engineer(services)  # as `make demo` leaves its login
    produce_to_stream(
        services, registry, list(booking_logs(1_000, seed=73, start=START, rate=10)), START + timedelta(minutes=8)
    )
    example = tmp_path / "surge-demand.yaml"
    example.write_text((REPO / "docs/examples/surge-demand.yaml").read_text().replace("pricing", team))
    env = {**os.environ, "ODIN_HOME": str(team_cluster.state_dir), "COLUMNS": "200"}

    def run(line: str, timeout_s: float = 300) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            ["bash", "-c", _ours(line, team, example)],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
        assert done.returncode == 0, f"README: `{line}` failed:\n{done.stdout}\n{done.stderr}"
        return done

    outputs: dict[str, str] = {}
    try:
        for line in quickstart():
            if " output " in line:  # a window's rows come once the watermark passes its end: wait for the first
                deadline = time.monotonic() + 180
                while not json.loads(run(f"{line.split('#')[0]} --json").stdout)["rows"]:
                    assert time.monotonic() < deadline, "no output rows 180 s after the deploy"
                    time.sleep(5)
            outputs[line.split("#")[0].strip()] = run(line).stdout
    finally:
        if (d := registry.dagger(team, "surge-demand")) is not None and d.state in ("deploying", "running"):
            subprocess.run([str(BIN_DIR / "dagger"), "stop", team, "surge-demand"], env=env, timeout=300)
    said = {k.split()[0].removeprefix(".venv/bin/") + " " + k.split()[1]: v for k, v in outputs.items()}
    assert "booking-log" in said["odin catalog"]
    assert "num_of_bookings" in said["dagger output"] and "tag_s2id" in said["dagger output"]
    assert "surge-demand" in said["dagger list"]
    assert registry.dagger(team, "surge-demand").state == "stopped"  # type: ignore[union-attr]
    assert login() in registry.members(team)  # the first line made the login a member


@pytest.mark.parametrize("example", sorted((REPO / "docs/examples").glob("*.yaml")), ids=lambda p: p.name)
def test_the_examples_name_catalog_streams(example: Path) -> None:
    """What a team deploys reads the platform's catalog, so the examples deploy as written."""
    text = example.read_text()
    assert "stream:" in text and "topics:" not in text and "bootstrap_servers" not in text
