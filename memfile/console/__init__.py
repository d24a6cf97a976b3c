"""The memory console at /console on `memfile serve`: pages where a person sees and tends an agent's memory.

`pages.Console` is its Starlette application (mounted by `memfile.server.app` through `ConsoleMount`),
`auth` holds who may use it (sessions, CSRF, same origin, headers), `data` what each page reads from
the Vault; `templates/` and `static/` are its Jinja2 pages, stylesheet and vendored htmx.
"""

from .auth import ConsoleMount
from .pages import Console

__all__ = ["Console", "ConsoleMount"]
