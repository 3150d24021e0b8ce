"""Terraform's `nodes` output → an Ansible inventory: one group per role, one host per node."""

from __future__ import annotations

import sys
from typing import Any

Node = dict[str, Any]


REMOTE_VENV = "/opt/daggers/venv"  # ansible/roles/platform_runtime installs the platform's runtime there


def build_inventory(nodes: dict[str, Node]) -> dict[str, Any]:
    """Also a group `local_nodes` of the loopback ones; others get `platform_venv`, where their runtime is."""
    groups: dict[str, dict[str, Any]] = {}
    for name, node in sorted(nodes.items()):
        host = {"node": node, "ansible_host": node["host"]}
        if node["host"].startswith("127."):
            # A local node: no SSH, and modules run in Odin's own interpreter (the venv).
            host |= {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
            groups.setdefault("local_nodes", {})[name] = {}
        else:
            host |= {"platform_venv": REMOTE_VENV}
        groups.setdefault(node["role"], {})[name] = host
    return {"all": {"children": {role: {"hosts": hosts} for role, hosts in groups.items()}}}
