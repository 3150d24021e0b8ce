"""The loki_chaos form (dags/provider/params/loki.py) comes from loki/playbook.py's models and files: its defaults
make the default run, Airflow refuses at trigger time what the playbook model would refuse in the task, and
`loki plan` and a run share one planning (loki.runner.experiment_plan), without services."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from airflow.sdk import Param
from airflow.sdk.definitions.param import ParamValidationError

from dags.provider.params.loki import PLAYBOOK, form_fields
from loki.playbook import STANDARD_DIR, PlaybookError, SteadyState, Target, load, standard_names
from loki.runner import PlanRefused, plan_only, playbook_from_params

FIELDS = form_fields()


def _check(field: str, value: Any) -> Any:
    return Param(**FIELDS[field]).resolve(value)


def test_the_form_takes_the_models_defaults_descriptions_and_playbooks() -> None:
    assert FIELDS["playbook"]["enum"] == standard_names() and PLAYBOOK in standard_names()
    target = Target()
    assert FIELDS["environment"]["default"] == target.environment
    assert FIELDS["environment"]["description"] == Target.model_fields["environment"].description
    assert FIELDS["team"]["description"].startswith(str(Target.model_fields["team"].description))
    assert FIELDS["settle"]["description"].startswith(str(SteadyState.model_fields["settle"].description))
    assert [f for f in FIELDS if f != "playbook_spec"] == [
        "playbook", "environment", "team", "cluster", "rate_scale", "time_scale", "settle",
    ]  # fmt: skip


def test_the_forms_defaults_run_the_default_playbook_as_written() -> None:
    params = {name: Param(**field).resolve() for name, field in FIELDS.items()}
    book = playbook_from_params(params, STANDARD_DIR)
    assert book == load(STANDARD_DIR / f"{PLAYBOOK}.yaml").bound(environment=Target().environment)


@pytest.mark.parametrize(
    ("field", "good", "bad"),
    [
        ("environment", "local", "Local env"),
        ("team", "surge", "Surge!"),
        ("cluster", "perf-1", "perf 1"),
        ("settle", "300s", "soon"),
        ("rate_scale", 10, 11),
        ("time_scale", 0.01, 0.001),
        ("playbook", "worker-loss", "no-such-playbook"),
    ],
)
def test_airflow_refuses_at_trigger_what_the_playbook_would_refuse(field: str, good: Any, bad: Any) -> None:
    assert _check(field, good) == good
    with pytest.raises(ParamValidationError):
        _check(field, bad)
    if field in ("team", "cluster", "settle"):
        assert _check(field, "") == ""  # empty: the playbook's own


def test_what_the_form_lets_through_the_model_takes() -> None:
    params = {"playbook": "worker-loss", "team": "surge", "cluster": "perf", "settle": "90s"}
    book = playbook_from_params(params, STANDARD_DIR)
    assert (book.target.team, book.target.cluster, book.steady_state.settle.total_seconds()) == ("surge", "perf", 90)
    with pytest.raises(PlaybookError, match=r"steady_state\.settle"):
        playbook_from_params({**params, "settle": "soon"}, STANDARD_DIR)


def test_loki_plan_refuses_an_environment_never_brought_up(tmp_path: Path) -> None:
    book = playbook_from_params({"playbook": "worker-loss"}, STANDARD_DIR)

    def actor_of(_registry: Any) -> str:
        raise AssertionError("no registry to ask: the environment was never brought up")

    with pytest.raises(PlanRefused, match=r"target\.environment: 'local' was never brought up: run `odin up`"):
        plan_only(book, tmp_path, actor_of)
