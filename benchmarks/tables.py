"""Renders benchmarks/results/*.json as Markdown tables into docs/performance.md.

`python -m benchmarks.tables` replaces the block between the BENCHMARK TABLES markers of the
performance page with one table per full (non-quick) result file; `make bench` runs it last.
"""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
PAGE = ROOT / "docs" / "performance.md"
BLOCK = re.compile(
    r"(<!-- BENCHMARK TABLES:[^\n]*-->\n).*?(<!-- END BENCHMARK TABLES -->)", re.DOTALL
)
ORDER = (
    "write_copy",
    "write_resize",
    "write_beam",
    "sequence",
    "sequence_vs_pipeline",
    "workers",
    "pipeline_tfrecord",
    "pipeline_folder",
    "first_batch",
    "mixture",
    "other_loaders",
    "photos_128",
    "photos_224",
    "photos_color_128",
    "photos_color_224",
    "decode_costs_128",
    "decode_costs_224",
    "segmentation",
    "fit",
    "backends",
    "report",
    "echo",
    "listing_10000",
    "listing_100000",
    "listing_200000",
    "listing_1000000",
)

# `extra` entries of ratios measured in one process, the cases taking turns, or of the runs of
# one repeat (bench_mixture): what one ratio is.
_TAKING_TURNS = {
    "_batch_by_batch": "each epoch",
    "_turn_by_turn": "each turn",
    "_run_by_run": "each repeat",
}
# `extra` entries of µs per record of reads timed outside the cases: the floor of one path.
_PER_RECORD = "_us_per_record"
# `extra` entries of the memory a listing keeps and its peak, per file (bench_listing).
_PER_FILE = "tracemalloc_bytes_per_file"


def _figure(value: float) -> str:
    """A rate as the tables show it: whole numbers from 100 on, three figures below."""
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def by_size(report: dict[str, Any]) -> str:
    """A table of one row per dataset size (no baseline: sizes are compared with each other)."""
    columns = report["columns"]
    goals = "; ".join(f"{key.replace('_', ' ')} {goal}" for key, goal in report["goals"].items())
    lines = [
        f"**{report['title']}**: median of {report['repeats']} runs per size, measured "
        f"{report['when'][:10]}. Goals: {goals}.",
        "",
        "| examples | " + " | ".join(title for _, title, _ in columns) + " |",
        "|---:|" + "---:|" * len(columns),
    ]
    for row in report["rows"]:
        cells = " | ".join(fmt.format(row[key]) for key, _, fmt in columns)
        lines.append(f"| {row['examples']:,} | {cells} |")
    return "\n".join(lines)


def _median_and_range(spread: dict[str, float], fmt: str) -> str:
    return (
        f"{fmt.format(spread['median'])} ({fmt.format(spread['min'])}-{fmt.format(spread['max'])})"
    )


def with_spreads(report: dict[str, Any]) -> str:
    """Median (min-max) of every measure per case, and the ratios to the baseline run by run."""
    metric, keys = report["metric"], list(report["rows"][0]["spread"])
    others = [key for key in keys if key != metric]
    load = report["extra"].get("load_average_at_start")
    lines = [
        f"**{report['title']}**: median (min-max) of {report['repeats']} runs, measured "
        f"{report['when'][:10]}"
        + ("" if load is None else f" (load average {load[0]:.1f} at the start)")
        + f", ratios to *{report['baseline']}*: of the medians, and of each run to the "
        "baseline's run of the same repeat (min, median).",
        "",
        f"| case | {metric.replace('_per_s', '/s')} | ratio | ratio per run (min, median) | "
        + " | ".join(key.replace("_", " ") for key in others)
        + " | peak RSS (MB) |",
        "|---|---:|---:|---:|" + "---:|" * len(others) + "---:|",
    ]
    metric_format = "{:.2f}" if metric.endswith("_s") else "{:,.0f}"  # seconds or a rate
    for row in report["rows"]:
        paired = row.get("paired_ratios")
        per_run = "" if paired is None else f"{min(paired):.2f}, {statistics.median(paired):.2f}"
        cells = " | ".join(_median_and_range(row["spread"][key], "{:.2f}") for key in others)
        lines.append(
            f"| {row['case']} | {_median_and_range(row['spread'][metric], metric_format)} "
            f"| {row['ratio']:.2f} | {per_run} | {cells} | {row['peak_rss_mb']:,.0f} |"
        )
    for case, reason in report.get("not_run", {}).items():
        reason = " ".join(reason.replace("|", "/").split())  # one table cell
        lines.append(f"| {case} | not run: {reason} |" + " |" * (3 + len(others)))
    return "\n".join(lines + extra_lines(report["extra"]))


