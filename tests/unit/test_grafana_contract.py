"""twin.telemetry.grafana against a double of Grafana's HTTP API, through the real
grafana-client: what is pushed, what a second push does, what Grafana would refuse,
and how each failure reads (one line: the URL and the status)."""

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from click.testing import CliRunner

from tests.doubles.fake_grafana import FakeGrafana, frontend_problems
from tests.doubles.fake_grafana import fake_grafana as fake_grafana  # noqa: F401 - fixture
from twin import faults as F
from twin import lab as L
from twin.cli import main
from twin.errors import GrafanaError, UsageError
from twin.lab import compile_spec
from twin.telemetry import dashboards as D
from twin.telemetry import grafana as G

LAB = "mrc-4p"
LINK = "t0-p0-r0:eth3--t1-p0-0:eth1"
T0 = 1_700_000_000.0


def ev(event, t, kind="link-down", target=LINK, **more):
    return {"t_wall": T0 + t, "t_mono_ns": int(t * 1e9), "event": event, "kind": kind,
            "target": target, "ends": [target.split("--")[0]], **more}


EVENTS = [ev("apply", 0), ev("revert", 5.5),
          ev("apply", 10, kind="link-flap"), ev("down", 10.1, kind="link-flap"),
          ev("up", 10.6, kind="link-flap"), ev("revert", 11, kind="link-flap"),
          ev("apply", 20, kind="blackhole", target="t1-p0-1", hidden=True)]


def push(grafana, events=EVENTS, **kw):
    return G.push(grafana.url, token=grafana.token, fabric=compile_spec(LAB).fabric, lab=LAB,
                  events=events, **kw)


def one_line(e: BaseException) -> str:
    text = str(e)
    assert "\n" not in text and "Traceback" not in text
    return text


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# -- push -----------------------------------------------------------------------------


def test_push_creates_datasource_folder_dashboard_and_annotations(fake_grafana):
    result = push(fake_grafana, prometheus_url="http://127.0.0.1:9191")
    (ds,) = fake_grafana.datasources.values()
    assert (ds["name"], ds["uid"], ds["type"], ds["url"]) == (
        "mrc-twin-mrc-4p", "twin-prom-mrc-4p", "prometheus", "http://127.0.0.1:9191")
    assert ds["jsonData"]["timeInterval"] == "1s" and ds["isDefault"] is False
    (folder,) = fake_grafana.folders.values()
    assert folder["title"] == "mrc-twin"
    (stored,) = fake_grafana.dashboards.values()
    assert stored["folderUid"] == folder["uid"] and stored["version"] == 1
    assert stored["dashboard"]["uid"] == "twin-mrc-4p"
    assert len(fake_grafana.annotations) == 4  # two faults, one flap, one hidden
    assert result.to_dict() == {
        "url": fake_grafana.url, "grafana_version": "10.4.2", "lab": LAB,
        "datasource": {"name": "mrc-twin-mrc-4p", "uid": "twin-prom-mrc-4p",
                       "url": "http://127.0.0.1:9191", "action": "created"},
        "folder": {"title": "mrc-twin", "uid": folder["uid"]},
        "dashboards": [{"uid": "twin-mrc-4p", "title": "mrc-4p: fabric overview",
                        "url": f"{fake_grafana.url}/d/twin-mrc-4p/mrc-4p-fabric-overview",
                        "version": 1}],
        "annotations": {"created": 4, "updated": 0, "unchanged": 0, "regions": 4,
                        "in_force": 1}}
    steps = [(m, p) for m, p, _ in fake_grafana.requests]
    assert steps.index(("POST", "/api/datasources")) < steps.index(("POST", "/api/folders")) \
        < steps.index(("POST", "/api/dashboards/db")) < steps.index(("POST", "/api/annotations"))


def test_pushed_dashboards_pass_what_grafana_needs_and_name_the_pushed_datasource(fake_grafana):
    push(fake_grafana)
    uids = {d["uid"] for d in fake_grafana.datasources.values()}
    for stored in fake_grafana.dashboards.values():
        assert frontend_problems(stored["dashboard"], uids) == []


