"""PostgreSQL roles and databases the platform owns, kept as declared (idempotent: a second run changes nothing).

Every statement runs on an administrator's connection (the stack's unix socket, peer authentication). A password
never reaches the server or its log: the role gets a SCRAM-SHA-256 verifier computed here, and a stored verifier is
checked against the wanted password locally, so an unchanged password is not rewritten.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

SCRAM_ITERATIONS = 4096  # PostgreSQL's own default (scram_iterations)
# A role the platform provisions is only ever a login into its own database: nothing that reaches other databases,
# other roles or the server's files. INHERIT: a database owner gets its `public` schema through the implicit
# pg_database_owner membership; explicit memberships are revoked (ensure_role).
ROLE_ATTRIBUTES = "LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS INHERIT"

Connection = psycopg.Connection[Any]


def new_password() -> str:
    """256 random bits, in characters a pgpass line and a URL take as they are."""
    return secrets.token_urlsafe(32)


def _keys(password: str, salt: bytes, iterations: int) -> tuple[bytes, bytes]:
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    return hashlib.sha256(client_key).digest(), hmac.new(salted, b"Server Key", "sha256").digest()


def scram_verifier(password: str, salt: bytes | None = None, iterations: int = SCRAM_ITERATIONS) -> str:
    """What PostgreSQL stores for a scram-sha-256 password (RFC 5803 form)."""
    salt = salt if salt is not None else os.urandom(16)
    stored, server = _keys(password, salt, iterations)
    b64 = base64.b64encode
    return f"SCRAM-SHA-256${iterations}:{b64(salt).decode()}${b64(stored).decode()}:{b64(server).decode()}"


def verifies(verifier: str | None, password: str) -> bool:
    """Whether a stored verifier is the one of `password` (False for md5, none, or anything else)."""
    try:
        method, rest = (verifier or "").split("$", 1)
        head, keys = rest.split("$", 1)
        iterations, salt = head.split(":", 1)
        stored, server = (base64.b64decode(k) for k in keys.split(":", 1))
        rounds, salt_bytes = int(iterations), base64.b64decode(salt)
    except ValueError:
        return False
    if method != "SCRAM-SHA-256":
        return False
    want = _keys(password, salt_bytes, rounds)
    return hmac.compare_digest(want[0], stored) and hmac.compare_digest(want[1], server)


def admin_connect(conninfo: str, dbname: str | None = None) -> Connection:
    """An autocommit administrator's connection (CREATE DATABASE cannot run in a transaction)."""
    extra = {"dbname": dbname} if dbname else {}
    return psycopg.connect(conninfo, autocommit=True, connect_timeout=10, **extra)


def ensure_role(conn: Connection, name: str, password: str, connection_limit: int = -1) -> list[str]:
    """A login role with only ROLE_ATTRIBUTES, no memberships, and `password`; returns what was changed."""
    role = sql.Identifier(name)
    row = conn.execute(
        "SELECT rolsuper OR rolcreatedb OR rolcreaterole OR rolreplication OR rolbypassrls "
        "OR NOT rolinherit OR NOT rolcanlogin, rolconnlimit, rolpassword FROM pg_authid WHERE rolname = %s",
        (name,),
    ).fetchone()
    attributes = sql.SQL(f"{ROLE_ATTRIBUTES} CONNECTION LIMIT {int(connection_limit)}")
    verifier = sql.Literal(scram_verifier(password))
    changes: list[str] = []
    if row is None:
        conn.execute(sql.SQL("CREATE ROLE {} WITH {} PASSWORD {}").format(role, attributes, verifier))
        return [f"role {name} created"]
    extra_rights, limit, stored = row
    if extra_rights or limit != connection_limit:
        conn.execute(sql.SQL("ALTER ROLE {} WITH {}").format(role, attributes))
        changes.append(f"role {name}: attributes")
    if not verifies(stored, password):
        conn.execute(sql.SQL("ALTER ROLE {} WITH PASSWORD {}").format(role, verifier))
        changes.append(f"role {name}: password")
    granted = conn.execute(
        "SELECT g.rolname FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid "
        "JOIN pg_roles r ON r.oid = m.member WHERE r.rolname = %s",
        (name,),
    ).fetchall()
    for (group,) in granted:  # e.g. pg_read_all_data would open every database's tables
        conn.execute(sql.SQL("REVOKE {} FROM {}").format(sql.Identifier(group), role))
        changes.append(f"role {name}: no longer a member of {group}")
    return changes


