#!/usr/bin/env python3
"""Make the screenshots in docs/img/ (needs Graphviz's `dot`; no TensorFlow).

    python3 tools/make_doc_images.py            # writes docs/img/{cnn,nested_while,partition3}.png

- cnn.png: examples/cnn (conv / pool / dense / softmax), its layer scopes as clusters.
- nested_while.png: examples/nested_while, a while loop inside a while loop (frame clusters,
  red back edges).
- partition3.png: the nested loops with the inputs on CPU:0, the loops on CPU:1 and the
  results on CPU:2, partitioned: one cluster per device, green _Send -> _Recv edges.

Each drawing goes through `tfg render` exactly as a user would run it.
"""
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "docs", "img")
sys.path.insert(0, ROOT)


def tfg(*args, cwd=ROOT):
    subprocess.run([sys.executable, "-m", "tfg", *map(str, args)], check=True, cwd=cwd,
                   env=dict(os.environ, PYTHONPATH=ROOT))


def build(example, path):
    subprocess.run([sys.executable, os.path.join(ROOT, "examples", example, "build.py"), "-o",
                    path], check=True, env=dict(os.environ, PYTHONPATH=ROOT))


def three_devices(src, dst):
    """Pin the loops to CPU:1, their inputs to CPU:0 and the results to CPU:2, then partition."""
    from tfg.graphdef import io
    from tfg.passes.partition import partition

    g = io.load(src)
    for node in g:
        if node.op == "Placeholder":
            cpu = 0
        elif node.name in ("total", "pairs"):
            cpu = 2
        else:
            cpu = 1
        node.device = f"/job:localhost/replica:0/task:0/device:CPU:{cpu}"
    io.save(partition(g, devices="cpu:3"), dst)


def main():
    os.makedirs(OUT, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        cnn = os.path.join(tmp, "cnn.pb")
        loops = os.path.join(tmp, "nested_while.pb")
        parts = os.path.join(tmp, "partition3.pb")
        build("cnn", cnn)
        build("nested_while", loops)
        three_devices(loops, parts)
        # relative names, so each drawing's title is the file name
        tfg("render", "cnn.pb", "-o", os.path.join(OUT, "cnn.png"), cwd=tmp)
        tfg("render", "nested_while.pb", "-o", os.path.join(OUT, "nested_while.png"), cwd=tmp)
        tfg("render", "partition3.pb", "-o", os.path.join(OUT, "partition3.png"),
            "--max-nodes", "400", cwd=tmp)
    for name in ("cnn", "nested_while", "partition3"):
        print(os.path.join("docs", "img", name + ".png"))


if __name__ == "__main__":
    main()
