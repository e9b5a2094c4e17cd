"""``store/prepared.py``'s rewriting of a statement in psycopg2's parameter style into PREPARE's: each name a number
in the order first met (a name used twice one number), a doubled ``%`` one again. PostgreSQL's side (what it
prepares, refuses and keeps): tests/integration/test_prepared_statements_postgres.py."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from include.lineage.queries.sql import _pyformat
from include.lineage.store.prepared import positional

NAMES = st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True)
LITERALS = st.text(alphabet="ab ()=,'%$:1", max_size=6).filter(lambda text: ":" not in text)


@given(parts=st.lists(st.tuples(LITERALS, st.one_of(st.none(), NAMES)), max_size=8))
def test_each_parameter_is_numbered_in_the_order_first_met_and_a_doubled_percent_is_one(parts):
    pyformat = "".join(literal.replace("%", "%%") + (f"%({name})s" if name else "") for literal, name in parts)
    order = list(dict.fromkeys(name for _, name in parts if name))
    expected = "".join(literal + (f"${order.index(name) + 1}" if name else "") for literal, name in parts)
    assert positional(pyformat) == (expected, tuple(order))


def test_the_store_s_own_texts_keep_casts_and_literal_percents():
    text = "SELECT CAST(:run AS TEXT)::text, x LIKE '%' || :part, :run FROM t WHERE a = :part_2"
    assert positional(_pyformat(text)) == (
        "SELECT CAST($1 AS TEXT)::text, x LIKE '%' || $2, $1 FROM t WHERE a = $3",
        ("run", "part", "part_2"),
    )


def test_a_setting_other_than_on_or_off_is_refused_naming_it(monkeypatch):
    from sqlalchemy import create_engine

    from include.core.settings import SettingError
    from include.lineage.store import prepared

    monkeypatch.setenv("LINEAGE_STORE_PREPARE", "sometimes")
    engine = create_engine("postgresql+psycopg2://nobody@127.0.0.1:1/none")  # never connected
    try:
        with pytest.raises(SettingError, match="LINEAGE_STORE_PREPARE must be one of on, off, not 'sometimes'"):
            prepared.enable(engine)
    finally:
        engine.dispose()
