"""A long session's files decoded in a second process while the reader reads the rest.

A cold open of a day of a 32-rank run is mostly decoding: the ranks' probe files, and the log
lines' step records among telemetry in events.jsonl (bulk.py). One core's work, with the
other idle. The reader starts this module as a helper process (a fresh interpreter, niced: no
fork of a threaded dashboard, and none of the caller's modules imported again), hands it the
files, and goes on with the rest itself. Where events.jsonl is long, its later part is a file
of its own to the helper, which takes it first, while the reader reads the earlier part;
then the helper takes the probe files from the last one backwards, the reader from the first
one forwards. Each claims a file before decoding it (an exclusively created file in a private
folder), so they meet where their speeds say, and every file is decoded once. The helper
leaves each file's decoded pieces in that folder (pickled; in memory where /dev/shm is) and
says the file's number on its stdout; the reader takes them in file order, so what it
builds is the same as reading every file itself.

Anything wrong with the helper (it cannot start, dies, sends garbage) costs only time: the
reader reads the files the helper did not deliver itself.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, NamedTuple

from neurotui.childenv import numpy_helper_env
from neurotui.session import bulk
from neurotui.session.tailing import read_new_block

MIN_BYTES = 64 << 20
"""Bytes for the helper from which one pays: starting one costs about 0.2 s of CPU (a new
interpreter importing numpy and msgspec), decoding 64 MiB of probe files about 0.3 s."""


class HelperFile(NamedTuple):
    """A file for the helper: from byte `offset` on; `kinds`: the kinds of record its lines
    may be (a piece of events.jsonl, decoded by bulk.MixedDecoder), or None: step lines only
    (a probe file)."""

    path: Path
    offset: int
    kinds: tuple[str, ...] | None = None


@dataclass
class DecodedPiece:
    """One piece of a file as the reader's loop reads it (read_new_block), decoded whole."""

    start: int
    complete: int
    """Bytes of complete lines from `start`."""
    lines: int
    steps: bulk.DecodedSteps
    rest: bytes
    """The partial last line read after `complete` (the file's end, still being written)."""
    mixed: bulk.Mixed | None = None
    """A piece of lines of several kinds, decoded whole (`steps` are its step lines'): the
    reader reads its bytes again for the lines it keeps or takes one by one."""


def decode_file(path: Path, offset: int, piece_bytes: int,
                kinds: tuple[str, ...] | None = None) -> list[DecodedPiece]:
    """The pieces of `path` from `offset` on that decode whole, as step lines (or, given
    `kinds`, as records of those kinds), in order, up to the first that does not (read by the
    reader itself, line by line) or the file's end."""
    mixed_decoder = bulk.MixedDecoder(kinds) if kinds is not None else None
    pieces: list[DecodedPiece] = []
    while True:
        try:
            chunk, complete = read_new_block(path, offset, piece_bytes)
        except OSError:  # the reader meets the same error, and reports it
            return pieces
        if mixed_decoder is not None:
            lines = chunk.count(b"\n", 0, complete)
            mixed = mixed_decoder.decode(memoryview(chunk)[:complete], lines) \
                if lines >= bulk.MIN_BATCH else None
            if mixed is None:
                return pieces
            pieces.append(DecodedPiece(offset, complete, lines, mixed.steps, chunk[complete:],
                                       mixed))
        elif (whole := bulk.decode_piece(chunk, complete)) is not None:
            steps, count = whole
            pieces.append(DecodedPiece(offset, complete, count, steps, chunk[complete:]))
        else:
            return pieces
        offset += complete
        if len(chunk) < piece_bytes or not complete:
            return pieces


_HELPER_MAIN = ("import os, sys; os.nice(5); from neurotui.session import helper_decode; "
                "sys.exit(helper_decode.main())")
"""The helper's program: niced before its imports, so that a dashboard drawing its first frame
beside it keeps the CPU it needs; run from this module's own name, so that the pieces it
pickles name their class as the reader imports it."""


