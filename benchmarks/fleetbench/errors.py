"""Errors a user can act on. The CLI prints them as one line and exits with their code."""


class UserError(Exception):
    """Bad input or a missing precondition: one line, no traceback, exit code 2 by default."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code

    def __str__(self) -> str:
        # Keep the promise of one line even when a library error text spans several.
        return " ".join(super().__str__().split())


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the program is, so that every `finally` and `with` on the way out runs as for
    Ctrl-C: temporary folders and worktrees removed, half-written files taken back, child processes
    stopped. The CLI answers it as an interrupt (exit 130)."""
