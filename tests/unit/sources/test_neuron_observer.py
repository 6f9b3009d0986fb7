"""Neuron metrics from a Prometheus /metrics page: the parser on a real capture, and the
collector scraping that capture over a real loopback HTTP server.

The capture is the `/metrics` page of `neuron-monitor | neuron-monitor-prometheus.py` on an
inf1.xlarge (tests/fixtures/telemetry/SOURCES.md). Expected numbers are copied from its lines
as printed; the ratio families are neuron-monitor's percentages / 100, hence the `* 100`.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neurotui.collect.observer import (
    SOURCE,
    BadMetricsURL,
    ObserverCollector,
    check_url,
    fetch_page,
    redact,
)
from neurotui.session import layout
from neurotui.session.reader import SessionReader
from neurotui.session.writer import FORMAT_VERSION, EventWriter, write_json_atomic
from neurotui.sources import neuron_monitor
from neurotui.sources.neuron_observer import observer_summary, parse_metrics
from neurotui.sources.parse_errors import TelemetryParseError
from tests.standins.metrics_page import MetricsPage

CAPTURE = (Path(__file__).resolve().parents[2] / "fixtures" / "telemetry"
           / "neuron-monitor-prometheus_inf1.xlarge_real-capture_datadog-fixture.txt")
TEXT = CAPTURE.read_text()


def line_with(*parts: str) -> str:
    """The one line of the capture that holds every part (so a test changes a real line)."""
    found = [line for line in TEXT.splitlines() if all(p in line for p in parts)]
    assert len(found) == 1, found
    return found[0]


def with_value(line: str, value: str) -> str:
    """The capture with that line's value replaced: a later scrape of the same exporter."""
    head, _, _ = line.rpartition(" ")
    return TEXT.replace(line + "\n", f"{head} {value}\n")


def core(summary: dict, pid: int, index: int) -> dict:
    return next(c for c in summary["cores"] if c["pid"] == pid and c["core"] == index)


# --------------------------------------------------------------------------------------------
# Parser, on the real capture


def test_summary_has_the_neuron_monitor_shape() -> None:
    """Views read `neuron` events without asking which source wrote them: every key the
    neuron-monitor summary has, for the record and for each core, is here too."""
    record = neuron_monitor.parse_monitor_record(json.dumps({"neuron_runtime_data": [{
        "pid": 7, "neuron_runtime_tag": "7", "error": "", "report": {"neuroncore_counters": {
            "period": 1.0, "error": "", "neuroncores_in_use": {
                "0": {"neuroncore_utilization": 5.0}}}}}]}))
    monitor = neuron_monitor.monitor_summary(record)
    ours = observer_summary(parse_metrics(TEXT))
    assert set(monitor) <= set(ours), set(monitor) - set(ours)
    assert set(ours) - set(monitor) == {"exporter_totals", "source"}
    assert set(ours["cores"][0]) == set(monitor["cores"][0])
    runtime_keys = {"pid", "tag", "exec_period", "exec_by_status", "exec_errors_by_type",
                    "latency"}
    assert all(set(r) == runtime_keys for r in ours["exec_runtimes"])


def test_capture_parses_whole() -> None:
    page = parse_metrics(TEXT)
    assert len(page.families) == 33
    assert sum(len(s) for s in page.samples.values()) == 255


def test_core_utilisation_is_percent_per_runtime_and_core() -> None:
    s = observer_summary(parse_metrics(TEXT))
    # 4 runtimes x 4 NeuronCores, each named by its runtime's tag (its PID).
    assert s["pids"] == [31961, 32265, 32276, 32786]
    assert len(s["cores"]) == 16
    # neuroncore_utilization_ratio{neuroncore="1",runtime_tag="32786"} 0.0031171891334815026
    assert core(s, 32786, 1)["util"] == pytest.approx(0.0031171891334815026 * 100)
    assert core(s, 32786, 0)["util"] == pytest.approx(0.003054895299654302 * 100)
    assert core(s, 31961, 0)["util"] == pytest.approx(1.6491081503838823e-12 * 100)
    assert core(s, 32265, 3)["util"] == 0
    # Not in the exporter's page: None, never 0.
    assert core(s, 32786, 1)["flops"] is None and core(s, 32786, 1)["physical"] is None


