"""What-if prices for `neurotui compare`: the same measured runs, priced at another figure.

A comparison usually turns on a price other than the one a run was recorded with (spot,
another region, a negotiated rate). `reprice()` gives each session a copy of its meta.json
whose `price` is the what-if price, so every figure that follows from the price (samples per
dollar, all-in, an epoch's cost, relative) is worked out by the one definition in metrics,
as for a recorded price. What was measured (steps, times, samples) is never touched.

Which price, per session, first match wins:
1. `--price KEY=USD` where KEY is the session's name or its instance type (a run whose
   instance is unknown, like the shipped samples, is priced by its name);
2. `--spot`: the live spot price (EC2 spot price history, boto3 and credentials) in the
   region (--region, else the run's recorded region);
3. `--region R`: the price table's on-demand price for exactly that region (sourced, dated),
   never another region's: none there means no price, and the note says so;
4. the recorded price, unchanged.
Each choice carries a short `basis` (what the table shows beside the price) and a `note`
(where the figure came from and how old it is).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from neurotui import fmt
from neurotui.pricing import live as _live
from neurotui.pricing.table import (
    InvalidPriceError,
    PriceTable,
    UnknownInstanceError,
    builtin_table,
    normalize_instance_type,
    parse_price,
)

if TYPE_CHECKING:
    from neurotui.compare.load import LoadedSession

SOURCE_WHATIF = "what-if"


class WhatIfError(ValueError):
    """A --price the command cannot use; the message says which and why."""


@dataclass(frozen=True)
class WhatIf:
    """The what-if prices asked for on the command line."""

    prices: dict[str, float] = field(default_factory=dict)
    """--price KEY=USD: KEY an instance type (lower case) or a session name."""
    labels: dict[str, str] = field(default_factory=dict)
    """--price KEY=USD:LABEL: what that price is ("Savings Plan 1yr"), said beside it."""
    region: str | None = None
    spot: bool = False

    @property
    def asked(self) -> bool:
        return bool(self.prices) or self.region is not None or self.spot


@dataclass(frozen=True)
class PriceChoice:
    """The price a session's figures use, in meta.json's `price` shape, and why."""

    record: dict[str, Any]
    basis: str
    """Short, for a table cell: "--price spot", "on-demand eu-west-1 2026-11-27"."""
    note: str
    """The whole story: the figure, its source and date, and what was recorded."""
    whatif: bool
    """False: the recorded price, unchanged."""


def parse_price_args(values: Sequence[str]) -> dict[str, float]:
    """`--price trn1.2xlarge=1.1 --price sample-cpu-gloo=$0.34` -> {key: usd}; WhatIfError
    naming the argument when one is not KEY=USD_PER_HOUR[:LABEL] with a usable price."""
    return parse_price_plan(values)[0]


def parse_price_plan(values: Sequence[str]) -> tuple[dict[str, float], dict[str, str]]:
    """--price arguments -> ({key: usd}, {key: label}): `trn1.32xlarge=15.49:Capacity Block`
    names the price a Capacity Block's (a price the table has no source for is given so,
    with what it is)."""
    found: dict[str, float] = {}
    labels: dict[str, str] = {}
    for value in values:
        key, sep, usd = value.partition("=")
        usd, _, label = usd.partition(":")
        key = key.strip()
        if not sep or not key:
            raise WhatIfError(f"--price {value!r}: expected INSTANCE=USD_PER_HOUR "
                              "(or SESSION=USD_PER_HOUR), like trn1.2xlarge=1.34")
        try:
            price = parse_price(usd)
        except InvalidPriceError as exc:
            raise WhatIfError(f"--price {value!r}: {exc}") from None
        key = normalize_instance_type(key) or key
        found[key] = price
        if label.strip():
            labels[key] = label.strip()
    return found, labels


def unmatched_keys(plan: WhatIf, sessions: Sequence[LoadedSession]) -> list[str]:
    """--price keys that name no compared session and no compared run's instance type."""
    names = [_name(s) for s in sessions]
    types = {_instance_type(s) for s in sessions}
    return [key for key in plan.prices
            if key not in types and _named_session(key, names) is None]


def _name(session: LoadedSession) -> str:
    return str(session.meta.get("name") if session.job else session.name)


