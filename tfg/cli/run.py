"""`tfg run`: feed placeholders, run fetches and targets, print or save the results."""
import io as _io
import json
import sys
import warnings

import click
import numpy as np

from tfg.cli.common import (check_names, graph_argument, progress_option, read_graph,
                            split_names)
from tfg.cli.feeds import add_random_feeds, feed_options, read_feeds
from tfg.cli.progress import Progress, value_text
from tfg.errors import TfgInputError
from tfg.executor.blas import resolve_blas_threads
from tfg.executor.distributed import ClusterConfig
from tfg.executor.distributed.auth import resolve_token
from tfg.executor.executor import NodeError
from tfg.executor.limits import parse_size
from tfg.executor.restore import load_saved_model_state
from tfg.executor.runner import Runner, checkpoint_note
from tfg.executor.session import Session
from tfg.executor.trace import write_chrome_trace
from tfg.graphdef import savedmodel
from tfg.graphdef.canonical import canonicalize
from tfg.graphdef.graph import Graph
from tfg.graphdef.infer import static_conflict
from tfg.graphdef.io import write_bytes_atomic
from tfg.graphdef.names import parse_tensor
from tfg.passes.cost_model import CostModel
from tfg.schemas.dtypes import DType
from tfg.schemas.ops import has_op
from tfg.schemas.ops.signature import output_dtypes


@click.command("run")
@graph_argument
@feed_options
@click.option("--fetch", "fetches", multiple=True, metavar="NAME",
              help="Tensor to compute (`node` means `node:0`). Repeatable or comma list.")
@click.option("--target", "targets", multiple=True, metavar="NODE",
              help="Node to run for its effect. Repeatable or comma list.")
@click.option("--init", "inits", multiple=True, metavar="NODE",
              help="Node to run once before the steps (e.g. init). Repeatable.")
@click.option("--steps", type=click.IntRange(min=1), default=1, show_default=True,
              help="Run fetches and targets together this many times; print the last.")
@click.option("--devices", default=None, metavar="SPEC",
              help="cpu:4, cpu:2,gpu:1 or full device names (default: every local device).")
@click.option("--cluster", default=None, metavar="SPEC", help="Run on a cluster of workers.")
@click.option("--engine", type=click.Choice(["tfg", "tensorflow"]), default=None,
              envvar="TFG_ENGINE",
              help="--cluster: what the workers are: `tfg worker`s (tfg, the default) or "
                   "TensorFlow servers (tensorflow: tf.distribute.Server tasks). Also "
                   "TFG_ENGINE.")
@click.option("-o", "--output", default=None, metavar="OUT.npz",
              help="Save each fetch under the name as given (instead of printing); .json and "
                   ".txt paths get JSON and text.")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "npz"]), default=None,
              help="Output of the fetched values: text (NAME = value lines, the default on "
                   "stdout), json, or npz (the default for -o).")
@click.option("--json", "as_json", is_flag=True, help="Same as --format json.")
@click.option("--tag", default=None, metavar="TAGS",
              help="SavedModel GRAPH: the MetaGraphDef with these tags (default: the only one, "
                   "else `serve`).")
@click.option("--signature", default=None, metavar="NAME",
              help="SavedModel GRAPH: feed and fetch by this signature's input/output keys "
                   "(fetch: all outputs by default).")
@click.option("--trace", "trace_path", default=None, metavar="OUT.json",
              help="Chrome trace of the last step (per-node timings, peak memory).")
@click.option("--profile", "profile_path", default=None, metavar="FILE",
              help="Record per-node compute times and output bytes over all steps into a "
                   "cost-model FILE for `tfg place/partition --cost-model FILE`.")
@click.option("--save", "save_dir", default=None, metavar="DIR",
              help="Save every variable to DIR after the steps.")
@click.option("--restore", "restore_dir", default=None, metavar="DIR",
              help="Restore variables from DIR before the steps.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=None,
              metavar="S", help="--cluster: a dead or unreachable worker ends the step within "
                                "S seconds (default 10).")
@click.option("--auth-token", default=None, envvar="TFG_AUTH_TOKEN", metavar="TOKEN",
              help="--cluster: token every RPC carries (also TFG_AUTH_TOKEN).")
