"""The platform registry: the one place that reads and writes the platform database (PostgreSQL).

DAGs, the `odin` and `dagger` CLIs and tests all go through `Registry`; nothing else issues SQL against it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from sqlalchemy import Engine, Table, create_engine, func, insert, select, text, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.exc import OperationalError

from odin.registry import migrate
from odin.registry.records import (
    AlertRecord,
    ClusterRecord,
    ClusterState,
    DaggerRecord,
    DaggerState,
    HistoryEntry,
    Outcome,
    Record,
    SchemaVersion,
    StreamRecord,
)
from odin.registry.schema import alerts, clusters, daggers, history, members, schema_versions, streams, teams

R = TypeVar("R", bound=Record)


class Refused(Exception):
    """An action refused before anything was touched; the message says why and what to do instead."""


class RegistryError(RuntimeError):
    """The registry cannot be used as it is (not migrated, unreachable)."""


class Registry:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @classmethod
    def connect(cls, url: str, *, check: bool = True) -> Registry:
        """`check`: refuse a database not migrated to this code's newest revision, naming the fix."""
        registry = cls(create_engine(url, pool_pre_ping=True))
        if check:
            try:
                at = migrate.current(registry.engine)
            except OperationalError as e:
                registry.close()
                where = registry.engine.url.render_as_string(hide_password=True)
                raise RegistryError(
                    f"cannot reach the registry at {where} ({e.orig}): is the environment up? `odin status`"
                ) from None
            want = migrate.head()
            if at != want:
                raise RegistryError(
                    f"the registry at {registry.engine.url.render_as_string(hide_password=True)} is at revision "
                    f"{at or 'none'}, this code needs {want}: run `odin up` (or `odin registry migrate`)"
                )
        return registry

    def close(self) -> None:
        self.engine.dispose()

    # -- teams ------------------------------------------------------------------------------------------------

    def ensure_team(self, name: str, description: str = "") -> None:
        with self.engine.begin() as conn:
            conn.execute(pg_insert(teams).values(name=name, description=description).on_conflict_do_nothing())

    def set_auto_failover(self, team: str, allowed: bool) -> None:
        with self.engine.begin() as conn:
            conn.execute(update(teams).where(teams.c.name == team).values(auto_failover=allowed))

    def auto_failover(self, team: str) -> bool:
        with self.engine.connect() as conn:
            return bool(conn.scalar(select(teams.c.auto_failover).where(teams.c.name == team)))

    def teams(self) -> list[str]:
        with self.engine.connect() as conn:
            return list(conn.scalars(select(teams.c.name).order_by(teams.c.name)))

    def add_member(self, team: str, username: str) -> None:
        with self.engine.begin() as conn:
            conn.execute(pg_insert(members).values(team=team, username=username).on_conflict_do_nothing())

    def remove_member(self, team: str, username: str) -> None:
        with self.engine.begin() as conn:
            conn.execute(members.delete().where(members.c.team == team, members.c.username == username))

    def teams_of(self, username: str) -> set[str]:
        with self.engine.connect() as conn:
            return set(conn.scalars(select(members.c.team).where(members.c.username == username)))

    def members(self, team: str) -> list[str]:
        with self.engine.connect() as conn:
            query = select(members.c.username).where(members.c.team == team).order_by(members.c.username)
            return list(conn.scalars(query))

    # -- history ----------------------------------------------------------------------------------------------

    def record(
        self,
        actor: str,
        action: str,
        subject: str,
        outcome: Outcome,
        message: str = "",
        detail: dict[str, Any] | None = None,
    ) -> int:
        with self.engine.begin() as conn:
            values = dict(actor=actor, action=action, subject=subject, outcome=outcome, message=message)
            row = conn.execute(insert(history).values(**values, detail=detail or {}).returning(history.c.id))
            return int(row.scalar_one())

    @contextmanager
    def action(self, actor: str, action: str, subject: str, **detail: Any) -> Iterator[dict[str, Any]]:
        """Run an action and append how it ended to the history: `ok`, `refused` (a Refused raised inside) or
        `failed` (any other exception, which goes on). The yielded dict is the entry's detail, to add to."""
        info = dict(detail)
        try:
            yield info
        except Refused as e:
            self.record(actor, action, subject, "refused", str(e), info)
            raise
        except BaseException as e:
            self.record(actor, action, subject, "failed", f"{type(e).__name__}: {e}", info)
            raise
        self.record(actor, action, subject, "ok", "", info)

    @contextmanager
    def refusals(
        self, actor: str | None, action: str, subject: str, detail: dict[str, Any] | None = None
    ) -> Iterator[None]:
        """Record a Refused raised inside (it goes on), nothing otherwise: for the checks before an action, so every
        refusal says who tried what."""
        try:
            yield
        except Refused as e:
            self.record(actor or "?", action, subject, "refused", str(e), detail)
            raise

    @contextmanager
    def exclusive(self, subject: str) -> Iterator[None]:
        """Hold `subject` (e.g. `dagger:pricing/surge`) for one request: a PostgreSQL advisory lock, so requests of
        every process (Airflow's tasks, CLIs, health) on one subject are serialised; a second one is refused at
        once rather than queued behind a deploy that may take minutes."""
        with self.engine.connect() as conn:
            key = {"k": subject}
            if not conn.execute(text("SELECT pg_try_advisory_lock(hashtextextended(:k, 0))"), key).scalar():
                raise Refused(f"{subject} is being changed by another request (deploy, update, stop or failover); "
                              "try again once it has ended")  # fmt: skip
            try:
                yield
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(hashtextextended(:k, 0))"), key)
                conn.commit()

    def history(self, subject: str | None = None, limit: int = 100) -> list[HistoryEntry]:
        """Newest first."""
        query = select(history).order_by(history.c.id.desc()).limit(limit)
        if subject is not None:
            query = query.where(history.c.subject == subject)
        return self._all(HistoryEntry, query)

    # -- clusters ---------------------------------------------------------------------------------------------

    def put_cluster(self, cluster: ClusterRecord) -> None:
        """Insert, or replace what the registry knows of the cluster."""
        self._upsert(clusters, cluster, ("team", "name"), exclude={"created_at", "updated_at"})

    def cluster(self, team: str, name: str) -> ClusterRecord | None:
        query = select(clusters).where(clusters.c.team == team, clusters.c.name == name)
        return next(iter(self._all(ClusterRecord, query)), None)

    def clusters(self, team: str | None = None, states: Iterable[ClusterState] | None = None) -> list[ClusterRecord]:
        query = select(clusters).order_by(clusters.c.team, clusters.c.name)
        if team is not None:
            query = query.where(clusters.c.team == team)
        if states is not None:
            query = query.where(clusters.c.state.in_(list(states)))
        return self._all(ClusterRecord, query)

    def set_cluster_state(self, team: str, name: str, state: ClusterState, **values: Any) -> None:
        where = (clusters.c.team == team, clusters.c.name == name)
        with self.engine.begin() as conn:
            conn.execute(update(clusters).where(*where).values(state=state, updated_at=func.now(), **values))

    # -- daggers ----------------------------------------------------------------------------------------------

    def put_dagger(self, dagger: DaggerRecord) -> None:
        self._upsert(daggers, dagger, ("team", "name"), exclude={"created_at", "since"})

    def dagger(self, team: str, name: str) -> DaggerRecord | None:
        query = select(daggers).where(daggers.c.team == team, daggers.c.name == name)
        return next(iter(self._all(DaggerRecord, query)), None)

    def daggers(
        self, team: str | None = None, cluster: str | None = None, states: Iterable[DaggerState] | None = None
    ) -> list[DaggerRecord]:
        query = select(daggers).order_by(daggers.c.team, daggers.c.name)
        if team is not None:
            query = query.where(daggers.c.team == team)
        if cluster is not None:
            query = query.where(daggers.c.cluster == cluster)
        if states is not None:
            query = query.where(daggers.c.state.in_(list(states)))
        return self._all(DaggerRecord, query)

    def set_dagger_submission(self, team: str, name: str, submission_id: str) -> None:
        """The driver's submission changed under it (its master relaunched it): its state and `since` stay."""
        where = (daggers.c.team == team, daggers.c.name == name)
        with self.engine.begin() as conn:
            conn.execute(update(daggers).where(*where).values(submission_id=submission_id))

    def set_dagger_state(self, team: str, name: str, state: DaggerState, **values: Any) -> None:
        where = (daggers.c.team == team, daggers.c.name == name)
        with self.engine.begin() as conn:
            conn.execute(update(daggers).where(*where).values(state=state, since=func.now(), **values))

    # -- streams and their schemas -----------------------------------------------------------------------------

    def put_stream(self, stream: StreamRecord) -> None:
        self._upsert(streams, stream, ("name",), exclude={"updated_at", "on_failover"})

    def set_stream_failover(self, name: str, on: bool) -> None:
        with self.engine.begin() as conn:
            conn.execute(update(streams).where(streams.c.name == name).values(on_failover=on, updated_at=func.now()))

    def stream(self, name: str) -> StreamRecord | None:
        return next(iter(self._all(StreamRecord, select(streams).where(streams.c.name == name))), None)

    def streams(self) -> list[StreamRecord]:
        return self._all(StreamRecord, select(streams).order_by(streams.c.name))

    def schema_versions(self, stream: str) -> list[SchemaVersion]:
        query = select(schema_versions).where(schema_versions.c.stream == stream).order_by(schema_versions.c.version)
        return self._all(SchemaVersion, query)

    def add_schema_version(self, stream: str, fingerprint: str, proto: str, descriptor_set: str) -> int:
        """The version of this fingerprint for the stream: the existing one, or the next number."""
        with self.engine.begin() as conn:
            sv = schema_versions.c
            found = conn.scalar(select(sv.version).where(sv.stream == stream, sv.fingerprint == fingerprint))
            if found is not None:
                return int(found)
            version = int(conn.scalar(select(func.coalesce(func.max(sv.version), 0)).where(sv.stream == stream))) + 1
            values = dict(stream=stream, version=version, fingerprint=fingerprint, proto=proto)
            conn.execute(insert(schema_versions).values(**values, descriptor_set=descriptor_set))
            return version

    # -- alerts -----------------------------------------------------------------------------------------------

    def record_alerts(self, records: Iterable[AlertRecord]) -> int:
        rows = [r.model_dump(exclude={"id", "received_at"}) for r in records]
        if rows:
            with self.engine.begin() as conn:
                conn.execute(insert(alerts), rows)
        return len(rows)

    def alerts(self, team: str | None = None, firing: bool = True, limit: int = 200) -> list[AlertRecord]:
        """Each alert's latest notification, newest first; `firing`: only the alerts still firing."""
        latest = select(func.max(alerts.c.id)).group_by(alerts.c.fingerprint)
        if team is not None:
            latest = latest.where(alerts.c.team == team)
        query = select(alerts).where(alerts.c.id.in_(latest)).order_by(alerts.c.id.desc()).limit(limit)
        if firing:
            query = query.where(alerts.c.status == "firing")
        return self._all(AlertRecord, query)

    # -- helpers ----------------------------------------------------------------------------------------------

    def _all(self, kind: type[R], query: Any) -> list[R]:
        with self.engine.connect() as conn:
            return [kind.model_validate(dict(row._mapping)) for row in conn.execute(query)]

    def _upsert(self, table: Table, record: Record, keys: tuple[str, ...], exclude: set[str]) -> None:
        values = record.model_dump(exclude=exclude)
        stmt = pg_insert(table).values(**values)
        changed = {k: stmt.excluded[k] for k in values if k not in keys}
        if "updated_at" in table.c:
            changed["updated_at"] = func.now()
        with self.engine.begin() as conn:
            conn.execute(stmt.on_conflict_do_update(index_elements=list(keys), set_=changed))
