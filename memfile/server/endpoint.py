"""One row of the API's route table (`app.ENDPOINTS`): an endpoint, what it takes and how it is described.

`Endpoint.read` reads a request as its row says (query parameters, a JSON body, the path's REF) and
refuses anything else with `InvalidInput` before the Vault is called; `openapi` describes the same rows.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from starlette.requests import Request
from starlette.responses import Response

from ..errors import InvalidInput
from ..model import REF_RULE
from .auth import MIND_PARAMETER

Handler = Callable[[Request, dict[str, Any]], Awaitable[Response]]

#: The Python types of each JSON schema type a body field may have.
JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "array": (list,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}
#: What a JSON value of each Python type is called in a message (anything else: an object).
TYPE_NAMES = {
    str: "a string",
    list: "a list",
    int: "a number",
    float: "a number",
    type(None): "null",
    bool: "true or false",
}
#: Why a field a client may try is not one, when there is more to say than its name.
NOT_A_FIELD = {
    "verified": "a person verifies with POST /memory/{id}/verify",
    "mind_id": "the credential chooses the mind (a person's token: ?mind=NAME)",
    "mind": "the credential chooses the mind (a person's token: ?mind=NAME)",
    "id": "the id is chosen by memfile; update a memory with PUT /memory/{id}",
}
#: The values of a true/false query parameter (any case; the parameter alone is true).
FLAG_WORDS = {"true": True, "false": False}
#: What a REF in a path may not hold: NUL and the other control characters (no key or id has one).
CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f-\x9f]")


@dataclass(frozen=True)
class Param:
    """A query parameter: its name, description and JSON schema, which also says how it is read (a boolean
    by `flag`, an integer by `whole_number`, an array repeated; absent: the schema's default, else None)."""

    name: str
    description: str
    schema: dict[str, Any]
    required: bool = False

    @property
    def repeatable(self) -> bool:
        return self.schema.get("type") == "array"

    def value(self, given: Any) -> Any:
        kind = self.schema.get("type")
        if kind == "boolean":
            return flag(given, self.name)
        if kind == "integer":
            given = whole_number(given, self.name)
        return self.schema.get("default") if given is None else given


class Body(NamedTuple):
    name: str  # the schema's name in the document
    schema: dict[str, Any]


@dataclass(frozen=True)
class Endpoint:
    """A method on a path: its handler (called with the request and what `read` found), and its description.

    `body`: a JSON object body; `raw_body`: the description of a body the handler reads itself (an import
    file); neither: the endpoint takes no body. A `public` endpoint needs no credential and reads nothing.
    """

    path: str
    method: str
    handler: Handler | None  # None: served by a mount of its own (/mcp)
    operation_id: str
    summary: str
    responses: dict[str, Any]
    parameters: tuple[Param, ...] = ()
    body: Body | None = None
    raw_body: dict[str, Any] | None = None
    extension: bool = False  # not one of Synapse's endpoints
    public: bool = False
    max_body_size: int | None = None  # in place of the server's limit
    body_required: bool = True  # False: no body (or an empty one) is `{}`

    async def read(self, request: Request) -> dict[str, Any]:
        """Each parameter's value by name, `id` (the path's REF) and `body` (the JSON object), as the row says;
        InvalidInput for anything else."""
        if self.public:
            return {}
        given = parameters(request, self.parameters)
        if self.body is None and self.raw_body is None:
            await no_body(request)
        if "id" in request.path_params:
            given["id"] = checked_ref(request.path_params["id"])
        if self.body is not None:
            given["body"] = await json_body(request, self.body.schema, self.body_required)
        for param in self.parameters:
            given[param.name] = param.value(given.get(param.name))
        return given


def parameters(request: Request, params: tuple[Param, ...]) -> dict[str, Any]:
    """The query parameters `params` name, each once (a list for a repeatable one); `mind` is the
    authentication's, always allowed."""
    allowed = [param.name for param in params]
    query = request.query_params
    unknown = sorted({name for name in query if name not in allowed and name != MIND_PARAMETER})
    if unknown:
        raise InvalidInput(
            "query parameter",
            ", ".join(unknown),
            ", ".join((*allowed, MIND_PARAMETER)),
            reason=f"not a parameter of {_where(request)}",
        )
    found: dict[str, Any] = {}
    for name, param in zip(allowed, params, strict=True):
        values = query.getlist(name)
        if param.repeatable:
            found[name] = values
        elif len(values) > 1:
            raise InvalidInput(name, ", ".join(values), f"one ?{name}=", reason="it is given more than once")
        elif values:
            found[name] = values[0]
    return found


def _where(request: Request) -> str:
    """The request's method and its route's path template (`PUT /memory/{id}`)."""
    return f"{request.method} {getattr(request.scope.get('route'), 'path', request.url.path)}"


def whole_number(value: str | None, name: str) -> int | None:
    if value is None:
        return None
    text = value.strip()
    if not text.lstrip("-").isdigit() or len(text) > 12:
        raise InvalidInput(name, value, "a whole number")
    return int(text)


def flag(value: str | None, name: str) -> bool:
    """A true/false query parameter (absent: false; `?include_expired` alone: true), `true` or `false` in any
    case and nothing else (yes, 1, on...): what the error message and the OpenAPI document (a boolean) say."""
    if value is None:
        return False
    if value == "":
        return True
    word = value.strip().lower()
    if word not in FLAG_WORDS:
        raise InvalidInput(name, value, ", ".join(FLAG_WORDS))
    return FLAG_WORDS[word]


def json_types(schema: dict[str, Any]) -> tuple[type, ...]:
    """The Python types a JSON value of `schema` may have (an enum's values are strings)."""
    if "enum" in schema:
        return (str,)
    if "oneOf" in schema:
        return tuple(t for option in schema["oneOf"] for t in json_types(option))
    kinds = [schema["type"]] if isinstance(schema["type"], str) else schema["type"]
    return tuple(t for kind in kinds for t in JSON_TYPES[kind])


async def json_body(request: Request, schema: dict[str, Any], required: bool = True) -> dict[str, Any]:
    """The request's JSON object: every field one of `schema`'s properties (those that are not all named,
    with the allowed ones), of its JSON type, the required ones there; no body is `{}` unless `required`."""
    allowed = tuple(schema["properties"])
    raw = await request.body()
    where = _where(request)
    shape = f"a JSON object with the fields {', '.join(allowed)}"
    if not raw.strip():
        if not required:
            return {}
        raise InvalidInput("body", None, shape)
    try:
        data = json.loads(raw)
    except RecursionError:
        raise InvalidInput("body", f"{len(raw)} bytes", shape, reason="it is nested too deep") from None
    except ValueError as exc:  # UnicodeDecodeError included
        raise InvalidInput("body", f"{len(raw)} bytes", shape, reason=f"it is not JSON: {exc}") from None
    if not isinstance(data, dict):
        kind = _json_type(data)
        raise InvalidInput("body", kind, shape, reason=f"it must be a JSON object, not {kind}")
    unknown = [name for name in data if name not in allowed]
    if unknown:
        hints = "; ".join(f"{name}: {NOT_A_FIELD[name]}" for name in unknown if name in NOT_A_FIELD)
        raise InvalidInput(
            "field" if len(unknown) == 1 else "fields",
            ", ".join(name[:100] for name in unknown),
            ", ".join(allowed),
            reason=f"not a field of {where}" + (f"; {hints}" if hints else ""),
        )
    for name in schema["required"]:
        if name not in data:
            raise InvalidInput(name, None, f"{name} in the body of {where}")
    for name, value in data.items():
        types = json_types(schema["properties"][name])
        if isinstance(value, bool) is not (bool in types) or not isinstance(value, types):
            wanted = " or ".join(dict.fromkeys("a list of strings" if t is list else TYPE_NAMES[t] for t in types))
            raise InvalidInput(name, value, wanted, reason=f"it is {_json_type(value)}")
        strings = schema["properties"][name].get("items", {}).get("type", "string") == "string"
        if isinstance(value, list) and strings and not all(isinstance(item, str) for item in value):
            raise InvalidInput(name, value, "a list of strings", reason="an item is not a string")
    return data


async def no_body(request: Request) -> None:
    """An endpoint that takes no body: an empty body or `{}` is fine; any other is refused (a JSON object's
    fields named) before anything is done."""
    raw = await request.body()
    if not raw.strip():
        return
    where = _where(request)
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        data = raw
    if isinstance(data, dict):
        if not data:
            return
        names = list(data)
        raise InvalidInput(
            "field" if len(names) == 1 else "fields",
            ", ".join(names),
            "no body (the options of an endpoint are query parameters)",
            reason=f"{where} takes no body; nothing was done",
        )
    raise InvalidInput(
        "body", f"{len(raw)} bytes", "no body (or an empty one)", reason=f"{where} takes no body; nothing was done"
    )


def checked_ref(ref: str) -> str:
    """A memory's id or REF from a path, refused when it holds a control character (%00, %0a...), which no
    id or key has (the Vault checks the rest; the console's memory pages too)."""
    if CONTROL_CHARACTERS.search(ref):
        raise InvalidInput("REF", ref, REF_RULE, reason="it holds a NUL or another control character")
    return ref


def _json_type(value: Any) -> str:
    return TYPE_NAMES.get(type(value), "an object")
