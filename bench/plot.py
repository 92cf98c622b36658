"""The figures of BENCHMARKS.md, drawn from the JSON the load benchmark writes.

    plot.py LOAD_JSON --out DIR     draw the figures (matplotlib) into DIR as SVG
    plot.py LOAD_JSON --check DIR BENCHMARKS_MD
                                    check, with the standard library only, that the figures in
                                    DIR and the Results table of BENCHMARKS_MD are of this run

scripts/bench.sh runs it after the benchmark (scripts/bench.sh --quick into target/bench/, a
default-size run into bench/figures/, the JSON copied beside the figures) and scripts/test.sh
runs the check. Each figure carries the run it was drawn from (the commit and the time the
JSON records) in its metadata, and every client is drawn in the same colour in every figure:
the host, raw rmcp, the TypeScript client and the bare loop (the floor).
"""

import json
import re
import sys
from pathlib import Path

CLIENTS = [
    ("host", "plurnk-mcp host", "#1f6fb4"),
    ("rmcp", "raw rmcp", "#e07b10"),
    ("ts", "TypeScript client", "#2a9d4b"),
    ("bare", "bare loop (floor)", "#7f7f7f"),
]

FIGURES = ["latency.svg", "throughput.svg", "hydration.svg", "memory.svg"]


def run_id(report):
    """What names the run: its commit and the time it ended."""
    return f"{report.get('commit') or 'unknown'} {report.get('unix_time', 0)}"


def workloads(report):
    return {workload["id"]: workload for workload in report["workloads"]}


def median(workload, client, metric):
    value = workload["clients"].get(client, {}).get("median", {}).get(metric)
    return value if isinstance(value, (int, float)) else None


def hydration_sizes(by_id):
    sizes = []
    for key in by_id:
        match = re.fullmatch(r"hydrate-(\d+)", key)
        if match:
            sizes.append(int(match.group(1)))
    return sorted(sizes)


def draw(report, out):
    """Draws the four figures of `report` into `out`."""
    import matplotlib

    matplotlib.use("svg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    plt.rcParams.update(
        {
            # The same bytes for the same JSON: no random ids, text kept as text.
            "svg.hashsalt": "plurnk-mcp",
            "svg.fonttype": "none",
            "font.family": "DejaVu Sans",
            "font.size": 10,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "axes.grid": True,
            "grid.alpha": 0.3,
        }
    )
    by_id = workloads(report)
    metadata = {"Date": None, "Title": f"plurnk-mcp load benchmark, run {run_id(report)}"}
    mode = report.get("mode", "?")
    build = report.get("build", "?")
    machine = report.get("machine", {})
    subtitle = (
        f"{mode} sizes, {build} build, median of {report.get('reps', '?')}; "
        f"{machine.get('cpus', '?')} CPUs"
    )
    out.mkdir(parents=True, exist_ok=True)

    def bars(ax, groups, unit):
        """Grouped bars: one group per entry of `groups` (label, workload, metric), one
        bar per client that measured it, its value written above it."""
        width = 0.8 / len(CLIENTS)
        for c, (client, name, colour) in enumerate(CLIENTS):
            xs, ys = [], []
            for g, (_, workload, metric) in enumerate(groups):
                value = median(workload, client, metric) if workload else None
                if value is not None:
                    xs.append(g + (c - (len(CLIENTS) - 1) / 2) * width)
                    ys.append(value)
            if not xs:
                continue
            drawn = ax.bar(xs, ys, width * 0.95, label=name, color=colour)
            ax.bar_label(drawn, labels=[compact(y) for y in ys], fontsize=7, padding=2)
        ax.set_xticks(range(len(groups)), [label for label, _, _ in groups])
        ax.set_ylabel(unit)
        ax.grid(axis="x", visible=False)

    # 1. Latency of sequential calls.
    seq = by_id.get("seq")
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    bars(ax, [("p50", seq, "p50_us"), ("p99", seq, "p99_us")], "µs per call (lower is better)")
    ax.set_title(f"{seq['label'] if seq else 'sequential calls'}: latency\n{subtitle}", fontsize=10)
    legend_below(ax, 4)
    fig.tight_layout()
    fig.savefig(out / "latency.svg", metadata=metadata)
    plt.close(fig)

    # 2. Throughput with 64 in flight.
    conc, spread = by_id.get("conc"), by_id.get("spread")
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    bars(
        ax,
        [
            ("1 server", conc, "calls_per_s"),
            (f"{spread['workload'].get('servers', '')} servers" if spread else "spread", spread, "calls_per_s"),
        ],
        "calls/s (higher is better)",
    )
    in_flight = conc["workload"].get("c", 64) if conc else 64
    ax.set_title(f"Throughput, {in_flight} calls in flight\n{subtitle}", fontsize=10)
    legend_below(ax, 4)
    fig.tight_layout()
    fig.savefig(out / "throughput.svg", metadata=metadata)
    plt.close(fig)

    # 3 and 4. Hydration time and memory per attachment against the number of servers.
    sizes = hydration_sizes(by_id)
    inproc = by_id.get("inproc")
    inproc_servers = inproc["workload"].get("servers") if inproc else None
    for name, metric, unit, title in [
        ("hydration.svg", "ready_ms", "ms until all ready (lower is better)", "Hydration time"),
        (
            "memory.svg",
            "per_attachment_kib",
            "client KiB per attachment, RSS (lower is better)",
            "Memory per attachment",
        ),
    ]:
        fig, ax = plt.subplots(figsize=(7.5, 5))
        for client, label, colour in CLIENTS:
            points = [
                (n, median(by_id[f"hydrate-{n}"], client, metric))
                for n in sizes
            ]
            points = [(n, v) for n, v in points if v is not None]
            if points:
                ax.plot(
                    [n for n, _ in points],
                    [v for _, v in points],
                    marker="o",
                    color=colour,
                    label=f"{label}, stdio",
                )
                # The host's own points are labelled; the others crowd them at these
                # scales, and the Results table holds every figure.
                for n, v in points if client == "host" else []:
                    ax.annotate(compact(v), (n, v), textcoords="offset points", xytext=(-6, 8), ha="right", fontsize=7, color=colour)
            value = median(inproc, client, metric) if inproc else None
            if value is not None and inproc_servers:
                ax.plot([inproc_servers], [value], marker="s", fillstyle="none", linestyle="none", color=colour, markersize=8, label=f"{label}, in-process")
                if client == "host":
                    ax.annotate(compact(value), (inproc_servers, value), textcoords="offset points", xytext=(-6, 8), ha="right", fontsize=7, color=colour)
        ax.set_xscale("log")
        if metric == "ready_ms":
            ax.set_yscale("log")
            ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
            ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:,.0f}"))
        ticks = sizes + ([inproc_servers] if inproc_servers else [])
        ax.set_xticks(ticks, [f"{n:,}" for n in ticks])
        ax.minorticks_off()
        ax.set_xlabel("servers (stdio: spawned processes; in-process: tokio duplex pairs)")
        ax.set_ylabel(unit)
        ax.set_title(f"{title} against the number of servers\n{subtitle}", fontsize=10)
        legend_below(ax, 4)
        fig.tight_layout()
        fig.savefig(out / name, metadata=metadata)
        plt.close(fig)


