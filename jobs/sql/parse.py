"""Parsing a dagger's SQL into one sqlglot SELECT tree, accepting Dagger/Flink habits Spark's grammar lacks."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import Token, TokenType

from jobs.sql import guard
from jobs.sql.errors import SqlError

DIALECT = Spark()


def _not_command_fallback(record: logging.LogRecord) -> bool:
    # sqlglot logs a warning for every statement it parses as a raw Command (ADD JAR, SHOW, ...); those are rejected
    # with a SqlError anyway, so the warning would only be noise on a CLI's stderr.
    return "Falling back to parsing as a 'Command'" not in record.getMessage()


logging.getLogger("sqlglot").addFilter(_not_command_fallback)

# A comma right before one of these ends a list (Dagger queries often write `..., FROM` or end GROUP BY with a comma).
_LIST_ENDERS = {
    TokenType.FROM,
    TokenType.WHERE,
    TokenType.GROUP_BY,
    TokenType.HAVING,
    TokenType.ORDER_BY,
    TokenType.SORT_BY,
    TokenType.CLUSTER_BY,
    TokenType.DISTRIBUTE_BY,
    TokenType.LIMIT,
    TokenType.UNION,
    TokenType.EXCEPT,
    TokenType.INTERSECT,
    TokenType.SEMICOLON,
}
# Keywords that are also function names: Spark's window()/session_window() and Flink's SESSION() group window.
_KEYWORD_FUNCTIONS = {TokenType.WINDOW, TokenType.SESSION}

# What a rejected statement is, for the message.
_STATEMENT_KINDS: dict[type[exp.Expression], str] = {
    exp.Insert: "INSERT",
    exp.Update: "UPDATE",
    exp.Delete: "DELETE",
    exp.Merge: "MERGE",
    exp.Create: "CREATE",
    exp.Drop: "DROP",
    exp.Alter: "ALTER",
    exp.Set: "SET",
    exp.Cache: "CACHE",
    exp.Uncache: "UNCACHE",
    exp.Use: "USE",
    exp.Describe: "DESCRIBE",
    exp.LoadData: "LOAD DATA",
    exp.Refresh: "REFRESH",
}


def _fix_tokens(tokens: list[Token]) -> list[Token]:
    """Drop list-ending commas and let WINDOW/SESSION be called as functions, working on tokens, not text."""
    out: list[Token] = []
    for i, tok in enumerate(tokens):
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        if tok.token_type == TokenType.COMMA and (nxt is None or nxt.token_type in _LIST_ENDERS):
            continue
        if tok.token_type in _KEYWORD_FUNCTIONS and nxt is not None and nxt.token_type == TokenType.L_PAREN:
            tok = Token(TokenType.VAR, tok.text, tok.line, tok.col, tok.start, tok.end, tok.comments)
        out.append(tok)
    return out


def _parse_error(e: ParseError, sql: str) -> SqlError:
    if not e.errors:
        return SqlError(f"SQL does not parse: {e}")
    err = e.errors[0]
    near = (err.get("highlight") or "").strip()
    where = f"line {err.get('line')}, column {err.get('col')}"
    near_text = f" near '{near}'" if near else ""
    return SqlError(f"SQL does not parse at {where}{near_text}: {err.get('description')}")


def parse_query(sql: str, udfs: Iterable[str] = ()) -> exp.Query:
    """The single SELECT (or UNION/WITH of SELECTs) in `sql`; anything else is a SqlError.

    Calls to `udfs` stay plain calls under the name written: sqlglot would otherwise turn e.g. Split() into its own
    SPLIT node and could print it under another name."""
    if not sql or not sql.strip():
        raise SqlError("the SQL is empty; write one SELECT over the declared streams")
    guard.check_text(sql)
    try:
        tokens = DIALECT.tokenize(sql)
    except TokenError as e:
        raise SqlError(f"SQL does not parse: {e} (check quotes and backticks are closed)") from None
    guard.check_tokens(tokens)  # before the parser, which recurses per level
    tokens = _fix_tokens(tokens)
    try:
        parser = DIALECT.parser()
        shadowed = {name.upper() for name in udfs}
        if shadowed:
            parser.FUNCTIONS = {k: v for k, v in parser.FUNCTIONS.items() if k.upper() not in shadowed}
        statements = [s for s in parser.parse(tokens, sql) if s is not None and not isinstance(s, exp.Semicolon)]
    except ParseError as e:
        raise _parse_error(e, sql) from None
    except (ValueError, IndexError, TypeError, KeyError) as e:  # sqlglot's function builders on odd argument lists
        raise SqlError(f"SQL does not parse: {type(e).__name__}: {e} (check the arguments of each function)") from None
    if not statements:
        raise SqlError("the SQL is empty; write one SELECT over the declared streams")
    if len(statements) > 1:
        raise SqlError(
            f"the SQL has {len(statements)} statements; a dagger runs exactly one SELECT (remove the extra ';' parts)"
        )
    root = statements[0]
    if isinstance(root, exp.Subquery):
        root = root.unnest()
    if not isinstance(root, exp.Query) or isinstance(root, exp.Subquery):
        raise SqlError(
            f"only a SELECT query is allowed (UNION and WITH of SELECTs too); found: {_describe(root)}. A dagger reads "
            "its declared streams: it cannot change tables, settings, jars or caches"
        )
    for node in root.walk():
        if isinstance(node, exp.QueryTransform):
            raise SqlError("SELECT TRANSFORM(...) USING '...' runs a shell command and is not allowed in a dagger")
        if isinstance(node, exp.Command | exp.DDL | exp.DML) or type(node) in _STATEMENT_KINDS:
            raise SqlError(f"only a SELECT query is allowed; found inside it: {_describe(node)}")
    return root


def _describe(node: exp.Expression) -> str:
    if isinstance(node, exp.Command):
        return f"{node.name or node.sql(dialect=DIALECT)[:30]} command"
    for cls, kind in _STATEMENT_KINDS.items():
        if isinstance(node, cls):
            return f"{kind} statement"
    return f"{type(node).__name__.upper()} statement"
