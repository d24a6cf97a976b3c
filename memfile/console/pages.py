"""The memory console at /console on `memfile serve`: pages where a person sees and tends an agent's memory.

Every page is rendered on the server (Jinja2, autoescaped) and works without JavaScript; the vendored
htmx only swaps <main> in place. Each page gets its data with one `Minds.call` on the worker thread,
acting as the logged-in person, and every action is the Vault verb the command line runs, answered
with a redirect (303) and a flash message. Checks and headers are in `auth`; what pages read, in `data`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote

import python_multipart  # noqa: F401 - forms need it (Starlette imports it only when a form is read)
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from starlette.applications import Starlette
from starlette.datastructures import FormData, QueryParams, UploadFile
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from ..config import Config, load_config
from ..errors import Face, InvalidInput, MemfileError, NotFound, Refused, echo, told
from ..keys import AGENT
from ..model import Memory, Source, StoreResult, utc_now
from ..server.auth import MAX_IMPORT_BODY_BYTES, bearer_token
from ..server.endpoint import checked_ref
from ..server.errors import BUG_MESSAGE, Unauthorized, clip_echoes, public_message, status_of
from ..server.openapi import IMPORT_FORMATS
from ..server.transfer import EXPORT_FORMATS, export_file, export_response, log
from ..worker import Caller
from . import data
from .auth import (
    CONSOLE_PREFIX,
    COOKIE,
    MIND_KEY_REFUSED,
    SESSION_HOURS,
    SecurityHeaders,
    Session,
    Sessions,
    Upload,
    check_csrf,
    check_same_origin,
    cookie_header,
)

if TYPE_CHECKING:
    from starlette.types import ASGIApp

    from ..keys import KeyStore
    from ..vault import Vault
    from ..worker import Minds

T = TypeVar("T")

HERE = Path(__file__).parent
#: The pages of one mind, in the order the navigation shows them: (path part, label).
PAGES = (
    ("profile", "Profile"),
    ("memories", "Memories"),
    ("review", "Review"),
    ("log", "Audit log"),
    ("recall", "Recall"),
    ("last-recall", "Last recall"),
    ("health", "Health"),
    ("transfer", "Export / import"),
)
MEMORY_ACTIONS = ("verify", "forget", "reactivate", "restore", "resolve")
#: What the memories page does to the memories ticked on it.
SELECTION_ACTIONS = ("verify", "forget")
#: What the Review page does to the proposals ticked on it (`edit`: one proposal, changed, then accepted).
REVIEW_ACTIONS = ("accept", "edit", "reject")
ON_CONFLICT = ("newer", "skip", "overwrite")
_SHA = re.compile(r"[0-9a-f]{7,40}")
_FILE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


class NeedsLogin(Exception):
    """No session (or it ended): the answer is the login page."""


@dataclass(frozen=True)
class Visitor:
    """Who asks: a person's key label, with their session (None for a person's Bearer token, which may
    only read pages)."""

    label: str
    session: Session | None


def short_date(value: datetime | str | None) -> str:
    """A moment as `2026-06-27 10:00 UTC` ('' for none)."""
    if not value:
        return ""
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            return value
        value = moment
    if value.tzinfo is not None:
        value = value.astimezone(timezone.utc)
    return value.strftime("%Y-%m-%d %H:%M UTC")


def upload_name(filename: str | None) -> str:
    """What an uploaded file is called in the import's commit: its base name, in plain characters."""
    base = (filename or "").replace("\\", "/").rsplit("/", 1)[-1]
    cleaned = _FILE_NAME.sub("_", base).strip("._")[:80]
    return cleaned or "the uploaded file"


