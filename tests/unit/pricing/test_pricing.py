"""The price table, user price files, live-price parsing and resolve_price()."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from neurotui import fmt
from neurotui.pricing import live
from neurotui.pricing.imds import InstanceIdentity
from neurotui.pricing.live import LivePrice
from neurotui.pricing.record import price_record
from neurotui.pricing.resolve import PriceInfo, resolve_price
from neurotui.pricing.table import (
    BUILTIN_ORIGIN,
    InvalidPriceError,
    PriceTableError,
    UnknownInstanceError,
    builtin_table,
    default_user_price_file,
    load_price_file,
    load_table,
    normalize_instance_type,
    parse_price,
    parse_price_text,
)

# pricing.md, us-east-1 on-demand, 2026-07-20
EXPECTED_PRICES = {
    "trn1.2xlarge": 1.34375, "trn1.32xlarge": 21.50, "trn1n.32xlarge": 24.78,
    "inf1.xlarge": 0.228, "inf1.2xlarge": 0.362, "inf1.6xlarge": 1.18, "inf1.24xlarge": 4.721,
    "inf2.xlarge": 0.7582, "inf2.8xlarge": 1.96786, "inf2.24xlarge": 6.49063,
    "inf2.48xlarge": 12.98127, "p4d.24xlarge": 21.957642, "p5.48xlarge": 55.04,
    "g5.xlarge": 1.006, "g5.12xlarge": 5.672, "g6.xlarge": 0.8048, "p3.2xlarge": 3.06,
}
# SkyPilot's AWS catalog (catalogs/v8/aws/vms.csv @00148f2a), read 2026-11-27: other regions
OTHER_REGIONS = {
    ("trn1.2xlarge", "us-west-2"): 1.34375, ("trn1.32xlarge", "us-east-2"): 21.5,
    ("trn1n.32xlarge", "us-west-2"): 24.78, ("inf2.xlarge", "eu-west-1"): 0.94775,
    ("inf2.8xlarge", "eu-central-1"): 2.95179, ("inf2.24xlarge", "ap-northeast-1"): 9.73595,
    ("inf2.48xlarge", "eu-west-1"): 16.22658,
}
NO_IMDS = {"use_imds": False}


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No real ~/.config price file and no metadata lookups leak into these tests."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def write(tmp_path: Path, text: str, name: str = "prices.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# -- the built-in table ----------------------------------------------------------------------

def test_builtin_prices_match_the_reference() -> None:
    table = builtin_table()
    for name, usd in EXPECTED_PRICES.items():
        price = table.lookup_price(name, "us-east-1")
        assert price is not None and price.usd_per_hour == usd, name
        assert price.region == "us-east-1" and price.as_of == "2026-07-20"
        assert price.builtin and "Karpenter" in price.source
    assert table.as_of == "2026-11-27"


def test_builtin_prices_in_other_regions_carry_their_own_source_and_date() -> None:
    table = builtin_table()
    for (name, region), usd in OTHER_REGIONS.items():
        price = table.lookup_price(name, region)
        assert price is not None and (price.usd_per_hour, price.region) == (usd, region)
        assert "SkyPilot" in price.source and "00148f2a" in price.source
        assert price.as_of == "2026-11-27"


def test_every_builtin_price_has_region_source_and_date() -> None:
    table = builtin_table()
    prices = [p for entries in table.prices.values() for p in entries]
    assert len(prices) == 43
    for price in prices:
        assert price.region and price.as_of and price.source != BUILTIN_ORIGIN, price
        assert "AWS Pricing API" in price.source


def test_a_region_without_a_price_gets_none_never_us_east_1s() -> None:
    table = builtin_table()
    assert table.lookup_price("inf2.xlarge", "sa-east-1") is None
    assert table.lookup_price("p5.48xlarge", "us-west-2") is None  # us-east-1 only
    assert table.priced_regions("p5.48xlarge") == ["us-east-1"]
    assert table.priced_regions("inf2.xlarge") == [
        "ap-northeast-1", "eu-central-1", "eu-west-1", "us-east-1", "us-east-2", "us-west-2"]
    # the region unknown: the us-east-1 figure, which the caller labels as such
    assert table.lookup_price("inf2.xlarge", None).region == "us-east-1"


def test_a_builtin_price_without_source_or_date_is_refused() -> None:
    with pytest.raises(PriceTableError, match="needs its as_of"):
        parse_price_text('[instances."x9.large"]\nregions = { "us-east-1" = '
                         '{ usd_per_hour = 1.0, source = "somewhere" } }\n', BUILTIN_ORIGIN)
    with pytest.raises(PriceTableError, match="needs its region"):
        parse_price_text('[instances."x9.large"]\nusd_per_hour = 1.0\nsource = "s"\n'
                         'as_of = 2026-01-01\n', BUILTIN_ORIGIN)
    with pytest.raises(PriceTableError, match="needs its source"):
        parse_price_text('[instances."x9.large"]\nregions = { "us-east-1" = '
                         '{ usd_per_hour = 1.0, as_of = 2026-01-01 } }\n', BUILTIN_ORIGIN)
    # the table's own date and description are not a price's: they are not inherited
    with pytest.raises(PriceTableError, match="needs its as_of, source"):
        parse_price_text('[meta]\nas_of = 2026-11-27\nsource = "the table"\n'
                         '[instances."x9.large"]\nregions = { "us-east-1" = 1.0 }\n',
                         BUILTIN_ORIGIN)


def test_trn2_has_specs_but_no_invented_price() -> None:
    table = builtin_table()
    assert "trn2.48xlarge" in table
    assert table.lookup_price("trn2.48xlarge", "us-east-1") is None
    assert table.lookup_price("trn2.48xlarge", "us-east-2") is None
    spec = table.spec("trn2.48xlarge")
    assert (spec.vcpus, spec.ram_gib, spec.accelerator, spec.accelerators) == (
        192, 2048, "Trainium2", 16)
    assert (spec.neuron_cores, spec.gpus, spec.accel_memory_gib) == (128, None, 1536)


def test_specs_neuron_vs_gpu() -> None:
    table = builtin_table()
    for name in table.instance_types():
        spec = table.spec(name)
        assert spec.vcpus and spec.ram_gib and spec.accelerator and spec.accelerators
        assert spec.accel_memory_gib
        if name.startswith(("trn", "inf")):
            assert spec.neuron_cores and spec.gpus is None, name
        else:
            assert spec.gpus == spec.accelerators and spec.neuron_cores is None, name
    assert table.spec("trn1.2xlarge").neuron_cores == 2
    assert table.spec("inf2.48xlarge").neuron_cores == 24
    assert table.spec("p4d.24xlarge").accel_memory_gib == 320


def test_unknown_instance_message_suggests_close_names() -> None:
    with pytest.raises(UnknownInstanceError) as err:
        builtin_table().lookup_price("trn1.2xlarg", "us-east-1")
    message = str(err.value)
    assert "unknown instance type 'trn1.2xlarg'" in message
    assert "did you mean 'trn1.2xlarge'" in message
    assert "built-in table (as of 2026-11-27)" in message
    assert "--price-per-hour" in message


def test_normalize_instance_type() -> None:
    assert normalize_instance_type(" Trn1.2XLarge ") == "trn1.2xlarge"
    assert normalize_instance_type("trn1") is None
    assert normalize_instance_type("<html>") is None
    assert normalize_instance_type(None) is None


# -- price validation ------------------------------------------------------------------------

@pytest.mark.parametrize("value, expected", [
    (1.34375, 1.34375), (2, 2.0), ("0.7582", 0.7582), (" $21.50 ", 21.5), (1000, 1000.0)])
def test_parse_price_accepts(value: object, expected: float) -> None:
    assert parse_price(value) == expected


@pytest.mark.parametrize("value, why", [
    (-1.0, "greater than zero"), (0, "greater than zero"), (1000.01, "absurd"),
    (5000, "absurd"), ("abc", "not a number"), (None, "not a number"), (True, "not a number"),
    (math.nan, "finite"), (math.inf, "finite"), ("nan", "finite"), ([1.0], "not a number")])
def test_parse_price_refuses(value: object, why: str) -> None:
    with pytest.raises(InvalidPriceError, match=why):
        parse_price(value)


# -- user price files ----------------------------------------------------------------------

def test_user_file_overrides_and_extends(tmp_path: Path) -> None:
    path = write(tmp_path, """
