"""`tfg diff A B`: added, removed and changed nodes; exit 1 when the graphs differ."""
import json
import sys

import click

from tfg.cli.common import read_graph, split_names
from tfg.errors import TfgInputError
from tfg.graphdef.diff import diff, format_text


@click.command("diff")
@click.argument("a", metavar="A")
@click.argument("b", metavar="B")
@click.option("--json", "as_json", is_flag=True, help="Print the differences as JSON.")
@click.option("--ignore-device", is_flag=True, help="Do not compare devices.")
@click.option("--ignore-attr", "ignore_attrs", multiple=True, metavar="NAME",
              help="Do not compare this attr (e.g. _class). Repeatable or comma list.")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing; only the exit status.")
def command(a, b, as_json, ignore_device, ignore_attrs, quiet):
    """Compare graphs A and B node by node: added (+), removed (-) and changed (~) nodes, with
    the op, inputs, attrs and device that changed.

    Exits 0 when the graphs are equal, 1 when they differ, 2 on bad input (like `diff`), so
    CI can gate graph changes. Either graph may be `-` (stdin), not both.

    \b
    Example:
      tfg optimize model.pb -o opt.pb; tfg diff model.pb opt.pb
      tfg diff model.pb opt.pb --json | jq .counts
    """
    if a in (None, "-") and b in (None, "-"):
        raise TfgInputError("only one of A and B can be `-` (stdin)")
    d = diff(read_graph(a), read_graph(b), ignore_device=ignore_device,
             ignore_attrs=split_names(ignore_attrs))
    if not quiet:
        if as_json:
            click.echo(json.dumps(d.to_json(), indent=2))
        else:
            click.echo(format_text(d, a, b))
    if not d.equal:
        sys.stdout.flush()
        # SystemExit, not click's Exit: standalone_mode=False would turn Exit into a return.
        sys.exit(1)
