"""Errors a user can act on. The CLI prints them as one line and exits with their code."""


class UserError(Exception):
    """Bad input or a missing precondition: one line, no traceback, exit code 2 by default."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code

    def __str__(self) -> str:
        # Keep the promise of one line even when a library error text spans several.
        return " ".join(super().__str__().split())
