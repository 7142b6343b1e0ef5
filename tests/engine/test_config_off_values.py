"""Off is None inside the configs; 0 means off only on the command line, where engine.flags turns it into None."""

import argparse

import pytest

from engine.config import EngineConfig
from engine.flags import add_engine_args, engine_config_from_args


def _parsed(*argv: str) -> EngineConfig:
    parser = argparse.ArgumentParser()
    add_engine_args(parser)
    return engine_config_from_args(parser.parse_args(argv))


def test_a_hybrid_threshold_of_0_is_refused_in_the_config_with_what_to_use_instead():
    with pytest.raises(ValueError, match=r"hybrid_threshold must be >= 1 \(or None for never\), got 0"):
        EngineConfig(hybrid_threshold=0)
    assert EngineConfig(hybrid_threshold=None).hybrid_threshold is None


def test_on_the_command_line_0_means_never_and_other_values_pass_through():
    assert _parsed("--hybrid-threshold", "0").hybrid_threshold is None
    assert _parsed("--hybrid-threshold", "5").hybrid_threshold == 5
    assert _parsed().hybrid_threshold == EngineConfig().hybrid_threshold == 3
    assert _parsed("--intra-op-threads", "0").intra_op_threads is None  # an "auto" field, the same rule