@click.option("--auth-token-file", default=None, metavar="FILE",
              help="--cluster: read the token from FILE's first line (not shown in ps).")
@click.option("--checkpoint-dir", default=None, metavar="DIR",
              help="Save variables and the step count to DIR; a rerun resumes from it.")
@click.option("--checkpoint-every", type=click.IntRange(min=1), default=None, metavar="N",
              help="With --checkpoint-dir: save every N steps (default: after the last).")
@click.option("--max-memory", default=None, metavar="SIZE",
              help="Refuse, before allocating, any tensor larger than SIZE (512M, 4G; "
                   "default: the machine's memory).")
@click.option("--blas-threads", default=None, metavar="N",
              help="Threads the BLAS library may use while a step runs (default: "
                   "$TFG_BLAS_THREADS, else 'adaptive': the cores other processes leave free, "
                   "measured per step; 'auto': half the cores; 0: BLAS as it is).")
@click.option("--tls-ca", default=None, metavar="PEM",
              help="--cluster: verify the workers' TLS certificates with this CA (turns TLS "
                   "on).")
@click.option("--reset", "resets", multiple=True, metavar="NAME",
              help="Clear resource container NAME ('' the default one) before the steps: its "
                   "variables become uninitialized. With --cluster and nothing to run, only "
                   "resets the workers' containers. Repeatable.")
@click.option("--compress-transfers", type=click.Choice(["none", "bf16"]), default=None,
              help="--cluster: send float32 tensors between tasks as truncated 16-bit floats "
                   "(lossy; white paper 5.5). Local devices: tfg partition --compress-"
                   "transfers.")
@click.option("--graph-rewrites/--no-graph-rewrites", default=None,
              help="Rewrite each step's subgraph before running it, as TensorFlow's session "
                   "runs Grappler: constant folding, batch norms folded into convolutions, "
                   "Conv/MatMul+BiasAdd+activation fusions (default: on, unless "
                   "TFG_GRAPH_REWRITES=0). Local runs.")
@click.option("--show-rewrites", is_flag=True,
              help="Say on stderr what the graph rewrites did to each step's subgraph.")
