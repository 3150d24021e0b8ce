"""What goes into logs and the registry's history of a request: its values, without the secrets a request might
carry (a refused request is recorded as it came, and may be refused precisely for holding a password)."""

from __future__ import annotations

import re
from typing import Any

SECRET_KEY = re.compile(r"password|passwd|secret|token|sasl|credential|private|api[_.-]?key", re.IGNORECASE)
URL_PASSWORD = re.compile(r"(://[^/:@\s]*:)[^/@\s]*@")
KEYWORD_PASSWORD = re.compile(r"(password\s*=\s*)('[^']*'|\S+)", re.IGNORECASE)
HIDDEN = "***"


def _secret_key(key: str) -> bool:
    return bool(SECRET_KEY.search(key)) and not key.endswith("_env")  # `password_env` names a variable: no secret


def redacted(value: Any) -> Any:
    """`value` with every secret-looking key's value and every password in a URL or libpq DSN replaced by ***."""
    if isinstance(value, dict):
        return {k: HIDDEN if _secret_key(str(k)) and v else redacted(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redacted(v) for v in value]
    if isinstance(value, str):
        return KEYWORD_PASSWORD.sub(rf"\g<1>{HIDDEN}", URL_PASSWORD.sub(rf"\g<1>{HIDDEN}@", value))
    return value