[meta]
source = "our invoice"
as_of = 2026-08-01

[instances."trn1.2xlarge"]
usd_per_hour = 1.2
regions = { "eu-west-1" = 1.48 }

[instances."x9.large"]
usd_per_hour = 2.5
neuron_cores = 4
""")
    table = load_table(path)
    mine = table.lookup_price("trn1.2xlarge", "us-east-1")
    assert (mine.usd_per_hour, mine.origin, mine.as_of, mine.source) == (
        1.2, str(path), "2026-08-01", "our invoice")
    assert table.lookup_price("trn1.2xlarge", "eu-west-1").usd_per_hour == 1.48
    assert table.lookup_price("x9.large", None).usd_per_hour == 2.5
    assert table.spec("x9.large").neuron_cores == 4
    assert table.spec("trn1.2xlarge").vcpus == 8  # built-in specs kept
    assert table.lookup_price("inf2.xlarge", "us-east-1").usd_per_hour == 0.7582
    assert builtin_table().lookup_price("trn1.2xlarge", None).usd_per_hour == 1.34375


def test_user_file_regional_prices_cite_sources(tmp_path: Path) -> None:
    path = write(tmp_path, """
[sources.invoice]
text = "our August invoice"
as_of = 2026-08-31

[instances."trn1.2xlarge"]
regions."eu-north-1" = { usd_per_hour = 1.3, source = "invoice" }
regions."eu-west-1" = { usd_per_hour = 1.4, source = "a quote", as_of = 2026-09-02 }
""")
    table = load_table(path)
    north = table.lookup_price("trn1.2xlarge", "eu-north-1")
    assert (north.usd_per_hour, north.source, north.as_of) == (
        1.3, "our August invoice", "2026-08-31")
    west = table.lookup_price("trn1.2xlarge", "eu-west-1")
    assert (west.usd_per_hour, west.source, west.as_of) == (1.4, "a quote", "2026-09-02")
    # the user's regions add to the built-in ones; a third region stays unpriced
    assert table.lookup_price("trn1.2xlarge", "us-west-2").builtin
    assert table.lookup_price("trn1.2xlarge", "eu-south-1") is None


def test_user_file_region_scoped_price(tmp_path: Path) -> None:
    path = write(tmp_path, """
