"""`neurotui import`: a session made of a finished run neurotui never launched.

A writer beside the supervisor (DESIGN.md, rule 9): it reads a saved training log, a torchrun
log folder, a TensorBoard event folder or a CloudWatch / SageMaker log export, gives each step
the time the run itself recorded (a printed date-time, a printed step time or throughput, a
TensorBoard wall time, or none: steps counted, never timed), and writes a session that every
view reads like any other, marked `imported` in meta.json (FORMAT.md).

The rooms, each holding one thing:

- ``timing``: how a log's steps are timed (printed dates, printed step times, none), the
  resolution of printed dates and the step time over spans long enough for it.
- ``logs``: a saved log's lines (a file, a torchrun folder's, a CloudWatch export's) made
  timed step and compile lines by the parser the supervisor uses.
- ``tensorboard``: a TensorBoard event file's scalars made steps (which tag is the loss).
- ``sources``: what a PATH is (which of the kinds above), or why it is none.
- ``build``: the session, built in a folder beside and renamed into place at the end.
- ``command``: `neurotui import`'s arguments and run.

May import: session/, sources/, supervisor/steprecorder.py (the one step recorder), pricing/,
summary.py. The command line imports ``command`` alone; the rest load when it runs.
"""
