"""`fusionlang compile MODEL -o PATH`: fuse a model, compile it for the C target and save it
as an artifact directory (:mod:`fusionlang.backend.artifact`), which `fusionlang run PATH`
and ``fusionlang.load(PATH)`` run without compiling again."""

from __future__ import annotations

import json

from fusionlang.cli.common import (Stages, add_build_arguments, add_model_arguments, compile_graph, load_graph,
                                   parse_shapes)
from fusionlang.cli.input_ranges import integer_range
from fusionlang.cli.modes import EXIT_OK, console, wants_json
from fusionlang.stages import seconds_key, stage_times


def configure(p) -> None:
    add_model_arguments(p)
    p.add_argument("-o", "--output", required=True, metavar="PATH",
                   help="the artifact directory to write (created; an earlier artifact there is replaced)")
    add_build_arguments(p)


def run(args) -> int:
    out = console(args)
    with Stages(args) as stages:
        with stages.step("import"):
            graph = load_graph(args.model, parse_shapes(args.input_shape))
        plan, compiled = compile_graph(args, graph, stages, "c")
        with stages.step("save"):
            # what `fusionlang run PATH --random-inputs` seeds an integer input with, as for the model
            ranges = {name: integer_range(graph, name) for name in graph.inputs if not graph.types[name].is_float
                      and graph.types[name].dtype != "bool"}
            path = compiled.save(args.output, notes={"input_ranges": ranges})
    seconds = stage_times(plan.stats, compiled.stats)
    report = {"model": args.model, "artifact": str(path), "kernels": compiled.stats.kernels,
              **{seconds_key(stage): s for stage, s in seconds.items()}, "timings": stages.timings}
    if wants_json(args):
        print(json.dumps(report, indent=2))
    else:
        out.print(f"wrote {path} ({compiled.stats.kernels} kernels; `fusionlang run {path}` runs it)",
                  markup=False, highlight=False)
    return EXIT_OK
