"""The price and spec table: built-in data (prices.toml) merged with an optional user file.

Prices are dated facts, so every price carries its region, source, date and the file it came
from, and a price for one region is never returned for another (`lookup_price`). A bad entry is
refused with a message naming the file and the entry, because a silently wrong price would
make every samples-per-dollar figure wrong. A broken user file never breaks the built-in table:
`builtin_table()` does not depend on it.

User file (same schema as prices.toml, every key optional except what an entry needs):

    [meta]                      # optional; defaults for the entries below
    region = "us-west-2"        # without it, a user price applies in any region
    source = "my invoice"
    as_of = "2026-08-01"

    [instances."trn1.2xlarge"]
    usd_per_hour = 1.21         # overrides the built-in price
    regions = { "eu-west-1" = 1.48, "eu-north-1" = { usd_per_hour = 1.3, as_of = 2026-08-02 } }

    [instances."x9.large"]      # a new type: specs and/or a price
    usd_per_hour = 2.0
    neuron_cores = 2
"""

from __future__ import annotations

import datetime as _dt
import difflib
import math
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

FORMAT_VERSION = 1
REFERENCE_REGION = "us-east-1"
"""The region whose price is shown, labelled as such, when the instance's region is unknown."""
MAX_USD_PER_HOUR = 1000.0
"""No single EC2 instance costs more; a larger number is a typo (per month? cents?)."""
BUILTIN_ORIGIN = "built-in table"

_INSTANCE_RE = re.compile(r"^[a-z0-9][a-z0-9-]*\.[a-z0-9-]+$")
_INT_SPECS = ("vcpus", "accelerators", "neuron_cores", "gpus")
_FLOAT_SPECS = ("ram_gib", "accel_memory_gib")
_STR_SPECS = ("accelerator", "neuron_core_version")
_PRICE_KEYS = ("usd_per_hour", "regions", "region", "source", "as_of")
_ENTRY_KEYS = frozenset(_INT_SPECS + _FLOAT_SPECS + _STR_SPECS + _PRICE_KEYS)
_META_KEYS = frozenset({"region", "currency", "as_of", "source"})
_TOP_KEYS = frozenset({"format", "meta", "sources", "instances"})
_SOURCE_KEYS = frozenset({"text", "as_of"})
_REGION_PRICE_KEYS = frozenset({"usd_per_hour", "source", "as_of"})


class InvalidPriceError(ValueError):
    """A price that must not be used: not a number, not positive, not finite, or absurd."""


class PriceTableError(ValueError):
    """A price file cannot be used: unreadable, malformed TOML, or a bad entry (named)."""


class UnknownInstanceError(LookupError):
    """The instance type is in no table; the message says which tables and what to do."""

    def __init__(self, instance_type: str, table: PriceTable) -> None:
        self.instance_type = instance_type
        close = difflib.get_close_matches(instance_type, table.instance_types(), n=3)
        hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        self.message = (
            f"unknown instance type {instance_type!r}: not in {table.describe_origins()}{hint}"
            f" (pass --price-per-hour, or add it to {default_user_price_file()})"
        )
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class InstanceSpec:
    """What an instance type offers; None where the table does not say (or it has none)."""

    instance_type: str
    vcpus: int | None = None
    ram_gib: float | None = None
    accelerator: str | None = None
    accelerators: int | None = None
    neuron_cores: int | None = None
    neuron_core_version: str | None = None
    gpus: int | None = None
    accel_memory_gib: float | None = None

    def updated_by(self, other: InstanceSpec) -> InstanceSpec:
        """This spec with every field that `other` states taken from `other`."""
        changes = {f.name: getattr(other, f.name) for f in fields(other)
                   if f.name != "instance_type" and getattr(other, f.name) is not None}
        return replace(self, **changes)


@dataclass(frozen=True)
class TablePrice:
    """One on-demand price with its provenance."""

    instance_type: str
    usd_per_hour: float
    region: str | None
    """None: a user price that applies in any region."""
    source: str
    as_of: str | None
    origin: str
    """BUILTIN_ORIGIN or the path of the user file."""

    @property
    def builtin(self) -> bool:
        return self.origin == BUILTIN_ORIGIN


