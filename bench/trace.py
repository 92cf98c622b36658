#!/usr/bin/env python3
"""The README's trace picture, drawn from spans a real OTLP receiver got.

    python3 bench/trace.py target/telemetry/trace.json bench/figures/otel-trace.svg

The input is what `crates/cli/tests/telemetry.rs` writes when its end-to-end test passes
(`one_trace_runs_from_a_python_client_through_the_gateway_and_the_host_into_a_python_server`):
the spans of one call's trace, as its receiver decoded them from the OTLP/HTTP stream, and the
hydration beside it. The picture is a waterfall, one bar per span, each under its parent, placed
by its own start and end times; standard library only (SVG written by hand).
"""

from __future__ import annotations

import json
import sys
from html import escape
from pathlib import Path

WIDTH = 960
LABEL = 430
ROW = 30
TOP = 64
COLOURS = {
    "python-otel-client": "#4c78a8",
    "plurnk-mcp": "#f58518",
    "python-otel-server": "#54a24b",
}


def ordered(spans: list[dict]) -> list[tuple[dict, int]]:
    """Spans parent before child, siblings by start time, each with its depth."""
    ids = {span["span_id"] for span in spans}
    children: dict[str, list[dict]] = {}
    roots = []
    for span in spans:
        parent = span["parent_span_id"]
        if parent and parent in ids:
            children.setdefault(parent, []).append(span)
        else:
            roots.append(span)
    out: list[tuple[dict, int]] = []

    def walk(span: dict, depth: int) -> None:
        out.append((span, depth))
        for child in sorted(children.get(span["span_id"], []), key=lambda s: s["start_unix_nano"]):
            walk(child, depth + 1)

    for root in sorted(roots, key=lambda s: s["start_unix_nano"]):
        walk(root, 0)
    return out


def draw(title: str, spans: list[dict], y: int, parts: list[str]) -> int:
    rows = ordered(spans)
    start = min(span["start_unix_nano"] for span in spans)
    end = max(span["end_unix_nano"] for span in spans)
    total = max(end - start, 1)
    scale = (WIDTH - LABEL - 70) / total
    parts.append(f'<text x="12" y="{y}" class="title">{escape(title)}</text>')
    y += 14
    for span, depth in rows:
        x = LABEL + (span["start_unix_nano"] - start) * scale
        w = max((span["end_unix_nano"] - span["start_unix_nano"]) * scale, 1.5)
        ms = (span["end_unix_nano"] - span["start_unix_nano"]) / 1e6
        colour = COLOURS.get(span["service"], "#999999")
        kind = span["kind"].lower()
        label = f'{span["name"]}  ({kind}, {span["service"]})'
        parts.append(
            f'<text x="{12 + depth * 16}" y="{y + 15}" class="label">{escape(label)}</text>'
            f'<rect x="{x:.1f}" y="{y + 4}" width="{w:.1f}" height="{ROW - 10}" rx="3" fill="{colour}"/>'
            f'<text x="{min(x + w + 4, WIDTH - 60):.1f}" y="{y + 15}" class="ms">{ms:.2f} ms</text>'
        )
        y += ROW
    return y + 22


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        sys.stderr.write(__doc__)
        return 2
    trace = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
    parts: list[str] = []
    y = draw(
        "One tools/call: the Python SDK's client → plurnk-mcp serve (gateway, host) → a Python SDK server",
        trace["call"],
        TOP,
        parts,
    )
    if trace.get("hydration"):
        y = draw("The hydration before it: one connection attempt per server", trace["hydration"], y, parts)
    trace_id = trace["call"][0]["trace_id"]
    height = y + 10
    svg = f"""<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}">
<style>
text {{ font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; fill: #222; }}
.title {{ font-size: 13px; font-weight: bold; }}
.ms {{ fill: #555; font-size: 11px; }}
.note {{ fill: #555; font-size: 11px; }}
</style>
<rect width="100%" height="100%" fill="white"/>
<text x="12" y="22" class="title">plurnk-mcp: spans exported over OTLP and received by a real OTLP/HTTP receiver</text>
<text x="12" y="40" class="note">trace {trace_id}; each bar from its span's own start to end. Blue: Python client; orange: plurnk-mcp; green: Python server</text>
{''.join(parts)}
</svg>
"""
    Path(argv[2]).parent.mkdir(parents=True, exist_ok=True)
    Path(argv[2]).write_text(svg, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
