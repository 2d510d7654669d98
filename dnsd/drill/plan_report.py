"""A drill plan's output: a table for people, JSON for scripts, JUnit XML for CI, a
self-contained HTML report and one timeline picture per step (matplotlib)."""

from __future__ import annotations

import base64
import html
import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path

from dnsd.drill.plan_results import PlanResult, StepResult
from dnsd.drill.plots import HINT, available, pyplot


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}s"


def table(result: PlanResult) -> str:
    head = f"{'step':<5} {'expectation':<58} {'bound':>7} {'dnsd':>7} {'clients':>8} {'lost':>5}  result"
    lines = [f"drill plan {result.plan.name!r} ({result.plan.file})", head, "-" * len(head)]
    for s in result.steps:
        for e in s.expectations:
            data = e.to_json()
            lines.append(
                f"{s.step.index:<5} {e.label[:58]:<58} {_s(e.bound.seconds):>7} "
                f"{_s(data['detect_s']):>7} {_s(data['client_s']):>8} {data['lost']:>5}  "
                f"{'PASS' if e.passed else 'FAIL'}"
            )
            if not e.passed:
                lines.append(f"      failed: {e.label} (line {e.expectation.line}): {e.message}")
        lines.extend(f"      note: {note}" for note in s.notes)
    for error in result.errors:
        lines.append(f"error: {error}")
    if result.interrupted:
        lines.append(f"{result.interrupted}: every fault was restored")
    held = sum(e.passed for e in result.expectations)
    lines.append(
        f"{held}/{len(result.expectations)} expectations held: "
        f"{'PASS' if result.passed else 'FAIL'}"
    )
    return "\n".join(lines)


def write_json(result: PlanResult, path: Path) -> None:
    path.write_text(json.dumps(result.to_json(), indent=2) + "\n")


def junit(result: PlanResult) -> str:
    """JUnit XML: one testsuite (the plan), one testcase per expectation, a <failure> for
    each that did not hold (GitLab, Jenkins, GitHub test reporters read this)."""
    cases = result.expectations
    failed = [e for e in cases if not e.passed]
    suite = ET.Element(
        "testsuite",
        name=f"dnsd drill: {result.plan.name}",
        tests=str(len(cases) or 1),
        failures=str(len(failed)),
        errors=str(len(result.errors) + bool(result.interrupted)),
        time=f"{max((s.finished_at for s in result.steps), default=0.0):.3f}",
    )
    for s in result.steps:
        for e in s.expectations:
            lanes = ", ".join(f"{x.lane} {_s(x.measured_s)}" for x in e.lanes)
            if e.ramp is not None:  # a ramp: the shares per step
                lanes += f"; {e.ramp.summary()}"
            case = ET.SubElement(
                suite,
                "testcase",
                classname=f"step {s.step.index}: {s.step.name}",
                name=e.label,
                file=result.plan.file,
                line=str(e.expectation.line),
                time=f"{max((x.measured_s or 0.0 for x in e.lanes), default=0.0):.3f}",
            )
            ET.SubElement(
                case, "system-out"
            ).text = f"bound {e.bound.seconds:.2f}s = {e.bound.formula}; measured: {lanes}"
            if not e.passed:
                failure = ET.SubElement(case, "failure", message=f"{e.label}: {e.message}")
                failure.text = f"{result.plan.file}:{e.expectation.line}: {e.label}: {e.message}"
    if result.errors or result.interrupted or not cases:
        case = ET.SubElement(suite, "testcase", classname="drill", name="the drill ran")
        if result.errors or result.interrupted:
            error = ET.SubElement(case, "error", message=result.interrupted or result.errors[0])
            error.text = "\n".join(result.errors)
    ET.indent(suite)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"
    )


