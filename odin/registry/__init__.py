"""The platform registry (PostgreSQL): teams and members, the stream catalog and its schema versions, clusters,
daggers, and the append-only history of every action. `Registry` is its only reader and writer."""

from odin.registry.store import Refused, Registry, RegistryError

__all__ = ["Refused", "Registry", "RegistryError"]
