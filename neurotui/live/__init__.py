"""The live model: a session followed (or replayed) turned into frozen states for the views.

DashboardModel (model.py) reads the session through session/ and computes, incrementally,
what every view shows (stepstate.py, with the incremental forms of metrics/; history.py),
judges the alert rules (alerts.py) and keeps a rank's log tail (logtail.py), on a clock that
is the wall clock or a replay's (clock.py). No Textual here, nor anything of the views: ui/
renders these states, --headless prints them, tests read them. May import: metrics,
session/, recorded, defaults, fmt.
"""
