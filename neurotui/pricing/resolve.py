"""Which price applies to this run, and the one line that tells the user where it came from.

Order: the user's --price-per-hour; else the instance type (user override, then what the caller
detected from neuron-ls/neuron-monitor, then IMDS) priced live (if asked and possible) or from
the table (user file over built-in). Whatever is missing or invalid gives `usd_per_hour=None`
and the reason in `note`: no price is better than a wrong one, because every samples-per-dollar
figure is derived from it. A table price is that of the instance's region only: a region the
table has no price for gives no price, with a note naming the region, never another region's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from neurotui import fmt
from neurotui.pricing import imds as _imds
from neurotui.pricing import live as _live
from neurotui.pricing.table import (
    REFERENCE_REGION,
    InvalidPriceError,
    PriceTable,
    PriceTableError,
    TablePrice,
    UnknownInstanceError,
    builtin_table,
    load_table,
    normalize_instance_type,
    parse_price,
)

SOURCE_OVERRIDE = "override"
SOURCE_BUILTIN = "builtin"
SOURCE_USER_FILE = "user-file"
SOURCE_NONE = "none"
_HOW_TO_FIX = "pass --price-per-hour"


@dataclass(frozen=True)
class PriceInfo:
    """The price of this run, where it came from, and `note`: the line shown to the user.

    `region` is the instance's region when known (override or IMDS); `price_region` is the
    region the figure is published for (None: stated by the user, or no price). They differ
    only when the instance's region is unknown and the note says whose price it is.
    """

    instance_type: str | None
    region: str | None
    usd_per_hour: float | None
    source: str
    as_of: str | None
    spot: bool
    note: str
    instance_source: str | None = None
    """Who named the instance type: "override", the caller's detector ("neuron-ls"), "imds"."""
    price_region: str | None = None

    @property
    def known(self) -> bool:
        return self.usd_per_hour is not None


def resolve_price(
    *,
    instance_type: str | None = None,
    price_per_hour: float | str | None = None,
    region: str | None = None,
    spot: bool = False,
    detected_instance_type: str | None = None,
    detected_by: str = "neuron-ls",
    use_imds: bool = True,
    imds: Callable[[], _imds.InstanceIdentity | None] | None = None,
    live: bool = False,
    live_on_demand: Callable[[str, str], _live.LivePrice] | None = None,
    live_spot: Callable[[str, str], _live.LivePrice] | None = None,
    price_file: str | Path | None = None,
    table: PriceTable | None = None,
) -> PriceInfo:
    """Resolve the price per hour for this run; never raises for bad input.

    instance_type, price_per_hour, region, spot: the user's overrides (CLI flags).
    detected_instance_type/detected_by: what the caller found locally (neuron-ls, ...).
    use_imds/imds: ask the EC2 metadata service when the type or region is still unknown
        (`imds` replaces the real lookup, for tests).
    live: try the AWS Pricing API / spot price history first (boto3, credentials);
        live_on_demand/live_spot replace those lookups (tests).
    price_file/table: the user price file (default: ~/.config/neurotui/prices.toml if it
        exists), or a ready table that replaces both.
    """
    warnings: list[str] = []
    itype, isource = None, None
    if instance_type is not None and str(instance_type).strip():
        itype = normalize_instance_type(instance_type)
        isource = SOURCE_OVERRIDE
        if itype is None:
            return _none(None, region, spot, f"no price: {instance_type!r} is not an EC2 "
                         "instance type name (like trn1.2xlarge)")
    elif detected_instance_type:
        itype = normalize_instance_type(detected_instance_type)
        isource = detected_by if itype else None

    price_override = price_per_hour
    if isinstance(price_override, str) and not price_override.strip():
        price_override = None
    need_imds = itype is None or (region is None and price_override is None)
    imds_state = "not asked"
    if need_imds and use_imds:
        identity = (imds or _imds.detect_instance)()
        if _imds.imds_disabled() and imds is None:
            imds_state = "disabled"
        elif identity is None:
            imds_state = "failed"
        else:
            imds_state = "ok"
            if itype is None:
                itype, isource = identity.instance_type, "imds"
            region = region or identity.region

    if price_override is not None:
        return _from_override(itype, isource, region, spot, price_override)

    if itype is None:
        why = {
            "failed": "not on EC2",
            "disabled": "AWS_EC2_METADATA_DISABLED is set",
            "not asked": "not detected",
        }[imds_state]
        return _none(None, region, spot, f"no price: instance type unknown ({why}; "
                     "pass --instance-type or --price-per-hour)")

    if table is None:
        try:
            table = load_table(price_file)
        except PriceTableError as exc:
            table = builtin_table()
            warnings.append(f"price file ignored: {exc}")

    if spot:
        return _spot(itype, isource, region, live, live_spot, warnings)

    if live:
        live_region = region or REFERENCE_REGION
        got = (live_on_demand or _live.on_demand_price)(itype, live_region)
        if got.usd_per_hour is not None:
            try:
                usd = parse_price(got.usd_per_hour)
            except InvalidPriceError as exc:
                warnings.append(f"live price refused: {exc}")
            else:
                shown = live_region if region else f"{live_region} (region unknown)"
                note = (f"{itype} {fmt.price(usd)}/h on-demand {shown} "
                        f"(AWS Pricing API, {got.as_of})")
                return PriceInfo(itype, region, usd, got.source, got.as_of, False,
                                 _with(note, warnings), isource, live_region)
        else:
            warnings.append(f"live price unavailable: {got.reason}")

    try:
        found = table.lookup_price(itype, region)
    except UnknownInstanceError as exc:
        return _none(itype, region, False, _with(f"no price: {exc}", warnings), isource)
    if found is None:
        note = _no_table_price(itype, region, table)
        return _none(itype, region, False, _with(note, warnings), isource)
    return _from_table(itype, isource, region, found, warnings)


