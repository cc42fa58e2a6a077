"""A lab's data source, dashboards and fault annotations, pushed to a running Grafana.

    connect(url, token | user+password)   a Grafana that answered GET /api/health and
                                          accepted the credentials -> Grafana
    Grafana.ensure_datasource             the lab's Prometheus: created, or updated in place
    Grafana.ensure_folder                 the folder twin's dashboards go in
    Grafana.push_dashboard                a generated dashboard, overwriting its last push
    Grafana.sync_annotations              fault regions, each posted once (a second push
                                          updates what changed, duplicates nothing)
    fault_regions(events, lab)            (pure) the lab's fault log -> annotation requests
    push(url, ..., fabric, lab, events)   all of the above, in order -> PushResult
    LiveAnnotator                         a drill's faults as regions while it runs

HTTP goes through the grafana-client package (`GrafanaApi`): its element methods where
one fits, `api.client.GET` for /api/health (its own health check reads
/api/frontend/settings, which needs a login). Every failure becomes one GrafanaError
line naming the URL and the HTTP status, or `unreachable: <reason>`; no traceback and
no exception of niquests or grafana-client gets out.

Annotations. A fault is a region from its `apply` to its `revert` in the lab's
events.jsonl (twin.faults.log_event), tagged `mrc-twin`, the lab, its kind and its
target; the dashboards show every annotation tagged `mrc-twin` and the lab. A fault
with no revert yet (in force, or its process was killed) is a point at its apply,
text "... (in force)": a region to "now" would stop growing the moment it was posted.
The next push, or the LiveAnnotator, gives it its end. A link-flap also gets one short
region per down..up, tagged `flap`, inside its whole region. A blind drill's hidden
fault is tagged `hidden` and says nothing of its kind or target, and its flaps are not
drawn (their rhythm would tell the kind). Annotations are the organization's (no
dashboard id): every dashboard of the lab, and a drill's, finds them by tags.
"""

from __future__ import annotations

import json
import queue
import re
import threading
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from http import HTTPStatus
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import niquests.exceptions
from grafana_client import GrafanaApi
from grafana_client.client import GrafanaException, GrafanaTimeoutError

from twin.errors import GrafanaError, UsageError
from twin.fabric.model import Fabric
from twin.telemetry import dashboards as D
from twin.telemetry import provision as P

TIMEOUT_S = 5.0  # one HTTP request
MRC_TAG = D.MRC_TAG


# -- errors -----------------------------------------------------------------------------


