"""The SparkSession every dagger (and every test) runs in: local by default, or a cluster given a master URL.

Also what Spark's failures mean: the root cause in an exception's text (a Python exception raised in our source or
sink, wrapped in Java exceptions), and whether a failure is the doing of a stop signal.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from py4j.protocol import Py4JError, Py4JJavaError, Py4JNetworkError
from pyspark.sql import SparkSession

from odin.paths import REPO, spark_archive_options, write_atomic

SHIPPED_PACKAGES = ("jobs", "protos")  # what executors import: the Kafka reader, decoder, UDFs and schema loader
LOG_FILE_PROPERTY = "dagger.spark.log"
# Spark's driver log when a dagger is not --verbose: errors only, into a file (created only if one is logged), as
# every failure that matters reaches the CLI's own message, and Spark's ERROR lines with their stack traces would
# bury it. The file's path is a system property, so the configuration is the same for every run.
QUIET_LOG4J2 = f"""\
rootLogger.level = error
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = ${{sys:{LOG_FILE_PROPERTY}}}
appender.file.append = false
appender.file.createOnDemand = true
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{yy/MM/dd HH:mm:ss}} %p %c: %m%n%ex
# Spark gives the logger of a shell's main class (PySpark's gateway) WARN, and says so on stderr, unless it has a level
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = error
"""


# Every dagger JVM compiles with C1 only: a deployed dagger's driver and executors, a preview's, `dagger run`'s. A
# start (or a relaunch: a driver and its executors at once) leaves C2's compiler threads taking the CPU the query's
# first batches need, for minutes, and at 20,000 events/s a dagger's JVMs spend a few percent of a core on the query
# itself (its decoding is Python's), so C2's faster code gains little: Loki's driver-loss 71-81 s -> 45 s; `dagger
# run`'s first row 25.6 -> 18.5 s with the same steady rate (docs/decisions.md). A preview's JVM lives seconds.
QUICK_JIT = "-XX:TieredStopAtLevel=1"
# ... and collects with the serial collector from a small initial heap: by default the JVM commits 1/64 of the host's
# memory at once, and G1 adds per-region bookkeeping and concurrent threads, for heaps a dagger's JVM never needs.
# `dagger run`'s JVM 499-556 -> 471 MB at its first row, steady rate and p99 latency unchanged (bench/RESULTS.md). A
# young generation capped at 32 MB saved 60 MB more but cost a fifth of the steady rate. A dagger whose state is
# large (the `memory` store keeps it on the heap) would pause longer in full collections: the setting to revisit then.
# Class metadata first collects at 64 MB rather than the JVM's 21 MB: a dagger's JVM holds ~23 MB of it once its
# first batch has run, so by default a full collection (~0.1 s, freeing ~0.1 MB) stopped that batch.
LEAN_HEAP = "-XX:+UseSerialGC -Xms64m -XX:MetaspaceSize=64m"
DAGGER_JVM = f"{QUICK_JIT} {LEAN_HEAP}"
# The environment a dagger's JVM starts with. Spark (4.3) looks up Python data sources installed as `pyspark_*`
# packages, in Python processes of its own (a daemon and its worker: ~1 s of CPU, ~90 MB that stay), before its
# first data source is registered or read. It does so whenever the command in PYSPARK_DRIVER_PYTHON (else
# PYSPARK_PYTHON) exists, and its JVM reads that variable for nothing else (PythonUtils.defaultPythonExec, used by
# DataSourceManager only); a Python driver a cluster launches is named by `spark.pyspark.driver.python`, which comes
# first. The engine registers the one source a dagger reads itself, so a name that is no command turns the lookup off.
# A dagger's Python processes take Arrow's memory from the system allocator, not from pyarrow's default (mimalloc),
# which keeps what it frees for reuse: at `dagger run`'s first row its ~8 Python processes held ~40-50 MB less, in
# steady state 50-80 MB less, the steady rate the same within the runs' spread (docs/decisions.md). Arrow reads the
# variable as pyarrow is imported: a dagger's own process sets it first (use_system_allocator), its JVMs pass it on.
ARROW_ALLOCATOR = {"ARROW_DEFAULT_MEMORY_POOL": "system"}
JVM_ENVIRONMENT = {"PYSPARK_DRIVER_PYTHON": "no-python-data-source-lookup", **ARROW_ALLOCATOR}
# Groups an aggregation of objects (collect_set: DistinctCount) keeps in a hash map per task before it sorts what is
# left instead. Spark's default (128) is far below a surge batch's groups (10-20k per task), so every batch's partial
# and final aggregation sorted: its read stage's JVM CPU 0.9-1.4 -> 0.6-0.85 s per 500k events at 65,536. The bound
# stays: past it, a task still sorts, so a query with more groups keeps its heap bounded (docs/decisions.md).
OBJECT_AGGREGATION_GROUPS = 65_536
# How checkpoint files (offset and commit logs, state deltas) are written: a temporary file renamed into place by the
# file system. Spark's default goes through Hadoop's FileContext, whose local file system forks a shell command
# (`readlink`) for the status of each file it renames, on every batch's path: a 20,000 events/s batch 810 -> 635 ms,
# the offset log's write 44 -> 11 ms (docs/decisions.md). A dagger's checkpoint is always a local path (jobs/spec.py),
# where rename(2) is atomic; a second writer of a batch's file is still refused (tests/test_session.py).
CHECKPOINT_FILES = "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"


def spark_session(
    app_name: str | None = "dagger",
    master: str | None = "local[2]",
    shuffle_partitions: int = 2,
    conf: dict[str, str] | None = None,
    log_file: Path | None = None,
    archive: bool = True,
) -> SparkSession:
    """`log_file`: Spark's driver log goes there, errors only, instead of WARN and above to the console. It only
    applies to a JVM this call starts (the log configuration is read once, at JVM start), as does `archive`: the
    JVM maps the class-data archive `make setup` built (jobs/engine/jvm_archive.py), if there is one. `master` None: a
    driver a cluster launched (jobs/engine/driver.py), whose master and host come from the cluster and its worker;
    `app_name` None: the one its submission gave it."""
    # Bind Spark's driver and block manager to loopback, and run Python workers with this interpreter (the venv).
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    conf = dict(conf or {})
    options = [DAGGER_JVM, conf.get("spark.driver.extraJavaOptions", ""), spark_archive_options() if archive else ""]
    if log_file is not None:
        options.append(f"-Dlog4j2.configurationFile={quiet_log4j2()} -D{LOG_FILE_PROPERTY}={log_file}")
    conf["spark.driver.extraJavaOptions"] = " ".join(o for o in options if o)
    builder = SparkSession.builder if app_name is None else SparkSession.builder.appName(app_name)
    if master is not None:
        builder = (
            builder.master(master)
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
        )
    builder = (
        builder.config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")  # its bars would overwrite the dagger's progress lines
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.objectHashAggregate.sortBased.fallbackThreshold", str(OBJECT_AGGREGATION_GROUPS))
        .config("spark.sql.streaming.checkpointFileManagerClass", CHECKPOINT_FILES)
    )
    for name, value in ARROW_ALLOCATOR.items():  # a cluster's executors (a local run's share this process's)
        builder = builder.config(f"spark.executorEnv.{name}", value)
    for key, value in conf.items():
        builder = builder.config(key, value)
    # Last, so no `conf` turns it back on: Spark would replace ${env:NAME}, ${system:NAME} and ${spark.*} in SQL
    # text with the host's values (a user's query could read the driver's environment into its sink).
    builder = builder.config("spark.sql.variable.substitute", "false")
    with _jvm_environment():
        spark = builder.getOrCreate()
    if log_file is not None:
        _quiet_accumulator_server(spark)
    return spark


def use_system_allocator() -> None:
    """ARROW_ALLOCATOR in this process before it imports pyarrow: the platform's value, as its JVMs' children get."""
    os.environ.update(ARROW_ALLOCATOR)


@contextlib.contextmanager
def _jvm_environment() -> Iterator[None]:
    """JVM_ENVIRONMENT for a JVM PySpark starts meanwhile (it copies this process's environment), and only for it."""
    before = {name: os.environ.get(name) for name in JVM_ENVIRONMENT}
    os.environ.update(JVM_ENVIRONMENT)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _quiet_accumulator_server(spark: SparkSession) -> None:
    """PySpark's accumulator server prints a traceback (EOFError) when the JVM goes away, as it does when a stop
    signal reaches the whole process group: no failure of the dagger's, and no trace for its console."""
    server = getattr(spark.sparkContext, "_accumulatorServer", None)
    if server is not None:

        def handle_error(request: Any, client_address: Any) -> None:
            return None

        server.handle_error = handle_error


@cache
def quiet_log4j2() -> Path:
    """QUIET_LOG4J2 as a file (log4j2 reads its configuration from a file or URL only)."""
    path = Path(tempfile.gettempdir()) / f"dagger-log4j2-{os.getuid()}.properties"
    if not path.exists() or path.read_text() != QUIET_LOG4J2:
        write_atomic(path, QUIET_LOG4J2)  # a JVM starting meanwhile reads a whole file
    return path


@cache
def engine_zip() -> Path:
    """The engine's packages as one zip (built once per driver process), for executors' Python path."""
    path = Path(tempfile.mkdtemp(prefix="dagger-engine-")) / "dagger_engine.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for package in SHIPPED_PACKAGES:
            for f in sorted((REPO / package).rglob("*")):
                if f.is_file() and "__pycache__" not in f.parts and f.suffix in (".py", ".tsv"):
                    z.write(f, f.relative_to(REPO))
    return path


def ship_engine(spark: SparkSession, files: Iterable[Path]) -> None:
    """Executors of a cluster run the driver's engine, whatever their hosts have installed: the packages go on
    their Python path and the compiled schemas (`files`) into their SparkFiles directory (see protos.local_file)."""
    sc = spark.sparkContext
    sc.addPyFile(str(engine_zip()))
    for f in files:
        sc.addFile(str(f))


# -- what a failure was ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RootCause:
    kind: str  # the exception's class, without its module: "SinkError", "DataLossError", "SparkException"
    message: str
    python: bool = False  # raised by Python code (ours, or a library's), found in a Python traceback
    module: str = ""  # of a Python exception's class, when the traceback names it: "jobs.sinks.base", "py4j.protocol"

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}" if self.message else self.kind


