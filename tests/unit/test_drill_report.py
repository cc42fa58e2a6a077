"""The drill report (twin.chaos.report, .plots) on made-up drill results
(tests/doubles/drill_results.py, kept as tests/golden/drill-results.json).

The page is checked as a browser sees it where one is installed: headless Chromium
renders report.html from disk and the screenshot must not be blank."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path
from xml.etree import ElementTree as ET

import numpy as np
import pytest

from tests.doubles.drill_results import drill_results, long_run
from tests.helpers import GOLDEN, golden
from twin.chaos import plots, report
from twin.chaos import results as R

RUN_PARTS = ("faults", "goodput", "ev-states", "link-load", "timeline")
ANCHORS = ("run-t0-t1-flap-mrc", "run-t0-t1-flap-single-path", "run-t1-blackhole-mrc")


@pytest.fixture(scope="module")
def results() -> dict:
    return json.loads((GOLDEN / "drill-results.json").read_text())


@pytest.fixture(scope="module")
def written(results, tmp_path_factory) -> dict[str, Path]:
    return report.write(R.parse(results), tmp_path_factory.mktemp("report"))


class Page(HTMLParser):
    """Tags, ids and classes of a page, and what would make it reach for a network."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: Counter = Counter()
        self.ids: list[str] = []
        self.classes: Counter = Counter()
        self.fetches: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags[tag] += 1
        a = dict(attrs)
        if "id" in a:
            self.ids.append(a["id"])
        self.classes.update((a.get("class") or "").split())
        if tag in ("script", "link", "iframe", "img", "object", "embed"):
            self.fetches.append(f"<{tag}>")
        for key in ("src", "href", "xlink:href"):
            if a.get(key) and not a[key].startswith(("#", "data:")):  # in-page, inline
                self.fetches.append(f"{tag} {key}={a[key]}")


def parse(text: str) -> Page:
    page = Page()
    page.feed(text)
    return page


def test_the_fixture_is_what_its_generator_makes():
    golden("drill-results.json", report.to_json(drill_results()) + "\n")


def test_write_makes_the_three_files(written):
    assert {k: p.name for k, p in written.items()} == \
        {"html": "report.html", "json": "report.json", "junit": "junit.xml"}
    assert all(p.stat().st_size > 0 for p in written.values())


def test_report_json_is_the_results_as_given(results, written):
    text = written["json"].read_text()
    assert json.loads(text) == results
    lone = [ln for ln in text.splitlines() if re.fullmatch(r"\s*-?[\d.]+,?", ln)]
    assert len(lone) < 20  # bins fill lines, not one a line


def test_the_page_is_self_contained(written):
    text = written["html"].read_text()
    assert not re.search(r"https?:", text), "the page names a URL"
    assert "@import" not in text and "url(http" not in text
    page = parse(text)
    assert page.fetches == []
    assert text.count("<style>") == 1  # the page's CSS, inline (the SVGs carry their own)


def test_every_section_is_there(written):
    page = parse(written["html"].read_text())
    assert {"verdicts", "compare", *ANCHORS} <= set(page.ids)
    for part in RUN_PARTS:
        assert page.classes[part] == len(ANCHORS), part
    # 3 runs x (goodput, EV states, link load) + the one mrc-vs-single-path overlay
    assert page.tags["svg"] == 10
    assert page.tags["figure"] == 10
    assert "empty" not in page.classes  # the fixture has every series


def test_ids_are_unique_across_the_inline_figures(written):
    ids = parse(written["html"].read_text()).ids
    assert [i for i, n in Counter(ids).items() if n > 1] == []
    assert len(ids) > 100  # matplotlib's clip paths and markers, each figure its own


def test_the_verdict_table_shows_the_failing_expectation(written):
    text = written["html"].read_text()
    table = text[text.index('id="verdicts"'):text.index('id="compare"')]
    bad = re.findall(r'<tr class="bad">(.*?)</tr>', table)
    assert len(bad) == 1 and "localized_ms" in bad[0] and "140.2" in bad[0] \
        and "&lt;= 100" in bad[0]
    assert len(re.findall(r'<tr class="ok">', table)) == 9
    assert table.count('class="badge pass"') == 2 and table.count('class="badge fail"') == 1


def test_the_comparison_sets_mrc_beside_single_path(written):
    text = written["html"].read_text()
    section = text[text.index('id="compare"'):text.index(f'id="{ANCHORS[0]}"')]
    for label in ("completion", "goodput", "goodput retained", "repair, worst fault",
                  "packets lost"):
        assert f"<th>{label}</th>" in section, label
    assert "0.644 s" in section and "0.806 s" in section and "1.25× (better)" in section


