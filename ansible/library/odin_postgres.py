#!/usr/bin/python
"""Ansible module: the platform's PostgreSQL roles and databases, kept as declared (odin/pg_roles.py).

Each platform service (registry, Airflow, ...) gets a login role of its own, its password generated once into a
libpq password file (0600) and never passed on a command line, a database it owns (what it made before, as the
superuser, is handed over), and every database becomes private to its owner (PUBLIC loses CONNECT).
Idempotent: a second run changes nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: odin_postgres
short_description: Platform roles, their password files and private databases on a PostgreSQL server
options:
  admin: {description: libpq conninfo of a superuser (the unix socket), type: str, required: true}
  secrets_dir: {description: Directory (0700) of the roles' password files, type: path, required: true}
  roles:
    description: Roles to keep, each with the database it owns
    type: list
    elements: dict
    required: true
"""


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "admin": {"type": "str", "required": True},
            "secrets_dir": {"type": "path", "required": True},
            "roles": {"type": "list", "elements": "dict", "required": True},
        },
        supports_check_mode=False,
    )
    from odin import pg_roles  # the platform's own code: this module runs in Odin's interpreter

    secrets_dir = Path(module.params["secrets_dir"])
    secrets_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    secrets_dir.chmod(0o700)
    changes: list[str] = []
    try:
        with pg_roles.admin_connect(module.params["admin"]) as conn:
            for role in module.params["roles"]:
                passfile = secrets_dir / f"{role['name']}.pgpass"
                changes += pg_roles.ensure_platform_role(conn, role["name"], role["database"], passfile)
            changes += pg_roles.private_all(conn)
        for role in module.params["roles"]:
            with pg_roles.admin_connect(module.params["admin"], role["database"]) as conn:
                changes += pg_roles.adopt(conn, role["name"])
    except Exception as e:  # the message only: no statement here carries a password
        module.fail_json(msg=f"{type(e).__name__}: {e}", changes=changes)
    result: dict[str, Any] = {"changed": bool(changes), "changes": changes}
    module.exit_json(**result)


if __name__ == "__main__":
    main()
