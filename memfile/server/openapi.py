"""The OpenAPI 3.1 document of `memfile serve` (GET /openapi.json), written here, not generated.

A test holds it to the application: every route of the app is in it, every path in it is a route,
with the same methods. The endpoints that Synapse's seeds do not list carry `x-memfile-extension: true`.
"""

from __future__ import annotations

from typing import Any

from ..model import EXCERPT_CHARS, Category, Priority, Source, Status

VERSION = "1"

_REF = "#/components/"


def _ref(kind: str, name: str) -> dict[str, str]:
    return {"$ref": f"{_REF}{kind}/{name}"}


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def _ok(description: str, schema: dict[str, Any], status: str = "200") -> dict[str, Any]:
    return {status: {"description": description, "content": _json(schema)}}


#: The errors every authenticated endpoint may answer (each a JSON Error).
_ERRORS = {
    "400": _ref("responses", "BadInput"),
    "401": _ref("responses", "Unauthorized"),
    "403": _ref("responses", "Refused"),
    "404": _ref("responses", "NotFound"),
    "409": _ref("responses", "Conflict"),
    "413": _ref("responses", "ContentTooLarge"),
    "421": _ref("responses", "MisdirectedRequest"),
    "503": _ref("responses", "Busy"),
}


def _query(name: str, description: str, schema: dict[str, Any], *, required: bool = False) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": required, "description": description, "schema": schema}


_STRING = {"type": "string"}
_BOOL = {"type": "boolean"}
_LIMIT = {"type": "integer", "minimum": 1, "maximum": 1000, "default": 10}
_RECALL_PARAMETERS = [
    _query("q", "What the agent is working on: pinned memories, then the best matches.", _STRING),
    _query("budget", "The most tokens the text may take (characters / 4); 0: no limit.", {"type": "integer"}),
    _query("limit", "With q: the most matches besides the pinned memories.", _LIMIT),
    _query("format", "text (default) or json (what was chosen, with scores).", {"enum": ["text", "json"]}),
    _query("include_superseded", "Also memories marked superseded.", _BOOL),
]
_RECALL_RESPONSES = {
    "200": {
        "description": "The recall: plain text by default, the report with ?format=json.",
        "content": {
            "text/plain": {"schema": _STRING},
            "application/json": {"schema": _ref("schemas", "RecallReport")},
        },
    }
}


#: The formats of an import (`?from=`), its conflict rules (`?on_conflict=`), and how an OpenClaw
#: MEMORY.md is split (`?split=`): memfile import's options (memfile.transfer.records holds them; the
#: HTTP face may not import it, and a test holds the two together).
IMPORT_FORMATS = ["memfile", "synapse", "langbot", "openclaw"]
ON_CONFLICT = ["skip", "newer", "overwrite"]
SPLITS = ["sections", "bullets", "file"]
_EXPORT_PARAMETERS = [
    _query(
        "format",
        "jsonl (default): memfile's export, a header, one memory a line, a trailer with the count; "
        "json: a plain array of Synapse-shaped memories.",
        {"enum": ["jsonl", "json"], "default": "jsonl"},
    ),
    _query("raw", "Each memory also carries its file's exact text and its sha256 (a byte-exact round trip).", _BOOL),
    _query("all_minds", "Every mind of the vault (a person's token only: a Mind Key gets 403).", _BOOL),
]
_IMPORT_PARAMETERS = [
    _query("from", "The file's format (default: detected).", {"enum": IMPORT_FORMATS}),
    _query(
        "on_conflict",
        "A memory whose id is in the mind with other content: skip it, take the newer by updated_at "
        "(default), or overwrite.",
        {"enum": ON_CONFLICT, "default": "newer"},
    ),
    _query("dry_run", "Answer the plan and write nothing.", _BOOL),
    _query("from_mind", "memfile's export of several minds: the mind to take.", _STRING),
    _query(
        "split",
        "OpenClaw MEMORY.md: a memory per ## section (default), per top-level bullet, or the whole file.",
        {"enum": SPLITS, "default": "sections"},
    ),
    _query("category", "OpenClaw: the category of every memory (default: guessed from each heading).", _STRING),
    _query(
        "max_priority",
        "The highest priority an imported memory gets (LangBot importance 5 is high unless critical).",
        {"enum": ["high", "critical"], "default": "high"},
    ),
    _query(
        "source",
        "LangBot: who the profiles come from (default agent); a Mind Key imports as an agent whatever it says.",
        {"enum": [str(s) for s in Source]},
    ),
    _query(
        "allow_secret",
        "A person imports contents that look like tokens or keys all the same (a Mind Key: 403).",
        _BOOL,
    ),
]
_IMPORT_BODY = {
    "required": True,
    "description": "The file to import, as it is: memfile's JSONL export, Synapse's memory JSON (an array or "
    '{"memories": [...]}), a LangBot profiles or episodes envelope, or an OpenClaw MEMORY.md.',
    "content": {
        media: {"schema": {"type": "string"}}
        for media in ("application/x-ndjson", "application/json", "text/markdown", "text/plain")
    },
}