@dataclass(frozen=True, eq=False)
class PriceTable:
    """Specs and prices by instance type; `prices` lists each type's prices best first."""

    specs: Mapping[str, InstanceSpec]
    prices: Mapping[str, tuple[TablePrice, ...]]
    origins: tuple[str, ...]
    """Where the data came from, highest priority first."""
    as_of: str | None = None
    """Date of the built-in data (or of the file, for a lone user file)."""

    def instance_types(self) -> list[str]:
        return sorted(set(self.specs) | set(self.prices))

    def __contains__(self, instance_type: object) -> bool:
        return instance_type in self.specs or instance_type in self.prices

    def describe_origins(self) -> str:
        parts = []
        for origin in self.origins:
            if origin == BUILTIN_ORIGIN:
                parts.append(f"the built-in table (as of {self.as_of})")
            else:
                parts.append(origin)
        return " or ".join(parts) if parts else "an empty table"

    def spec(self, instance_type: str) -> InstanceSpec:
        """The spec of a known type (empty if only a price is known); else UnknownInstanceError."""
        if instance_type not in self:
            raise UnknownInstanceError(instance_type, self)
        return self.specs.get(instance_type, InstanceSpec(instance_type))

    def lookup_price(self, instance_type: str, region: str | None) -> TablePrice | None:
        """The best price for `instance_type` in `region`, or None when the table has none.

        A known region gets a price for exactly that region or a user price stated for any
        region (the highest-priority file first), never another region's: None then, and the
        caller says the price is unknown for that region. An unknown region (None) gets a user
        price for any region, else the reference-region (us-east-1) price, which the caller
        must label as that region's. Raises UnknownInstanceError for a type in no table.
        """
        if instance_type not in self:
            raise UnknownInstanceError(instance_type, self)
        candidates = self.prices.get(instance_type, ())
        for origin in self.origins:
            mine = [p for p in candidates if p.origin == origin]
            for want in dict.fromkeys((region, None)):
                for price in mine:
                    if price.region == want:
                        return price
        if region is None:
            for price in candidates:
                if price.region == REFERENCE_REGION:
                    return price
        return None

    def priced_regions(self, instance_type: str) -> list[str]:
        """The regions with a price for `instance_type` in any of the tables, sorted."""
        return sorted({p.region for p in self.prices.get(instance_type, ()) if p.region})

    def merged(self, over: PriceTable) -> PriceTable:
        """This table overridden/extended by `over` (its prices and stated specs win)."""
        specs = dict(self.specs)
        for name, spec in over.specs.items():
            specs[name] = specs[name].updated_by(spec) if name in specs else spec
        prices = dict(self.prices)
        for name, entries in over.prices.items():
            prices[name] = tuple(entries) + prices.get(name, ())
        origins = tuple(o for o in over.origins if o not in self.origins) + self.origins
        return PriceTable(specs, prices, origins, self.as_of or over.as_of)


def normalize_instance_type(value: object) -> str | None:
    """'Trn1.2xlarge ' -> 'trn1.2xlarge'; None for anything that is not shaped like a type."""
    if not isinstance(value, str):
        return None
    name = value.strip().lower()
    return name if _INSTANCE_RE.match(name) else None


def parse_price(value: object, *, allow_str: bool = True) -> float:
    """A usable USD/h price from `value`, or InvalidPriceError saying why not.

    Strings (from the command line, "1.34" or "$1.34") are accepted unless `allow_str` is
    false (price files must hold TOML numbers).
    """
    if isinstance(value, bool) or value is None:
        raise InvalidPriceError(f"{value!r} is not a number")
    if isinstance(value, str):
        if not allow_str:
            raise InvalidPriceError(f"{value!r} is a string; write the number without quotes")
        text = value.strip().removeprefix("$").strip()
        try:
            number = float(text)
        except ValueError:
            raise InvalidPriceError(f"{value!r} is not a number") from None
    elif isinstance(value, int | float):
        number = float(value)
    else:
        raise InvalidPriceError(f"{value!r} is not a number")
    if not math.isfinite(number):
        raise InvalidPriceError(f"{value!r} is not a finite number")
    if number <= 0:
        raise InvalidPriceError(f"{value!r} must be greater than zero")
    if number > MAX_USD_PER_HOUR:
        raise InvalidPriceError(
            f"{value!r} is absurd for one instance (> {MAX_USD_PER_HOUR:g} USD/h; "
            "a monthly price, or cents?)")
    return number