def test_device_memory_by_kind_adds_up_to_the_runtime_total() -> None:
    s = observer_summary(parse_metrics(TEXT))
    c0 = core(s, 31961, 0)
    assert c0["mem_by_kind"] == {"constants": 184502276, "model_code": 4266480,
                                 "model_shared_scratchpad": 0, "runtime_memory": 132256,
                                 "tensors": 0}
    # Two families agree: the per-core kinds sum to the runtime's neuron_device bytes,
    # neuron_runtime_memory_used_bytes{memory_location="neuron_device",runtime_tag="31961"}.
    assert c0["mem_device"] == 188901012
    assert s["device_mem_used"] == 188901012 + 0 + 0 + 188901012
    assert s["host_mem_used"] == 2994049024 + 1131995136 + 2018480128 + 2474258432
    assert s["device_mem_by_kind"]["constants"] == 2 * 184502276
    assert s["host_mem_by_kind"] is None


def test_runtime_vcpu_and_system_memory() -> None:
    s = observer_summary(parse_metrics(TEXT))
    assert s["vcpu_user"] == pytest.approx((0.09720000000000001 + 0.1388) * 100)
    assert s["vcpu_system"] == pytest.approx((0.037599999999999995 + 0.0362) * 100)
    assert s["system_mem_used"] == 2516926464 and s["system_mem_total"] == 8102633472
    # The exporter's system vCPU split adds nice, io_wait, irq: not neuron-monitor's figure.
    assert s["system_vcpu_user"] is None and s["system_vcpu_system"] is None


def test_instance_and_hardware() -> None:
    s = observer_summary(parse_metrics(TEXT))
    assert s["instance_type"] == "inf1.xlarge" and s["instance_id"] == "i-022af70542e30e040"
    assert s["device_count"] == 1 and s["cores_per_device"] == 4
    assert s["device_type"] is None and s["neuroncore_version"] is None
    assert s["logical_neuroncore_config"] is None
    assert s["errors"] == []


def test_latency_percentiles_per_runtime_and_highest() -> None:
    s = observer_summary(parse_metrics(TEXT))
    by_pid = {r["pid"]: r["latency"] for r in s["exec_runtimes"]}
    assert set(by_pid) == {32276, 32786}  # only these two printed execution_latency_seconds
    assert by_pid[32276]["total_latency"]["p50"] == 0.007897615432739258
    assert by_pid[32786]["total_latency"]["p100"] == 0.008708477020263672
    assert "device_latency" not in by_pid[32786]
    # p99: 0.008580923080444336 (32276) and 0.008591890335083008 (32786)
    assert s["latency"]["total_latency"]["p99"] == 0.008591890335083008


def test_first_page_has_totals_but_no_counts_per_scrape() -> None:
    s = observer_summary(parse_metrics(TEXT))
    assert s["exec_completed"] is None and s["exec_errors"] is None and s["ecc"] is None
    totals = s["exporter_totals"]
    # execution_status_total{runtime_tag="32786",status_type="completed"} 4.0
    assert totals["exec_by_status"]["completed"] == 4
    assert totals["exec_errors_by_type"] == {"generic": 0, "numerical": 0, "transient": 0,
                                             "model": 0, "runtime": 0, "hardware": 0}
    assert totals["ecc"] == {"mem_corrected": 0, "mem_uncorrected": 0, "sram_corrected": 0,
                             "sram_uncorrected": 0}
    json.dumps(s)  # a session event


def test_counts_are_growth_since_previous_page() -> None:
    first = parse_metrics(TEXT)
    completed = line_with('runtime_tag="32786"', 'status_type="completed"', "_total")
    ecc = line_with("hardware_ecc_events_total", 'event_type="mem_ecc_uncorrected"')
    later = with_value(completed, "10.0")
    later = later.replace(ecc + "\n", ecc.rpartition(" ")[0] + " 3.0\n")
    s = observer_summary(parse_metrics(later), first, 5.0)
    assert s["exec_completed"] == 6  # 4.0 -> 10.0
    assert s["exec_errors"] == 0 and s["exec_errors_by_type"]["hardware"] == 0
    assert s["ecc"] == {"mem_corrected": 0, "mem_uncorrected": 3, "sram_corrected": 0,
                        "sram_uncorrected": 0}
    assert s["ecc_devices"] == [{"device": 0, "mem_corrected": 0, "mem_uncorrected": 3,
                                 "sram_corrected": 0, "sram_uncorrected": 0}]
    own = next(r for r in s["exec_runtimes"] if r["pid"] == 32786)
    assert own["exec_period"] == 5.0 and own["exec_by_status"]["completed"] == 6


