"""A dagger's checkpoint: Spark's own files (offsets, commits, state) plus `dagger.json`, what it was made for.

Resuming a checkpoint for another source, or for a query whose state Spark would read wrongly, is refused before
Spark starts, with the reason and the two ways out. Changes Spark accepts on a checkpoint (another sink, trigger
interval, watermark delay, a WHERE condition) keep it.

The sinks recognise replays by batch id, and refuse an id smaller than one they committed. Spark's batch ids start
again at 0 in a new checkpoint, and `--once` ends with batches on a copy of the checkpoint (jobs/engine/runner.py), so a
sink sees `base + STRIDE * batch` for batch `batch`, and `base + STRIDE * last + j` for the j-th closing batch after
batch `last`: ids ordered like the writes. A reset moves `base` past every id of the previous checkpoint.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field
from sqlglot import exp

from jobs.engine.offsets import SourceOffset
from jobs.engine.plan import DaggerPlan
from jobs.sql import builtins
from jobs.sql.parse import parse_query
from jobs.udfs import SCALAR_UDFS
from odin.paths import write_atomic

IDENTITY = "dagger.json"
FORMAT = 2  # 2: offsets as in jobs/engine/offsets.py and sink batch ids as above
STRIDE = 1024  # sink ids per Spark batch: room for the closing batches run after it


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be resumed for this dagger: says why and what to do."""


class StreamIdentity(BaseModel):
    model_config = ConfigDict(frozen=True)

    table: str
    bootstrap_servers: str
    topics: list[str]
    proto: str
    offsets: str | None = None  # the catalog Kafka cluster whose offsets these are (its mirror keeps them)


class Identity(BaseModel):
    """What a checkpoint was made for."""

    model_config = ConfigDict(frozen=True)

    format: int = FORMAT
    dagger: str
    streams: list[StreamIdentity]
    state: list[str] = Field(description="The query's stateful operators, as Spark keeps their state.")
    state_store: str
    spec_version: str = Field(description="sha256 of the spec the checkpoint was last run with (information).")
    sink_batch_base: int = 0
    written_at: datetime = Field(default_factory=lambda: datetime.now(UTC))

    @property
    def fingerprint(self) -> str:
        return hashlib.sha256("\n".join(self.state).encode()).hexdigest()[:16]


def _sql(node: exp.Expression) -> str:
    return node.sql(dialect="spark")


def state_operators(spark_sql: str) -> list[str]:
    """The query's stateful operators with what their state holds: the grouping keys and aggregates, DISTINCTs,
    joins and LIMITs. Spark refuses (or worse, misreads) a checkpoint whose state was made by other ones."""
    root = parse_query(spark_sql, SCALAR_UDFS.keys())
    out = []
    for select in root.find_all(exp.Select):
        group = select.args.get("group")
        aggregates = [
            _sql(node)
            for projection in (*select.expressions, select.args.get("having"))
            if projection is not None
            for node in projection.find_all(exp.AggFunc, exp.Anonymous)
            if isinstance(node, exp.AggFunc) or builtins.is_aggregate(node.name)
        ]
        if group is not None or aggregates:
            keys = ", ".join(_sql(g) for g in group.expressions) if group is not None else "()"
            out.append(f"aggregate by {keys}: {', '.join(aggregates) or '-'}")
        if select.args.get("distinct"):
            out.append(f"distinct {', '.join(_sql(e) for e in select.expressions)}")
    out += [f"join {_sql(j)}" for j in root.find_all(exp.Join)]
    out += [f"limit {_sql(limit)}" for limit in root.find_all(exp.Limit)]
    return out


def identity_of(plan: DaggerPlan) -> Identity:
    spec = plan.spec
    return Identity(
        dagger=spec.qualified_name,
        streams=[
            StreamIdentity(
                table=s.table,
                bootstrap_servers=s.kafka.bootstrap_servers,
                topics=sorted(s.topics),
                proto=s.proto,
                offsets=s.kafka.cluster,
            )
            for s in spec.streams
        ],
        state=state_operators(plan.query.spark_sql),
        state_store=spec.state_store,
        spec_version=hashlib.sha256(spec.model_dump_json().encode()).hexdigest()[:16],
    )