def test_a_second_push_updates_and_duplicates_nothing(fake_grafana):
    push(fake_grafana)
    again = push(fake_grafana)
    assert again.datasource["action"] == "unchanged"
    assert again.dashboards[0]["version"] == 2
    assert again.annotations == {"created": 0, "updated": 0, "unchanged": 4, "regions": 4,
                                 "in_force": 1}
    assert (len(fake_grafana.datasources), len(fake_grafana.folders),
            len(fake_grafana.dashboards), len(fake_grafana.annotations)) == (1, 1, 1, 4)
    # the fault in force is reverted: its point becomes a region, patched in place
    later = push(fake_grafana, events=[*EVENTS, ev("revert", 30, kind="blackhole",
                                                   target="t1-p0-1", hidden=True)])
    assert later.annotations["updated"] == 1 and len(fake_grafana.annotations) == 4
    hidden = next(a for a in fake_grafana.annotations.values() if "hidden" in a["tags"])
    assert hidden["timeEnd"] - hidden["time"] == 10_000
    assert hidden["tags"] == ["mrc-twin", LAB, "hidden"]  # the patch kept them


def test_a_changed_prometheus_url_updates_the_datasource_in_place(fake_grafana):
    fake_grafana.add_datasource(name="mrc-twin-mrc-4p", type="prometheus", access="proxy",
                                url="http://old:9090", uid="someone-elses", isDefault=True)
    result = push(fake_grafana)
    (ds,) = fake_grafana.datasources.values()
    assert result.datasource["action"] == "updated"
    assert (ds["url"], ds["uid"], ds["version"]) == ("http://127.0.0.1:9478",
                                                     "twin-prom-mrc-4p", 2)
    assert ds["isDefault"] is True  # a user's default stays theirs


def test_a_provisioned_datasource_is_kept_or_named(fake_grafana):
    fake_grafana.add_datasource(name="mrc-twin-mrc-4p", type="prometheus", access="proxy",
                                url="http://127.0.0.1:9478", uid="twin-prom-mrc-4p",
                                jsonData={"timeInterval": "1s", "httpMethod": "POST"},
                                readOnly=True)
    assert push(fake_grafana).datasource["action"] == "unchanged"
    with pytest.raises(GrafanaError, match="provisioned from files") as e:
        push(fake_grafana, prometheus_url="http://127.0.0.1:9999")
    assert one_line(e.value).startswith(f"grafana {fake_grafana.url}: ")


def test_an_existing_folder_is_found_by_its_title(fake_grafana):
    grafana = G.connect(fake_grafana.url, fake_grafana.token)
    made = grafana.api.folder.create_folder("lab dashboards", "their-uid")
    assert push(fake_grafana, folder="lab dashboards").folder["uid"] == made["uid"]
    assert len(fake_grafana.folders) == 1


def test_basic_auth_works_too(fake_grafana):
    result = G.push(fake_grafana.url, user="admin", password="admin",
                    fabric=compile_spec(LAB).fabric, lab=LAB, events=[])
    assert result.annotations["regions"] == 0


# -- failures: one line, the URL and the status ---------------------------------------------


@pytest.mark.parametrize("creds,words", [
    ({"token": "wrong"}, "401 Unauthorized: Invalid API key (check --token)"),
    ({"user": "admin", "password": "wrong"},
     "401 Unauthorized: Invalid username or password (check --user and --password)"),
    ({}, "401 Unauthorized (give --token, or --user and --password)"),
])
def test_bad_credentials_are_one_line_with_the_url_and_401(fake_grafana, creds, words):
    with pytest.raises(GrafanaError) as e:
        G.connect(fake_grafana.url, **creds)
    assert one_line(e.value) == f"grafana {fake_grafana.url}: {words}"
    assert e.value.status == 401
    assert ("GET", "/api/health", None) in fake_grafana.requests  # health asked no login


def test_an_unreachable_grafana_is_one_line():
    url = f"http://127.0.0.1:{closed_port()}"
    with pytest.raises(GrafanaError) as e:
        G.connect(url, token="t", timeout=2)
    assert one_line(e.value) == f"grafana {url}: unreachable: connection refused"


class NotGrafana(BaseHTTPRequestHandler):
    """A web server that is not Grafana: 404 pages, or 200 with a body that is not JSON."""

    bad_json = False

    def do_GET(self):
        status, kind = (200, "application/json") if self.bad_json else (404, "text/html")
        body = b"<html>nothing here</html>"
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("bad_json,words", [
    (False, "GET /api/health: 404 Not Found (is this a Grafana?)"),
    (True, "GET /api/health: the answer is not JSON (is this a Grafana?)")])