def _one_line(text: str, limit: int = 200) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _unreachable_reason(exc: BaseException) -> str:
    """The cause of a connection failure in a few words: the OS's, or the resolver's."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, OSError) and cause.strerror and cause.errno:
            return cause.strerror.lower()
        cause = cause.__cause__ or cause.__context__
    text = str(exc)
    if m := re.search(r"Failed to resolve '([^']+)'", text):
        return f"cannot resolve {m.group(1)}"
    if m := re.search(r"\[Errno -?\d+\] ([^'\")]+)", text):
        return m.group(1).strip().lower()
    return _one_line(text, 160) or type(exc).__name__


def _body_message(body: Any) -> str:
    if isinstance(body, dict) and body.get("message"):
        return _one_line(body["message"])
    if isinstance(body, str) and not body.lstrip().startswith("<"):  # an HTML page: no
        return _one_line(body, 120)
    return ""


# -- the client ---------------------------------------------------------------------------


@dataclass
class Grafana:
    """A connected Grafana: its URL, grafana-client's API object and its version."""

    url: str
    api: GrafanaApi
    auth: str  # "token", "basic" or "none": what a 401 should ask the user to check
    timeout: float = TIMEOUT_S
    version: str = ""

    # -- every request goes through here -----------------------------------------------

    def call(self, what: str, fn, *args, **kwargs) -> Any:
        """`fn(*args)`, a grafana-client request; `what` names it for an error line."""
        try:
            return fn(*args, **kwargs)
        except GrafanaTimeoutError:
            raise GrafanaError(self.url, f"unreachable: no answer within {self.timeout:g} s "
                                         f"({what})") from None
        except GrafanaException as e:
            if not e.status_code:  # a transport error grafana-client wrapped
                raise GrafanaError(self.url, f"unreachable: {_unreachable_reason(e)}") from None
            raise self._status_error(what, e.status_code, e.response) from None
        except (niquests.exceptions.InvalidJSONError, ValueError):  # before RequestException:
            # niquests' JSON error is one. A 2xx whose body is not JSON: not a Grafana API
            raise GrafanaError(self.url, f"{what}: the answer is not JSON (is this a "
                                         "Grafana?)") from None
        except niquests.exceptions.RequestException as e:
            raise GrafanaError(self.url, f"unreachable: {_unreachable_reason(e)}") from None

    def _status_error(self, what: str, status: int, body: Any) -> GrafanaError:
        try:
            phrase = HTTPStatus(status).phrase
        except ValueError:
            phrase = "error"
        message = _body_message(body)
        detail = f": {message}" if message and message.lower() != phrase.lower() else ""
        if status == 401:
            hint = {"token": "check --token", "basic": "check --user and --password",
                    "none": "give --token, or --user and --password"}[self.auth]
            return GrafanaError(self.url, f"401 {phrase}{detail} ({hint})", status)
        if status == 403:
            return GrafanaError(self.url, f"{what}: 403 {phrase}{detail} (the credentials' "
                                          "role may not: data sources need Admin, folders "
                                          "and dashboards Editor)", status)
        if status == 404 and what.startswith("GET /api/health"):
            detail += " (is this a Grafana?)"
        return GrafanaError(self.url, f"{what}: {status} {phrase}{detail}", status)

    def _find(self, what: str, fn, *args) -> dict | None:
        """A GET that may say 404: the object, or None."""
        try:
            return self.call(what, fn, *args)
        except GrafanaError as e:
            if e.status == 404:
                return None
            raise

    # -- what twin does with a Grafana ------------------------------------------------

    def health(self) -> dict:
        """GET /api/health (no login needed): {"database": "ok", "version": ...}."""
        answer = self.call("GET /api/health", self.api.client.GET, "/health")
        if not isinstance(answer, dict) or "version" not in answer:
            raise GrafanaError(self.url, "GET /api/health did not answer as Grafana does (is "
                                         "this a Grafana?)")
        return answer

    def ensure_datasource(self, name: str, prometheus_url: str, uid: str) -> dict:
        """The Prometheus data source `name` with `uid`, pointing at `prometheus_url`:
        found by name (GET /api/datasources/name/:name), else by uid, and updated in
        place (PUT /api/datasources/uid/:uid) if it differs; else created (POST
        /api/datasources). What it did: {name, uid, url, action}."""
        api = self.api.datasource
        wanted = {"name": name, "type": "prometheus", "uid": uid, "access": "proxy",
                  "url": prometheus_url, "isDefault": False,
                  "jsonData": {"timeInterval": P.SCRAPE_INTERVAL, "httpMethod": "POST"}}
        found = self._find(f"GET /api/datasources/name/{name}",
                           api.get_datasource_by_name, name) \
            or self._find(f"GET /api/datasources/uid/{uid}", api.get_datasource_by_uid, uid)
        result = {"name": name, "uid": uid, "url": prometheus_url}
        if found is None:
            self.call("POST /api/datasources", api.create_datasource, wanted)
            return {**result, "action": "created"}
        same = all(found.get(k) == wanted[k] for k in ("name", "type", "uid", "access", "url")) \
            and all((found.get("jsonData") or {}).get(k) == v
                    for k, v in wanted["jsonData"].items())
        if same:
            return {**result, "action": "unchanged"}
        if found.get("readOnly"):
            raise GrafanaError(self.url, f"data source {found.get('name')} is provisioned from "
                                         "files (read-only): change it there (`twin grafana "
                                         "dashboards` rewrites them)")
        wanted["isDefault"] = bool(found.get("isDefault"))  # a user's default stays theirs
        self.call(f"PUT /api/datasources/uid/{found['uid']}", api.update_datasource_by_uid,
                  found["uid"], wanted)
        return {**result, "action": "updated"}

    def ensure_folder(self, title: str) -> str:
        """The uid of the folder titled `title`, created (POST /api/folders) if none is."""
        api = self.api.folder

        def by_title() -> str | None:
            folders = self.call("GET /api/folders", api.get_all_folders) or []
            return next((f["uid"] for f in folders if f.get("title") == title), None)

        if uid := by_title():
            return uid
        uid = D.short_uid("twin-folder", title)
        try:
            return self.call("POST /api/folders", api.create_folder, title, uid)["uid"]
        except GrafanaError as e:
            if e.status not in (409, 412):  # a race, or our uid on a renamed folder
                raise
            found = self._find(f"GET /api/folders/{uid}", api.get_folder, uid)
            uid = found["uid"] if found else by_title()
            if not uid:
                raise
            return uid

    def push_dashboard(self, dashboard: dict, folder_uid: str) -> dict:
        """POST /api/dashboards/db, overwriting the dashboard of the same uid: {uid,
        title, url (absolute), version}."""
        body = {"dashboard": {**dashboard, "id": None}, "folderUid": folder_uid,
                "overwrite": True, "message": "twin grafana push"}
        answer = self.call("POST /api/dashboards/db", self.api.dashboard.update_dashboard, body)
        origin = "{0.scheme}://{0.netloc}".format(urlparse(self.url))
        return {"uid": answer.get("uid", dashboard["uid"]), "title": dashboard["title"],
                "url": origin + answer.get("url", f"/d/{dashboard['uid']}"),
                "version": answer.get("version")}

    def post_annotation(self, region: dict) -> int:
        """POST /api/annotations: an organization annotation (no dashboard), a region if
        `region` has timeEnd, else a point. Its id."""
        answer = self.call("POST /api/annotations", self.api.annotations.add_annotation,
                           time_from=region["time"], time_to=region.get("timeEnd"),
                           tags=list(region["tags"]), text=region["text"])
        return int(answer["id"])

    def patch_annotation(self, annotation_id: int, region: dict) -> None:
        """PATCH /api/annotations/:id with the region's end, text and tags. The tags are
        always sent: grafana-client sends [] for none, and Grafana would take that as
        "no tags" (it keeps a field only when it is absent, 0 or "")."""
        self.call(f"PATCH /api/annotations/{annotation_id}",
                  self.api.annotations.partial_update_annotation, annotation_id,
                  time_to=region.get("timeEnd"), tags=list(region["tags"]),
                  text=region["text"])

    def find_annotations(self, tags: Sequence[str], time_from: int, time_to: int,
                         limit: int) -> list[dict]:
        """GET /api/annotations: those with every one of `tags` overlapping the range."""
        return self.call("GET /api/annotations", self.api.annotations.find_annotations,
                         time_from=time_from, time_to=time_to, tags=list(tags),
                         ann_type="annotation", limit=limit) or []

    def sync_annotations(self, lab: str, regions: Sequence[dict]) -> dict:
        """Post each region once: one already there (same start, its tags among the
        annotation's: a drill's annotator may add some) is patched if its end or text
        changed, and left alone if not. Counts of what happened."""
        counts = {"created": 0, "updated": 0, "unchanged": 0}
        if not regions:
            return counts
        first = min(r["time"] for r in regions)
        last = max(r.get("timeEnd", r["time"]) for r in regions)
        there: dict[int, list[dict]] = {}
        for a in self.find_annotations([MRC_TAG, lab], first - 1, last + 1,
                                       limit=2 * len(regions) + 100):
            there.setdefault(a.get("time"), []).append(a)
        for region in regions:
            old = next((a for a in there.get(region["time"], []) if _same(region, a)), None)
            if old is not None:
                there[region["time"]].remove(old)  # one annotation answers for one region
            if old is None:
                self.post_annotation(region)
                counts["created"] += 1
            elif (old.get("timeEnd") or old["time"]) != region.get("timeEnd", region["time"]) \
                    or old.get("text") != region["text"]:
                self.patch_annotation(old["id"], region)
                counts["updated"] += 1
            else:
                counts["unchanged"] += 1
        return counts


