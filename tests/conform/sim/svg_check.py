#!/usr/bin/env python3
"""meson tests of the SVG charts (suite 'conform'): svg_chart.c, `strand-conform perf --svg` and
tests/e2e/sweep_chart.py. Every mode parses the written SVG with xml.etree and checks it:
one <polyline class="series"> per series with the expected number of points, a legend entry per
series, tick labels and axis labels present, x coordinates strictly increasing along each line,
every coordinate finite and inside the drawing, no "nan"/"inf" anywhere.

  svg_check.py unit TEST_EXE             the fixed chart of test_svg_chart.c (zero, negative and
                                         NaN values skipped, an all-invalid series left empty)
  svg_check.py perf CONFORM PLUGIN       strand-conform perf --svg with tiny sizes and --ref tcp
  svg_check.py sweep SCRIPT TESTDATA     sweep_chart.py on the e2e and perf samples in TESTDATA
  svg_check.py docs SCRIPT DOCDIR        every DOCDIR/data/NAME.csv redrawn by sweep_chart.py
                                         equals the committed DOCDIR/NAME.svg, which passes the checks;
                                         a CSV with a "# source:" line holds its table's numbers
  svg_check.py file SVG...               the generic checks only
"""
import math
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

NS = "{http://www.w3.org/2000/svg}"


class Bad(Exception):
    pass


def need(cond, msg):
    if not cond:
        raise Bad(msg)


def points(pl):
    out = []
    for pair in pl.get("points", "").split():
        x, y = pair.split(",")
        x, y = float(x), float(y)
        need(math.isfinite(x) and math.isfinite(y), "non-finite point %r" % pair)
        out.append((x, y))
    return out


def texts(g, cls):
    return [t.text or "" for t in g.iter(NS + "text") if t.get("class") == cls]


def check_svg(path):
    """Generic checks; returns {'title', 'panels': [{'title', 'xticks', 'yticks', 'series':
    {name: [(x, y), ...]}}]}."""
    raw = open(path, encoding="utf-8").read()
    need(not re.search(r"\b(nan|inf)\b", raw, re.I), "nan/inf in the SVG")
    root = ET.fromstring(raw)
    need(root.tag == NS + "svg", "root is %s, not svg" % root.tag)
    vb = [float(v) for v in root.get("viewBox").split()]
    title = root.find(NS + "title")
    need(title is not None and title.text, "no <title>")
    top_title = [t for t in root.findall(NS + "text") if t.get("class") == "title"]
    need(top_title and top_title[0].text, "no visible title")
    panels = [g for g in root.findall(NS + "g") if g.get("class") == "panel"]
    need(panels, "no panel")
    res = {"title": top_title[0].text, "subtitle": "".join(texts(root, "subtitle")), "panels": []}
    for g in panels:
        pt = g.get("data-title")
        xt, yt = texts(g, "xtick"), texts(g, "ytick")
        need(len(xt) >= 2 and all(xt), "panel %s: fewer than 2 x tick labels" % pt)
        need(len(yt) >= 2 and all(yt), "panel %s: fewer than 2 y tick labels" % pt)
        need(all(texts(g, "xlabel")) and texts(g, "xlabel"), "panel %s: no x axis label" % pt)
        need(all(texts(g, "ylabel")) and texts(g, "ylabel"), "panel %s: no y axis label" % pt)
        lines = [p for p in g.iter(NS + "polyline") if p.get("class") == "series"]
        legend = [l for l in g.iter(NS + "g") if l.get("class") == "legend"]
        need(len(legend) == len(lines), "panel %s: %d legend entries for %d lines" %
             (pt, len(legend), len(lines)))
        series = {}
        for pl, lg in zip(lines, legend):
            name = pl.get("data-series")
            need(name, "a polyline without data-series")
            need("".join(lg.itertext()) == name, "legend %r for series %r" %
                 ("".join(lg.itertext()), name))
            need(name not in series, "panel %s: series %r twice" % (pt, name))
            pts = points(pl)
            xs = [p[0] for p in pts]
            need(all(a < b for a, b in zip(xs, xs[1:])), "series %r: x not increasing" % name)
            for x, y in pts:
                need(0 <= x <= vb[2] and 0 <= y <= vb[3], "series %r: (%g, %g) outside" % (name, x, y))
            series[name] = pts
        res["panels"].append({"title": pt, "xticks": xt, "yticks": yt, "series": series})
    return res


