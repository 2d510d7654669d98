"""Drill output: a table for people, JSON for scripts, a timeline picture (matplotlib)."""

from __future__ import annotations

import json
from pathlib import Path

from dnsd.drill.plots import pyplot
from dnsd.drill.runner import DrillResult, label


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}s"


def table(results: list[DrillResult]) -> str:
    head = f"{'scenario':<18} {'bound':>7} {'detect':>8} {'client':>8} {'failback':>9} {'queries':>8} {'lost':>5}  result"
    lines = [head, "-" * len(head)]
    for r in results:
        lines.append(
            f"{r.scenario:<18} {_s(r.bound_s):>7} {_s(r.detect_s):>8} {_s(r.client_s):>8} "
            f"{_s(r.failback_s):>9} {r.queries:>8} {r.lost:>5}  {'PASS' if r.passed else 'FAIL'}"
        )
        for check, ok in r.checks.items():
            if not ok:
                lines.append(f"    failed: {check}")
        lines.extend(f"    {note}" for note in r.notes)
    return "\n".join(lines)


def write_json(results: list[DrillResult], path: Path) -> None:
    data = [r.to_json() for r in results]
    path.write_text(json.dumps(data[0] if len(data) == 1 else data, indent=2) + "\n")


def plot(result: DrillResult, path: Path) -> None:
    plt = pyplot()

    lanes = [
        lane for lane in ("dnsd", "resolver") if any(name == lane for name, _ in result.timeline)
    ]
    fig, axes = plt.subplots(
        len(lanes), 1, figsize=(11, 2.4 + 1.6 * len(lanes)), sharex=True, squeeze=False
    )
    categories: list[str] = []
    for _, answer in result.timeline:
        name = "LOST" if answer.lost else label(answer.addresses)
        if name not in categories:
            categories.append(name)
    colours = plt.get_cmap("tab10")
    for ax, lane in zip(axes[:, 0], lanes, strict=True):
        points = [
            (a.at, "LOST" if a.lost else label(a.addresses), a.lost)
            for name, a in result.timeline
            if name == lane
        ]
        for i, category in enumerate(categories):
            xs = [t for t, c, _ in points if c == category]
            if xs:
                colour = "black" if category == "LOST" else colours(i % 10)
                ax.scatter(
                    xs,
                    [category] * len(xs),
                    s=14,
                    color=colour,
                    marker="x" if category == "LOST" else "o",
                )
        ax.set_ylabel(f"{lane}\nanswer", rotation=0, ha="right", va="center")
        ax.set_ylim(-0.6, len(categories) - 0.4)
        ax.grid(axis="x", alpha=0.3)
        if result.fault_at is not None:
            end = (
                result.recovered_at
                if result.recovered_at is not None
                else max(a.at for _, a in result.timeline)
            )
            ax.axvspan(result.fault_at, end, color="red", alpha=0.08, label="fault")
            ax.axvline(
                result.fault_at + result.bound_s,
                color="red",
                linestyle="--",
                linewidth=1,
                label=f"bound {result.bound_s:.1f}s",
            )
            marker = result.detect_s if lane == "dnsd" else result.client_s
            if marker is not None:
                ax.axvline(
                    result.fault_at + marker,
                    color="green",
                    linewidth=1,
                    label=f"moved after {marker:.2f}s",
                )
            if lane != "dnsd" and result.failback_s is not None and result.recovered_at is not None:
                ax.axvline(
                    result.recovered_at + result.failback_s,
                    color="blue",
                    linewidth=1,
                    label=f"failback {result.failback_s:.2f}s",
                )
            ax.legend(loc="upper left", fontsize=8, framealpha=0.8)
    axes[-1, 0].set_xlabel("seconds since the drill started")
    verdict = "PASS" if result.passed else "FAIL"
    fig.suptitle(
        f"dnsd drill {result.scenario}: {verdict} · TTL {result.ttl_s:g}s · interval {result.interval_s:g}s × "
        f"{result.unhealthy_threshold} · {result.queries} queries, {result.lost} lost"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