def _operation(
    summary: str,
    responses: dict[str, Any],
    *,
    operation_id: str,
    parameters: list[dict[str, Any]] | None = None,
    body: dict[str, Any] | None = None,
    request_body: dict[str, Any] | None = None,
    extension: bool = False,
    public: bool = False,
    description: str = "",
) -> dict[str, Any]:
    operation: dict[str, Any] = {"operationId": operation_id, "summary": summary}
    if description:
        operation["description"] = description
    operation["parameters"] = (parameters or []) + ([] if public else [_ref("parameters", "mind")])
    if body is not None:
        operation["requestBody"] = {"required": True, "content": _json(body)}
    if request_body is not None:  # a body that is not JSON
        operation["requestBody"] = request_body
    operation["responses"] = responses | ({} if public else _ERRORS)
    if public:
        operation["security"] = []
    if extension:
        operation["x-memfile-extension"] = True
    return operation


def _memory_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "description": "A memory: Synapse's fields, then memfile's own.",
        "required": ["id", "mind_id", "category", "key", "content", "created_at", "updated_at"],
        "properties": {
            "id": {"type": "string", "pattern": "^mem_[a-z0-9]{4,40}$"},
            "mind_id": {"type": "string", "description": "The mind's folder name."},
            "category": {"enum": [str(c) for c in Category]},
            "key": _STRING,
            "priority": {"enum": [str(p) for p in Priority]},
            "tags": {"type": "array", "items": _STRING},
            "source": {"enum": [str(s) for s in Source]},
            "verified": _BOOL,
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
            "expires_at": {"type": ["string", "null"], "format": "date-time"},
            "created_at": {"type": "string", "format": "date-time"},
            "updated_at": {"type": "string", "format": "date-time"},
            "status": {"enum": [str(s) for s in Status]},
            "superseded_by": {"type": ["string", "null"]},
            "path": {"type": "string", "description": "The file, relative to the vault folder."},
            "content": _STRING,
            "extra": {"type": "object", "description": "Front-matter keys memfile does not know, in file order."},
            "has_front_matter": _BOOL,
            "id_derived": _BOOL,
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
                "oneOf": [{"type": "array", "items": _STRING}, {"type": "string", "description": "comma-separated"}]
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


def _components() -> dict[str, Any]:
    memory = _ref("schemas", "Memory")

    def error_response(description: str) -> dict[str, Any]:
        return {"description": description, "content": _json(_ref("schemas", "Error"))}

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
                "mind",
                "The mind (a person's token; default: the vault's default mind). A Mind Key may name only its own.",
                {"type": "string", "pattern": "^[a-z0-9][a-z0-9_-]{0,63}$"},
            ),
            "id": {
                "name": "id",
                "in": "path",
                "required": True,
                "description": "A memory id (mem_...) or a key unique in the mind.",
                "schema": _STRING,
            },
        },
        "responses": {
            "BadInput": error_response("Bad input: the message names the field and what is allowed."),
            "Unauthorized": {
                **error_response("No credential, or one that is unknown or revoked."),
                "headers": {"WWW-Authenticate": {"schema": _STRING}},
            },
            "Refused": error_response("Not permitted to this credential (an agent verifying, another mind...)."),
            "NotFound": error_response("No such memory, mind or endpoint."),
            "Conflict": error_response("Something is in the way of the write."),
            "ContentTooLarge": error_response("The body is larger than 11 MB (64 MB for an import)."),
            "MisdirectedRequest": error_response("The Host header names another server (DNS rebinding)."),
            "Busy": {
                **error_response("The writer lock was held too long by another process: try again."),
                "headers": {"Retry-After": {"schema": {"type": "integer"}}},
            },
        },
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
            "StoredMemory": {
                "allOf": [
                    memory,
                    {
                        "type": "object",
                        "properties": {
                            "created": _BOOL,
                            "changed": _BOOL,
                            "commit": {"type": ["string", "null"]},
                            "superseded": {"oneOf": [memory, {"type": "null"}]},
                            "notices": {"type": "array", "items": _STRING},
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
                            "snippet": _STRING,
                            "rank": {"type": "integer"},
                        },
                    },
                ]
            },
            "RecallReport": {
                "type": "object",
                "properties": {
                    "mind_id": _STRING,
                    "name": _STRING,
                    "total": {"type": "integer"},
                    "budget": {"type": ["integer", "null"]},
                    "tokens": {"type": "integer"},
                    "memories": {"type": "array", "items": memory},
                },
            },
            "Version": {
                "type": "object",
                "properties": {
                    "commit": _STRING,
                    "date": _STRING,
                    "author": _STRING,
                    "source": {"type": ["string", "null"]},
                    "message": _STRING,
                    "removed": _BOOL,
                    "changed": {"type": "array", "items": _STRING},
                    "diff": _STRING,
                    "problem": {"type": ["string", "null"]},
                    "memory": {"oneOf": [memory, {"type": "null"}]},
                },
            },
            "ImportReport": {
                "type": "object",
                "description": "What an import did (or, with dry_run, would do).",
                "properties": {
                    "format": {"enum": IMPORT_FORMATS},
                    "mind": _STRING,
                    "file": {"type": "string", "description": "What was imported: `request body` here."},
                    "dry_run": _BOOL,
                    "commit": {"type": ["string", "null"], "description": "The import's one commit (null: none)."},
                    "created": {"type": "array", "items": _STRING},
                    "updated": {"type": "array", "items": _STRING},
                    "unchanged": {"type": "integer"},
                    "skipped": {"type": "array", "items": _ref("schemas", "ImportIssue")},
                    "conflicts": {"type": "array", "items": _ref("schemas", "ImportIssue")},
                    "unmapped": {"type": "array", "items": _STRING},
                    "notices": {
                        "type": "array",
                        "items": _STRING,
                        "description": "What the import changed on its way in, then what its write told "
                        "(the index could not be written, a killed sync's files removed).",
                    },
                },
            },
            "ImportIssue": {
                "type": "object",
                "properties": {
                    "record": {"type": ["integer", "string"], "description": "The record's number in the file."},
                    "ref": {"type": ["string", "null"]},
                    "reason": _STRING,
                },
            },
            "NewMemory": _input_schema(
                ["category", "key", "content"], "A memory to store; the same category and key updates it."
            ),
            "MemoryChange": _input_schema(
                [], "The fields to change (category and key, if given, must be the memory's own)."
            ),
        },
    }


