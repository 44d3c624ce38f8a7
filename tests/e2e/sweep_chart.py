#!/usr/bin/env python3
"""Benchmark sweeps as an SVG chart (python3 standard library only).

    sweep_chart.py -o OUT.svg [--title T] [--subtitle S] INPUT...

Two panels, both against message size on a log2 axis (ticks 8B, 1K, 1M ...): bandwidth in GB/s
and time in microseconds, each on a log10 axis with decade ticks; one line per configuration, a
legend, and a title. Values that are zero, negative or missing ("–") are skipped, not plotted (a
table that prints 0.00 GB/s for 8-byte messages starts its line at the first nonzero row). The
chart has the layout and markup of `strand-conform perf --svg` (tests/conform/sim/svg_chart.c),
so tests/conform/sim/svg_check.py checks both. Every INPUT adds its lines to the same chart;
the kind is recognised from the content:

  * the output of tests/e2e/run_e2e.sh (bench, sweep, base) or of nccl_e2e --perf: a section
    "# TAG: OP, N ranks, ..." followed by rows "size count time(us) algbw busbw iters" is one
    configuration named TAG, plotted as busbw and time; "# DATE HOST: ..." gives the subtitle;
  * the JSON of `strand-conform perf --json FILE`: every bandwidth table is a line per transport
    (the plugin, and the raw-TCP reference dashed), latency is the p50 half round trip, a depth
    sweep gets its own panel (bandwidth against messages in flight);
  * CSV (the format of docs/benchmarks/data/): '#' lines are comments, except "# title: ...",
    "# subtitle: ..."; the header names the size column "bytes" (values: 4096, 4K, 4 KiB, 8 B),
    and every other column "CONFIGURATION|METRIC", METRIC one of busbw_gbps, algbw_gbps, gbps,
    mbps (MB/s, drawn as GB/s), time_us, lat_us. A column whose header ends in "|dashed" is drawn
    dashed (a reference beside a measurement). Empty cells and "–" / "-" are skipped.

Example (the chart of docs/benchmarks/socket.md):
    tests/e2e/sweep_chart.py -o docs/benchmarks/socket-allreduce.svg \\
        docs/benchmarks/data/socket-allreduce.csv
"""
import argparse
import csv
import io
import json
import math
import re
import sys

# ------------------------------------------------------------------ the chart (as svg_chart.c)

CH_W, CH_TOP, PANEL_H = 980.0, 62.0, 370.0
PLOT_X0, PLOT_X1, PLOT_DY0, PLOT_DY1, LEGEND_X = 84.0, 674.0, 34.0, 304.0, 694.0
MIN_XLABEL_GAP = 34.0
PALETTE = ["#1f5fbf", "#d9480f", "#2b8a3e", "#862e9c", "#c2255c", "#0b7285", "#e67700",
           "#495057", "#5c940d", "#a61e4d"]


