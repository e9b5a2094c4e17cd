"""Secrets are written readable by their owner only, from the first byte, and swapped in whole."""

from __future__ import annotations

import stat

from include.core.private_file import write_private


def _mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_secret_file_is_mode_600_in_a_folder_of_mode_700_and_replaced_whole(tmp_path):
    target = tmp_path / "secrets" / "token.json"
    write_private(target, '{"token": "first"}')
    assert _mode(target) == 0o600 and _mode(target.parent) == 0o700
    stale = target.with_name(target.name + ".tmp")  # left by a crash, readable by everyone
    stale.write_text("stale")
    stale.chmod(0o644)
    write_private(target, '{"token": "second"}')
    assert target.read_text() == '{"token": "second"}' and _mode(target) == 0o600
    assert not stale.exists()
