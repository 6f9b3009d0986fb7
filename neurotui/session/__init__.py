"""A session on disk: its layout (layout.py, FORMAT.md), writing it (writer.py), reading it
back as tables and events (reader.py, with its columnar cache, cache.py; the step rows it
takes in are held by its step table, steptable.py), its state
(status.py), where sessions are (paths.py), a folder's sessions as rows read from meta.json
alone (listing.py) and a recorded session seen at a time
(timeline.py). Everything shown is derived from these files. May import: sources/ (types),
metrics only for figures; never the supervisor, the live model or the views.
"""