def _same(region: dict, annotation: dict) -> bool:
    """Is `annotation` the one posted for `region`? Its tags hold the region's, and any
    more are not ones that mark another kind of region (a flap inside its fault)."""
    tags, theirs = set(region["tags"]), set(annotation.get("tags") or ())
    return tags <= theirs and not (theirs - tags) & {"flap", "hidden"}


def _check_url(url: str) -> str:
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise UsageError(f"grafana URL {url!r}: give http(s)://HOST[:PORT][/PATH], e.g. "
                         "http://127.0.0.1:3000")
    return url.rstrip("/")


def connect(url: str, token: str | None = None, user: str | None = None,
            password: str | None = None, timeout: float = TIMEOUT_S) -> Grafana:
    """A Grafana that answered GET /api/health and accepted the credentials (a token,
    or a user and password; none for a Grafana with anonymous access). The credentials
    are checked with GET /api/folders, which any role may do: health needs no login."""
    url = _check_url(url)
    if token and (user or password):
        raise UsageError("give a token, or a user and password, not both")
    if bool(user) != bool(password):
        raise UsageError("a user needs a password, and a password a user")
    credential: str | tuple[str, str] | None = token or ((user, password) if user else None)
    api = GrafanaApi.from_url(url, credential=credential, timeout=timeout)
    grafana = Grafana(url, api, "token" if token else "basic" if user else "none", timeout)
    grafana.version = str(grafana.health().get("version", ""))
    grafana.call("GET /api/folders", api.folder.get_all_folders)
    return grafana


