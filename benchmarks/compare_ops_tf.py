#!/usr/bin/env python3
"""Per op, tfg against TensorFlow's own per-op times on the same frozen keras.applications graph.

    python3 benchmarks/compare_ops_tf.py DIR nasnetmobile,densenet121 \
        --tf-python /work/tfvenv/bin/python [--reps 10] [--tf-threads 1,2] [--top 12]

DIR is a folder `bench_keras.py --keep` wrote (<model>.pb, .json, _x.npy). TensorFlow (a
subprocess) runs the graph in a tf.compat.v1 Session with RunOptions(trace_level=FULL_TRACE)
and reads RunMetadata.step_stats: per node its op (the timeline label: Grappler's graph, so
`_FusedConv2D`, folded batch norms), its inputs' and output's shapes and `op_end_rel_micros` (from the
node's start to its op's end). `--tf-threads 1` (intra = inter = 1) gives per-op times
comparable with tfg's one-BLAS-thread calls; `2` is bench_keras's setting (ops then overlap,
so their sum exceeds the step). tfg runs the fast program's prepared calls as
benchmarks/profile_calls.py does, each timed in place (one BLAS thread); a chain (chains.py)
counts under its last member's op. Both sides: the median (or `--stat min`, on a loaded
machine) over the reps per node.

Printed per model: the step (TF's traced wall, the sum of TF's op times, tfg's sum of calls);
per op family (conv, depthwise, pool, concat, elementwise, ...) calls and ms on each side and
tfg - TF; then the `--top` largest gaps per (family, output shape, filter shape). Families,
not op names, because the two graphs are rewritten differently (TF folds batch norms into its
convolutions, tfg fuses hard swish, ...). `--json FILE` writes every row.
"""
import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.getcwd())

TF_WORKER = r'''
import json, os, statistics, sys
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np, tensorflow as tf
d, model, threads, reps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
stat = getattr(statistics, sys.argv[5]) if sys.argv[5] == "median" else min
meta = json.load(open(os.path.join(d, model + ".json")))
gd = tf.compat.v1.GraphDef()
with open(os.path.join(d, model + ".pb"), "rb") as f:
    gd.ParseFromString(f.read())
x = np.load(os.path.join(d, model + "_x.npy"))
g = tf.Graph()
with g.as_default():
    tf.compat.v1.import_graph_def(gd, name="")
sess = tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(
    intra_op_parallelism_threads=threads, inter_op_parallelism_threads=threads))
out = g.get_tensor_by_name(meta["output"])
feed = {g.get_tensor_by_name(meta["input"]): x}
for _ in range(5):
    sess.run(out, feed)
ro = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
per_node, info, walls = {}, {}, []
for _ in range(reps):
    md = tf.compat.v1.RunMetadata()
    sess.run(out, feed, options=ro, run_metadata=md)
    shapes, first, last = {}, None, 0
    for dev in md.step_stats.dev_stats:
        for ns in dev.node_stats:
            for o in ns.output:
                shapes[(ns.node_name, o.slot)] = [int(s.size) for s in o.tensor_description.shape.dim]
    for dev in md.step_stats.dev_stats:
        for ns in dev.node_stats:
            label = ns.timeline_label
            if " = " not in label:
                continue
            op, _, args = label.split(" = ", 1)[1].partition("(")
            if op in ("_SOURCE", "NoOp", "Const", "_Arg", "_Retval", "_SINK"):
                continue
            ins = []
            for a in args.rstrip(")").split(", "):
                if not a or a.startswith("^"):
                    continue
                name, _, port = a.partition(":")
                ins.append(shapes.get((name, int(port or 0))))
            per_node.setdefault(ns.node_name, []).append(ns.op_end_rel_micros)
            info[ns.node_name] = (op, ins, shapes.get((ns.node_name, 0)))
            first = ns.all_start_micros if first is None else min(first, ns.all_start_micros)
            last = max(last, ns.all_start_micros + ns.all_end_rel_micros)
    walls.append(last - first)
rows = [{"name": n, "op": info[n][0], "ins": info[n][1], "out": info[n][2],
         "us": stat(t)} for n, t in per_node.items()]
print(json.dumps({"wall_us": statistics.median(walls), "rows": rows}))
'''

