"""Which lines are a Neuron compile event, and which kind (:data:`COMPILE_KINDS`): the words
come from neuron(x)-cc and its cache, not from the script."""

from __future__ import annotations

import re

from neurotui.sources.steplog.records import CompileKind

_COMPILER_STATUS_RE = re.compile(r"Compiler status:?\s{0,8}([A-Za-z]{1,16})")
_ERROR_WORD_RE = re.compile(r"\bERROR\b")


def classify_compile(text: str) -> CompileKind | None:
    """Say which Neuron compile event ``text`` reports, if any.

    The literal checks come first so an ordinary line costs a few substring tests.
    A wrapped fragment that only holds the tail of a cache-hit message
    (``....neff. Exiting with a successfully compiled graph.``) is not an event.
    Of a neuron(x)-cc error block only its ``An Internal Compiler Error has occurred``
    line is an event, so one failure is one event, not one per traceback line.
    """
    if "ompiler" in text:
        m = _COMPILER_STATUS_RE.search(text)
        if m is not None:
            return "compiled" if m.group(1).upper() == "PASS" else "compile_failed"
        if "Call compiler with cmd" in text:
            return "compile"
        if "An Internal Compiler Error has occurred" in text:
            return "compile_failed"
    if "neff" in text:
        if "cached failed neff" in text:
            return "compile_failed"
        if "Using a cached neff" in text:
            return "cache_hit"
    if "_WRAPPER||" in text:
        if "No candidate found" in text:
            return "cache_miss"
        if _ERROR_WORD_RE.search(text) is not None:
            return "compile_failed"
        if "Exiting with a successfully compiled graph" in text and ".neff" not in text:
            return "compiled"
    if "RunNeuronCCImpl: error condition" in text:
        return "compile_failed"
    if "exit status" in text and "returned non-zero exit status" in text and "neuron" in text:
        # neuron_parallel_compile: CalledProcessError: Command '['neuronx-cc', ...]'
        return "compile_failed"
    if "neuronx-cc terminated abnormally" in text:
        return "compile_failed"
    if "recompiled" in text and ": the corresponding graph will be recompiled" in text:
        # optimum-neuron: ``.../model.neff not found in aws-neuron/optimum-neuron-cache: ...``
        return "cache_miss"
    return None


def _may_compile(text: str) -> bool:
    """Whether ``text`` holds a word that every compile line :func:`classify_compile` finds
    holds (a test keeps the two in step): False means no line of it is one."""
    return (
        "ompiler" in text
        or "neff" in text
        or "_WRAPPER||" in text
        or "RunNeuronCCImpl" in text
        or "exit status" in text
        or "terminated abnormally" in text
        or "recompiled" in text
    )