def legend_below(ax, columns):
    """The legend under the axes, where it covers no data."""
    ax.legend(frameon=False, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=columns)


def compact(value):
    """A figure as the table writes it, short: 3 significant digits, thousands separated."""
    if value >= 100 or value == int(value):
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


# What the table calls each metric (examples/load/report.rs: metric_info).
METRIC_NAMES = {
    "p50 µs": "p50_us",
    "p99 µs": "p99_us",
    "calls/s": "calls_per_s",
    "client CPU µs/call": "cpu_us_per_call",
    "wall ms until all ready": "ready_ms",
    "client KiB per attachment (RSS)": "per_attachment_kib",
    "client KiB per attachment (heap)": "heap_per_attachment_kib",
    "client context switches/call": "switches_per_call",
    "client peak RSS KiB": "peak_kib",
    "calls ok": "ok",
    "calls failed (typed error)": "failed",
    "calls lost": "lost",
    "disable/enable commit p50 ms": "commit_p50_ms",
    "disable/enable commit p99 ms": "commit_p99_ms",
    "disable+enable cycles": "cycles",
}


def check(report, figures, benchmarks):
    """Faults, if any: a figure missing or drawn from another run, a Results cell that is not
    this run's median."""
    faults = []
    wanted = f"plurnk-mcp load benchmark, run {run_id(report)}"
    for name in FIGURES:
        path = figures / name
        if not path.exists():
            faults.append(f"{path} is missing: run scripts/bench.sh")
        elif wanted not in path.read_text(encoding="utf-8"):
            faults.append(f"{path} was not drawn from this run ({run_id(report)})")
    by_label = {workload["label"]: workload for workload in report["workloads"]}
    text = benchmarks.read_text(encoding="utf-8")
    section = text.split("## Results", 1)[-1].split("\n## ", 1)[0]
    label, checked = None, 0
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 6 or cells[1] == "metric" or cells[1].startswith("-"):
            continue
        label = cells[0] or label
        workload, metric = by_label.get(label), METRIC_NAMES.get(cells[1])
        if workload is None or metric is None:
            faults.append(f"BENCHMARKS.md: {label} / {cells[1]} is not in this run")
            continue
        for (client, _, _), cell in zip(CLIENTS, cells[2:]):
            shown = re.match(r"[\d,]+(\.\d+)?", cell)
            value = median(workload, client, metric)
            if shown is None or value is None:
                if (shown is None) != (value is None) and cell not in ("–", "-"):
                    faults.append(f"BENCHMARKS.md: {label} / {cells[1]} / {client}: {cell!r} against {value}")
                continue
            number = float(shown.group(0).replace(",", ""))
            decimals = len(shown.group(1)) - 1 if shown.group(1) else 0
            if abs(number - value) > 0.5 * 10 ** -decimals + 1e-9:
                faults.append(f"BENCHMARKS.md: {label} / {cells[1]} / {client}: {cell} against {value:.4g}")
            checked += 1
    if checked == 0:
        faults.append("BENCHMARKS.md: no figure of the Results table was read")
    return faults


def main(argv):
    if len(argv) == 4 and argv[2] == "--out":
        report = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
        draw(report, Path(argv[3]))
        print(f"plot: {', '.join(FIGURES)} in {argv[3]} (run {run_id(report)})", file=sys.stderr)
        return 0
    if len(argv) == 5 and argv[2] == "--check":
        report = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
        faults = check(report, Path(argv[3]), Path(argv[4]))
        for fault in faults:
            print(f"plot: {fault}", file=sys.stderr)
        if not faults:
            print(f"plot: the figures and the Results table are of run {run_id(report)}", file=sys.stderr)
        return 1 if faults else 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