def test_a_server_that_is_not_grafana_is_named(bad_json, words):
    handler = type("Handler", (NotGrafana,), {"bad_json": bad_json})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        with pytest.raises(GrafanaError) as e:
            G.connect(url, token="t")
        assert one_line(e.value) == f"grafana {url}: {words}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("url", ["127.0.0.1:3000", "ftp://x", "http://"])
def test_a_url_that_is_not_http_is_a_usage_error(url):
    with pytest.raises(UsageError, match="http"):
        G.connect(url, token="t")


def test_token_and_user_together_are_a_usage_error():
    with pytest.raises(UsageError, match="not both"):
        G.connect("http://127.0.0.1:1", token="t", user="u", password="p")
    with pytest.raises(UsageError, match="password"):
        G.connect("http://127.0.0.1:1", user="u")


# -- the double refuses what Grafana refuses (and twin reads it as one line) ------------


@pytest.fixture
def grafana(fake_grafana):
    return G.connect(fake_grafana.url, fake_grafana.token)


def board(**changes):
    return {**D.overview(compile_spec(LAB).fabric, LAB, "twin-prom-mrc-4p"), **changes}


@pytest.mark.parametrize("changes,words", [
    ({"title": " "}, "400 Bad Request: Dashboard title cannot be empty"),
    ({"uid": "x" * 41}, "400 Bad Request: uid too long, max 40 characters"),
    ({"uid": "has/slash"}, "400 Bad Request: uid contains illegal characters"),
    ({"refresh": "1s"}, "400 Bad Request: Dashboard refresh interval is too low"),
    ({"tags": ["t" * 51]}, "400 Bad Request: dashboard tag too long, max 50 characters"),
])
def test_a_dashboard_grafana_refuses(grafana, changes, words):
    with pytest.raises(GrafanaError) as e:
        grafana.push_dashboard(board(**changes), "")
    assert one_line(e.value) == f"grafana {grafana.url}: POST /api/dashboards/db: {words}"


def test_a_version_conflict_without_overwrite_is_412(grafana):
    grafana.push_dashboard(board(), "")
    body = {"dashboard": board(), "overwrite": False}
    with pytest.raises(GrafanaError) as e:
        grafana.call("POST /api/dashboards/db", grafana.api.dashboard.update_dashboard, body)
    assert "412 Precondition Failed: The dashboard has been changed by someone else" \
        in one_line(e.value)
    ok = grafana.api.dashboard.update_dashboard({**body, "dashboard": board(version=1)})
    assert ok["version"] == 2


def test_datasources_folders_and_annotations_grafana_refuses(grafana, fake_grafana):
    api = grafana.api
    for body in ({"type": "prometheus", "access": "proxy"}, {"name": "n", "access": "proxy"},
                 {"name": "n", "type": "prometheus"}):
        with pytest.raises(GrafanaError, match="400 Bad Request: bad request data"):
            grafana.call("POST /api/datasources", api.datasource.create_datasource, body)
    grafana.ensure_datasource("ds", "http://127.0.0.1:9090", "ds-uid")
    with pytest.raises(GrafanaError, match="409 Conflict: data source with the same name"):
        grafana.call("POST /api/datasources", api.datasource.create_datasource,
                     {"name": "ds", "type": "prometheus", "access": "proxy"})
    grafana.ensure_folder("f")
    with pytest.raises(GrafanaError, match="409 Conflict: a folder or dashboard in the "
                                           "general folder with the same name"):
        grafana.call("POST /api/folders", api.folder.create_folder, "f")
    with pytest.raises(GrafanaError, match="400 Bad Request: Failed to save annotation"):
        grafana.post_annotation({"time": 1, "tags": [], "text": ""})
    with pytest.raises(GrafanaError, match="404 Not Found: Annotation not found"):
        grafana.patch_annotation(999, {"timeEnd": 2, "tags": [], "text": "x"})
    with pytest.raises(GrafanaError, match="404 Not Found: Data source not found"):
        grafana.call("GET", api.datasource.get_datasource_by_uid, "nope")


def test_a_patch_keeps_what_it_does_not_send_and_replaces_tags_it_does(grafana, fake_grafana):
    ann_id = grafana.post_annotation({"time": 1000, "tags": ["a", "b"], "text": "t"})
    grafana.api.client.PATCH(f"/annotations/{ann_id}", json={"timeEnd": 2000})
    ann = fake_grafana.annotations[ann_id]
    assert (ann["time"], ann["timeEnd"], ann["tags"], ann["text"]) == (1000, 2000, ["a", "b"], "t")
    grafana.api.annotations.partial_update_annotation(ann_id, time_to=3000)  # sends tags []
    assert fake_grafana.annotations[ann_id]["tags"] == []  # why twin always sends its tags


