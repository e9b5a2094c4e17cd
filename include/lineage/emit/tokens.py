"""Bearer tokens of ``lineage serve``: the file that holds them and the token provider the project's clients send.

The tokens live in ``var/secrets/lineage-tokens.json`` (mode 600, in a folder of mode 700), made by set-up and kept
while the file exists::

    {"tokens": [{"name": "writer", "scopes": ["write"], "token": "…"},
                {"name": "reader", "scopes": ["read"], "token": "…"}]}

A ``write`` token may post events (``POST /api/v1/lineage``, ``/batch``), a ``read`` token may ask the queries;
a token may hold both. Several tokens may be valid at once: to rotate one, add its successor (``lineage token add``),
move the clients to it, then remove the old one (``lineage token remove NAME``); ``lineage serve`` reads the file at
start.

Clients never carry a token in airflow.cfg's text nor in lineage: an openlineage-python ``http`` transport names
this module's :class:`LineageServeTokenProvider` as its ``auth`` and the provider finds the token, in order, in
``$LINEAGE_SERVE_TOKEN``, in the password of an Airflow connection (``"conn_id"`` in the auth configuration), or in
this ``var/``'s tokens file (the first token of the scope asked, ``write`` by default)::

    "auth": {"type": "include.lineage.emit.tokens.LineageServeTokenProvider", "conn_id": "lineage_serve"}
"""

from __future__ import annotations

import hmac
import json
import logging
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from openlineage.client.transport.http import TokenProvider

from include.core import settings
from include.core.errors import ConfigurationError
from include.core.private_file import write_private

log = logging.getLogger(__name__)

TOKENS_FILE_NAME = "lineage-tokens.json"
SCOPES = ("read", "write")


@dataclass(frozen=True)
class Token:
    name: str
    scopes: frozenset[str]
    value: str

    def __repr__(self) -> str:  # never print the secret
        return f"Token(name={self.name!r}, scopes={sorted(self.scopes)})"


def tokens_file(paths: settings.Paths | None = None) -> Path:
    return (paths or settings.Paths.current()).secrets / TOKENS_FILE_NAME


def _save(path: Path, tokens: list[Token]) -> None:
    document = {"tokens": [{"name": t.name, "scopes": sorted(t.scopes), "token": t.value} for t in tokens]}
    write_private(path, json.dumps(document, indent=2) + "\n")


def new_token(name: str, scopes) -> Token:
    scopes = frozenset(scopes)
    unknown = scopes - set(SCOPES)
    if not scopes or unknown:
        raise ConfigurationError(f"token {name!r}: scopes must be among {', '.join(SCOPES)} (got {sorted(scopes)})")
    return Token(name, scopes, secrets.token_urlsafe(32))


def ensure_tokens(path: Path | None = None) -> Path:
    """The tokens file, made with a ``writer`` and a ``reader`` token when missing; an existing one is kept."""
    path = path or tokens_file()
    if not path.exists():
        _save(path, [new_token("writer", ["write"]), new_token("reader", ["read"])])
    return path


def load_tokens(path: Path | None = None) -> list[Token]:
    """The tokens of the file; ConfigurationError (naming the file) when it cannot be used: missing, readable by
    others than its owner, not the shape above, or without any token."""
    path = path or tokens_file()
    try:
        mode = path.stat().st_mode
        text = path.read_text()
    except OSError as error:
        raise ConfigurationError(
            f"{path}: cannot read the tokens of lineage serve ({error.strerror}); `make setup` makes it"
        ) from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ConfigurationError(f"{path}: readable by others (mode {stat.S_IMODE(mode):o}); run chmod 600 on it")
    try:
        entries = json.loads(text)["tokens"]
        tokens = []
        for index, entry in enumerate(entries):
            value, name, scopes = entry["token"], entry.get("name", f"token {index}"), entry["scopes"]
            if not isinstance(value, str) or len(value) < 16:
                raise ValueError(f"token {index} ({name}) is shorter than 16 characters")
            if not isinstance(scopes, list) or not scopes or not set(scopes) <= set(SCOPES):
                raise ValueError(f"token {index} ({name}): scopes must be a list among {', '.join(SCOPES)}")
            tokens.append(Token(str(name), frozenset(scopes), value))
    except (ValueError, KeyError, TypeError) as error:
        raise ConfigurationError(
            f'{path}: not a tokens file ({{"tokens": [{{"name", "scopes", "token"}}]}}): {error}'
        ) from None
    if not tokens:
        raise ConfigurationError(f"{path}: holds no token; `lineage token add` adds one")
    return tokens


def add_token(name: str, scopes, path: Path | None = None) -> Token:
    """Add a token (rotation: the old ones stay valid until removed)."""
    path = ensure_tokens(path)
    tokens = load_tokens(path)
    if any(t.name == name for t in tokens):
        raise ConfigurationError(f"{path}: a token named {name!r} exists already")
    token = new_token(name, scopes)
    _save(path, [*tokens, token])
    return token


def remove_token(name: str, path: Path | None = None) -> None:
    path = path or tokens_file()
    tokens = load_tokens(path)
    kept = [t for t in tokens if t.name != name]
    if len(kept) == len(tokens):
        raise ConfigurationError(f"{path}: no token named {name!r} (there are: {', '.join(t.name for t in tokens)})")
    if not kept:
        raise ConfigurationError(f"{path}: {name!r} is the last token; add its successor first")
    _save(path, kept)


def match(tokens: list[Token], presented: str) -> Token | None:
    """The token whose value is ``presented``, compared in constant time against every token."""
    found = None
    for token in tokens:
        if hmac.compare_digest(token.value.encode(), presented.encode()):
            found = token
    return found


def client_token(scope: str = "write", conn_id: str | None = None, path: Path | None = None) -> str | None:
    """The token a client of ``lineage serve`` sends: ``$LINEAGE_SERVE_TOKEN``, else the password of the Airflow
    connection ``conn_id``, else the first token of ``scope`` in this ``var/``'s tokens file; None if none."""
    if settings.LINEAGE_SERVE_TOKEN.raw():
        return settings.LINEAGE_SERVE_TOKEN.raw()
    if conn_id:
        password = _connection_password(conn_id)
        if password:
            return password
    path = path or tokens_file()
    if path.exists():
        for token in load_tokens(path):
            if scope in token.scopes:
                return token.value
    return None


def _connection_password(conn_id: str) -> str | None:
    unread = "lineage serve token: Airflow connection %s could not be read; the next source's token is sent instead"
    try:
        from airflow.sdk import BaseHook
        from airflow.sdk.exceptions import AirflowNotFoundException
    except ImportError:  # no Airflow: the next source is asked
        return None
    except Exception:  # Airflow is there but would not import: the next source is asked, said here
        log.warning(unread, conn_id, exc_info=True)
        return None
    try:
        return BaseHook.get_connection(conn_id).password or None
    except AirflowNotFoundException:  # no such connection: the next source is asked
        return None
    except Exception:  # it could not be read: the next source is asked, whose token lineage serve may refuse (a 401)
        log.warning(unread, conn_id, exc_info=True)
        return None


class LineageServeTokenProvider(TokenProvider):
    """openlineage-python's ``auth`` of an ``http`` transport that sends ``lineage serve``'s bearer token, found as
    :func:`client_token` says, when each request is made (a rotated token is picked up without a restart)."""

    def __init__(self, config: dict) -> None:
        super().__init__(config)
        self.conn_id = config.get("conn_id") or config.get("connId")
        self.scope = config.get("scope", "write")

    def get_bearer(self) -> str | None:
        token = client_token(self.scope, self.conn_id)
        return f"Bearer {token}" if token else None
