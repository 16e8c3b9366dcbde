"""Static argument values that real code passes, shared by the diagnosis tests."""

import dataclasses


@dataclasses.dataclass(frozen=True)
class Config:
    """A config dataclass whose repr runs past 60 characters before ``activation``."""

    name: str = "digits-mlp-baseline-experiment-2024"
    hidden: int = 32
    activation: str = "relu"


class ByIdentity:
    """Equal only to itself (no __eq__/__hash__): the classic retrace-per-call bug."""

    def __init__(self, n):
        self.n = n

    def __repr__(self):
        return f"ByIdentity(n={self.n})"
