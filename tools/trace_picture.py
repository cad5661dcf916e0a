"""trace-picture: draw a Chrome trace of a simulated run as an SVG timeline, one row per engine queue.

    python -m neuron_mlir.tools.trace_picture trace.json picture.svg [--start-us 0 --end-us 200] [--width 1200]

The input is the JSON that `Profile.write_chrome_trace` or `neuron_mlir.write_trace` writes (complete "X"
events, `thread_name` metadata naming each track). Every track becomes a row; each instruction a box coloured
by its opcode, with a legend. A run holds up to millions of instructions, so boxes are merged per pixel column:
the picture's size depends on its width and the number of tracks, never on the length of the run. Each row is
labelled with the queue's busy share of the window, which is what the picture is for: seeing which engine
bounds the run and where the others wait.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any

# Colour per opcode family, so the same engine work looks the same in every picture.
_PALETTE: dict[str, str] = {
    "nc_matmul": "#1f77b4",
    "transpose": "#9ecae1",
    "activation": "#ff7f0e",
    "tensor_tensor": "#2ca02c",
    "tensor_scalar": "#98df8a",
    "scalar_tensor_tensor": "#addd8e",
    "tensor_reduce": "#d62728",
    "tensor_copy": "#9467bd",
    "select": "#8c564b",
    "memset": "#c7c7c7",
    "iota": "#bcbd22",
    "affine_select": "#dbdb8d",
    "gpsimd_kernel": "#e377c2",
    "dma_copy": "#17becf",
    # collectives: one hue, darker as they move more of the tensor
    "all_reduce": "#393b79",
    "reduce_scatter": "#5254a3",
    "all_gather": "#6b6ecf",
    "all_to_all": "#9c9ede",
}
_OTHER_COLOUR = "#7f7f7f"
_ROW_HEIGHT = 22
_LABEL_WIDTH = 190
_MARGIN = 10


@dataclass
class Track:
    """One row of the picture: a queue of one process, with its events as (start, end, opcode) in us."""

    label: str
    events: list[tuple[float, float, str]] = field(default_factory=list)


def read_tracks(trace: dict[str, Any]) -> list[Track]:
    """The tracks of a Chrome trace object, in the order of their sort index (then process and thread id)."""
    names: dict[tuple[int, int], str] = {}
    processes: dict[int, str] = {}
    order: dict[tuple[int, int], int] = {}
    events: dict[tuple[int, int], list[tuple[float, float, str]]] = defaultdict(list)
    for event in trace.get("traceEvents", []):
        key = (int(event.get("pid", 0)), int(event.get("tid", 0)))
        phase = event.get("ph")
        if phase == "M" and event.get("name") == "thread_name":
            names[key] = str(event["args"]["name"])
        elif phase == "M" and event.get("name") == "process_name":
            processes[key[0]] = str(event["args"]["name"])
        elif phase == "M" and event.get("name") == "thread_sort_index":
            order[key] = int(event["args"]["sort_index"])
        elif phase == "X":
            start = float(event["ts"])
            events[key].append((start, start + float(event.get("dur", 0.0)), str(event.get("name", "?"))))
    several_processes = len({pid for pid, _ in events}) > 1
    tracks = []
    for key in sorted(events, key=lambda k: (k[0], order.get(k, k[1]), k[1])):
        label = names.get(key, f"track {key[1]}")
        if several_processes:
            label = f"{processes.get(key[0], f'process {key[0]}')}: {label}"
        tracks.append(Track(label, sorted(events[key])))
    return tracks


def _merged_boxes(
    events: Iterable[tuple[float, float, str]], start: float, scale: float, columns: int
) -> list[tuple[int, int, str]]:
    """(first column, last column + 1, opcode) runs: each pixel column takes the opcode busiest in it."""
    busy: list[dict[str, float]] = [defaultdict(float) for _ in range(columns)]
    for begin, end, opcode in events:
        left, right = (begin - start) * scale, (end - start) * scale
        if right <= 0 or left >= columns:
            continue
        left, right = max(left, 0.0), min(right, float(columns))
        column = int(left)
        while column < right and column < columns:
            busy[column][opcode] += min(right, column + 1) - max(left, column)
            column += 1
    boxes: list[tuple[int, int, str]] = []
    for column, shares in enumerate(busy):
        if not shares or sum(shares.values()) < 0.25:  # a column mostly idle stays blank
            continue
        opcode = max(shares, key=shares.__getitem__)
        if boxes and boxes[-1][1] == column and boxes[-1][2] == opcode:
            boxes[-1] = (boxes[-1][0], column + 1, opcode)
        else:
            boxes.append((column, column + 1, opcode))
    return boxes


def _busy_share(events: Iterable[tuple[float, float, str]], start: float, end: float) -> float:
    covered, reach = 0.0, start
    for begin, finish, _ in events:  # sorted by start
        begin, finish = max(begin, reach), min(finish, end)
        if finish > begin:
            covered += finish - begin
            reach = finish
    return covered / (end - start) if end > start else 0.0


def render_svg(
    tracks: list[Track],
    *,
    width: int = 1200,
    start_us: float | None = None,
    end_us: float | None = None,
    title: str = "",
) -> str:
    """The SVG text of the timeline of `tracks` between `start_us` and `end_us` (default: the whole run)."""
    if not tracks:
        raise ValueError("the trace holds no instruction events")
    first = min(event[0] for track in tracks for event in track.events)
    last = max(event[1] for track in tracks for event in track.events)
    start = first if start_us is None else start_us
    end = last if end_us is None else end_us
    if end <= start:
        raise ValueError(f"empty time window: {start} us to {end} us")
    columns = max(width - _LABEL_WIDTH - 2 * _MARGIN, 100)
    scale = columns / (end - start)
    top = _MARGIN + (24 if title else 0)
    used: set[str] = set()
    rows: list[str] = []
    for row, track in enumerate(tracks):
        y = top + row * _ROW_HEIGHT
        share = _busy_share(track.events, start, end)
        rows.append(
            f'<text x="{_MARGIN}" y="{y + 15}" font-size="12">{escape(track.label)} '
            f'<tspan fill="#555">{share:.0%}</tspan></text>'
        )
        rows.append(
            f'<rect x="{_LABEL_WIDTH}" y="{y + 2}" width="{columns}" height="{_ROW_HEIGHT - 4}" fill="#f4f4f4"/>'
        )
        for left, right, opcode in _merged_boxes(track.events, start, scale, columns):
            used.add(opcode)
            colour = _PALETTE.get(opcode, _OTHER_COLOUR)
            rows.append(
                f'<rect x="{_LABEL_WIDTH + left}" y="{y + 2}" width="{right - left}" height="{_ROW_HEIGHT - 4}" '
                f'fill="{colour}"><title>{escape(opcode)}</title></rect>'
            )
    axis_y = top + len(tracks) * _ROW_HEIGHT + 4
    ticks = []
    for tick in range(6):
        x = _LABEL_WIDTH + columns * tick / 5
        ticks.append(f'<line x1="{x}" y1="{axis_y}" x2="{x}" y2="{axis_y + 5}" stroke="#333"/>')
        ticks.append(
            f'<text x="{x}" y="{axis_y + 18}" font-size="11" text-anchor="middle">'
            f"{start + (end - start) * tick / 5:.1f} us</text>"
        )
    legend = []
    legend_y = axis_y + 34
    x = _LABEL_WIDTH
    for opcode in sorted(used):
        legend.append(
            f'<rect x="{x}" y="{legend_y - 10}" width="12" height="12" fill="{_PALETTE.get(opcode, _OTHER_COLOUR)}"/>'
        )
        legend.append(f'<text x="{x + 16}" y="{legend_y}" font-size="11">{escape(opcode)}</text>')
        x += 24 + 7 * len(opcode)
    height = legend_y + _MARGIN + 4
    heading = f'<text x="{_MARGIN}" y="{_MARGIN + 14}" font-size="14" font-weight="bold">{escape(title)}</text>'
    body = "\n".join([heading if title else "", *rows, *ticks, *legend])
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif">\n<rect width="100%" height="100%" fill="white"/>\n{body}\n</svg>\n'
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace", help="Chrome trace JSON written by neuron_mlir.write_trace or a Profile")
    parser.add_argument("output", help="the SVG file to write")
    parser.add_argument("--start-us", type=float, help="left edge of the window (default: the first event)")
    parser.add_argument("--end-us", type=float, help="right edge of the window (default: the last event)")
    parser.add_argument("--width", type=int, default=1200)
    parser.add_argument("--title", default="")
    args = parser.parse_args(argv)
    try:
        trace = json.loads(Path(args.trace).read_text(encoding="utf-8"))
        svg = render_svg(
            read_tracks(trace), width=args.width, start_us=args.start_us, end_us=args.end_us, title=args.title
        )
    except (OSError, ValueError, KeyError, TypeError) as error:
        print(f"trace-picture: {args.trace}: {error}", file=sys.stderr)
        return 1
    Path(args.output).write_text(svg, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
