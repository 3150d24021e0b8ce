"""What a dagger's SQL may be before it is parsed (jobs/sql/guard.py): bounded, so a hostile query is refused fast
with the limit it breaks, and free of Spark's variable references, which every session turns off too."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml
from pyspark.sql import SparkSession

from jobs.sql import SqlError, guard, translate
from odin.paths import BIN_DIR
from tests.support.seeds import SUPPLY_S2_SQL, SUPPLY_SQL, SURGE_SQL
from tests.support.sql import BOOKING, SUPPLY, UDFS

EXAMPLES = Path(__file__).parents[1] / "docs" / "examples"


def refusal(sql: str) -> str:
    with pytest.raises(SqlError) as e:
        translate(sql, {"data_stream": BOOKING}, UDFS)
    return str(e.value)


def test_spark_sessions_substitute_no_variables(spark: SparkSession) -> None:
    assert spark.conf.get("spark.sql.variable.substitute") == "false"
    row = spark.sql("SELECT '${env:HOME}' AS home, '${system:user.home}' AS user_home, '${spark.app.name}' AS app")
    assert row.first().asDict() == {  # type: ignore[union-attr]
        "home": "${env:HOME}",
        "user_home": "${system:user.home}",
        "app": "${spark.app.name}",
    }


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT '${env:HOME}' AS home, count(1) AS n FROM data_stream GROUP BY 1",
        "SELECT city_id FROM data_stream WHERE status = '${system:user.name}'",
        "SELECT city_id AS `${spark.app.name}` FROM data_stream",
        "SELECT city_id FROM data_stream -- ${env:AWS_SECRET_ACCESS_KEY}",
    ],
)
def test_variable_references_are_refused_with_the_reason(sql: str) -> None:
    message = refusal(sql)
    assert "'${'" in message and "variable" in message and "concat('$', '{')" in message


def validate(spec: Path, home: Path) -> subprocess.CompletedProcess[str]:
    """`dagger validate` in an environment of its own (`home`): nothing of a running stack's."""
    env = {**os.environ, "ODIN_HOME": str(home)}
    return subprocess.run(
        [str(BIN_DIR / "dagger"), "validate", str(spec)], capture_output=True, text=True, timeout=120, env=env
    )


def test_a_dagger_spec_with_a_variable_reference_names_the_sql_field(tmp_path: Path) -> None:
    spec = yaml.safe_load((EXAMPLES / "surge-demand.yaml").read_text())
    spec["sql"] = spec["sql"].replace("count(1)", "'${env:HOME}' AS home, count(1)")
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    done = validate(path, tmp_path)
    assert done.returncode != 0
    assert "sql: the SQL contains '${' at line 4" in done.stderr, done.stderr
    assert "/root" not in done.stdout + done.stderr


@pytest.mark.parametrize("example", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_the_examples_validate(example: Path, tmp_path: Path) -> None:
    """With no environment, their catalog streams resolve from the reviewed catalog file."""
    done = validate(example, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "from the catalog file odin/catalog/streams.yaml" in done.stderr


def test_real_queries_are_well_within_the_limits() -> None:
    for sql, table, schema in (
        (SURGE_SQL, "data_stream", BOOKING),
        (SUPPLY_SQL, "supply_data", SUPPLY),
        (SUPPLY_S2_SQL, "supply_data", SUPPLY),
    ):
        translate(sql, {table: schema}, UDFS)
        assert guard.measure(sql).within(scale=4), sql  # a query four times bigger in every way passes too


def sum_of(terms: int, term: str = "amount") -> str:
    return "SELECT " + " + ".join([term] * terms) + " AS s FROM data_stream"


def nested(depth: int) -> str:
    return "SELECT " + "(" * depth + "amount" + ")" * depth + " AS s FROM data_stream"


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        (nested(2_000), "the SQL nests 2000 levels deep at line 1, column "),
        (nested(guard.MAX_NESTING + 1), f"at most {guard.MAX_NESTING} levels are allowed"),
        ("SELECT amount FROM data_stream WHERE " + "NOT " * 400 + "status = 'x'", "levels are allowed"),
        (
            "SELECT " + "CASE WHEN amount > 1 THEN " * 40 + "1" + " ELSE 0 END" * 40 + " AS s FROM data_stream",
            "nests 40 levels deep",
        ),
        (sum_of(20_000, "1"), f"the SQL has 40,004 tokens; at most {guard.MAX_TOKENS:,} are allowed"),
        (sum_of(guard.MAX_TERMS + 2), f"has {guard.MAX_TERMS + 1} operators; at most {guard.MAX_TERMS} are allowed"),
        ("SELECT amount FROM data_stream WHERE " + " OR ".join(["status = 'x'"] * 300), "has 599 operators"),
        (
            "SELECT amount FROM data_stream -- " + "x" * guard.MAX_CHARS,
            f"characters long; at most {guard.MAX_CHARS:,} are allowed",
        ),
    ],
    ids=["parens-2000", "parens-limit", "not-chain", "case", "tokens", "terms", "or-chain", "size"],
)
def test_pathological_queries_are_refused_before_parsing_with_the_limit(sql: str, expected: str) -> None:
    assert expected in refusal(sql)


def test_the_limits_are_generous() -> None:
    """Queries just within every limit translate (a refusal would raise SqlError)."""
    assert translate(nested(guard.MAX_NESTING - 1), {"data_stream": BOOKING}, UDFS).value_columns == ("s",)
    assert translate(sum_of(guard.MAX_TERMS), {"data_stream": BOOKING}, UDFS).value_columns == ("s",)
    in_list = ", ".join(str(i) for i in range(5_000))
    in_query = translate(f"SELECT amount FROM data_stream WHERE city_id IN ({in_list})", {"data_stream": BOOKING}, UDFS)
    assert in_query.value_columns == ("amount",)
    # Many short expressions side by side: each is bounded, not their sum.
    wide = ", ".join(f"amount * {i} + city_id AS c{i}" for i in range(1_000))
    assert len(translate(f"SELECT {wide} FROM data_stream", {"data_stream": BOOKING}, UDFS).value_columns) == 1_000


def test_a_query_too_deep_for_the_parser_is_a_sql_error_not_a_crash() -> None:
    # Below every limit, yet past Python's recursion limit in a deep call stack: still one clear message.
    def deep(n: int) -> str:
        return refusal(nested(guard.MAX_NESTING - 1)) if n == 0 else deep(n - 1)

    assert "too deeply" in deep(900)