[meta]
region = "us-west-2"
[instances."trn1.2xlarge"]
usd_per_hour = 1.5
""")
    table = load_table(path)
    assert table.lookup_price("trn1.2xlarge", "us-west-2").usd_per_hour == 1.5
    east = table.lookup_price("trn1.2xlarge", "us-east-1")
    assert east.usd_per_hour == 1.34375 and east.builtin


def test_default_user_file_is_used_when_present(tmp_path: Path) -> None:
    default = default_user_price_file()
    assert default == tmp_path / "config" / "neurotui" / "prices.toml"
    assert load_table().lookup_price("trn1.2xlarge", None).builtin
    default.parent.mkdir(parents=True)
    default.write_text('[instances."trn1.2xlarge"]\nusd_per_hour = 1.1\n')
    assert load_table().lookup_price("trn1.2xlarge", None).usd_per_hour == 1.1
    assert load_table(use_default=False).lookup_price("trn1.2xlarge", None).builtin


@pytest.mark.parametrize("text, expected", [
    ('[instances."trn1.2xlarge"\nusd_per_hour = 1', "not valid TOML"),
    ('[instances."trn1.2xlarge"]\nusd_per_hour = -1.0\n',
     'instances."trn1.2xlarge".usd_per_hour: bad price: -1.0 must be greater than zero'),
    ('[instances."trn1.2xlarge"]\nusd_per_hour = 0\n', "must be greater than zero"),
    ('[instances."trn1.2xlarge"]\nusd_per_hour = 1343.75\n',
     'instances."trn1.2xlarge".usd_per_hour: bad price: 1343.75 is absurd'),
    ('[instances."trn1.2xlarge"]\nusd_per_hour = "1.34"\n', "is a string"),
    ('[instances."trn1.2xlarge"]\nusd_per_hour = nan\n', "not a finite number"),
    ('[instances."trn1.2xlarge"]\nusd_per_hr = 1.3\n', "unknown key(s) usd_per_hr"),
    ('[instances."trn1.2xlarge"]\nregions = { "eu-west-1" = -2 }\n',
     'regions."eu-west-1": bad price'),
    ('[instances."trn1.2xlarge"]\nregions = { "eu-west-1" = { source = "x" } }\n',
     'regions."eu-west-1": usd_per_hour missing'),
    ('[instances."trn1.2xlarge"]\nregions = { "eu-west-1" = { usd_per_hour = 1, usd = 2 } }\n',
     'regions."eu-west-1": unknown key(s) usd'),
    ('[sources.x]\nas_of = 2026-01-01\n', 'sources."x".text: missing'),
    ('[instances."trn1.2xlarge"]\nvcpus = -8\n', "whole number"),
    ('[instances."not a type"]\nusd_per_hour = 1\n', "not an instance type name"),
    ('[meta]\ncurrency = "EUR"\n', "only USD"),
    ("format = 2\n", "not a format this neurotui reads"),
    ("prices = 1\n", "unknown key(s) prices"),
])
def test_bad_price_files_name_file_and_entry(tmp_path: Path, text: str, expected: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(PriceTableError) as err:
        load_table(path)
    message = str(err.value)
    assert message.startswith(f"{path}: ")
    assert expected in message
    # the built-in table is still usable afterwards
    assert builtin_table().lookup_price("trn1.2xlarge", "us-east-1").usd_per_hour == 1.34375


def test_missing_explicit_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(PriceTableError, match="cannot read price file"):
        load_price_file(tmp_path / "nope.toml")


# -- resolve_price -------------------------------------------------------------------------

def test_resolve_from_builtin_table() -> None:
    info = resolve_price(instance_type="trn1.2xlarge", region="us-east-1", **NO_IMDS)
    source = builtin_table().lookup_price("trn1.2xlarge", "us-east-1").source
    assert info == PriceInfo("trn1.2xlarge", "us-east-1", 1.34375, "builtin", "2026-07-20",
                             False, "trn1.2xlarge $1.34375/h on-demand us-east-1 "
                             f"(built-in table, as of 2026-07-20; {source})", "override",
                             "us-east-1")
    assert info.known


def test_resolve_a_priced_region_gives_its_own_figure_source_and_date() -> None:
    info = resolve_price(instance_type="inf2.xlarge", region="eu-west-1", **NO_IMDS)
    assert (info.usd_per_hour, info.region, info.price_region) == (0.94775, "eu-west-1",
                                                                   "eu-west-1")
    assert info.as_of == "2026-11-27" and info.source == "builtin"
    assert info.note.startswith("inf2.xlarge $0.94775/h on-demand eu-west-1 (built-in table, "
                                "as of 2026-11-27; AWS Pricing API, via SkyPilot's catalog")
    record = price_record(info)
    assert (record["region"], record["price_region"], record["usd_per_hour"]) == (
        "eu-west-1", "eu-west-1", 0.94775)


def test_resolve_an_unpriced_region_is_unknown_naming_it() -> None:
    info = resolve_price(instance_type="inf2.xlarge", region="sa-east-1", **NO_IMDS)
    assert info.usd_per_hour is None and info.price_region is None and info.source == "none"
    assert info.note.startswith("no price: inf2.xlarge has no on-demand price for sa-east-1 "
                                "in the built-in table")
    assert "priced for ap-northeast-1, eu-central-1, eu-west-1, us-east-1, us-east-2, " \
           "us-west-2 only" in info.note
    assert "another region's price is never used for sa-east-1" in info.note
    assert "0.7582" not in info.note  # the us-east-1 figure is not shown as sa-east-1's
    assert price_record(info)["usd_per_hour"] is None


def test_resolve_region_unknown_says_so() -> None:
    info = resolve_price(instance_type="trn1.2xlarge", **NO_IMDS)
    assert info.usd_per_hour == 1.34375 and info.region is None
    assert info.price_region == "us-east-1"
    assert "region unknown, this is the us-east-1 price" in info.note


def test_resolve_uses_detected_type_then_imds() -> None:
    info = resolve_price(detected_instance_type="inf2.8xlarge", region="us-east-1",
                         detected_by="neuron-ls", **NO_IMDS)
    assert (info.instance_type, info.usd_per_hour, info.instance_source) == (
        "inf2.8xlarge", 1.96786, "neuron-ls")
    info = resolve_price(imds=lambda: InstanceIdentity("trn1.32xlarge", "us-east-1"))
    assert (info.instance_type, info.region, info.usd_per_hour, info.instance_source) == (
        "trn1.32xlarge", "us-east-1", 21.5, "imds")
    # an explicit override beats detection; IMDS still supplies the region
    info = resolve_price(instance_type="g5.xlarge", detected_instance_type="trn1.2xlarge",
                         imds=lambda: InstanceIdentity("trn1.2xlarge", "us-east-1"))
    assert (info.instance_type, info.region, info.usd_per_hour) == ("g5.xlarge", "us-east-1",
                                                                     1.006)
    # IMDS's region decides: g5.xlarge is priced for us-east-1 only, so not in us-west-2
    info = resolve_price(instance_type="g5.xlarge",
                         imds=lambda: InstanceIdentity("g5.xlarge", "us-west-2"))
    assert (info.region, info.usd_per_hour) == ("us-west-2", None)
    assert "no on-demand price for us-west-2" in info.note


def test_resolve_not_on_ec2() -> None:
    info = resolve_price(imds=lambda: None)
    assert info.usd_per_hour is None and info.source == "none"
    assert info.note == ("no price: instance type unknown (not on EC2; pass --instance-type "
                         "or --price-per-hour)")
    assert "AWS_EC2_METADATA_DISABLED" in resolve_price().note


def test_resolve_price_override() -> None:
    info = resolve_price(price_per_hour="1.1", instance_type="trn1.2xlarge", region="us-east-1",
                         spot=True, **NO_IMDS)
    assert (info.usd_per_hour, info.source, info.spot, info.as_of) == (1.1, "override", True, None)
    assert info.note == "trn1.2xlarge $1.10/h spot us-east-1 (--price-per-hour)"
    # an unknown type is fine when the user states the price
    assert resolve_price(instance_type="x9.large", price_per_hour=3, **NO_IMDS).usd_per_hour == 3


@pytest.mark.parametrize("bad", [-1, 0, "abc", 5000, math.nan])
def test_resolve_bad_override_gives_no_price(bad: object) -> None:
    info = resolve_price(instance_type="trn1.2xlarge", price_per_hour=bad, **NO_IMDS)
    assert info.usd_per_hour is None
    assert info.note.startswith("no price: --price-per-hour ")


def test_resolve_unknown_type_gives_no_price() -> None:
    info = resolve_price(instance_type="trn9.xlarge", region="us-east-1", **NO_IMDS)
    assert info.usd_per_hour is None and info.instance_type == "trn9.xlarge"
    assert info.note.startswith("no price: unknown instance type 'trn9.xlarge'")
    info = resolve_price(instance_type="not a type", **NO_IMDS)
    assert info.usd_per_hour is None and "not an EC2 instance type name" in info.note


def test_resolve_trn2_is_unknown_not_guessed() -> None:
    info = resolve_price(instance_type="trn2.48xlarge", region="us-east-2", **NO_IMDS)
    assert info.usd_per_hour is None
    assert info.note == ("no price: trn2.48xlarge has no on-demand price for us-east-2 in the "
                         "built-in table (as of 2026-11-27), nor for any other region; pass "
                         "--price-per-hour")
    info = resolve_price(instance_type="trn2.48xlarge", **NO_IMDS)
    assert info.usd_per_hour is None and "for any region" in info.note


def test_resolve_spot_needs_a_stated_or_live_price() -> None:
    info = resolve_price(instance_type="trn1.2xlarge", region="us-east-1", spot=True, **NO_IMDS)
    assert info.usd_per_hour is None and info.spot  # never the on-demand price
    assert "spot prices change hourly" in info.note
    live_spot = lambda t, r: LivePrice(0.41, "aws-spot-price-history", "", "2026-08-02")  # noqa: E731
    info = resolve_price(instance_type="trn1.2xlarge", region="us-east-1", spot=True, live=True,
                         live_spot=live_spot, **NO_IMDS)
    assert (info.usd_per_hour, info.spot, info.source) == (0.41, True, "aws-spot-price-history")
    assert info.note.startswith("trn1.2xlarge $0.41/h spot us-east-1")


def test_resolve_live_on_demand_and_fallback() -> None:
    calls = []

    def ok(t: str, r: str) -> LivePrice:
        calls.append((t, r))
        return LivePrice(1.3, "aws-pricing-api", "", "2026-08-02")

    info = resolve_price(instance_type="trn1.2xlarge", region="us-west-2", live=True,
                         live_on_demand=ok, **NO_IMDS)
    assert calls == [("trn1.2xlarge", "us-west-2")]
    assert (info.usd_per_hour, info.source, info.as_of) == (1.3, "aws-pricing-api", "2026-08-02")
    failed = lambda t, r: LivePrice(None, "aws-pricing-api", "no AWS credentials")  # noqa: E731
    info = resolve_price(instance_type="trn1.2xlarge", region="us-east-1", live=True,
                         live_on_demand=failed, **NO_IMDS)
    assert info.usd_per_hour == 1.34375 and info.source == "builtin"
    assert info.note.endswith("; live price unavailable: no AWS credentials")


def test_resolve_with_user_file_and_broken_user_file(tmp_path: Path) -> None:
    good = write(tmp_path, '[instances."trn1.2xlarge"]\nusd_per_hour = 1.25\n', "good.toml")
    info = resolve_price(instance_type="trn1.2xlarge", region="us-east-1", price_file=good,
                         **NO_IMDS)
    assert (info.usd_per_hour, info.source) == (1.25, "user-file")
    assert info.note == f"trn1.2xlarge $1.25/h on-demand us-east-1 (price file {good})"
    bad = write(tmp_path, '[instances."trn1.2xlarge"]\nusd_per_hour = -3\n', "bad.toml")
    info = resolve_price(instance_type="inf2.xlarge", region="us-east-1", price_file=bad,
                         **NO_IMDS)
    assert info.usd_per_hour == 0.7582 and info.source == "builtin"
    assert f"price file ignored: {bad}: " in info.note


def test_prices_are_shown_as_published() -> None:
    assert fmt.price(1.34375) == "$1.34375" and fmt.price(0.7582) == "$0.7582"
    assert fmt.price(21.5) == "$21.50" and fmt.price(None) == fmt.MISSING
    assert fmt.price(21.957642) == "$21.957642"
    assert BUILTIN_ORIGIN == "built-in table"


# -- live prices: parsing only (no AWS here) ------------------------------------------------

def price_list_entry(*dimensions: tuple[str, str]) -> str:
    """A PriceList entry shaped like the Pricing API's (trimmed to what matters)."""
    dims = {f"SKU.JRTCKXETXF.6YS6EN2CT7.{i}": {
        "unit": unit, "pricePerUnit": {"USD": usd},
        "description": f"${usd} per On Demand Linux trn1.2xlarge Instance Hour"}
        for i, (unit, usd) in enumerate(dimensions)}
    return json.dumps({
        "product": {"sku": "SKU", "attributes": {"instanceType": "trn1.2xlarge",
                                                 "regionCode": "us-east-1"}},
        "serviceCode": "AmazonEC2",
        "terms": {"OnDemand": {"SKU.JRTCKXETXF": {
            "offerTermCode": "JRTCKXETXF", "priceDimensions": dims}}},
    })