def test_counter_reset_counts_from_zero() -> None:
    completed = line_with('runtime_tag="32786"', 'status_type="completed"', "_total")
    s = observer_summary(parse_metrics(with_value(completed, "1.0")), parse_metrics(TEXT), 5.0)
    assert s["exec_completed"] == 1  # 4.0 -> 1.0: the exporter restarted


def test_missing_families_stay_none() -> None:
    only_instance = "\n".join(line for line in TEXT.splitlines()
                              if line.startswith(("instance_info", "# HELP instance_info",
                                                  "# TYPE instance_info"))) + "\n"
    s = observer_summary(parse_metrics(only_instance))
    assert s["instance_type"] == "inf1.xlarge"
    assert s["cores"] == [] and s["pids"] == []
    for key in ("device_mem_used", "host_mem_used", "vcpu_user", "system_mem_used",
                "device_count", "latency", "device_mem_by_kind"):
        assert s[key] is None, key
    assert s["exporter_totals"] == {"exec_by_status": None, "exec_errors_by_type": None,
                                    "ecc": None}


def test_a_page_without_neuron_metrics_says_what_it_had() -> None:
    # The exporter's own python_*/process_* families, which come before any Neuron family.
    head = TEXT[: TEXT.index("# HELP system_memory_total_bytes")]
    s = observer_summary(parse_metrics(head))
    assert s["cores"] == [] and s["instance_type"] is None
    assert len(s["errors"]) == 1
    assert "none of neuron-monitor-prometheus' metrics" in s["errors"][0]
    assert "python_gc_objects_collected" in s["errors"][0]
    assert observer_summary(parse_metrics(""))["errors"] == ["neuron /metrics: the page has no "
                                                             "metrics"]


@pytest.mark.parametrize("garbage", [
    "<html><head><title>502 Bad Gateway</title></head></html>\n",
    '{"neuron_runtime_data": []}\n',
    "neuroncore_utilization_ratio{neuroncore=\"0\",runtime_tag=\"1\"\n",  # cut off
    "neuroncore_utilization_ratio{neuroncore=\"0\"} not-a-number\n",
    "x 1\x00\n",
])
def test_garbage_is_a_clear_error(garbage: str) -> None:
    with pytest.raises(TelemetryParseError) as err:
        parse_metrics(garbage)
    assert str(err.value).startswith("neuron /metrics:")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=0, max_value=len(TEXT)), st.text(max_size=40))
def test_cut_or_spliced_capture_never_crashes(cut: int, junk: str) -> None:
    """A page cut anywhere (a dropped connection), with anything after it, either parses or
    raises TelemetryParseError; what parses summarises to JSON."""
    try:
        page = parse_metrics(TEXT[:cut] + junk)
    except TelemetryParseError:
        return
    json.dumps(observer_summary(page, parse_metrics(TEXT), 1.0))


# --------------------------------------------------------------------------------------------
# Collector, over a real loopback HTTP server


@pytest.fixture
def serve() -> Iterator[Callable[..., str]]:
    """Start a loopback HTTP server answering GET with the given status and body."""
    pages: list[MetricsPage] = []

    def start(body: bytes, status: int = 200, delay_s: float = 0.0) -> str:
        pages.append(MetricsPage(body, status, delay_s))
        return pages[-1].url

    yield start
    for page in pages:
        page.close()


@pytest.fixture
def session(tmp_path: Path) -> Path:
    d = tmp_path / "session"
    (d / "logs").mkdir(parents=True)
    write_json_atomic(d / layout.META, {"format": FORMAT_VERSION, "exit": None})
    return d


def collect(session: Path, url: str, seconds: float, **kw: float) -> tuple[dict, str | None]:
    writer = EventWriter(session / layout.EVENTS)
    collector = ObserverCollector(url, writer, **kw)
    deadline = time.time() + seconds
    while time.time() < deadline:
        collector.poll(time.time())
        time.sleep(0.02)
    collector.close()
    writer.close()
    return SessionReader(session).load().events, collector.instance_type