def plot_step(result: PlanResult, step: StepResult, target: Path | io.BytesIO) -> None:
    """The answers of every lane over the step's time, with the bounds marked."""
    plt = pyplot()

    lanes = list(dict.fromkeys(lane for lane, _ in step.timeline)) or ["(no queries)"]
    fig, axes = plt.subplots(
        len(lanes), 1, figsize=(11, 1.6 + 1.4 * len(lanes)), sharex=True, squeeze=False
    )

    def name_of(addrs: tuple[str, ...]) -> str:
        return " ".join(result.names.get(a, a) for a in addrs) or "-"

    categories = list(
        dict.fromkeys("LOST" if a.lost else name_of(a.addresses) for _, a in step.timeline)
    )
    colours = plt.get_cmap("tab10")
    bound_of = {
        f"{e.expectation.name} from {e.expectation.vantage or 'here'} @": e.bound.seconds
        for e in step.expectations
    }
    for ax, lane in zip(axes[:, 0], lanes, strict=True):
        points = [(a.at - step.started_at, a) for name, a in step.timeline if name == lane]
        for i, category in enumerate(categories):
            xs = [t for t, a in points if ("LOST" if a.lost else name_of(a.addresses)) == category]
            if xs:
                lost = category == "LOST"
                ax.scatter(
                    xs,
                    [category] * len(xs),
                    s=14,
                    marker="x" if lost else "o",
                    color="black" if lost else colours(i % 10),
                )
        ax.set_ylim(-0.6, max(len(categories), 1) - 0.4)
        ax.set_title(lane, fontsize=8, loc="left")
        ax.grid(axis="x", alpha=0.3)
        ax.axvline(0.0, color="red", linewidth=1)
        bound = next((b for prefix, b in bound_of.items() if lane.startswith(prefix)), None)
        if bound is not None:
            ax.axvline(bound, color="red", linestyle="--", linewidth=1, label=f"bound {bound:.1f}s")
            ax.legend(loc="upper right", fontsize=7, framealpha=0.8)
    axes[-1, 0].set_xlabel(f"seconds since step {step.step.index} began ({step.step.name})")
    fig.suptitle(
        f"{result.plan.name} · step {step.step.index}: {step.step.name} · "
        f"{'PASS' if step.passed else 'FAIL'}",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(target, dpi=100, format="png")
    plt.close(fig)


def plot_steps(result: PlanResult, directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for step in result.steps:
        path = directory / f"step-{step.step.index:02d}.png"
        plot_step(result, step, path)
        paths.append(path)
    return paths


def html_report(result: PlanResult) -> str:
    """One file, nothing fetched: the plan, the bounds, the measured times, a picture per step."""
    esc = html.escape
    rows = []
    for s in result.steps:
        for e in s.expectations:
            lanes = "<br>".join(f"{esc(x.lane)}: {_s(x.measured_s)}" for x in e.lanes)
            if e.ramp is not None:
                lanes += f"<br><small>{esc(e.ramp.summary())}</small>"
            verdict = "PASS" if e.passed else "FAIL"
            rows.append(
                f"<tr class={verdict.lower()}><td>{s.step.index}</td><td>{esc(e.label)}</td>"
                f"<td>{e.bound.seconds:.2f}s<br><small>{esc(e.bound.formula)}</small></td>"
                f"<td>{lanes}</td><td>{sum(x.lost for x in e.lanes)}</td>"
                f"<td>{verdict}{'<br><small>' + esc(e.message) + '</small>' if e.message else ''}</td></tr>"
            )
    pictures = [] if available() else [f"<p>{esc(HINT)}</p>"]  # the tables are all there
    for s in result.steps if available() else ():
        buffer = io.BytesIO()
        plot_step(result, s, buffer)
        data = base64.b64encode(buffer.getvalue()).decode()
        pictures.append(
            f"<h3>Step {s.step.index}: {esc(s.step.name)}</h3>"
            f'<img alt="timeline of step {s.step.index}" src="data:image/png;base64,{data}">'
        )
    errors = "".join(f"<p class=fail>error: {esc(x)}</p>" for x in result.errors)
    verdict = "PASS" if result.passed else "FAIL"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>dnsd drill: {esc(result.plan.name)}</title>
<style>
body {{ font: 14px system-ui, sans-serif; margin: 2em; }}
table {{ border-collapse: collapse; }} td, th {{ border: 1px solid #ccc; padding: 4px 8px; vertical-align: top; }}
tr.pass td:last-child, .pass {{ color: #060; }} tr.fail td:last-child, .fail {{ color: #a00; }}
pre {{ background: #f6f6f6; padding: 1em; }} img {{ max-width: 100%; }}
</style></head><body>
<h1>dnsd drill: {esc(result.plan.name)} — <span class={verdict.lower()}>{verdict}</span></h1>
<p>{sum(e.passed for e in result.expectations)}/{len(result.expectations)} expectations held.
Bounds: interval × unhealthy_threshold + timeout + TTL (failback: × healthy_threshold), plus
{1.0:g}s of slack for polling.</p>{errors}
<table><tr><th>step</th><th>expectation</th><th>bound</th><th>measured</th><th>lost</th><th>result</th></tr>
{"".join(rows)}
</table>
<h2>Timelines</h2>
{"".join(pictures)}
<h2>The plan ({esc(result.plan.file)})</h2>
<pre>{esc(result.plan.text)}</pre>
</body></html>
"""
