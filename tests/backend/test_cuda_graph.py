"""The graph launcher (backend.cuda_graph) with a stand-in stream: what it enqueues on each
run, and that a refused capture leaves it launching one by one. (On a GPU, test_gpu runs
the real thing through CudaRuntime.)"""

from __future__ import annotations

from fusionlang.backend.cuda_graph import GraphLauncher


class FakeGraph:
    def __init__(self, log, captured):
        self.log, self.captured = log, captured

    def launch(self, stream=None):
        self.log.append(("graph", tuple(self.captured)))


class FakeStream:
    """Records what is enqueued; between begin_capture and end_capture, it records into a graph."""

    def __init__(self, refuse=False):
        self.log, self.capturing, self.refuse, self.entered = [], None, refuse, 0

    def __enter__(self):
        self.entered += 1
        return self

    def __exit__(self, *exc):
        self.entered -= 1

    def begin_capture(self):
        if self.refuse:
            raise RuntimeError("capture is not supported")
        self.capturing = []

    def end_capture(self):
        graph = FakeGraph(self.log, self.capturing)
        self.capturing = None
        return graph

    def enqueue(self, name):
        assert self.entered, "launched outside the runtime's stream"
        (self.capturing if self.capturing is not None else self.log).append(name)


def _launcher(stream, **kw):
    return GraphLauncher(stream, [lambda k=k: stream.enqueue(k) for k in ("reset", "k0", "k1")], **kw)


def test_first_run_launches_one_by_one_then_the_graph_is_captured_once_and_replayed():
    stream = FakeStream()
    launcher = _launcher(stream)
    for _ in range(4):
        launcher.run()
    assert stream.log == ["reset", "k0", "k1"] + [("graph", ("reset", "k0", "k1"))] * 3
    assert launcher.fallback is None and launcher.graph is not None


def test_a_refused_capture_falls_back_to_launching_one_by_one_and_says_why():
    stream = FakeStream(refuse=True)
    launcher = _launcher(stream)
    for _ in range(3):
        launcher.run()
    assert stream.log == ["reset", "k0", "k1"] * 3
    assert "capture is not supported" in launcher.fallback


def test_capture_can_be_switched_off():
    stream = FakeStream()
    launcher = _launcher(stream, capture=False)
    launcher.run()
    launcher.run()
    assert stream.log == ["reset", "k0", "k1"] * 2 and launcher.graph is None