def _shares_line(shares: dict[str, Any]) -> str:
    """The shares a mixture's sources got, against the weights asked."""
    asked = ", ".join(f"{w:.2f}" for w in shares["asked"])
    each = "; ".join(
        f"*{case}* "
        + ", ".join(f"{s:.4f}" for s in shares[case]["shares"])
        + f" (|error| ≤ {max(shares[case]['errors']):.4f})"
        for case in ("tfpipe", "tf.data")
    )
    seeds = shares["tf.data_max_error_per_seed"]
    return (
        f"\nShares of the sources over {shares['tfpipe']['examples']:,} examples, asked "
        f"{asked}: {each}; `sample_from_datasets` over {len(seeds)} seeds, largest |error| "
        f"{min(seeds):.4f} to {max(seeds):.4f}."
    )


def echo_table(report: dict[str, Any]) -> str:
    """bench_echo's rows: per job and echo factor, steps/s, fresh examples/s and the
    validation accuracy reached in the same wall-clock budget, with each job's gap."""
    extra = report["extra"]
    start, end = extra["load_average_at_start"], extra["load_average_at_end"]
    lines = [
        f"**{report['title']}**: median (min-max) of {report['repeats']} runs of "
        f"{extra['budget_s']} s of training each, measured {report['when'][:10]} (load average "
        f"{start[0]:.1f} at the start, {end[0]:.1f} at the end); steps/s ratio to the same "
        "pipeline's factor 1: of the medians, and run by run (min, median).",
        "",
        "| job | factor | steps/s | ratio to factor 1 | per run (min, median) "
        "| fresh examples/s | val accuracy |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in report["rows"]:
        spread, per_run = row["spread"], row["ratios_to_factor_1"]
        job = row["job"] + (", hand-written tf.data" if row["by_hand"] else "")
        lines.append(
            f"| {job} | {row['factor']} | {_median_and_range(spread['steps_per_s'], '{:.1f}')} "
            f"| {row['ratio_to_factor_1']:.2f} "
            f"| {min(per_run):.2f}, {statistics.median(per_run):.2f} "
            f"| {_median_and_range(spread['fresh_examples_per_s'], '{:,.0f}')} "
            f"| {_median_and_range(spread['val_accuracy'], '{:.3f}')} |"
        )
    for job, facts in extra["jobs"].items():
        lines.append(
            f"\n*{job}*: model alone {facts['model_steps_per_s']:.1f} steps/s, input alone "
            f"{facts['input_steps_per_s']:.1f}, delivered in fit at factor 1 "
            f"{facts['delivered_steps_per_s']:.1f} (medians): gap {facts['gap']:.2f}x, "
            f"`echo_factor_for` advises factor {facts['advised_factor']}."
        )
    pair = next(row for row in report["rows"] if "paired_ratios" in row)
    each = ", ".join(f"{r:.2f}" for r in pair["paired_ratios"])
    lines.append(
        f"\n*{pair['case']}* / *{pair['paired_with']}*, steps/s, the two runs of each repeat: "
        f"{each}; median **{pair['paired_ratio']:.2f}**."
    )
    return "\n".join(lines)


def table(report: dict[str, Any]) -> str:
    """One Markdown table: case, median, ratio to the baseline, goal and whether it was met."""
    if "columns" in report:
        return by_size(report)
    if "jobs" in report["extra"]:
        return echo_table(report)
    if report["rows"] and "spread" in report["rows"][0]:
        return with_spreads(report)
    metric = report["metric"].replace("_per_s", "/s")
    lines = [
        f"**{report['title']}**: median of {report['repeats']} runs, measured "
        f"{report['when'][:10]}, ratios to *{report['baseline']}*.",
        "",
        f"| case | {metric} | ratio | goal | peak RSS (MB) |",
        "|---|---:|---:|---|---:|",
    ]
    for row in report["rows"]:
        goal = (
            ""
            if row["goal"] is None
            else f"≥ {row['goal']:.2f} " + ("met" if row["met"] else "**missed**")
        )
        lines.append(
            f"| {row['case']} | {_figure(row[report['metric']])} | {row['ratio']:.2f} | {goal} "
            f"| {row['peak_rss_mb']:,.0f} |"
        )
    if report["metric"] == "runs_per_s":  # commands timed run by run (bench_cli.py)
        cpu = "; ".join(
            f"*{row['case']}* {statistics.median(r['cpu_s'] for r in row['runs']):.2f} s"
            for row in report["rows"]
        )
        lines.append(f"\nCPU time per run (user + system, median): {cpu}.")
    if all("cpu_ms_per_batch" in r for row in report["rows"] for r in row["runs"]):
        cpu = "; ".join(
            f"*{row['case']}* {statistics.median(r['cpu_ms_per_batch'] for r in row['runs']):.1f}"
            for row in report["rows"]
        )
        lines.append(f"\nCPU time per batch, all threads of the process (ms, median): {cpu}.")
    if "goal_s" in report["extra"]:  # a wall time goal, for the last case (bench_cli.py)
        seconds, goal = 1 / report["rows"][-1][report["metric"]], report["extra"]["goal_s"]
        lines.append(
            f"\n*{report['rows'][-1]['case']}*: {seconds:.2f} s per run, goal < {goal} s "
            f"({'met' if seconds < goal else '**missed**'}); TensorFlow imported: "
            f"{report['extra']['tensorflow_imported']}."
        )
    for row in report["rows"]:
        if "paired_ratio" in row:
            each = ", ".join(f"{r:.2f}" for r in row["paired_ratios"])
            lines.append(
                f"\n*{row['case']}* / *{row['paired_with']}*, the two runs of each repeat: "
                f"{each}; median **{row['paired_ratio']:.2f}**."
            )
    return "\n".join(lines + extra_lines(report["extra"]))


def extra_lines(extra: dict[str, Any]) -> list[str]:
    """The lines of the `extra` entries a table shows below it: ratios run by run, shares of
    a mixture's sources, µs per record."""
    lines = []
    for name, by_case in extra.items():
        unit = next((u for s, u in _TAKING_TURNS.items() if name.endswith(s)), None)
        if unit is not None:
            for case, result in by_case.items():
                if not (isinstance(result, dict) and "ratios" in result):
                    continue  # times per turn (not ratios): the JSON keeps them
                each = ", ".join(f"{r:.3f}" for r in result["ratios"])
                lines.append(
                    f"\n{name.replace('_', ' ')}, {case}, {unit}: "
                    f"{each}; median **{result['median']:.3f}**."
                )
        if name == "note":  # how the rows came about, when not from one run
            lines.append(f"\n{by_case}")
        if name == "realised_shares":  # sources' shares of a mixture (bench_mixture)
            lines.append(_shares_line(by_case))
        if name.endswith(_PER_RECORD):  # bare reads timed beside the cases (bench_filesystems)
            each = ", ".join(f"*{case}* {us:.2f}" for case, us in by_case.items())
            lines.append(f"\n{name[: -len(_PER_RECORD)].replace('_', ' ')}, µs per record: {each}.")
        if name == _PER_FILE:
            each = "; ".join(
                f"*{case}* {used['kept']:.0f} ({used['peak']:.0f})"
                for case, used in by_case.items()
            )
            lines.append(f"\nBytes per file kept (peak while listing), tracemalloc: {each}.")
    return lines


def render() -> str:
    """Every full result file, in benchmark order, as Markdown."""
    reports = {
        path.stem: json.loads(path.read_text())
        for path in RESULTS.glob("*.json")
        if not path.stem.endswith("-quick")
    }
    # bench_engines' files hold line fits per engine, not rows: its section is written by hand
    reports = {name: r for name, r in reports.items() if "metric" in r or "columns" in r}
    names = [n for n in ORDER if n in reports] + sorted(set(reports) - set(ORDER))
    return "\n\n".join(table(reports[name]) for name in names)


def main() -> None:
    tables = render()
    if not tables:
        raise SystemExit(f"no full results in {RESULTS}: run `make bench` first")
    page = PAGE.read_text()
    if not BLOCK.search(page):
        raise SystemExit(f"{PAGE} has no BENCHMARK TABLES markers")
    PAGE.write_text(BLOCK.sub(lambda m: f"{m[1]}\n{tables}\n\n{m[2]}", page))
    print(f"wrote {len(tables.splitlines())} lines of tables into {PAGE.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
