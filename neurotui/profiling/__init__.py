"""Profiles on demand from inside the ranks (`neurotui profile`, `p` in the dashboard).

The automatic probe in each rank (autoprobe/site/neurotui_autoprobe.py, `_Profiles`) does the
capture; this package asks for it and reads what comes back:

- ``channel``: the request left in the session folder (profiles/request.json) and the ranks'
  `profile` records read from their probe files as they come (ProfileAnswers).
- ``trace``: a rank's Chrome trace read back: operators by self time, and how ranks differ.
- ``take``: one profile taken end to end (checks, request, wait): what the command and the
  dashboard both call.
- ``command``: `neurotui profile`'s arguments and printed summary.

May import: session/ (layout, state, meta); standard library only at import time, so the
command line starts as fast as before.
"""