def default_user_price_file() -> Path:
    """~/.config/neurotui/prices.toml (or under $XDG_CONFIG_HOME when that is set)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "neurotui" / "prices.toml"


@lru_cache(maxsize=1)
def builtin_table() -> PriceTable:
    """The table shipped with neurotui (prices.toml next to this module)."""
    text = resources.files("neurotui.pricing").joinpath("prices.toml").read_text("utf-8")
    return parse_price_text(text, BUILTIN_ORIGIN)


def load_price_file(path: str | Path) -> PriceTable:
    """One user price file on its own; PriceTableError (naming the file) when unusable."""
    path = Path(path).expanduser()
    try:
        text = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PriceTableError(f"{path}: cannot read price file: {exc}") from None
    return parse_price_text(text, str(path))


def load_table(price_file: str | Path | None = None, *, use_default: bool = True) -> PriceTable:
    """The built-in table merged with a user file.

    `price_file` given: it must exist and be valid. Otherwise the default user file is used
    when it exists (and `use_default`). Errors are PriceTableError; `builtin_table()` stays
    usable regardless.
    """
    table = builtin_table()
    if price_file is not None:
        return table.merged(load_price_file(price_file))
    default = default_user_price_file()
    if use_default and default.is_file():
        return table.merged(load_price_file(default))
    return table


def parse_price_text(text: str, origin: str) -> PriceTable:
    """Parse and validate price-file TOML; `origin` names the file in messages."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PriceTableError(f"{origin}: not valid TOML: {exc}") from None
    return _Parser(origin).parse(doc)


