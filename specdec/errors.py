"""The one exception type users see: its message is shown as is, in the CLI and in the app."""


class SpecDecError(Exception):
    """A problem with the user's input or environment, explained in one line."""


def first_line(error: BaseException) -> str:
    """An unexpected error's first line (or its type's name): enough to say what failed, in one line."""
    return (str(error).strip().splitlines() or [type(error).__name__])[0]
