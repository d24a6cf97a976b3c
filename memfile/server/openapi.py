"""The OpenAPI 3.1 document of `memfile serve` (GET /openapi.json), built from the route table.

Each operation is made from its row of `app.ENDPOINTS` (`Endpoint`: its summary, parameters, body and
responses); the schemas, shared parameters and error answers they refer to are here. The endpoints that
Synapse's seeds do not list carry `x-memfile-extension: true`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from ..model import EXCERPT_CHARS, Category, Priority, Source, Status
from .endpoint import Body, Endpoint, Param

VERSION = "1"

_REF = "#/components/"


def ref(kind: str, name: str) -> dict[str, str]:
    return {"$ref": f"{_REF}{kind}/{name}"}


def json_content(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def ok(description: str, schema: dict[str, Any], status: str = "200") -> dict[str, Any]:
    return {status: {"description": description, "content": json_content(schema)}}


STRING = {"type": "string"}
BOOL = {"type": "boolean"}
LIMIT = {"type": "integer", "minimum": 1, "maximum": 1000, "default": 10}
#: The errors every authenticated endpoint may answer, each a JSON Error: status, name, description, headers.
ERRORS = (
    ("400", "BadInput", "Bad input: the message names the field and what is allowed.", None),
    ("401", "Unauthorized", "No credential, or one that is unknown or revoked.", {"WWW-Authenticate": STRING}),
    ("403", "Refused", "Not permitted to this credential (an agent verifying, another mind...).", None),
    ("404", "NotFound", "No such memory, mind or endpoint.", None),
    ("409", "Conflict", "Something is in the way of the write.", None),
    ("413", "ContentTooLarge", "The body is larger than 11 MB (64 MB for an import).", None),
    ("421", "MisdirectedRequest", "The Host header names another server (DNS rebinding).", None),
    (
        "503",
        "Busy",
        "The writer lock was held too long by another process: try again.",
        {"Retry-After": {"type": "integer"}},
    ),
)


#: The formats of an import (`?from=`), its conflict rules (`?on_conflict=`), and how an OpenClaw
#: MEMORY.md is split (`?split=`): memfile import's options (memfile.transfer.records holds them; the
#: HTTP face may not import it, and a test holds the two together).
IMPORT_FORMATS = ["memfile", "synapse", "langbot", "openclaw"]
ON_CONFLICT = ["skip", "newer", "overwrite"]
SPLITS = ["sections", "bullets", "file"]


def operation(endpoint: Endpoint) -> dict[str, Any]:
    """The OpenAPI operation of one row of the route table."""
    operation: dict[str, Any] = {"operationId": endpoint.operation_id, "summary": endpoint.summary}
    in_path = [ref("parameters", name) for name in re.findall(r"{(\w+)}", endpoint.path)]
    operation["parameters"] = (
        in_path + [_query(p) for p in endpoint.parameters] + ([] if endpoint.public else [ref("parameters", "mind")])
    )
    if endpoint.body is not None:
        operation["requestBody"] = {
            "required": endpoint.body_required,
            "content": json_content(ref("schemas", endpoint.body.name)),
        }
    if endpoint.raw_body is not None:  # a body that is not JSON
        operation["requestBody"] = endpoint.raw_body
    errors = {status: ref("responses", name) for status, name, _, _ in ERRORS}
    operation["responses"] = endpoint.responses | ({} if endpoint.public else errors)
    if endpoint.public:
        operation["security"] = []
    if endpoint.extension:
        operation["x-memfile-extension"] = True
    return operation


def _query(param: Param) -> dict[str, Any]:
    spec = {
        "name": param.name,
        "in": "query",
        "required": param.required,
        "description": param.description,
        "schema": param.schema,
    }
    return spec | ({"explode": True} if param.repeatable else {})


def _memory_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "description": "A memory: Synapse's fields, then memfile's own.",
        "required": ["id", "mind_id", "category", "key", "content", "created_at", "updated_at"],
        "properties": {
            "id": {"type": "string", "pattern": "^mem_[a-z0-9]{4,40}$"},
            "mind_id": {"type": "string", "description": "The mind's folder name."},
            "category": {"enum": [str(c) for c in Category]},
            "key": STRING,
            "priority": {"enum": [str(p) for p in Priority]},
            "tags": {"type": "array", "items": STRING},
            "source": {"enum": [str(s) for s in Source]},
            "verified": BOOL,
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
            "expires_at": {"type": ["string", "null"], "format": "date-time"},
            "created_at": {"type": "string", "format": "date-time"},
            "updated_at": {"type": "string", "format": "date-time"},
            "status": {"enum": [str(s) for s in Status]},
            "superseded_by": {"type": ["string", "null"]},
            "path": {"type": "string", "description": "The file, relative to the vault folder."},
            "content": STRING,
            "extra": {"type": "object", "description": "Front-matter keys memfile does not know, in file order."},
            "has_front_matter": BOOL,
            "id_derived": BOOL,
        },
    }


def _input_schema(required: list[str], description: str) -> dict[str, Any]:
    return {
        "type": "object",
        "description": description,
        "required": required,
        "additionalProperties": False,
        "properties": {
            "category": {"enum": [str(c) for c in Category]},
            "key": {"type": "string", "description": "snake_case, unique in the category."},
            "content": {"type": "string", "minLength": 1, "description": "Markdown, at most 10 MB."},
            "tags": {
                "oneOf": [{"type": "array", "items": STRING}, {"type": "string", "description": "comma-separated"}]
            },
            "priority": {"enum": [str(p) for p in Priority]},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
            "expires_at": {
                "type": ["string", "null"],
                "description": "An ISO-8601 moment, a duration from now (30m, 12h, 7d, 2w), never, or null (never).",
            },
            "source": {"enum": [str(s) for s in Source], "description": "A Mind Key stores as agent only."},
            "supersedes": {"type": "string", "description": "An older memory this one replaces (its id or REF)."},
            "allow_secret": {
                "type": "boolean",
                "description": "A person's token stores content that looks like a token or key all the same "
                "(refused by default: docs/secrets.md); a Mind Key never can (403).",
            },
        },
    }


NEW_MEMORY = Body(
    "NewMemory",
    _input_schema(["category", "key", "content"], "A memory to store; the same category and key updates it."),
)
PURGE = Body(
    "Purge",
    {
        "type": "object",
        "description": "What to purge ({} for the whole memory).",
        "required": [],
        "additionalProperties": False,
        "properties": {
            "text": {
                "type": "string",
                "minLength": 4,
                "description": "Remove only this string from every version, keeping every other byte (a leaked token).",
            },
            "dry_run": {"type": "boolean", "description": "Answer what would go and change nothing."},
        },
    },
)
MEMORY_CHANGE = Body(
    "MemoryChange", _input_schema([], "The fields to change (category and key, if given, must be the memory's own).")
)
CAPTURE = Body(
    "Capture",
    {
        "type": "object",
        "description": "A conversation to capture memories from, with the model memfile.toml's [capture] names.",
        "required": ["messages"],
        "additionalProperties": False,
        "properties": {
            "messages": {
                "type": "array",
                "items": {"type": "object"},
                "description": 'Chat messages: {"role": ..., "content": text or content blocks}.',
            },
            "session": {"type": "string", "description": "The conversation's name, kept as captured_from."},
            "review": {"type": "boolean", "description": "Proposals wait for review (default [capture] review)."},
            "dry_run": {"type": "boolean", "description": "Decide and answer; write nothing."},
        },
    },
)
ACCEPTANCE = Body(
    "Acceptance",
    {
        **_input_schema([], "What to change in a proposal before accepting it ({} or no body: as it is)."),
        "properties": {
            name: schema
            for name, schema in _input_schema([], "")["properties"].items()
            if name in ("content", "tags", "priority", "expires_at")
        },
    },
)


def _link_schema() -> dict[str, Any]:
    """A wiki link of a memory's text, resolved (`ResolvedLink.to_dict`; docs/format.md, "Links")."""
    text_or_null = {"type": ["string", "null"]}
    return {
        "type": "object",
        "description": "A wiki link ([[key]], [[category/key|shown]], - relation [[key]]) and where it leads.",
        "properties": {
            "source": {"type": "string", "description": "The linking memory (category/key)."},
            "source_id": STRING,
            "target": {"type": "string", "description": "The name as written, without #heading or .md."},
            "shown": text_or_null,
            "relation": {"type": ["string", "null"], "description": "The list line's typed relation (snake_case)."},
            "line": {"type": "integer", "description": "The line in the linking memory's content (1-based)."},
            "path": {"type": "string", "description": "The linking memory's file."},
            "status": {"enum": ["resolved", "superseded", "ambiguous", "missing", "other_mind", "invalid"]},
            "ref": {"type": ["string", "null"], "description": "The memory it leads to (a successor if superseded)."},
            "id": text_or_null,
            "named": {"type": ["string", "null"], "description": "The superseded memory the text names."},
            "candidates": {"type": "array", "items": STRING},
            "note": {"type": "string", "description": "Where it leads, in a sentence."},
        },
    }


