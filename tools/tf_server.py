"""Start one `tf.distribute.Server` task and serve until killed (run with a Python that has
TensorFlow, e.g. TFG_TF_PYTHON). Used by the TensorFlow-cluster tests, check and benchmark.

    $TFG_TF_PYTHON tools/tf_server.py --cluster worker=127.0.0.1:2222,127.0.0.1:2223 --task 0

`--cluster` takes tfg's `job=host:port,...` form (several jobs separated by ';'), or JSON.
Prints "ready" on stdout once the server listens.
"""
import argparse
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def parse_cluster(text):
    if text.lstrip().startswith("{"):
        return json.loads(text)
    jobs = {}
    for part in text.split(";"):
        job, _, addrs = part.partition("=")
        jobs[job.strip()] = [a.strip() for a in addrs.split(",") if a.strip()]
    return jobs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cluster", required=True)
    ap.add_argument("--job", default="worker")
    ap.add_argument("--task", type=int, default=0)
    a = ap.parse_args()
    import tensorflow as tf

    server = tf.distribute.Server(tf.train.ClusterSpec(parse_cluster(a.cluster)),
                                  job_name=a.job, task_index=a.task, protocol="grpc",
                                  start=True)
    print("ready", server.target, flush=True)
    server.join()


if __name__ == "__main__":
    sys.exit(main())
