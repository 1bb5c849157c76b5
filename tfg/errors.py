"""The errors tfg raises on purpose, and the exit code each maps to on the CLI.

Every error a user can cause (a bad file, an unknown op, a missing fetch, a bad feed) is a
`TfgInputError` (exit 2); a failure while running a well-formed graph is a `TfgRuntimeError`
(exit 1). Messages are one line and name the node, flag or file at fault.
"""


class TfgError(Exception):
    """Base of tfg's own errors; `exit_code` is what the CLI exits with."""

    exit_code = 1


class TfgInputError(TfgError, ValueError):
    """Bad input or usage: malformed graph, unknown op, bad feed or flag (exit 2)."""

    exit_code = 2


class GraphFormatError(TfgInputError):
    """Bytes that are not a GraphDef, or a GraphDef that breaks the format's rules."""


class GraphValidationError(TfgInputError):
    """A well-formed GraphDef whose structure is invalid (dangling input, bad cycle, ...)."""


class UnknownOpError(TfgInputError):
    """An op that tfg has no signature, kernel or gradient for, where one is needed."""


class TfgRuntimeError(TfgError, RuntimeError):
    """A failure while executing a valid graph (a kernel error, an aborted step) (exit 1)."""

    exit_code = 1
