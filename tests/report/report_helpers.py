"""Shared pieces of the report tests: small plans, the light ONNX models, and parsing
the report back (HTML elements, the JSON block)."""

from __future__ import annotations

import json
import os
from html.parser import HTMLParser

import numpy as np
import onnx

import fusionlang
from fusionlang.ops import GraphBuilder

LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")

#: names that break HTML, SVG, JS or JSON if pasted unescaped
HOSTILE = {
    "graph": '<script>alert("graph")</script>',
    "input": '"><img src=x onerror=alert(1)>',
    "conv": "</svg><b>conv</b>",
    "relu": "a & b <!-- c --> ' \" \u2028 </script>",
    "pool": "${x}`;alert(2)//",
}


def light_model(name: str) -> str:
    return os.path.join(LIGHT, f"light_{name}.onnx")


def small_graph(names: dict[str, str] | None = None):
    """conv -> relu -> tanh -> max_pool -> conv -> add: three groups under apollo."""
    n = {"graph": "small", "input": "x", "conv": "conv", "relu": "relu", "pool": "pool"} | (names or {})
    b = GraphBuilder(n["graph"])
    x = b.input(n["input"], (1, 3, 8, 8))
    c = b.conv(x, np.ones((4, 3, 3, 3), np.float32) / 27, name=n["conv"], pads=[1, 1, 1, 1])
    r = b.relu(c, name=n["relu"])
    t = b.tanh(r, name="tanh")
    p = b.max_pool(t, name=n["pool"], kernel_shape=[2, 2])
    c2 = b.conv(p, np.ones((2, 4, 1, 1), np.float32) / 4, name="conv2")
    b.output(b.add(c2, np.float32(1), name="out"))
    return b.build()


def small_plan(names=None, rules="apollo"):
    return fusionlang.fuse(small_graph(names), rules)


class Elements(HTMLParser):
    """Every start tag with its attributes, and the text of script blocks."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.scripts: list[tuple[dict, str]] = []
        self._script = None
        self._view = None
        self.text: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "svg":
            self._view = attrs.get("data-view")
        # "@view": the view ("ops" or "groups") of the graph SVG the element is in
        self.tags.append((tag, attrs | {"@view": self._view}))
        if tag == "script":
            self._script = (attrs, [])

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, dict(attrs) | {"@view": self._view}))

    def handle_endtag(self, tag):
        if tag == "svg":
            self._view = None
        if tag == "script" and self._script is not None:
            self.scripts.append((self._script[0], "".join(self._script[1])))
            self._script = None

    def handle_data(self, data):
        if self._script is not None:
            self._script[1].append(data)
        else:
            self.text.append(data)

    def with_class(self, tag: str, cls: str, view: str | None = None) -> list[dict]:
        """Attributes of each ``tag`` element of class ``cls`` (inside a graph of ``view``)."""
        return [a for t, a in self.tags if t == tag and cls in (a.get("class") or "").split()
                and (view is None or a["@view"] == view)]


def report_data(text: str) -> dict:
    (block,) = [body for attrs, body in Elements(text).scripts if attrs.get("id") == "report-data"]
    return json.loads(block)