class _Parser:
    def __init__(self, origin: str) -> None:
        self.origin = origin
        self.builtin = origin == BUILTIN_ORIGIN
        self.sources: dict[str, tuple[str, str | None]] = {}

    def fail(self, where: str, why: str) -> PriceTableError:
        return PriceTableError(f"{self.origin}: {where}: {why}")

    def parse(self, doc: dict[str, Any]) -> PriceTable:
        unknown = sorted(set(doc) - _TOP_KEYS)
        if unknown:
            raise self.fail("top level", f"unknown key(s) {', '.join(unknown)} "
                            f"(expected {', '.join(sorted(_TOP_KEYS))})")
        fmt = doc.get("format", FORMAT_VERSION)
        if not isinstance(fmt, int) or isinstance(fmt, bool) or fmt > FORMAT_VERSION:
            raise self.fail("format", f"{fmt!r} is not a format this neurotui reads "
                            f"(it reads {FORMAT_VERSION})")
        meta = doc.get("meta", {})
        if not isinstance(meta, dict):
            raise self.fail("meta", "must be a table")
        unknown = sorted(set(meta) - _META_KEYS)
        if unknown:
            raise self.fail("meta", f"unknown key(s) {', '.join(unknown)}")
        if meta.get("currency", "USD") != "USD":
            raise self.fail("meta.currency", f"{meta['currency']!r}: only USD is supported")
        region = self.opt_str(meta, "region", "meta")
        source = self.opt_str(meta, "source", "meta") or (
            BUILTIN_ORIGIN if self.builtin else f"user price file {self.origin}")
        as_of = self.opt_date(meta, "as_of", "meta")
        self.sources = self.parse_sources(doc.get("sources", {}))

        instances = doc.get("instances", {})
        if not isinstance(instances, dict):
            raise self.fail("instances", "must be a table of [instances.\"<type>\"] entries")
        specs: dict[str, InstanceSpec] = {}
        prices: dict[str, tuple[TablePrice, ...]] = {}
        for raw_name, entry in instances.items():
            where = f'instances."{raw_name}"'
            name = normalize_instance_type(raw_name)
            if name is None:
                raise self.fail(where, "not an instance type name (like 'trn1.2xlarge')")
            if name in specs or name in prices:
                raise self.fail(where, "listed twice")
            if not isinstance(entry, dict):
                raise self.fail(where, "must be a table")
            unknown = sorted(set(entry) - _ENTRY_KEYS)
            if unknown:
                raise self.fail(where, f"unknown key(s) {', '.join(unknown)} "
                                f"(known: {', '.join(sorted(_ENTRY_KEYS))})")
            spec = self.spec(name, entry, where)
            if any(getattr(spec, f.name) is not None for f in fields(spec)[1:]):
                specs[name] = spec
            # Built-in prices inherit no source or date: each must state its own.
            found = self.prices(name, entry, where, region,
                                BUILTIN_ORIGIN if self.builtin else source,
                                None if self.builtin else as_of)
            if found:
                prices[name] = found
        return PriceTable(specs, prices, (self.origin,), as_of)

    def parse_sources(self, sources: object) -> dict[str, tuple[str, str | None]]:
        """[sources."<id>"] tables: id -> (text, as_of), for prices that cite them by id."""
        if not isinstance(sources, dict):
            raise self.fail("sources", 'must be a table of [sources."<id>"] entries')
        found: dict[str, tuple[str, str | None]] = {}
        for key, entry in sources.items():
            where = f'sources."{key}"'
            if not isinstance(entry, dict):
                raise self.fail(where, "must be a table")
            unknown = sorted(set(entry) - _SOURCE_KEYS)
            if unknown:
                raise self.fail(where, f"unknown key(s) {', '.join(unknown)} "
                                f"(known: {', '.join(sorted(_SOURCE_KEYS))})")
            text = self.opt_str(entry, "text", where)
            if text is None:
                raise self.fail(f"{where}.text", "missing: say what the source is and where")
            found[key] = (text, self.opt_date(entry, "as_of", where))
        return found

    def cited(self, value: str | None) -> tuple[str | None, str | None]:
        """A price's source: the text and date of a [sources] id, or free text (no date)."""
        if value is None:
            return None, None
        return self.sources.get(value, (value, None))

    def spec(self, name: str, entry: dict[str, Any], where: str) -> InstanceSpec:
        values: dict[str, Any] = {}
        for key in _INT_SPECS:
            if key in entry:
                v = entry[key]
                if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                    raise self.fail(f"{where}.{key}", f"{v!r} must be a whole number >= 0")
                values[key] = v
        for key in _FLOAT_SPECS:
            if key in entry:
                v = entry[key]
                if (not isinstance(v, int | float) or isinstance(v, bool)
                        or not math.isfinite(v) or v < 0):
                    raise self.fail(f"{where}.{key}", f"{v!r} must be a number >= 0")
                values[key] = float(v)
        for key in _STR_SPECS:
            values[key] = self.opt_str(entry, key, where)
        return InstanceSpec(name, **values)

    def prices(self, name: str, entry: dict[str, Any], where: str, region: str | None,
               source: str, as_of: str | None) -> tuple[TablePrice, ...]:
        region = self.opt_str(entry, "region", where) or region
        cited, cited_as_of = self.cited(self.opt_str(entry, "source", where))
        source = cited or source
        as_of = self.opt_date(entry, "as_of", where) or cited_as_of or as_of
        found: list[TablePrice] = []
        if "usd_per_hour" in entry:
            usd = self.price(entry["usd_per_hour"], f"{where}.usd_per_hour")
            found.append(self.checked(TablePrice(name, usd, region, source, as_of, self.origin),
                                      f"{where}.usd_per_hour"))
        others = entry.get("regions", {})
        if not isinstance(others, dict):
            raise self.fail(f"{where}.regions", 'must be a table like { "us-west-2" = 1.5 }')
        for other_region, value in others.items():
            at = f'{where}.regions."{other_region}"'
            if not isinstance(other_region, str) or not other_region.strip():
                raise self.fail(at, "must name a region")
            if isinstance(value, dict):
                unknown = sorted(set(value) - _REGION_PRICE_KEYS)
                if unknown:
                    raise self.fail(at, f"unknown key(s) {', '.join(unknown)} "
                                    f"(known: {', '.join(sorted(_REGION_PRICE_KEYS))})")
                if "usd_per_hour" not in value:
                    raise self.fail(at, "usd_per_hour missing")
                usd = self.price(value["usd_per_hour"], f"{at}.usd_per_hour")
                text, text_as_of = self.cited(self.opt_str(value, "source", at))
                price = TablePrice(name, usd, other_region.strip(), text or source,
                                   self.opt_date(value, "as_of", at) or text_as_of or as_of,
                                   self.origin)
            else:
                usd = self.price(value, at)
                price = TablePrice(name, usd, other_region.strip(), source, as_of, self.origin)
            found.append(self.checked(price, at))
        return tuple(found)

    def checked(self, price: TablePrice, where: str) -> TablePrice:
        """A built-in price must say where it holds, where it comes from and how old it is."""
        if self.builtin:
            missing = [k for k in ("region", "as_of") if getattr(price, k) is None]
            if price.source == BUILTIN_ORIGIN:
                missing.append("source")
            if missing:
                raise self.fail(where, f"a built-in price needs its {', '.join(missing)}")
        return price

    def price(self, value: object, where: str) -> float:
        try:
            return parse_price(value, allow_str=False)
        except InvalidPriceError as exc:
            raise self.fail(where, f"bad price: {exc}") from None

    def opt_str(self, table: dict[str, Any], key: str, where: str) -> str | None:
        v = table.get(key)
        if v is None:
            return None
        if not isinstance(v, str) or not v.strip():
            raise self.fail(f"{where}.{key}", f"{v!r} must be a non-empty string")
        return v.strip()

    def opt_date(self, table: dict[str, Any], key: str, where: str) -> str | None:
        v = table.get(key)
        if v is None:
            return None
        if isinstance(v, _dt.datetime):
            return v.date().isoformat()
        if isinstance(v, _dt.date):
            return v.isoformat()
        if isinstance(v, str) and v.strip():
            return v.strip()
        raise self.fail(f"{where}.{key}", f"{v!r} must be a date like 2026-07-20")