@progress_option
def command(graph, fmt, as_json, tag, signature, feed_args, feeds_file, random_seed, dims,
            fetches, targets, inits, steps, devices, cluster, output, trace_path, profile_path,
            save_dir, restore_dir, timeout, auth_token, checkpoint_dir, checkpoint_every,
            max_memory, blas_threads, tls_ca, progress, auth_token_file, engine, resets,
            compress_transfers, graph_rewrites, show_rewrites):
    """Run GRAPH: feed placeholders, compute fetches, run targets.

    \b
    Examples:
      tfg run model.pb --feed 'x=[[1,2]]' --fetch y
      tfg run train.pb --feeds batch.npz --init init --target train --fetch loss --steps 100
      tfg partition model.pb --devices cpu:2 | tfg run - --devices cpu:2 --fetch y -o out.npz
      tfg run export/1 --signature serving_default --feed 'x=[[1,2,3,4]]' --json
      tfg run model.pb --random-feeds --dim 'x=32' --fetch y --profile cost.json
      tfg run --cluster worker=127.0.0.1:2222 --reset ''
      tfg run model.pb --random-feeds --fetch y --show-rewrites
    """
    # numpy's RuntimeWarnings (NaN casts, overflow) would add lines to stderr: TensorFlow
    # computes the same values without a word, and so does tfg run.
    warnings.simplefilter("ignore", RuntimeWarning)
    fetch_names = split_names(fetches)
    target_names = [t.lstrip("^") for t in split_names(targets)]
    init_names = [t.lstrip("^") for t in split_names(inits)]
    if compress_transfers is not None and cluster is None:
        raise TfgInputError("--compress-transfers applies to --cluster (between local devices: "
                            "tfg partition --compress-transfers bf16)")
    if not fetch_names and not target_names and not init_names and not signature:
        if resets and cluster is not None:
            return _reset_only(cluster, resets, timeout, tls_ca, auth_token, auth_token_file)
        raise TfgInputError("nothing to run: give --fetch, --target or --init")
    if output is not None and not fetch_names and not signature:
        raise TfgInputError("-o needs at least one --fetch")
    if as_json:
        if fmt not in (None, "json"):
            raise TfgInputError(f"--json and --format {fmt} disagree")
        fmt = "json"
    feeds = read_feeds(feeds_file, feed_args)
    g = canonicalize(read_graph(graph, tag))  # what Session runs: names check against it
    shown = list(fetch_names)  # the names values are reported under
    if signature:  # keys of a SavedModel signature -> tensor names
        _check_signature_keys(g, signature, feeds, fetch_names)
        feeds, fetch_names, shown = savedmodel.bind_signature(g, signature, feeds, fetch_names)
    check_names(g, list(feeds), "--feed/--feeds")
    check_names(g, fetch_names, "--fetch")
    check_names(g, target_names, "--target")
    check_names(g, init_names, "--init")
    feeds = add_random_feeds(g, feeds, fetch_names + target_names + init_names, random_seed,
                             dims)
    _refuse_variant_fetches(g, fetch_names)
    if tls_ca is not None and cluster is None:
        raise TfgInputError("--tls-ca needs --cluster")
    if engine is not None and cluster is None and click.get_current_context() \
            .get_parameter_source("engine") == click.core.ParameterSource.COMMANDLINE:
        raise TfgInputError("--engine needs --cluster")  # (TFG_ENGINE alone is ignored)
    if max_memory is not None and cluster is not None:
        raise TfgInputError("--max-memory applies to local runs (each worker refuses tensors "
                            "larger than its machine's memory)")
    if blas_threads is not None:
        if cluster is not None:
            raise TfgInputError("--blas-threads applies to local runs, not to --cluster")
        blas_threads = resolve_blas_threads(blas_threads, "--blas-threads") or 0
    if cluster is not None:  # the cluster options travel with the spec (distributed/)
        cluster = ClusterConfig(cluster, timeout=timeout, tls_ca=tls_ca,
                                auth_token=resolve_token(auth_token, auth_token_file),
                                engine=engine, compress_transfers=compress_transfers)
    if checkpoint_every is not None and not checkpoint_dir:
        raise TfgInputError("--checkpoint-every needs --checkpoint-dir")
    if cluster is not None and (graph_rewrites is not None or show_rewrites):
        raise TfgInputError("--graph-rewrites/--show-rewrites apply to local runs (the workers "
                            "run their partitions as given)")
    sess = Session(g, devices=devices, cluster=cluster,
                   max_memory=None if max_memory is None else parse_size(max_memory),
                   blas_threads=blas_threads, validate_graph=True,
                   graph_rewrites=graph_rewrites)
    # Closed however the command ends: a cluster's workers drop the session's variables and
    # steps, and calls still in flight to a hung worker are cancelled instead of holding exit.
    click.get_current_context().call_on_close(sess.close)
    if resets:
        sess.reset(list(resets))
    if getattr(g, "saved_model", None) is not None:  # as TensorFlow's loader prepares it
        load_saved_model_state(sess, g)
    profile = None
    if profile_path:
        profile = CostModel()
    # "step i/N, steps/s, ETA, loss=0.123" on a terminal once the steps take over a second,
    # from where a resumed checkpoint left off (the Runner reports that first).
    bar = None

    def on_step(done, total):
        nonlocal bar
        if bar is None:
            bar = Progress(total, start=done, enabled=progress if total > 1 else False,
                           leave=True)
            return
        values = runner.last_values
        bar.update(done, value=value_text(shown[0], values[0])
                   if values and bar.enabled else None)

    runner = Runner(sess, fetches=fetch_names, feeds=feeds, targets=target_names,
                    init=init_names, steps=steps, restore=restore_dir, save=save_dir,
                    checkpoint_dir=checkpoint_dir, checkpoint_every=checkpoint_every,
                    trace=bool(trace_path), profile=profile, on_step=on_step,
                    log=lambda message: click.echo(f"tfg: {message}", err=True))
    try:
        values = runner.run()
    except NodeError as e:
        raise _as_input_error(e, sess.graph, feeds) from None
    except KeyboardInterrupt:  # Ctrl-C: stop between or inside steps, one line, exit 130
        _interrupted(runner, bar, shown, output, fmt)
    finally:  # before any error line: the progress line must not garble it
        if bar is not None:
            bar.close()
    if show_rewrites:
        for rewrite in sess.rewrites:
            click.echo(f"tfg: {rewrite.summary()}", err=True)
        if not sess.graph_rewrites:
            click.echo("tfg: graph rewrites are off", err=True)
    if profile is not None:
        profile.save(profile_path)
    if trace_path and sess.last_trace is not None:
        write_chrome_trace(sess.last_trace, trace_path)
    if fetch_names:
        _emit_values(shown, values, output, fmt)


