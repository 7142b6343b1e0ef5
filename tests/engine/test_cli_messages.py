"""``python -m engine`` answers bad input with one line that names the flag the user typed."""

from __future__ import annotations

import pytest

from engine.__main__ import main


def test_an_unknown_engine_is_one_line(capsys):
    with pytest.raises(SystemExit) as ended:
        main(["generate", "--engine", "foo", "--prompt", "hi"])
    assert ended.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "--engine" in lines[0] and "'foo'" in lines[0]


@pytest.mark.parametrize(
    "flags, named",
    [
        (("--max-new-tokens", "0"), "--max-new-tokens must be >= 1"),
        (("--top-p", "2"), "--top-p must be in (0, 1]"),
        (("--max-batch-size", "0"), "--max-batch-size must be >= 1"),
    ],
)
def test_a_refused_value_names_its_flag_not_the_field(capsys, flags, named):
    assert main(["generate", "--preset", "tiny", "--prompt", "hi", *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and len(err.splitlines()) == 1 and named in err
    assert "max_new_tokens" not in err and "max_batch_size" not in err and "top_p" not in err