# -- fault regions (pure) -------------------------------------------------------------------


def test_fault_regions_pair_apply_and_revert():
    regions = G.fault_regions(EVENTS, LAB)
    assert regions == [
        {"time": 1_700_000_000_000, "timeEnd": 1_700_000_005_500,
         "tags": ["mrc-twin", LAB, "link-down", LINK],
         "text": f"link-down {LINK} at t0-p0-r0:eth3"},
        {"time": 1_700_000_010_000, "timeEnd": 1_700_000_011_000,
         "tags": ["mrc-twin", LAB, "link-flap", LINK],
         "text": f"link-flap {LINK} at t0-p0-r0:eth3"},
        {"time": 1_700_000_010_100, "timeEnd": 1_700_000_010_600,
         "tags": ["mrc-twin", LAB, "link-flap", LINK, "flap"],
         "text": f"link-flap {LINK} at t0-p0-r0:eth3: down"},
        {"time": 1_700_000_020_000, "tags": ["mrc-twin", LAB, "hidden"],
         "text": "hidden fault (a blind drill's) (in force)"},
    ]


def test_a_hidden_fault_is_never_revealed():
    events = [ev("apply", 0, kind="link-flap", hidden=True),
              ev("down", 0.1, kind="link-flap", hidden=True),
              ev("up", 0.6, kind="link-flap", hidden=True),
              ev("revert", 1, kind="link-flap", hidden=True)]
    (region,) = G.fault_regions(events, LAB)  # no flap regions: their rhythm tells the kind
    text = json.dumps(region)
    assert "link" not in text and "t0-" not in text and "flap" not in text
    assert region["tags"] == ["mrc-twin", LAB, "hidden"]


def test_fault_regions_survive_a_messy_log():
    events = [{"event": "apply"}, {"t_wall": "x", "event": "apply"},  # no time: skipped
              ev("revert", 1),  # a revert with no apply: nothing to draw
              ev("apply", 2), ev("apply", 3),  # applied again, no revert between
              ev("revert", 4), ev("down", 5, kind="link-flap")]  # a flap still down
    regions = G.fault_regions(events, LAB)
    assert [(r["time"] - 1_700_000_000_000, r.get("timeEnd", 0) and
             r["timeEnd"] - 1_700_000_000_000) for r in regions] == [
        (2000, 0), (3000, 4000), (5000, 0)]
    assert regions[0]["text"].endswith("(in force)")


# -- live, during a drill --------------------------------------------------------------------


def test_the_live_annotator_draws_a_region_as_the_fault_goes(fake_grafana):
    annotator = G.LiveAnnotator(G.connect(fake_grafana.url, fake_grafana.token), LAB,
                                tags=["drill-t1"])
    annotator.fault_applied("link-down", LINK, T0, ends=["t0-p0-r0:eth3"])
    assert annotator.flush(5)
    (ann,) = fake_grafana.annotations.values()
    assert ann["time"] == ann["timeEnd"] == 1_700_000_000_000  # a point while in force
    assert ann["text"].endswith("(in force)")
    annotator.fault_reverted("link-down", LINK, T0 + 2.25)
    annotator.close(5)
    assert annotator.error is None and (annotator.posted, annotator.patched) == (1, 1)
    assert ("PATCH", f"/api/annotations/{ann['id']}") in [
        (m, p) for m, p, _ in fake_grafana.requests]
    ann = fake_grafana.annotations[ann["id"]]
    assert (ann["time"], ann["timeEnd"]) == (1_700_000_000_000, 1_700_000_002_250)
    assert ann["tags"] == ["mrc-twin", LAB, "link-down", LINK, "drill-t1"]
    # a push afterwards knows it: the drill's tag on it is no reason for another
    result = push(fake_grafana, events=[ev("apply", 0), ev("revert", 2.25)])
    assert result.annotations["unchanged"] == 1 and len(fake_grafana.annotations) == 1


