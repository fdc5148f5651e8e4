"""The one exception the library raises for a mistake the user can fix.

Its own module so the library (run/, tasks/, data/, ...) can raise it without importing the launch
scripts' helpers (b2tjax/cli/): `b2tjax.cli.script.run_main` turns it into one `error: ...` line and
exit status 2.
"""


class UserError(Exception):
    """A mistake the user can fix; its message is the whole report (name the file or key at fault)."""
