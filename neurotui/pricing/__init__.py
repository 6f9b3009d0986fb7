"""Prices and specs of EC2 instances, and which price applies to a run.

- table:   the built-in table (prices.toml, us-east-1, dated) merged with a user price file
- imds:    which instance are we on (IMDSv2, fails fast and quietly off EC2)
- live:    optional live on-demand/spot prices via boto3
- resolve: `resolve_price(...)` -> `PriceInfo`, the price of this run and its one-line note
"""

from __future__ import annotations

from neurotui.pricing.imds import InstanceIdentity, detect_instance
from neurotui.pricing.resolve import PriceInfo, resolve_price
from neurotui.pricing.table import (
    REFERENCE_REGION,
    InstanceSpec,
    InvalidPriceError,
    PriceTable,
    PriceTableError,
    TablePrice,
    UnknownInstanceError,
    builtin_table,
    default_user_price_file,
    load_price_file,
    load_table,
    normalize_instance_type,
    parse_price,
)

__all__ = [
    "REFERENCE_REGION",
    "InstanceIdentity",
    "InstanceSpec",
    "InvalidPriceError",
    "PriceInfo",
    "PriceTable",
    "PriceTableError",
    "TablePrice",
    "UnknownInstanceError",
    "builtin_table",
    "default_user_price_file",
    "detect_instance",
    "load_price_file",
    "load_table",
    "normalize_instance_type",
    "parse_price",
    "resolve_price",
]