def _components() -> dict[str, Any]:
    memory = ref("schemas", "Memory")
    errors = {
        name: {"description": description, "content": json_content(ref("schemas", "Error"))}
        | ({"headers": {header: {"schema": schema} for header, schema in headers.items()}} if headers else {})
        for _, name, description, headers in ERRORS
    }
    return {
        "securitySchemes": {
            "bearer": {
                "type": "http",
                "scheme": "bearer",
                "description": "A Mind Key (mfk_...: one mind, as an agent) or a person's token (mfp_...): "
                "memfile key add.",
            }
        },
        "parameters": {
            "mind": _query(
                Param(
                    "mind",
                    "The mind (a person's token; default: the vault's default mind). A Mind Key may name only its own.",
                    {"type": "string", "pattern": "^[a-z0-9][a-z0-9_-]{0,63}$"},
                )
            ),
            "id": {
                "name": "id",
                "in": "path",
                "required": True,
                "description": "A memory id (mem_...) or a key unique in the mind.",
                "schema": STRING,
            },
        },
        "responses": errors,
        "schemas": {
            "Error": {
                "type": "object",
                "required": ["error", "message"],
                "properties": {
                    "error": {"type": "string", "description": "The error's name: InvalidInput, Refused..."},
                    "message": {"type": "string", "description": "What went wrong and what to do instead."},
                },
            },
            "Memory": _memory_schema(),
            "LinkedMemory": {
                "allOf": [
                    memory,
                    {
                        "type": "object",
                        "properties": {
                            "links": {"type": "array", "items": ref("schemas", "Link")},
                            "backlinks": {"type": "array", "items": ref("schemas", "Link")},
                        },
                    },
                ]
            },
            "Link": _link_schema(),
            "StoredMemory": {
                "allOf": [
                    memory,
                    {
                        "type": "object",
                        "properties": {
                            "created": BOOL,
                            "changed": BOOL,
                            "commit": {"type": ["string", "null"]},
                            "superseded": {"oneOf": [memory, {"type": "null"}]},
                            "notices": {"type": "array", "items": STRING},
                        },
                    },
                ]
            },
            "SearchHit": {
                "allOf": [
                    memory,
                    {
                        "type": "object",
                        "description": (
                            f"A memory found, with its content's first {EXCERPT_CHARS:,} characters only (cut between "
                            "words): `content_cut` says whether it was cut, `content_chars` is its whole length (the "
                            "whole memory: GET /memory/{id})."
                        ),
                        "properties": {
                            "content_cut": {"type": "boolean"},
                            "content_chars": {"type": "integer"},
                            "score": {"type": "number"},
                            "snippet": STRING,
                            "rank": {"type": "integer"},
                        },
                    },
                ]
            },
            "RecallReport": {
                "type": "object",
                "properties": {
                    "mind_id": STRING,
                    "name": STRING,
                    "total": {"type": "integer"},
                    "budget": {"type": ["integer", "null"]},
                    "tokens": {"type": "integer"},
                    "memories": {"type": "array", "items": memory},
                },
            },
            "Version": {
                "type": "object",
                "properties": {
                    "commit": STRING,
                    "date": STRING,
                    "author": STRING,
                    "source": {"type": ["string", "null"]},
                    "message": STRING,
                    "removed": BOOL,
                    "changed": {"type": "array", "items": STRING},
                    "diff": STRING,
                    "problem": {"type": ["string", "null"]},
                    "memory": {"oneOf": [memory, {"type": "null"}]},
                },
            },
            "ImportReport": {
                "type": "object",
                "description": "What an import did (or, with dry_run, would do).",
                "properties": {
                    "format": {"enum": IMPORT_FORMATS},
                    "mind": STRING,
                    "file": {"type": "string", "description": "What was imported: `request body` here."},
                    "dry_run": BOOL,
                    "commit": {"type": ["string", "null"], "description": "The import's one commit (null: none)."},
                    "created": {"type": "array", "items": STRING},
                    "updated": {"type": "array", "items": STRING},
                    "unchanged": {"type": "integer"},
                    "skipped": {"type": "array", "items": ref("schemas", "ImportIssue")},
                    "conflicts": {"type": "array", "items": ref("schemas", "ImportIssue")},
                    "unmapped": {"type": "array", "items": STRING},
                    "notices": {
                        "type": "array",
                        "items": STRING,
                        "description": "What the import changed on its way in, then what its write told "
                        "(the index could not be written, a killed sync's files removed).",
                    },
                },
            },
            "ForgetReport": {
                "type": "object",
                "description": "What a forget of many did (or, with dry_run, would do).",
                "properties": {
                    "dry_run": BOOL,
                    "commit": {"type": ["string", "null"], "description": "The one commit (null: none)."},
                    "forgotten": {"type": "array", "items": memory},
                    "left_out": {
                        "type": "array",
                        "items": memory,
                        "description": "Matched, but not the caller's to forget (a Mind Key: a person's, "
                        "verified or critical memory).",
                    },
                },
            },
            "CaptureReport": {
                "type": "object",
                "description": "Each candidate the model proposed and what capture did with it (docs/capture.md).",
                "properties": {
                    "session": STRING,
                    "proposed": {"type": "boolean", "description": "The memories wait for review."},
                    "commit": {"type": ["string", "null"], "description": "The one commit (null: none)."},
                    "dry_run": BOOL,
                    "prompt_version": {"type": "integer"},
                    "counts": {"type": "object", "description": "Decisions by action: add, update, skip."},
                    "decisions": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "action": {"enum": ["add", "update", "skip"]},
                                "ref": STRING,
                                "reason": STRING,
                                "target": {"type": ["string", "null"]},
                                "memory": {"type": ["object", "null"]},
                            },
                        },
                    },
                },
            },
            "PurgeReport": {
                "type": "object",
                "description": "What a purge removed from every version of the history (with dry_run: would).",
                "properties": {
                    "ref": STRING,
                    "id": STRING,
                    "mind": STRING,
                    "versions": {"type": "integer", "description": "Versions of the memory (holding text)."},
                    "commits": {"type": "integer", "description": "Commits rewritten."},
                    "refs": {
                        "type": "array",
                        "items": STRING,
                        "description": "Branches, tags and remote-tracking branches moved.",
                    },
                    "on_disk": BOOL,
                    "text": {"type": "boolean", "description": "Only a string was removed."},
                    "dry_run": BOOL,
                    "commit": {"type": ["string", "null"], "description": "The commit recording the purge."},
                    "remotes": {
                        "type": "array",
                        "items": STRING,
                        "description": "Remotes still holding the purged versions (memfile purge --push).",
                    },
                    "pushed": {"type": "array", "items": STRING},
                },
            },
            "ImportIssue": {
                "type": "object",
                "properties": {
                    "record": {"type": ["integer", "string"], "description": "The record's number in the file."},
                    "ref": {"type": ["string", "null"]},
                    "reason": STRING,
                },
            },
            NEW_MEMORY.name: NEW_MEMORY.schema,
            MEMORY_CHANGE.name: MEMORY_CHANGE.schema,
            ACCEPTANCE.name: ACCEPTANCE.schema,
            PURGE.name: PURGE.schema,
            CAPTURE.name: CAPTURE.schema,
        },
    }


def document(endpoints: Iterable[Endpoint]) -> dict[str, Any]:
    """The OpenAPI 3.1 document of these rows of the route table (each path where it first comes)."""
    paths: dict[str, Any] = {}
    for endpoint in endpoints:
        paths.setdefault(endpoint.path, {})[endpoint.method.lower()] = operation(endpoint)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "memfile",
            "version": VERSION,
            "summary": "Long-term memory for LLM agents, kept as Markdown files in git: Synapse's memory API.",
            "description": "Every endpoint but /health and /openapi.json needs `Authorization: Bearer TOKEN`. "
            "Errors are JSON {error, message}. Operations marked x-memfile-extension are memfile's additions "
            "to Synapse's endpoints. See docs/server.md.",
        },
        "security": [{"bearer": []}],
        "paths": paths,
        "components": _components(),
    }