def _named_session(key: str, names: Sequence[str]) -> str | None:
    """The compared session a --price key names: its whole name, or a part of it that is
    in no other compared name (as sessions are named on the command line)."""
    if key in names:
        return key
    holding = [name for name in names if key in name]
    return holding[0] if len(holding) == 1 else None


def _given_prices(given: dict[str, Any], plan: WhatIf,
                  sessions: Sequence[LoadedSession]) -> dict[str, Any]:
    """Session name -> what --price gave for it by name (a price, or its label)."""
    names = [_name(s) for s in sessions]
    found: dict[str, Any] = {}
    for key, usd in given.items():
        named = _named_session(key, names)
        if named is not None and (named == key or named not in found):
            found[named] = usd
    return found


def reprice(sessions: Sequence[LoadedSession], plan: WhatIf, *,
            table: PriceTable | None = None,
            live_spot: Callable[[str, str], _live.LivePrice] | None = None,
            ) -> tuple[list[LoadedSession], list[PriceChoice]]:
    """Each session with its what-if price in a copy of its meta (the session itself is not
    changed), and the choice made for it, in order. `live_spot` replaces the live lookup."""
    table = table or builtin_table()
    by_name = _given_prices(plan.prices, plan, sessions)
    label_by_name = _given_prices(plan.labels, plan, sessions)
    out: list[LoadedSession] = []
    choices: list[PriceChoice] = []
    for session in sessions:
        choice = choose_price(session, plan, table=table, live_spot=live_spot,
                              given=by_name.get(_name(session)),
                              label=label_by_name.get(_name(session)))
        if choice.whatif:
            priced = copy.copy(session)  # shallow: the measured tables are shared, not copied
            priced.meta = {**session.meta, "price": choice.record}
            out.append(priced)
        else:
            out.append(session)
        choices.append(choice)
    return out, choices


def choose_price(session: LoadedSession, plan: WhatIf, *, table: PriceTable,
                 live_spot: Callable[[str, str], _live.LivePrice] | None = None,
                 given: float | None = None, label: str | None = None) -> PriceChoice:
    """The price for one session (the module's order); `given`: a --price for it by name,
    `label`: what that price is. Every price is an instance's: a job of N nodes (one
    instance each, as its recorded price sums them) costs N times it."""
    choice = _instance_price(session, plan, table=table, live_spot=live_spot, given=given,
                             label=label)
    nodes = len(session.parts) if session.job else 1
    usd = choice.record.get("usd_per_hour")
    if not choice.whatif or nodes <= 1 or usd is None:
        return choice
    total = usd * nodes
    note = f"{choice.note}; {nodes} nodes: {fmt.price(total)}/h together"
    return PriceChoice({**choice.record, "usd_per_hour": total, "note": note},
                       f"{choice.basis} x{nodes}", note, True)


