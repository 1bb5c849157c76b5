"""Where a cluster's auth token comes from: the command line shows in `ps` to every user of the
machine, so it may also come from a file or the environment.

    >>> resolve_token(None, "/run/secrets/tfg-token")    # the file's first line
    's3cret'
    >>> resolve_token(None, None)                        # TFG_AUTH_TOKEN, or None
"""
import os

from tfg.errors import TfgInputError

ENV_VAR = "TFG_AUTH_TOKEN"


def resolve_token(token, token_file):
    """The token from --auth-token (or TFG_AUTH_TOKEN, which click fills in), or the first line
    of --auth-token-file (which wins over the environment); None for none. Both on the
    command line, or an empty one, is an input error."""
    if token is not None and token_file is not None and token != os.environ.get(ENV_VAR):
        raise TfgInputError("give --auth-token (or TFG_AUTH_TOKEN) or --auth-token-file, not "
                            "both")
    if token_file is not None:
        try:
            with open(token_file, "rb") as f:
                data = f.read(4096)
        except OSError as e:
            raise TfgInputError(f"--auth-token-file {token_file}: {e.strerror}") from None
        lines = data.decode("ascii", "replace").splitlines()
        token = lines[0].strip() if lines else ""
        if not token:
            raise TfgInputError(f"--auth-token-file {token_file} is empty")
        return token
    if token is not None and not token:
        raise TfgInputError("--auth-token is empty")
    return token

