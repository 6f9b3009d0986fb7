"""Prices and specs of EC2 instances, and which price applies to a run.

- table:   the built-in table (prices.toml, us-east-1, dated) merged with a user price file
- imds:    which instance are we on (IMDSv2, fails fast and quietly off EC2)
- live:    optional live on-demand/spot prices via boto3
- resolve: `resolve_price(...)` -> `PriceInfo`, the price of this run and its one-line note
- peaks:   `peak_flops(core_version, dtype, lnc=...)` -> `PeakFlops` (core_peaks.toml, dated and
           sourced) and `flops_utilization(measured, peak)`
"""

from __future__ import annotations

from neurotui.pricing.imds import InstanceIdentity, detect_instance
from neurotui.pricing.peaks import PeakFlops, flops_utilization, peak_flops
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
    "PeakFlops",
    "PriceInfo",
    "PriceTable",
    "PriceTableError",
    "TablePrice",
    "UnknownInstanceError",
    "builtin_table",
    "default_user_price_file",
    "detect_instance",
    "flops_utilization",
    "load_price_file",
    "load_table",
    "normalize_instance_type",
    "parse_price",
    "peak_flops",
    "resolve_price",
]
