"""neurotui's automatic probe, loaded at start-up by every Python process of a job neurotui
launched (its folder is first on PYTHONPATH). It arms the probe, then runs the sitecustomize
this one hides (the user's own, or the system's), exactly as Python would have.
Standard library only; never raises from the probe itself."""


def _arm() -> None:
    try:
        import neurotui_autoprobe

        neurotui_autoprobe.arm()
    except Exception:
        pass  # the probe is optional: start-up goes on without it


def _run_hidden_sitecustomize() -> None:
    import importlib.machinery
    import importlib.util
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module  # code that looks for it finds the user's own
    spec.loader.exec_module(module)  # its errors surface as Python reports them ("Error in
    # sitecustomize"), as they would have without neurotui


_arm()
_run_hidden_sitecustomize()
