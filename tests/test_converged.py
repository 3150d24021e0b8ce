"""What a converge depends on (odin/provision/converged.py): `odin up` skips Ansible only if none of it changed."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from odin.paths import ANSIBLE_DIR, REPO
from odin.provision import converged

# Folders of the repository a role names but never reads at converge time: the service reads them itself, live.
READ_BY_THE_SERVICE = {"dags"}  # Airflow's DAG folder


def test_every_repository_file_a_role_reads_is_an_input() -> None:
    """A role that reads a new file of the repository (a config, a lock, rules) must make it an input, or an `odin up`
    after changing only that file would skip the converge that applies it."""
    inputs = set(converged.inputs())
    referenced: set[str] = set()
    for f in ANSIBLE_DIR.rglob("*.yml"):
        text = f.read_text()
        referenced |= set(re.findall(r"odin_repo \}\}/([^\"'\s}]+)", text))
        referenced |= set(re.findall(r"odin_repo ~ '/([^']+)'", text))
    assert referenced, "no role reads the repository: the pattern above is out of date"
    for rel in sorted(referenced - READ_BY_THE_SERVICE):
        matches = sorted(REPO.glob(rel))
        assert matches, f"{rel}: a role reads it, but it does not exist"
        missing = [str(m.relative_to(REPO)) for m in matches if m.is_file() and m not in inputs]
        assert not missing, f"read by a role but not in converged.OUTSIDE_INPUTS: {missing}"


def test_the_digest_changes_with_every_input(tmp_path: Path) -> None:
    repo, ansible = tmp_path / "repo", tmp_path / "repo" / "ansible"
    shutil.copytree(ANSIBLE_DIR, ansible, ignore=shutil.ignore_patterns("__pycache__"))
    for rel in converged.OUTSIDE_INPUTS:
        src, dst = REPO / rel, repo / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if src.is_dir() else shutil.copy)(src, dst)
    inventory = {"all": {"hosts": {"kafka": {"ansible_host": "127.0.0.1", "port": 9092}}}}
    extravars = {"odin_environment": "local"}

    def digest(**change: object) -> str:
        args = {"inventory": inventory, "extravars": extravars, "limit": None} | change
        return converged.digest("site.yml", args["inventory"], args["extravars"], args["limit"],  # type: ignore[arg-type]
                                converged.inputs(repo, ansible))  # fmt: skip

    first = digest()
    assert digest() == first  # the same inputs: the same digest
    assert digest(limit="kafka_broker") != first
    assert digest(extravars={"odin_environment": "gcp"}) != first
    assert digest(inventory={"all": {"hosts": {"kafka": {"ansible_host": "127.0.0.1", "port": 9093}}}}) != first
    role = next(ansible.rglob("main.yml"))
    for changed in (role, repo / "odin/catalog/streams.yaml", repo / ".ci/requirements.lock"):
        before = changed.read_bytes()
        changed.write_bytes(before + b"\n# changed\n")
        assert digest() != first, changed
        changed.write_bytes(before)
    (ansible / "roles" / "new_role").mkdir()
    (ansible / "roles" / "new_role" / "defaults.yml").write_text("x: 1\n")
    assert digest() != first  # a new file too


def test_a_forgotten_converge_matches_nothing(tmp_path: Path) -> None:
    last = converged.LastConverge(tmp_path, "local")
    assert not last.matches("abc")
    last.record("abc")
    assert last.matches("abc") and not last.matches("abd")
    last.forget()
    assert not last.matches("abc")