def differences(made: Identity, wanted: Identity) -> list[str]:
    """Why a checkpoint made for `made` cannot serve `wanted` (empty: it can)."""
    reasons = []
    if made.dagger != wanted.dagger:  # a checkpoint is one dagger's: resuming another's would take it over
        reasons.append(f"it is dagger {made.dagger}'s, not {wanted.dagger}'s")
    if made.format != wanted.format:
        reasons.append(f"it was written by another version of the engine (format {made.format}, now {wanted.format})")
    tables = [s.table for s in made.streams], [s.table for s in wanted.streams]
    if tables[0] != tables[1]:
        reasons.append(f"it reads streams {tables[0]}, the spec declares {tables[1]}")
    for old, new in zip(made.streams, wanted.streams, strict=False):
        # a catalog cluster and its offset-keeping mirror are one source to a checkpoint, wherever they listen
        same_offsets = old.offsets is not None and old.offsets == new.offsets
        for name in ("topics", "proto") if same_offsets else ("bootstrap_servers", "topics", "proto"):
            before, now = getattr(old, name), getattr(new, name)
            if before != now:
                reasons.append(f"stream {new.table}: it was made for {name} {before}, the spec says {now}")
    if made.state != wanted.state:
        gone = [s for s in made.state if s not in wanted.state]
        added = [s for s in wanted.state if s not in made.state]
        reasons.append(
            "the query keeps other state: " + "; ".join([*(f"was {s}" for s in gone), *(f"now {s}" for s in added)])
        )
    if made.state_store != wanted.state_store:
        reasons.append(f"its state is in the {made.state_store} store, the spec asks for {wanted.state_store}")
    return reasons


def read_identity(checkpoint: Path) -> Identity | None:
    path = checkpoint / IDENTITY
    if not path.exists():
        return None
    return Identity.model_validate_json(path.read_text())


def _batch_ids(checkpoint: Path, log: str) -> list[int]:
    folder = checkpoint / log
    return sorted(int(f.name) for f in folder.iterdir() if f.name.isdigit()) if folder.is_dir() else []


def last_committed_batch(checkpoint: Path) -> int | None:
    ids = _batch_ids(checkpoint, "commits")
    return ids[-1] if ids else None


def latest_offsets(checkpoint: Path) -> list[SourceOffset]:
    """The source offsets of the latest batch Spark planned (committed or to be replayed), one per source that
    had one. Spark's offset log: a version line, the batch's metadata, then one line per source ('-' for none)."""
    ids = _batch_ids(checkpoint, "offsets")
    if not ids:
        return []
    lines = (checkpoint / "offsets" / str(ids[-1])).read_text().splitlines()[2:]
    return [SourceOffset.from_json(line) for line in lines if line.strip() not in ("", "-")]


def prepare(plan: DaggerPlan, reset: bool = False) -> Identity:
    """Check (or with `reset`, start over) the dagger's checkpoint and record what it is made for. Returns the
    identity in force, whose `sink_batch_base` the engine adds to batch ids."""
    checkpoint = plan.checkpoint
    wanted = identity_of(plan)
    made = read_identity(checkpoint)
    last = last_committed_batch(checkpoint)
    if reset:
        base = made.sink_batch_base if made else 0
        if last is not None:
            base += STRIDE * (last + 1)  # past the last batch and its closing batches: sinks take new ids as new
        shutil.rmtree(checkpoint, ignore_errors=True)
        made = None
        wanted = wanted.model_copy(update={"sink_batch_base": base})
    elif made is not None:
        reasons = differences(made, wanted)
        if reasons:
            raise CheckpointError(
                f"the checkpoint {checkpoint} cannot be resumed for dagger {wanted.dagger}:\n"
                + "\n".join(f"  {r}" for r in reasons)
                + "\nEither start over with `dagger run --reset-checkpoint` (reads the streams again from "
                "`kafka.start`), or give the dagger a new name (a new checkpoint; the old one stays)."
            )
        wanted = wanted.model_copy(update={"sink_batch_base": made.sink_batch_base})
    # A checkpoint from before identities (no dagger.json) is adopted as it is: its ids were Spark's, smaller.
    checkpoint.mkdir(parents=True, exist_ok=True)
    write_atomic(checkpoint / IDENTITY, json.dumps(wanted.model_dump(mode="json"), indent=2) + "\n")
    return wanted


def sink_batch_id(identity: Identity, batch_id: int, closing_after: int | None = None) -> int:
    """The id a sink sees for Spark's `batch_id`; `closing_after`: the batch is a closing one, on a copy of the
    checkpoint whose last batch was that one."""
    if closing_after is None:
        return identity.sink_batch_base + STRIDE * batch_id
    step = batch_id - closing_after
    if not 0 < step < STRIDE:
        raise CheckpointError(f"closing batch {batch_id} after batch {closing_after}: more than {STRIDE - 1} of them")
    return identity.sink_batch_base + STRIDE * closing_after + step
