"""A test double for Grafana's HTTP API: the part twin uses, answering as Grafana does.

Modelled on Grafana 10.4's HTTP API as its documentation describes it
(docs/sources/developers/http_api/{data_source,folder,dashboard,annotations}.md in the
grafana/grafana repository) and as its handlers answer (pkg/api/datasources.go,
pkg/api/annotations.go, pkg/services/dashboards/errors.go, the folder errors of
pkg/services/dashboards/models.go): the same paths, status codes, JSON bodies and
message texts. Error bodies carry `message` (and `status` where Grafana sets one);
newer Grafanas add messageId, statusCode and traceID, which twin does not read.

    GET   /api/health                    no login needed: {commit, database, version}
    POST  /api/datasources               name, type, access required (400 "bad request
                                         data"); a taken name or uid: 409
    GET   /api/datasources/name/:name    404 "Data source not found"
    GET   /api/datasources/uid/:uid
    PUT   /api/datasources/uid/:uid      403 for a read-only (provisioned) one; 409 for
                                         a name another has, or an older version
    POST  /api/folders                   title required; a taken title or uid: 409
    GET   /api/folders, /api/folders/:uid
    POST  /api/dashboards/db             title, uid (40 chars of [a-zA-Z0-9-_]), tags
                                         (50 chars), message (500), refresh (not under
                                         the default min_refresh_interval, 5s); a
                                         version conflict without overwrite: 412
    GET   /api/dashboards/uid/:uid
    POST  /api/annotations               text required (400 "Failed to save annotation")
    PATCH /api/annotations/:id           keeps a field that is absent, null, 0 or "";
                                         tags, when sent, replace (so [] clears them)
    GET   /api/annotations               from, to (overlap), tags (all, or matchAny),
                                         type, dashboardUID, limit (default 100)

Every other request, and every request without valid credentials, is refused as
Grafana refuses it: 401 {"message": "Unauthorized"} with no credentials, "Invalid API
key" for a wrong bearer token, "Invalid username or password" for a wrong basic login.
Only /api/health answers without them.

It keeps what it was sent (`requests`, `datasources`, `folders`, `dashboards`,
`annotations`) for tests to assert on. `frontend_problems` says what a dashboard lacks
that Grafana's frontend needs to draw it (Grafana's API stores a dashboard without
looking at its panels). Binds 127.0.0.1 only, on a free port; a thread serves it.
"""

from __future__ import annotations

import base64
import json
import re
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlparse

import pytest

GRAFANA_VERSION = "10.4.2"
UID_MAX = 40
UID_RE = re.compile(r"^[a-zA-Z0-9\-_]*$")
MIN_REFRESH_S = 5  # Grafana's default min_refresh_interval
GRID_COLUMNS = 24
CORE_PANELS = {"timeseries", "stat", "state-timeline", "status-history", "heatmap", "table",
               "gauge", "bargauge", "barchart", "piechart", "text", "row", "logs", "news"}


class Reply(Exception):
    """An HTTP answer from a route: status and JSON body."""

    def __init__(self, status: int, body):
        self.status = status
        self.body = body


def error(code: int, message: str, **more) -> Reply:
    """Grafana's error answer: {"message": ...}, and `status` (a word) where it sets one."""
    return Reply(code, {"message": message, **more})


def _duration_s(text: str) -> float | None:
    m = re.fullmatch(r"(\d+)(ms|s|m|h|d|w|y)", text.strip())
    if not m:
        return None
    scale = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800,
             "y": 31536000}[m.group(2)]
    return int(m.group(1)) * scale


def _slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def _now_ms() -> int:
    return int(time.time() * 1000)