def test_the_live_annotator_takes_the_fault_log_lines(fake_grafana):
    with G.LiveAnnotator(G.connect(fake_grafana.url, fake_grafana.token), LAB) as annotator:
        for e in EVENTS:
            annotator.event(e)
    assert annotator.error is None
    got = sorted((a["time"], a["timeEnd"], tuple(a["tags"])) for a in
                 fake_grafana.annotations.values())
    want = sorted((r["time"], r.get("timeEnd", r["time"]), tuple(r["tags"]))
                  for r in G.fault_regions(EVENTS, LAB))
    assert got == want


def test_a_dead_grafana_never_breaks_the_drill():
    with FakeGrafana() as dying:
        annotator = G.LiveAnnotator(G.connect(dying.url, dying.token, timeout=2), LAB)
    started = time.monotonic()
    annotator.fault_applied("link-down", LINK, T0)  # the server is gone: queued, no raise
    annotator.fault_reverted("link-down", LINK, T0 + 1)
    annotator.fault_applied("blackhole", "t1-p0-0", T0 + 2)
    assert time.monotonic() - started < 0.5  # the drill's thread never waits on Grafana
    annotator.close(10)
    assert annotator.error.startswith(f"grafana {dying.url}: unreachable")
    assert "\n" not in annotator.error
    assert annotator.posted == 0


# -- the command line, on a fake-runtime lab -------------------------------------------------


@pytest.fixture
def lab_with_faults(clean_world):
    L.up(LAB, "fake")
    att = L.attach(LAB)
    F.link_down(att, "t0-p0-r0:eth3")
    F.link_up(att, "t0-p0-r0:eth3")
    with F.hidden():
        F.blackhole(att, "t1-p0-1")
    return att


def test_twin_grafana_push(lab_with_faults, fake_grafana):
    att = lab_with_faults
    (att.state.dir / "telemetry").mkdir()
    (att.state.dir / "telemetry" / "telemetry.json").write_text(
        json.dumps({"prometheus_url": "http://127.0.0.1:19090"}))
    args = ["grafana", "push", "--url", fake_grafana.url, "--token", fake_grafana.token]
    result = CliRunner().invoke(main, [*args, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["datasource"]["url"] == "http://127.0.0.1:19090"  # as telemetry recorded
    assert data["annotations"] == {"created": 2, "updated": 0, "unchanged": 0, "regions": 2,
                                   "in_force": 1}
    texts = " ".join(a["text"] + " ".join(a["tags"]) for a in fake_grafana.annotations.values())
    assert "t1-p0-1" not in texts and "blackhole" not in texts  # the hidden one
    again = CliRunner().invoke(main, args)
    assert again.exit_code == 0, again.output
    assert "0 created, 0 updated, 2 already there" in again.output
    assert "mrc-4p: fabric overview" in again.output


def test_twin_grafana_push_failures_exit_with_one_line(lab_with_faults, fake_grafana):
    runner = CliRunner()
    bad = runner.invoke(main, ["grafana", "push", "--url", fake_grafana.url, "--token", "no"])
    assert bad.exit_code == 1
    assert bad.output.strip() == (f"error: grafana {fake_grafana.url}: 401 Unauthorized: "
                                  "Invalid API key (check --token)")
    both = runner.invoke(main, ["grafana", "push", "--url", fake_grafana.url, "--token", "t",
                                "--user", "u", "--password", "p"])
    assert both.exit_code == 2 and "not both" in both.output
    gone = runner.invoke(main, ["grafana", "push", "--url",
                                f"http://127.0.0.1:{closed_port()}", "--token", "t"])
    assert gone.exit_code == 1 and len(gone.output.strip().splitlines()) == 1
    assert "unreachable: connection refused" in gone.output


def test_twin_grafana_dashboards(lab_with_faults, tmp_path):
    result = CliRunner().invoke(main, ["grafana", "dashboards", "--out", str(tmp_path / "g"),
                                       "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["lab"] == LAB and len(data["files"]) == 3
    assert data["dashboards"][0]["uid"] == "twin-mrc-4p"
    assert (tmp_path / "g" / "dashboards" / "twin-mrc-4p.json").exists()


def test_twin_grafana_dashboards_of_a_spec_needs_no_lab(tmp_path):
    result = CliRunner().invoke(main, ["grafana", "dashboards", "mrc-4p-shaped"])
    assert result.exit_code == 0, result.output
    assert "dashboards/twin-mrc-4p-shaped.json" in result.output
    assert "docker run" in result.output
    none = CliRunner().invoke(main, ["grafana", "dashboards"])
    assert none.exit_code == 2 and "name a spec" in none.output
