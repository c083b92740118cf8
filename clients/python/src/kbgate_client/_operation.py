"""One operation of the HTTP API, as `operations` lists them."""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

B_co = TypeVar("B_co", covariant=True)
R_co = TypeVar("R_co", covariant=True)

#: the path parameter that may hold `/` (a document id is a path relative to its source)
_PATH_PARAMETERS = frozenset({"document_id"})


@dataclass(frozen=True, slots=True)
class Operation(Generic[B_co, R_co]):
    """Method, path template, request body type and answer type of one operation."""

    operation_id: str
    method: str
    path: str
    body: type[B_co] | None
    answer: type[R_co]
    #: the status a success answers with (a PUT that creates answers 201 instead)
    status: int
    media_type: str
    query: tuple[str, ...] = ()
    #: whether it needs a key (all but liveness and readiness)
    keyed: bool = True

    def url(self, params: Mapping[str, str]) -> str:
        """The path with its parameters filled in, each percent-encoded."""
        encoded = {
            name: urllib.parse.quote(value, safe="/:@" if name in _PATH_PARAMETERS else ":@")
            for name, value in params.items()
        }
        return self.path.format(**encoded)