class Console:
    """The console's pages over `minds`, for the people whose tokens `keys` holds."""

    def __init__(self, minds: Minds, keys: KeyStore) -> None:
        self.minds, self.keys = minds, keys
        self.sessions = Sessions(keys, minds.root)
        env = Environment(
            loader=FileSystemLoader(HERE / "templates"), autoescape=True, undefined=StrictUndefined, trim_blocks=True
        )
        env.filters["short_date"] = short_date
        env.globals["form_of"] = data.Draft.of  # an edit form as rendered from a memory
        self.templates = Jinja2Templates(env=env)

    def app(self) -> ASGIApp:
        """The console as its own Starlette application, for `ConsoleMount` to hand /console to."""
        m = CONSOLE_PREFIX + "/m/{mind}"
        routes: list[BaseRoute] = [
            Route(CONSOLE_PREFIX, self.minds_page, methods=["GET"]),
            Route(CONSOLE_PREFIX + "/login", self.login, methods=["GET", "POST"]),
            Route(CONSOLE_PREFIX + "/logout", self.logout, methods=["POST"]),
            Mount(CONSOLE_PREFIX + "/static", StaticFiles(directory=HERE / "static"), name="static"),
            Route(m, self.mind_home, methods=["GET"]),
            Route(m + "/profile", self.profile, methods=["GET"]),
            Route(m + "/memories", self.memories, methods=["GET", "POST"]),
            Route(m + "/memory/{ref:path}", self.memory, methods=["GET", "POST"]),
            Route(m + "/review", self.review, methods=["GET", "POST"]),
            Route(m + "/purge/{ref:path}", self.purge, methods=["GET", "POST"]),
            Route(m + "/log", self.log, methods=["GET"]),
            Route(m + "/recall", self.recall, methods=["GET"]),
            Route(m + "/last-recall", self.last_recall, methods=["GET"]),
            Route(m + "/health", self.health, methods=["GET", "POST"]),
            Route(m + "/transfer", self.transfer, methods=["GET", "POST"], max_body_size=MAX_IMPORT_BODY_BYTES),
            Route(m + "/export", self.export, methods=["GET"]),
        ]
        app = Starlette(
            routes=routes,
            middleware=[Middleware(SecurityHeaders)],
            exception_handlers={
                NeedsLogin: self.on_needs_login,
                MemfileError: self.on_memfile_error,
                HTTPException: self.on_http_error,
                Exception: self.on_bug,
            },
        )
        app.router.redirect_slashes = False
        return app

    def visitor(self, request: Request) -> Visitor:
        """The person asking, from their session cookie or a person's Bearer token (a Mind Key is refused on
        every page, a Bearer token on a POST: actions need a session)."""
        if "authorization" in request.headers:
            token = bearer_token(request.headers)  # InvalidInput: the header is sent more than once
            key = None if token is None else self.keys.authenticate(token, self.minds.root)
            if key is None:
                raise Unauthorized("the credential was not accepted: it is unknown to this vault, or was revoked")
            if key.kind != "person":
                raise Refused(MIND_KEY_REFUSED)
            if request.method == "POST":
                raise Refused("an action needs a console session: log in at /console/login (nothing was done)")
            return Visitor(key.label, None)
        session = self.sessions.find(request.cookies.get(COOKIE))
        if session is None:
            raise NeedsLogin
        request.state.session = session
        return Visitor(session.label, session)

    def acting(self, request: Request) -> tuple[Visitor, Caller]:
        """The person asking for a mind page (`visitor`), and its Caller: the page's mind (checked to be one
        of the vault's), as the person."""
        visitor = self.visitor(request)
        mind = request.path_params["mind"]
        if mind not in self.minds.mind_names():
            raise NotFound(f"no mind {echo(mind)} in this vault; the minds are listed at {CONSOLE_PREFIX}")
        return visitor, Caller(mind, Source.USER, visitor.label)

    async def checked_post(self, request: Request, max_fields: int = 20) -> tuple[Visitor, FormData]:
        """A state-changing request: from this server's page, with the session's CSRF token; its form."""
        visitor = self.visitor(request)
        check_same_origin(request)
        form = await request.form(max_files=1, max_fields=max_fields)
        assert visitor.session is not None  # a POST without a session was refused by `visitor`
        check_csrf(visitor.session, form.get("csrf"))
        return visitor, form

    async def render(
        self,
        request: Request,
        page: str,
        context: dict[str, Any] | None = None,
        *,
        status: int = 200,
        visitor: Visitor | None = None,
        mind: str | None = None,
        counted: bool = True,
    ) -> Response:
        """A page (its template: `page.html`) in the layout: the vault, the minds, the navigation (with the
        count of proposals waiting for review, unless not `counted`, an error page, or for htmx, which swaps
        <main> alone) and the session's flash messages."""
        session = visitor.session if visitor is not None else None
        waiting = 0
        if visitor is not None and mind is not None and counted and request.headers.get("HX-Request") != "true":
            caller = Caller(mind, Source.USER, visitor.label)
            waiting = await self.call(caller, lambda vault: len(vault.proposals()))
        names = self.minds.mind_names() if visitor is not None else []
        config = self.config()
        base = {
            "page": page,
            "vault_name": self.minds.root.name,
            "minds": [(name, config.display_name(name)) for name in names],
            "mind": mind,
            "mind_name": config.display_name(mind) if mind else None,
            "pages": PAGES,
            "visitor": visitor,
            "csrf": session.csrf if session is not None else "",
            "flashes": session.take_flashes() if session is not None else [],
            "error": None,
            "prefix": CONSOLE_PREFIX,
            "mind_url": self.mind_url,
            "waiting": waiting,
            "choices": data.CHOICES,
        }
        template = f"{page.replace('-', '_')}.html"
        return self.templates.TemplateResponse(request, template, base | (context or {}), status_code=status)

    def config(self) -> Config:
        """memfile.toml as it is now, for the minds' names (a mind added while the server runs is named at
        once); the one the server started with while it cannot be read."""
        try:
            return load_config(self.minds.root)
        except (OSError, MemfileError):
            return self.minds.config

    @staticmethod
    def mind_url(mind: str, page: str, rest: str = "") -> str:
        """The path of a mind's page (`rest`: more path, or a query string starting with '?')."""
        return f"{CONSOLE_PREFIX}/m/{quote(mind, safe='')}/{page}{rest}"

    async def call(self, caller: Caller, fn: Callable[[Vault], T], *, read: bool = True) -> T:
        return await self.minds.call(caller, fn, read=read)

    async def login(self, request: Request) -> Response:
        if request.method == "GET":
            if self.sessions.find(request.cookies.get(COOKIE)) is not None:
                return RedirectResponse(CONSOLE_PREFIX, status_code=303)
            return await self.render(request, "login")
        check_same_origin(request)
        form = await request.form(max_files=0, max_fields=5)
        token = form.get("token")
        key = None
        if isinstance(token, str) and token.strip():
            key = self.keys.authenticate(token.strip(), self.minds.root)
        if key is None:
            message = "that token was not accepted: it is unknown to this vault, or was revoked; see: memfile key list"
            return await self.render(request, "login", {"error": message}, status=401)
        if key.kind == AGENT:  # the form again, saying which token it takes (`Sessions.open` refuses one too)
            return await self.render(request, "login", {"error": MIND_KEY_REFUSED}, status=403)
        session_id, _ = self.sessions.open(key)
        response = RedirectResponse(CONSOLE_PREFIX, status_code=303)
        response.headers["Set-Cookie"] = cookie_header(request, session_id, SESSION_HOURS * 3600)
        return response

    async def logout(self, request: Request) -> Response:
        await self.checked_post(request)
        self.sessions.close(request.cookies.get(COOKIE))
        response = RedirectResponse(CONSOLE_PREFIX + "/login", status_code=303)
        response.headers["Set-Cookie"] = cookie_header(request, "", 0)
        return response

    async def minds_page(self, request: Request) -> Response:
        visitor = self.visitor(request)
        summaries = [
            await self.call(Caller(mind, Source.USER, visitor.label), data.mind_summary)
            for mind in self.minds.mind_names()
        ]
        return await self.render(request, "minds", {"summaries": summaries}, visitor=visitor)

    async def mind_home(self, request: Request) -> Response:
        self.acting(request)
        return RedirectResponse(self.mind_url(request.path_params["mind"], "memories"), status_code=303)

    async def profile(self, request: Request) -> Response:
        visitor, caller = self.acting(request)
        pinned = await self.call(caller, data.profile)
        return await self.render(request, "profile", {"pinned": pinned}, visitor=visitor, mind=caller.mind)

    async def memories(self, request: Request) -> Response:
        visitor, caller = self.acting(request)
        if request.method == "POST":
            return await self.selection_action(request, caller)
        return await self.memories_list(request, visitor, caller, request.query_params)

    async def selection_action(self, request: Request, caller: Caller) -> Response:
        """Verify or forget the memories ticked on the list, as the person (a forget: one commit); then back
        to the list, its filters kept, with what was done."""
        visitor, form = await self.checked_post(request, max_fields=data.PAGE_SIZE + 10)
        assert visitor.session is not None
        try:
            query = QueryParams(str(form.get("query") or ""))
            data.Filters.of(query)
        except InvalidInput:
            query = QueryParams()
        action, refs = form.get("action"), [str(ref) for ref in form.getlist("ref")]
        try:
            if action not in SELECTION_ACTIONS:
                raise InvalidInput("action", action, SELECTION_ACTIONS)
            if not refs:
                raise InvalidInput("selection", None, "at least one memory: tick the box of each to change")
            message = await self.call(caller, lambda vault: _act_on_selection(vault, refs, str(action)), read=False)
        except MemfileError as exc:
            error = public_message(exc, Face.CONSOLE)
            return await self.memories_list(request, visitor, caller, query, error, status_of(exc))
        visitor.session.flash(message)
        shown = data.Filters.of(query).query()
        return RedirectResponse(self.mind_url(caller.mind, "memories", f"?{shown}" if shown else ""), status_code=303)

    async def memories_list(
        self,
        request: Request,
        visitor: Visitor,
        caller: Caller,
        query: QueryParams,
        error: str | None = None,
        status: int = 200,
    ) -> Response:
        """The memories page of the filters in `query` (with `error`, answered with `status`)."""
        filters = data.Filters()
        context: dict[str, Any] = {"view": None, "filters": filters}
        try:
            context["filters"] = filters = data.Filters.of(query)
            context["view"] = await self.call(caller, lambda vault: data.memories_page(vault, filters))
        except MemfileError as exc:
            error, status = public_message(exc, Face.CONSOLE), status_of(exc)
        if error is not None:
            context["error"] = error
        response = await self.render(request, "memories", context, status=status, visitor=visitor, mind=caller.mind)
        if request.headers.get("HX-Request") == "true" and status == 200:  # the address htmx shows: no empty fields
            shown = filters.query()
            response.headers["HX-Push-Url"] = self.mind_url(caller.mind, "memories", f"?{shown}" if shown else "")
        return response

    async def memory(self, request: Request) -> Response:
        visitor, caller = self.acting(request)
        ref = checked_ref(request.path_params["ref"])
        if request.method == "POST":
            return await self.memory_action(request, caller, ref)
        view = await self.call(caller, lambda vault: data.memory_page(vault, ref))
        context = {"view": view, "draft": None, "changed": False, "version": view.version}
        return await self.render(request, "memory", context, visitor=visitor, mind=caller.mind)

    async def memory_action(self, request: Request, caller: Caller, ref: str) -> Response:
        """verify, forget, reactivate, restore (a version: `at`), resolve (`take`: ours or theirs) or edit (the
        form's fields, made only over the `version` it was rendered from), as the person, one commit; then back
        to the memory's page with what was done. A refused edit shows the page again with the person's text
        kept, and, when the memory changed meanwhile, the version now on disk beside it."""
        visitor, form = await self.checked_post(request)
        session = visitor.session
        assert session is not None
        action = form.get("action")
        draft, version = None, str(form.get("version") or "")
        try:
            if action == "edit":
                draft = data.Draft.sent(form)
                changes = draft.changes()
                result = await self.call(caller, lambda vault: vault.edit(ref, version, **changes), read=False)
                message = _saved(result)
                for notice in result.notices:
                    session.flash(told(notice, Face.CONSOLE))
            elif action not in MEMORY_ACTIONS:
                raise InvalidInput("action", action, (*MEMORY_ACTIONS, "edit"))
            else:
                message = await self.call(caller, lambda vault: _act(vault, ref, str(action), form), read=False)
        except MemfileError as exc:
            view = await self.call(caller, lambda vault: data.memory_page(vault, ref))
            changed = draft is not None and view.memory is not None and view.version != version
            context = {
                "view": view,
                "error": public_message(exc, Face.CONSOLE),
                "draft": draft,
                "changed": changed,
                "version": view.version if changed or draft is None else version,
            }
            return await self.render(
                request, "memory", context, status=status_of(exc), visitor=visitor, mind=caller.mind
            )
        session.flash(message)
        return RedirectResponse(self.mind_url(caller.mind, "memory/" + quote(ref, safe="")), status_code=303)

    async def review(self, request: Request) -> Response:
        """The proposals waiting for review (`Vault.proposals`), a page of them; its POST accepts or rejects
        those ticked, or accepts one with the person's changes (`edit`)."""
        visitor, caller = self.acting(request)
        if request.method == "POST":
            return await self.review_action(request, caller)
        return await self.review_list(request, visitor, caller, data.page_number(request.query_params.get("page")))

    async def review_list(
        self,
        request: Request,
        visitor: Visitor,
        caller: Caller,
        page: int = 1,
        error: str | None = None,
        status: int = 200,
        drafts: dict[str, data.Draft] | None = None,
    ) -> Response:
        view = await self.call(caller, lambda vault: data.review_page(vault, page))
        context = {"view": view, "page_no": page, "drafts": drafts or {}, "error": error}
        return await self.render(request, "review", context, status=status, visitor=visitor, mind=caller.mind)

    async def review_action(self, request: Request, caller: Caller) -> Response:
        """Accept or reject each proposal ticked (a commit each; the first refusal ends the batch, and what was
        done before it is said), or accept one with the person's changes; then back to the queue."""
        visitor, form = await self.checked_post(request, max_fields=data.PAGE_SIZE + 10)
        session = visitor.session
        assert session is not None
        action, refs = form.get("action"), [str(ref) for ref in form.getlist("ref")]
        draft = data.Draft.sent(form) if action == "edit" else None
        try:
            if action not in REVIEW_ACTIONS:
                raise InvalidInput("action", action, REVIEW_ACTIONS)
            if not refs:
                raise InvalidInput("selection", None, "at least one proposal: tick the box of each to accept or reject")
            if draft is not None and len(refs) != 1:
                raise InvalidInput("ref", ", ".join(refs), "one proposal to change, then accept")
            done, refused = await self.call(caller, lambda vault: _review(vault, refs, str(action), draft), read=False)
        except MemfileError as exc:
            done, refused = [], exc
        if done:
            session.flash(_reviewed(str(action), done))
        if refused is not None:
            drafts = {refs[0]: draft} if draft is not None else {}
            error = public_message(refused, Face.CONSOLE)
            return await self.review_list(request, visitor, caller, 1, error, status_of(refused), drafts)
        return RedirectResponse(self.mind_url(caller.mind, "review"), status_code=303)

    async def purge(self, request: Request) -> Response:
        """A memory's purge: the page says what goes and what stays (the dry run); its POST (CSRF, the box
        ticked) removes the memory from every version of the history, then back to the memories."""
        visitor, caller = self.acting(request)
        ref = checked_ref(request.path_params["ref"])
        if request.method == "GET":
            plan = await self.call(caller, lambda vault: vault.purge(ref, dry_run=True), read=False)
            return await self.render(request, "purge", {"plan": plan, "ref": ref}, visitor=visitor, mind=caller.mind)
        visitor, form = await self.checked_post(request)
        assert visitor.session is not None
        if form.get("confirm") != "yes":
            raise InvalidInput("confirm", None, "the box ticked: a purge cannot be undone")
        report = await self.call(caller, lambda vault: vault.purge(ref), read=False)
        still = (
            f" {', '.join(report.remotes)} still holds the old versions: run memfile purge --push."
            if report.remotes
            else ""
        )
        visitor.session.flash(
            f"Purged {report.ref}: {report.versions} versions are gone from the history ({report.commits} commits "
            f"rewritten), recorded in .memfile-purged.{still}"
        )
        return RedirectResponse(self.mind_url(caller.mind, "memories"), status_code=303)

    async def log(self, request: Request) -> Response:
        visitor, caller = self.acting(request)
        page = data.page_number(request.query_params.get("page"))
        lines, more = await self.call(caller, lambda vault: data.log_page(vault, page))
        context = {"lines": lines, "page_no": page, "has_next": more}
        return await self.render(request, "log", context, visitor=visitor, mind=caller.mind)

    async def recall(self, request: Request) -> Response:
        """What recall gives, now or as of a date, once the form is sent (nothing recorded); a bad value is said
        on the page, with the form as it was sent."""
        visitor, caller = self.acting(request)
        asked = data.RecallAsked.of(request.query_params)
        context: dict[str, Any] = {"asked": asked, "view": None}
        status = 200
        if any(name in request.query_params for name in ("q", "budget", "at")):
            try:
                context["view"] = await self.call(caller, lambda vault: data.recall_page(vault, asked))
            except MemfileError as exc:
                context["error"], status = public_message(exc, Face.CONSOLE), status_of(exc)
        return await self.render(request, "recall", context, status=status, visitor=visitor, mind=caller.mind)

    async def last_recall(self, request: Request) -> Response:
        visitor, caller = self.acting(request)

        def read(vault: Vault) -> tuple[Any, dict[str, Any]]:
            try:
                record = vault.last_recall()
            except NotFound:
                return None, {}
            return record, data.recall_memories(vault, [str(m.get("id")) for m in record.memories])

        record, memories = await self.call(caller, read)
        context = {"record": record, "memories": memories}
        return await self.render(request, "last-recall", context, visitor=visitor, mind=caller.mind)

    async def health(self, request: Request) -> Response:
        visitor, caller = self.acting(request)
        doctor = None
        if request.method == "POST":
            visitor, form = await self.checked_post(request)
            if form.get("action") != "doctor":
                raise InvalidInput("action", form.get("action"), "doctor")
            doctor = await self.call(caller, lambda vault: vault.doctor(), read=False)
        status = await self.call(caller, lambda vault: vault.status())
        context = {"status": status, "doctor": doctor}
        return await self.render(request, "health", context, visitor=visitor, mind=caller.mind)

    async def export(self, request: Request) -> Response:
        visitor, caller = self.acting(request)
        fmt = request.query_params.get("format", "jsonl")
        if fmt not in EXPORT_FORMATS:
            raise InvalidInput("format", fmt, ", ".join(EXPORT_FORMATS))
        exported = await self.call(caller, lambda vault: export_file(vault, all_minds=False, format=fmt, raw=False))
        log(f"console export by {visitor.label!r}: {exported.memories} memories of the mind {caller.mind!r} ({fmt})")
        return export_response(exported, caller.mind, fmt, utc_now())

    async def transfer(self, request: Request) -> Response:
        visitor, caller = self.acting(request)
        context: dict[str, Any] = {
            "formats": IMPORT_FORMATS,
            "on_conflict": ON_CONFLICT,
            "plan": None,
            "upload_id": None,
        }
        if request.method == "GET":
            return await self.render(request, "transfer", context, visitor=visitor, mind=caller.mind)
        visitor, form = await self.checked_post(request)
        session = visitor.session
        assert session is not None
        action = form.get("action")
        status = 200
        try:
            if action == "plan":
                upload = await _upload(form, caller.mind)
                context["plan"] = await self.call(caller, lambda vault: _import(vault, upload, dry_run=True))
                context["upload_id"] = session.keep_upload(upload)
            elif action in ("apply", "discard"):
                kept = session.take_upload(form.get("upload"), caller.mind)  # planned for this mind only
                if action == "apply":
                    report = await self.call(caller, lambda vault: _import(vault, kept, dry_run=False), read=False)
                    for message in (_imported(report), *report.notices):
                        session.flash(told(message, Face.CONSOLE))
                else:
                    session.flash(f"discarded the upload of {kept.name}; nothing was imported")
                return RedirectResponse(self.mind_url(caller.mind, "transfer"), status_code=303)
            else:
                raise InvalidInput("action", action, "plan, apply, discard")
        except MemfileError as exc:
            context["error"], status = public_message(_form_named(exc), Face.CONSOLE), status_of(exc)
        return await self.render(request, "transfer", context, status=status, visitor=visitor, mind=caller.mind)

    async def on_needs_login(self, request: Request, exc: Exception) -> Response:
        return RedirectResponse(CONSOLE_PREFIX + "/login", status_code=303)

    async def on_memfile_error(self, request: Request, exc: Exception) -> Response:
        assert isinstance(exc, MemfileError)
        return await self.error_page(request, status_of(exc), public_message(exc, Face.CONSOLE))

    async def on_http_error(self, request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        message = {
            404: f"no such page: {request.url.path}",
            405: f"{request.method} is not allowed on {request.url.path}",
            413: "the upload is larger than 64 MB; import a smaller file",
        }.get(exc.status_code, str(exc.detail))
        return await self.error_page(request, exc.status_code, message)

    async def on_bug(self, request: Request, exc: Exception) -> Response:
        return await self.error_page(request, 500, BUG_MESSAGE)

    async def error_page(self, request: Request, status: int, message: str) -> Response:
        """An error in the layout (with the navigation when a session is known), never a traceback."""
        session = getattr(request.state, "session", None) or self.sessions.find(request.cookies.get(COOKIE))
        visitor = Visitor(session.label, session) if isinstance(session, Session) else None
        mind = request.path_params.get("mind") if visitor is not None else None
        if mind not in self.minds.mind_names():
            mind = None
        context = {"error": clip_echoes(message), "status": status}
        return await self.render(request, "error", context, status=status, visitor=visitor, mind=mind, counted=False)


def _act(vault: Vault, ref: str, action: str, form: Mapping[str, Any]) -> str:
    """One memory action, as the Vault verb; what was done, for the flash message."""
    if action == "forget":
        gone = vault.forget(ref)
        return f"Forgot {gone.ref}: its file is removed; its versions stay in the history (restore brings it back)."
    if action == "verify":
        result = vault.verify(ref)
        done = "Verified"
    elif action == "reactivate":
        result = vault.reactivate(ref)
        done = "Reactivated"
    elif action == "restore":
        at = form.get("at")
        if not isinstance(at, str) or not _SHA.fullmatch(at):
            raise InvalidInput("at", at, "the commit of a version (its sha, as the history lists it)")
        result = vault.restore(ref, at=at)
        done = f"Restored the version of {at[:8]} of"
    else:
        take = form.get("take")
        if take not in ("ours", "theirs"):
            raise InvalidInput("take", take, "ours, theirs")
        result = vault.resolve(ref, take=str(take))
        done = f"Resolved the conflict ({take}) of"
    if not result.changed:
        return f"Nothing to change: {result.memory.ref} already is as asked."
    return f"{done} {result.memory.ref} (commit {(result.commit or '')[:8]})."


def _act_on_selection(vault: Vault, refs: list[str], action: str) -> str:
    """Verify each memory ticked (a commit each), or forget them all in one commit; what was done."""
    if action == "forget":
        report = vault.forget_many(refs=refs)
        return (
            f"Forgot {_memories(len(report.forgotten))} in one commit ({(report.commit or '')[:8]}): "
            + ", ".join(m.ref for m in report.forgotten)
            + ". Their files are removed; their versions stay in the history (restore brings one back)."
        )
    changed = [result.memory.ref for result in (vault.verify(ref) for ref in refs) if result.changed]
    already = f"; {_memories(len(refs) - len(changed))} already verified" if len(changed) < len(refs) else ""
    return f"Verified {_memories(len(changed))}{': ' + ', '.join(changed) if changed else ''}{already}."


def _saved(result: StoreResult) -> str:
    """What an edit did, for the flash message."""
    if not result.changed:
        return f"Nothing to change: {result.memory.ref} already says that."
    return f"Saved {result.memory.ref} (commit {(result.commit or '')[:8]}): it is now yours, verified."


def _review(
    vault: Vault, refs: list[str], action: str, draft: data.Draft | None
) -> tuple[list[Memory], MemfileError | None]:
    """Accept (with the draft's changes: `edit`) or reject each proposal, a commit each, until one is refused:
    the proposals done, and the refusal (None: every one was done)."""
    done: list[Memory] = []
    for ref in refs:
        try:
            if action == "reject":
                done.append(vault.reject(ref))
            else:
                done.append(vault.accept(ref, **(draft.changes() if draft is not None else {})))
        except MemfileError as exc:
            return done, exc
    return done, None


def _reviewed(action: str, done: list[Memory]) -> str:
    """What a review did, for the flash message."""
    refs = ", ".join(m.ref for m in done)
    if action == "reject":
        return (
            f"Rejected {_memories(len(done))} (a commit each): {refs}. Forgotten; their versions stay in the history."
        )
    return f"Accepted {_memories(len(done))} (a commit each): {refs}. Verified, and now in recall and search."


def _memories(count: int) -> str:
    return f"{count} {'memory' if count == 1 else 'memories'}"


async def _upload(form: Mapping[str, Any], mind: str) -> Upload:
    """The uploaded import file and its options, to be planned and applied in `mind`."""
    file = form.get("file")
    if not isinstance(file, UploadFile) or not file.filename:
        raise InvalidInput("file", None, "a file to import: memfile's JSONL export, Synapse or LangBot JSON, OpenClaw")
    content = await file.read()
    if not content.strip():
        raise InvalidInput("file", file.filename, "a file with memories in it", reason="it is empty")
    fmt = form.get("format") or None
    if fmt is not None and fmt not in IMPORT_FORMATS:
        raise InvalidInput("format", fmt, ("auto", *IMPORT_FORMATS))
    on_conflict = form.get("on_conflict") or "newer"
    if on_conflict not in ON_CONFLICT:
        raise InvalidInput("on_conflict", on_conflict, ON_CONFLICT)
    return Upload(content, upload_name(file.filename), fmt, on_conflict, mind)


def _form_named(exc: MemfileError) -> MemfileError:
    """An import's error with the form's names for what the library calls by the command line's: the file
    (`FILE`) and the Format choice (`--from`)."""
    if type(exc) is not InvalidInput:
        return exc
    reason = re.sub(
        r"--from(?: ([\w|-]+))?", lambda m: "the Format choice" + (f": {m.group(1)}" if m.group(1) else ""), exc.reason
    )
    field = "file" if exc.field == "FILE" else exc.field
    return InvalidInput(field, exc.value, exc.allowed, reason=reason)


def _import(vault: Vault, upload: Upload, *, dry_run: bool) -> Any:
    return vault.import_(
        upload.data, format=upload.format, on_conflict=upload.on_conflict, dry_run=dry_run, name=upload.name
    )


def _imported(report: Any) -> str:
    """What an applied import did, in one sentence."""
    made = f"{len(report.created)} created, {len(report.updated)} updated, {report.unchanged} unchanged"
    if not report.commit:
        return f"Imported {report.file} ({report.format}): nothing changed ({made}), so no commit was made."
    return f"Imported {report.file} ({report.format}): {made} (commit {report.commit[:8]})."
