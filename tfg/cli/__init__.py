"""The `tfg` command: a click group whose subcommands live one per module in this package.

Subcommands are imported only when invoked, so `tfg --help` and `tfg convert` stay fast.
"""
import importlib
import os
import sys

import click

from tfg import __version__
from tfg.cli.progress import colour_wanted
from tfg.errors import TfgError

# subcommand -> (module, one-line help). Add a row here when adding a subcommand module.
SUBCOMMANDS = {
    "run": ("tfg.cli.run", "Run a graph: feed placeholders, fetch tensors."),
    "grad": ("tfg.cli.grad", "Add gradient nodes of sum(ys) w.r.t. xs."),
    "prune": ("tfg.cli.prune", "Keep only what the fetches need."),
    "optimize": ("tfg.cli.optimize", "Run graph optimization passes."),
    "place": ("tfg.cli.place", "Assign a device to every node."),
    "partition": ("tfg.cli.partition", "Split a graph per device with Send/Recv."),
    "worker": ("tfg.cli.worker", "Serve one task of a cluster."),
    "render": ("tfg.cli.render", "Draw a graph with Graphviz."),
    "info": ("tfg.cli.info", "Summarize a graph: ops, inputs, outputs, loops."),
    "convert": ("tfg.cli.convert", "Convert between binary and text GraphDef."),
    "diff": ("tfg.cli.diff", "Compare two graphs: added, removed and changed nodes."),
    "export": ("tfg.cli.export", "Export a graph, e.g. as a TensorBoard events file."),
    "compare": ("tfg.cli.compare", "Run two graphs on the same inputs; compare the outputs."),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx):
        return list(SUBCOMMANDS)

    def get_command(self, ctx, name):
        if name not in SUBCOMMANDS:
            return None
        module = importlib.import_module(SUBCOMMANDS[name][0])
        return module.command

    def format_commands(self, ctx, formatter):
        rows = [(name, SUBCOMMANDS[name][1]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tfg")
@click.option("--debug", is_flag=True, help="Show tracebacks on errors.")
@click.pass_context
def cli(ctx, debug):
    """tfg: a toolchain for TensorFlow GraphDefs, without TensorFlow.

    \b
    Example:
      tfg grad --ys loss --xs w1,w2 model.pb | tfg optimize | tfg run - --fetch grad/w1
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug or bool(os.environ.get("TFG_DEBUG"))


def main(argv=None):
    """Entry point: runs the click app, mapping tfg errors to one line and an exit code."""
    # OpenBLAS reads its workers' idle spin when numpy loads: before that, tfg's default
    # (tfg/executor/blas_spin.py explains it; tests/test_blas_spin.py checks the two agree).
    os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "16")
    argv, debug = _hoist_debug(list(sys.argv[1:] if argv is None else argv))
    debug = debug or bool(os.environ.get("TFG_DEBUG"))
    try:
        cli.main(args=argv, prog_name="tfg", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("tfg: aborted", err=True)
        sys.exit(130)
    except click.UsageError as e:  # one line like every other error (click prints four)
        hint = f" (see '{e.ctx.command_path} --help')" if e.ctx is not None else ""
        click.echo(f"{_error_prefix()} {_one_line(e.format_message())}{hint}", err=True)
        sys.exit(2)
    except click.ClickException as e:
        e.show()
        sys.exit(2)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except TfgError as e:
        if debug:
            _print_traceback()
        click.echo(f"{_error_prefix()} {_one_line(e)}", err=True)
        sys.exit(e.exit_code)
    except BrokenPipeError:
        sys.exit(1)
    except KeyboardInterrupt:
        click.echo("tfg: interrupted", err=True)
        sys.exit(130)
    except MemoryError:
        click.echo("tfg: error: out of memory", err=True)
        sys.exit(1)
    except Exception as e:  # a bug in tfg: still one line unless --debug
        if debug:
            _print_traceback()
        click.echo(f"tfg: internal error: {type(e).__name__}: {_one_line(e)} "
                   "(run with --debug for the traceback)", err=True)
        sys.exit(1)
    sys.exit(0)


def _hoist_debug(args):
    """`--debug` anywhere before `--` (`tfg run m.pb --debug`) moves to the group, where click
    accepts it: (args, whether it was given)."""
    end = args.index("--") if "--" in args else len(args)
    if "--debug" not in args[:end]:
        return args, False
    rest = [a for a in args[:end] if a != "--debug"]
    return ["--debug"] + rest + args[end:], True


def _error_prefix():
    """`tfg: error:`, in red on a terminal unless NO_COLOR is set."""
    return "\033[31mtfg: error:\033[0m" if colour_wanted(sys.stderr) else "tfg: error:"


def _one_line(e):
    return " ".join(str(e).split())


def _print_traceback():
    import traceback  # lazy: ~10 ms of `tfg --help`'s startup, needed only with --debug

    traceback.print_exc()