def _no_table_price(itype: str, region: str | None, table: PriceTable) -> str:
    """Why the table gives no price, naming the region and the regions it does have."""
    priced = table.priced_regions(itype)
    origins = table.describe_origins()
    if not priced:
        where = f"for {region} in {origins}, nor for any other region" if region else \
            f"for any region in {origins}"
        return f"no price: {itype} has no on-demand price {where}; {_HOW_TO_FIX}"
    listed = ", ".join(priced)
    if region is None:
        return (f"no price: {itype}: region unknown and {origins} has no {REFERENCE_REGION} "
                f"price for it (priced for {listed}); pass --region or {_HOW_TO_FIX}")
    # Said outright: a figure for another region is not this region's price.
    return (f"no price: {itype} has no on-demand price for {region} in {origins}; it is "
            f"priced for {listed} only, and another region's price is never used for "
            f"{region}; {_HOW_TO_FIX}")


def _from_override(itype: str | None, isource: str | None, region: str | None, spot: bool,
                   value: float | str) -> PriceInfo:
    try:
        usd = parse_price(value)
    except InvalidPriceError as exc:
        return _none(itype, region, spot, f"no price: --price-per-hour {exc}", isource)
    what = itype or "instance"
    market = "spot" if spot else "on-demand"
    where = f" {region}" if region else ""
    note = f"{what} {fmt.price(usd)}/h {market}{where} (--price-per-hour)"
    return PriceInfo(itype, region, usd, SOURCE_OVERRIDE, None, spot, note, isource)


def _spot(itype: str, isource: str | None, region: str | None, live: bool,
          live_spot: Callable[[str, str], _live.LivePrice] | None,
          warnings: list[str]) -> PriceInfo:
    if not live:
        note = (f"no price: spot prices change hourly and are not in the table "
                f"({_HOW_TO_FIX}, or ask for the live spot price)")
        return _none(itype, region, True, _with(note, warnings), isource)
    if region is None:
        note = f"no price: the spot price needs the region (pass --region or {_HOW_TO_FIX})"
        return _none(itype, region, True, _with(note, warnings), isource)
    got = (live_spot or _live.spot_price)(itype, region)
    if got.usd_per_hour is None:
        note = f"no price: spot price unavailable: {got.reason} ({_HOW_TO_FIX})"
        return _none(itype, region, True, _with(note, warnings), isource)
    try:
        usd = parse_price(got.usd_per_hour)
    except InvalidPriceError as exc:
        note = f"no price: live spot price refused: {exc} ({_HOW_TO_FIX})"
        return _none(itype, region, True, _with(note, warnings), isource)
    detail = f"EC2 spot price history, {got.as_of}" + (f"; {got.reason}" if got.reason else "")
    note = f"{itype} {fmt.price(usd)}/h spot {region} ({detail})"
    return PriceInfo(itype, region, usd, got.source, got.as_of, True, _with(note, warnings),
                     isource, region)


def _from_table(itype: str, isource: str | None, region: str | None, found: TablePrice,
                warnings: list[str]) -> PriceInfo:
    if found.builtin:
        origin, source = "built-in table", SOURCE_BUILTIN
        # The built-in table cites a source per price; a user file is its own source.
        cite = f"; {found.source}"
    else:
        origin, source = f"price file {found.origin}", SOURCE_USER_FILE
        cite = ""
    detail = f"{origin}, as of {found.as_of}" if found.as_of else origin
    price = f"{itype} {fmt.price(found.usd_per_hour)}/h on-demand"
    if found.region is None:  # a user price for any region
        head = f"{price} {region}" if region else price
    else:  # lookup_price gives another region's price only when the region is unknown
        head = f"{price} {found.region}"
        if region is None:
            detail += f"; region unknown, this is the {found.region} price"
    note = _with(f"{head} ({detail}{cite})", warnings)
    return PriceInfo(itype, region, found.usd_per_hour, source, found.as_of, False, note,
                     isource, found.region)


def _none(itype: str | None, region: str | None, spot: bool, note: str,
          isource: str | None = None) -> PriceInfo:
    return PriceInfo(itype, region, None, SOURCE_NONE, None, spot, note, isource)


def _with(note: str, warnings: list[str]) -> str:
    return "; ".join([note, *warnings]) if warnings else note
