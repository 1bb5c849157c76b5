"""Running graphs: devices, the dataflow executor, rendezvous, and `Session`.

    >>> from tfg.executor import Session
    >>> Session(graph, devices="cpu:2").run("y", feeds={"x": 1.0})
"""
from tfg.executor.devices import Device, DeviceSet  # noqa: F401
from tfg.executor.session import Session  # noqa: F401
