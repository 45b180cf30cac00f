"""The one error type users see for bad input: a single line, exit status 2."""


class InputError(ValueError):
    """Bad input or parameters; the message is one line that names the problem."""
