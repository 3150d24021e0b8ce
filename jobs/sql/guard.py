"""What a dagger's SQL text may be, checked before it is parsed: bounded, and free of Spark variable references.

The parser and the validator recurse per nesting level and walk ancestors per column, so an unbounded query costs
the host a RecursionError or minutes of CPU (2,000 nested parentheses; a 20,000-term sum took 86 s). These bounds
are linear to check and far above what an analyst writes (the seeds' queries use under a tenth of each):

- MAX_CHARS characters (about 2,000 lines), checked first, in constant time;
- MAX_TOKENS tokens (words, numbers, strings, operators: a 5,000-value IN list is 10,000);
- MAX_NESTING levels of parentheses, brackets, CASE ... END and runs of NOT/sign prefixes, one inside another;
- MAX_TERMS operators in one expression, counting those of the expressions nested in it: what makes a parse tree
  deep (a + b + ... is a chain as deep as it is long; a list of short expressions is wide, not deep).

Spark replaces `${env:NAME}`, `${system:NAME}` and `${spark.*}` in SQL text with the host's values; every session
turns that off (jobs/engine/session.py), and `${` is refused here so a query never depends on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlglot.dialects.spark import Spark
from sqlglot.tokens import Token, TokenType

from jobs.sql.errors import SqlError

MAX_CHARS = 100_000
MAX_TOKENS = 20_000
MAX_NESTING = 32
MAX_TERMS = 500

VARIABLE = "${"
_DIALECT = Spark()  # the parser's (jobs/sql/parse.py), so both see the same tokens
_OPEN = {TokenType.L_PAREN, TokenType.L_BRACKET, TokenType.L_BRACE, TokenType.CASE}
_CLOSE = {TokenType.R_PAREN, TokenType.R_BRACKET, TokenType.R_BRACE, TokenType.END}
_PREFIX = {TokenType.NOT, TokenType.DASH, TokenType.PLUS, TokenType.TILDE}  # each one of a run is a parser level
_OPERATORS = _PREFIX | {
    TokenType.STAR, TokenType.SLASH, TokenType.MOD, TokenType.DIV, TokenType.DPIPE, TokenType.AMP, TokenType.PIPE,
    TokenType.CARET, TokenType.LT, TokenType.LTE, TokenType.GT, TokenType.GTE, TokenType.EQ, TokenType.NEQ,
    TokenType.NULLSAFE_EQ, TokenType.AND, TokenType.OR, TokenType.XOR, TokenType.LIKE, TokenType.ILIKE,
    TokenType.RLIKE, TokenType.IS, TokenType.BETWEEN, TokenType.IN, TokenType.DCOLON,
}  # fmt: skip
# Where one expression ends and the next begins, at the same level.
_SEPARATORS = {
    TokenType.COMMA, TokenType.SELECT, TokenType.FROM, TokenType.WHERE, TokenType.GROUP_BY, TokenType.HAVING,
    TokenType.ORDER_BY, TokenType.LIMIT, TokenType.WHEN, TokenType.THEN, TokenType.ELSE, TokenType.ON,
    TokenType.JOIN, TokenType.UNION, TokenType.EXCEPT, TokenType.INTERSECT, TokenType.SEMICOLON, TokenType.ALIAS,
}  # fmt: skip


@dataclass(frozen=True)
class Measure:
    """A query's size by each bound, with where the deepest nesting and the longest expression are."""

    chars: int
    tokens: int
    nesting: int
    nesting_at: tuple[int, int]  # (line, column)
    terms: int
    terms_at: tuple[int, int]

    def within(self, scale: int = 1) -> bool:
        """Whether `scale` times this query would still pass every bound."""
        return (
            self.chars * scale <= MAX_CHARS
            and self.tokens * scale <= MAX_TOKENS
            and self.nesting * scale <= MAX_NESTING
            and self.terms * scale <= MAX_TERMS
        )


