"""API errors that render as Kubernetes ``Status`` objects with the real reasons and codes."""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """One failed API call: HTTP code, Kubernetes reason, message and optional details."""

    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details or {}

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            body["details"] = self.details
        return body

    # -- the vocabulary, with the real server's wording -------------------------------------

    @classmethod
    def bad_request(cls, message: str) -> ApiError:
        return cls(400, "BadRequest", message)

    @classmethod
    def not_found(cls, resource: str, name: str, group: str = "") -> ApiError:
        qualified = f"{resource}.{group}" if group else resource
        details = {"name": name, "kind": resource, **({"group": group} if group else {})}
        return cls(404, "NotFound", f'{qualified} "{name}" not found', details)

    @classmethod
    def no_route(cls) -> ApiError:
        return cls(404, "NotFound", "the server could not find the requested resource", {})

    @classmethod
    def already_exists(cls, resource: str, name: str, group: str = "") -> ApiError:
        qualified = f"{resource}.{group}" if group else resource
        details = {"name": name, "kind": resource, **({"group": group} if group else {})}
        return cls(409, "AlreadyExists", f'{qualified} "{name}" already exists', details)

    @classmethod
    def conflict(cls, resource: str, name: str, group: str = "", why: str = "") -> ApiError:
        qualified = f"{resource}.{group}" if group else resource
        why = (
            why
            or "the object has been modified; please apply your changes to the latest version and try again"
        )
        details = {"name": name, "kind": resource, **({"group": group} if group else {})}
        return cls(409, "Conflict", f'Operation cannot be fulfilled on {qualified} "{name}": {why}', details)

    @classmethod
    def invalid(cls, kind: str, name: str, causes: list[tuple[str, str]], group: str = "") -> ApiError:
        """422: ``causes`` are (field, message) pairs, as in ``Pod "x" is invalid: field: message``."""
        text = ", ".join(f"{field}: {msg}" for field, msg in causes)
        details: dict[str, Any] = {
            "name": name,
            "kind": kind,
            "causes": [
                {"reason": "FieldValueInvalid", "message": msg, "field": field} for field, msg in causes
            ],
        }
        if group:
            details["group"] = group
        label = f"{kind}.{group}" if group else kind
        return cls(422, "Invalid", f'{label} "{name}" is invalid: {text}', details)

    @classmethod
    def unprocessable(cls, message: str) -> ApiError:
        return cls(422, "Invalid", message)

    @classmethod
    def forbidden(cls, message: str) -> ApiError:
        return cls(403, "Forbidden", message)

    @classmethod
    def method_not_allowed(
        cls, message: str = "the server does not allow this method on the requested resource"
    ) -> ApiError:
        return cls(405, "MethodNotAllowed", message)

    @classmethod
    def unsupported_media_type(cls, message: str) -> ApiError:
        return cls(415, "UnsupportedMediaType", message)

    @classmethod
    def gone(cls, message: str) -> ApiError:
        return cls(410, "Expired", message)