def expect_counts(panel, want):
    got = {n: len(p) for n, p in panel["series"].items()}
    need(got == want, "panel %s: series/points %s, expected %s" % (panel["title"], got, want))


def cmd_unit(exe):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "unit.svg")
        subprocess.run([exe, out], check=True)
        r = check_svg(out)
    need(r["title"] == "svg_chart unit test", "title %r" % r["title"])
    need(len(r["panels"]) == 3, "%d panels" % len(r["panels"]))
    bw, lat, dep = r["panels"]
    expect_counts(bw, {"plugin <uni> & co": 18, "gaps": 3, "empty": 0})
    expect_counts(lat, {"plugin p50": 18, "reference p50": 5})
    expect_counts(dep, {"depth sweep": 6})
    for lab in ("8B", "64B", "1K", "1M"):
        need(lab in bw["xticks"], "no x tick %s in %s" % (lab, bw["xticks"]))
    need(bw["yticks"] == ["0.001", "0.01", "0.1", "1", "10"], "y ticks %s" % bw["yticks"])
    need(dep["xticks"] == ["1", "2", "4", "8", "16", "32"], "depth ticks %s" % dep["xticks"])
    # The skipped points leave the valid ones in place: "gaps" shares "plugin"'s x scale at 64 B.
    px = dict((round(x, 1), y) for x, y in bw["series"]["plugin <uni> & co"])
    need(round(bw["series"]["gaps"][0][0], 1) in px, "gaps' 64 B point is off the size grid")
    # log scale: equal ratios, equal steps.
    xs = [p[0] for p in bw["series"]["plugin <uni> & co"]]
    steps = [b - a for a, b in zip(xs, xs[1:])]
    need(max(steps) - min(steps) < 0.3, "x steps of a doubling sweep differ: %s" % steps)
    print("ok: unit chart")


def cmd_perf(conform, plugin):
    with tempfile.TemporaryDirectory() as d:
        out, js = os.path.join(d, "perf.svg"), os.path.join(d, "perf.json")
        cmd = [conform, "perf", "--min-bytes", "8", "--max-bytes", "64K", "--step-factor", "8",
               "--time", "0.01", "--ref", "tcp", "--depth-sweep", "--sweep-bytes", "4K",
               "--timeout-scale", "3", "--svg", out, "--json", js, plugin]
        print("$ " + " ".join(cmd))
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=240)
        print(p.stdout)
        need(p.returncode == 0, "perf exited %d" % p.returncode)
        r = check_svg(out)
    titles = [pn["title"] for pn in r["panels"]]
    need(titles[0] == "bandwidth" and titles[1].startswith("latency"), "panels %s" % titles)
    need("fixture" in r["title"] or "good" in r["title"], "title %r names no plugin" % r["title"])
    need(re.search(r"\d{4}-\d\d-\d\dT", r["subtitle"]) and "host" in r["subtitle"],
         "subtitle %r: no date/host" % r["subtitle"])
    # sizes 8, 64, 512, 4K, 32K, 64K: 6 rows per size table, every value positive.
    bw, lat = r["panels"][0], r["panels"][1]
    need(len(bw["series"]) == 4, "bandwidth series %s" % list(bw["series"]))
    need(len(lat["series"]) == 2, "latency series %s" % list(lat["series"]))
    for pn in (bw, lat):
        for name, pts in pn["series"].items():
            need(len(pts) == 6, "%s: %d points, expected 6" % (name, len(pts)))
    need(any("raw TCP" in n for n in bw["series"]), "no raw-TCP line")
    need(len(r["panels"]) == 3 and r["panels"][2]["title"].startswith("depth"),
         "no depth panel: %s" % titles)
    for name, pts in r["panels"][2]["series"].items():
        need(len(pts) >= 4, "depth series %s: %d points" % (name, len(pts)))
    print("ok: perf --svg")


