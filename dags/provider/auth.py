"""Airflow's auth manager on the local stack: the simple one, with what a shared platform cannot leave to every user.

Teams' Airflow users (role `user`) trigger runs and read them; they may not change what a run hands from task to task
(XCom), clear or re-mark task instances and runs (which would re-run another user's request as that user), nor pause
or delete the platform's own DAGs (health, self-healing, failover, provisioning). Platform engineers' users (role
`admin`) may. A real deployment uses the FAB or Keycloak auth manager with the same rules as roles (docs/security.md).
"""

from __future__ import annotations

from typing import Any

from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails
from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager, SimpleAuthManagerRole

# DAGs only platform engineers may pause, unpause or delete: a team pausing them would switch off every team's
# health checks, healing and failover, the platform's provisioning, or every team's experiments
PLATFORM_DAGS = frozenset(
    {"dagger_health", "platform_health", "odin_provision_cluster", "odin_scale_cluster", "odin_destroy_cluster",
     "loki_chaos", "reports_gather"}
)  # fmt: skip
# what a run carries between its tasks and how its tasks ran: the platform's to change, never a team's
RUN_STATE = frozenset({DagAccessEntity.XCOM, DagAccessEntity.TASK_INSTANCE, DagAccessEntity.RUN})
CHANGES = frozenset({"PUT", "POST", "DELETE"})


def _admin(user: Any) -> bool:
    return bool(user.role) and SimpleAuthManagerRole[user.role.upper()] == SimpleAuthManagerRole.ADMIN


class PlatformAuthManager(SimpleAuthManager):
    def is_authorized_dag(
        self,
        *,
        method: Any,
        user: Any,
        access_entity: DagAccessEntity | None = None,
        details: DagDetails | None = None,
    ) -> bool:
        if method in CHANGES and not _admin(user):
            if access_entity in RUN_STATE and not (access_entity == DagAccessEntity.RUN and method == "POST"):
                return False  # triggering a run (POST on RUN) stays every user's; changing one is not
            if access_entity is None and method in ("PUT", "DELETE") and details and details.id in PLATFORM_DAGS:
                return False
        return super().is_authorized_dag(method=method, user=user, access_entity=access_entity, details=details)
