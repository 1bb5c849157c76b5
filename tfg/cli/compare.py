"""`tfg compare A B`: run two graphs (or one against an expected.npz) on the same inputs and
compare the outputs; exit 1 on a mismatch."""
import json
import math
import sys

import click

from tfg.cli.common import check_names, read_graph, split_names
from tfg.cli.feeds import add_random_feeds, feed_options, read_feeds, read_npz
from tfg.errors import TfgInputError
from tfg.executor import compare as C
from tfg.graphdef import summary
from tfg.graphdef.names import parse_tensor


def _finite(ctx, param, value):
    """A tolerance must be a number: NaN compares false with everything (every output would
    'differ') and inf accepts anything."""
    if not math.isfinite(value):
        raise click.BadParameter(f"{value} is not a finite number", ctx=ctx, param=param)
    return value


@click.command("compare")
@click.argument("a", metavar="A")
@click.argument("b", metavar="B")
@feed_options
@click.option("--fetch", "fetches", multiple=True, metavar="NAME",
              help="Tensors to compare (default: A's outputs as `tfg info` lists them, or "
                   "every array of B when B is an .npz). Repeatable or comma list.")
@click.option("--init", "inits", multiple=True, metavar="NODE",
              help="Node run once in each graph before the comparison (e.g. init).")
@click.option("--rtol", type=click.FloatRange(min=0), default=C.DEFAULT_RTOL, show_default=True,
              callback=_finite, help="Relative tolerance: |a - b| <= atol + rtol * |b|.")
@click.option("--atol", type=click.FloatRange(min=0), default=C.DEFAULT_ATOL, show_default=True,
              callback=_finite, help="Absolute tolerance.")
@click.option("--bisect", is_flag=True,
              help="Also find the first node (in A's order) whose values differ, comparing "
                   "every tensor whose node name both graphs share.")
@click.option("--devices", default=None, metavar="SPEC",
              help="Devices both graphs run on (default: every local device).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def command(a, b, feed_args, feeds_file, random_seed, dims, fetches, inits, rtol, atol, bisect,
            devices, as_json):
    """Run graphs A and B on the same feeds and compare each fetched output: max absolute and
    relative error, and whether it is within --rtol/--atol. B may be an .npz of expected
    values (as `tfg run -o expected.npz` writes). Exits 0 when every output matches, 1 on a
    mismatch, 2 on bad input.

    \b
    Example:
      tfg optimize model.pb -o opt.pb && tfg compare model.pb opt.pb --random-feeds
      tfg compare model.pb opt.pb --feeds batch.npz --fetch loss --rtol 1e-4 --bisect
      tfg compare model.pb expected.npz --feeds batch.npz
    """
    if a in (None, "-") and b in (None, "-"):
        raise TfgInputError("only one of A and B can be `-` (stdin)")
    ga = read_graph(a)
    expected = read_npz(b, "B") if str(b).endswith(".npz") else None
    gb = read_graph(b) if expected is None else None
    if bisect and gb is None:
        raise TfgInputError("--bisect needs two graphs (B is an .npz of values)")
    fetch_names = split_names(fetches) or (
        sorted(expected) if expected is not None else
        [o["name"] for o in summary.summarize(ga)["outputs"]])
    if not fetch_names:
        raise TfgInputError("nothing to compare: A has no outputs; give --fetch")
    init_names = [t.lstrip("^") for t in split_names(inits)]
    for g in (ga, gb):
        if g is not None:
            check_names(g, fetch_names, "--fetch")
            check_names(g, init_names, "--init")
    feeds = read_feeds(feeds_file, feed_args)
    unknown = [k for k in feeds if not any(g is not None and parse_tensor(k).node in g
                                           for g in (ga, gb))]
    if unknown:  # a feed that neither graph takes is a typo, not something to drop quietly
        check_names(ga, unknown[:1], "--feed/--feeds")
    feeds = add_random_feeds(ga, feeds, fetch_names + init_names, random_seed, dims)
    if gb is not None:  # inputs only B has (a renamed placeholder, say) get values too
        feeds = add_random_feeds(gb, feeds, fetch_names + init_names, random_seed, dims)
    diffs = C.compare_graphs(ga, expected if expected is not None else gb, fetch_names,
                             feeds=feeds, inits=init_names, rtol=rtol, atol=atol,
                             devices=devices)
    first = (C.first_difference(ga, gb, feeds=feeds, inits=init_names, rtol=rtol, atol=atol,
                                devices=devices) if bisect else None)
    ok = all(d.ok for d in diffs)
    if as_json:
        doc = {"a": a, "b": b, "rtol": rtol, "atol": atol, "ok": ok,
               "outputs": [d.to_json() for d in diffs]}
        if bisect:
            doc["first_difference"] = first.to_json() if first is not None else None
        click.echo(json.dumps(doc, indent=2))
    else:
        click.echo(format_report(diffs, rtol, atol, bisect, first))
    if not ok:
        sys.stdout.flush()
        sys.exit(1)  # SystemExit: standalone_mode=False would turn click's Exit into a return


def format_report(diffs, rtol, atol, bisect, first):
    """The text `tfg compare` prints: one line per output, a verdict, the --bisect result."""
    width = max(len(d.name) for d in diffs)
    lines = []
    for d in diffs:
        if d.problem and d.max_abs is None:
            detail = d.problem
        else:
            detail = f"max abs {_num(d.max_abs)}  max rel {_num(d.max_rel)}"
        lines.append(f"{'ok  ' if d.ok else 'FAIL'}  {d.name:{width}s}  {detail}")
    bad = sum(not d.ok for d in diffs)
    lines.append(f"{len(diffs) - bad} of {len(diffs)} outputs match (rtol {rtol:g}, "
                 f"atol {atol:g})")
    if bisect:
        if first is None:
            lines.append("bisect: every tensor the graphs share matches")
        else:
            lines.append(f"bisect: first difference at {first.node}:{first.port} ({first.op}): "
                         f"max abs {_num(first.diff.max_abs)}"
                         + (f" ({first.diff.problem})" if first.diff.problem else "")
                         + f"; {first.checked - 1} tensors before it match")
    return "\n".join(lines)


def _num(x):
    return "-" if x is None else f"{x:.3g}"
