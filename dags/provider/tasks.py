"""What the DAG files share, so that they stay declarations: when their DAGs start, a form's Params from its fields
(dags/provider/params), and for their tasks the run's params and triggering user, a request handler
(dags/provider/requests) called with both, and refusals failing the run without retries (trying again changes
nothing)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from airflow.sdk import Param, get_current_context

log = logging.getLogger(__name__)

START = datetime(2026, 1, 1)  # every DAG's start date: none catches up
ON_DEMAND: dict[str, Any] = {"schedule": None, "start_date": START, "catchup": False}  # run by a form or the API


def form(fields: Mapping[str, Mapping[str, Any]], *names: str, **extra: Param) -> dict[str, Param]:
    """A DAG's params: the fields `names` of a form (dags/provider/params), in that order, then `extra`."""
    return {n: Param(**fields[n]) for n in names} | extra


def environment_param() -> Param:
    """The Odin environment a scheduled check looks at."""
    return Param("local", type="string", enum=["local"], description="Odin environment")


def run_params() -> dict[str, Any]:
    """The running task's params (checked by Airflow against their schemas when the run was triggered)."""
    return dict(get_current_context()["params"])


def this_run_id() -> str:
    return str(get_current_context()["dag_run"].run_id)


def triggering_user(scheduled_as: str | None = None) -> str | None:
    """Who triggered the running DAG run (Airflow's login): never a param nor anything another task handed over
    (XCom, which other users can change). A scheduled run has none: it acts as `scheduled_as`."""
    run = get_current_context()["dag_run"]
    user = getattr(run, "triggering_user_name", None)
    if not user and scheduled_as is not None and str(getattr(run, "run_type", "")).endswith("scheduled"):
        user = scheduled_as
    return user


@contextmanager
def failing_without_retries(
    refusals: tuple[type[Exception], ...] = (), errors: tuple[type[Exception], ...] = (), refused: str = "refused: "
) -> Iterator[None]:
    """A refusal (odin.registry.Refused or one of `refusals`: `refused` then its message) or one of `errors` (its
    message) fails the run at once: retrying it would change nothing."""
    from airflow.sdk.exceptions import AirflowFailException

    from odin.registry import Refused

    try:
        yield
    except (Refused, *refusals) as e:
        raise AirflowFailException(f"{refused}{e}") from None
    except errors as e:
        raise AirflowFailException(str(e)) from None


def run_request(action: Callable[..., Any], *, errors: tuple[type[Exception], ...] = (), **kwargs: Any) -> Any:
    """Call a request handler (dags/provider/requests) with the run's params, its triggering user and the task log;
    refusals (and `errors`) fail the run without retries."""
    params, user = run_params(), triggering_user()
    with failing_without_retries(errors=errors):
        return action(params, user, log.info, **kwargs)
