"""Reading a request: its query parameters, JSON body and path REF, each refused by name when unknown, repeated
or of the wrong type (an `InvalidInput`, answered 400).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from starlette.requests import Request

from ..errors import InvalidInput
from ..model import REF_RULE
from .auth import MIND_PARAMETER

#: The JSON types each body field of POST /memory and PUT /memory/{id} may have.
FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "category": (str,),
    "key": (str,),
    "content": (str,),
    "tags": (list, str),
    "priority": (str,),
    "confidence": (int, float),
    "expires_at": (str, type(None)),
    "source": (str,),
    "supersedes": (str,),
    "allow_secret": (bool,),  # a person stores what looks like a secret all the same (a Mind Key: 403)
}
TYPE_NAMES = {
    str: "a string",
    list: "a list of strings",
    int: "a number",
    float: "a number",
    type(None): "null",
    bool: "true or false",
}
#: The fields of POST /memory that must be there.
REQUIRED = ("category", "key", "content")
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


def parameters(request: Request, allowed: Iterable[str], repeatable: Iterable[str] = ()) -> dict[str, Any]:
    """The query parameters of `request`, each once (a list for the `repeatable` ones); an unknown or
    repeated one is refused by name (`mind` is the authentication's, always allowed)."""
    allowed, repeatable = tuple(allowed), tuple(repeatable)
    query = request.query_params
    unknown = sorted({name for name in query if name not in allowed and name != MIND_PARAMETER})
    if unknown:
        raise InvalidInput(
            "query parameter",
            ", ".join(unknown),
            ", ".join((*allowed, MIND_PARAMETER)),
            reason=f"not a parameter of {request.method} {_template(request)}",
        )
    found: dict[str, Any] = {}
    for name in allowed:
        values = query.getlist(name)
        if name in repeatable:
            found[name] = values
        elif len(values) > 1:
            raise InvalidInput(name, ", ".join(values), f"one ?{name}=", reason="it is given more than once")
        elif values:
            found[name] = values[0]
    return found


def _template(request: Request) -> str:
    route = request.scope.get("route")
    return getattr(route, "path", request.url.path)


def whole_number(value: str | None, name: str) -> int | None:
    """A query parameter that must be a whole number (None when absent)."""
    if value is None:
        return None
    text = value.strip()
    if not text.lstrip("-").isdigit() or len(text) > 12:
        raise InvalidInput(name, value, "a whole number")
    return int(text)


def flag(value: str | None, name: str) -> bool:
    """A true/false query parameter (absent: false; `?include_expired` alone: true), `true` or `false` in any
    case and nothing else: what the error message and the OpenAPI document (a boolean) say.

    Raises:
        InvalidInput: another value (yes, 1, on...).
    """
    if value is None:
        return False
    if value == "":
        return True
    word = value.strip().lower()
    if word not in FLAG_WORDS:
        raise InvalidInput(name, value, ", ".join(FLAG_WORDS))
    return FLAG_WORDS[word]


async def json_body(request: Request, allowed: Iterable[str], required: Iterable[str] = ()) -> dict[str, Any]:
    """The request's JSON object, every field of it one of `allowed` with its JSON type (FIELD_TYPES).

    Raises:
        InvalidInput: no body, not JSON, not an object, a field that is not allowed (all of them named,
            with the allowed ones), a required field missing, or a field of the wrong type.
    """
    allowed = tuple(allowed)
    raw = await request.body()
    where = f"{request.method} {_template(request)}"
    shape = f"a JSON object with the fields {', '.join(allowed)}"
    if not raw.strip():
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
    for name in required:
        if name not in data:
            raise InvalidInput(name, None, f"{name} in the body of {where}")
    for name, value in data.items():
        types = FIELD_TYPES[name]
        if isinstance(value, bool) is not (bool in types) or not isinstance(value, types):
            wanted = " or ".join(dict.fromkeys(TYPE_NAMES[t] for t in types))
            raise InvalidInput(name, value, wanted, reason=f"it is {_json_type(value)}")
        if isinstance(value, list) and not all(isinstance(item, str) for item in value):
            raise InvalidInput(name, value, "a list of strings", reason="an item is not a string")
    return data


async def query_only(request: Request, allowed: Iterable[str] = (), repeatable: Iterable[str] = ()) -> dict[str, Any]:
    """`parameters` of an endpoint that takes no body, after checking that none came: an empty body or `{}`
    is fine, and a body with fields is refused naming them, before anything is done.

    Raises:
        InvalidInput: an unknown or repeated query parameter, or a body (its fields named, when it is a JSON object).
    """
    given = parameters(request, allowed, repeatable)
    raw = await request.body()
    if not raw.strip():
        return given
    where = f"{request.method} {_template(request)}"
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        data = raw
    if isinstance(data, dict):
        if not data:
            return given
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


def path_ref(request: Request) -> str:
    """The `{id}` of the request's path, checked by `checked_ref`."""
    return checked_ref(request.path_params["id"])


def checked_ref(ref: str) -> str:
    """A memory's id or REF from a path (the Vault checks the rest; the console's memory pages too).

    Raises:
        InvalidInput: it holds NUL or another control character (%00, %0a...), which no id or key has.
    """
    if CONTROL_CHARACTERS.search(ref):
        raise InvalidInput("REF", ref, REF_RULE, reason="it holds a NUL or another control character")
    return ref


def _json_type(value: Any) -> str:
    names = {bool: "true or false", int: "a number", float: "a number", str: "a string", list: "a list"}
    return "null" if value is None else names.get(type(value), "an object")