def test_junit_has_a_suite_per_run_and_a_case_per_expectation(written):
    root = ET.parse(written["junit"]).getroot()
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    assert list(suites) == ["drill.t0-t1-flap.mrc", "drill.t0-t1-flap.single-path",
                            "drill.t1-blackhole.mrc"]
    assert [(s.get("tests"), s.get("failures")) for s in suites.values()] == \
        [("4", "0"), ("1", "0"), ("5", "1")]
    assert [len(s.findall("testcase")) for s in suites.values()] == [4, 1, 5]
    failures = list(root.iter("failure"))
    assert len(failures) == 1
    assert failures[0].get("message") == "localized_ms: want <= 100, got 140.2"


def test_a_run_with_nothing_but_a_name_still_reports(tmp_path):
    results = {"drills": [
        {"name": "t1-reboot", "verdict": "fail"},
        {"name": "x", "mode": "mrc", "verdict": "fail", "expectations": None, "faults": [
            {"kind": "link-down", "target": None, "at_ns": None}],
         "goodput": None, "ev_states": {}, "link_load": None, "timeline": None,
         "metrics": None, "goodput_retained": None, "t0_ns": None, "wall_s": None},
        {"name": "x", "mode": "single-path", "baseline_of": "x", "verdict": "pass",
         "goodput": {"bin_ns": None, "planes": {"0": [None, 4096, 0]}},
         "ev_states": {"series": {"good": [1, None, 1]}},
         "link_load": [{"link": "odd", "bytes": None}], "timeline": [{"t_ns": 5}]},
    ]}
    paths = report.write(R.parse(results), tmp_path / "new" / "dir")
    page = parse(paths["html"].read_text())
    assert {"verdicts", "compare", "run-t1-reboot-mrc", "run-x-mrc"} <= set(page.ids)
    text = paths["html"].read_text()
    assert "No goodput bins in this run" in text and "no expectations were checked" in text
    assert "No goodput bins to overlay" in text  # one side of the comparison has none
    cases = [(s.get("name"), c.get("name"), c.find("failure") is not None)
             for s in ET.parse(paths["junit"]).getroot().iter("testsuite")
             for c in s.iter("testcase")]
    assert cases == [("drill.t1-reboot.mrc", "verdict", True), ("drill.x.mrc", "verdict", True),
                     ("drill.x.single-path", "verdict", False)]


def test_no_results_is_a_page_that_says_so(tmp_path):
    paths = report.write(R.parse({}), tmp_path)
    assert "No drill runs in these results" in paths["html"].read_text()
    assert ET.parse(paths["junit"]).getroot().findall("testsuite") == []


def test_a_60_s_run_is_cut_down_for_the_page(tmp_path):
    """60000 bins a plane: every curve is at most MAX_POINTS points; the page stays small."""
    results = long_run(60)
    assert len(results["drills"][0]["goodput"]["planes"]["0"]) > 60000
    paths = report.write(R.parse(results), tmp_path)
    size = paths["html"].stat().st_size
    assert size < 1_000_000, f"report.html is {size} bytes for one 60 s run"
    text = paths["html"].read_text()
    assert parse(text).tags["svg"] == 3
    assert re.search(r"s after the first write \(1 ms bins, \d+ to a point", text)


def test_downsample_keeps_a_one_bin_dip_in_its_band():
    values = np.full(60000, 100.0)
    values[31234] = 0.0
    c = plots.downsample(values, 1.0)
    assert len(c.mean) <= plots.MAX_POINTS and c.k == 60
    assert c.lo.min() == 0.0 and c.hi.max() == 100.0
    assert c.ms[0] == 30.0 and abs(c.ms[-1] - (60000 - 30)) < 1e-9
    short = plots.downsample([1, None, 3], 1.0)
    assert short.k == 1 and list(short.mean) == [1.0, 0.0, 3.0]


def test_a_link_is_named_by_its_place_in_the_plane():
    assert plots.link_place("r0h0:eth1--t0-p0-r0:eth1") == "r0h0-t0-r0"
    assert plots.link_place("t0-p3-r1:eth4--t1-p3-1:eth2") == "t0-r1-t1-1"
    assert plots.link_place("odd") == "odd"


def test_link_load_grids_group_links_by_plane(results):
    grids = plots.load_grids(R.parse(results)[0].link_load)
    assert [(g.kind, len(g.rows), g.planes) for g in grids] == \
        [("host", 4, [0, 1, 2, 3]), ("fabric", 4, [0, 1, 2, 3])]
    fabric = grids[1]
    flapped = fabric.bytes[fabric.rows.index("t0-r0-t1-0"), 0]
    assert flapped < fabric.bytes[fabric.rows.index("t0-r0-t1-1"), 0]  # down 150 ms of 644