# -- fault annotations (pure) -------------------------------------------------------------


def _ms(event: dict) -> int:
    return int(round(float(event["t_wall"]) * 1000))


def _region(lab: str, start: dict, end: dict | None, flap: bool = False) -> dict:
    kind, target = str(start.get("kind", "")), str(start.get("target", ""))
    if start.get("hidden"):
        tags = [MRC_TAG, lab, "hidden"]
        text = "hidden fault (a blind drill's)"
    else:
        tags = [MRC_TAG, lab, kind, target]
        ends = [str(e) for e in start.get("ends") or [] if str(e) != target]
        text = f"{kind} {target}" + (f" at {', '.join(ends)}" if ends else "")
    if flap:
        tags.append("flap")
        text += ": down"
    region = {"time": _ms(start), "tags": tags, "text": text}
    if end is not None:
        region["timeEnd"] = max(_ms(end), region["time"])
    else:
        region["text"] += " (in force)"
    return region


def fault_regions(events: Iterable[dict], lab: str) -> list[dict]:
    """The lab's fault log (events.jsonl lines) as annotation requests, by start time:
    {time, timeEnd (ms; absent while in force), tags, text}. See the module docstring."""
    regions: list[dict] = []
    applied: dict[tuple, dict] = {}
    down: dict[tuple, dict] = {}
    for e in events:
        try:
            _ms(e)
        except (KeyError, TypeError, ValueError):
            continue  # not a timed event: nothing to draw
        key = (e.get("kind"), e.get("target"))
        what = e.get("event")
        if what == "apply":
            if key in applied:  # applied again, no revert logged: the first stays open
                regions.append(_region(lab, applied.pop(key), None))
            applied[key] = e
        elif what == "revert" and key in applied:
            regions.append(_region(lab, applied.pop(key), e))
        elif what == "down" and not e.get("hidden"):
            down[key] = e
        elif what == "up" and key in down:
            regions.append(_region(lab, down.pop(key), e, flap=True))
    regions += [_region(lab, e, None) for e in applied.values()]
    regions += [_region(lab, e, None, flap=True) for e in down.values()]
    return sorted(regions, key=lambda r: (r["time"], r["text"]))


# -- push -------------------------------------------------------------------------------


@dataclass
class PushResult:
    """What `push` did, for people and for --json."""

    url: str
    grafana_version: str
    lab: str
    datasource: dict
    folder: dict
    dashboards: list[dict]
    annotations: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def push(url: str, *, fabric: Fabric, lab: str, events: Sequence[dict],
         token: str | None = None, user: str | None = None, password: str | None = None,
         folder: str = P.FOLDER, prometheus_url: str = P.DEFAULT_PROMETHEUS_URL,
         timeout: float = TIMEOUT_S) -> PushResult:
    """Connect; the lab's data source; the folder; the overview dashboard; the fault
    regions of `events`. A drill's dashboard is pushed by its drill, with its times."""
    grafana = connect(url, token, user, password, timeout)
    ds = grafana.ensure_datasource(P.datasource_name(lab), prometheus_url,
                                   P.datasource_uid(lab))
    folder_uid = grafana.ensure_folder(folder)
    board = grafana.push_dashboard(D.overview(fabric, lab, ds["uid"]), folder_uid)
    regions = fault_regions(events, lab)
    counts = grafana.sync_annotations(lab, regions)
    counts.update(regions=len(regions), in_force=sum("timeEnd" not in r for r in regions))
    return PushResult(grafana.url, grafana.version, lab, ds, {"title": folder, "uid": folder_uid},
                      [board], counts)