class SparkFailure(RuntimeError):
    """A query or job that failed, with the root cause found in Spark's exception (the original is `__cause__`)."""

    def __init__(self, what: str, cause: RootCause) -> None:
        super().__init__(f"{what} failed: {cause}")
        self.cause = cause


_TRACEBACK = "Traceback (most recent call last):"
_CHAINED = (
    "The above exception was the direct cause of the following exception:",
    "During handling of the above exception, another exception occurred:",
)
# Where a Python exception's message ends inside Spark's text: Spark's own additions and Java stack frames.
_MESSAGE_END = re.compile(r"^\s*(SQLSTATE: |at [\w$.]+\(|\.\.\. \d+ more|Caused by: |JVM stacktrace:|=== Streaming)")
_EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.$]*?)(?::\s?(.*))?$")
_KAFKA_ERROR = re.compile(r'KafkaError\{.*?str="(.*)"\}', re.DOTALL)
_STREAM_FAILED = re.compile(r"^\[STREAM_FAILED\] Query \[.*?\] terminated with exception: ", re.DOTALL)
MAX_LINES = 12  # of a root cause's message: DataLossError names every partition, but a JVM dump is not for users


def exception_text(exc: BaseException) -> str:
    """An exception's whole text without calling into the JVM: str() of a captured Spark exception asks the JVM
    for a setting, and of a Py4JJavaError for the Java message, which fails once Spark is stopped."""
    desc = getattr(exc, "_desc", None)
    if isinstance(desc, str):  # pyspark's captured exceptions: the message, then the Java stack with its causes
        return f"{desc}\n{getattr(exc, '_stackTrace', '') or ''}"
    if isinstance(exc, Py4JJavaError):
        try:
            return str(exc)
        except Exception as gone:  # the JVM did not answer: say so, it is why the Java message is missing
            return f"{type(exc).__name__}: {exc.errmsg.strip()} (the JVM did not answer: {gone})"
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0].str()
    return str(exc)