def test_marks_come_from_the_timeline_or_else_from_the_faults(results):
    flap = R.parse(results)[0]
    marks = plots.fault_marks(flap)
    assert [(round(m.ms), m.style) for m in marks][:3] == \
        [(150, "fault"), (171, "localized"), (200, "recovery")]
    assert plots.mark_labels(marks)[:4] == [
        "link-down t0-p0-r0:eth3", "named t0-p0-r0:eth3--t1-p0-0:eth1", "link-up", "link-down"]
    bare = dataclasses.replace(flap, timeline=[])
    assert [(round(m.ms, 1), m.kind, m.style) for m in plots.fault_marks(bare)] == \
        [(150.0, "link-flap", "fault"), (171.3, "named", "localized")]


def test_comparisons_pair_a_baseline_with_the_run_it_names(results):
    groups = report.comparisons(R.parse(results))
    assert [[r.mode for r in g] for g in groups] == [["mrc", "single-path"]]


def test_to_json_fills_lines_and_gives_the_value_back():
    value = {"a": list(range(100)), "b": [{"c": None, "d": [], "e": {}}], "f": "x\u00b5"}
    text = report.to_json(value)
    assert json.loads(text) == value
    assert len(text.splitlines()) < 20 and max(map(len, text.splitlines())) <= 100


def _chromium() -> str | None:
    return next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome")
                 if shutil.which(b)), None)


@pytest.mark.skipif(_chromium() is None,
                    reason="needs headless Chromium to look at the page "
                           "(apt-get install chromium)")
def test_chromium_renders_the_page_and_it_is_not_blank(written, tmp_path):
    from matplotlib import image

    shot = tmp_path / "report.png"
    subprocess.run([_chromium(), "--headless", "--no-sandbox", "--disable-gpu",
                    "--hide-scrollbars", f"--user-data-dir={tmp_path / 'profile'}",
                    f"--screenshot={shot}", "--window-size=1400,4000",
                    written["html"].resolve().as_uri()],
                   capture_output=True, timeout=120, check=True)
    pixels = image.imread(shot)[..., :3]
    assert pixels.shape[:2] == (4000, 1400)
    rgb = (pixels.reshape(-1, 3) * 255).astype(np.uint32)
    colours = np.unique(rgb[:, 0] << 16 | rgb[:, 1] << 8 | rgb[:, 2])
    inked = (pixels.min(axis=2) < 0.9).mean()  # share of pixels that are not near white
    assert len(colours) > 200, f"only {len(colours)} colours: the page looks blank"
    assert inked > 0.03, f"only {inked:.1%} of the page is drawn on"
    bands = [(pixels[y:y + 500].min(axis=2) < 0.9).mean() for y in range(0, 4000, 500)]
    assert min(bands) > 0.005, f"a blank stretch of the page: {bands}"


def test_marks_outside_the_time_axis_sit_on_its_edge_with_their_time():
    from twin.chaos.plots import Mark, within

    marks = [Mark(-108.5, "link-down", "t0-p1-r0:eth3", "fault"),
             Mark(50.0, "link-up", None, "recovery"), Mark(900.0, "named", "x", "localized")]
    got = within(marks, 170.0)
    assert [(m.ms, m.kind) for m in got] == [(0.0, "link-down (at -108 ms)"),
                                             (50.0, "link-up"), (170.0, "named (at 900 ms)")]


def test_several_baselines_of_one_mode_each_get_their_own_section_and_suite(tmp_path):
    flow = {"bin_ns": 10**7, "t0_ns": 0, "series": [
        {"src": "r0h0", "dst": "r1h0", "bytes": [1000, 2000, 1500]},
        {"src": "r1h0", "dst": "r0h0", "bytes": [900, 2100, 1400]}]}
    runs = [{"name": "one-qp", "mode": "mrc", "variant": "mrc", "verdict": "pass",
             "flow_goodput": flow}]
    for qps in (1, 16):
        runs.append({"name": "one-qp", "mode": "single-path", "baseline_of": "mrc",
                     "variant": f"single-path x{qps} QP{'s' * (qps > 1)}", "verdict": "pass"})
    paths = report.write(R.parse({"drills": runs}), tmp_path)
    page = parse(paths["html"].read_text())
    assert {"run-one-qp-mrc", "run-one-qp-single-path-x1-QP",
            "run-one-qp-single-path-x16-QPs"} <= set(page.ids)
    text = paths["html"].read_text()
    assert "Goodput per flow" in text and text.count("Goodput per flow") == 1
    verdicts = text[text.index('id="verdicts"'):text.index('id="compare"')]
    assert "single-path x16 QPs" in verdicts  # each baseline's row says which it is
    assert "mrc against single-path x1 QP, single-path x16 QPs" in text
    suites = [s.get("name") for s in ET.parse(paths["junit"]).getroot().iter("testsuite")]
    assert suites == ["drill.one-qp.mrc", "drill.one-qp.single-path-x1-QP",
                      "drill.one-qp.single-path-x16-QPs"]


