"""The run's Neuron /metrics URL with its credentials, as the supervisor takes it before it
launches the job: apart from the collectors (collect/telemetry.py), whose parsers the
supervisor imports only once the job is running."""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping
from typing import Any

METRICS_URL_ENV = "NEUROTUI_NEURON_METRICS_URL"
"""`run --neuron-metrics-url` with a user:password in it: the whole URL reaches the supervisor
in this variable, while meta.json and the supervisor's argv hold it without them."""


def metrics_url(config: Mapping[str, Any],
                environ: MutableMapping[str, str] = os.environ) -> str | None:
    """The run's /metrics URL (config `neuron_metrics_url`, recorded without credentials), with
    the credentials `environ` carries for it. The variable is taken out of `environ`, so the
    job the supervisor launches does not inherit a password; one for another URL is ignored."""
    recorded = config.get("neuron_metrics_url")
    secret = environ.pop(METRICS_URL_ENV, None)
    if not recorded:
        return None
    from neurotui.collect.observer import redact  # only for a run that has a URL

    return secret if secret and redact(secret) == recorded else str(recorded)
