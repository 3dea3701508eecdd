"""Each model's own report page (``fusionlang fuse --report``), under both policies, for
the sweep page to link to: fused again (no compile) on the sweep's executor, the pages
written beside the sweep page, in a folder of their own."""

from __future__ import annotations

from pathlib import Path

from fusionlang.executors import Done, run_all
from fusionlang.sweep.build import BuildJob


def model_report(job: BuildJob) -> str:
    """The HTML report of ``job``'s model fused with its policy."""
    from fusionlang.api import from_onnx, fuse
    from fusionlang.report import render_report

    plan = fuse(from_onnx(job.model), job.policy.rules, job.policy.strategy,
                options=dict(job.policy.options) or None)
    return render_report(plan, title=f"{Path(job.model).stem} under {job.policy.rules}")


def write_model_reports(rows: list[dict], policies: dict, folder: Path, *, jobs, ray, progress) -> None:
    """Write the report of every ok row under each policy (``policies``: side -> Policy)
    into ``folder``, and set the row's ``reports`` (side -> path relative to the folder's
    parent, where the sweep page is). A report that fails is left out: the row keeps its
    numbers."""
    from fusionlang.cli.paths import output_directory, write_text

    ok = [(number, row) for number, row in enumerate(rows, 1) if row["status"] == "ok"]
    wanted = {f"{side}:{number}": BuildJob(row["model"], policy) for number, row in ok
              for side, policy in policies.items()}
    outcomes = run_all(model_report, wanted, jobs=jobs, ray=ray, progress=progress)
    output_directory(folder)
    for number, row in ok:
        row["reports"] = {}
        for side in policies:
            outcome = outcomes[f"{side}:{number}"]
            if isinstance(outcome, Done):
                # numbered: two listed models may share a file name
                name = f"{number:03d}-{Path(row['model']).stem}-{side}.html"
                write_text(folder / name, str(outcome.value))
                row["reports"][side] = f"{folder.name}/{name}"
