"""A recorded job of many nodes for replay: a Timeline per node's part (timeline.py), one
cursor over all of them. `view()` is a JobReader over the parts' timeline views, so the
replayed job is shown by the same model and panels as the live one."""

from __future__ import annotations

from pathlib import Path

from neurotui.session.jobreader import JobReader, NodePart, job_status
from neurotui.session.jobs import job_parts, node_of
from neurotui.session.status import SessionStatus
from neurotui.session.timeline import Timeline, TimelineView


class JobTimeline:
    def __init__(self, root: Path, job_id: str) -> None:
        self.root, self.job_id = Path(root), job_id
        paths = job_parts(self.root, job_id)
        if not paths:
            raise LookupError(f"no session of job {job_id} under {self.root}")
        self.parts = [Timeline(path) for path in paths]
        self.names = [node_of(t.meta) or t.dir.name for t in self.parts]
        self.dir = self.parts[0].dir
        self.start = min(t.start for t in self.parts)
        self.end = max(t.end for t in self.parts)
        self.has_log_offsets = any(t.has_log_offsets for t in self.parts)

    def time_of_step(self, step: int) -> float | None:
        """When the job first reached `step` (on any node)."""
        times = [t for part in self.parts if (t := part.time_of_step(step)) is not None]
        return min(times) if times else None

    def view(self) -> JobTimelineView:
        """The job at a cursor; its `status()` says how each node stood then (there is no
        status_at: the view's nodes' rows need their states set, and the view sets them)."""
        return JobTimelineView(self)

    def close(self) -> None:
        for part in self.parts:
            part.close()


class JobTimelineView(JobReader):
    """The job as it stood at the cursor (`seek`): each node's part at the same time."""

    def __init__(self, timeline: JobTimeline) -> None:
        parts = [NodePart(name, t.dir, t.view())
                 for name, t in zip(timeline.names, timeline.parts, strict=True)]
        super().__init__(timeline.root, timeline.job_id, parts=parts)
        self.timeline = timeline
        self.live = False
        self.until = timeline.start

    def _views(self) -> list[TimelineView]:
        return [p.reader for p in self.parts if isinstance(p.reader, TimelineView)]

    def seek(self, until: float) -> None:
        self.until = until
        for view in self._views():
            view.seek(until)

    def status(self) -> SessionStatus:
        """At the cursor: each node as its own timeline says it stood then."""
        for part, timeline in zip(self.parts, self.timeline.parts, strict=True):
            part.status = timeline.status_at(self.until)
        return job_status(self.parts)

    def reopened(self) -> JobTimelineView:
        """Itself, every part handing out from the start again."""
        for view in self._views():
            view.reopened()
        return self
