"""The secret a team cluster's Spark REST endpoint checks (Spark's JWSFilter), and the tokens clients send.

Odin generates one per cluster, keeps it in a file only its user can read (0600), and never logs it; Ansible
puts it in the masters' properties file (0600 too). A client signs a short-lived token (HS256) with it.
"""

from __future__ import annotations

import base64
import os
import secrets
import time
from pathlib import Path

import jwt

TOKEN_TTL_S = 300


def secret_file(state_dir: Path, team: str, cluster: str) -> Path:
    """Where a cluster's secret lives: in its own directory of Odin's state."""
    return state_dir / "clusters" / team / cluster / "rest.secret"


def ensure_secret(path: Path) -> Path:
    """The cluster's secret file, created once: 256 random bits, base64url (what JWSFilter's secretKey takes)."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(base64.urlsafe_b64encode(secrets.token_bytes(32)).decode().rstrip("="))
    return path


def rest_token(secret_file: Path, subject: str, ttl_s: int = TOKEN_TTL_S) -> str:
    """A bearer token for the cluster's REST endpoint, on behalf of `subject` (the user or DAG acting)."""
    raw = secret_file.read_text().strip()
    key = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4))
    now = int(time.time())
    return jwt.encode({"sub": subject, "iat": now, "exp": now + ttl_s}, key, algorithm="HS256")