def recorded_prometheus_url(lab_dir: Path) -> str | None:
    """The Prometheus URL the lab's telemetry recorded in
    <run dir>/<lab>/telemetry/telemetry.json, if it did."""
    try:
        data = json.loads((Path(lab_dir) / "telemetry" / "telemetry.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    prom = data.get("prometheus")  # twin.telemetry.stack's record: {"prometheus": {"url"}}
    found = prom.get("url") if isinstance(prom, dict) else data.get("prometheus_url")
    return found if isinstance(found, str) and found else None


# -- live, during a drill -----------------------------------------------------------------


class LiveAnnotator:
    """A drill's faults drawn as they happen: a point when one is applied, made a
    region when it is reverted (PATCH /api/annotations/:id with its timeEnd).

    The requests run on a thread of their own, so a slow or dead Grafana never delays
    the drill's timeline. The first failure is kept in `.error` and ends the posting;
    the drill goes on. Give it the fault log's lines as they are written (`event`), or
    call `fault_applied` and `fault_reverted`; pass the t_wall of the fault log's line
    so that a later `twin grafana push` knows these annotations and adds none twice.

        annotator = LiveAnnotator(connect(url, token), lab)
        annotator.event(entry)     # each events.jsonl line: apply, revert, down, up
        annotator.close()          # waits (bounded) for what is queued
    """

    def __init__(self, grafana: Grafana, lab: str, tags: Sequence[str] = ()):
        self.grafana = grafana
        self.lab = lab
        self.tags = list(tags)  # added to every annotation, e.g. the drill's name
        self.error: str | None = None
        self.posted = 0
        self.patched = 0
        self._ids: dict[tuple, int] = {}
        self._open: dict[tuple, dict] = {}
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=f"grafana-annotator-{lab}",
                                        daemon=True)
        self._thread.start()

    # -- the drill's side (never blocks, never raises) ---------------------------------

    def event(self, entry: dict) -> None:
        """One line of the fault log, as twin.faults.log_event wrote it."""
        kind, target = entry.get("kind", ""), entry.get("target", "")
        what, hidden = entry.get("event"), bool(entry.get("hidden"))
        if what == "apply":
            self.fault_applied(kind, target, entry["t_wall"], hidden, entry.get("ends", ()))
        elif what == "revert":
            self.fault_reverted(kind, target, entry["t_wall"], hidden)
        elif what == "down" and not hidden:  # a hidden fault's flaps would tell its kind
            self._start(("flap", kind, target), entry, flap=True)
        elif what == "up" and not hidden:
            self._end(("flap", kind, target), entry, flap=True)

    def fault_applied(self, kind: str, target: str, t_wall: float, hidden: bool = False,
                      ends: Sequence[str] = ()) -> None:
        self._start(("fault", kind, target), {"event": "apply", "kind": kind, "target": target,
                                              "t_wall": t_wall, "ends": list(ends),
                                              "hidden": hidden})

    def fault_reverted(self, kind: str, target: str, t_wall: float,
                       hidden: bool = False) -> None:
        self._end(("fault", kind, target), {"event": "revert", "kind": kind, "target": target,
                                            "t_wall": t_wall, "hidden": hidden})

    def _start(self, key: tuple, entry: dict, flap: bool = False) -> None:
        self._open[key] = entry
        self._queue.put(("post", key, self._with_tags(_region(self.lab, entry, None, flap))))

    def _end(self, key: tuple, entry: dict, flap: bool = False) -> None:
        start = self._open.pop(key, None)
        if start is not None:
            self._queue.put(("patch", key,
                             self._with_tags(_region(self.lab, start, entry, flap))))

    def _with_tags(self, region: dict) -> dict:
        return {**region, "tags": [*region["tags"], *self.tags]}

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until what was queued so far is sent (or given up): True if it was."""
        done = threading.Event()
        self._queue.put(("flush", done, None))
        return done.wait(timeout)

    def close(self, timeout: float = 10.0) -> None:
        """Send what is queued, then stop; give up after `timeout` seconds."""
        self._queue.put(("stop", None, None))
        self._thread.join(timeout)
        if self._thread.is_alive() and self.error is None:
            self.error = f"grafana {self.grafana.url}: annotations still queued after " \
                         f"{timeout:g} s; gave up"

    def __enter__(self) -> LiveAnnotator:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- the thread's side --------------------------------------------------------------

    def _run(self) -> None:
        while True:
            op, key, region = self._queue.get()
            if op == "stop":
                return
            if op == "flush":
                key.set()
                continue
            if self.error is not None:
                continue  # stopped posting at the first failure; the drill goes on
            try:
                if op == "post":
                    self._ids[key] = self.grafana.post_annotation(region)
                    self.posted += 1
                elif key in self._ids:  # its post failed: nothing to patch
                    self.grafana.patch_annotation(self._ids.pop(key), region)
                    self.patched += 1
            except Exception as e:  # noqa: BLE001 - whatever it is, the drill must go on
                self.error = str(e) if isinstance(e, GrafanaError) \
                    else f"grafana {self.grafana.url}: {type(e).__name__}: {_one_line(e)}"