def _as_input_error(error, graph, feeds):
    """A kernel's failure that static shapes alone prove, before any value is computed, is
    bad input (exit 2), not a failure while running (exit 1): the graph's own shapes (a graph
    TensorFlow's importer refuses) or the fed arrays' shapes against the graph's. Inferred only
    once a node has failed, so that steps that succeed never pay for it.

    Before: NodeError("node 'm' (MatMul) failed: Matrix size-incompatible: In[0]: [2, 3] ...")
    After:  TfgInputError("node 'm' (MatMul): MatMul inner dimensions differ: 3 vs 4 (the
            graph's static shapes; TensorFlow refuses such a graph on import)")
    """
    node = getattr(error, "node_name", None)
    if node is None:
        return error
    conflict = static_conflict(graph, node)
    if conflict is not None:
        return TfgInputError(f"{conflict} (the graph's static shapes; TensorFlow refuses such "
                             "a graph on import)")
    shapes = {}
    for name, value in feeds.items():
        try:
            shapes[name] = np.shape(value)
        except ValueError:  # a ragged list (the feed's own check words that)
            pass
    conflict = static_conflict(graph, node, shapes) if shapes else None
    if conflict is None:
        return error
    return TfgInputError(f"{conflict} (with the shapes of the arrays fed: "
                         f"{', '.join(sorted(shapes))})")


def _reset_only(cluster, resets, timeout, tls_ca, auth_token, auth_token_file):
    """`tfg run --cluster SPEC --reset NAME` with nothing to run: clear the containers on
    every worker (no graph is read) and say how many resources went."""
    config = ClusterConfig(cluster, timeout=timeout, tls_ca=tls_ca,
                           auth_token=resolve_token(auth_token, auth_token_file))
    sess = Session(Graph(), cluster=config)
    try:
        removed = sess.reset(list(resets))
    finally:
        sess.close()
    names = ", ".join(repr(n) for n in resets)
    click.echo(f"tfg: reset container(s) {names}: {removed} resource(s) removed", err=True)


def _check_signature_keys(g, name, feeds, fetch_names):
    """A feed or fetch key that is neither a key of signature `name` nor a tensor of the graph
    is an input error listing the signature's keys."""
    sig = savedmodel.signature(g, name)
    for flag, keys, known in (("--feed", feeds, sig["inputs"]),
                              ("--fetch", fetch_names, sig["outputs"])):
        for key in keys:
            base = key[:-2] if key.endswith(":0") else key
            if base in known or parse_tensor(key).node in g:
                continue
            raise TfgInputError(f"{flag} {key}: signature {name!r} has no "
                                f"{'input' if flag == '--feed' else 'output'} {key!r} (its "
                                f"{'inputs' if flag == '--feed' else 'outputs'}: "
                                f"{', '.join(known) or 'none'})")


def _refuse_variant_fetches(g, fetch_names):
    """A variant (e.g. a TensorList handle) has no array to print or save: refused before
    running, naming the fetch (unknown nodes are left to the session's own error)."""
    for name in fetch_names:
        ref = parse_tensor(name)
        node_name, port = ref.node, ref.port
        node = g.get(node_name)
        if node is None or not has_op(node.op):
            continue
        try:
            dtypes = output_dtypes(node)
        except Exception:  # noqa: BLE001 - a malformed node is reported when it runs
            continue
        if port < len(dtypes) and dtypes[port] == DType.VARIANT:
            raise TfgInputError(f"--fetch {name}: output {port} of {node.op} node "
                                f"{node_name!r} is a variant (a TensorList handle), which has "
                                f"no value to print or save; fetch a tensor made from it "
                                f"(e.g. by TensorListStack)")