def _claim(folder: Path, index: int) -> bool:
    """Whether this process is the first to claim file `index`."""
    try:
        os.close(os.open(folder / str(index), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        return True
    except FileExistsError:
        return False


class HelperDecode:
    """The reader's side: `take(i)` says whether file `i` is the reader's to read (None) or
    hands over the helper's pieces of it. Files must be asked for in order."""

    def __init__(self, files: list[HelperFile], piece_bytes: int) -> None:
        shm = Path("/dev/shm")  # the pieces pass through memory where there is such a place
        self._folder = Path(tempfile.mkdtemp(prefix="neurotui-decode-",
                                             dir=shm if shm.is_dir() else None))
        self._done: set[int] = set()
        self._proc: subprocess.Popen[bytes] | None = None
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-c", _HELPER_MAIN, str(self._folder)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                env=numpy_helper_env(PYTHONPATH=_package_root()))
            assert self._proc.stdin is not None
            # Left open: the helper waits for its end to know the reader is gone (below).
            pickle.dump(([(str(f.path), f.offset, f.kinds) for f in files], piece_bytes),
                        self._proc.stdin)
            self._proc.stdin.flush()
        except (OSError, pickle.PicklingError, ValueError):
            self.close()  # no helper: the reader reads every file

    def take(self, index: int) -> list[DecodedPiece] | None:
        """None: file `index` is the reader's (claimed now, or no helper). Otherwise the
        helper's pieces of it (empty when it died first: the reader reads it after all)."""
        if self._proc is None or _claim(self._folder, index):
            return None
        # The helper says each file it is done with on its stdout (a line: its number); the
        # pieces are in a file of their own, so a busy reader never holds the helper up.
        while index not in self._done:
            try:
                said = self._proc.stdout.readline() if self._proc.stdout else b""
                self._done.add(int(said))
            except (OSError, ValueError):  # gone (b"" at its end), or not ours
                self.close()
                return []
        path = self._folder / f"{index}.pieces"
        try:
            pieces = pickle.loads(path.read_bytes())
        except Exception:
            return []
        finally:
            path.unlink(missing_ok=True)  # memory, where it is /dev/shm
        return pieces if isinstance(pieces, list) else []

    def close(self) -> None:
        if self._proc is not None:
            with contextlib.suppress(OSError):
                self._proc.kill()
            with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                self._proc.wait(timeout=5)
            for stream in (self._proc.stdin, self._proc.stdout):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()
            self._proc = None
        shutil.rmtree(self._folder, ignore_errors=True)


def _package_root() -> str:
    """Where this package is imported from, first on the helper's path (a checkout run
    without installing it finds itself)."""
    root = str(Path(__file__).resolve().parents[2])
    inherited = os.environ.get("PYTHONPATH")
    return root if not inherited else f"{root}{os.pathsep}{inherited}"


def _serve(folder: Path, stdin: IO[bytes], stdout: IO[bytes]) -> None:
    files, piece_bytes = pickle.load(stdin)
    # The later part of events.jsonl first (the reader is reading the earlier part), then
    # the probe files from the last one back to where the reader is.
    ahead = [i for i, (_, _, kinds) in enumerate(files) if kinds is not None]
    backwards = [i for i in reversed(range(len(files))) if i not in ahead]
    try:
        for index in [*ahead, *backwards]:
            if not _claim(folder, index):
                if index in ahead:
                    continue
                break  # the reader got here first: the rest are its too
            path, offset, kinds = files[index]
            pieces = decode_file(Path(path), offset, piece_bytes, kinds)
            (folder / f"{index}.pieces").write_bytes(
                pickle.dumps(pieces, protocol=pickle.HIGHEST_PROTOCOL))
            stdout.write(b"%d\n" % index)
            stdout.flush()
        stdin.read()  # until the reader closes it: done with the pieces, or gone
    finally:
        # A reader that died (killed mid-read) leaves pieces no one will take: gone with it.
        shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    with contextlib.suppress(BrokenPipeError, KeyboardInterrupt):
        _serve(Path(args[0]), sys.stdin.buffer, sys.stdout.buffer)
    return 0