def test_trims_over_time_are_drawn_with_the_runs_signal_totals(tmp_path):
    from twin.chaos import metrics as M

    events = [{"kind": "trim", "t_ns": 10**9 + i * 3_000_000} for i in range(10)] + \
        [{"kind": "loss", "t_ns": 10**9}]
    sig = M.signal_series(events, 10**9)
    assert sig["trims"] == [4, 3, 3] and sig["bin_ns"] == 10**7
    assert M.signal_series(events, 10**9, bins=5)["trims"] == [4, 3, 3, 0, 0]  # the span
    run = {"name": "incast-victim", "mode": "mrc", "verdict": "pass",
           "signals": {**sig, "ce_echoed": 1234, "ev_skips_ecn": 99, "trims_resent": 10}}
    text = report.write(R.parse({"drills": [run]}), tmp_path)["html"].read_text()
    assert "Congestion signals" in text and "CE marks echoed 1,234" in text
    quiet = report.write(R.parse({"drills": [{**run, "signals": {"trims": [0, 0]}}]}),
                         tmp_path / "q")["html"].read_text()
    assert "Congestion signals" not in quiet


# -- baselines judged by what they are -------------------------------------------------


def _baseline_that_never_met(results: dict) -> dict:
    """t0-t1-flap's single-path baseline as a RoCE QP hashed away from the flapping link,
    reported (no baseline_expect), on the unshaped mrc-4p."""
    mrc, base = (json.loads(json.dumps(r)) for r in results["drills"][:2])
    for f in base["faults"]:
        f.update(crossed=False, crossed_from="paths taken", met=False)
    base.update(verdict="reported", outcome="byte-exact; its traffic never crossed "
                "t0-p0-r0:eth3", shaped=False)
    base["expectations"] = [{"what": "faults met traffic", "want": ">= 20 ms", "ok": False,
                             "got": "t0-p0-r0:eth3: no path the traffic took crosses it",
                             "judged": False}]
    mrc["shaped"] = False
    return {"drills": [mrc, base]}


def test_a_comparison_does_not_rank_a_fault_the_baseline_never_met(results):
    mrc, base = R.parse(_baseline_that_never_met(results))
    assert report.unranked(mrc, base, "repair, worst fault") == "baseline never met the fault"
    assert report.unranked(mrc, base, "packets lost") == "baseline never met the fault"
    assert report.unranked(mrc, base, "completion") == "CPU-bound (unshaped fabric)"
    assert report.unranked(mrc, base, "byte-exact") is None
    note = report.unranked_note([mrc, base])
    assert "single-path never met the fault" in note and "CPU-bound" in note
    shaped, met = R.parse(results)[:2]  # as the fixture has them
    assert all(report.unranked(shaped, met, label) is None
               for label, *_ in report.COMPARE_ROWS)


def test_a_failed_qp_is_not_ranked_on_completion(results):
    mrc, base = (json.loads(json.dumps(r)) for r in results["drills"][:2])
    base["failed_qps"] = [{"src": "r0h0", "dst": "r1h0", "why": "retry limit", "at_ms": 3}]
    base["outcome"] = "RoCE QP failed: PSN 9 lost 8 times (retry limit) at 3 ms"
    typed = R.DrillRun.from_json
    assert report.unranked(typed(mrc), typed(base), "completion") == "a QP failed"
    for f in base["faults"]:  # it crossed the fault, and died of it: no repair to rank
        f.update(crossed=True, met=False)
    mrc, base = typed(mrc), typed(base)
    assert report.unranked(mrc, base, "repair, worst fault") == "a QP failed"
    assert "never met" not in report.unranked_note([mrc, base])
    assert "RoCE QP failed: PSN 9" in report.unranked_note([mrc, base])


def test_a_reported_baseline_is_shown_not_judged(results, tmp_path):
    paths = report.write(R.parse(_baseline_that_never_met(results)), tmp_path)
    text = paths["html"].read_text()
    assert 'class="badge reported"' in text and "1 baseline reported (not judged)" in text
    assert '<tr class="shown">' in text and '<tr class="bad">' not in text
    section = text[text.index('id="compare"'):]
    assert "Not ranked: single-path never met the fault" in section
    assert "(better)" not in section and "(worse)" not in section
    assert "never crossed t0-p0-r0:eth3" in section  # the outcome row
    root = ET.parse(paths["junit"]).getroot()
    assert list(root.iter("failure")) == []