def _interrupted(runner, bar, shown, output, fmt):
    """After a Ctrl-C: save the variables (--save) and print the last completed step's values,
    as a training loop stopped by hand would, then say where the steps stopped."""
    if bar is not None:
        bar.close()
    done, values = runner.done, runner.last_values
    where = f"; {checkpoint_note(runner.checkpoint_dir, done)}" if runner.checkpoint_dir else ""
    if runner.save_dir and done:
        runner.session.save(runner.save_dir)
        where += f"; variables saved to {runner.save_dir}"
    if values is not None and shown:
        _emit_values(shown, values, output, fmt)
        where += f"; the fetched values are those of step {done}"
    click.echo(f"tfg: interrupted after {done} of {runner.steps} steps{where}", err=True)
    sys.exit(130)


def _write_npz(path, values):
    arrays = {}
    for name, v in values.items():
        arr = np.asarray(v)
        if arr.dtype == object:  # strings: store as bytes, never as pickled objects
            try:
                arr = arr.astype(bytes)
            except (TypeError, ValueError):
                raise TfgInputError(f"fetch {name!r} holds values that cannot be saved to "
                                    ".npz") from None
        arrays[name] = arr
    buf = _io.BytesIO()
    np.savez(buf, **arrays)
    if hasattr(path, "write"):  # a binary stream (stdout for --format npz)
        path.write(buf.getvalue())
        return
    write_bytes_atomic(path, buf.getvalue())


def _emit_values(names, values, output, fmt):
    """Print or save the fetched values: text, json or npz, to stdout or `output`."""
    if fmt is None:
        fmt = "text" if output is None else (
            "json" if output.endswith(".json") else "text" if output.endswith(".txt") else "npz")
    if fmt == "npz":
        if output is None:
            if sys.stdout.isatty():
                raise TfgInputError("refusing to write .npz to a terminal; use -o OUT.npz or "
                                    "--format json")
            _write_npz(sys.stdout.buffer, dict(zip(names, values)))
            sys.stdout.flush()
        else:
            _write_npz(output, dict(zip(names, values)))
        return
    if fmt == "json":
        doc = {name: _json_value(name, v) for name, v in zip(names, values)}
        text = json.dumps(doc, indent=1) + "\n"
    else:
        buf = _io.StringIO()
        with np.printoptions(precision=8, threshold=2000, linewidth=100):
            for name, v in zip(names, values):
                buf.write(f"{name} = {v!r}\n")
        text = buf.getvalue()
    if output is None:
        click.echo(text, nl=False)
    else:
        write_bytes_atomic(output, text.encode("utf-8"))


def _json_value(name, value):
    """{dtype, shape, value} with JSON-safe leaves: non-finite floats as "nan"/"inf"/"-inf",
    bytes as text, complex as [re, im]."""
    arr = np.asarray(value)

    def leaf(x):
        if isinstance(x, (bytes, np.bytes_)):
            return bytes(x).decode("utf-8", "backslashreplace")
        if isinstance(x, (complex, np.complexfloating)):
            return [leaf(float(x.real)), leaf(float(x.imag))]
        if isinstance(x, (float, np.floating)):
            x = float(x)
            return x if np.isfinite(x) else ("nan" if np.isnan(x) else
                                             "inf" if x > 0 else "-inf")
        if isinstance(x, (np.integer, np.bool_)):
            return x.item()
        return x

    def walk(a):
        if not isinstance(a, np.ndarray):  # an element of an object array (bytes, str)
            return leaf(a)
        if a.ndim == 0:
            return leaf(a.item() if a.dtype != object else a[()])
        return [walk(a[i]) for i in range(a.shape[0])]

    dtype = "string" if arr.dtype == object or arr.dtype.kind in "SU" else str(arr.dtype)
    return {"dtype": dtype, "shape": list(arr.shape), "value": walk(arr)}
