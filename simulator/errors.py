"""The API's error answer, raised anywhere in the model and sent by `SimApi`."""

from __future__ import annotations

from typing import Any

__all__ = ["ApiError"]


class ApiError(Exception):
    """An error answer: status, and a JSON ``{success, error, msg}`` body unless `text`."""

    def __init__(self, status: int, error: str, msg: str, *, text: bool = False) -> None:
        super().__init__(msg)
        self.status = status
        self.error = error
        self.msg = msg
        self.text = text

    def body(self) -> dict[str, Any]:
        """The JSON body the service sends with this error."""
        return {"success": False, "error": self.error, "msg": self.msg}
