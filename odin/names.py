"""The patterns the platform's names follow. Imports nothing: the Kafka source's processes need ENV_VAR without the
model kit (odin/models.py), whose pydantic and YAML cost every one of them ~0.1 s to import."""

SLUG = r"^[a-z][a-z0-9-]{0,62}$"
IDENTIFIER = r"^[A-Za-z_][A-Za-z0-9_]*$"
ENV_VAR = r"^[A-Z_][A-Z0-9_]*$"