def test_extract_on_demand_usd() -> None:
    assert live.extract_on_demand_usd(price_list_entry(("Hrs", "1.3437500000"))) == 1.34375
    parsed = json.loads(price_list_entry(("Hrs", "0.7582000000")))
    assert live.extract_on_demand_usd(parsed) == 0.7582
    # zero-priced dimensions are skipped; disagreeing ones are ambiguous
    assert live.extract_on_demand_usd(
        price_list_entry(("Hrs", "0.0000000000"), ("Hrs", "1.34375"))) == 1.34375
    assert live.extract_on_demand_usd(price_list_entry(("Hrs", "1.3"), ("Hrs", "1.4"))) is None
    assert live.extract_on_demand_usd(price_list_entry(("Quantity", "5"))) is None
    assert live.extract_on_demand_usd("{not json") is None
    assert live.extract_on_demand_usd('{"terms": {}}') is None


class FakePricingClient:
    def __init__(self, entries: list[str]) -> None:
        self.entries = entries
        self.kwargs: dict = {}

    def get_products(self, **kwargs: object) -> dict:
        self.kwargs = kwargs
        return {"PriceList": self.entries, "FormatVersion": "aws_v1"}


def test_on_demand_price_with_a_fake_client() -> None:
    client = FakePricingClient([price_list_entry(("Hrs", "1.3437500000"))])
    got = live.on_demand_price("trn1.2xlarge", "us-east-1", client=client)
    assert got.usd_per_hour == 1.34375 and got.reason == "" and got.as_of
    filters = {f["Field"]: f["Value"] for f in client.kwargs["Filters"]}
    assert client.kwargs["ServiceCode"] == "AmazonEC2"
    assert all(f["Type"] == "TERM_MATCH" for f in client.kwargs["Filters"])
    assert filters == {"instanceType": "trn1.2xlarge", "regionCode": "us-east-1",
                       "operatingSystem": "Linux", "tenancy": "Shared", "preInstalledSw": "NA",
                       "capacitystatus": "Used", "marketoption": "OnDemand"}
    two = FakePricingClient([price_list_entry(("Hrs", "1.3")), price_list_entry(("Hrs", "1.4"))])
    assert "disagree" in live.on_demand_price("trn1.2xlarge", "us-east-1", client=two).reason
    none = live.on_demand_price("trn1.2xlarge", "us-east-1", client=FakePricingClient([]))
    assert none.usd_per_hour is None and "no on-demand Linux price" in none.reason