def _clean(message: str) -> str:
    kafka = _KAFKA_ERROR.search(message)
    if kafka:
        message = kafka.group(1)
    lines = [line.rstrip() for line in message.strip("\n").splitlines()]
    return "\n".join(lines[:MAX_LINES] + (["  ..."] if len(lines) > MAX_LINES else []))


def python_root_cause(text: str) -> RootCause | None:
    """The exception a Python process raised, from the first Python traceback in `text` (Spark repeats it in every
    Java exception that wraps it). Of a chain (`raise SinkError(...) from e`), the last one: it is what was raised,
    and ours carry their cause's message."""
    lines = text.splitlines()
    i = next((n for n, line in enumerate(lines) if line.rstrip().endswith(_TRACEBACK)), None)
    found: RootCause | None = None
    while i is not None and i < len(lines):
        i += 1
        while i < len(lines) and (lines[i].startswith(" ") or not lines[i].strip()):  # the frames
            i += 1
        if i >= len(lines):
            break
        m = _EXCEPTION_LINE.match(lines[i].strip())
        if m is None:
            break
        message = [m.group(2) or ""]
        i += 1
        while i < len(lines) and lines[i].strip() and not _MESSAGE_END.match(lines[i]) and lines[i] not in _CHAINED:
            message.append(lines[i])
            i += 1
        module, _, kind = m.group(1).rpartition(".")
        found = RootCause(kind, _clean("\n".join(message)), python=True, module=module)
        while i < len(lines) and not lines[i].strip():
            i += 1
        if i >= len(lines) or lines[i].strip() not in _CHAINED:
            break
        i = next((n for n in range(i + 1, len(lines)) if lines[n].rstrip().endswith(_TRACEBACK)), None)
    return found


