"""A run planned as the runner plans it, for benches that stream its sessions without the runner."""
from __future__ import annotations

import itertools

from convsim.config import config_from_dict
from convsim.running.plan import plan_run


def compiled_plan(config: dict, sessions: int):
    """``(plan, compiled graph, its first sessions units)`` of a one-variant run: the plan of
    ``config`` with its variant's graph compiled as the runner compiles it when there is no
    checkpointer, and the units the runner would run first."""
    plan = plan_run(config_from_dict(config))
    vp = next(iter(plan.variants.values()))
    vp.compiled = plan.module.build(vp.params).compile()
    return plan, vp.compiled, list(itertools.islice(plan.iter_units(), sessions))
