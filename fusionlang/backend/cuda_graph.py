"""A run's kernel launches, captured once into a CUDA graph and replayed.

A model of a hundred small kernels spends as long launching them from Python as running
them. The first run launches them one by one on the runtime's own stream (which also loads
the module's kernels); the second captures the same launches, the reset of the error record
included, into a CUDA graph (CuPy's ``Stream.begin_capture``/``end_capture``); every run
after replays it with one ``Graph.launch``. The caller synchronizes once per run, when it
reads the error record. Where capture is refused (an old driver, HIP), the launcher keeps
launching one by one and says why in ``fallback``.
"""

from __future__ import annotations

from typing import Callable


class GraphLauncher:
    """Run ``launches`` (callables, in order) on ``stream``: directly at first, then as a
    captured graph. ``capture=False`` never captures."""

    def __init__(self, stream, launches: list[Callable[[], None]], *, capture: bool = True):
        self.stream = stream
        self.launches = launches
        self.capture = capture
        self.graph = None
        #: why the launches are not replayed as a graph (None while they are, or may be)
        self.fallback: str | None = None if capture else "capture switched off"
        self.runs = 0

    def run(self) -> None:
        """Enqueue one run on the stream (no synchronization)."""
        self.runs += 1
        if self.graph is None and self.fallback is None and self.runs >= 2:
            self._capture()
        with self.stream:
            if self.graph is not None:
                self.graph.launch(stream=self.stream)
            else:
                self._direct()

    def _direct(self) -> None:
        for launch in self.launches:
            launch()

    def _capture(self) -> None:
        try:
            with self.stream:
                self.stream.begin_capture()
                try:
                    self._direct()
                finally:
                    graph = self.stream.end_capture()
        except Exception as exc:  # noqa: BLE001 - any refusal: launch one by one, and say why
            self.fallback = f"{type(exc).__name__}: {exc}"
            return
        self.graph = graph


__all__ = ["GraphLauncher"]