def test_spot_price_with_a_fake_client() -> None:
    class FakeEC2:
        def describe_spot_price_history(self, **kwargs: object) -> dict:
            assert kwargs["InstanceTypes"] == ["trn1.2xlarge"]
            assert kwargs["ProductDescriptions"] == ["Linux/UNIX"]
            rows = [("us-east-1a", "0.40", "2026-08-02T10"),
                    ("us-east-1a", "0.30", "2026-08-01T10"),
                    ("us-east-1b", "0.45", "2026-08-02T09")]
            return {"SpotPriceHistory": [
                {"AvailabilityZone": z, "SpotPrice": p, "Timestamp": t} for z, p, t in rows]}

    got = live.spot_price("trn1.2xlarge", "us-east-1", client=FakeEC2())
    assert got.usd_per_hour == 0.45 and "highest of 2 zones" in got.reason
    got = live.spot_price("trn1.2xlarge", "us-east-1", availability_zone="us-east-1a",
                          client=FakeEC2())
    assert (got.usd_per_hour, got.reason) == (0.40, "")


def test_without_boto3_live_prices_are_none_with_a_reason(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "boto3", None)  # import boto3 -> ImportError
    for got in (live.on_demand_price("trn1.2xlarge", "us-east-1"),
                live.spot_price("trn1.2xlarge", "us-east-1")):
        assert got.usd_per_hour is None and "boto3 is not installed" in got.reason
