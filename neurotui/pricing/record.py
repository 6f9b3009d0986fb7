"""How a resolved price is kept in a session's meta.json."""

from __future__ import annotations

from typing import Any

from neurotui.pricing.resolve import PriceInfo


def price_record(price: PriceInfo) -> dict[str, Any]:
    """meta.json's `price`: the figure (or null), where it came from and how old it is.

    `region` is the instance's region; `price_region` the region the figure is published for
    (null for a price the user stated, or no price)."""
    return {"usd_per_hour": price.usd_per_hour, "source": price.source, "as_of": price.as_of,
            "spot": price.spot, "region": price.region, "price_region": price.price_region,
            "note": price.note}


def instance_record(price: PriceInfo) -> dict[str, Any] | None:
    if price.instance_type is None:
        return None
    return {"type": price.instance_type, "source": price.instance_source, "region": price.region}
