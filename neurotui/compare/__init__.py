"""Compare runs side by side: one row per session, like the reference study's table.

The rooms, each holding one thing:

- ``load``: reading a session, or a job of many nodes, once (LoadedSession, LoadedJob).
- ``rows``: the columns and each session's row of figures (compare_rows, compare_frame).
- ``overlay``: the samples/s curves of several runs on one time axis (throughput_overlay).
- ``render``: the rows as a text table, markdown, CSV or JSON.
- ``layout``: the table fitted to a terminal's width, and the decision line.
- ``page``: the comparison as one HTML page, or its charts as SVG.
- ``whatif``: the same runs priced at another figure (--price, --region, --spot).
- ``command``: `neurotui compare`'s arguments and run.

The command line imports ``neurotui.compare.command`` before any of the others, and they
load numpy (and pandas where a table is made): so this package imports none of them itself.
The names callers use (``from neurotui.compare import compare_rows``) are found in their
rooms when first asked for (PEP 562); ``render``, a room's name, is ``render.render``.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {
    "LoadedJob": "load",
    "LoadedSession": "load",
    "NodePart": "load",
    "load_job": "load",
    "load_session": "load",
    "run_neuron_of": "load",
    "COLUMNS": "rows",
    "EXTRA_KEYS": "rows",
    "Column": "rows",
    "compare_frame": "rows",
    "compare_rows": "rows",
    "dataloader_workers": "rows",
    "global_batch": "rows",
    "instance_figures": "rows",
    "job_figures": "rows",
    "phase_columns": "rows",
    "phase_key": "rows",
    "rows_frame": "rows",
    "session_row": "rows",
    "table_columns": "rows",
    "OVERLAY_POINTS": "overlay",
    "overlay_bucket_s": "overlay",
    "throughput_overlay": "overlay",
    "MISSING": "render",
    "RENDERERS": "render",
    "format_value": "render",
    "render_csv": "render",
    "render_json": "render",
    "render_markdown": "render",
    "render_table": "render",
}
"""Each name of the comparison's own that callers use, and the module that holds it."""

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})
