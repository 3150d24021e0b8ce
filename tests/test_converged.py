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

    def inventory(worker_port: int = 7078, master_port: int = 7077) -> dict:
        def host(role: str, port: int) -> dict:
            return {"hosts": {f"{role}-1": {"ansible_host": "127.0.0.1", "node": {"role": role, "port": port}}}}

        roles = {"kafka_broker": 9092, "spark_master": master_port, "spark_worker": worker_port}
        return {"all": {"children": {role: host(role, port) for role, port in roles.items()}}}

    def digests(**change: object) -> dict[str, str]:
        args = {"inventory": inventory(), "extravars": {"odin_environment": "local"}} | change
        return converged.node_digests("site.yml", args["inventory"], args["extravars"],  # type: ignore[arg-type]
                                      converged.inputs(repo, ansible))  # fmt: skip

    first = digests()
    assert digests() == first  # the same inputs: the same digests
    changed = {name for name, d in digests(inventory=inventory(worker_port=7079)).items() if d != first[name]}
    assert changed == {"spark_worker-1"}  # its own entry: that node only
    changed = {name for name, d in digests(inventory=inventory(master_port=7070)).items() if d != first[name]}
    assert changed == {"spark_master-1", "spark_worker-1"}  # a worker reads its master's entry
    assert all(d != first[n] for n, d in digests(extravars={"odin_environment": "gcp"}).items())  # shared: all
    role = next(ansible.rglob("main.yml"))
    for file in (role, repo / "odin/catalog/streams.yaml", repo / ".ci/requirements.lock"):
        before = file.read_bytes()
        file.write_bytes(before + b"\n# changed\n")
        assert all(d != first[n] for n, d in digests().items()), file
        file.write_bytes(before)
    (ansible / "roles" / "new_role").mkdir()
    (ansible / "roles" / "new_role" / "defaults.yml").write_text("x: 1\n")
    assert all(d != first[n] for n, d in digests().items())  # a new file too


def test_every_other_group_a_role_reads_is_an_input_of_its_nodes() -> None:
    """A role that reads another group's hosts (`hostvars[groups['spark_master'][0]]`) must declare it, or a change
    of those hosts would not converge its nodes."""
    for role_dir in sorted((ANSIBLE_DIR / "roles").iterdir()):
        text = "".join(f.read_text(errors="replace") for f in role_dir.rglob("*") if f.is_file())
        read = set(re.findall(r"groups\[['\"](\w+)['\"]\]", text))
        declared = set(converged.READS_OF_OTHER_NODES.get(role_dir.name, ()))
        assert read <= declared, f"role {role_dir.name} reads {sorted(read - declared)}: add to READS_OF_OTHER_NODES"


def test_a_forgotten_node_converges_again(tmp_path: Path) -> None:
    last = converged.LastConverge(tmp_path, "local")
    assert last.stale({"a": "1", "b": "2"}) == {"a", "b"}  # never converged
    last.record({"a": "1", "b": "2"})
    assert last.stale({"a": "1", "b": "2"}) == set()
    assert last.stale({"a": "1", "b": "3", "c": "4"}) == {"b", "c"}
    last.forget({"a"})
    assert last.stale({"a": "1", "b": "2"}) == {"a"}
    last.forget()
    assert last.stale({"b": "2"}) == {"b"}
    last.path.write_text("an older format\n")
    assert last.stale({"b": "2"}) == {"b"}


def test_a_failed_converge_leaves_its_nodes_to_converge_again(tmp_path: Path) -> None:
    from odin.provision.ansible import PlaybookResult

    last = converged.LastConverge(tmp_path, "local")
    last.record({"a": "1", "b": "2"})
    limits: list[str] = []

    def failing(limit: str) -> PlaybookResult:
        limits.append(limit)
        assert last.stale({"a": "1", "b": "2"}) == {"a", "b"}  # forgotten while it runs
        return PlaybookResult("site.yml", "failed", 2)

    assert not last.converge({"b", "a"}, {"a": "1", "b": "3"}, failing).ok
    assert limits == ["a,b"] and last.stale({"a": "1", "b": "3"}) == {"a", "b"}
    assert last.converge({"b"}, {"b": "3"}, lambda _limit: PlaybookResult("site.yml", "successful", 0)).ok
    assert last.stale({"a": "1", "b": "3"}) == {"a"}