class FakeGrafana:
    """A Grafana double on 127.0.0.1:<free port>. Credentials: the bearer `token`, or
    basic `user`:`password`; `anonymous=True` lets requests without any through."""

    def __init__(self, token: str = "glsa_fake_token", user: str = "admin",
                 password: str = "admin", anonymous: bool = False):
        self.token, self.user, self.password, self.anonymous = token, user, password, anonymous
        self.lock = threading.Lock()
        self.requests: list[tuple[str, str, object]] = []  # method, path, JSON body
        self.failures: list[str] = []  # the double's own errors (answered 500)
        self.datasources: dict[int, dict] = {}
        self.folders: dict[str, dict] = {}
        self.dashboards: dict[str, dict] = {}  # uid -> {id, version, folderUid, dashboard}
        self.annotations: dict[int, dict] = {}
        self._ids = {"ds": 0, "folder": 0, "dash": 0, "ann": 0}
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> FakeGrafana:
        self._thread = threading.Thread(target=self.server.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        if self._thread:
            self._thread.join(5)

    def __enter__(self) -> FakeGrafana:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _next(self, kind: str) -> int:
        self._ids[kind] += 1
        return self._ids[kind]

    # -- seeding, for tests ------------------------------------------------------------

    def add_datasource(self, **fields) -> dict:
        """A data source already there (read-only when `readOnly=True`: provisioned)."""
        with self.lock:
            ds = self._new_datasource(fields)
            ds["readOnly"] = bool(fields.get("readOnly"))
            return ds

    # -- auth ----------------------------------------------------------------------------

    def authorize(self, header: str | None) -> None:
        if not header:
            if self.anonymous:
                return
            raise error(401, "Unauthorized")
        scheme, _, value = header.partition(" ")
        if scheme.lower() == "bearer":
            if value != self.token:
                raise error(401, "Invalid API key")
            return
        if scheme.lower() == "basic":
            try:
                user, _, password = base64.b64decode(value).decode().partition(":")
            except (ValueError, UnicodeDecodeError):
                raise error(401, "Unauthorized") from None
            if (user, password) != (self.user, self.password):
                raise error(401, "Invalid username or password")
            return
        raise error(401, "Unauthorized")

    # -- health --------------------------------------------------------------------------

    def health(self, query, body):
        return 200, {"commit": "fake", "database": "ok", "version": GRAFANA_VERSION}

    # -- data sources ----------------------------------------------------------------------

    def _ds_named(self, name: str) -> dict | None:
        return next((d for d in self.datasources.values() if d["name"] == name), None)

    def _ds_uid(self, uid: str) -> dict | None:
        return next((d for d in self.datasources.values() if d["uid"] == uid), None)

    @staticmethod
    def _require_ds_fields(body) -> None:
        if not isinstance(body, dict) or not all(body.get(k) for k in ("name", "type", "access")):
            raise error(400, "bad request data")

    def _new_datasource(self, body: dict) -> dict:
        ds = {"id": self._next("ds"), "uid": body.get("uid") or secrets.token_hex(7),
              "orgId": 1, "name": body["name"], "type": body["type"],
              "typeLogoUrl": "public/img/icn-datasource.svg", "access": body["access"],
              "url": body.get("url", ""), "user": "", "database": "", "basicAuth": False,
              "basicAuthUser": "", "withCredentials": False,
              "isDefault": bool(body.get("isDefault")), "jsonData": body.get("jsonData") or {},
              "secureJsonFields": {}, "version": 1, "readOnly": False}
        if ds["isDefault"]:
            for other in self.datasources.values():
                other["isDefault"] = False
        self.datasources[ds["id"]] = ds
        return ds

    def add_ds(self, query, body):
        self._require_ds_fields(body)
        if self._ds_named(body["name"]):
            raise error(409, "data source with the same name already exists")
        if body.get("uid") and self._ds_uid(body["uid"]):
            raise error(409, "data source with the same uid already exists")
        ds = self._new_datasource(body)
        return 200, {"datasource": ds, "id": ds["id"], "message": "Datasource added",
                     "name": ds["name"]}

    def get_ds_by_name(self, query, body, name):
        ds = self._ds_named(name)
        if ds is None:
            raise error(404, "Data source not found")
        return 200, ds

    def get_ds_by_uid(self, query, body, uid):
        ds = self._ds_uid(uid)
        if ds is None:
            raise error(404, "Data source not found")
        return 200, ds

    def put_ds_by_uid(self, query, body, uid):
        self._require_ds_fields(body)
        ds = self._ds_uid(uid)
        if ds is None:
            raise error(404, "Data source not found")
        if ds["readOnly"]:
            raise error(403, "Cannot update read-only data source")
        other = self._ds_named(body["name"])
        if other is not None and other is not ds:
            raise error(409, "Failed to update datasource: data source with the same name "
                             "already exists")
        if body.get("version") and body["version"] < ds["version"]:
            raise error(409, "Datasource has already been updated by someone else. Please "
                             "reload and try again")
        ds.update(name=body["name"], type=body["type"], access=body["access"],
                  url=body.get("url", ""), uid=body.get("uid") or ds["uid"],
                  isDefault=bool(body.get("isDefault")), jsonData=body.get("jsonData") or {},
                  version=ds["version"] + 1)
        return 200, {"datasource": ds, "id": ds["id"], "message": "Datasource updated",
                     "name": ds["name"]}

    # -- folders ---------------------------------------------------------------------------

    @staticmethod
    def _check_uid(uid) -> None:
        if not isinstance(uid, str) or not UID_RE.match(uid):
            raise error(400, "uid contains illegal characters")
        if len(uid) > UID_MAX:
            raise error(400, "uid too long, max 40 characters")

    def add_folder(self, query, body):
        if not isinstance(body, dict):
            raise error(400, "bad request data")
        title = str(body.get("title") or "").strip()
        if not title:
            raise error(400, "folder title cannot be empty")
        uid = body.get("uid") or secrets.token_hex(7)
        self._check_uid(uid)
        if uid in self.folders or uid in self.dashboards:
            raise error(409, "a folder/dashboard with the same uid already exists")
        if any(f["title"] == title for f in self.folders.values()):
            raise error(409, "a folder or dashboard in the general folder with the same "
                             "name already exists")
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        folder = {"id": self._next("folder"), "uid": uid, "title": title,
                  "url": f"/dashboards/f/{uid}/{_slug(title)}", "hasAcl": False,
                  "canSave": True, "canEdit": True, "canAdmin": True, "canDelete": True,
                  "createdBy": "admin", "created": stamp, "updatedBy": "admin",
                  "updated": stamp, "version": 1}
        self.folders[uid] = folder
        return 200, folder

    def list_folders(self, query, body):
        limit = int(query.get("limit", ["1000"])[0])
        page = int(query.get("page", ["1"])[0])
        rows = [{"id": f["id"], "uid": f["uid"], "title": f["title"]}
                for f in sorted(self.folders.values(), key=lambda f: f["title"])]
        return 200, rows[(page - 1) * limit:page * limit]

    def get_folder(self, query, body, uid):
        if uid not in self.folders:
            raise error(404, "folder not found")
        return 200, self.folders[uid]

    # -- dashboards -----------------------------------------------------------------------

    def save_dashboard(self, query, body):
        if not isinstance(body, dict) or not isinstance(body.get("dashboard"), dict):
            raise error(400, "bad request data")
        dash = dict(body["dashboard"])
        overwrite = bool(body.get("overwrite"))
        if not str(dash.get("title") or "").strip():
            raise error(400, "Dashboard title cannot be empty", status="empty-name")
        uid = dash.get("uid") or secrets.token_hex(7)
        self._check_uid(uid)
        if any(len(str(t)) > 50 for t in dash.get("tags") or []):
            raise error(400, "dashboard tag too long, max 50 characters", status="tag-too-long")
        if len(str(body.get("message") or "")) > 500:
            raise error(400, "message too long, max 500 characters")
        refresh = dash.get("refresh")
        if isinstance(refresh, str) and refresh:
            seconds = _duration_s(refresh)
            if seconds is not None and seconds < MIN_REFRESH_S:
                raise error(400, "Dashboard refresh interval is too low")
        folder_uid = body.get("folderUid") or ""
        if folder_uid and folder_uid not in self.folders:
            raise error(400, "folder not found")
        old = self.dashboards.get(uid)
        if old is not None and not overwrite and dash.get("version") != old["version"]:
            raise error(412, "The dashboard has been changed by someone else",
                        status="version-mismatch")
        clash = next((u for u, d in self.dashboards.items()
                      if u != uid and d["folderUid"] == folder_uid
                      and d["dashboard"]["title"] == dash["title"]), None)
        if clash is not None:
            if not overwrite:
                raise error(412, "A dashboard with the same name in the folder already exists",
                            status="name-exists")
            del self.dashboards[clash]
        version = old["version"] + 1 if old else 1
        dash_id = old["id"] if old else self._next("dash")
        dash.update(id=dash_id, uid=uid, version=version)
        self.dashboards[uid] = {"id": dash_id, "version": version, "folderUid": folder_uid,
                                "dashboard": dash}
        slug = _slug(dash["title"])
        return 200, {"id": dash_id, "uid": uid, "url": f"/d/{uid}/{slug}", "status": "success",
                     "version": version, "slug": slug, "folderUid": folder_uid}

    def get_dashboard(self, query, body, uid):
        if uid not in self.dashboards:
            raise error(404, "Dashboard not found")
        d = self.dashboards[uid]
        folder = self.folders.get(d["folderUid"])
        slug = _slug(d["dashboard"]["title"])
        return 200, {"dashboard": d["dashboard"],
                     "meta": {"type": "db", "canSave": True, "canEdit": True, "slug": slug,
                              "url": f"/d/{uid}/{slug}", "version": d["version"],
                              "folderUid": d["folderUid"],
                              "folderTitle": folder["title"] if folder else "General",
                              "provisioned": False}}

    # -- annotations ---------------------------------------------------------------------

    def add_annotation(self, query, body):
        if not isinstance(body, dict):
            raise error(400, "bad request data")
        if not body.get("text"):
            raise error(400, "Failed to save annotation")
        now = _now_ms()
        start = int(body.get("time") or 0) or now
        end = int(body.get("timeEnd") or 0) or start
        start, end = min(start, end), max(start, end)
        board = self.dashboards.get(body.get("dashboardUID") or "")
        ann = {"id": self._next("ann"), "alertId": 0, "alertName": "",
               "dashboardId": board["id"] if board else int(body.get("dashboardId") or 0),
               "dashboardUID": body.get("dashboardUID") if board else None,
               "panelId": int(body.get("panelId") or 0), "userId": 1, "newState": "",
               "prevState": "", "created": now, "updated": now, "time": start,
               "timeEnd": end, "text": body["text"], "metric": "", "login": "admin",
               "email": "admin@localhost", "avatarUrl": "",
               "tags": [str(t).strip() for t in body.get("tags") or []], "data": {}}
        self.annotations[ann["id"]] = ann
        return 200, {"message": "Annotation added", "id": ann["id"]}

    def patch_annotation(self, query, body, ann_id):
        try:
            ann = self.annotations.get(int(ann_id))
        except ValueError:
            raise error(400, "annotationId is invalid") from None
        if ann is None:
            raise error(404, "Annotation not found")
        if not isinstance(body, dict):
            raise error(400, "bad request data")
        if body.get("tags") is not None:
            ann["tags"] = [str(t).strip() for t in body["tags"]]
        if body.get("text"):
            ann["text"] = body["text"]
        if int(body.get("time") or 0) > 0:
            ann["time"] = int(body["time"])
        if int(body.get("timeEnd") or 0) > 0:
            ann["timeEnd"] = int(body["timeEnd"])
        ann["updated"] = _now_ms()
        return 200, {"message": "Annotation patched"}

    def find_annotations(self, query, body):
        def one(key, default=None):
            return query.get(key, [default])[0]

        start, end = int(one("from", 0) or 0), int(one("to", 0) or 0)
        tags = query.get("tags", [])
        match_any = one("matchAny", "false") == "true"
        found = []
        for ann in self.annotations.values():
            if end and ann["time"] > end or start and ann["timeEnd"] < start:
                continue
            if tags and not (any if match_any else all)(t in ann["tags"] for t in tags):
                continue
            if one("type") == "alert" and not ann["alertId"]:
                continue
            if one("type") == "annotation" and ann["alertId"]:
                continue
            if one("dashboardUID") and ann["dashboardUID"] != one("dashboardUID"):
                continue
            found.append(ann)
        found.sort(key=lambda a: (a["time"], a["id"]), reverse=True)
        return 200, found[:int(one("limit", 100) or 100)]

    # -- routing -----------------------------------------------------------------------------

    ROUTES = [
        ("GET", r"/api/health", "health", False),
        ("POST", r"/api/datasources", "add_ds", True),
        ("GET", r"/api/datasources/name/(?P<name>[^/]+)", "get_ds_by_name", True),
        ("GET", r"/api/datasources/uid/(?P<uid>[^/]+)", "get_ds_by_uid", True),
        ("PUT", r"/api/datasources/uid/(?P<uid>[^/]+)", "put_ds_by_uid", True),
        ("POST", r"/api/folders", "add_folder", True),
        ("GET", r"/api/folders", "list_folders", True),
        ("GET", r"/api/folders/(?P<uid>[^/]+)", "get_folder", True),
        ("POST", r"/api/dashboards/db", "save_dashboard", True),
        ("GET", r"/api/dashboards/uid/(?P<uid>[^/]+)", "get_dashboard", True),
        ("POST", r"/api/annotations", "add_annotation", True),
        ("PATCH", r"/api/annotations/(?P<ann_id>[^/]+)", "patch_annotation", True),
        ("GET", r"/api/annotations", "find_annotations", True),
    ]

    def handle(self, method: str, target: str, headers, raw: bytes) -> tuple[int, object]:
        parsed = urlparse(target)
        path, query = parsed.path.rstrip("/"), parse_qs(parsed.query)
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
            bad_json = True
        else:
            bad_json = False
        with self.lock:
            self.requests.append((method, path, body))
            try:
                for verb, pattern, name, needs_auth in self.ROUTES:
                    m = re.fullmatch(pattern, path)
                    if m is None or verb != method:
                        continue
                    if needs_auth:
                        self.authorize(headers.get("Authorization"))
                    if bad_json:
                        raise error(400, "bad request data")
                    args = {k: unquote(v) for k, v in m.groupdict().items()}
                    return getattr(self, name)(query, body, **args)
                if path.startswith("/api/"):
                    self.authorize(headers.get("Authorization"))
                raise error(404, "Not found")
            except Reply as r:
                return r.status, r.body


def _handler(fake: FakeGrafana):
    class Handler(BaseHTTPRequestHandler):
        server_version = "FakeGrafana"

        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                status, body = fake.handle(self.command, self.path, self.headers, raw)
            except Exception as e:  # a bug in the double: answer as a server would
                fake.failures.append(repr(e))
                status, body = 500, {"message": "Internal Server Error"}
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

        def log_message(self, format, *args) -> None:  # noqa: A002 - the stdlib's name
            pass

    return Handler


@pytest.fixture
def fake_grafana():
    """A running FakeGrafana, stopped after the test (which fails if the double itself
    broke on a request)."""
    with FakeGrafana() as grafana:
        yield grafana
    assert not grafana.failures, f"the Grafana double failed: {grafana.failures}"


# -- what the frontend needs -------------------------------------------------------------


def frontend_problems(dashboard: dict, datasource_uids: set[str] | None = None) -> list[str]:
    """What Grafana's frontend needs of a dashboard that this one lacks: a title and a
    valid uid; panels with unique ids, a core type, a title, a gridPos inside 24 columns
    and overlapping no other; targets with a refId and an expr, naming a data source
    (one of `datasource_uids`, when given)."""
    problems = []
    if not str(dashboard.get("title") or "").strip():
        problems.append("no title")
    uid = dashboard.get("uid")
    if not isinstance(uid, str) or not UID_RE.match(uid) or not 0 < len(uid) <= UID_MAX:
        problems.append(f"uid {uid!r} is not 1-40 characters of [a-zA-Z0-9-_]")
    if not isinstance(dashboard.get("schemaVersion"), int):
        problems.append("no schemaVersion")
    time_range = dashboard.get("time") or {}
    if not (isinstance(time_range.get("from"), str) and isinstance(time_range.get("to"), str)):
        problems.append("time.from and time.to must be strings")
    for a in (dashboard.get("annotations") or {}).get("list", []):
        if not a.get("name") or not isinstance(a.get("datasource"), dict):
            problems.append(f"annotation {a!r} needs a name and a datasource")
    ids: set = set()
    cells: dict[tuple[int, int], object] = {}
    panels = dashboard.get("panels")
    if not isinstance(panels, list) or not panels:
        return [*problems, "no panels"]
    for p in panels:
        where = f"panel {p.get('id')!r} ({p.get('title')!r})"
        if not isinstance(p.get("id"), int) or p["id"] in ids:
            problems.append(f"{where}: id missing or not unique")
        ids.add(p.get("id"))
        if p.get("type") not in CORE_PANELS:
            problems.append(f"{where}: type {p.get('type')!r} is not a core panel")
        if not isinstance(p.get("title"), str):
            problems.append(f"{where}: no title")
        g = p.get("gridPos") or {}
        if not all(isinstance(g.get(k), int) for k in "hwxy"):
            problems.append(f"{where}: gridPos needs integer h, w, x, y")
            continue
        if g["w"] < 1 or g["h"] < 1 or g["x"] < 0 or g["y"] < 0 \
                or g["x"] + g["w"] > GRID_COLUMNS:
            problems.append(f"{where}: gridPos {g} is outside the 24 columns")
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                if (x, y) in cells:
                    problems.append(f"{where}: overlaps panel {cells[(x, y)]!r}")
                    break
                cells[(x, y)] = p.get("id")
            else:
                continue
            break
        if p.get("type") == "row":
            continue
        ds = p.get("datasource") or {}
        if not ds.get("uid") or not ds.get("type"):
            problems.append(f"{where}: datasource needs a type and a uid")
        targets = p.get("targets")
        if not isinstance(targets, list) or not targets:
            problems.append(f"{where}: no targets")
            continue
        refs = [t.get("refId") for t in targets]
        if len(set(refs)) != len(refs) or not all(refs):
            problems.append(f"{where}: refIds missing or repeated: {refs}")
        for t in targets:
            if not str(t.get("expr") or "").strip():
                problems.append(f"{where}: target {t.get('refId')} has no expr")
            t_uid = (t.get("datasource") or {}).get("uid")
            if not t_uid:
                problems.append(f"{where}: target {t.get('refId')} names no datasource")
            elif datasource_uids is not None and t_uid not in datasource_uids:
                problems.append(f"{where}: target {t.get('refId')} names datasource "
                                f"{t_uid!r}, which Grafana does not have")
    return problems