# op name -> family; what is not here is its own family.
FAMILIES = {
    "Conv2D": "conv", "_FusedConv2D": "conv",
    "DepthwiseConv2dNative": "depthwise", "_FusedDepthwiseConv2dNative": "depthwise",
    "MatMul": "matmul", "_FusedMatMul": "matmul",
    "MaxPool": "maxpool", "AvgPool": "avgpool",
    "ConcatV2": "concat", "Concat": "concat",
    "Mean": "mean", "Sum": "mean",
    "FusedBatchNorm": "batchnorm", "FusedBatchNormV3": "batchnorm",
    "_FusedBatchNormEx": "batchnorm",
    "Pad": "pad", "PadV2": "pad", "MirrorPad": "pad",
    "Softmax": "softmax", "Reshape": "shape", "Squeeze": "shape", "StridedSlice": "shape",
    "Shape": "shape", "ExpandDims": "shape", "Identity": "shape",
}
ELEMENTWISE = {"Mul", "AddV2", "Add", "Sub", "RealDiv", "Relu", "Relu6", "Sigmoid", "Rsqrt",
               "Maximum", "Minimum", "Tanh", "Swish", "_MklSwish", "_TfgHardSwish",
               "_TfgHardSigmoid", "BiasAdd", "Neg", "Square", "Sqrt", "AddN", "Elu", "Selu",
               "HardSwish", "LeakyRelu"}
WEIGHTED = {"conv", "depthwise", "matmul"}  # keyed by the filter's shape too


def family(op):
    if op in ELEMENTWISE:
        return "elementwise"
    return FAMILIES.get(op, op)


def shape_key(op, ins, out):
    """(family, output shape[, filter shape]): the output, not the input, as a Pad folded into
    a convolution (tfg) or not (TF) changes the input's shape, not the output's."""
    fam = family(op)
    s = [tuple(out) if out is not None else None]
    if fam in WEIGHTED and len(ins) > 1:
        s.append(tuple(ins[1]) if ins[1] is not None else None)
    return fam, tuple(s)


