"""Steady-state probes of the consumers, and the samples of a run's timeline (what the report plots).

A consumer's lag is measured from outside: the events the broker acknowledged to the feeders, per partition, minus
the positions of the latest batch in the consumer's checkpoint (a dagger that cannot reach Kafka, or is paused,
reports nothing, so its own figure would stay at its last value). Processed events and its watermark come from its
telemetry in VictoriaMetrics (`dagger_metrics`, written at every batch); whether it runs, from its process (local)
or its driver's processes (cluster).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from jobs.engine.checkpoint import latest_offsets
from jobs.lifecycle.daggers import followed
from loki.load.consumers import Consumer
from loki.playbook import Probe
from loki.resources import driver_processes
from odin import processes
from odin.apis import victoria
from odin.endpoints import Node
from odin.registry import Registry

WINDOW_S = 30  # processed_ratio compares the last 30 s of processing with the last 30 s of feeding


@dataclass
class ConsumerSample:
    lag: float | None = None
    processed_30s: float | None = None  # events its batches read in the last 30 s
    freshness_s: float | None = None  # how far its watermark is behind the newest event fed (or now)
    running: bool = False


@dataclass
class Sample:
    t: float  # seconds since the load started
    sent: int  # events the feeders sent so far
    acknowledged: int
    sent_30s: int  # in the last 30 s
    consumers: dict[str, ConsumerSample] = field(default_factory=dict)
    probes: dict[str, bool] = field(default_factory=dict)  # "type:consumer" -> held

    @property
    def steady(self) -> bool:
        return all(self.probes.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "t": round(self.t, 2),
            "sent": self.sent,
            "acknowledged": self.acknowledged,
            "sent_30s": self.sent_30s,
            "consumers": {k: vars(v) for k, v in self.consumers.items()},
            "probes": self.probes,
        }


class Observer:
    def __init__(self, vm_url: str, registry: Registry, workers: dict[str, list[Node]]) -> None:
        self.vm, self.registry, self.workers = vm_url, registry, workers  # workers: per cluster "team/name"

    def consumer(self, c: Consumer, ends: dict[tuple[str, int], int], fed_until: float | None = None) -> ConsumerSample:
        """`ends`: per (topic, partition), the offset after the last event acknowledged to the feeders; `fed_until`:
        the event time of the newest event fed (epoch seconds). Freshness is measured against it, not against now:
        once the load ends the watermark cannot pass the last event, and a dagger that caught up is fresh."""
        tag = f'dagger="{c.qualified_name}"'
        sample = ConsumerSample(running=self.running(c), lag=self.lag(c, ends))
        with contextlib.suppress(httpx.HTTPError):
            if sample.lag is None:  # no checkpoint to read: the dagger's own figure
                sample.lag = victoria.query(self.vm, f"sum(last_over_time(dagger_metrics_lag{{{tag}}}[1m]))")
            sample.processed_30s = victoria.query(
                self.vm, f"sum(sum_over_time(dagger_metrics_input_rows{{{tag}}}[{WINDOW_S}s]))"
            )
            watermark_ms = victoria.query(self.vm, f"max(last_over_time(dagger_metrics_watermark_ms{{{tag}}}[10m]))")
            if watermark_ms:
                newest = time.time() if fed_until is None else min(time.time(), fed_until)
                sample.freshness_s = max(0.0, newest - watermark_ms / 1000)
        return sample

    def lag(self, c: Consumer, ends: dict[tuple[str, int], int]) -> float | None:
        topics = {t for s in c.spec.streams for t in s.topics}
        mine = {tp: end for tp, end in ends.items() if tp[0] in topics}
        checkpoint = self.checkpoint(c)
        if not mine or checkpoint is None:
            return None
        try:
            offsets = latest_offsets(checkpoint)
            positions = {(p.topic, p.partition): at for o in offsets for p, at in o.positions.items()}
        except (OSError, ValueError):  # a batch being written: the next sample reads it
            return None
        return float(sum(max(0, end - positions.get(tp, 0)) for tp, end in mine.items()))

    def checkpoint(self, c: Consumer) -> Path | None:
        if c.placement == "local":
            return c.spec.checkpoint_dir
        record = self.registry.dagger(c.spec.team, c.spec.name)
        return Path(record.checkpoint) if record is not None and record.checkpoint else None

    def running(self, c: Consumer) -> bool:
        if c.placement == "local":
            return c.alive
        record = self.registry.dagger(c.spec.team, c.spec.name)
        record = followed(self.registry, record) if record is not None else None
        if record is None or record.submission_id is None or c.cluster is None:
            return False
        pids = [p.pid for n in self.workers.get(c.cluster, []) for p in processes.of_node(n) if p.pid]
        return bool(driver_processes(pids, record.submission_id))


def judge(probe: Probe, s: ConsumerSample, sent: int, sent_30s: int) -> bool:
    """Whether the probe holds; freshness and processed_ratio are judged only once there is load (`sent` events
    fed so far, `sent_30s` in the last 30 s)."""
    if probe.type == "running":
        return s.running
    if probe.type == "lag":
        return s.lag is not None and probe.max is not None and s.lag <= probe.max
    if probe.type == "freshness":
        if sent == 0:
            return True
        return s.freshness_s is not None and probe.max is not None and s.freshness_s <= probe.max
    if sent_30s == 0:
        return True
    return probe.min is not None and (s.processed_30s or 0) / sent_30s >= probe.min
