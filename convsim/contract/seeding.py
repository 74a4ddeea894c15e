"""Stable seeds and independent random streams.

Seeds come from a blake2b hash of their parts (never Python's ``hash()``, which is
salted per process). A session's seed depends on the base seed, the session id and
the trial only, so every variant of an experiment sees the same seeds (paired design).
Each random purpose (``rng_for(seed, turn, "shift")``) gets its own stream, so a
draw for one purpose never shifts the draws of another.
"""
from __future__ import annotations

import hashlib
import random

import numpy as np


def stable_seed(*parts: object) -> int:
    """A 63-bit integer that depends only on ``repr`` of the parts."""
    digest = hashlib.blake2b(repr(parts).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") & ((1 << 63) - 1)


def session_seed(base_seed: int, session_id: str, trial: int = 0) -> int:
    """The seed of one session attempt; identical across variants (pairing)."""
    return stable_seed("session", int(base_seed), str(session_id), int(trial))


def rng_for(seed: int, *keys: object) -> random.Random:
    """A ``random.Random`` stream keyed by ``(seed, *keys)``, e.g. ``(seed, turn, "shift")``."""
    return random.Random(stable_seed("rng", int(seed), *keys))


def np_rng_for(seed: int, *keys: object) -> np.random.Generator:
    """A numpy ``Generator`` keyed like :func:`rng_for`."""
    return np.random.default_rng(stable_seed("np", int(seed), *keys))