def tf_rows(a, model, threads):
    cmd = [a.tf_python, "-c", TF_WORKER, a.folder, model, str(threads), str(a.reps), a.stat]
    res = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if res.returncode:
        sys.exit(f"compare_ops_tf: TensorFlow failed on {model}: {res.stderr.strip()[-500:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def tfg_rows(a, model):
    import tfg
    from tfg.executor import Session, blas
    meta = json.load(open(os.path.join(a.folder, model + ".json")))
    x = np.load(os.path.join(a.folder, model + "_x.npy"))
    sess = Session(tfg.load(os.path.join(a.folder, model + ".pb")), blas_threads=1)
    for _ in range(4):  # signatures learned, memory verdicts verified
        sess.run(meta["output"], {meta["input"]: x})
    sched = next(iter(sess._cache.values())).schedules[0]
    prog = sched.fast
    calls = sched.guards.calls([x]) if sched.guards else prog.calls
    slots_of = {id(e[1]): e[2] for e in prog.entries}
    outs_of = {id(e[1]): o for e, o in zip(prog.entries, prog.out_slots)}
    times = collections.defaultdict(list)
    info, steps = {}, []
    with blas.blas_limit(1):
        for r in range(a.reps + 1):
            vals = (sched._template or sched._constants()).copy()
            for slot, _ in prog.feed_slots:
                vals[slot] = x
            t0 = time.perf_counter()
            for i, (call, ctx) in enumerate(calls):
                if not r:
                    ins = [getattr(vals[s], "shape", None) if s is not None else None
                           for s in slots_of.get(id(ctx), ())]
                    info[i] = (ctx.op, ctx.name, [list(s) if s is not None else None
                                                  for s in ins])
                c = time.perf_counter()
                call(vals, None)
                if r:
                    times[i].append(time.perf_counter() - c)
                else:
                    o = outs_of.get(id(ctx))
                    o = getattr(vals[o[0]], "shape", None) if o else None
                    info[i] += (list(o) if o is not None else None,)
            if r:
                steps.append(time.perf_counter() - t0)
    stat = statistics.median if a.stat == "median" else min
    rows = [{"name": info[i][1], "op": info[i][0], "ins": info[i][2], "out": info[i][3],
             "us": stat(t) * 1e6} for i, t in times.items()]
    return {"wall_us": statistics.median(steps) * 1e6, "rows": rows}


def aggregate(rows, key):
    agg = collections.defaultdict(lambda: [0, 0.0])
    for r in rows:
        k = key(r)
        agg[k][0] += 1
        agg[k][1] += r["us"]
    return agg


def report(model, tfg_res, tf_res, top):
    print(f"\n== {model}: tfg {len(tfg_res['rows'])} calls, sum {_ms(tfg_res, 'rows')} ms "
          f"(step {tfg_res['wall_us'] / 1e3:.2f} ms)")
    for th, res in tf_res.items():
        print(f"   TF threads={th}: {len(res['rows'])} ops, sum {_ms(res, 'rows')} ms "
              f"(traced step {res['wall_us'] / 1e3:.2f} ms)")
    ths = list(tf_res)
    fam = lambda r: family(r["op"])  # noqa: E731
    g = aggregate(tfg_res["rows"], fam)
    t = {th: aggregate(res["rows"], fam) for th, res in tf_res.items()}
    keys = sorted(set(g) | {k for v in t.values() for k in v},
                  key=lambda k: -(g.get(k, [0, 0])[1] - t[ths[0]].get(k, [0, 0])[1]))
    print(f"{'family':14} {'tfg n':>6} {'tfg ms':>7} " + " ".join(
        f"{'TF' + th + ' n':>7} {'TF' + th + ' ms':>8}" for th in ths) + f" {'gap ms':>7}")
    for k in keys:
        gn, gt = g.get(k, [0, 0.0])
        line = f"{k:14} {gn:6d} {gt / 1e3:7.2f} "
        line += " ".join(f"{t[th].get(k, [0, 0])[0]:7d} {t[th].get(k, [0, 0.0])[1] / 1e3:8.2f}"
                         for th in ths)
        print(line + f" {(gt - t[ths[0]].get(k, [0, 0.0])[1]) / 1e3:7.2f}")
    sk = lambda r: shape_key(r["op"], r["ins"], r["out"])  # noqa: E731
    g2, t2 = aggregate(tfg_res["rows"], sk), aggregate(tf_res[ths[0]]["rows"], sk)
    gaps = sorted(set(g2) | set(t2),
                  key=lambda k: -(g2.get(k, [0, 0])[1] - t2.get(k, [0, 0])[1]))
    print(f"top gaps by (family, output shape[, filter]) against TF threads={ths[0]} "
          "(n, us per call, ms per step):")
    for k in gaps[:top]:
        gn, gt = g2.get(k, [0, 0.0])
        tn, tt = t2.get(k, [0, 0.0])
        shp = " ".join("x".join(map(str, s)) if s else "?" for s in k[1])
        print(f"  {k[0]:11} {shp:32} tfg {gn:3d} x {gt / max(gn, 1):7.1f} = {gt / 1e3:6.2f}"
              f"   TF {tn:3d} x {tt / max(tn, 1):7.1f} = {tt / 1e3:6.2f}"
              f"   gap {(gt - tt) / 1e3:+6.2f}")


def _ms(res, k):
    return f"{sum(r['us'] for r in res[k]) / 1e3:.2f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder")
    ap.add_argument("models", help="comma-separated, as bench_keras.py names them")
    ap.add_argument("--tf-python", default="/work/tfvenv/bin/python")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--tf-threads", default="1,2", help="TF settings, the first compared")
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--stat", choices=("median", "min"), default="median",
                    help="per node over the reps (min: on a loaded machine)")
    ap.add_argument("--json", help="write every row here")
    a = ap.parse_args()
    dump = {}
    for model in a.models.split(","):
        if not os.path.exists(os.path.join(a.folder, model + ".pb")):
            print(f"compare_ops_tf: no {model}.pb in {a.folder}", file=sys.stderr)
            return 2
        tf_res = {th: tf_rows(a, model, int(th)) for th in a.tf_threads.split(",")}
        tfg_res = tfg_rows(a, model)
        report(model, tfg_res, tf_res, a.top)
        dump[model] = {"tfg": tfg_res, "tf": tf_res}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dump, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