def test_collector_scrapes_the_capture_over_http(serve, session) -> None:
    url = serve(CAPTURE.read_bytes())
    events, instance_type = collect(session, url, 1.2, period_s=0.2)
    neuron = events["neuron"]
    assert len(neuron) >= 3
    first = neuron[0]
    assert instance_type == "inf1.xlarge"
    utils = {(c["pid"], c["core"]): c["util"] for c in first["cores"]}
    assert utils[(32786, 1)] == pytest.approx(0.0031171891334815026 * 100)
    assert first["device_mem_used"] == 377802024
    assert first["source"] == f"neuron /metrics {url}"
    # The same page again: the counters did not grow, which is a count of 0, not unknown.
    assert first["exec_completed"] is None and neuron[1]["exec_completed"] == 0
    assert neuron[1]["ecc"]["mem_uncorrected"] == 0
    statuses = [e for e in events["source_status"] if e["source"] == SOURCE]
    assert len(statuses) == 1 and statuses[0]["ok"] is True  # said once, not every scrape


def test_unreachable_endpoint_is_missing_with_reason(session) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    events, _ = collect(session, f"http://127.0.0.1:{port}/metrics", 0.6, period_s=0.1)
    assert "neuron" not in events
    statuses = [e for e in events["source_status"] if e["source"] == SOURCE]
    assert len(statuses) == 1  # repeated failures with the same reason are said once
    assert statuses[0]["ok"] is False
    assert "unreachable" in statuses[0]["message"] and "refused" in statuses[0]["message"]


def test_garbage_body_is_a_reason_not_an_exception(serve, session) -> None:
    url = serve(b"<html><body>Service Unavailable</body></html>\n")
    events, _ = collect(session, url, 0.5, period_s=0.1)
    assert "neuron" not in events
    (status,) = [e for e in events["source_status"] if e["source"] == SOURCE]
    assert status["ok"] is False and "page not understood" in status["message"]


def test_foreign_exporter_page_is_not_recorded_as_idle(serve, session) -> None:
    url = serve(TEXT[: TEXT.index("# HELP system_memory_total_bytes")].encode())
    events, _ = collect(session, url, 0.5, period_s=0.1)
    assert "neuron" not in events
    (status,) = [e for e in events["source_status"] if e["source"] == SOURCE]
    assert status["ok"] is False and "none of neuron-monitor-prometheus' metrics" in \
        status["message"]


def test_http_error_and_timeout_are_reasons(serve) -> None:
    missing = fetch_page(serve(b"not here", status=404), timeout_s=2.0)
    assert missing.text is None and "HTTP 404" in (missing.failure or "")
    slow = fetch_page(serve(TEXT.encode(), delay_s=1.0), timeout_s=0.2)
    assert slow.text is None and "timed out" in (slow.failure or "")


def test_oversized_page_is_refused(serve) -> None:
    got = fetch_page(serve(b"x 1\n" * 100), max_bytes=64)
    assert got.text is None and "more than 64 bytes" in (got.failure or "")


def test_credentials_in_url_are_sent_as_basic_auth_and_never_recorded(session) -> None:
    page = MetricsPage(CAPTURE.read_bytes())
    try:
        events, _ = collect(session, f"http://scraper:s3cret@127.0.0.1:{page.port}/metrics",
                            0.4, period_s=0.2)
    finally:
        page.close()
    seen = page.auth
    assert seen and seen[0] == "Basic c2NyYXBlcjpzM2NyZXQ="  # base64 of scraper:s3cret
    assert events["neuron"]
    assert "s3cret" not in (session / layout.EVENTS).read_text()


def test_only_http_urls_are_accepted() -> None:
    assert check_url(" http://10.0.0.5:8000/metrics ") == "http://10.0.0.5:8000/metrics"
    for bad in ("file:///etc/passwd", "localhost:8000/metrics", "ftp://host/metrics",
                "http:///metrics"):
        with pytest.raises(BadMetricsURL):
            check_url(bad)
    assert redact("http://u:p@host:9/m") == "http://host:9/m"
    assert redact("https://host/m") == "https://host/m"