def cmd_sweep(script, data):
    with tempfile.TemporaryDirectory() as d:
        # 1. run_e2e.sh bench output: three configurations; the 0.00 busbw rows are skipped.
        out = os.path.join(d, "e2e.svg")
        subprocess.run([sys.executable, script, "-o", out, os.path.join(data, "e2e_bench.txt")],
                       check=True)
        r = check_svg(out)
        need(len(r["panels"]) == 2, "e2e: %d panels" % len(r["panels"]))
        bw, tm = r["panels"]
        expect_counts(bw, {"builtin-default": 6, "builtin-tuned": 6, "strand-socket": 5})
        expect_counts(tm, {"builtin-default": 6, "builtin-tuned": 6, "strand-socket": 6})
        need("2026-11-22T00:11:16Z" in r["subtitle"] and "gpuhost" in r["subtitle"],
             "e2e subtitle %r" % r["subtitle"])
        for lab in ("1K", "1M", "1G"):
            need(lab in bw["xticks"], "e2e: no x tick %s in %s" % (lab, bw["xticks"]))
        # 2. strand-conform perf --json: plugin and raw TCP lines, latency p50 of both.
        out = os.path.join(d, "perf.svg")
        subprocess.run([sys.executable, script, "-o", out, "--title", "perf sample",
                        os.path.join(data, "perf.json")], check=True)
        r = check_svg(out)
        need(r["title"] == "perf sample", "title %r" % r["title"])
        bw, lat = r["panels"][:2]
        expect_counts(bw, {"strand-socket uni d8": 4, "raw TCP uni d8 (2 streams)": 4})
        expect_counts(lat, {"strand-socket p50": 4, "raw TCP p50 (2 streams)": 3})
        # 3. the docs' CSV format, merged with the e2e file into one chart.
        out = os.path.join(d, "csv.svg")
        subprocess.run([sys.executable, script, "-o", out, os.path.join(data, "table.csv"),
                        os.path.join(data, "e2e_bench.txt")], check=True)
        r = check_svg(out)
        bw = r["panels"][0]
        need(bw["series"].get("A: off") is not None and len(bw["series"]["A: off"]) == 4,
             "csv: series %s" % {n: len(p) for n, p in bw["series"].items()})
        need(len(bw["series"]) == 5, "merged: %d series" % len(bw["series"]))
        # 4. a bad input fails with a message, not a chart.
        bad = os.path.join(d, "bad.txt")
        open(bad, "w").write("nothing to plot here\n")
        p = subprocess.run([sys.executable, script, "-o", out, bad], stderr=subprocess.PIPE,
                           text=True)
        need(p.returncode != 0 and p.stderr.strip(), "bad input accepted")
    print("ok: sweep_chart.py")


SIZE_UNITS = {"": 1, "B": 1, "K": 1 << 10, "KIB": 1 << 10, "M": 1 << 20, "MIB": 1 << 20,
              "G": 1 << 30, "GIB": 1 << 30}


def md_size(cell):
    """A table's size cell ("16 B", "1 KiB", "4K", "128M", "8") in bytes, or None."""
    m = re.fullmatch(r"(\d+)\s*([A-Za-z]*)", cell.replace("*", "").strip())
    if not m or m.group(2).upper() not in SIZE_UNITS:
        return None
    return int(m.group(1)) * SIZE_UNITS[m.group(2).upper()]


def md_section_tables(md, heading):
    """The markdown tables (rows of cells, header and rule left out) of the section whose heading
    line starts with HEADING, up to the next heading of the same or a higher level."""
    lines = md.splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith(heading)), None)
    need(start is not None and heading.startswith("#"), "no heading %r" % heading)
    level = len(heading) - len(heading.lstrip("#"))
    tables, cur = [], None
    for line in lines[start + 1:]:
        h = re.match(r"(#+)\s", line)
        if h and len(h.group(1)) <= level:
            break
        if not line.startswith("|"):
            cur = None
            continue
        if cur is None:
            cur = []
            tables.append(cur)
        cur.append([c.strip() for c in line.strip().strip("|").split("|")])
    return [[r for r in t[1:] if not all(re.fullmatch(r":?-+:?", c) for c in r)] for t in tables]


