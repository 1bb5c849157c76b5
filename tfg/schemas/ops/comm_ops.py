"""Signatures of the communication ops that partitioning inserts (TensorFlow's sendrecv_ops.cc):
`_Send`/`_Recv` between devices and `_HostSend`/`_HostRecv` through host memory.

    >>> get_op("_Recv").outputs[0].type_attr
    'tensor_type'

The executor implements them itself (they run even when their input is dead), hence their
control_flow kinds "send" and "recv".
"""
from tfg.schemas.ops.registry import op
from tfg.schemas.ops.shape_fns import no_outputs, unknown
op("_Send",
   inputs=["tensor: T"],
   attrs=["T: type", "tensor_name: string", "send_device: string", "send_device_incarnation: int",
          "recv_device: string", "client_terminated: bool = false"],
   stateful=True, control_flow="send", shape_fn=no_outputs)
op("_Recv",
   outputs=["tensor: tensor_type"],
   attrs=["tensor_type: type", "tensor_name: string", "send_device: string",
          "send_device_incarnation: int", "recv_device: string",
          "client_terminated: bool = false"],
   stateful=True, control_flow="recv", shape_fn=unknown)
op("_HostSend",
   inputs=["tensor: T"],
   attrs=["T: type", "tensor_name: string", "send_device: string", "send_device_incarnation: int",
          "recv_device: string", "client_terminated: bool = false"],
   stateful=True, control_flow="send", shape_fn=no_outputs)
op("_HostRecv",
   outputs=["tensor: tensor_type"],
   attrs=["tensor_type: type", "tensor_name: string", "send_device: string",
          "send_device_incarnation: int", "recv_device: string",
          "client_terminated: bool = false"],
   stateful=True, control_flow="recv", shape_fn=unknown)
