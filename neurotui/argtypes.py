"""Argument types the commands share (argparse `type=`): a bad value is refused with a
message naming it, before anything runs."""

from __future__ import annotations

import argparse
import math


def positive_number(text: str) -> float:
    """A finite number above 0 (a batch, a factor, seconds)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError("must be a number above 0")
    return value
