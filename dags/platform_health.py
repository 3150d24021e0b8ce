"""Health of the platform's environment, every 5 minutes: the same checks as `odin status`."""

from __future__ import annotations

from airflow.sdk import dag, task

from dags.provider.tasks import START, environment_param


@dag(
    schedule="*/5 * * * *",
    start_date=START,
    catchup=False,
    max_active_runs=1,
    tags=["platform", "odin", "health"],
    params={"environment": environment_param()},
    doc_md=__doc__,
)
def platform_health() -> None:
    @task
    def check_services(environment: str) -> dict[str, str]:
        """Fails (and so alerts) when any node of the environment is down; returns each node's detail."""
        from airflow.sdk.exceptions import AirflowFailException

        from odin.stack import Stack

        nodes = Stack(environment).status()
        if not nodes:
            raise AirflowFailException(f"environment {environment!r} was never brought up: run `odin up`")
        down = [f"{n.name}: {n.health.detail}" for n in nodes if not n.ok]
        if down:
            raise AirflowFailException("unhealthy: " + "; ".join(down))
        return {n.name: n.health.detail for n in nodes if n.managed}

    check_services("{{ params.environment }}")


platform_health()
