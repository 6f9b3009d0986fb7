"""Where the tests' real captures live: tests/fixtures/, each file with its source in the
SOURCES.md beside it. The project is cloned alone, so every capture a test reads is here."""

from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures"
TELEMETRY_CAPTURES = FIXTURES / "telemetry"
"""The Neuron and NVIDIA tools' output and the training logs copied from public sources."""
STEPLOG_CAPTURES = FIXTURES / "steplogs"
"""Training logs collected from public issues, docs and examples."""


def read_capture(name: str) -> str:
    """A telemetry capture's text (tests/fixtures/telemetry/NAME)."""
    return (TELEMETRY_CAPTURES / name).read_text(encoding="utf-8")