def _instance_price(session: LoadedSession, plan: WhatIf, *, table: PriceTable,
                    live_spot: Callable[[str, str], _live.LivePrice] | None,
                    given: float | None, label: str | None) -> PriceChoice:
    recorded = dict(session.meta.get("price") or {})
    itype = _instance_type(session)
    region = (plan.region or (session.meta.get("instance") or {}).get("region")
              or recorded.get("region") or recorded.get("price_region"))
    was = _recorded_text(recorded)
    name = _name(session)
    if given is None and itype is not None:
        given, label = plan.prices.get(itype), plan.labels.get(itype)
    what = itype or "instance"
    market = "spot" if plan.spot else "on-demand"
    if given is not None:
        where = f" {plan.region}" if plan.region else ""
        kind = label or market
        note = f"{what} {fmt.price(given)}/h {kind}{where} (--price, what-if; {was})"
        basis = f"{label}, --price" if label else "--price spot" if plan.spot else "--price"
        return _whatif(given, "--price", None, plan.spot, plan.region, None, basis, note)
    if plan.spot:
        if itype is None:
            return _unknown(plan, "spot", f"no spot price: instance type unknown; pass --price "
                            f"{name}=USD_PER_HOUR ({was})")
        if region is None:
            return _unknown(plan, "spot", f"no spot price: {itype}'s region unknown; pass "
                            f"--region or --price {itype}=USD_PER_HOUR ({was})")
        got = (live_spot or _live.spot_price)(itype, region)
        try:
            usd = parse_price(got.usd_per_hour) if got.usd_per_hour is not None else None
        except InvalidPriceError as exc:
            usd, got = None, _live.LivePrice(None, got.source, f"refused: {exc}")
        if usd is None:
            return _unknown(plan, "spot", f"no spot price for {itype} in {region}: "
                            f"{got.reason or 'unavailable'}; pass --price {itype}=USD_PER_HOUR "
                            f"({was})")
        note = (f"{itype} {fmt.price(usd)}/h spot {region} (EC2 spot price history, "
                f"{got.as_of}; what-if; {was})")
        return _whatif(usd, got.source, got.as_of, True, region, region,
                       f"spot {region} {got.as_of}", note)
    if plan.region is not None:
        if itype is None:
            return _unknown(plan, f"on-demand {plan.region}",
                            f"no price in {plan.region}: instance type unknown; pass --price "
                            f"{name}=USD_PER_HOUR ({was})")
        try:
            found = table.lookup_price(itype, plan.region)
        except UnknownInstanceError as exc:
            return _unknown(plan, f"on-demand {plan.region}", f"no price: {exc} ({was})")
        if found is None:
            listed = ", ".join(table.priced_regions(itype)) or "no region"
            return _unknown(plan, f"on-demand {plan.region}",
                            f"no price: {itype} has no on-demand price for {plan.region} in "
                            f"{table.describe_origins()} (priced for {listed}; another "
                            f"region's is never used); pass --price {itype}=USD_PER_HOUR "
                            f"({was})")
        where = found.region or plan.region
        dated = f", as of {found.as_of}" if found.as_of else ""
        note = (f"{itype} {fmt.price(found.usd_per_hour)}/h on-demand {where} "
                f"({found.source}{dated}; what-if; {was})")
        return _whatif(found.usd_per_hour, "builtin" if found.builtin else "user-file",
                       found.as_of, False, plan.region, found.region,
                       f"on-demand {where} {found.as_of or ''}".strip(), note)
    return PriceChoice(recorded, _recorded_basis(recorded), _recorded_note(recorded), False)


def _whatif(usd: float, source: str, as_of: str | None, spot: bool, region: str | None,
            price_region: str | None, basis: str, note: str) -> PriceChoice:
    record = {"usd_per_hour": usd, "source": source, "as_of": as_of, "spot": spot,
              "region": region, "price_region": price_region, "note": note, "what_if": True}
    return PriceChoice(record, basis, note, True)


def _unknown(plan: WhatIf, basis: str, note: str) -> PriceChoice:
    """No what-if price could be had: the figures become unknown, never the recorded price
    passed off as the one asked for."""
    record = {"usd_per_hour": None, "source": "none", "as_of": None, "spot": plan.spot,
              "region": plan.region, "price_region": None, "note": note, "what_if": True}
    return PriceChoice(record, f"{basis}: none", note, True)


def _instance_type(session: LoadedSession) -> str | None:
    return normalize_instance_type((session.meta.get("instance") or {}).get("type"))


def _recorded_text(recorded: dict[str, Any]) -> str:
    usd = recorded.get("usd_per_hour")
    return f"recorded {fmt.price(usd)}/h" if fmt.known(usd) else "recorded: no price"


def _recorded_basis(recorded: dict[str, Any]) -> str:
    """A recorded price in a few words: its market, region and date."""
    if not fmt.known(recorded.get("usd_per_hour")):
        return "no price"
    source = recorded.get("source")
    market = "spot" if recorded.get("spot") else "on-demand"
    if source == "override":
        return f"{market} --price-per-hour"
    where = recorded.get("price_region") or recorded.get("region") or ""
    return " ".join(x for x in ("recorded", market, where, recorded.get("as_of") or "") if x)


def _recorded_note(recorded: dict[str, Any]) -> str:
    note = recorded.get("note")
    if isinstance(note, str) and note:
        return f"recorded: {note}"
    return "recorded: no price" if not fmt.known(recorded.get("usd_per_hour")) else \
        f"recorded {fmt.price(recorded['usd_per_hour'])}/h"