def check_source(csvf, docdir, text=None):
    """A data CSV whose '# source: PAGE.md | HEADING | N [| ROW]' line names the N-th table of a
    section (and, with ROW, only its rows that have a cell ROW) was transcribed from it: every CSV
    row's nonempty values, in column order, appear in that order among the numbers of a table row
    of the same size, the rows in the table's order. A value changed on either side is caught; the
    ratio columns the CSV leaves out are skipped over. Returns False for a CSV without the line."""
    text = open(csvf, encoding="utf-8").read() if text is None else text
    src = re.search(r"^#\s*source:\s*(.*)$", text, re.M)
    if not src:
        return False
    parts = [p.strip() for p in src.group(1).split("|")]
    need(len(parts) in (3, 4), "%s: source is 'PAGE.md | HEADING | N [| ROW]'" % csvf)
    md = open(os.path.join(docdir, parts[0]), encoding="utf-8").read()
    tables = md_section_tables(md, parts[1])
    n = int(parts[2])
    need(1 <= n <= len(tables), "%s: %s %r has %d tables, not %d" %
         (csvf, parts[0], parts[1], len(tables), n))
    rows = []
    for r in tables[n - 1]:
        if len(parts) == 4 and parts[3] not in r:
            continue
        k = next((i for i, c in enumerate(r) if md_size(c) is not None), None)
        if k is not None:
            nums = [t for c in r[k + 1:] for t in re.findall(r"\d+(?:\.\d+)?", c)]
            rows.append((md_size(r[k]), nums))
    data = [l for l in text.splitlines() if l.strip() and not l.startswith("#")]
    j = 0
    for line in data[1:]:
        cells = [c.strip() for c in line.split(",")]
        size, vals = md_size(cells[0]), [c for c in cells[1:] if c]

        def holds(nums):
            it = iter(nums)
            return all(v in it for v in vals)
        while j < len(rows) and not (rows[j][0] == size and holds(rows[j][1])):
            j += 1
        need(j < len(rows), "%s: row %r is not in %s, %r (table %d), or out of order" %
             (csvf, line, parts[0], parts[1], n))
        j += 1
    return True


def cmd_docs(script, docdir):
    import glob
    data = sorted(glob.glob(os.path.join(docdir, "data", "*.csv")))
    need(data, "no %s/data/*.csv" % docdir)
    with tempfile.TemporaryDirectory() as d:
        for csvf in data:
            name = os.path.splitext(os.path.basename(csvf))[0]
            svg = os.path.join(docdir, name + ".svg")
            out = os.path.join(d, name + ".svg")
            subprocess.run([sys.executable, script, "-o", out, csvf], check=True)
            need(os.path.exists(svg), "%s has no chart %s" % (csvf, svg))
            need(open(out, "rb").read() == open(svg, "rb").read(),
                 "%s is out of date: regenerate it (docs/benchmarks/data/README.md)" % svg)
            r = check_svg(svg)
            need(any(p["series"] for p in r["panels"]), "%s: no line" % svg)
            sourced = check_source(csvf, docdir)
            print("ok: %s%s" % (svg, ", numbers as in its table" if sourced else ""))
    # The source check can fail: one value of a sourced CSV changed must be caught.
    for csvf in data:
        text = open(csvf, encoding="utf-8").read()
        if not check_source(csvf, docdir, text):
            continue
        lines = text.splitlines()
        i = next(i for i, l in enumerate(lines) if not l.startswith("#") and
                 re.search(r",\d", l) and not l.startswith("bytes"))
        lines[i] = re.sub(r",(\d+(?:\.\d+)?)", lambda m: ",9" + m.group(1), lines[i], count=1)
        try:
            check_source(csvf, docdir, "\n".join(lines))
        except Bad as e:
            print("ok: a changed value is caught (%s)" % e)
            break
        raise Bad("%s: a changed value (%r) passed the source check" % (csvf, lines[i]))


def main(argv):
    try:
        if len(argv) == 3 and argv[1] == "unit":
            cmd_unit(argv[2])
        elif len(argv) == 4 and argv[1] == "perf":
            cmd_perf(argv[2], argv[3])
        elif len(argv) == 4 and argv[1] == "sweep":
            cmd_sweep(argv[2], argv[3])
        elif len(argv) == 4 and argv[1] == "docs":
            cmd_docs(argv[2], argv[3])
        elif len(argv) >= 3 and argv[1] == "file":
            for f in argv[2:]:
                r = check_svg(f)
                print("ok: %s: %s" % (f, ", ".join("%s (%d lines)" % (p["title"], len(p["series"]))
                                                    for p in r["panels"])))
        else:
            print(__doc__, file=sys.stderr)
            return 2
    except (Bad, ET.ParseError, subprocess.CalledProcessError) as e:
        print("FAIL: %s" % e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
