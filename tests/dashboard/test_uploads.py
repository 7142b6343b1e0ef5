"""An uploaded ShareGPT file is stored whole or not at all, and a storage failure is one clear message."""

from __future__ import annotations

import json

from dashboard.uploads import save_and_check

GOOD = json.dumps([{"id": "a", "conversations": [{"from": "human", "value": "hello there"}]}]).encode()


def test_a_good_upload_is_stored_once_under_its_content_hash(tmp_path):
    check = save_and_check(GOOD, "good.json", tmp_path)
    assert check.error is None and check.usable == 1
    assert check.path.read_bytes() == GOOD
    assert [p.name for p in tmp_path.iterdir()] == [check.path.name]  # no temporary file left behind
    check.path.unlink()  # the temporary directory was cleaned meanwhile
    again = save_and_check(GOOD, "good.json", tmp_path)
    assert again.path == check.path and again.path.read_bytes() == GOOD


def test_a_place_where_the_upload_cannot_be_stored_is_one_message(tmp_path):
    blocked = tmp_path / "uploads"
    blocked.write_text("a file where the directory should be")
    check = save_and_check(GOOD, "good.json", blocked)
    assert check.path is None and check.usable == 0
    assert check.error.startswith("good.json could not be stored in")