def esc(s):
    return (str(s).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;").replace("'", "&apos;"))


def valid(x, y):
    return (x is not None and y is not None and math.isfinite(x) and math.isfinite(y)
            and x > 0 and y > 0)


def bytes_label(e):
    if e < 0:
        return "%g" % 2.0 ** e
    u = min(e // 10, 6)
    return "%d%s" % (2 ** (e - 10 * u), "BKMGTPE"[u])


def decade_label(e):
    if 0 <= e <= 6:
        return "%d" % 10 ** e
    if -4 <= e < 0:
        return "%.*f" % (-e, 10.0 ** e)
    return "1e%+d" % e


def f1(v):
    return "%.1f" % v


def valid_points(panels):
    return [(x, y) for p in panels for s in p["series"] for x, y in zip(s["x"], s["y"])
            if valid(x, y)]


def panel_svg(p, top, xs):
    """xs: the valid x of every panel of this x kind, so that their sizes line up."""
    y0, y1 = top + PLOT_DY0, top + PLOT_DY1
    pts = valid_points([p])
    have = bool(pts)
    if not have:
        pts = [(1.0, 1.0)]
    xs = xs or [1.0]
    xlo = math.floor(math.log2(min(xs)))
    xhi = math.ceil(math.log2(max(xs)))
    xhi = max(xhi, xlo + 1)
    ylo = math.floor(math.log10(min(y for _, y in pts)))
    yhi = math.ceil(math.log10(max(y for _, y in pts)))
    yhi = max(yhi, ylo + 1)

    def mx(x):
        return PLOT_X0 + (math.log2(x) - xlo) / (xhi - xlo) * (PLOT_X1 - PLOT_X0)

    def my(y):
        return y1 - (math.log10(y) - ylo) / (yhi - ylo) * (y1 - y0)

    o = ['<g class="panel" data-title="%s">' % esc(p["title"]),
         '<text class="panel-title" x="%s" y="%s" font-size="15" font-weight="bold">%s</text>'
         % (f1(PLOT_X0), f1(top + 20), esc(p["title"])),
         '<rect x="%s" y="%s" width="%s" height="%s" fill="#ffffff" stroke="#868e96"/>'
         % (f1(PLOT_X0), f1(y0), f1(PLOT_X1 - PLOT_X0), f1(y1 - y0))]
    for e in range(ylo, yhi + 1):
        y = my(10.0 ** e)
        o.append('<line class="grid" x1="%s" y1="%s" x2="%s" y2="%s" stroke="#dee2e6"/>'
                 % (f1(PLOT_X0), f1(y), f1(PLOT_X1), f1(y)))
        o.append('<text class="ytick" x="%s" y="%s" text-anchor="end">%s</text>'
                 % (f1(PLOT_X0 - 6), f1(y + 4), decade_label(e)))
        if e == yhi:
            break
        for m in range(2, 10):
            ym = my(m * 10.0 ** e)
            o.append('<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#adb5bd"/>'
                     % (f1(PLOT_X0), f1(ym), f1(PLOT_X0 + 4), f1(ym)))
            # A single decade gets 2 and 5 labelled too, or the axis would read only "1 .. 10".
            if yhi - ylo == 1 and m in (2, 5):
                o.append('<line class="grid" x1="%s" y1="%s" x2="%s" y2="%s" stroke="#f1f3f5"/>'
                         % (f1(PLOT_X0), f1(ym), f1(PLOT_X1), f1(ym)))
                o.append('<text class="ytick" x="%s" y="%s" text-anchor="end">%s</text>'
                         % (f1(PLOT_X0 - 6), f1(ym + 4), "%g" % (m * 10.0 ** e)))
    per = (PLOT_X1 - PLOT_X0) / (xhi - xlo)
    k = next((s for s in (1, 2, 5, 10, 20) if per * s >= MIN_XLABEL_GAP), 20)
    for e in range(xlo, xhi + 1):
        x = mx(2.0 ** e)
        if e % k:
            o.append('<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#adb5bd"/>'
                     % (f1(x), f1(y1), f1(x), f1(y1 - 4)))
            continue
        lab = bytes_label(e) if p.get("xkind", "bytes") == "bytes" else "%d" % 2 ** e
        o.append('<line class="grid" x1="%s" y1="%s" x2="%s" y2="%s" stroke="#dee2e6"/>'
                 % (f1(x), f1(y0), f1(x), f1(y1)))
        o.append('<text class="xtick" x="%s" y="%s" text-anchor="middle">%s</text>'
                 % (f1(x), f1(y1 + 16), lab))
    cy = (y0 + y1) / 2
    o.append('<text class="xlabel" x="%s" y="%s" text-anchor="middle">%s</text>'
             % (f1((PLOT_X0 + PLOT_X1) / 2), f1(y1 + 36), esc(p["xlabel"])))
    o.append('<text class="ylabel" x="24.0" y="%s" text-anchor="middle" '
             'transform="rotate(-90 24.0 %s)">%s</text>' % (f1(cy), f1(cy), esc(p["ylabel"])))
    if not have:
        o.append('<text x="%s" y="%s" text-anchor="middle" fill="#868e96">no data</text>'
                 % (f1((PLOT_X0 + PLOT_X1) / 2), f1(cy)))
    for i, s in enumerate(p["series"]):
        col = PALETTE[s["color"] % len(PALETTE)]
        dash = ' stroke-dasharray="6 4"' if s.get("dashed") else ""
        xy = [(mx(x), my(y)) for x, y in zip(s["x"], s["y"]) if valid(x, y)]
        o.append('<polyline class="series" data-series="%s" fill="none" stroke="%s" '
                 'stroke-width="2"%s points="%s"/>'
                 % (esc(s["name"]), col, dash, " ".join("%s,%s" % (f1(a), f1(b)) for a, b in xy)))
        o.append('<g class="markers" fill="%s">%s</g>' % (col, "".join(
            '<circle cx="%s" cy="%s" r="2.5"/>' % (f1(a), f1(b)) for a, b in xy)))
        ly = y0 + 12 + 18.0 * i
        o.append('<g class="legend"><line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" '
                 'stroke-width="2"%s/><text x="%s" y="%s">%s</text></g>'
                 % (f1(LEGEND_X), f1(ly), f1(LEGEND_X + 26), f1(ly), col, dash,
                    f1(LEGEND_X + 32), f1(ly + 4), esc(s["name"])))
    o.append("</g>")
    return o


def chart_svg(title, subtitle, panels):
    h = CH_TOP + PANEL_H * len(panels) + 10
    o = ['<?xml version="1.0" encoding="UTF-8"?>',
         '<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f"'
         ' font-family="sans-serif" font-size="12">' % (CH_W, h, CH_W, h),
         "<title>%s</title>" % esc(title),
         '<rect width="100%" height="100%" fill="#f8f9fa"/>',
         '<text class="title" x="%s" y="26" font-size="17" font-weight="bold">%s</text>'
         % (f1(PLOT_X0 - 60), esc(title))]
    if subtitle:
        o.append('<text class="subtitle" x="%s" y="46" fill="#495057">%s</text>'
                 % (f1(PLOT_X0 - 60), esc(subtitle)))
    for i, p in enumerate(panels):
        same = [q for q in panels if q.get("xkind", "bytes") == p.get("xkind", "bytes")]
        o += panel_svg(p, CH_TOP + PANEL_H * i, [x for x, _ in valid_points(same)])
    o.append("</svg>")
    return "\n".join(o) + "\n"

# ------------------------------------------------------------------ inputs


class Chart:
    """Series collected from every input: panel key -> list of series, in order of appearance."""

    def __init__(self):
        self.panels = {}
        self.titles, self.subtitles = [], []
        self.ncolor = 0
        self.colors = {}

    def color(self, config):
        # One colour per configuration, shared by its lines in every panel.
        if config not in self.colors:
            self.colors[config] = self.ncolor
            self.ncolor += 1
        return self.colors[config]

    def add(self, panel, name, x, y, config=None, dashed=False):
        lst = self.panels.setdefault(panel, [])
        names = {s["name"] for s in lst}
        base, k = name, 2
        while name in names:
            name = "%s (%d)" % (base, k)
            k += 1
        lst.append({"name": name, "x": list(x), "y": list(y),
                    "color": self.color(config or base), "dashed": dashed})


METRICS = {  # metric -> (panel, scale, y label)
    "busbw_gbps": ("bw", 1.0, "busbw (GB/s)"),
    "algbw_gbps": ("bw", 1.0, "algbw (GB/s)"),
    "gbps": ("bw", 1.0, "bandwidth (GB/s)"),
    "mbps": ("bw", 1e-3, "bandwidth (GB/s)"),
    "time_us": ("time", 1.0, "time per operation (\u00b5s)"),
    "lat_us": ("lat", 1.0, "latency (\u00b5s)"),
}
PANEL_TITLES = {"bw": "bandwidth", "time": "time per operation", "lat": "latency",
                "depth": "depth sweep: unidirectional bandwidth against messages in flight"}
UNITS = {"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "KIB": 1 << 10, "M": 1 << 20, "MB": 1 << 20,
         "MIB": 1 << 20, "G": 1 << 30, "GB": 1 << 30, "GIB": 1 << 30}


def parse_size(s):
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", s)
    if not m or m.group(2).upper() not in UNITS:
        raise ValueError("not a size: %r" % s)
    return float(m.group(1)) * UNITS[m.group(2).upper()]


def parse_value(s):
    s = s.strip().replace("\u00d7", "").replace("%", "")
    if s in ("", "-", "\u2013", "\u2014", "n/a"):
        return None
    return float(s)


def read_csv(text, chart, path):
    rows = []
    for line in text.splitlines():
        m = re.match(r"#\s*(title|subtitle)\s*:\s*(.*)", line)
        if m:
            (chart.titles if m.group(1) == "title" else chart.subtitles).append(m.group(2).strip())
        elif line.strip() and not line.startswith("#"):
            rows.append(line)
    table = list(csv.reader(io.StringIO("\n".join(rows))))
    if not table or table[0][0].strip().lower() not in ("bytes", "size"):
        raise ValueError("%s: the CSV header must start with 'bytes'" % path)
    xs = [parse_size(r[0]) for r in table[1:]]
    for j, h in enumerate(table[0][1:], 1):
        parts = [p.strip() for p in h.split("|")]
        dashed = parts[-1] == "dashed"
        if dashed:
            parts.pop()
        if len(parts) != 2 or parts[1] not in METRICS:
            raise ValueError("%s: column %r is not CONFIGURATION|METRIC (%s)"
                             % (path, h, ", ".join(METRICS)))
        panel, scale, _ = METRICS[parts[1]]
        ys = []
        for r in table[1:]:
            v = parse_value(r[j]) if j < len(r) else None
            ys.append(v * scale if v is not None else None)
        chart.add(panel, parts[0], xs, ys, dashed=dashed)
        chart.ylabels.setdefault(panel, set()).add(METRICS[parts[1]][2])


def read_e2e(text, chart, path):
    sections, cur = [], None
    for line in text.splitlines():
        m = re.match(r"#\s*(\d{4}-\d\d-\d\dT[\d:]+Z)\s+(\S+):\s*(.*)", line)
        if m:
            chart.subtitles.append("%s, host %s: %s" % m.groups())
            continue
        m = re.match(r"#\s*(.+?):\s*(\w+), (\d+) ranks", line)
        if m:
            cur = {"tag": m.group(1), "op": m.group(2), "ranks": m.group(3), "rows": []}
            sections.append(cur)
            continue
        f = line.split()
        if cur is not None and len(f) == 6 and not line.startswith("#"):
            try:
                cur["rows"].append([float(v) for v in f])
            except ValueError:
                pass
    sections = [s for s in sections if s["rows"]]
    if not sections:
        raise ValueError("%s: no '# TAG: OP, N ranks' section with rows" % path)
    ops = sorted({s["op"] for s in sections})
    chart.titles.append("NCCL %s, %s ranks (nccl_e2e)" % (", ".join(ops), sections[0]["ranks"]))
    for s in sections:
        xs = [r[0] for r in s["rows"]]
        chart.add("bw", s["tag"], xs, [r[4] for r in s["rows"]])
        chart.add("time", s["tag"], xs, [r[2] for r in s["rows"]])
    chart.ylabels.setdefault("bw", set()).add(METRICS["busbw_gbps"][2])
    chart.ylabels.setdefault("time", set()).add(METRICS["time_us"][2])


def read_perf_json(doc, chart, path):
    tables = doc.get("tables")
    if not isinstance(tables, list) or not tables:
        raise ValueError("%s: no tables (not the JSON of strand-conform perf?)" % path)
    plugins = sorted({t.get("plugin") or "?" for t in tables})
    chart.titles.append("strand-conform perf: %s" % ", ".join(plugins))
    if doc.get("date") or doc.get("host"):
        chart.subtitles.append("%s, host %s" % (doc.get("date", "?"), doc.get("host", "?")))
    for t in tables:
        rows, plugin, ref = t.get("rows") or [], t.get("plugin") or "plugin", t.get("reference")
        streams = ""
        if ref:
            n = ref.get("streams", 1)
            streams = " (%d stream%s)" % (n, "" if n == 1 else "s")
        tid = t.get("id", "")
        xs = [r.get("bytes") for r in rows]
        if tid == "perf.latency":
            chart.add("lat", "%s p50" % plugin, xs, [r.get("p50_us") for r in rows], config=plugin)
            if ref:
                chart.add("lat", "raw TCP p50%s" % streams, xs, [r.get("ref_p50_us") for r in rows],
                          config=plugin, dashed=True)
        elif tid == "perf.depth-sweep":
            sz = bytes_label(int(math.log2(t["bytes"]))) if t.get("bytes") else "?"
            ds = [r.get("depth") for r in rows]
            cfg = "%s depth" % plugin
            chart.add("depth", "%s uni %s" % (plugin, sz), ds, [r.get("algbw_gbps") for r in rows],
                      config=cfg)
            if ref:
                chart.add("depth", "raw TCP uni %s%s" % (sz, streams), ds,
                          [r.get("ref_algbw_gbps") for r in rows], config=cfg, dashed=True)
        elif tid.startswith("perf.bw-"):
            kind = {"perf.bw-uni": "uni", "perf.bw-bi": "bi", "perf.bw-grouped": "grouped"}.get(
                tid, tid[8:])
            g = " n=%d" % t["group"] if t.get("group", 1) > 1 else ""
            d = " d%d" % t["depth"] if "depth" in t else ""
            cfg = "%s %s%s%s" % (plugin, kind, g, d)
            chart.add("bw", cfg, xs, [r.get("algbw_gbps") for r in rows], config=cfg)
            if ref:
                chart.add("bw", "raw TCP %s%s%s%s" % (kind, g, d, streams), xs,
                          [r.get("ref_algbw_gbps") for r in rows], config=cfg, dashed=True)
    chart.ylabels.setdefault("bw", set()).add(METRICS["algbw_gbps"][2])
    chart.ylabels.setdefault("lat", set()).add("latency, half round trip p50 (\u00b5s)")
    chart.ylabels.setdefault("depth", set()).add(METRICS["algbw_gbps"][2])


def read_input(path, chart):
    text = open(path, encoding="utf-8").read()
    if text.lstrip().startswith("{"):
        read_perf_json(json.loads(text), chart, path)
    elif re.search(r"^\s*(bytes|size)\s*,", text, re.M | re.I):
        read_csv(text, chart, path)
    else:
        read_e2e(text, chart, path)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 2)[2])
    ap.add_argument("-o", "--output", required=True, help="the SVG file to write")
    ap.add_argument("--title", help="chart title (default: from the inputs)")
    ap.add_argument("--subtitle", help="line under the title (default: date and host of the inputs)")
    ap.add_argument("inputs", nargs="+", help="run_e2e.sh output, perf JSON or CSV files")
    a = ap.parse_args(argv)
    chart = Chart()
    chart.ylabels = {}
    try:
        for p in a.inputs:
            read_input(p, chart)
    except (OSError, ValueError, KeyError, TypeError) as e:
        print("sweep_chart.py: %s" % e, file=sys.stderr)
        return 1
    panels = []
    # Panels in a fixed order; the depth sweep has messages in flight, not sizes, on its x axis.
    for key in ("bw", "time", "lat", "depth"):
        if key not in chart.panels:
            continue
        labels = sorted(chart.ylabels.get(key, {"?"}))
        panels.append({"title": PANEL_TITLES[key], "series": chart.panels[key],
                       "xlabel": "messages in flight (depth)" if key == "depth" else "message size",
                       "xkind": "count" if key == "depth" else "bytes",
                       "ylabel": labels[0] if len(labels) == 1 else " / ".join(labels)})
    if not panels or not any(valid(x, y) for p in panels for s in p["series"]
                             for x, y in zip(s["x"], s["y"])):
        print("sweep_chart.py: nothing to plot in %s" % ", ".join(a.inputs), file=sys.stderr)
        return 1
    title = a.title or " + ".join(dict.fromkeys(chart.titles)) or "benchmark sweep"
    subtitle = a.subtitle if a.subtitle is not None else "; ".join(dict.fromkeys(chart.subtitles))
    with open(a.output, "w", encoding="utf-8") as f:
        f.write(chart_svg(title, subtitle, panels))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