def _paths(mcp: bool) -> dict[str, Any]:
    memory, memories = _ref("schemas", "Memory"), {"type": "array", "items": _ref("schemas", "Memory")}
    stored = _ref("schemas", "StoredMemory")
    by_id = [_ref("parameters", "id")]
    paths: dict[str, Any] = {
        "/memory": {
            "get": _operation(
                "The start-of-session recall (the same as GET /memory/recall).",
                _RECALL_RESPONSES,
                operation_id="recallAtStart",
                parameters=_RECALL_PARAMETERS,
                extension=True,
            ),
            "post": _operation(
                "Store a memory: 201 when created, 200 when the same category and key was updated.",
                _ok("Updated (or unchanged).", stored) | _ok("Created.", stored, "201"),
                operation_id="storeMemory",
                body=_ref("schemas", "NewMemory"),
            ),
        },
        "/memory/recall": {
            "get": _operation(
                "The prioritized summary an agent puts in its context (expired left out, unverified marked).",
                _RECALL_RESPONSES,
                operation_id="recall",
                parameters=_RECALL_PARAMETERS,
            )
        },
        "/memory/search": {
            "get": _operation(
                "Full-text search, best first.",
                {
                    "200": _ok("The hits.", {"type": "array", "items": _ref("schemas", "SearchHit")})["200"]
                    | {
                        "headers": {
                            "Memfile-Notice": {
                                "description": "A notice of the search, one header each (not all memories embedded for search by meaning yet: how many are; a hit holding a secret): ASCII, other characters as JSON escapes.",
                                "schema": _STRING,
                            }
                        }
                    }
                },
                operation_id="search",
                parameters=[
                    _query("q", "What to look for (at most 4,096 characters).", _STRING, required=True),
                    {
                        **_query(
                            "tag",
                            "Only memories with this tag (repeat: all of them).",
                            {"type": "array", "items": _STRING},
                        ),
                        "explode": True,
                    },
                    _query("category", "Only this category.", {"enum": [str(c) for c in Category]}),
                    _query("priority", "Only this priority.", {"enum": [str(p) for p in Priority]}),
                    _query("source", "Only user or only agent memories.", {"enum": [str(s) for s in Source]}),
                    _query("unverified", "Only unverified memories.", _BOOL),
                    _query("include_expired", "Also expired memories.", _BOOL),
                    _query("include_superseded", "Also superseded memories.", _BOOL),
                    _query("limit", "The most hits.", _LIMIT),
                ],
            )
        },
        "/memory/by-tag": {
            "get": _operation(
                "The memories with a tag (any case), newest first.",
                _ok("The memories.", memories),
                operation_id="byTag",
                parameters=[
                    _query("tag", "The tag.", _STRING, required=True),
                    _query("include_expired", "Also expired memories.", _BOOL),
                ],
            )
        },
        "/memory/expiring": {
            "get": _operation(
                "The memories that expire within a time from now, soonest first.",
                _ok("The memories.", memories),
                operation_id="expiring",
                parameters=[_query("within", "A duration: 30m, 12h, 7d (default), 2w.", {**_STRING, "default": "7d"})],
            )
        },
        "/memory/export": {
            "get": _operation(
                "Every memory of the mind (a person's token may ask for every mind), as a file to keep or import "
                "elsewhere: memfile export. Expired and superseded memories are in it, marked.",
                {
                    "200": {
                        "description": "The export, as an attachment (Content-Disposition names the file).",
                        "headers": {"Content-Disposition": {"schema": _STRING}},
                        "content": {
                            "application/x-ndjson": {"schema": _STRING},
                            "application/json": {"schema": {"type": "array", "items": memory}},
                        },
                    }
                },
                operation_id="exportMemories",
                parameters=_EXPORT_PARAMETERS,
                extension=True,
            )
        },
        "/memory/import": {
            "post": _operation(
                "Import a file into the mind in one commit, or write nothing (memfile import): any record that "
                "fails validation is a 400 naming it. A Mind Key imports as an agent: its memories land unverified.",
                _ok("What the import did (with dry_run: would do).", _ref("schemas", "ImportReport")),
                operation_id="importMemories",
                parameters=_IMPORT_PARAMETERS,
                request_body=_IMPORT_BODY,
                extension=True,
            )
        },
        "/memory/{id}": {
            "get": _operation(
                "One memory.", _ok("The memory.", memory), operation_id="getMemory", parameters=by_id, extension=True
            ),
            "put": _operation(
                "Update a memory's content or other fields (its category and key never change: 400).",
                _ok("The memory as now stored.", stored),
                operation_id="updateMemory",
                parameters=by_id,
                body=_ref("schemas", "MemoryChange"),
            ),
            "delete": _operation(
                "Forget a memory (git keeps every version). An agent cannot forget a verified or critical one.",
                _ok("The memory as it was.", memory),
                operation_id="forgetMemory",
                parameters=by_id,
                extension=True,
            ),
        },
        "/memory/{id}/verify": {
            "post": _operation(
                "Mark a memory as checked by a person: a person's token only (a Mind Key gets 403).",
                _ok("The memory, verified.", stored),
                operation_id="verifyMemory",
                parameters=by_id,
            )
        },
        "/memory/{id}/history": {
            "get": _operation(
                "Every version of a memory, newest first (also of a forgotten one).",
                _ok("The versions.", {"type": "array", "items": _ref("schemas", "Version")}),
                operation_id="history",
                parameters=by_id,
                extension=True,
            )
        },
        "/health": {
            "get": _operation(
                "Liveness: the server answers (no credential needed, nothing about the vault).",
                _ok("Alive.", {"type": "object", "properties": {"status": {"const": "ok"}}}),
                operation_id="health",
                public=True,
                extension=True,
            )
        },
        "/openapi.json": {
            "get": _operation(
                "This document.",
                _ok("The OpenAPI document.", {"type": "object"}),
                operation_id="openapi",
                public=True,
                extension=True,
            )
        },
    }
    if mcp:
        mcp_response = {
            "description": "MCP's streamable HTTP transport (JSON-RPC; JSON or an event stream).",
            "content": {"application/json": {"schema": {"type": "object"}}, "text/event-stream": {"schema": _STRING}},
        }
        paths["/mcp"] = {
            "post": _operation(
                "The MCP server (streamable HTTP, stateless, JSON answers): the same tools and rules as "
                "`memfile mcp`, acting for this request's credential.",
                {"200": mcp_response},
                operation_id="mcp",
                extension=True,
            )
        }
    return paths


def document(mcp: bool) -> dict[str, Any]:
    """The OpenAPI 3.1 document; `mcp`: whether /mcp is served."""
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
        "paths": _paths(mcp),
        "components": _components(),
    }
