"""The one exception type users see: its message is shown as is, in the CLI and in the app."""


class SpecDecError(Exception):
    """A problem with the user's input or environment, explained in one line."""
