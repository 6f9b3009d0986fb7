"""The supervisor: the process that owns a training job (core.py), launches it (launch.py,
spawn.py), follows its logs into step events (logfollow.py, through the spool in memory:
spool.py), watches it (stallwatch.py, alerting.py), answers the control channel (control.py)
and stops it (direct_stop.py). May import: session/, collect/, sources/, pricing/, autoprobe,
defaults, and summary (the run's figures, written at its end);
never the live model or the views.
"""
