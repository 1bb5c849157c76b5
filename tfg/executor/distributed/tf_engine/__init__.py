"""TensorFlow's own distributed runtime as an engine: tfg drives `tf.distribute.Server`
processes over `tensorflow.WorkerService` (tfg/schemas/proto/tf_worker.proto).

    >>> sess = TFClusterSession(graph, "worker=127.0.0.1:2222,127.0.0.1:2223")
    >>> sess.run("y", feeds={"x": 1.0})

Modules: client (the gRPC stub with tfg's errors), graphs (what each server registers:
client-terminated feeds and fetches, incarnations), step (RunGraph on every task, watched),
master (sessions, registration, steps, cleanup), variables (collect, save and restore through
graphs run on the servers).
"""
