"""TensorBoard interop without TensorFlow or TensorBoard: write and read event files.

    >>> from tfg import tensorboard
    >>> tensorboard.write_graph_events(graph, "logs/run1")   # then: tensorboard --logdir logs
    >>> tensorboard.read_events(path)                        # CRC-checked Event messages
"""
from tfg.tensorboard.events import (  # noqa: F401
    FILE_VERSION, encode_events, graph_from_events, read_chrome_trace, read_events,
    run_metadata_from_chrome_trace, write_graph_events)
from tfg.tensorboard.records import encode_record, iter_records, read_records  # noqa: F401