def _java_root_cause(text: str, kind: str) -> RootCause:
    """The innermost `Caused by:` of a Java exception, else its message without Spark's query dump."""
    text = _STREAM_FAILED.sub("", text.strip())
    caused = re.findall(r"^Caused by: ([\w.$]+)(?::\s?(.*))?$", text, re.MULTILINE)
    if caused:
        name, message = caused[-1]
        return RootCause(name.rsplit(".", 1)[-1], _clean(message))
    head = re.split(r"\n\s*(?:JVM stacktrace:|=== Streaming Query ===|at [\w$.]+\()", text, maxsplit=1)[0]
    return RootCause(kind, _clean(head))


def root_cause(exc: BaseException) -> RootCause:
    """What failed, for a message to the user: a Python exception raised anywhere (driver, planner, reader, sink)
    wins over the Java exceptions that carry it."""
    if isinstance(exc, SparkFailure):
        return exc.cause
    text = exception_text(exc)
    found = python_root_cause(text)
    if found is not None:
        return found
    if isinstance(exc, Py4JJavaError) or hasattr(exc, "_desc"):
        return _java_root_cause(text, type(exc).__name__)
    return RootCause(type(exc).__name__, _clean(text))


# A stop signal sent to the process group also reaches Spark's JVM and its Python workers: the JVM shuts down (the
# Python side then loses its connection), its jobs are cancelled, and workers die. These are the shapes that takes.
_SIGNAL_KINDS = frozenset(
    {"KeyboardInterrupt", "EOFError", "ConnectionError", "ConnectionRefusedError", "ConnectionResetError",
     "BrokenPipeError", "Py4JNetworkError"}
)  # fmt: skip
_SIGNAL_TEXT = re.compile(
    r"SparkContext (?:was|has been) shut ?down|stopped SparkContext|Python worker exited unexpectedly|"
    r"InterruptedException|ClosedByInterruptException|Answer from Java side is empty|"
    r"Error while (?:sending|receiving)|Connection refused|Connection reset|Broken pipe|EOFException|"
    r"SparkContext is shutting down|Spark(?:Context|Session) (?:was|has been|is) stopped|RpcEnv already stopped|"
    r"RECEIVED SIGNAL",
    re.IGNORECASE,
)
_SPARK_PLUMBING = ("pyspark.", "py4j.")  # Python exceptions that carry the JVM's (a captured Java exception)


def broken_by_signal(exc: BaseException) -> bool:
    """Whether `exc`, raised while a stop signal was being handled, is the signal's doing rather than a failure
    of the dagger's own. The signal's: the connection to the JVM lost, the query's jobs cancelled or interrupted,
    workers killed. Not the signal's: an exception our Python code raised (SinkError, DataLossError, KafkaException,
    a bug), as the signal only sets a flag in the driver and kills workers outright; and any other failure. A Python
    exception of pyspark or py4j carries the JVM's, and is judged like it."""
    if isinstance(exc, Py4JNetworkError | ConnectionError | EOFError | KeyboardInterrupt):
        return True
    cause = root_cause(exc)
    if cause.python and f"{cause.module}.".startswith(_SPARK_PLUMBING):  # e.g. our sink's Spark call, JVM gone
        return cause.kind in _SIGNAL_KINDS or bool(_SIGNAL_TEXT.search(cause.message))
    if cause.python:
        return cause.kind in _SIGNAL_KINDS
    if isinstance(exc, Py4JError) and not isinstance(exc, Py4JJavaError) and not hasattr(exc, "_desc"):
        return True  # py4j's own errors (not a Java exception): the JVM is gone or going
    return bool(_SIGNAL_TEXT.search(str(cause)))  # the root cause only: stack frames may name anything