def check_text(sql: str) -> None:
    """The bounds of the raw text, before it is tokenized: its size, and no Spark variable reference."""
    if len(sql) > MAX_CHARS:
        raise SqlError(
            f"the SQL is {len(sql):,} characters long; at most {MAX_CHARS:,} are allowed: shorten it (long IN lists "
            "and generated CASE tables belong in a join with a stream, or in several daggers)"
        )
    at = sql.find(VARIABLE)
    if at >= 0:
        line = sql.count("\n", 0, at) + 1
        column = at - (sql.rfind("\n", 0, at) + 1) + 1
        raise SqlError(
            f"the SQL contains '{VARIABLE}' at line {line}, column {column}: Spark would replace a variable reference "
            "such as ${env:NAME}, ${system:NAME} or ${spark.conf} with a value of the host running the dagger, so a "
            "dagger's SQL may not contain '${' anywhere (strings, names and comments included); to produce the "
            "characters as data, write them apart, e.g. concat('$', '{')"
        )


def check_tokens(tokens: Sequence[Token]) -> None:
    """The bounds of the tokenized query: token count, nesting depth and operators per expression."""
    if len(tokens) > MAX_TOKENS:
        raise SqlError(
            f"the SQL has {len(tokens):,} tokens; at most {MAX_TOKENS:,} are allowed: shorten it (e.g. a shorter IN "
            "list, or fewer output columns)"
        )
    m = _measure(tokens, chars=0)
    if m.nesting > MAX_NESTING:
        line, col = m.nesting_at
        raise SqlError(
            f"the SQL nests {m.nesting} levels deep at line {line}, column {col} (parentheses, brackets, CASE and "
            f"NOT/sign prefixes, one inside another); at most {MAX_NESTING} levels are allowed: flatten it, e.g. move "
            "inner parts into a WITH query"
        )
    if m.terms > MAX_TERMS:
        line, col = m.terms_at
        raise SqlError(
            f"an expression of the SQL, up to line {line}, column {col}, has {m.terms} operators; at most "
            f"{MAX_TERMS} are allowed in one expression: shorten it (e.g. `x IN (a, b, ...)` instead of a chain of "
            "OR, or split it into several output columns)"
        )


def measure(sql: str) -> Measure:
    """`sql` by each bound (for tests and benchmarks: the checks stop at the first bound broken)."""
    return _measure(_DIALECT.tokenize(sql), len(sql))


def _measure(tokens: Sequence[Token], chars: int) -> Measure:
    depth = run = 0  # open brackets and CASEs; the current run of prefix operators
    nesting, nesting_at = 0, (1, 1)
    terms, terms_at = 0, (1, 1)
    # Per open level: [operators in the current expression, most in any of its expressions]. A closed level's most
    # adds to the expression it is part of: (a + (b + c)) is as deep as a + b + c.
    frames = [[0, 0]]
    for tok in tokens:
        kind = tok.token_type
        run = run + 1 if kind in _PREFIX else 0
        if kind in _OPEN:
            depth += 1
            frames.append([0, 0])
        elif kind in _CLOSE and len(frames) > 1:
            depth -= 1
            inner = frames.pop()
            frames[-1][0] += inner[1]
        elif kind in _SEPARATORS:
            frames[-1][0] = 0
        if kind in _OPERATORS:
            frames[-1][0] += 1
        frame = frames[-1]
        frame[1] = max(frame[1], frame[0])
        if frame[0] > terms:
            terms, terms_at = frame[0], (tok.line, tok.col)
        if depth + run > nesting:
            nesting, nesting_at = depth + run, (tok.line, tok.col)
    return Measure(chars, len(tokens), nesting, nesting_at, terms, terms_at)


def check(sql: str) -> None:
    """Every bound, for a caller that wants the refusal before anything else (translate() checks them itself)."""
    check_text(sql)
    check_tokens(_DIALECT.tokenize(sql))
