"""Secrets are written readable by their owner only, from the first byte, and swapped in whole."""

from __future__ import annotations

import json
import os
import stat

from include.core.private_file import kept_secrets, write_private


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


def test_kept_secrets_keeps_what_is_stored_makes_what_is_missing_and_writes_only_on_a_change(tmp_path):
    path = tmp_path / "secrets" / "service.json"
    first = kept_secrets(path, {"a": "made-a", "b": "made-b"}, "lost")
    assert first == {"a": "made-a", "b": "made-b"}
    assert _mode(path) == 0o600 and _mode(path.parent) == 0o700
    path.write_text(json.dumps({"a": "kept-a", "b": ""}))  # an empty secret is made again
    os.chmod(path, 0o600)
    assert kept_secrets(path, {"a": "new-a", "b": "new-b"}, "lost") == {"a": "kept-a", "b": "new-b"}
    written = path.stat().st_mtime_ns
    os.utime(path, ns=(written - 10**9, written - 10**9))
    assert kept_secrets(path, {"a": "other", "b": "other"}, "lost") == {"a": "kept-a", "b": "new-b"}
    assert path.stat().st_mtime_ns == written - 10**9, "nothing changed: the file is not written again"