def ensure_database(conn: Connection, name: str, owner: str) -> list[str]:
    """A database owned by `owner`, which only its owner (and superusers) may connect to."""
    row = conn.execute(
        "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = %s",
        (name,),
    ).fetchone()
    changes: list[str] = []
    if row is None:
        conn.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(sql.Identifier(name), sql.Identifier(owner)))
        changes.append(f"database {name} created")
    elif row[0] != owner:
        conn.execute(sql.SQL("ALTER DATABASE {} OWNER TO {}").format(sql.Identifier(name), sql.Identifier(owner)))
        changes.append(f"database {name}: owner {owner}")
    return changes + private(conn, name)


def private(conn: Connection, database: str) -> list[str]:
    """Take CONNECT and TEMPORARY on `database` from PUBLIC and from every role but its owner: PostgreSQL grants
    them to PUBLIC on every new database."""
    grantees = conn.execute(
        "SELECT DISTINCT CASE WHEN a.grantee = 0 THEN NULL ELSE pg_get_userbyid(a.grantee) END "
        "FROM pg_database d, aclexplode(coalesce(d.datacl, acldefault('d', d.datdba))) a "
        "WHERE d.datname = %s AND a.grantee <> d.datdba",
        (database,),
    ).fetchall()
    db = sql.Identifier(database)
    for (grantee,) in grantees:
        who = sql.SQL("PUBLIC") if grantee is None else sql.Identifier(grantee)
        conn.execute(sql.SQL("REVOKE ALL ON DATABASE {} FROM {}").format(db, who))
    return [f"database {database}: private to its owner"] if grantees else []


def private_all(conn: Connection) -> list[str]:
    """Every database one can connect to (`postgres` and `template1` too) private to its owner."""
    names = conn.execute("SELECT datname FROM pg_database WHERE datallowconn ORDER BY datname").fetchall()
    return [change for (name,) in names for change in private(conn, name)]


def adopt(conn: Connection, owner: str) -> list[str]:
    """Give `owner` the tables, views, sequences and types of the database `conn` is on that another role owns:
    a stack made before the platform roles existed created them as the superuser."""
    statements = conn.execute(
        """
        SELECT format('ALTER %%s %%s OWNER TO %%I',
                      CASE c.relkind WHEN 'S' THEN 'SEQUENCE' WHEN 'v' THEN 'VIEW'
                                     WHEN 'm' THEN 'MATERIALIZED VIEW' WHEN 'f' THEN 'FOREIGN TABLE'
                                     ELSE 'TABLE' END, c.oid::regclass, %s::text)
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%%'
          AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S') AND pg_get_userbyid(c.relowner) <> %s
          AND NOT EXISTS (SELECT 1 FROM pg_depend d  -- a column's sequence goes with its table
                          WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype IN ('a', 'i'))
        UNION ALL
        SELECT format('ALTER TYPE %%s OWNER TO %%I', t.oid::regtype, %s::text)
        FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
        WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%%'
          AND t.typtype IN ('e', 'd', 'r', 'm') AND pg_get_userbyid(t.typowner) <> %s
        """,
        (owner, owner, owner, owner),
    ).fetchall()
    for (statement,) in statements:
        conn.execute(statement)
    return [f"{len(statements)} object(s) now owned by {owner}"] if statements else []


def read_passfile(path: Path) -> str | None:
    """The password of a one-line pgpass file written by write_passfile; None if there is none."""
    try:
        line = path.read_text().strip()
    except FileNotFoundError:
        return None
    return line.rsplit(":", 1)[1] if line.count(":") == 4 else None


def write_passfile(path: Path, role: str, password: str) -> None:
    """libpq's password file (mode 0600, libpq ignores a looser one) for `role` on any host, port and database, so
    a URL names the file (`passfile=`) instead of carrying the password."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(f"*:*:*:{role}:{password}\n")
    os.replace(tmp, path)


def ensure_platform_role(conn: Connection, name: str, database: str, passfile: Path) -> list[str]:
    """A platform service's role (registry, Airflow): its password in `passfile` (made once), its database."""
    password = read_passfile(passfile)
    changes: list[str] = []
    if password is None:
        password = new_password()
        write_passfile(passfile, name, password)
        changes.append(f"{passfile.name} written")
    return changes + ensure_role(conn, name, password) + ensure_database(conn, database, name)
