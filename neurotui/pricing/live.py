"""Optional live prices from AWS (boto3): on-demand via the Pricing API, spot via EC2.

boto3 is an optional dependency (`neurotui[aws]`) and needs credentials, so every function
returns a LivePrice whose `usd_per_hour` is None with a `reason` instead of raising. A live
price is only used when it is unambiguous: entries that disagree give None, not a pick.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

PRICING_REGION = "us-east-1"
"""The Pricing API endpoint region (it serves prices for every region)."""
LINUX_SPOT_PRODUCT = "Linux/UNIX"


@dataclass(frozen=True)
class LivePrice:
    """A live price, or None with the reason it could not be had."""

    usd_per_hour: float | None
    source: str
    reason: str = ""
    as_of: str | None = None


def on_demand_filters(instance_type: str, region: str) -> list[dict[str, str]]:
    """The TERM_MATCH filters that select exactly one Linux on-demand shared-tenancy product."""
    wanted = {
        "instanceType": instance_type,
        "regionCode": region,
        "operatingSystem": "Linux",
        "tenancy": "Shared",
        "preInstalledSw": "NA",
        "capacitystatus": "Used",
        "marketoption": "OnDemand",
    }
    return [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in wanted.items()]


def extract_on_demand_usd(entry: str | Mapping[str, Any]) -> float | None:
    """The hourly USD price in one PriceList entry (JSON string or parsed), else None.

    Reads terms.OnDemand.*.priceDimensions.*.pricePerUnit.USD. Dimensions priced at zero are
    skipped; several different non-zero prices are ambiguous and give None.
    """
    try:
        doc = json.loads(entry) if isinstance(entry, str | bytes) else entry
        terms = doc["terms"]["OnDemand"]
        found: set[float] = set()
        for term in terms.values():
            for dim in term.get("priceDimensions", {}).values():
                unit = str(dim.get("unit", "Hrs")).lower()
                if unit not in ("hrs", "hr", "hour", "hours"):
                    continue
                usd = float(dim["pricePerUnit"]["USD"])
                if math.isfinite(usd) and usd > 0:
                    found.add(usd)
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
    return found.pop() if len(found) == 1 else None


def on_demand_price(instance_type: str, region: str, *, client: Any = None) -> LivePrice:
    """Live on-demand Linux price of `instance_type` in `region` (Pricing API)."""
    source = "aws-pricing-api"
    if client is None:
        client, reason = _client("pricing", PRICING_REGION)
        if client is None:
            return LivePrice(None, source, reason)
    try:
        response = client.get_products(
            ServiceCode="AmazonEC2",
            Filters=on_demand_filters(instance_type, region),
            FormatVersion="aws_v1",
            MaxResults=10,
        )
    except Exception as exc:
        return LivePrice(None, source, f"pricing API failed: {_why(exc)}")
    entries = response.get("PriceList", []) if isinstance(response, Mapping) else []
    prices = {p for p in (extract_on_demand_usd(e) for e in entries) if p is not None}
    if not prices:
        return LivePrice(None, source, f"pricing API has no on-demand Linux price for "
                         f"{instance_type} in {region}")
    if len(prices) > 1:
        listed = ", ".join(f"{p:g}" for p in sorted(prices))
        return LivePrice(None, source, f"pricing API prices disagree ({listed})")
    return LivePrice(prices.pop(), source, "", _today())


def spot_price(instance_type: str, region: str, *, availability_zone: str | None = None,
               client: Any = None) -> LivePrice:
    """Current Linux spot price (EC2 spot price history): of the given AZ, else the highest AZ.

    The highest is used without an AZ so that samples per dollar is never flattered.
    """
    source = "aws-spot-price-history"
    if client is None:
        client, reason = _client("ec2", region)
        if client is None:
            return LivePrice(None, source, reason)
    try:
        response = client.describe_spot_price_history(
            InstanceTypes=[instance_type],
            ProductDescriptions=[LINUX_SPOT_PRODUCT],
            StartTime=_dt.datetime.now(_dt.timezone.utc),
            MaxResults=100,
        )
    except Exception as exc:
        return LivePrice(None, source, f"spot price history failed: {_why(exc)}")
    history = response.get("SpotPriceHistory", []) if isinstance(response, Mapping) else []
    latest = latest_spot_by_zone(history)
    if availability_zone is not None:
        latest = {z: p for z, p in latest.items() if z == availability_zone}
    if not latest:
        where = availability_zone or region
        return LivePrice(None, source, f"no spot price for {instance_type} in {where}")
    zone = max(latest, key=lambda z: latest[z])
    reason = "" if len(latest) == 1 else f"highest of {len(latest)} zones ({zone})"
    return LivePrice(latest[zone], source, reason, _today())


def latest_spot_by_zone(history: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """The most recent usable SpotPrice per availability zone."""
    best: dict[str, tuple[Any, float]] = {}
    for item in history:
        try:
            zone = str(item["AvailabilityZone"])
            price = float(item["SpotPrice"])
            stamp = item.get("Timestamp")
        except (KeyError, TypeError, ValueError):
            continue
        if not (math.isfinite(price) and price > 0):
            continue
        key = stamp.isoformat() if hasattr(stamp, "isoformat") else str(stamp or "")
        if zone not in best or key > best[zone][0]:
            best[zone] = (key, price)
    return {zone: price for zone, (_, price) in best.items()}


def _client(service: str, region: str) -> tuple[Any, str]:
    """A boto3 client with short timeouts, or (None, reason)."""
    try:
        import boto3
        from botocore.config import Config
    except ImportError:
        return None, "boto3 is not installed (pip install 'neurotui[aws]')"
    try:
        session = boto3.session.Session()
        if session.get_credentials() is None:
            return None, "no AWS credentials"
        config = Config(connect_timeout=3, read_timeout=5, retries={"max_attempts": 1})
        return session.client(service, region_name=region, config=config), ""
    except Exception as exc:
        return None, f"cannot create the {service} client: {_why(exc)}"


def _why(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _today() -> str:
    return _dt.datetime.now(_dt.timezone.utc).date().isoformat()
