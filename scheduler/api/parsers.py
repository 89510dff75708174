"""The API's one parser: JSON whose nesting is bounded (``cluster_ops.common.bounded_json``), so a body nested
thousands of levels deep is a 400 naming the problem, not a ``RecursionError``."""

from __future__ import annotations

import codecs
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from cluster_ops.common import bounded_json


class BoundedJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Mapping[str, Any] | None = None) -> Any:
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            text = codecs.getreader(encoding)(stream).read()
            return bounded_json.loads(text)
        except bounded_json.TooDeep as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
        except ValueError as exc:  # not JSON, or not text in the request's encoding
            raise ParseError(f"JSON parse error - {exc}") from None
