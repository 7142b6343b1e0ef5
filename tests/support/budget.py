"""The KV budget's use, read where it peaks: right after each reservation (polling can miss the peak)."""

from __future__ import annotations


def record_budget_use(engine) -> list[int]:
    """Wrap ``engine.budget.try_reserve`` to append the budget's use after every reservation; returns the list.

    Mutates ``engine.budget`` (its ``try_reserve``).
    """
    held: list[int] = []
    reserve = engine.budget.try_reserve

    def reserving(tokens: int) -> bool:
        granted = reserve(tokens)
        held.append(engine.budget.used)
        return granted

    engine.budget.try_reserve = reserving
    return held
