"""Controllers by name."""

from __future__ import annotations

from engine.config import ControllerConfig
from engine.controllers.base import DraftLengthController
from engine.controllers.cost import CostController
from engine.controllers.feedback import FeedbackController, FixedController
from engine.controllers.goodput import GoodputController
from engine.profiling.cost_profile import CostProfile


def make_controller(config: ControllerConfig, profile: CostProfile | None = None) -> DraftLengthController:
    """The controller ``config.kind`` names; ``cost`` needs the machine's step cost ``profile``."""
    if config.kind == "cost":
        if profile is None:
            raise ValueError("the cost controller needs a step cost profile")
        return CostController(config, profile)
    kinds = {"fixed": FixedController, "feedback": FeedbackController, "goodput": GoodputController}
    return kinds[config.kind](config)
